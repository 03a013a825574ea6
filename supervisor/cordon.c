/*
 * cordon.c: a pod whose preflight failed, or whose host was quarantined,
 * marks its node unschedulable before it exits 4, so that the pod JobSet
 * makes in its place lands on another node (docs/DESIGN.md, "Preflights"
 * and "Bad hosts"). Asked for by the render (SLICE_PREFLIGHT_CORDON=1,
 * SLICE_CORDON_BAD_HOSTS=1, the node in SLICE_POD_NODE); done with the
 * pod's own service account, which the user lets get and patch nodes.
 * Best effort within a few seconds: whatever fails is logged and noted,
 * and the pod exits 4 all the same.
 */
#include "supervisor/sup.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* A token or a CA bundle is a few KiB; more is not one. */
#define MAX_FILE (256 * 1024)
#define ATTEMPT_MS 3000
#define TOTAL_MS 6000

/* dir/name's text into b; false (why says what) when it cannot be read
 * or is empty. */
static bool read_text(const char *dir, const char *name, struct buf *b,
		      char *why, size_t len)
{
	char path[1024], chunk[4096];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f) {
		snprintf(why, len, "no %.120s", path);
		return false;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 &&
	       b->len + n <= MAX_FILE)
		if (buf_append(b, chunk, n)) {
			n = 0;
			break;
		}
	fclose(f);
	while (b->len && (b->data[b->len - 1] == '\n' ||
			  b->data[b->len - 1] == '\r'))
		b->len--;
	if (!b->len || buf_append(b, "", 1)) {
		snprintf(why, len, "%.120s is empty or unreadable", path);
		return false;
	}
	return true;
}

/* The PATCH itself; 0, or -1 with why filled. */
static int patch_node(const char *node, const char *token, const char *ca,
		      char *why, size_t len)
{
	static const char body[] = "{\"spec\":{\"unschedulable\":true}}";
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	char url[512], auth[4096];
	const char *headers[] = {
		auth, "Content-Type: application/merge-patch+json",
		"Accept: application/json", NULL
	};
	struct http_tls tls = { .ca_pem = ca };
	struct http_request req = {
		.method = "PATCH", .url = url, .tls = &tls, .headers = headers,
		.body = body, .body_len = sizeof(body) - 1,
		.timeout_ms = ATTEMPT_MS
	};
	struct http_policy policy;
	struct http_client c;
	struct http_response resp;
	struct err e;
	int rc;

	if (!host || !*host || !port || !*port) {
		snprintf(why, len, "KUBERNETES_SERVICE_HOST or _PORT is not "
			 "set");
		return -1;
	}
	/* An IPv6 service address goes in brackets. */
	snprintf(url, sizeof(url), strchr(host, ':') ?
		 "https://[%s]:%s/api/v1/nodes/%s" :
		 "https://%s:%s/api/v1/nodes/%s", host, port, node);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	http_policy_default(&policy);
	policy.max_attempts = 2;
	policy.max_total_ms = TOTAL_MS;
	policy.connect_timeout_ms = ATTEMPT_MS;
	policy.backoff_base_ms = 200;
	err_init(&e);
	http_response_init(&resp);
	rc = http_client_init(&c, &policy, &e);
	if (!rc) {
		rc = http_do(&c, &req, &resp, &e);
		http_client_release(&c);
	}
	if (rc && resp.status == 403)
		snprintf(why, len, "forbidden (403): grant the pod's service "
			 "account get and patch on nodes (README, GKE)");
	else if (rc)
		snprintf(why, len, "%.150s", e.msg);
	http_response_release(&resp);
	memset(auth, 0, sizeof(auth));
	return rc ? -1 : 0;
}

bool sup_cordon(struct sup *s, const char *ask_var)
{
	const char *node = getenv("SLICE_POD_NODE");
	const char *dir = getenv("SLICE_KUBE_SA_DIR");
	const char *ask = getenv(ask_var);
	char why[160] = "", details[256], name[80];
	struct buf token, ca;
	bool done = false;
	json_t *o;
	char *text;

	if (!s->o->managed || s->o->slurm || s->o->vertex || !ask ||
	    strcmp(ask, "1"))
		return false;
	if (!dir || !*dir)
		dir = SA_DIR;
	buf_init(&token);
	buf_init(&ca);
	if (!node || !*node)
		snprintf(why, sizeof(why), "SLICE_POD_NODE is not set");
	else if (read_text(dir, "token", &token, why, sizeof(why)) &&
		 read_text(dir, "ca.crt", &ca, why, sizeof(why)))
		done = !patch_node(node, token.data, ca.data, why, sizeof(why));
	if (token.data)
		memset(token.data, 0, token.cap);
	buf_release(&token);
	buf_release(&ca);
	if (done)
		log_info("cordoned node %s: no new pod lands there", node);
	else
		log_error("did not cordon node %s: %s", node ? node : "?", why);
	/* A node's name is short; cut, it still fits the 256 bytes. */
	snprintf(name, sizeof(name), "%s", node ? node : "");
	o = json_pack("{s:s, s:s}", "node", name, "why", why);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	snprintf(details, sizeof(details), "%s", text ? text : "");
	free(text);
	sup_note(s, "cordon", -1, done ? "cordoned" : "not cordoned",
		 details[0] ? details : NULL);
	return true;
}

bool sup_quarantined(struct sup *s)
{
	bool out = s->o->managed &&
		   (s->o->slurm || sup_cordon(s, "SLICE_CORDON_BAD_HOSTS"));

	if (out)
		log_error("this host (%s) is quarantined: leaving, so that "
			  "the %s runs the group elsewhere", s->id.host,
			  s->o->slurm ? "requeued job" : "JobSet");
	else
		log_error("this host (%s) is quarantined: marked; its target "
			  "cannot move the group from here", s->id.host);
	s->quarantined = out;
	return out;
}
