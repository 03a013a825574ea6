/*
 * metadata.c: the GCE metadata server client (see cloud.h): plain reads
 * and wait_for_change long polls of http://HOST/computeMetadata/v1/PATH,
 * over cloud.h's HTTP transport and its retry policy. Every request carries
 * "Metadata-Flavor: Google" and every answer must carry it back, or
 * something other than the metadata server answered (a proxy, a captive
 * portal). A long poll's own time limit is timeout_s plus a margin (the
 * stall limit, at most 10 s), and its 503s and dropped connections are
 * retried only within timeout_s, each retry asking the server for what is
 * left of it. metadata_cancel sets a flag that http.c polls about once a
 * second during a transfer and between retries.
 */
#include "cloud/cloud.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define METADATA_DEFAULT_HOST "metadata.google.internal"
#define METADATA_ROOT "/computeMetadata/v1/"
#define FLAVOR_HEADER "Metadata-Flavor: Google"
/* Values are at most 256 KiB; a recursive directory can be larger. */
#define VALUE_MAX (8u << 20)
#define ETAG_MAX 256
/* A long poll's own limit beyond the server's timeout_sec. */
#define WATCH_MARGIN_MAX_MS 10000u
/* Far beyond any sensible long poll (the server's own cap is lower). */
#define WATCH_TIMEOUT_MAX_S (24u * 3600)

struct metadata_client {
	struct http_client http;
	char *base; /* "http://HOST/computeMetadata/v1/" */
	atomic_bool cancelled;
};

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

static bool is_cancelled(void *ud)
{
	struct metadata_client *m = ud;

	return atomic_load(&m->cancelled);
}

/* "host[:port]", optionally after "http://": no path, query or blanks. */
static bool host_ok(const char *host, size_t len)
{
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)host[i];

		if (c <= ' ' || c == 0x7f || c == '/' || c == '?' ||
		    c == '#' || c == '@' || c == '\\')
			return false;
	}
	return true;
}

int metadata_open(struct metadata_client **out, struct err *e)
{
	const char *env = getenv("GCE_METADATA_HOST");
	const char *host = env && *env ? env : METADATA_DEFAULT_HOST;
	const char *scheme = "http://";
	struct metadata_client *m;
	struct buf base;
	size_t len;
	int rc;

	*out = NULL;
	if (strncasecmp(host, "http://", 7) == 0)
		host += 7;
	else if (strstr(host, "://"))
		return err_set(e, CLOUD_EINVAL,
			       "GCE_METADATA_HOST=%s: the metadata server "
			       "speaks plain http; give HOST[:PORT]", env);
	len = strlen(host);
	while (len && host[len - 1] == '/')
		len--;
	if (!host_ok(host, len))
		return err_set(e, CLOUD_EINVAL,
			       "GCE_METADATA_HOST=%s: not HOST[:PORT]",
			       env ? env : "");
	m = calloc(1, sizeof(*m));
	if (!m)
		return nomem(e);
	atomic_init(&m->cancelled, false);
	buf_init(&base);
	if (buf_appendf(&base, "%s%.*s%s", scheme, (int)len, host,
			METADATA_ROOT)) {
		free(m);
		return nomem(e);
	}
	m->base = buf_detach(&base);
	rc = http_client_init(&m->http, NULL, e);
	if (rc) {
		free(m->base);
		free(m);
		return rc;
	}
	m->http.cancelled = is_cancelled;
	m->http.cancel_ud = m;
	*out = m;
	return 0;
}

void metadata_close(struct metadata_client *m)
{
	if (!m)
		return;
	http_client_release(&m->http);
	free(m->base);
	free(m);
}

void metadata_cancel(struct metadata_client *m)
{
	if (m)
		atomic_store(&m->cancelled, true);
}

static const char *metadata_hint(long status, const char *message)
{
	(void)message;
	switch (status) {
	case 403:
		return "; the metadata server answers only requests that "
		       "carry \"Metadata-Flavor: Google\" and no "
		       "X-Forwarded-For header: is a proxy in the way "
		       "(http_proxy without no_proxy=metadata.google."
		       "internal)?";
	case 404:
		return "; this VM's metadata has no such entry";
	case 429:
		return "; the metadata server is rate limiting this VM: "
		       "try again later";
	default:
		return "";
	}
}

/* base + path, each byte outside A-Z a-z 0-9 - . _ ~ / escaped. A leading
 * "/" is dropped: paths are below /computeMetadata/v1/. */
static int build_url(struct metadata_client *m, const char *path,
		     struct buf *url, struct err *e)
{
	static const char hex[] = "0123456789ABCDEF";

	while (*path == '/')
		path++;
	for (const char *p = path; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c < 0x20 || c == 0x7f || c == '?' || c == '#')
			return err_set(e, CLOUD_EINVAL,
				       "metadata path \"%s\": no query, "
				       "fragment or control characters",
				       path);
	}
	if (strcmp(path, "..") == 0 || strncmp(path, "../", 3) == 0 ||
	    strstr(path, "/../") ||
	    (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0))
		return err_set(e, CLOUD_EINVAL,
			       "metadata path \"%s\": no \"..\"", path);
	if (buf_appends(url, m->base))
		return nomem(e);
	for (const char *p = path; *p; p++) {
		unsigned char c = (unsigned char)*p;
		int rc;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || c == '/') {
			rc = buf_append(url, p, 1);
		} else {
			char esc[3] = { '%', hex[c >> 4], hex[c & 15] };

			rc = buf_append(url, esc, 3);
		}
		if (rc)
			return nomem(e);
	}
	return 0;
}

static bool from_metadata_server(const struct http_response *resp)
{
	char v[64];

	return http_response_header(resp, "Metadata-Flavor", v, sizeof(v)) &&
	       strcasecmp(v, "Google") == 0;
}

static void url_for_message(const char *url, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)strcspn(url, "?#"), url);
}

static int not_the_server(const char *url, const struct http_response *resp,
			  struct err *e)
{
	char u[512];

	url_for_message(url, u, sizeof(u));
	return err_set(e, CLOUD_ECORRUPT,
		       "GET %s: HTTP %ld without \"Metadata-Flavor: Google\": "
		       "something other than the metadata server answered "
		       "(a proxy? set no_proxy=metadata.google.internal)", u,
		       resp->status);
}

/*
 * What http_do's answer means for us: 0 for a 200 from the metadata
 * server; a 404 without the flavor header is not the server's "no such
 * entry" but someone else's page; any other success status (301 for a
 * directory named without its "/") is not a value.
 */
static int check_answer(int rc, const char *url,
			const struct http_response *resp, struct err *e)
{
	char u[512];

	if (rc == CLOUD_ENOTFOUND && !from_metadata_server(resp))
		return not_the_server(url, resp, e);
	if (rc)
		return rc;
	if (!from_metadata_server(resp))
		return not_the_server(url, resp, e);
	if (resp->status == 200)
		return 0;
	url_for_message(url, u, sizeof(u));
	if (resp->status >= 300 && resp->status < 400)
		return err_set(e, CLOUD_EHTTP,
			       "GET %s: HTTP %ld: a directory (end the path "
			       "with \"/\" to list it)", u, resp->status);
	return err_set(e, CLOUD_EHTTP, "GET %s: unexpected HTTP %ld", u,
		       resp->status);
}

static int take_value(struct http_response *resp, char **value,
		      struct err *e)
{
	if (resp->body.data) {
		*value = buf_detach(&resp->body);
	} else {
		*value = strdup("");
		if (!*value)
			return nomem(e);
	}
	return 0;
}

static int take_etag(const char *url, const struct http_response *resp,
		     char **etag, struct err *e)
{
	char v[ETAG_MAX];

	if (!http_response_header(resp, "ETag", v, sizeof(v)) || !v[0]) {
		char u[512];

		url_for_message(url, u, sizeof(u));
		return err_set(e, CLOUD_ECORRUPT,
			       "GET %s: the answer has no ETag to wait on", u);
	}
	*etag = strdup(v);
	return *etag ? 0 : nomem(e);
}

/* One plain GET with the client's whole retry policy. */
static int plain_get(struct metadata_client *m, const char *path,
		     char **value, char **etag, struct err *e)
{
	const char *headers[] = { FLAVOR_HEADER, NULL };
	struct http_request req = { .method = "GET", .headers = headers,
				    .max_body = VALUE_MAX,
				    .hint = metadata_hint };
	struct http_response resp;
	struct buf url;
	int rc;

	buf_init(&url);
	http_response_init(&resp);
	rc = build_url(m, path, &url, e);
	if (rc)
		goto out;
	req.url = url.data;
	rc = http_do(&m->http, &req, &resp, e);
	rc = check_answer(rc, url.data, &resp, e);
	if (!rc && etag)
		rc = take_etag(url.data, &resp, etag, e);
	if (!rc)
		rc = take_value(&resp, value, e);
	if (rc && etag) {
		free(*etag);
		*etag = NULL;
	}
out:
	http_response_release(&resp);
	buf_release(&url);
	return rc;
}

int metadata_get(struct metadata_client *m, const char *path, char **value,
		 struct err *e)
{
	*value = NULL;
	if (atomic_load(&m->cancelled))
		return err_set(e, CLOUD_EABORTED, "metadata %s: cancelled",
			       path);
	return plain_get(m, path, value, NULL, e);
}

static int watch_url(struct metadata_client *m, const char *path,
		     const char *etag, unsigned timeout_s, struct buf *url,
		     struct err *e)
{
	char secs[16];
	int rc;

	buf_reset(url);
	rc = build_url(m, path, url, e);
	if (rc)
		return rc;
	snprintf(secs, sizeof(secs), "%u", timeout_s);
	if (http_query_append(url, "wait_for_change", "true") ||
	    http_query_append(url, "timeout_sec", secs) ||
	    http_query_append(url, "last_etag", etag))
		return nomem(e);
	return 0;
}

int metadata_watch(struct metadata_client *m, const char *path,
		   const char *etag, unsigned timeout_s, char **value,
		   char **etag_out, bool *changed, struct err *e)
{
	const char *headers[] = { FLAVOR_HEADER, NULL };
	struct http_request req = { .method = "GET", .headers = headers,
				    .max_body = VALUE_MAX, .max_attempts = 1,
				    .hint = metadata_hint };
	struct http_response resp;
	struct http_policy budget;
	struct http_retry retry;
	unsigned margin_ms;
	uint64_t deadline;
	struct buf url;
	int rc;

	*value = NULL;
	*etag_out = NULL;
	*changed = false;
	if (atomic_load(&m->cancelled))
		return err_set(e, CLOUD_EABORTED, "metadata %s: cancelled",
			       path);
	/* wait_for_change without last_etag waits for the next change; the
	 * current value and its ETag come from a plain read. */
	if (!etag || !*etag) {
		rc = plain_get(m, path, value, etag_out, e);
		if (!rc)
			*changed = true;
		return rc;
	}
	if (timeout_s == 0 || timeout_s > WATCH_TIMEOUT_MAX_S)
		return err_set(e, CLOUD_EINVAL,
			       "metadata %s: a watch's timeout is 1 to %u "
			       "seconds, not %u", path, WATCH_TIMEOUT_MAX_S,
			       timeout_s);
	margin_ms = m->http.policy.stall_ms < WATCH_MARGIN_MAX_MS
			    ? m->http.policy.stall_ms
			    : WATCH_MARGIN_MAX_MS;
	if (margin_ms < 1000)
		margin_ms = 1000;
	deadline = mono_ms() + (uint64_t)timeout_s * 1000;
	http_retry_init(&retry, &m->http);
	budget = m->http.policy;
	budget.max_total_ms = timeout_s * 1000;
	retry.policy = &budget;
	buf_init(&url);
	http_response_init(&resp);
	for (;;) {
		uint64_t now = mono_ms();
		unsigned left_s = now < deadline
					  ? (unsigned)((deadline - now + 999) /
						       1000)
					  : 1;

		rc = watch_url(m, path, etag, left_s, &url, e);
		if (rc)
			goto out;
		req.url = url.data;
		req.timeout_ms = left_s * 1000 + margin_ms;
		rc = http_do(&m->http, &req, &resp, e);
		if (rc == 0 || rc == CLOUD_EABORTED ||
		    !http_retry_again(&retry, rc, &resp))
			break;
	}
	rc = check_answer(rc, url.data, &resp, e);
	if (!rc)
		rc = take_etag(url.data, &resp, etag_out, e);
	if (!rc)
		rc = take_value(&resp, value, e);
	if (rc) {
		free(*etag_out);
		*etag_out = NULL;
		goto out;
	}
	*changed = strcmp(*etag_out, etag) != 0;
out:
	http_response_release(&resp);
	buf_release(&url);
	return rc;
}
