/*
 * client.c: requests to the Kubernetes API over one reused libcurl handle
 * (connections are kept alive between calls), TLS as the config says (the
 * cluster CA pinned from memory, never mixed with the system's), bearer
 * tokens renewed through the exec plugin, and the retry budget: 429 with
 * its Retry-After, 5xx, dropped connections and stalls are retried with
 * backoff and full jitter within a bounded number of attempts and time.
 */
#include "kube/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)
/* Enough of an error answer for its Status; the rest is dropped. */
#define ERROR_BODY_MAX (64u << 10)
/* A token this close to its expiry is renewed first. */
#define EXPIRY_MARGIN_S 10

static int nomem(struct err *e)
{
	return err_set(e, KUBE_ENOMEM, "out of memory");
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n == 0 || n > max)
		return def;
	return (unsigned)n;
}

/* The defaults; SLICECTL_HTTP_RETRY_BASE_MS and SLICECTL_HTTP_STALL_SECONDS
 * (shared with cloud/, for tests and slow links) shorten or lengthen them. */
static void policy_default(struct kube_policy *p)
{
	p->max_attempts = 8;
	p->max_total_ms = 2 * 60 * 1000;
	p->backoff_base_ms = http_retry_base_ms();
	if (!p->backoff_base_ms)
		p->backoff_base_ms = 250;
	p->backoff_max_ms = p->backoff_base_ms * 64 < 16000
				    ? p->backoff_base_ms * 64 : 16000;
	p->retry_after_max_ms = 60 * 1000;
	p->connect_timeout_ms = 15 * 1000;
	p->stall_ms = env_uint("SLICECTL_HTTP_STALL_SECONDS", 60, 3600) *
		      1000;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int kube_client_new(const struct kube_config *c, struct kube_client **out,
		    struct err *e)
{
	struct kube_client *k;
	int rc;

	*out = NULL;
	if (!c->server || !*c->server)
		return err_set(e, KUBE_EINVAL, "no API server to talk to");
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return err_set(e, KUBE_ENOMEM, "cannot initialize libcurl");
	k = calloc(1, sizeof(*k));
	if (!k)
		return nomem(e);
	rc = kube_config_copy(&k->cfg, c, e);
	if (rc) {
		free(k);
		return rc;
	}
	k->curl = curl_easy_init();
	if (!k->curl) {
		kube_config_release(&k->cfg);
		free(k);
		return err_set(e, KUBE_ENOMEM, "cannot create a libcurl "
			       "handle");
	}
	policy_default(&k->policy);
	k->seed = mono_us() ^ ((uint64_t)getpid() << 32);
	*out = k;
	return 0;
}

void kube_client_free(struct kube_client *k)
{
	if (!k)
		return;
	curl_easy_cleanup(k->curl);
	kube_config_release(&k->cfg);
	free(k);
}

void kube_answer_init(struct kube_answer *a)
{
	memset(a, 0, sizeof(*a));
	buf_init(&a->body);
}

void kube_answer_release(struct kube_answer *a)
{
	buf_release(&a->body);
}

/* ---- one attempt ---- */

struct transfer {
	struct kube_client *k;
	const struct kube_call *c;
	struct kube_answer *a;
	size_t body_off;
	bool too_big;
};

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t len = size * n;

	/* A new status line (after 100 Continue, say) starts afresh. */
	if (len >= 5 && memcmp(data, "HTTP/", 5) == 0)
		t->a->retry_after_ms = 0;
	if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0) {
		char v[64];
		size_t vl = len - 12;

		if (vl >= sizeof(v))
			vl = sizeof(v) - 1;
		memcpy(v, data + 12, vl);
		v[vl] = '\0';
		t->a->retry_after_ms = http_retry_after_ms(v, time(NULL));
	}
	return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t len = size * n;
	long status = 0;

	curl_easy_getinfo(t->k->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300 && t->c->sink) {
		int rc = t->c->sink(t->c->sink_ud, data, len);

		t->a->streamed = true;
		if (rc) {
			t->a->sink_rc = rc;
			return 0;
		}
		return len;
	}
	if (status >= 200 && status < 400) {
		if (t->a->body.len + len > BODY_MAX) {
			t->too_big = true;
			return 0;
		}
	} else if (t->a->body.len + len > ERROR_BODY_MAX) {
		return len;
	}
	return buf_append(&t->a->body, data, len) ? 0 : len;
}

static size_t on_read(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t left = strlen(t->c->body) - t->body_off;
	size_t len = size * n < left ? size * n : left;

	memcpy(data, t->c->body + t->body_off, len);
	t->body_off += len;
	return len;
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

static void blob(CURL *h, CURLoption opt, const char *pem)
{
	struct curl_blob b = { (void *)pem, strlen(pem), CURL_BLOB_COPY };

	curl_easy_setopt(h, opt, &b);
}

static void setup_tls(struct kube_client *k)
{
	CURL *h = k->curl;
	const struct kube_config *c = &k->cfg;

	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (c->ca_pem) {
		/* Only the cluster's CA: not the system's bundle or
		 * directory as well. */
		blob(h, CURLOPT_CAINFO_BLOB, c->ca_pem);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	if (c->cert_pem && c->key_pem) {
		blob(h, CURLOPT_SSLCERT_BLOB, c->cert_pem);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		blob(h, CURLOPT_SSLKEY_BLOB, c->key_pem);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

static struct curl_slist *headers(const struct kube_client *k,
				  const struct kube_call *c, struct err *e)
{
	struct curl_slist *l = NULL, *next;
	struct buf auth;
	const char *fixed[] = { "Accept: application/json", "Expect:",
		c->body ? "Content-Type: application/json" : NULL };

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (!fixed[i])
			continue;
		next = curl_slist_append(l, fixed[i]);
		if (!next)
			goto fail;
		l = next;
	}
	if (k->cfg.token && *k->cfg.token) {
		buf_init(&auth);
		if (buf_appendf(&auth, "Authorization: Bearer %s",
				k->cfg.token)) {
			buf_release(&auth);
			goto fail;
		}
		next = curl_slist_append(l, auth.data);
		memset(auth.data, 0, auth.len);
		buf_release(&auth);
		if (!next)
			goto fail;
		l = next;
	}
	return l;
fail:
	curl_slist_free_all(l);
	nomem(e);
	return NULL;
}

static void free_headers(struct curl_slist *l)
{
	/* The Authorization line holds the token. */
	for (struct curl_slist *p = l; p; p = p->next)
		memset(p->data, 0, strlen(p->data));
	curl_slist_free_all(l);
}

int kube_attempt(struct kube_client *k, const struct kube_call *c,
		 struct kube_answer *a, struct err *e)
{
	struct transfer t = { k, c, a, 0, false };
	const struct kube_policy *p = &k->policy;
	struct curl_slist *hdrs;
	struct buf url;
	CURL *h = k->curl;
	uint64_t t0 = mono_ms();
	int rc;

	buf_reset(&a->body);
	a->status = 0;
	a->retry_after_ms = 0;
	a->sink_rc = 0;
	a->streamed = false;
	rc = credential(k, e);
	if (rc)
		return rc;
	hdrs = headers(k, c, e);
	if (!hdrs)
		return KUBE_ENOMEM;
	buf_init(&url);
	if (buf_appendf(&url, "%s%s", k->cfg.server, c->path)) {
		free_headers(hdrs);
		return nomem(e);
	}
	curl_easy_reset(h);
	k->errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, k->errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)p->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "slicectl/0.1");
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
	/* A watch is silent by design between events: only its whole time
	 * is bounded. Anything else that stops moving is a stall. */
	if (!c->sink) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
				 (long)((p->stall_ms + 999) / 1000));
	}
	if (c->timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	setup_tls(k);
	if (strcmp(c->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
		if (c->body) {
			curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(h, CURLOPT_READDATA, &t);
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
					 (curl_off_t)strlen(c->body));
		}
	}
	a->curl_code = curl_easy_perform(h);
	free_headers(hdrs);
	if (a->curl_code == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	log_debug("kube: %s %s -> %ld%s%s (%llu ms)", c->method, url.data,
		  a->status, a->status ? "" : " ",
		  a->status ? "" : curl_easy_strerror(a->curl_code),
		  (unsigned long long)(mono_ms() - t0));
	buf_release(&url);
	if (t.too_big)
		return err_set(e, KUBE_ECORRUPT, "%s %.*s: the answer is "
			       "larger than %u bytes", c->method,
			       (int)strcspn(c->path, "?"), c->path, BODY_MAX);
	return 0;
}

/* ---- retries ---- */

void kube_retry_init(struct kube_client *k, struct kube_retry *r)
{
	k->seed = k->seed * 6364136223846793005ull + 1442695040888963407ull;
	backoff_init(&r->backoff, k->policy.backoff_base_ms,
		     k->policy.backoff_max_ms, k->seed | 1);
	r->attempts = 0;
	r->start_ms = mono_ms();
	r->reauthed = false;
}

void kube_retry_progress(struct kube_retry *r)
{
	r->backoff.attempt = 0;
	r->attempts = 0;
	r->start_ms = mono_ms();
}

/* Transport failures worth another try: not a certificate that does not
 * verify, a URL that cannot work, or our own callbacks' stop. */
static bool transient_curl(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_WRITE_ERROR:
	case CURLE_ABORTED_BY_CALLBACK:
	case CURLE_OUT_OF_MEMORY:
	case CURLE_TOO_MANY_REDIRECTS:
		return false;
	default:
		return true;
	}
}

bool kube_retry_again(struct kube_client *k, struct kube_retry *r,
		      const struct kube_answer *a)
{
	const struct kube_policy *p = &k->policy;
	unsigned wait;
	long s = a->status;

	r->attempts++;
	if (s == 401 && k->cfg.exec_argv.n && !r->reauthed) {
		/* The plugin's token may have been revoked early. */
		r->reauthed = true;
		free(k->cfg.token);
		k->cfg.token = NULL;
		free(k->cfg.cert_pem);
		k->cfg.cert_pem = NULL;
		return true;
	}
	if (a->sink_rc)
		return false;
	if (s == 0 ? !transient_curl(a->curl_code)
		   : !(s == 429 || (s >= 500 && s != 501)))
		return false;
	if (r->attempts >= p->max_attempts)
		return false;
	if (a->retry_after_ms)
		wait = a->retry_after_ms < p->retry_after_max_ms
			       ? a->retry_after_ms : p->retry_after_max_ms;
	else
		wait = backoff_next_ms(&r->backoff);
	if (mono_ms() - r->start_ms + wait > p->max_total_ms)
		return false;
	log_debug("kube: retrying in %u ms (status %ld, attempt %u)", wait, s,
		  r->attempts + 1);
	proc_sleep_ms(wait, true);
	return true;
}

/* ---- requests ---- */

/* Sends c until it succeeds or the budget is spent. *out (may be NULL)
 * gets the JSON answer, NULL when the body is empty. */
static int call(struct kube_client *k, const struct kube_call *c,
		long *status, json_t **out, struct err *e)
{
	struct kube_answer a;
	struct kube_retry r;
	int rc;

	if (out)
		*out = NULL;
	kube_answer_init(&a);
	kube_retry_init(k, &r);
	for (;;) {
		rc = kube_attempt(k, c, &a, e);
		if (rc || (a.status >= 200 && a.status < 400))
			break;
		if (!kube_retry_again(k, &r, &a)) {
			rc = kube_failure(k, c, &a, r.attempts > 1, e);
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
	kube_answer_release(&a);
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
