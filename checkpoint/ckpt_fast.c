/*
 * checkpoint/ckpt_fast.c: steps that live on the fast tiers alone
 * (checkpoint.h; docs/DESIGN.md, "Fast-tier steps"). A host's record of
 * its part is an empty object whose name carries everything a committer
 * needs, so that the committer's one LIST of the step is all it reads;
 * FAST, create-only like COMMIT, names every part with its checksum and
 * holders. Which step a new generation restores is chosen here too, as
 * only here is a fast step's liveness known: every part must have a
 * holder whose local tier is marked live in the bucket (one LIST of
 * peers/ tells every mark).
 */
#include "checkpoint/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define FAST_LEAF_MAX (CKPT_NAME_MAX + 64 + 2 * 96)
#define PEERS_PREFIX "peers/"
#define TIER_TAG ".tier-"
#define TIER_ID_FILE "tier-id"

void ckpt_peer_addr_name(char *out, size_t cap, const char *host)
{
	snprintf(out, cap, PEERS_PREFIX "%s.json", host);
}

static void tier_mark_name(char *out, size_t cap, const char *host,
			   int64_t id)
{
	snprintf(out, cap, PEERS_PREFIX "%s" TIER_TAG "%" PRId64, host, id);
}

int ckpt_tier_id(const char *local_dir, int64_t *id, struct err *e)
{
	char path[PATH_MAX], text[32];
	uint64_t r;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/" TIER_ID_FILE, local_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
		text[n > 0 ? n : 0] = '\0';
		*id = strtoll(text, NULL, 10);
		if (*id > 0)
			return 0;
		log_warn("local tier: %s holds no id; making a new one", path);
	}
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return err_errno(e, CLOUD_EIO, errno, "local tier: no random "
				 "id");
	*id = (int64_t)(r >> 2) + 1;
	snprintf(text, sizeof(text), "%" PRId64 "\n", *id);
	if (fs_mkdir_p(local_dir, 0700, e))
		return e->code;
	return fs_write_atomic(path, text, strlen(text), 0600, true, e);
}

/* The host's marks of tiers other than keep, gone. */
struct old_marks {
	struct store *s;
	const char *prefix; /* "peers/HOST.tier-" */
	int64_t keep;
	int rc;
	struct err *e;
};

static int old_mark_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	struct old_marks *m = ud;
	const char *id = o->name + strlen(m->prefix);

	if (is_prefix || strncmp(o->name, m->prefix, strlen(m->prefix)) ||
	    strtoll(id, NULL, 10) == m->keep)
		return 0;
	m->rc = store_delete(m->s, o->name, o->generation, m->e);
	if (m->rc == CLOUD_ENOTFOUND || m->rc == CLOUD_EPRECONDITION) {
		err_init(m->e);
		m->rc = 0;
	}
	return m->rc;
}

int ckpt_tier_mark(struct store *s, const char *host, int64_t id, bool live,
		   struct err *e)
{
	char name[CKPT_NAME_MAX], prefix[CKPT_NAME_MAX];
	struct old_marks m = { s, prefix, id, 0, e };
	int r;

	err_init(e);
	tier_mark_name(name, sizeof(name), host, id);
	if (!live) {
		r = store_delete(s, name, STORE_ANY_GENERATION, e);
		if (r == CLOUD_ENOTFOUND) {
			err_init(e);
			r = 0;
		}
		return r;
	}
	snprintf(prefix, sizeof(prefix), PEERS_PREFIX "%s" TIER_TAG, host);
	r = store_list(s, prefix, "/", old_mark_cb, &m, e);
	if (!r)
		r = m.rc;
	return r ? r : ckpt_put_marker(s, name, e);
}

int ckpt_fast_record(struct store *s, uint64_t step, const char *part,
		     const struct ckpt_save_result *r,
		     const struct ckpt_holder *holders, size_t n,
		     struct err *e)
{
	char leaf[FAST_LEAF_MAX], obj[FAST_LEAF_MAX + 64];
	size_t at;

	err_init(e);
	if (!s || !part || !r || !holders || !n || n > CKPT_HOLDERS_MAX)
		return err_set(e, CKPT_EINVAL, "ckpt_fast_record needs a "
			       "store, a part, its save and 1 to %d holders",
			       CKPT_HOLDERS_MAX);
	at = (size_t)snprintf(leaf, sizeof(leaf),
			      "%s" CKPT_PART_SUFFIX CKPT_FAST_TAG
			      "%08x~%llu~%llu", part, r->crc32c,
			      (unsigned long long)r->bytes,
			      (unsigned long long)r->stats.bytes_unpacked);
	for (size_t i = 0; i < n && at < sizeof(leaf); i++) {
		if (strchr(holders[i].host, '~') || !holders[i].host[0] ||
		    holders[i].tier <= 0)
			return err_set(e, CKPT_EINVAL, "holder \"%s\" (tier "
				       "%lld) cannot be recorded",
				       holders[i].host,
				       (long long)holders[i].tier);
		at += (size_t)snprintf(leaf + at, sizeof(leaf) - at,
				       "~%s~%lld", holders[i].host,
				       (long long)holders[i].tier);
	}
	if (at >= sizeof(leaf))
		return err_set(e, CKPT_EINVAL, "part name %s is too long for "
			       "a fast-tier record", part);
	ckpt_object_name(obj, sizeof(obj), step, leaf);
	return ckpt_put_marker(s, obj, e);
}

static bool take_u64(char **p, int base, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!**p || **p == '-' || **p == '+')
		return false;
	errno = 0;
	v = strtoull(*p, &end, base);
	if (errno || end == *p || (*end && *end != '~') || v > INT64_MAX)
		return false;
	*out = v;
	*p = *end ? end + 1 : end;
	return true;
}

bool ckpt_fast_parse_leaf(const char *leaf, int64_t generation,
			  struct ckpt_part *p)
{
	const char *tag = strstr(leaf, CKPT_PART_SUFFIX CKPT_FAST_TAG);
	char buf[FAST_LEAF_MAX], *at;
	uint64_t crc, size, unpacked, tier;

	memset(p, 0, sizeof(*p));
	if (!tag || strlen(leaf) >= sizeof(buf) ||
	    leaf[strlen(leaf) - 1] == '~')
		return false;
	snprintf(buf, sizeof(buf), "%s",
		 tag + strlen(CKPT_PART_SUFFIX CKPT_FAST_TAG));
	at = buf;
	if (!take_u64(&at, 16, &crc) || crc > UINT32_MAX ||
	    !take_u64(&at, 10, &size) || !take_u64(&at, 10, &unpacked))
		return false;
	while (*at && p->nholders < CKPT_HOLDERS_MAX) {
		char *sep = strchr(at, '~');
		struct ckpt_holder *h = &p->holders[p->nholders];

		if (!sep || sep == at ||
		    (size_t)(sep - at) >= sizeof(h->host))
			return false;
		snprintf(h->host, sizeof(h->host), "%.*s", (int)(sep - at), at);
		at = sep + 1;
		if (!take_u64(&at, 10, &tier) || !tier)
			return false;
		h->tier = (int64_t)tier;
		p->nholders++;
	}
	if (*at || !p->nholders)
		return false;
	p->name = strndup(leaf, (size_t)(tag - leaf) + strlen(CKPT_PART_SUFFIX));
	if (!p->name)
		return false;
	p->size = size;
	p->crc32c = (uint32_t)crc;
	p->unpacked = unpacked;
	p->generation = generation > 0 ? generation : 1;
	return true;
}

/* The tiers marked live, host by host, from one LIST. */
struct peers_seen {
	struct ckpt_holder *v;
	size_t n, cap;
	struct err *e;
};

static int peers_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	struct peers_seen *p = ud;
	const char *leaf = o->name + strlen(PEERS_PREFIX);
	const char *tag = strstr(leaf, TIER_TAG);
	size_t len = tag ? (size_t)(tag - leaf) : 0;
	char *end;
	long long id;

	if (is_prefix || strncmp(o->name, PEERS_PREFIX, strlen(PEERS_PREFIX)) ||
	    !len || len >= sizeof(p->v[0].host))
		return 0;
	errno = 0;
	id = strtoll(tag + strlen(TIER_TAG), &end, 10);
	if (errno || *end || id <= 0)
		return 0;
	if (p->n == p->cap) {
		size_t nc = p->cap ? 2 * p->cap : 64;
		struct ckpt_holder *v = realloc(p->v, nc * sizeof(*v));

		if (!v)
			return err_set(p->e, CKPT_ENOMEM, "out of memory");
		p->v = v;
		p->cap = nc;
	}
	snprintf(p->v[p->n].host, sizeof(p->v[0].host), "%.*s", (int)len,
		 leaf);
	p->v[p->n++].tier = id;
	return 0;
}

static bool holder_live(const struct peers_seen *p, const struct ckpt_holder *h)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].tier == h->tier && !strcmp(p->v[i].host, h->host))
			return true;
	return false;
}

/* Whether every part of fast step st has a live holder; *why names the
 * first that has none. */
static bool all_held(const struct ckpt_step *st, const struct peers_seen *p,
		     const char **why)
{
	for (size_t i = 0; i < st->nparts; i++) {
		bool held = false;

		for (size_t k = 0; !held && k < st->parts[i].nholders; k++)
			held = holder_live(p, &st->parts[i].holders[k]);
		if (!held) {
			*why = st->parts[i].name;
			return false;
		}
	}
	return st->nparts > 0;
}

int ckpt_choose_step(struct store *s, uint64_t below, uint64_t *step,
		     bool *fast, struct err *e)
{
	struct peers_seen peers = { .e = e };
	bool listed = false;
	struct ckpt_list l;
	uint64_t stored = 0;
	int r;

	err_init(e);
	*step = 0;
	if (fast)
		*fast = false;
	r = ckpt_list(s, &l, e);
	if (r)
		return r;
	for (size_t i = l.n; i-- > 0;) {
		const struct ckpt_step *st = &l.v[i];

		if (below && st->step >= below)
			continue;
		if (st->committed && !st->corrupt) {
			stored = st->step;
			break;
		}
	}
	*step = stored;
	for (size_t i = l.n; i-- > 0;) {
		const struct ckpt_step *st = &l.v[i];
		const char *why = NULL;

		if (st->step <= stored)
			break;
		if (!st->fast || (below && st->step >= below))
			continue;
		if (!listed) {
			listed = true;
			if (store_list(s, PEERS_PREFIX, "/", peers_cb, &peers,
				       e)) {
				log_warn("fast-tier steps are passed over: %s",
					 e->msg);
				err_init(e);
				break;
			}
		}
		if (all_held(st, &peers, &why)) {
			*step = st->step;
			if (fast)
				*fast = true;
			break;
		}
		log_info("fast-tier step %llu is not restorable: no live host "
			 "holds %s", (unsigned long long)st->step, why);
	}
	free(peers.v);
	ckpt_list_release(&l);
	return 0;
}
