/*
 * http.c: requests over one reused libcurl easy handle (so connections are
 * kept alive between calls), the shared retry policy, and the translation
 * of HTTP answers into cloud errors a user can act on.
 */
#include "cloud/cloud.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define DEFAULT_MAX_BODY (16u << 20)
/* Enough of an error answer for its message; the rest is dropped. */
#define ERROR_BODY_MAX (64u << 10)
#define HEADERS_MAX (64u << 10)

void http_policy_default(struct http_policy *p)
{
	const char *v;
	unsigned base;

	p->max_attempts = 8;
	p->max_total_ms = 10 * 60 * 1000;
	p->backoff_base_ms = 500;
	p->backoff_max_ms = 32 * 1000;
	p->connect_timeout_ms = 15 * 1000;
	p->stall_ms = 60 * 1000;
	p->retry_after_max_ms = 0;
	p->transient_status = NULL;
	v = getenv("SLICECTL_HTTP_STALL_SECONDS");
	if (v && *v) {
		unsigned long s = strtoul(v, NULL, 10);

		if (s > 0 && s < 3600)
			p->stall_ms = (unsigned)s * 1000;
	}
	base = http_retry_base_ms();
	if (base) {
		p->backoff_base_ms = base;
		if (p->backoff_max_ms > base * 64)
			p->backoff_max_ms = base * 64;
	}
}

void http_response_init(struct http_response *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->body);
	buf_init(&r->headers);
}

void http_response_release(struct http_response *r)
{
	buf_release(&r->body);
	buf_release(&r->headers);
}

bool http_response_header(const struct http_response *r, const char *name,
			  char *out, size_t len)
{
	size_t nlen = strlen(name);
	const char *p = r->headers.data;

	while (p && *p) {
		const char *eol = strstr(p, "\r\n");
		size_t line = eol ? (size_t)(eol - p) : strlen(p);

		if (line > nlen && p[nlen] == ':' &&
		    strncasecmp(p, name, nlen) == 0) {
			const char *v = p + nlen + 1;
			size_t vlen;

			while (*v == ' ' || *v == '\t')
				v++;
			vlen = line - (size_t)(v - p);
			while (vlen && (v[vlen - 1] == ' ' ||
					v[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= len)
				return false;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return true;
		}
		if (!eol)
			break;
		p = eol + 2;
	}
	return false;
}

/* Threads (the supervisor's) may open clients at the same moment. */
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int http_client_init(struct http_client *c, const struct http_policy *p,
		     struct err *e)
{
	memset(c, 0, sizeof(*c));
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return err_set(e, CLOUD_ENOMEM, "cannot initialize libcurl");
	c->curl = curl_easy_init();
	if (!c->curl)
		return err_set(e, CLOUD_ENOMEM,
			       "cannot create a libcurl handle");
	if (p)
		c->policy = *p;
	else
		http_policy_default(&c->policy);
	c->seed = mono_us() ^ ((uint64_t)getpid() << 32);
	return 0;
}

void http_client_release(struct http_client *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
}

int http_escape_append(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		int rc;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
		    ch == '_' || ch == '~') {
			rc = buf_append(b, s, 1);
		} else {
			char esc[3] = { '%', hex[ch >> 4], hex[ch & 15] };

			rc = buf_append(b, esc, 3);
		}
		if (rc)
			return CLOUD_ENOMEM;
	}
	return 0;
}

int http_query_append(struct buf *u, const char *name, const char *value)
{
	if (buf_appends(u, u->data && strchr(u->data, '?') ? "&" : "?") ||
	    buf_appends(u, name) || buf_appends(u, "=") ||
	    http_escape_append(u, value))
		return CLOUD_ENOMEM;
	return 0;
}

/* Names whose values are secrets, as JSON keys and as form or query
 * parameters. */
static const char *const secret_names[] = {
	"access_token", "refresh_token", "id_token", "client_secret",
	"private_key", "assertion", "upload_id", "slurm_jwt", NULL,
};

/* Headers whose whole value is a credential. */
static const char *const secret_headers[] = {
	"authorization:", "proxy-authorization:", "x-slurm-user-token:", NULL,
};

/* The length of the one of names (any case) that p starts with, or 0. */
static size_t match_name(const char *const *names, const char *p)
{
	for (size_t i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncasecmp(p, names[i], n) == 0)
			return n;
	}
	return 0;
}

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_';
}

/* Whether only blanks stand between p and the start of its line. */
static bool at_line_start(const char *text, const char *p)
{
	while (p > text && (p[-1] == ' ' || p[-1] == '\t'))
		p--;
	return p == text || p[-1] == '\n';
}

int http_redact(struct buf *out, const char *text)
{
	static const char redacted[] = "<redacted>";
	const char *p = text;

	while (*p) {
		const char *q;
		size_t n;

		/* "Authorization: anything" up to the end of the line. */
		n = at_line_start(text, p) ? match_name(secret_headers, p) : 0;
		if (n) {
			if (buf_append(out, p, n) || buf_appends(out, " ") ||
			    buf_appends(out, redacted))
				return CLOUD_ENOMEM;
			p += strcspn(p, "\r\n");
			continue;
		}
		if (strncasecmp(p, "bearer ", 7) == 0 &&
		    (p == text || !word_char(p[-1]))) {
			if (buf_append(out, p, 7) || buf_appends(out, redacted))
				return CLOUD_ENOMEM;
			p += 7;
			p += strcspn(p, " \t\r\n\",&");
			continue;
		}
		n = (p == text || !word_char(p[-1])) ? match_name(secret_names, p) : 0;
		if (n && !word_char(p[n])) {
			q = p + n;
			if (p > text && p[-1] == '"' && *q == '"') {
				/* JSON: "name" : "value" */
				const char *v = q + 1;

				while (*v == ' ' || *v == '\t' || *v == ':' ||
				       *v == '\n' || *v == '\r')
					v++;
				if (*v == '"') {
					const char *end = v + 1;

					while (*end && *end != '"') {
						if (*end == '\\' && end[1])
							end++;
						end++;
					}
					if (buf_append(out, p,
						       (size_t)(v + 1 - p)) ||
					    buf_appends(out, redacted))
						return CLOUD_ENOMEM;
					p = end;
					continue;
				}
			} else if (*q == '=') {
				if (buf_append(out, p, n + 1) ||
				    buf_appends(out, redacted))
					return CLOUD_ENOMEM;
				p = q + 1 + strcspn(q + 1, "& \t\r\n\"");
				continue;
			}
		}
		if (buf_append(out, p, 1))
			return CLOUD_ENOMEM;
		p++;
	}
	if (!out->data && buf_appends(out, ""))
		return CLOUD_ENOMEM;
	return 0;
}

static void copy_clean(char *out, size_t len, const char *s, size_t n)
{
	size_t j = 0;

	if (!len)
		return;
	for (size_t i = 0; i < n && j + 1 < len; i++) {
		unsigned char c = (unsigned char)s[i];

		out[j++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	while (j && out[j - 1] == ' ')
		j--;
	out[j] = '\0';
}

void http_error_message(const struct http_response *resp, char *out,
			size_t len)
{
	json_t *root, *error;
	const char *text = resp->body.data;
	struct buf red;

	out[0] = '\0';
	if (!text || !resp->body.len)
		return;
	root = json_loadb(text, resp->body.len, 0, NULL);
	error = root ? json_object_get(root, "error") : NULL;
	if (json_is_object(error)) {
		const char *m = json_string_value(
			json_object_get(error, "message"));

		if (m) {
			copy_clean(out, len, m, strlen(m));
			json_decref(root);
			return;
		}
	} else if (json_is_string(error)) {
		const char *code = json_string_value(error);
		const char *d = json_string_value(
			json_object_get(root, "error_description"));
		char both[512];

		snprintf(both, sizeof(both), "%s%s%s", code, d ? ": " : "",
			 d ? d : "");
		copy_clean(out, len, both, strlen(both));
		json_decref(root);
		return;
	}
	json_decref(root);
	/* Not JSON we know: the start of the text, credentials removed. */
	buf_init(&red);
	if (http_redact(&red, text) == 0)
		copy_clean(out, len, red.data,
			   red.len < 300 ? red.len : 300);
	buf_release(&red);
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

bool http_unsent(CURLcode cc)
{
	return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	       cc == CURLE_COULDNT_RESOLVE_PROXY;
}

bool http_transient(const struct http_policy *p, int rc,
		    const struct http_response *resp)
{
	long s = resp->status;

	if (rc == CLOUD_ENETWORK)
		return transient_curl(resp->curl_code);
	if (rc == 0 || rc == CLOUD_ECORRUPT || rc == CLOUD_EABORTED)
		return false;
	if (p->transient_status)
		return p->transient_status(s);
	return s == 408 || s == 429 || (s >= 500 && s <= 599 && s != 501);
}

void http_retry_init(struct http_retry *r, struct http_client *c)
{
	r->policy = &c->policy;
	r->client = c;
	c->seed = c->seed * 6364136223846793005ull + 1442695040888963407ull;
	backoff_init(&r->backoff, c->policy.backoff_base_ms,
		     c->policy.backoff_max_ms, c->seed | 1);
	r->attempts = 0;
	r->start_ms = mono_ms();
}

void http_retry_progress(struct http_retry *r)
{
	r->backoff.attempt = 0;
	r->attempts = 0;
}

static bool cancel_requested(struct http_client *c)
{
	return c && c->cancelled && c->cancelled(c->cancel_ud);
}

/* Sleeps ms; wakes early when the client's cancel hook fires. */
static void sleep_cancellable(struct http_client *c, unsigned ms)
{
	if (!c || !c->cancelled) {
		proc_sleep_ms(ms, true);
		return;
	}
	while (ms && !cancel_requested(c)) {
		unsigned slice = ms < 100 ? ms : 100;

		proc_sleep_ms(slice, true);
		ms -= slice;
	}
}

bool http_retry_again(struct http_retry *r, int rc,
		      const struct http_response *resp)
{
	unsigned wait;
	uint64_t spent;

	if (!http_transient(r->policy, rc, resp))
		return false;
	r->attempts++;
	if (r->attempts >= r->policy->max_attempts)
		return false;
	wait = resp->retry_after_ms ? resp->retry_after_ms
				    : backoff_next_ms(&r->backoff);
	if (r->policy->retry_after_max_ms &&
	    wait > r->policy->retry_after_max_ms)
		wait = r->policy->retry_after_max_ms;
	spent = mono_ms() - r->start_ms;
	if (spent + wait > r->policy->max_total_ms)
		return false;
	log_debug("http: retrying in %u ms (status %ld, attempt %u)", wait,
		  resp->status, r->attempts + 1);
	/* The retries can take a minute: after a few, silence looks like a
	 * hang, so say what is failing. */
	if (r->attempts >= 2) {
		const char *why = r->client && r->client->errbuf[0]
					  ? r->client->errbuf
					  : curl_easy_strerror(resp->curl_code);

		if (resp->status)
			log_info("still trying: HTTP %ld (attempt %u of %u)",
				 resp->status, r->attempts + 1,
				 r->policy->max_attempts);
		else
			log_info("still trying: %s (attempt %u of %u)", why,
				 r->attempts + 1, r->policy->max_attempts);
	}
	sleep_cancellable(r->client, wait);
	return true;
}

struct transfer {
	const struct http_request *req;
	struct http_response *resp;
	struct http_client *c;
	size_t body_off;
	bool body_started;
	bool too_big;
	int sink_rc;
	struct err *sink_err;
};

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t len = size * n;
	struct buf *h = &t->resp->headers;

	/* A new status line (after 100 Continue, say) starts afresh. */
	if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		buf_reset(h);
		return len;
	}
	while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		len--;
	if (!len || h->len + len > HEADERS_MAX)
		return size * n;
	if (buf_append(h, data, len) || buf_append(h, "\r\n", 2))
		return 0;
	return size * n;
}

static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t len = size * n;
	long status = 0;

	curl_easy_getinfo(t->c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300 && t->req->sink) {
		int rc = t->req->sink(t->req->sink_ud, data, len, t->sink_err);

		if (rc) {
			t->sink_rc = rc;
			return 0;
		}
		t->resp->delivered += len;
		return len;
	}
	if (status >= 200 && status < 400) {
		size_t cap = t->req->max_body ? t->req->max_body
					      : DEFAULT_MAX_BODY;

		if (t->resp->body.len + len > cap) {
			t->too_big = true;
			return 0;
		}
	} else if (t->resp->body.len + len > ERROR_BODY_MAX) {
		return len;
	}
	if (buf_append(&t->resp->body, data, len))
		return 0;
	return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancel_requested(ud) ? 1 : 0;
}

static size_t on_read(char *data, size_t size, size_t n, void *ud)
{
	struct transfer *t = ud;
	size_t len = size * n;
	const struct http_request *req = t->req;

	t->body_started = true;
	if (req->source) {
		size_t got = req->source->read(req->source->ud, data, len);

		return got == (size_t)-1 ? CURL_READFUNC_ABORT : got;
	}
	if (len > req->body_len - t->body_off)
		len = req->body_len - t->body_off;
	if (len)
		memcpy(data, (const char *)req->body + t->body_off, len);
	t->body_off += len;
	return len;
}

static void tls_blob(CURL *h, CURLoption opt, const char *pem)
{
	struct curl_blob b = { (void *)pem, strlen(pem), CURL_BLOB_COPY };

	curl_easy_setopt(h, opt, &b);
}

static void setup_tls(CURL *h, const struct http_tls *tls)
{
	if (tls->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (tls->ca_pem) {
		/* Only this CA: not the system's bundle or directory as
		 * well. */
		tls_blob(h, CURLOPT_CAINFO_BLOB, tls->ca_pem);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	if (tls->cert_pem && tls->key_pem) {
		tls_blob(h, CURLOPT_SSLCERT_BLOB, tls->cert_pem);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		tls_blob(h, CURLOPT_SSLKEY_BLOB, tls->key_pem);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

/* Header lines may hold credentials: they do not outlive the request in
 * freed memory. */
static void free_headers(struct curl_slist *l)
{
	for (struct curl_slist *p = l; p; p = p->next)
		memset(p->data, 0, strlen(p->data));
	curl_slist_free_all(l);
}

static int setup(struct http_client *c, const struct http_request *req,
		 struct transfer *t, struct curl_slist **hdrs, struct err *e)
{
	CURL *h = c->curl;
	const struct http_policy *p = &c->policy;
	long stall_s = (long)((p->stall_ms + 999) / 1000);
	curl_off_t blen = (curl_off_t)req->body_len;
	bool has_body = req->body || req->source;
	struct curl_slist *l = NULL;

	if (req->timeout_ms) {
		long t_s = (long)((req->timeout_ms + 999) / 1000);

		if (t_s > stall_s)
			stall_s = t_s;
	}
	curl_easy_reset(h);
	c->errbuf[0] = '\0';
	/* Without "Expect:" curl waits for a 100 Continue before large
	 * bodies, which a plain server may never send. */
	l = curl_slist_append(l, "Expect:");
	for (const char *const *hp = req->headers; hp && *hp && l; hp++) {
		struct curl_slist *next = curl_slist_append(l, *hp);

		if (!next)
			free_headers(l);
		l = next;
	}
	if (!l)
		return err_set(e, CLOUD_ENOMEM, "out of memory for headers");
	*hdrs = l;
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)p->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall_s ? stall_s : 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "slicectl/0.1");
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(h, CURLOPT_READDATA, t);
	if (req->timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
	if (req->unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
	if (req->tls)
		setup_tls(h, req->tls);
	if (c->cancelled) {
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	}
	if (req->source)
		blen = -1;
	if (strcmp(req->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(req->method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 has_body ? blen : (curl_off_t)0);
	} else if (strcmp(req->method, "PUT") == 0) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				 has_body ? blen : (curl_off_t)0);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
		if (has_body) {
			curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, blen);
		}
	}
	return 0;
}

/* The URL without its query, for messages: queries carry upload ids. */
static void url_for_message(const char *url, char *out, size_t len)
{
	size_t n = strcspn(url, "?#");

	snprintf(out, len, "%.*s", (int)n, url);
}

static unsigned parse_retry_after(const struct http_response *resp)
{
	char v[64];

	if (!http_response_header(resp, "retry-after", v, sizeof(v)))
		return 0;
	return http_retry_after_ms(v, time(NULL));
}

static int status_error(long status)
{
	switch (status) {
	case 401:
	case 403:
		return CLOUD_EAUTH;
	case 404:
		return CLOUD_ENOTFOUND;
	case 409:
		return CLOUD_EEXISTS;
	case 412:
		return CLOUD_EPRECONDITION;
	default:
		return CLOUD_EHTTP;
	}
}

static const char *status_hint(long status)
{
	switch (status) {
	case 401:
		return "; the credentials were refused: check "
		       "SLICECTL_ACCESS_TOKEN or GOOGLE_APPLICATION_CREDENTIALS"
		       ", or run `gcloud auth application-default login`";
	case 403:
		return "; the account lacks a permission for this request "
		       "(for a bucket, grant it roles/storage.objectAdmin, "
		       "which holds storage.objects.create/get/list/delete)";
	case 429:
		return "; the service is rate limiting this account: "
		       "try again later";
	default:
		return "";
	}
}

static int failure(struct http_client *c, const struct http_request *req,
		   struct http_response *resp, struct err *e)
{
	char url[512], msg[600];
	const char *hint;

	url_for_message(req->url, url, sizeof(url));
	if (resp->status == 0)
		return err_set(e, CLOUD_ENETWORK,
			       "%s %s: no answer after %u attempt%s: %s",
			       req->method, url, resp->attempts,
			       resp->attempts == 1 ? "" : "s",
			       c->errbuf[0] ? c->errbuf
					    : curl_easy_strerror(
						      resp->curl_code));
	http_error_message(resp, msg, sizeof(msg));
	hint = req->hint ? req->hint(resp->status, msg) : NULL;
	if (!hint || !*hint)
		hint = status_hint(resp->status);
	return err_set(e, status_error(resp->status),
		       "%s %s: HTTP %ld %s%s%s%s%s", req->method, url,
		       resp->status, http_reason_phrase(resp->status),
		       msg[0] ? ": " : "", msg,
		       resp->attempts > 1 ? " (after retries)" : "", hint);
}

static void log_request(const struct http_request *req,
			const struct http_response *resp, uint64_t ms)
{
	struct buf line;

	if (log_level() < LOG_DEBUG)
		return;
	buf_init(&line);
	if (buf_appendf(&line, "%s %s -> %ld%s%s (%llu ms)", req->method,
			req->url, resp->status,
			resp->status ? "" : " ",
			resp->status ? "" : curl_easy_strerror(resp->curl_code),
			(unsigned long long)ms) == 0) {
		for (const char *const *h = req->headers; h && *h; h++)
			if (buf_appendf(&line, "\n  %s", *h))
				break;
		{
			struct buf red;

			buf_init(&red);
			if (http_redact(&red, line.data) == 0)
				log_debug("http: %s", red.data);
			buf_release(&red);
		}
	}
	buf_release(&line);
}

static int cancelled(const struct http_request *req, struct err *e)
{
	char url[512];

	url_for_message(req->url, url, sizeof(url));
	return err_set(e, CLOUD_EABORTED, "%s %s: cancelled", req->method,
		       url);
}

int http_do(struct http_client *c, const struct http_request *req,
	    struct http_response *resp, struct err *e)
{
	struct http_retry retry;
	struct http_policy one;
	int rc;

	http_retry_init(&retry, c);
	if (req->max_attempts) {
		one = c->policy;
		one.max_attempts = req->max_attempts;
		retry.policy = &one;
	}
	for (;;) {
		struct transfer t = { req, resp, c, 0, false, false, 0, e };
		struct curl_slist *hdrs = NULL;
		uint64_t t0 = mono_ms();
		CURLcode cc;

		if (cancel_requested(c))
			return cancelled(req, e);
		buf_reset(&resp->body);
		buf_reset(&resp->headers);
		resp->status = 0;
		resp->retry_after_ms = 0;
		resp->attempts++;
		if (req->source && req->source->rewind && resp->attempts > 1 &&
		    req->source->rewind(req->source->ud))
			return err_set(e, CLOUD_EIO,
				       "%s %s: cannot rewind the request body",
				       req->method, req->url);
		rc = setup(c, req, &t, &hdrs, e);
		if (rc)
			return rc;
		cc = curl_easy_perform(c->curl);
		free_headers(hdrs);
		resp->curl_code = cc;
		if (t.sink_rc) {
			if (t.sink_rc >= CLOUD_EURL &&
			    t.sink_rc <= CLOUD_EABORTED)
				return t.sink_rc;
			return CLOUD_EABORTED;
		}
		if (cc == CURLE_ABORTED_BY_CALLBACK && cancel_requested(c))
			return cancelled(req, e);
		if (t.too_big) {
			size_t cap = req->max_body ? req->max_body
						   : (size_t)DEFAULT_MAX_BODY;
			char url[512];

			url_for_message(req->url, url, sizeof(url));
			return err_set(e, CLOUD_ECORRUPT,
				       "%s %s: the answer is larger than %zu "
				       "bytes", req->method, url, cap);
		}
		if (cc == CURLE_OK)
			curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE,
					  &resp->status);
		log_request(req, resp, mono_ms() - t0);
		if (cc == CURLE_OK && resp->status < 400 && resp->status > 0)
			return 0;
		if (cc != CURLE_OK)
			rc = CLOUD_ENETWORK;
		else
			rc = status_error(resp->status);
		if (resp->status)
			resp->retry_after_ms = parse_retry_after(resp);
		if (resp->delivered > 0)
			break;
		if (req->not_idempotent && !req->precondition &&
		    !(cc != CURLE_OK && http_unsent(cc)))
			break;
		if (req->source && t.body_started && !req->source->rewind)
			break;
		if (!http_retry_again(&retry, rc, resp))
			break;
	}
	return failure(c, req, resp, e);
}
