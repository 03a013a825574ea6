/*
 * tpu_hosts.c: the workers of a queued resource as a host list.
 *
 * The TPU API is the authority on which workers exist and on their SSH
 * host keys (which each worker's guest agent publishes as guest
 * attributes), and it is reached over TLS with our credentials. So the
 * keys it gives replace whatever slicectl's known_hosts held for those
 * addresses (an address may have served another VM before), and the
 * connection then refuses any other key: first contact is verified, not
 * trusted blindly.
 */
#include "launcher/hosts.h"
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slices {
	struct tpu_qr qr;
	struct tpu_node *nodes;          /* one per slice */
	struct tpu_hostkeys **keys;      /* per slice, per worker */
	size_t *nkeys;                   /* workers the API answered for */
	size_t workers;                  /* in all */
};

static void slices_release(struct slices *s)
{
	for (size_t i = 0; s->nodes && i < s->qr.nnodes; i++) {
		tpu_node_release(&s->nodes[i]);
		if (s->keys[i])
			tpu_hostkeys_release(s->keys[i], s->nkeys[i]);
	}
	free(s->nodes);
	free(s->keys);
	free(s->nkeys);
	tpu_qr_release(&s->qr);
}

static int fetch(struct tpu_client *c, const char *name, struct slices *s,
		 struct err *e)
{
	size_t n;
	int rc = tpu_qr_get(c, name, &s->qr, e);

	if (rc)
		return rc;
	if (strcmp(s->qr.state, "ACTIVE"))
		return err_set(e, COMMON_EUSAGE,
			       "queued resource %s is %s, not ACTIVE: `slicectl "
			       "wait %s` waits for it",
			       name, *s->qr.state ? s->qr.state : "new", name);
	n = s->qr.nnodes;
	s->nodes = calloc(n + 1, sizeof(*s->nodes));
	s->keys = calloc(n + 1, sizeof(*s->keys));
	s->nkeys = calloc(n + 1, sizeof(*s->nkeys));
	if (!s->nodes || !s->keys || !s->nkeys)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		rc = tpu_node_get(c, s->qr.node_ids[i], &s->nodes[i], e);
		if (!rc)
			rc = tpu_node_hostkeys(c, s->qr.node_ids[i], &s->keys[i],
					       &s->nkeys[i], e);
		if (rc)
			break;
		if (strcmp(s->nodes[i].state, "READY"))
			log_warn("node %s is %s, not READY: its workers may "
				 "not answer", s->nodes[i].id,
				 s->nodes[i].state);
		if (!s->nodes[i].nendpoints)
			rc = err_set(e, COMMON_EIO,
				     "node %s has no network endpoints yet",
				     s->nodes[i].id);
		s->workers += s->nodes[i].nendpoints;
	}
	return rc;
}

static const char *address(const struct host_options *ho,
			   const struct tpu_node *n, size_t w, struct err *e)
{
	const struct tpu_endpoint *ep = &n->endpoints[w];

	if (!ho->external_ip)
		return ep->ip;
	if (!*ep->external_ip) {
		err_set(e, COMMON_EUSAGE,
			"worker %zu of %s has no external IP (create the "
			"queued resource with --external-ips, or leave out "
			"--external-ip)", w, n->id);
		return NULL;
	}
	return ep->external_ip;
}

/* The SLICE_* variables, then --env (later exports win). */
static int worker_env(struct host_list *t, const struct host_options *ho,
		      size_t i, const size_t ids[4], size_t nproc)
{
	static const char *const names[] = {
		"SLICE_ID", "SLICE_NUM_SLICES", "SLICE_WORKER_ID",
		"SLICE_WORKERS_PER_SLICE",
	};
	size_t k = 0;
	char **env = calloc(6 + ho->env.n, sizeof(*env));
	char kv[96];
	const char *s;

	if (!env)
		return COMMON_ENOMEM;
	t->envs[i] = env;
	for (size_t j = 0; j < 6; j++) {
		if (j < 4)
			snprintf(kv, sizeof(kv), "%s=%zu", names[j], ids[j]);
		else if (j == 4)
			snprintf(kv, sizeof(kv), "SLICE_PROCESS_ID=%zu", i);
		else
			snprintf(kv, sizeof(kv), "SLICE_NUM_PROCESSES=%zu",
				 nproc);
		if (host_list_keep(t, kv, &s))
			return COMMON_ENOMEM;
		env[k++] = (char *)s;
	}
	for (size_t j = 0; j < ho->env.n; j++)
		env[k++] = ho->env.v[j];
	t->v[i].env = env;
	t->v[i].nenv = k;
	return 0;
}

static int fill(struct host_list *t, const struct host_options *ho,
		const struct slices *s, struct err *e)
{
	char me[USER_NAME_MAX];
	const char *user = ho->user;
	size_t i = 0;

	if (!user || !*user) {
		default_remote_user(me, sizeof(me));
		user = me;
	}
	t->v = calloc(s->workers, sizeof(*t->v));
	t->envs = calloc(s->workers, sizeof(*t->envs));
	if (!t->v || !t->envs)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	t->n = s->workers;
	for (size_t sl = 0; sl < s->qr.nnodes; sl++) {
		const struct tpu_node *n = &s->nodes[sl];

		for (size_t w = 0; w < n->nendpoints; w++, i++) {
			struct fanout_target *ft = &t->v[i];
			const size_t ids[4] = { sl, s->qr.nnodes, w,
						n->nendpoints };
			const char *addr = address(ho, n, w, e);
			char label[64];

			if (!addr)
				return COMMON_EUSAGE;
			snprintf(label, sizeof(label), "s%zu-w%zu", sl, w);
			ft->port = ho->port ? ho->port : 22;
			if (host_list_keep(t, user, &ft->user) ||
			    host_list_keep(t, addr, &ft->host) ||
			    host_list_keep(t, label, &ft->label) ||
			    worker_env(t, ho, i, ids, s->workers))
				return err_set(e, COMMON_ENOMEM,
					       "out of memory");
		}
	}
	return 0;
}

/* Writes every published key into known_hosts; a worker that published
 * none is refused unless the user chose to trust on first use. */
static int record_keys(struct host_list *t, const struct host_options *ho,
		       const struct slices *s, struct err *e)
{
	struct fanout_known_host *kh = calloc(t->n + 1, sizeof(*kh));
	struct buf path, missing;
	size_t nkh = 0, nmissing = 0, i = 0;
	int rc = 0;

	buf_init(&path);
	buf_init(&missing);
	if (!kh)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	for (size_t sl = 0; sl < s->qr.nnodes; sl++)
		for (size_t w = 0; w < s->nodes[sl].nendpoints; w++, i++) {
			const struct tpu_hostkeys *hk =
				w < s->nkeys[sl] ? &s->keys[sl][w] : NULL;

			if (!hk || !hk->keys.n) {
				if (nmissing++ < 8 &&
				    buf_appendf(&missing, "%s%s (%s)",
						nmissing > 1 ? ", " : "",
						t->v[i].label, t->v[i].host))
					rc = COMMON_ENOMEM;
				continue;
			}
			kh[nkh].host = t->v[i].host;
			kh[nkh].port = t->v[i].port;
			kh[nkh].keys = hk->keys.v;
			kh[nkh].nkeys = hk->keys.n;
			nkh++;
		}
	if (rc)
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	else if (nmissing && ho->policy != FANOUT_HOSTKEY_ACCEPT_NEW)
		rc = err_set(e, COMMON_EIO,
			     "%zu worker%s of %s published no SSH host keys "
			     "in guest attributes yet: %s%s; they may still be "
			     "booting: try again in a minute, or pass "
			     "--strict-host-key-checking accept-new to trust "
			     "them on first use",
			     nmissing, nmissing == 1 ? "" : "s", s->qr.id,
			     missing.data, nmissing > 8 ? ", ..." : "");
	if (!rc && ho->known_hosts)
		rc = buf_appends(&path, ho->known_hosts)
			     ? err_set(e, COMMON_ENOMEM, "out of memory")
			     : 0;
	else if (!rc)
		rc = slicectl_home_path(&path, "known_hosts", e);
	if (!rc && nkh)
		rc = fanout_known_hosts_update(path.data, kh, nkh, e);
	if (!rc && host_list_keep(t, path.data, &t->known_hosts))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	if (!rc)
		log_debug("%zu workers' host keys written to %s", nkh,
			  path.data);
	free(kh);
	buf_release(&path);
	buf_release(&missing);
	return rc;
}

/* Without --identity: slicectl's own key when it has one (the one
 * `slicectl create` put into ssh-keys); else the usual agent and files. */
static int default_identity(struct host_list *t, const struct host_options *ho,
			    struct err *e)
{
	struct buf path;
	int rc;

	if (ho->identity)
		return 0;
	buf_init(&path);
	rc = slicectl_home_path(&path, "id_ed25519", e);
	if (!rc && access(path.data, R_OK) == 0 &&
	    host_list_keep(t, path.data, &t->identity))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	buf_release(&path);
	return rc;
}

int tpu_hosts_build(struct host_list *t, const struct host_options *ho,
		    struct err *e)
{
	struct tpu_options to = { .project = ho->project, .zone = ho->zone };
	struct tpu_client *c = NULL;
	struct slices s = { 0 };
	int rc;

	if (tpu_options_open(&to, &c))
		return err_set(e, COMMON_EUSAGE, "cannot reach the TPU API");
	rc = fetch(c, ho->tpu, &s, e);
	if (!rc)
		rc = fill(t, ho, &s, e);
	if (!rc)
		rc = record_keys(t, ho, &s, e);
	if (!rc)
		rc = default_identity(t, ho, e);
	slices_release(&s);
	tpu_close(c);
	return rc;
}
