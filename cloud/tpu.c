/*
 * tpu.c: the Cloud TPU API client (v2alpha1): queued resources, nodes,
 * their long-running operations and guest attributes. Every call goes
 * through auth_send (token, one retry on 401) and http_do (retries of
 * 408/429/5xx and dropped connections); calls that change state carry a
 * requestId or are harmless twice, so they are marked as retryable too.
 * Waits poll with backoff from SLICECTL_TPU_POLL_MS (default 1000) up to
 * 15 s, and a 4xx answer gets advice for the TPU API (see tpu_hint).
 */
#include "cloud/tpu.h"
#include "cloud/auth.h"
#include "cloud/cloud.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define TPU_DEFAULT_ENDPOINT "https://tpu.googleapis.com/"
#define TPU_API_VERSION "v2alpha1"
#define POLL_DEFAULT_MS 1000u
#define POLL_MAX_MS 15000u
/* The API accepts a create within seconds; an operation that is not done
 * after this long is reported rather than waited on forever. */
#define CREATE_OP_LIMIT_MS (30u * 60 * 1000)
#define PAGES_MAX 10000

struct tpu_client {
	struct http_client http;
	struct auth auth;
	char *base;    /* the endpoint, ending with '/' */
	char *project;
	char *zone;
	char *parent;  /* projects/P/locations/Z */
	unsigned poll_ms;
};

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

static bool given(const char *s)
{
	return s && *s;
}

/* ---- hints ---- */

static bool letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether needle occurs in hay, in any case, at the start of a word
 * ("force" is not in "enforced"); a needle that starts with a capital is
 * a camelCase tail and may follow letters ("Duration" in
 * "validUntilDuration"). */
static bool contains(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	bool tail = needle[0] >= 'A' && needle[0] <= 'Z';

	for (const char *p = hay; p && *p; p++)
		if ((tail || p == hay || !letter(p[-1])) &&
		    strncasecmp(p, needle, n) == 0)
			return true;
	return false;
}

/* The fields a 400 names, most specific first, and what to do. */
static const struct field_hint {
	const char *word;
	const char *hint;
} field_hints[] = {
	{ "force", "; the queued resource still has nodes: delete it with "
	  "--force to delete them too" },
	{ "multiNodeParams", "; the node count or node name prefix was "
	  "refused: check the slice count and the name" },
	{ "nodeCount", "; the node count was refused: check the slice "
	  "count" },
	{ "acceleratorType", "; the accelerator type was refused: see the "
	  "zone's types with `gcloud compute tpus accelerator-types list "
	  "--zone=ZONE`" },
	{ "accelerator type", "; the accelerator type was refused: see the "
	  "zone's types with `gcloud compute tpus accelerator-types list "
	  "--zone=ZONE`" },
	{ "runtimeVersion", "; the runtime version was refused: see the "
	  "zone's versions with `gcloud compute tpus tpu-vm versions list "
	  "--zone=ZONE`" },
	{ "runtime version", "; the runtime version was refused: see the "
	  "zone's versions with `gcloud compute tpus tpu-vm versions list "
	  "--zone=ZONE`" },
	{ "reservation", "; the reservation was refused: it must exist in "
	  "this project and zone and match the accelerator type" },
	{ "queueingPolicy", "; the queueing durations (valid until, valid "
	  "after) were refused" },
	{ "Duration", "; the queueing durations (valid until, valid after) "
	  "were refused" },
	{ "label", "; a label was refused: keys and values are at most 63 "
	  "lowercase letters, digits, _ and -, keys start with a letter" },
	{ "metadata", "; a metadata entry was refused: keys are letters, "
	  "digits, - and _, values at most 256 KiB, 512 KiB in all" },
	{ "subnetwork", "; the network or subnetwork was refused: it must "
	  "exist, as projects/P/global/networks/N or "
	  "projects/P/regions/R/subnetworks/S" },
	{ "network", "; the network or subnetwork was refused: it must "
	  "exist, as projects/P/global/networks/N or "
	  "projects/P/regions/R/subnetworks/S" },
	{ "serviceAccount", "; the service account was refused: it must "
	  "exist, and you need roles/iam.serviceAccountUser on it" },
	{ "service account", "; the service account was refused: it must "
	  "exist, and you need roles/iam.serviceAccountUser on it" },
	{ "scope", "; a service account scope was refused: scopes are URLs "
	  "such as https://www.googleapis.com/auth/cloud-platform" },
	{ "tags", "; a network tag was refused: tags are lowercase letters, "
	  "digits and -, starting with a letter" },
	{ "queuedResourceId", "; the name was refused: use lowercase "
	  "letters, digits and -, starting with a letter" },
	{ "nodeId", "; the name was refused: use lowercase letters, digits "
	  "and -, starting with a letter" },
	{ NULL, NULL },
};

/* A 409's advice names the resource when the message quotes it. */
static _Thread_local char conflict_hint[256];

static const char *hint_409(const char *message)
{
	const char *q = message ? strchr(message, '\'') : NULL;
	const char *end = q ? strchr(q + 1, '\'') : NULL;

	if (q && end) {
		const char *name = q + 1;
		size_t n;

		for (const char *p = name; p < end; p++)
			if (*p == '/')
				name = p + 1;
		n = (size_t)(end - name);
		if (n && n < 100) {
			snprintf(conflict_hint, sizeof(conflict_hint),
				 "; the name is taken: pick another, or "
				 "`slicectl delete %.*s` first", (int)n, name);
			return conflict_hint;
		}
	}
	return "; the name is taken: pick another, or `slicectl delete "
	       "NAME` first";
}

static const char *tpu_hint(long status, const char *message)
{
	switch (status) {
	case 400:
		if (contains(message, "quota"))
			return "; the project's TPU quota in this zone does "
			       "not cover the request: ask for more (Cloud "
			       "console, IAM & Admin > Quotas), ask for fewer "
			       "or smaller slices, or use spot or best-effort "
			       "capacity";
		for (const struct field_hint *f = field_hints; f->word; f++)
			if (contains(message, f->word))
				return f->hint;
		return "; the API refused a value of the request: the message "
		       "names the field; correct the option that sets it";
	case 403:
		if (contains(message, "SERVICE_DISABLED") ||
		    contains(message, "has not been used") ||
		    contains(message, "is disabled"))
			return "; the TPU API is not enabled in this project: "
			       "`gcloud services enable tpu.googleapis.com`";
		if (contains(message, "quota"))
			return "; the project has no TPU quota in this zone "
			       "for this accelerator: ask for it, or use "
			       "another zone";
		return "; the account lacks roles/tpu.admin on the project, "
		       "or the TPU API is not enabled (`gcloud services "
		       "enable tpu.googleapis.com`), or the zone has no TPU "
		       "quota for this project";
	case 404:
		return "; no such queued resource or node in this project and "
		       "zone: check --project and --zone, or see `slicectl "
		       "list`";
	case 409:
		return hint_409(message);
	case 429:
		return "; the TPU API's quota or rate limit for this project "
		       "was reached: try again in a while";
	default:
		return NULL;
	}
}

/* ---- the client ---- */

static unsigned poll_base_ms(void)
{
	return env_number("SLICECTL_TPU_POLL_MS", 1, 600000, POLL_DEFAULT_MS);
}

static void client_free(struct tpu_client *c)
{
	free(c->base);
	free(c->project);
	free(c->zone);
	free(c->parent);
	free(c);
}

int tpu_open(struct tpu_client **out, const char *project, const char *zone,
	     struct err *e)
{
	const char *endpoint = getenv("SLICECTL_TPU_ENDPOINT");
	struct tpu_client *c;
	struct buf b;
	int rc;

	*out = NULL;
	if (!given(project))
		return err_set(e, CLOUD_EINVAL,
			       "no project for the TPU API: give --project or "
			       "set CLOUDSDK_CORE_PROJECT");
	if (!given(zone))
		return err_set(e, CLOUD_EINVAL,
			       "no zone for the TPU API: give --zone or set "
			       "CLOUDSDK_COMPUTE_ZONE");
	if (!given(endpoint))
		endpoint = TPU_DEFAULT_ENDPOINT;
	c = calloc(1, sizeof(*c));
	if (!c)
		return nomem(e);
	buf_init(&b);
	if (buf_appends(&b, endpoint) == 0 &&
	    (b.data[b.len - 1] == '/' || buf_appends(&b, "/") == 0))
		c->base = buf_detach(&b);
	if (buf_appendf(&b, "projects/%s/locations/%s", project, zone) == 0)
		c->parent = buf_detach(&b);
	buf_release(&b);
	c->project = strdup(project);
	c->zone = strdup(zone);
	if (!c->base || !c->parent || !c->project || !c->zone) {
		client_free(c);
		return nomem(e);
	}
	c->poll_ms = poll_base_ms();
	rc = auth_http_init(&c->auth, &c->http, NULL, e);
	if (rc) {
		client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void tpu_close(struct tpu_client *c)
{
	if (!c)
		return;
	http_client_release(&c->http);
	auth_release(&c->auth);
	client_free(c);
}

const char *tpu_parent(const struct tpu_client *c)
{
	return c->parent;
}

/* ---- URLs and requests ---- */

/* base + "v2alpha1/projects/P/locations/Z/COLLECTION[/ID][SUFFIX]". */
static int url_for(const struct tpu_client *c, struct buf *u,
		   const char *collection, const char *id, const char *suffix)
{
	if (buf_appendf(u, "%s" TPU_API_VERSION "/projects/", c->base) ||
	    http_escape_append(u, c->project) ||
	    buf_appends(u, "/locations/") || http_escape_append(u, c->zone) ||
	    buf_appends(u, "/") || buf_appends(u, collection))
		return CLOUD_ENOMEM;
	if (id && (buf_appends(u, "/") || http_escape_append(u, id)))
		return CLOUD_ENOMEM;
	if (suffix && buf_appends(u, suffix))
		return CLOUD_ENOMEM;
	return 0;
}

/* A random (version 4) UUID, for requestId. */
static int uuid4(char out[37], struct err *e)
{
	unsigned char r[16];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(r)) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		got = 0;
		while (fd >= 0 && got < sizeof(r)) {
			ssize_t n = read(fd, r + got, sizeof(r) - got);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (fd >= 0)
			close(fd);
		if (got < sizeof(r))
			return err_set(e, CLOUD_EIO,
				       "cannot read random bytes for a "
				       "request id");
	}
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
		 r[10], r[11], r[12], r[13], r[14], r[15]);
	return 0;
}

/* For messages: the URL without its query. */
static void short_url(const char *url, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)strcspn(url, "?#"), url);
}

/*
 * Sends one request. changes: it changes state, so http_do must be told it
 * is not idempotent; every such call here is nevertheless safe to repeat
 * (a requestId the server deduplicates by, or a reset that a second reset
 * does not harm), which is what precondition says.
 */
static int call(struct tpu_client *c, const char *method, const char *url,
		const char *body, bool changes, struct http_response *resp,
		struct err *e)
{
	static const char *const json_headers[] = {
		"Content-Type: application/json", NULL
	};
	struct http_request req = { .method = method, .url = url,
				    .hint = tpu_hint };

	if (body) {
		req.body = body;
		req.body_len = strlen(body);
	}
	req.not_idempotent = changes;
	req.precondition = changes;
	return auth_send(&c->auth, &c->http, &req, body ? json_headers : NULL,
			 resp, e);
}

/* ---- operations ---- */

static int op_corrupt(struct err *e, const char *field, const char *want)
{
	return err_set(e, CLOUD_ECORRUPT,
		       "malformed operation from the TPU API: \"%s\" is %s",
		       field, want);
}

/* base + "v2alpha1/" + the operation's name, each segment escaped. */
static int op_url(const struct tpu_client *c, const char *name,
		  struct buf *u, struct err *e)
{
	const char *p = name;

	if (buf_appendf(u, "%s" TPU_API_VERSION "/", c->base))
		return nomem(e);
	for (;;) {
		size_t n = strcspn(p, "/");
		char *seg = strndup(p, n);
		int rc;

		if (!seg)
			return nomem(e);
		if (!n || strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0) {
			free(seg);
			return op_corrupt(e, "name", "not an operation name");
		}
		rc = http_escape_append(u, seg);
		free(seg);
		if (rc)
			return nomem(e);
		if (!p[n])
			return 0;
		if (buf_appends(u, "/"))
			return nomem(e);
		p += n + 1;
	}
}

/* Backoff between polls, from the client's base to POLL_MAX_MS, within an
 * optional deadline (mono_ms(); 0: none). */
struct poller {
	unsigned base_ms;
	unsigned delay_ms;
	uint64_t start;
	uint64_t deadline;
};

static void poller_init(struct poller *p, const struct tpu_client *c,
			uint64_t start, unsigned timeout_ms)
{
	p->base_ms = c->poll_ms;
	p->delay_ms = c->poll_ms;
	p->start = start;
	p->deadline = timeout_ms ? start + timeout_ms : 0;
}

/* Sleeps until the next poll; false once the deadline has passed. The
 * last sleep ends at the deadline, so one more poll happens there. */
static bool poller_sleep(struct poller *p)
{
	uint64_t now = mono_ms(), d = p->delay_ms;

	if (p->deadline) {
		if (now >= p->deadline)
			return false;
		if (p->deadline - now < d)
			d = p->deadline - now;
	}
	proc_sleep_ms(d, true);
	if (p->delay_ms < POLL_MAX_MS) {
		p->delay_ms *= 2;
		if (p->delay_ms > POLL_MAX_MS)
			p->delay_ms = POLL_MAX_MS;
	}
	return true;
}

/* Something moved: poll soon again. */
static void poller_moved(struct poller *p)
{
	p->delay_ms = p->base_ms;
}

static double seconds(uint64_t ms)
{
	return (double)ms / 1000.0;
}

/* Polls the operation an answer holds until it is done; its error
 * becomes CLOUD_EFAILED with "code N: message". */
static int op_wait(struct tpu_client *c, const struct http_response *first,
		   const char *what, struct poller *p, struct err *e)
{
	struct tpu_operation op = { 0 };
	struct http_response resp;
	struct buf url;
	int rc;

	http_response_init(&resp);
	buf_init(&url);
	rc = tpu_operation_parse(first->body.data, first->body.len, &op, e);
	if (rc)
		err_prefix(e, "%s", what);
	while (!rc && !op.done) {
		char shown[512];

		if (!poller_sleep(p)) {
			rc = err_set(e, CLOUD_ETIMEDOUT,
				     "%s: operation %s not done after %.1f s",
				     what, op.name,
				     seconds(mono_ms() - p->start));
			break;
		}
		buf_reset(&url);
		rc = op_url(c, op.name, &url, e);
		if (!rc)
			rc = call(c, "GET", url.data, NULL, false, &resp, e);
		if (!rc) {
			rc = tpu_operation_parse(resp.body.data, resp.body.len,
						 &op, e);
			if (rc) {
				short_url(url.data, shown, sizeof(shown));
				err_prefix(e, "GET %s", shown);
			}
		}
	}
	if (!rc && op.failed)
		rc = err_set(e, CLOUD_EFAILED, "%s failed: code %d: %s", what,
			     op.code, op.message);
	free(op.name);
	buf_release(&url);
	http_response_release(&resp);
	return rc;
}

/* ---- queued resources ---- */

/* out is void so that one reader serves queued resources, nodes and host
 * keys alike. */
typedef int (*answer_fn)(const struct http_response *resp, void *out,
			 struct err *e);

/* A read, whatever its method: safe to retry. A parse error names the
 * request, since the same parser serves several. */
static int read_one(struct tpu_client *c, const char *method,
		    const char *collection, const char *id, const char *suffix,
		    const char *body, answer_fn parse, void *out,
		    struct err *e)
{
	struct http_response resp;
	struct buf url;
	int rc;

	http_response_init(&resp);
	buf_init(&url);
	if (url_for(c, &url, collection, id, suffix))
		rc = nomem(e);
	else
		rc = call(c, method, url.data, body, false, &resp, e);
	if (!rc) {
		rc = parse(&resp, out, e);
		if (rc)
			err_prefix(e, "%s %s", method, url.data);
	}
	buf_release(&url);
	http_response_release(&resp);
	return rc;
}

static int qr_answer(const struct http_response *resp, void *out,
		     struct err *e)
{
	return tpu_qr_parse(resp->body.data, resp->body.len, out, e);
}

int tpu_qr_get(struct tpu_client *c, const char *id, struct tpu_qr *out,
	       struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (!given(id))
		return err_set(e, CLOUD_EINVAL, "no queued resource named");
	return read_one(c, "GET", "queuedResources", id, NULL, NULL,
			qr_answer, out, e);
}

static int list_page(const struct http_response *resp, struct tpu_qr **v,
		     size_t *n, char **next, struct err *e)
{
	json_t *root, *items, *token;
	json_error_t jerr;
	int rc = 0;

	*next = NULL;
	root = json_loadb(resp->body.data ? resp->body.data : "",
			  resp->body.len, 0, &jerr);
	if (!root)
		return err_set(e, CLOUD_ECORRUPT,
			       "malformed queued resource list from the TPU "
			       "API: not JSON (%s)", jerr.text);
	items = json_object_get(root, "queuedResources");
	token = json_object_get(root, "nextPageToken");
	if (!json_is_object(root))
		rc = err_set(e, CLOUD_ECORRUPT,
			     "malformed queued resource list from the TPU "
			     "API: not a JSON object");
	else if (items && !json_is_null(items) && !json_is_array(items))
		rc = err_set(e, CLOUD_ECORRUPT,
			     "malformed queued resource list from the TPU "
			     "API: \"queuedResources\" is not an array");
	else if (token && !json_is_null(token) && !json_is_string(token))
		rc = err_set(e, CLOUD_ECORRUPT,
			     "malformed queued resource list from the TPU "
			     "API: \"nextPageToken\" is not a string");
	if (!rc && json_array_size(items)) {
		size_t add = json_array_size(items);
		struct tpu_qr *grown = realloc(*v, (*n + add) * sizeof(**v));

		if (!grown)
			rc = nomem(e);
		else
			*v = grown;
		for (size_t i = 0; !rc && i < add; i++) {
			rc = tpu_qr_from_json(json_array_get(items, i), NULL,
					      0, &grown[*n], e);
			if (rc)
				err_prefix(e, "queuedResources[%zu]", i);
			else
				(*n)++;
		}
	}
	if (!rc && given(json_string_value(token)) &&
	    !(*next = strdup(json_string_value(token))))
		rc = nomem(e);
	json_decref(root);
	return rc;
}

int tpu_qr_list(struct tpu_client *c, struct tpu_qr **out, size_t *n,
		struct err *e)
{
	struct tpu_qr *v = NULL;
	struct http_response resp;
	struct buf url;
	char *token = NULL;
	size_t count = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	http_response_init(&resp);
	buf_init(&url);
	for (unsigned page = 0;; page++) {
		char *next = NULL;

		if (page == PAGES_MAX) {
			rc = err_set(e, CLOUD_ECORRUPT,
				     "the TPU API's list of queued resources "
				     "did not end after %u pages", PAGES_MAX);
			break;
		}
		buf_reset(&url);
		if (url_for(c, &url, "queuedResources", NULL, NULL) ||
		    (token && http_query_append(&url, "pageToken", token))) {
			rc = nomem(e);
			break;
		}
		rc = call(c, "GET", url.data, NULL, false, &resp, e);
		if (!rc) {
			rc = list_page(&resp, &v, &count, &next, e);
			if (rc) {
				char shown[512];

				short_url(url.data, shown, sizeof(shown));
				err_prefix(e, "GET %s", shown);
			}
		}
		if (!rc && next && token && strcmp(next, token) == 0)
			rc = err_set(e, CLOUD_ECORRUPT,
				     "the TPU API's list of queued resources "
				     "gave the same page token twice");
		free(token);
		token = next;
		if (rc || !token)
			break;
	}
	free(token);
	buf_release(&url);
	http_response_release(&resp);
	if (rc) {
		for (size_t i = 0; i < count; i++)
			tpu_qr_release(&v[i]);
		free(v);
		return rc;
	}
	*out = v;
	*n = count;
	return 0;
}

int tpu_qr_create(struct tpu_client *c, const struct tpu_qr_spec *s,
		  struct err *e)
{
	char *body = NULL;
	int rc = tpu_qr_body(s, c->parent, &body, e);

	if (!rc)
		rc = tpu_qr_post(c, s->id, body, e);
	free(body);
	return rc;
}

int tpu_qr_post(struct tpu_client *c, const char *id, const char *body,
		struct err *e)
{
	struct http_response resp;
	struct poller p;
	struct buf url, what;
	char rid[37];
	int rc;

	rc = uuid4(rid, e);
	if (rc)
		return rc;
	http_response_init(&resp);
	buf_init(&url);
	buf_init(&what);
	if (url_for(c, &url, "queuedResources", NULL, NULL) ||
	    http_query_append(&url, "queuedResourceId", id) ||
	    http_query_append(&url, "requestId", rid) ||
	    buf_appendf(&what, "creating queued resource %s", id)) {
		rc = nomem(e);
		goto out;
	}
	/* The server deduplicates by requestId: safe to send again. */
	rc = call(c, "POST", url.data, body, true, &resp, e);
	if (rc)
		goto out;
	poller_init(&p, c, mono_ms(), CREATE_OP_LIMIT_MS);
	rc = op_wait(c, &resp, what.data, &p, e);
out:
	buf_release(&url);
	buf_release(&what);
	http_response_release(&resp);
	return rc;
}

static bool suspended(const char *state)
{
	return strcmp(state, "SUSPENDED") == 0 ||
	       strcmp(state, "SUSPENDING") == 0;
}

/*
 * Polls queued resource id until it reaches state, or (state NULL) until
 * it is gone. Gives up early as tpu_qr_wait says.
 */
static int qr_poll(struct tpu_client *c, const char *id, const char *state,
		   struct poller *p, tpu_progress_fn progress, void *ud,
		   struct tpu_qr *out, struct err *e)
{
	char *last = NULL;
	int rc;

	for (;;) {
		struct tpu_qr q;
		bool changed;

		rc = tpu_qr_get(c, id, &q, e);
		if (rc == CLOUD_ENOTFOUND && !state) {
			rc = 0;
			break;
		}
		if (rc == CLOUD_ENOTFOUND && last) {
			rc = err_set(e, CLOUD_ENOTFOUND,
				     "queued resource %s disappeared (it was "
				     "%s) while waiting for %s", id, last,
				     state);
			break;
		}
		if (rc)
			break;
		changed = !last || strcmp(last, q.state) != 0;
		if (changed) {
			free(last);
			last = strdup(q.state);
			if (!last) {
				tpu_qr_release(&q);
				rc = nomem(e);
				break;
			}
			poller_moved(p);
			if (progress)
				progress(ud, &q, mono_ms() - p->start);
		}
		if (state && strcmp(q.state, state) == 0) {
			if (out)
				*out = q;
			else
				tpu_qr_release(&q);
			break;
		}
		if (state && strcmp(q.state, "FAILED") == 0) {
			rc = err_set(e, CLOUD_EFAILED,
				     "queued resource %s failed: code %d: %s",
				     id, q.error_code,
				     *q.error_message ? q.error_message
						      : "the API gave no "
							"reason");
			tpu_qr_release(&q);
			break;
		}
		if (state && suspended(q.state) && !suspended(state)) {
			rc = err_set(e, CLOUD_EFAILED,
				     "queued resource %s is %s%s%s (waiting "
				     "for %s): its nodes are gone; delete it "
				     "and create it again",
				     id, q.state,
				     *q.state_initiator ? ", by " : "",
				     q.state_initiator, state);
			tpu_qr_release(&q);
			break;
		}
		tpu_qr_release(&q);
		if (!poller_sleep(p)) {
			rc = err_set(e, CLOUD_ETIMEDOUT,
				     "queued resource %s is still %s after "
				     "%.1f s of waiting for %s", id,
				     *last ? last : "(no state)",
				     seconds(mono_ms() - p->start),
				     state ? state : "it to be deleted");
			break;
		}
	}
	free(last);
	return rc;
}

int tpu_qr_wait(struct tpu_client *c, const char *id, const char *state,
		unsigned timeout_ms, tpu_progress_fn progress, void *ud,
		struct tpu_qr *out, struct err *e)
{
	struct poller p;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!given(state))
		return err_set(e, CLOUD_EINVAL,
			       "no state to wait for (queued resource %s)",
			       id ? id : "");
	poller_init(&p, c, mono_ms(), timeout_ms);
	return qr_poll(c, id, state, &p, progress, ud, out, e);
}

int tpu_qr_delete(struct tpu_client *c, const char *id, bool force,
		  bool wait, unsigned timeout_ms, tpu_progress_fn progress,
		  void *ud, struct err *e)
{
	struct http_response resp;
	struct poller p;
	struct buf url, what;
	char rid[37];
	int rc;

	if (!given(id))
		return err_set(e, CLOUD_EINVAL, "no queued resource named");
	rc = uuid4(rid, e);
	if (rc)
		return rc;
	poller_init(&p, c, mono_ms(), timeout_ms);
	http_response_init(&resp);
	buf_init(&url);
	buf_init(&what);
	if (url_for(c, &url, "queuedResources", id, NULL) ||
	    (force && http_query_append(&url, "force", "true")) ||
	    http_query_append(&url, "requestId", rid) ||
	    buf_appendf(&what, "deleting queued resource %s", id)) {
		rc = nomem(e);
		goto out;
	}
	rc = call(c, "DELETE", url.data, NULL, true, &resp, e);
	if (rc || !wait)
		goto out;
	rc = op_wait(c, &resp, what.data, &p, e);
	if (!rc)
		rc = qr_poll(c, id, NULL, &p, progress, ud, NULL, e);
out:
	buf_release(&url);
	buf_release(&what);
	http_response_release(&resp);
	return rc;
}

/* Polls every node until each is READY. */
static int nodes_ready(struct tpu_client *c, const struct tpu_qr *q,
		       struct poller *p, struct err *e)
{
	for (;;) {
		const char *waiting = NULL;
		char state[64] = "";
		int rc = 0;

		for (size_t i = 0; !rc && !waiting && i < q->nnodes; i++) {
			struct tpu_node n;

			rc = tpu_node_get(c, q->node_ids[i], &n, e);
			if (!rc && strcmp(n.state, "READY") != 0) {
				waiting = q->node_ids[i];
				snprintf(state, sizeof(state), "%s",
					 *n.state ? n.state : "(no state)");
			}
			if (!rc)
				tpu_node_release(&n);
		}
		if (rc || !waiting)
			return rc;
		if (!poller_sleep(p))
			return err_set(e, CLOUD_ETIMEDOUT,
				       "queued resource %s: node %s is still "
				       "%s after %.1f s of waiting for READY",
				       q->id, waiting, state,
				       seconds(mono_ms() - p->start));
	}
}

/* POSTs body to the queued resource's custom method verb (":reset") and,
 * when wait, follows its operation to the end; what names it in errors
 * ("reset"). */
static int qr_method(struct tpu_client *c, const char *id, const char *verb,
		     const char *body, const char *what, bool wait,
		     struct poller *p, struct err *e)
{
	struct http_response resp;
	struct buf url, name;
	int rc = 0;

	if (!given(id))
		return err_set(e, CLOUD_EINVAL, "no queued resource named");
	http_response_init(&resp);
	buf_init(&url);
	buf_init(&name);
	if (url_for(c, &url, "queuedResources", id, verb) ||
	    buf_appendf(&name, "%s of queued resource %s", what, id))
		rc = nomem(e);
	/* Each method here is safe to repeat: a second reset of a slice
	 * being reset does no harm, and a maintenance already started
	 * finds none pending (an error naming the state, never a second
	 * maintenance). */
	if (!rc)
		rc = call(c, "POST", url.data, body, true, &resp, e);
	if (!rc && wait)
		rc = op_wait(c, &resp, name.data, p, e);
	buf_release(&url);
	buf_release(&name);
	http_response_release(&resp);
	return rc;
}

int tpu_qr_reset(struct tpu_client *c, const char *id, bool wait,
		 unsigned timeout_ms, struct err *e)
{
	struct tpu_qr q;
	struct poller p;
	int rc;

	poller_init(&p, c, mono_ms(), timeout_ms);
	rc = qr_method(c, id, ":reset", "{}", "reset", wait, &p, e);
	if (rc || !wait)
		return rc;
	rc = tpu_qr_get(c, id, &q, e);
	if (!rc) {
		rc = nodes_ready(c, &q, &p, e);
		tpu_qr_release(&q);
	}
	return rc;
}

/* {"nodeNames": [...]} with the names as given, ids or full names (gcloud
 * 528's perform-maintenance sends the ids it is given); "{}" for none
 * (every node with maintenance announced). */
static int maintenance_body(const struct strlist *nodes, char **out,
			    struct err *e)
{
	json_t *root = json_object(), *names = json_array();
	int rc = 0;

	*out = NULL;
	if (!root || !names)
		rc = nomem(e);
	for (size_t i = 0; !rc && nodes && i < nodes->n; i++)
		if (json_array_append_new(names, json_string(nodes->v[i])))
			rc = err_set(e, CLOUD_EINVAL,
				     "node name %.80s is not UTF-8 text",
				     nodes->v[i]);
	if (!rc && json_array_size(names) &&
	    json_object_set(root, "nodeNames", names))
		rc = nomem(e);
	if (!rc && !(*out = json_dumps(root, JSON_COMPACT)))
		rc = nomem(e);
	json_decref(names);
	json_decref(root);
	return rc;
}

int tpu_qr_perform_maintenance(struct tpu_client *c, const char *id,
			       const struct strlist *nodes, bool wait,
			       unsigned timeout_ms, struct err *e)
{
	struct poller p;
	char *body = NULL;
	int rc;

	poller_init(&p, c, mono_ms(), timeout_ms);
	rc = maintenance_body(nodes, &body, e);
	if (!rc)
		rc = qr_method(c, id, ":performMaintenanceQueuedResource",
			       body, "maintenance", wait, &p, e);
	free(body);
	return rc;
}

/* ---- nodes ---- */

static int node_answer(const struct http_response *resp, void *out,
		       struct err *e)
{
	return tpu_node_parse(resp->body.data, resp->body.len, out, e);
}

int tpu_node_get(struct tpu_client *c, const char *id, struct tpu_node *out,
		 struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (!given(id))
		return err_set(e, CLOUD_EINVAL, "no node named");
	return read_one(c, "GET", "nodes", id, NULL, NULL, node_answer, out,
			e);
}

/* tpu_hostkeys_parse has two results; answer_fn carries one pointer. */
struct hostkeys_out {
	struct tpu_hostkeys **v;
	size_t *n;
};

static int hostkeys_answer(const struct http_response *resp, void *out,
			   struct err *e)
{
	struct hostkeys_out *h = out;

	return tpu_hostkeys_parse(resp->body.data, resp->body.len, h->v,
				  h->n, e);
}

int tpu_node_hostkeys(struct tpu_client *c, const char *id,
		      struct tpu_hostkeys **out, size_t *n, struct err *e)
{
	struct hostkeys_out h = { out, n };

	*out = NULL;
	*n = 0;
	if (!given(id))
		return err_set(e, CLOUD_EINVAL, "no node named");
	/* A read, though a POST: retried like a GET. */
	return read_one(c, "POST", "nodes", id, ":getGuestAttributes",
			"{\"queryPath\":\"hostkeys/\"}", hostkeys_answer, &h,
			e);
}
