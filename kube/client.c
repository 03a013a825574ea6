/*
 * client.c: requests to the Kubernetes API through cloud/'s HTTP
 * transport over one reused libcurl handle (connections are kept alive
 * between calls), TLS as the config says (the cluster CA pinned from
 * memory, never mixed with the system's), bearer tokens renewed through
 * the exec plugin, and the retry budget the transport applies: 429 with
 * its Retry-After, 5xx, dropped connections and stalls are retried with
 * backoff and full jitter within a bounded number of attempts and time.
 */
#include "kube/client.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX (64u << 20)
/* A token this close to its expiry is renewed first. */
#define EXPIRY_MARGIN_S 10

static int nomem(struct err *e)
{
	return err_set(e, KUBE_ENOMEM, "out of memory");
}

/* The transport's defaults (SLICECTL_HTTP_RETRY_BASE_MS and
 * SLICECTL_HTTP_STALL_SECONDS applied), with a budget of its own: an
 * operator waits on these, so two minutes at most, and a Retry-After is
 * cut to a minute. */
static void policy_default(struct http_policy *p)
{
	unsigned base = http_retry_base_ms();

	http_policy_default(p);
	p->max_attempts = 8;
	p->max_total_ms = 2 * 60 * 1000;
	p->backoff_base_ms = base ? base : 250;
	p->backoff_max_ms = p->backoff_base_ms * 64 < 16000
				    ? p->backoff_base_ms * 64 : 16000;
	p->retry_after_max_ms = 60 * 1000;
	p->connect_timeout_ms = 15 * 1000;
}

int kube_client_new(const struct kube_config *c, struct kube_client **out,
		    struct err *e)
{
	struct http_policy policy;
	struct kube_client *k;
	struct err he;
	int rc;

	*out = NULL;
	if (!c->server || !*c->server)
		return err_set(e, KUBE_EINVAL, "no API server to talk to");
	k = calloc(1, sizeof(*k));
	if (!k)
		return nomem(e);
	rc = kube_config_copy(&k->cfg, c, e);
	if (rc) {
		free(k);
		return rc;
	}
	policy_default(&policy);
	err_init(&he);
	if (http_client_init(&k->http, &policy, &he)) {
		kube_config_release(&k->cfg);
		free(k);
		return err_set(e, KUBE_ENOMEM, "%s", he.msg);
	}
	*out = k;
	return 0;
}

void kube_client_free(struct kube_client *k)
{
	if (!k)
		return;
	http_client_release(&k->http);
	kube_config_release(&k->cfg);
	free(k);
}

static bool expiring(const struct kube_config *c)
{
	return c->token_expiry &&
	       time(NULL) + EXPIRY_MARGIN_S >= c->token_expiry;
}

/* An exec plugin's credential, fetched when missing or expiring. */
static int credential(struct kube_client *k, struct err *e)
{
	struct kube_config *c = &k->cfg;

	if (!c->exec_argv.n)
		return 0;
	if ((c->token || c->cert_pem) && !expiring(c))
		return 0;
	return kube_exec_credential(c, e);
}

/* The kube sink behind the transport's: its stop is remembered, so that
 * the transport's CLOUD_EABORTED is not taken for a failure. */
struct sink {
	const struct kube_call *c;
	bool stopped;
};

static int on_data(void *ud, const void *data, size_t len, struct err *e)
{
	struct sink *s = ud;

	(void)e;
	if (s->c->sink(s->c->sink_ud, data, len)) {
		s->stopped = true;
		return CLOUD_EABORTED;
	}
	return 0;
}

int kube_send(struct kube_client *k, const struct kube_call *c,
	      unsigned max_attempts, struct http_response *resp,
	      struct err *e)
{
	const struct kube_config *cfg = &k->cfg;
	struct http_tls tls = { cfg->ca_pem, cfg->cert_pem, cfg->key_pem,
				cfg->insecure };
	struct sink s = { c, false };
	struct http_request req = {
		.method = c->method, .body = c->body,
		.body_len = c->body ? strlen(c->body) : 0, .tls = &tls,
		/* A create names its object: a second one is refused with
		 * 409 AlreadyExists (and the error says an earlier attempt
		 * may have made it), which makes it safe to repeat. */
		.precondition = true,
		.max_attempts = max_attempts, .timeout_ms = c->timeout_ms,
		.sink = c->sink ? on_data : NULL, .sink_ud = &s,
		.max_body = BODY_MAX,
	};
	const char *headers[4] = { "Accept: application/json", NULL };
	struct buf url, auth;
	struct err he;
	size_t n = 1;
	int rc;

	rc = credential(k, e);
	if (rc)
		return rc;
	buf_init(&url);
	buf_init(&auth);
	if (buf_appendf(&url, "%s%s", cfg->server, c->path) ||
	    (cfg->token && *cfg->token &&
	     buf_appendf(&auth, "Authorization: Bearer %s", cfg->token))) {
		buf_release(&url);
		buf_release(&auth);
		return nomem(e);
	}
	if (c->body)
		headers[n++] = "Content-Type: application/json";
	if (auth.data)
		headers[n++] = auth.data;
	req.url = url.data;
	req.headers = headers;
	err_init(&he);
	rc = http_do(&k->http, &req, resp, &he);
	if (auth.data)
		memset(auth.data, 0, auth.len);
	buf_release(&auth);
	buf_release(&url);
	if (s.stopped || !rc)
		return 0;
	if (rc == CLOUD_ECORRUPT)
		return err_set(e, KUBE_ECORRUPT, "%s %.*s: the answer is "
			       "larger than %u bytes", c->method,
			       (int)strcspn(c->path, "?"), c->path, BODY_MAX);
	if (rc == CLOUD_ENOMEM)
		return nomem(e);
	/* An error status or no answer: the caller reads resp. */
	return 0;
}

/* A 401 with an exec plugin, the first time: the plugin's token may have
 * been revoked early, so it is dropped for a fresh one. */
static bool reauth(struct kube_client *k, bool *reauthed, long status)
{
	struct kube_config *c = &k->cfg;

	if (status != 401 || !c->exec_argv.n || *reauthed)
		return false;
	*reauthed = true;
	free(c->token);
	c->token = NULL;
	free(c->cert_pem);
	c->cert_pem = NULL;
	return true;
}

bool kube_retry_again(struct kube_client *k, struct http_retry *r,
		      bool *reauthed, const struct http_response *resp)
{
	if (reauth(k, reauthed, resp->status))
		return true;
	return http_retry_again(r, resp->status ? CLOUD_EHTTP
						: CLOUD_ENETWORK, resp);
}

/* ---- requests ---- */

/* Sends c until it succeeds or the budget is spent (a 401 with an exec
 * plugin once more with a fresh credential). *out (may be NULL) gets the
 * JSON answer, NULL when the body is empty. */
static int call(struct kube_client *k, const struct kube_call *c,
		long *status, json_t **out, struct err *e)
{
	struct http_response a;
	bool reauthed = false;
	int rc;

	if (out)
		*out = NULL;
	http_response_init(&a);
	for (;;) {
		rc = kube_send(k, c, 0, &a, e);
		if (rc || (a.status >= 200 && a.status < 400))
			break;
		if (!reauth(k, &reauthed, a.status)) {
			rc = kube_failure(k, c, &a, a.attempts > 1, e);
			break;
		}
	}
	if (status)
		*status = a.status;
	if (!rc && out && a.body.len) {
		json_error_t je;

		*out = json_loadb(a.body.data, a.body.len, 0, &je);
		if (!*out)
			rc = err_set(e, KUBE_ECORRUPT, "%s %.*s: the answer "
				     "is not JSON (%s)", c->method,
				     (int)strcspn(c->path, "?"), c->path,
				     je.text);
	}
	http_response_release(&a);
	return rc;
}

int kube_request(struct kube_client *k, const char *method, const char *path,
		 json_t *body, long *status, json_t **out, struct err *e)
{
	struct kube_call c = { .method = method, .path = path };
	char *text = NULL;
	int rc;

	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			return nomem(e);
		c.body = text;
	}
	rc = call(k, &c, status, out, e);
	free(text);
	return rc;
}

/* path + "?name=value" or "&name=value", value escaped. */
static int query(struct buf *b, const char *name, const char *value)
{
	char *esc;
	int rc;

	esc = curl_easy_escape(NULL, value, 0);
	if (!esc)
		return KUBE_ENOMEM;
	rc = buf_appendf(b, "%s%s=%s", strchr(b->data, '?') ? "&" : "?",
			 name, esc) ? KUBE_ENOMEM : 0;
	curl_free(esc);
	return rc;
}

int kube_create(struct kube_client *k, const char *collection, json_t *obj,
		bool dry_run, json_t **out, struct err *e)
{
	struct buf path;
	int rc;

	if (out)
		*out = NULL;
	buf_init(&path);
	if (buf_appends(&path, collection) ||
	    query(&path, "fieldManager", "slicectl") ||
	    query(&path, "fieldValidation", "Strict") ||
	    (dry_run && query(&path, "dryRun", "All"))) {
		buf_release(&path);
		return nomem(e);
	}
	rc = kube_request(k, "POST", path.data, obj, NULL, out, e);
	buf_release(&path);
	return rc;
}

int kube_get(struct kube_client *k, const char *path, json_t **out,
	     struct err *e)
{
	int rc = kube_request(k, "GET", path, NULL, NULL, out, e);

	if (!rc && !*out)
		rc = err_set(e, KUBE_ECORRUPT, "GET %s: an empty answer",
			     path);
	return rc;
}

int kube_list(struct kube_client *k, const char *collection,
	      const char *label_selector, json_t **out, struct err *e)
{
	struct buf path;
	int rc;

	*out = NULL;
	buf_init(&path);
	if (buf_appends(&path, collection) ||
	    (label_selector && *label_selector &&
	     query(&path, "labelSelector", label_selector))) {
		buf_release(&path);
		return nomem(e);
	}
	rc = kube_get(k, path.data, out, e);
	if (!rc && !json_is_array(json_object_get(*out, "items"))) {
		json_decref(*out);
		*out = NULL;
		rc = err_set(e, KUBE_ECORRUPT, "GET %s: the answer is not a "
			     "list (no \"items\")", collection);
	}
	buf_release(&path);
	return rc;
}

int kube_delete(struct kube_client *k, const char *path,
		const char *propagation, struct err *e)
{
	struct buf p;
	int rc;

	buf_init(&p);
	if (buf_appends(&p, path) ||
	    (propagation && query(&p, "propagationPolicy", propagation))) {
		buf_release(&p);
		return nomem(e);
	}
	rc = kube_request(k, "DELETE", p.data, NULL, NULL, NULL, e);
	buf_release(&p);
	return rc;
}
