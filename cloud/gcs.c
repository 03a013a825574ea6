/*
 * gcs.c: the Cloud Storage JSON API calls store_gs.c is made of. Every
 * byte sent or received is covered by CRC32C against the server's own
 * checksum; every fault the retry policy forgives is recovered from
 * without sending or keeping a byte twice: uploads ask the session how
 * far it got, downloads ask for the rest of the same generation.
 */
#include "cloud/gcs.h"
#include "cloud/transfer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define GCS_DEFAULT_BASE "https://storage.googleapis.com"
#define LIST_PAGE_MAX (32u << 20)

int gcs_client_init(struct gcs_client *c, const struct http_policy *p,
		    struct err *e)
{
	const char *emu = getenv("STORAGE_EMULATOR_HOST");
	const char *tok = getenv("SLICECTL_ACCESS_TOKEN");
	const char *gac = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	struct buf base;
	int rc;

	memset(c, 0, sizeof(*c));
	buf_init(&base);
	if (emu && *emu) {
		size_t n = strlen(emu);

		while (n && emu[n - 1] == '/')
			n--;
		if (buf_appendf(&base, "%s%.*s",
				strstr(emu, "://") ? "" : "http://", (int)n,
				emu))
			return err_set(e, CLOUD_ENOMEM, "out of memory");
	} else if (buf_appends(&base, GCS_DEFAULT_BASE)) {
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	c->base = buf_detach(&base);
	if (emu && *emu && !(tok && *tok) && !(gac && *gac))
		auth_init_none(&c->auth);
	else if ((rc = auth_init(&c->auth, e))) {
		free(c->base);
		c->base = NULL;
		return rc;
	}
	rc = http_client_init(&c->http, p, e);
	if (rc) {
		auth_release(&c->auth);
		free(c->base);
		c->base = NULL;
	}
	return rc;
}

void gcs_client_release(struct gcs_client *c)
{
	http_client_release(&c->http);
	auth_release(&c->auth);
	free(c->base);
	c->base = NULL;
}

int gcs_client_init_worker(struct gcs_client *w, struct gcs_client *parent,
			   pthread_mutex_t *mu, struct err *e)
{
	int rc;

	memset(w, 0, sizeof(*w));
	auth_init_none(&w->auth);
	w->base = strdup(parent->base);
	if (!w->base)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	rc = http_client_init(&w->http, &parent->http.policy, e);
	if (rc) {
		free(w->base);
		w->base = NULL;
		return rc;
	}
	w->lender = parent;
	w->lender_mu = mu;
	return 0;
}

/* A worker's token: the lender's current one (fetched through the
 * worker's connection when due), held as a fixed token of its own. */
static int borrow_token(struct gcs_client *c, struct err *e)
{
	struct auth *a = &c->lender->auth;
	const char *tok;
	int rc;

	pthread_mutex_lock(c->lender_mu);
	rc = auth_token(a, &c->http, &tok, e);
	if (!rc && a->kind != AUTH_NONE &&
	    (!c->auth.token || strcmp(c->auth.token, tok))) {
		char *copy = strdup(tok);

		if (!copy) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		} else {
			free(c->auth.token);
			c->auth.token = copy;
			c->auth.kind = AUTH_STATIC;
			c->auth.refresh_at_ms = UINT64_MAX;
		}
	}
	pthread_mutex_unlock(c->lender_mu);
	return rc;
}

/* Sends req with the caller's headers and the Authorization header (see
 * auth_send). */
static int gcs_send(struct gcs_client *c, struct http_request *req,
		const char *const *headers, struct http_response *resp,
		struct err *e)
{
	int rc;

	if (!c->lender)
		return auth_send(&c->auth, &c->http, req, headers, resp, e);
	rc = borrow_token(c, e);
	if (rc)
		return rc;
	rc = auth_send(&c->auth, &c->http, req, headers, resp, e);
	if (rc == CLOUD_EAUTH && resp->status == 401 &&
	    auth_renewable(&c->lender->auth)) {
		/* Revoked or expired early: the lender fetches a new one for
		 * everybody, and this request goes once more. */
		pthread_mutex_lock(c->lender_mu);
		if (c->lender->auth.token &&
		    !strcmp(c->lender->auth.token, c->auth.token))
			auth_invalidate(&c->lender->auth);
		pthread_mutex_unlock(c->lender_mu);
		err_init(e);
		http_response_release(resp);
		http_response_init(resp);
		rc = borrow_token(c, e);
		if (!rc)
			rc = auth_send(&c->auth, &c->http, req, headers, resp,
				       e);
	}
	return rc;
}

/* base + "/storage/v1/b/BUCKET/o/NAME" (or the upload path), escaped. */
static int object_url(struct gcs_client *c, struct buf *u, bool upload,
		      const char *bucket, const char *name)
{
	if (buf_appendf(u, "%s%s/storage/v1/b/", c->base,
			upload ? "/upload" : "") ||
	    http_escape_append(u, bucket) || buf_appends(u, "/o"))
		return CLOUD_ENOMEM;
	if (name && (buf_appends(u, "/") || http_escape_append(u, name)))
		return CLOUD_ENOMEM;
	return 0;
}

static int query_int(struct buf *u, const char *name, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return http_query_append(u, name, num);
}

static int corrupt(struct err *e, const char *what, const char *field)
{
	return err_set(e, CLOUD_ECORRUPT,
		       "malformed %s from Cloud Storage: \"%s\" is missing or "
		       "not what the JSON API sends", what, field);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* GCS sends 64-bit numbers as strings; numbers are taken too. */
static bool json_u64(json_t *v, uint64_t *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	return parse_u64(json_string_value(v), out);
}

static bool parse_crc(const char *b64, uint32_t *out)
{
	unsigned char raw[4];
	size_t n;

	if (!b64 || base64_decode(b64, strlen(b64), raw, sizeof(raw), &n) ||
	    n != 4)
		return false;
	*out = (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 |
	       (uint32_t)raw[2] << 8 | raw[3];
	return true;
}

static void crc_base64(uint32_t crc, char out[9])
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char r[4] = { (unsigned char)(crc >> 24),
			       (unsigned char)(crc >> 16),
			       (unsigned char)(crc >> 8), (unsigned char)crc };
	uint32_t a = (uint32_t)r[0] << 16 | (uint32_t)r[1] << 8 | r[2];
	uint32_t b = (uint32_t)r[3] << 16;

	out[0] = tab[a >> 18];
	out[1] = tab[(a >> 12) & 63];
	out[2] = tab[(a >> 6) & 63];
	out[3] = tab[a & 63];
	out[4] = tab[b >> 18];
	out[5] = tab[(b >> 12) & 63];
	out[6] = '=';
	out[7] = '=';
	out[8] = '\0';
}

static int object_from_json(json_t *o, struct store_object *out,
			    struct err *e)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *updated = json_string_value(json_object_get(o,
								"updated"));
	uint64_t gen, size;
	uint32_t crc;

	if (!json_is_object(o))
		return corrupt(e, "object metadata", "(an object)");
	if (!name || !*name)
		return corrupt(e, "object metadata", "name");
	if (!json_u64(json_object_get(o, "generation"), &gen) || !gen ||
	    gen > INT64_MAX)
		return corrupt(e, "object metadata", "generation");
	if (!json_u64(json_object_get(o, "size"), &size))
		return corrupt(e, "object metadata", "size");
	if (!parse_crc(json_string_value(json_object_get(o, "crc32c")), &crc))
		return corrupt(e, "object metadata", "crc32c");
	memset(out, 0, sizeof(*out));
	out->name = strdup(name);
	if (!out->name)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	out->generation = (int64_t)gen;
	out->size = size;
	out->crc32c = crc;
	if (updated)
		snprintf(out->updated, sizeof(out->updated), "%s", updated);
	return 0;
}

int gcs_parse_object(const char *json, size_t len, struct store_object *out,
		     struct err *e)
{
	json_t *root = json_loadb(json ? json : "", json ? len : 0, 0, NULL);
	int rc;

	if (!root)
		return err_set(e, CLOUD_ECORRUPT,
			       "malformed object metadata from Cloud Storage: "
			       "not JSON");
	rc = object_from_json(root, out, e);
	json_decref(root);
	return rc;
}

int gcs_written_as(struct store_object *o, uint64_t size, uint32_t crc,
		   const char *bucket, const char *name,
		   struct store_object *out, struct err *e)
{
	int rc;

	if (o->size != size || o->crc32c != crc) {
		rc = err_set(e, CLOUD_ECORRUPT,
			     "gs://%s/%s: the stored object (generation %"
			     PRId64 ", %" PRIu64 " bytes, crc32c %08x) is not "
			     "what was sent (%" PRIu64 " bytes, crc32c %08x); "
			     "it was damaged on the way: write it again",
			     bucket, name, o->generation, o->size, o->crc32c,
			     size, crc);
		store_object_release(o);
		return rc;
	}
	if (out)
		*out = *o;
	else
		store_object_release(o);
	return 0;
}

/* The result of a write, checked against what was sent. */
static int check_written(const struct http_response *resp, uint64_t size,
			 uint32_t crc, const char *bucket, const char *name,
			 struct store_object *out, struct err *e)
{
	struct store_object o;
	int rc = gcs_parse_object(resp->body.data, resp->body.len, &o, e);

	if (rc) {
		err_prefix(e, "gs://%s/%s", bucket, name);
		return rc;
	}
	return gcs_written_as(&o, size, crc, bucket, name, out, e);
}

int gcs_stat(struct gcs_client *c, const char *bucket, const char *name,
	     int64_t generation, struct store_object *out, struct err *e)
{
	struct http_request req = { .method = "GET", .max_body = 1 << 20 };
	struct http_response resp;
	struct buf url;
	int rc;

	buf_init(&url);
	http_response_init(&resp);
	rc = object_url(c, &url, false, bucket, name);
	if (!rc && generation > 0)
		rc = query_int(&url, "generation", generation);
	if (rc) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	req.url = url.data;
	rc = gcs_send(c, &req, NULL, &resp, e);
	if (!rc)
		rc = gcs_parse_object(resp.body.data, resp.body.len, out, e);
	if (rc)
		err_prefix(e, "gs://%s/%s", bucket, name);
out:
	buf_release(&url);
	http_response_release(&resp);
	return rc;
}

bool gcs_landed(struct gcs_client *c, const char *bucket, const char *name,
		uint64_t size, uint32_t crc, struct store_object *out)
{
	struct store_object now;
	struct err e;

	err_init(&e);
	if (gcs_stat(c, bucket, name, 0, &now, &e))
		return false;
	if (now.size != size || now.crc32c != crc) {
		store_object_release(&now);
		return false;
	}
	if (out)
		*out = now;
	else
		store_object_release(&now);
	return true;
}

int gcs_put(struct gcs_client *c, const char *bucket, const char *name,
	    const void *data, size_t len, int64_t if_generation_match,
	    struct store_object *out, struct err *e)
{
	struct http_request req = { .method = "POST", .max_body = 1 << 20 };
	struct http_response resp;
	struct buf url, hash;
	uint32_t crc = crc32c_update(0, data, len);
	char b64[9];
	const char *headers[3];
	int rc;

	buf_init(&url);
	buf_init(&hash);
	http_response_init(&resp);
	crc_base64(crc, b64);
	rc = object_url(c, &url, true, bucket, NULL) ||
	     http_query_append(&url, "uploadType", "media") ||
	     http_query_append(&url, "name", name) ||
	     (if_generation_match >= 0 &&
	      query_int(&url, "ifGenerationMatch", if_generation_match)) ||
	     buf_appendf(&hash, "x-goog-hash: crc32c=%s", b64);
	if (rc) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	headers[0] = "Content-Type: application/octet-stream";
	headers[1] = hash.data;
	headers[2] = NULL;
	req.url = url.data;
	req.body = data;
	req.body_len = len;
	/* A second create could overwrite someone else's write. */
	req.not_idempotent = true;
	req.precondition = if_generation_match >= 0;
	rc = gcs_send(c, &req, headers, &resp, e);
	if (rc == CLOUD_EPRECONDITION && resp.attempts > 1 &&
	    gcs_landed(c, bucket, name, len, crc, out)) {
		err_init(e);
		rc = 0;
		goto out;
	}
	if (rc)
		err_prefix(e, "gs://%s/%s", bucket, name);
	else
		rc = check_written(&resp, len, crc, bucket, name, out, e);
out:
	buf_release(&url);
	buf_release(&hash);
	http_response_release(&resp);
	return rc;
}

struct download {
	store_sink_fn sink;
	void *ud;
	struct http_response *resp;
	uint64_t start;     /* the first byte of the object wanted */
	uint64_t want;      /* bytes wanted from start */
	uint64_t got;       /* bytes handed to the caller */
	uint64_t skip;      /* bytes of this answer already handed over */
	bool first;         /* no byte of this answer seen yet */
	bool sink_failed;
	uint32_t crc;
};

static int download_sink(void *ud, const void *data, size_t len,
			 struct err *e)
{
	struct download *d = ud;
	const char *p = data;
	char cr[128];
	int rc;

	if (d->first) {
		d->first = false;
		/* A server that ignores Range sends the object whole. */
		if (d->start + d->got &&
		    !http_response_header(d->resp, "content-range", cr,
					  sizeof(cr)))
			d->skip = d->start + d->got;
	}
	if (d->skip) {
		size_t n = len < d->skip ? len : (size_t)d->skip;

		d->skip -= n;
		p += n;
		len -= n;
	}
	if (len > d->want - d->got)
		len = (size_t)(d->want - d->got);
	if (!len)
		return 0;
	rc = d->sink(d->ud, p, len, e);
	if (rc) {
		d->sink_failed = true;
		return rc;
	}
	d->crc = crc32c_update(d->crc, p, len);
	d->got += len;
	return 0;
}

int gcs_get_range(struct gcs_client *c, const char *bucket,
		  const struct store_object *meta, uint64_t start,
		  uint64_t len, store_sink_fn sink, void *ud, uint64_t *got,
		  uint32_t *crc, struct err *e)
{
	struct http_request req = { .method = "GET", .max_attempts = 1 };
	struct http_response resp;
	struct download d = { .sink = sink, .ud = ud, .resp = &resp,
			      .start = start, .want = len };
	struct http_retry retry;
	struct buf url, range;
	const char *headers[2] = { NULL, NULL };
	/* The whole object asks for "the rest" after a fault, as always. */
	bool whole = start == 0 && len == meta->size;
	const char *name = meta->name;
	int rc = 0;

	buf_init(&url);
	buf_init(&range);
	http_response_init(&resp);
	if (object_url(c, &url, false, bucket, name) ||
	    http_query_append(&url, "alt", "media") ||
	    query_int(&url, "generation", meta->generation)) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	req.url = url.data;
	req.sink = download_sink;
	req.sink_ud = &d;
	http_retry_init(&retry, &c->http);
	while (d.got < len) {
		uint64_t before = d.got;
		uint64_t from = start + d.got;

		buf_reset(&range);
		if ((from && whole &&
		     buf_appendf(&range, "Range: bytes=%" PRIu64 "-", from)) ||
		    (!whole && buf_appendf(&range, "Range: bytes=%" PRIu64
					   "-%" PRIu64, from,
					   start + len - 1))) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			goto out;
		}
		headers[0] = range.len ? range.data : NULL;
		d.first = true;
		d.skip = 0;
		resp.delivered = 0;
		resp.attempts = 0;
		rc = gcs_send(c, &req, headers, &resp, e);
		if (d.sink_failed)
			goto out;
		if (!rc && d.got < len)
			rc = err_set(e, CLOUD_ENETWORK,
				     "the download ended after %" PRIu64
				     " of %" PRIu64 " bytes", start + d.got,
				     start + len);
		if (!rc)
			break;
		if (rc == CLOUD_ENETWORK && d.got > before)
			http_retry_progress(&retry);
		if (!http_retry_again(&retry, rc, &resp)) {
			err_prefix(e, "gs://%s/%s (generation %" PRId64 ")",
				   bucket, name, meta->generation);
			goto out;
		}
		log_debug("gcs: resuming gs://%s/%s at byte %" PRIu64, bucket,
			  name, start + d.got);
	}
	rc = 0;
out:
	*got = d.got;
	*crc = d.crc;
	buf_release(&url);
	buf_release(&range);
	http_response_release(&resp);
	return rc;
}

/* One look-up of the generation, then its download; *replaced says the
 * generation found was gone before any byte of it reached the sink. */
static int get_once(struct gcs_client *c, const char *bucket,
		    const char *name, int64_t generation, store_sink_fn sink,
		    void *ud, struct store_object *out, bool *replaced,
		    struct err *e)
{
	struct store_object meta;
	uint64_t got = 0;
	uint32_t crc = 0;
	int rc;

	*replaced = false;
	rc = gcs_stat(c, bucket, name, generation, &meta, e);
	if (rc)
		return rc;
	if (xfer_get_parallel(&meta))
		rc = xfer_get_ranges(c, bucket, &meta, sink, ud, &got, &crc,
				     e);
	else
		rc = gcs_get_range(c, bucket, &meta, 0, meta.size, sink, ud,
				   &got, &crc, e);
	if (rc)
		goto out;
	if (got != meta.size || crc != meta.crc32c) {
		rc = err_set(e, CLOUD_ECORRUPT,
			     "gs://%s/%s (generation %" PRId64 "): the bytes "
			     "received (%" PRIu64 ", crc32c %08x) do not "
			     "match the object (%" PRIu64 " bytes, crc32c "
			     "%08x); they were damaged on the way: download "
			     "it again",
			     bucket, name, meta.generation, got, crc,
			     meta.size, meta.crc32c);
		goto out;
	}
	if (out) {
		*out = meta;
		meta.name = NULL;
	}
out:
	*replaced = rc == CLOUD_ENOTFOUND && got == 0;
	store_object_release(&meta);
	return rc;
}

/* Objects such as control.json are replaced all the time: when the
 * generation found is replaced before its download starts, the current
 * one is looked up again rather than reported missing. */
#define GET_REPLACED_TRIES 8

int gcs_get(struct gcs_client *c, const char *bucket, const char *name,
	    int64_t generation, store_sink_fn sink, void *ud,
	    struct store_object *out, struct err *e)
{
	for (int attempt = 1;; attempt++) {
		bool replaced;
		int rc = get_once(c, bucket, name, generation, sink, ud, out,
				  &replaced, e);

		if (!replaced || generation || attempt == GET_REPLACED_TRIES)
			return rc;
		log_debug("gcs: gs://%s/%s was replaced while read; reading "
			  "the new generation", bucket, name);
	}
}

struct list_entry {
	const char *name;
	json_t *item; /* NULL for a prefix */
};

static int list_page(json_t *root, store_list_fn fn, void *ud,
		     struct err *e)
{
	json_t *items = json_object_get(root, "items");
	json_t *prefixes = json_object_get(root, "prefixes");
	size_t ni = json_array_size(items), np = json_array_size(prefixes);
	size_t i = 0, j = 0;

	if ((items && !json_is_array(items)) ||
	    (prefixes && !json_is_array(prefixes)))
		return corrupt(e, "object list", items && !json_is_array(items)
						 ? "items" : "prefixes");
	/* Both arrays are in name order within the page: merge them. */
	while (i < ni || j < np) {
		const char *pn = j < np ? json_string_value(
						  json_array_get(prefixes, j))
					: NULL;
		json_t *it = i < ni ? json_array_get(items, i) : NULL;
		const char *in = it ? json_string_value(
					      json_object_get(it, "name"))
				    : NULL;
		struct store_object o;
		int rc;

		if (j < np && !pn)
			return corrupt(e, "object list", "prefixes");
		if (it && !in)
			return corrupt(e, "object list", "items[].name");
		if (in && (!pn || strcmp(in, pn) < 0)) {
			rc = object_from_json(it, &o, e);
			if (rc)
				return rc;
			rc = fn(ud, &o, false);
			store_object_release(&o);
			i++;
		} else {
			memset(&o, 0, sizeof(o));
			o.name = (char *)pn;
			rc = fn(ud, &o, true);
			j++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

int gcs_list(struct gcs_client *c, const char *bucket, const char *prefix,
	     const char *delimiter, unsigned max_results, store_list_fn fn,
	     void *ud, struct err *e)
{
	struct http_request req = { .method = "GET",
				    .max_body = LIST_PAGE_MAX };
	struct http_response resp;
	struct buf url;
	char *token = NULL;
	int rc = 0;

	buf_init(&url);
	http_response_init(&resp);
	do {
		json_t *root, *next;

		buf_reset(&url);
		if (object_url(c, &url, false, bucket, NULL) ||
		    (prefix && *prefix &&
		     http_query_append(&url, "prefix", prefix)) ||
		    (delimiter && *delimiter &&
		     http_query_append(&url, "delimiter", delimiter)) ||
		    (max_results && query_int(&url, "maxResults",
					      max_results)) ||
		    (token && http_query_append(&url, "pageToken", token))) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			break;
		}
		req.url = url.data;
		rc = gcs_send(c, &req, NULL, &resp, e);
		if (rc) {
			err_prefix(e, "listing gs://%s/%s", bucket,
				   prefix ? prefix : "");
			break;
		}
		root = json_loadb(resp.body.data ? resp.body.data : "",
				  resp.body.len, 0, NULL);
		if (!json_is_object(root)) {
			json_decref(root);
			rc = err_set(e, CLOUD_ECORRUPT,
				     "listing gs://%s/%s: malformed object "
				     "list from Cloud Storage: not a JSON "
				     "object",
				     bucket, prefix ? prefix : "");
			break;
		}
		rc = list_page(root, fn, ud, e);
		next = json_object_get(root, "nextPageToken");
		if (!rc && next && !json_is_string(next))
			rc = corrupt(e, "object list", "nextPageToken");
		if (!rc && json_string_value(next) && token &&
		    strcmp(json_string_value(next), token) == 0)
			rc = err_set(e, CLOUD_ECORRUPT,
				     "listing gs://%s: the server sent the "
				     "same page token twice", bucket);
		free(token);
		token = NULL;
		if (!rc && json_string_value(next) &&
		    *json_string_value(next)) {
			token = strdup(json_string_value(next));
			if (!token)
				rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		}
		json_decref(root);
	} while (!rc && token);
	free(token);
	buf_release(&url);
	http_response_release(&resp);
	return rc;
}

static int delete_object(struct gcs_client *c, const char *bucket,
			 const char *name, int64_t if_generation_match,
			 bool repeatable, struct err *e)
{
	struct http_request req = { .method = "DELETE" };
	struct http_response resp;
	struct buf url;
	int rc;

	buf_init(&url);
	http_response_init(&resp);
	if (object_url(c, &url, false, bucket, name) ||
	    (if_generation_match >= 0 &&
	     query_int(&url, "ifGenerationMatch", if_generation_match))) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	req.url = url.data;
	req.not_idempotent = !repeatable;
	req.precondition = if_generation_match >= 0;
	rc = gcs_send(c, &req, NULL, &resp, e);
	if (rc)
		err_prefix(e, "deleting gs://%s/%s", bucket, name);
out:
	buf_release(&url);
	http_response_release(&resp);
	return rc;
}

int gcs_delete(struct gcs_client *c, const char *bucket, const char *name,
	       int64_t if_generation_match, struct err *e)
{
	return delete_object(c, bucket, name, if_generation_match, false, e);
}

int gcs_delete_own(struct gcs_client *c, const char *bucket,
		   const char *name, struct err *e)
{
	int rc = delete_object(c, bucket, name, STORE_ANY_GENERATION, true,
			       e);

	if (rc == CLOUD_ENOTFOUND) {
		err_init(e);
		rc = 0;
	}
	return rc;
}

int gcs_compose(struct gcs_client *c, const char *bucket, const char *dest,
		const char *const *sources, size_t n,
		int64_t if_generation_match, struct store_object *out,
		struct err *e)
{
	struct http_request req = { .method = "POST", .max_body = 1 << 20 };
	struct http_response resp;
	struct buf url, body;
	const char *headers[] = { "Content-Type: application/json", NULL };
	struct store_object o;
	int rc = 0;

	if (n == 0 || n > 32)
		return err_set(e, CLOUD_EINVAL,
			       "composing gs://%s/%s: %zu sources given; "
			       "Cloud Storage composes 1 to 32", bucket, dest,
			       n);
	buf_init(&url);
	buf_init(&body);
	http_response_init(&resp);
	if (buf_appends(&body, "{\"sourceObjects\":["))
		rc = CLOUD_ENOMEM;
	for (size_t i = 0; i < n && !rc; i++)
		if ((i && buf_appends(&body, ",")) ||
		    buf_appends(&body, "{\"name\":") ||
		    json_append_string(&body, sources[i], strlen(sources[i])) ||
		    buf_appends(&body, "}"))
			rc = CLOUD_ENOMEM;
	if (rc || buf_appends(&body, "],\"destination\":{\"contentType\":"
			      "\"application/octet-stream\"}}") ||
	    object_url(c, &url, false, bucket, dest) ||
	    buf_appends(&url, "/compose") ||
	    (if_generation_match >= 0 &&
	     query_int(&url, "ifGenerationMatch", if_generation_match))) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	req.url = url.data;
	req.body = body.data;
	req.body_len = body.len;
	req.not_idempotent = true;
	req.precondition = if_generation_match >= 0;
	rc = gcs_send(c, &req, headers, &resp, e);
	if (!rc)
		rc = gcs_parse_object(resp.body.data, resp.body.len, &o, e);
	if (rc) {
		err_prefix(e, "composing gs://%s/%s", bucket, dest);
		goto out;
	}
	if (out)
		*out = o;
	else
		store_object_release(&o);
out:
	buf_release(&url);
	buf_release(&body);
	http_response_release(&resp);
	return rc;
}

int gcs_upload_begin(struct gcs_client *c, const char *bucket,
		     const char *name, int64_t if_generation_match,
		     size_t chunk, struct gcs_upload *u, struct err *e)
{
	struct http_request req = { .method = "POST", .max_body = 1 << 20 };
	struct http_response resp;
	struct buf url;
	const char *headers[] = {
		"X-Upload-Content-Type: application/octet-stream", NULL };
	char loc[4096];
	int rc;

	memset(u, 0, sizeof(*u));
	buf_init(&u->pending);
	u->c = c;
	if (chunk == 0)
		chunk = GCS_CHUNK_DEFAULT;
	u->chunk = (chunk + GCS_CHUNK_ALIGN - 1) / GCS_CHUNK_ALIGN *
		   GCS_CHUNK_ALIGN;
	u->bucket = strdup(bucket);
	u->name = strdup(name);
	buf_init(&url);
	http_response_init(&resp);
	if (!u->bucket || !u->name ||
	    object_url(c, &url, true, bucket, NULL) ||
	    http_query_append(&url, "uploadType", "resumable") ||
	    http_query_append(&url, "name", name) ||
	    (if_generation_match >= 0 &&
	     query_int(&url, "ifGenerationMatch", if_generation_match))) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	/* Starting a session changes nothing anyone can see, so it is
	 * retried like a read whatever the precondition. */
	req.url = url.data;
	rc = gcs_send(c, &req, headers, &resp, e);
	if (!rc && !http_response_header(&resp, "location", loc, sizeof(loc)))
		rc = err_set(e, CLOUD_ECORRUPT,
			     "Cloud Storage started an upload session without "
			     "saying where (no Location header)");
	if (rc) {
		err_prefix(e, "uploading gs://%s/%s", bucket, name);
		goto out;
	}
	if (loc[0] == '/') {
		struct buf abs;

		buf_init(&abs);
		if (buf_appendf(&abs, "%s%s", c->base, loc)) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			goto out;
		}
		u->session = buf_detach(&abs);
	} else {
		u->session = strdup(loc);
	}
	if (!u->session)
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
out:
	buf_release(&url);
	http_response_release(&resp);
	if (rc)
		gcs_upload_release(u);
	return rc;
}

/* The first byte the server does not have, from a 308's "Range:
 * bytes=0-N" (none: nothing persisted). */
static int persisted_from(const struct http_response *resp, uint64_t *out,
			  struct err *e)
{
	char r[128];
	uint64_t last;
	char *dash;

	if (!http_response_header(resp, "range", r, sizeof(r))) {
		*out = 0;
		return 0;
	}
	dash = strchr(r, '-');
	if (strncmp(r, "bytes=0-", 8) != 0 || !dash ||
	    !parse_u64(dash + 1, &last))
		return err_set(e, CLOUD_ECORRUPT,
			       "Cloud Storage answered an upload with a "
			       "malformed Range header");
	*out = last + 1;
	return 0;
}

/* Takes in the server's word on how far it got. */
static int advance(struct gcs_upload *u, uint64_t persisted, struct err *e)
{
	if (persisted < u->persisted ||
	    persisted > u->persisted + u->pending.len)
		return err_set(e, CLOUD_ECORRUPT,
			       "uploading gs://%s/%s: the server reports %"
			       PRIu64 " bytes received, but %" PRIu64 " were "
			       "confirmed and %" PRIu64 " sent", u->bucket,
			       u->name, persisted, u->persisted,
			       u->persisted + u->pending.len);
	buf_consume(&u->pending, (size_t)(persisted - u->persisted));
	u->persisted = persisted;
	return 0;
}

/* Asks the session how far it got after a fault: 0 with *done set when
 * the object was already completed (resp then holds it). */
static int query_session(struct gcs_upload *u, struct http_response *resp,
			 bool *done, struct err *e)
{
	struct http_request req = { .method = "PUT", .url = u->session,
				    .max_body = 1 << 20 };
	const char *headers[] = { "Content-Range: bytes */*", NULL };
	uint64_t p;
	int rc;

	*done = false;
	rc = gcs_send(u->c, &req, headers, resp, e);
	if (rc == CLOUD_ENOTFOUND || resp->status == 410)
		return err_set(e, CLOUD_EHTTP,
			       "uploading gs://%s/%s: the upload session "
			       "expired or was cancelled; start the upload "
			       "again", u->bucket, u->name);
	if (rc)
		return rc;
	if (resp->status == 200 || resp->status == 201) {
		*done = true;
		return 0;
	}
	if (resp->status != 308)
		return err_set(e, CLOUD_ECORRUPT,
			       "uploading gs://%s/%s: unexpected HTTP %ld to "
			       "a status query", u->bucket, u->name,
			       resp->status);
	rc = persisted_from(resp, &p, e);
	return rc ? rc : advance(u, p, e);
}

/*
 * Sends what is pending: when final, all of it and the total size; else
 * the largest multiple of GCS_CHUNK_ALIGN, and stops once less than a
 * chunk is left. After any fault, asks the session where to resume.
 */
static int flush(struct gcs_upload *u, bool final, struct http_response *resp,
		 struct err *e)
{
	struct http_retry retry;
	struct buf cr, hash;
	int rc = 0;

	buf_init(&cr);
	buf_init(&hash);
	http_retry_init(&retry, &u->c->http);
	if (final) {
		char b64[9];

		crc_base64(u->crc, b64);
		if (buf_appendf(&hash, "x-goog-hash: crc32c=%s", b64))
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	while (!rc && (final || u->pending.len >= u->chunk)) {
		struct http_request req = { .method = "PUT", .url = u->session,
					    .max_attempts = 1,
					    .max_body = 1 << 20 };
		const char *headers[3] = { NULL, hash.data, NULL };
		size_t n = final ? u->pending.len
				 : u->pending.len / GCS_CHUNK_ALIGN *
					   GCS_CHUNK_ALIGN;
		uint64_t before = u->persisted;
		bool done = false;

		buf_reset(&cr);
		if (n == 0)
			rc = buf_appendf(&cr, "Content-Range: bytes */%" PRIu64,
					 u->total);
		else
			rc = buf_appendf(&cr, "Content-Range: bytes %" PRIu64
					 "-%" PRIu64 "/", u->persisted,
					 u->persisted + n - 1) ||
			     (final ? buf_appendf(&cr, "%" PRIu64, u->total)
				    : buf_appends(&cr, "*"));
		if (rc) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			break;
		}
		headers[0] = cr.data;
		req.body = u->pending.data ? u->pending.data : "";
		req.body_len = n;
		resp->attempts = 0;
		rc = gcs_send(u->c, &req, headers, resp, e);
		if (rc) {
			struct err qe;

			if (!http_retry_again(&retry, rc, resp))
				break;
			log_debug("gcs: asking where gs://%s/%s stands after "
				  "a fault", u->bucket, u->name);
			err_init(&qe);
			rc = query_session(u, resp, &done, &qe);
			if (rc) {
				err_set(e, qe.code, "%s", qe.msg);
				break;
			}
		} else if (resp->status == 200 || resp->status == 201) {
			done = true;
		} else if (resp->status == 308) {
			uint64_t p;

			rc = persisted_from(resp, &p, e);
			if (!rc)
				rc = advance(u, p, e);
		} else {
			rc = err_set(e, CLOUD_ECORRUPT,
				     "unexpected HTTP %ld to a chunk",
				     resp->status);
		}
		if (!rc && done && !final)
			rc = err_set(e, CLOUD_ECORRUPT,
				     "the server completed the object before "
				     "its last chunk");
		if (rc || done)
			break;
		if (u->persisted > before)
			http_retry_progress(&retry);
		else if (!http_retry_again(&retry, CLOUD_ENETWORK, resp))
			rc = err_set(e, CLOUD_ENETWORK,
				     "the server keeps taking none of the "
				     "data");
	}
	if (rc)
		err_prefix(e, "uploading gs://%s/%s at byte %" PRIu64,
			   u->bucket, u->name, u->persisted);
	buf_release(&cr);
	buf_release(&hash);
	return rc;
}

int gcs_upload_write(struct gcs_upload *u, const void *data, size_t len,
		     struct err *e)
{
	struct http_response resp;
	const char *p = data;
	int rc = 0;

	if (u->finished)
		return err_set(e, CLOUD_EINVAL,
			       "uploading gs://%s/%s: already finished",
			       u->bucket, u->name);
	http_response_init(&resp);
	while (len && !rc) {
		size_t n = u->chunk - u->pending.len;

		if (n > len)
			n = len;
		if (buf_append(&u->pending, p, n)) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			break;
		}
		u->crc = crc32c_update(u->crc, p, n);
		u->total += n;
		p += n;
		len -= n;
		if (u->pending.len >= u->chunk)
			rc = flush(u, false, &resp, e);
	}
	http_response_release(&resp);
	return rc;
}

int gcs_upload_finish(struct gcs_upload *u, struct store_object *out,
		      struct err *e)
{
	struct http_response resp;
	int rc;

	if (u->finished)
		return err_set(e, CLOUD_EINVAL,
			       "uploading gs://%s/%s: already finished",
			       u->bucket, u->name);
	http_response_init(&resp);
	rc = flush(u, true, &resp, e);
	if (!rc)
		rc = check_written(&resp, u->total, u->crc, u->bucket, u->name,
				   out, e);
	u->finished = true;
	http_response_release(&resp);
	return rc;
}

void gcs_upload_release(struct gcs_upload *u)
{
	if (u->session && !u->finished) {
		struct http_request req = { .method = "DELETE",
					    .url = u->session,
					    .max_attempts = 1 };
		struct http_response resp;

		/* Cancelling is a courtesy: an abandoned session expires
		 * within a week and never becomes an object. */
		http_response_init(&resp);
		gcs_send(u->c, &req, NULL, &resp, NULL);
		http_response_release(&resp);
	}
	free(u->bucket);
	free(u->name);
	free(u->session);
	buf_release(&u->pending);
	memset(u, 0, sizeof(*u));
}
