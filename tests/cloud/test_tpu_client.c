/*
 * tests/cloud/test_tpu_client.c: the Cloud TPU API client against a
 * loopback server answering fixed raw responses: the exact requests
 * (paths, query parameters, requestId, bodies), operation polling, errors
 * with their hints, retries, paging, waits and their progress callbacks.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tiny_http.h"
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define HEAD(status) "HTTP/1.1 " status "\r\nContent-Type: application/json" \
		     "\r\nContent-Length: *\r\n\r\n"
#define OK(body) { HEAD("200 OK") body, 0, false }
#define ERR(status, code, msg)                                              \
	{ HEAD(status) "{\"error\":{\"code\":" #code ",\"message\":\"" msg \
		       "\",\"status\":\"X\"}}", 0, false }
#define E400(msg) ERR("400 Bad Request", 400, msg)
#define S503 { "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0" \
	       "\r\n\r\n", 0, false }
#define S429 { "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0" \
	       "\r\n\r\n", 0, false }

#define OP_NAME PARENT "/operations/op-1"
#define OP_PENDING "{\"name\":\"" OP_NAME "\",\"done\":false}"
#define OP_DONE "{\"name\":\"" OP_NAME "\",\"done\":true,\"response\":{}}"

#define QR_STATE(state) "{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"" \
	state "\"},\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT "\","     \
	"\"multiNodeParams\":{\"nodeCount\":2,\"nodeIdPrefix\":\"qr1\"},"   \
	"\"node\":{\"acceleratorType\":\"v5litepod-8\"}}]}}"
#define QR_404 ERR("404 Not Found", 404, "Resource '" QR_NAME \
		   "' was not found")

#define NODE(id, state) "{\"name\":\"" PARENT "/nodes/" id "\",\"state\":\"" \
	state "\"}"

TestSuite(tpu, .init = env_setup, .timeout = 60);

struct fx {
	struct tiny_http srv;
	struct tpu_client *c;
	struct err e;
	char *log;
};

static void start(struct fx *f, const struct tiny_answer *a, size_t n)
{
	memset(f, 0, sizeof(*f));
	cr_assert_eq(tiny_start(&f->srv, a, n), 0);
	setenv("SLICECTL_TPU_ENDPOINT", f->srv.base, 1);
	err_init(&f->e);
	cr_assert_eq(tpu_open(&f->c, "p", "z", &f->e), 0, "%s", f->e.msg);
}

static void stop(struct fx *f)
{
	tpu_close(f->c);
	tiny_stop(&f->srv);
	free(f->log);
}

/* The i-th request the server got (a copy to free), whole. */
static char *request(struct fx *f, unsigned i)
{
	const char *p;
	size_t n;

	free(f->log);
	f->log = tiny_log(&f->srv);
	p = f->log;
	for (unsigned k = 0; k < i; k++) {
		p = strstr(p, "\n---\n");
		cr_assert(p, "no request %u in:\n%s", i, f->log);
		p += 5;
	}
	n = strstr(p, "\n---\n") ? (size_t)(strstr(p, "\n---\n") - p)
				 : strlen(p);
	cr_assert(n, "no request %u in:\n%s", i, f->log);
	return strndup(p, n);
}

/* Its first line, without " HTTP/1.1". */
static char *request_line(struct fx *f, unsigned i)
{
	char *r = request(f, i);
	char *end = strstr(r, " HTTP/1.1\r\n");

	cr_assert(end, "%s", r);
	*end = '\0';
	return r;
}

static char *request_body(struct fx *f, unsigned i)
{
	char *r = request(f, i);
	char *b = strstr(r, "\r\n\r\n");
	char *out;

	cr_assert(b);
	out = strdup(b + 4);
	free(r);
	return out;
}

static bool is_uuid4(const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	if (n != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!strchr(hex, s[i]) || !s[i]) {
			return false;
		}
	}
	return s[14] == '4' && strchr("89ab", s[19]);
}

static void assert_line(struct fx *f, unsigned i, const char *want)
{
	char *line = request_line(f, i);

	cr_assert_str_eq(line, want);
	free(line);
}

/* prefix and then a v4 UUID, the requestId, ending the line. */
static void assert_line_rid(struct fx *f, unsigned i, const char *prefix)
{
	char *line = request_line(f, i);
	size_t n = strlen(prefix);

	cr_assert(strncmp(line, prefix, n) == 0, "%s", line);
	cr_assert(is_uuid4(line + n, strlen(line + n)), "%s", line);
	free(line);
}

/* The requestId of a logged request line. */
static char *request_id(const char *line)
{
	const char *p = strstr(line, "requestId=");
	size_t n;

	cr_assert(p, "%s", line);
	p += 10;
	n = strcspn(p, "& ");
	cr_assert(is_uuid4(p, n), "not a v4 UUID: %.*s", (int)n, p);
	return strndup(p, n);
}

Test(tpu, open_needs_project_and_zone)
{
	struct tpu_client *c = (void *)1;
	struct err e;

	cr_assert_eq(tpu_open(&c, "", "z", &e), CLOUD_EINVAL);
	cr_assert_null(c);
	cr_assert(strstr(e.msg, "project"), "%s", e.msg);
	cr_assert_eq(tpu_open(&c, "p", NULL, &e), CLOUD_EINVAL);
	cr_assert(strstr(e.msg, "zone"), "%s", e.msg);
	cr_assert_eq(tpu_open(&c, "p", "z", &e), 0, "%s", e.msg);
	cr_assert_str_eq(tpu_parent(c), PARENT);
	tpu_close(c);
	tpu_close(NULL);
}

Test(tpu, create_polls_the_operation)
{
	static const struct tiny_answer a[] = {
		OK(OP_PENDING), OK(OP_PENDING), OK(OP_DONE),
	};
	struct tpu_qr_spec s;
	struct fx f;
	char *req, *body, *want;

	start(&f, a, 3);
	spec_basic(&s);
	s.node_count = 2;
	cr_assert_eq(strlist_push(&s.labels, "team=ml"), 0);
	cr_assert_eq(tpu_qr_create(f.c, &s, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 3);

	assert_line_rid(&f, 0, "POST /v2alpha1/" PARENT "/queuedResources"
			"?queuedResourceId=qr1&requestId=");
	req = request(&f, 0);
	cr_assert(strstr(req, "\r\nAuthorization: Bearer tok-123\r\n"), "%s",
		  req);
	cr_assert(strstr(req, "\r\nContent-Type: application/json\r\n"), "%s",
		  req);
	body = request_body(&f, 0);
	cr_assert_eq(tpu_qr_body(&s, PARENT, &want, &f.e), 0);
	cr_assert_str_eq(body, want);
	free(req);
	free(body);
	free(want);

	assert_line(&f, 1, "GET /v2alpha1/" OP_NAME);
	assert_line(&f, 2, "GET /v2alpha1/" OP_NAME);
	tpu_qr_spec_release(&s);
	stop(&f);
}

Test(tpu, create_request_ids_differ_per_call_not_per_retry)
{
	static const struct tiny_answer a[] = {
		S503, S429, OK(OP_DONE), OK(OP_DONE),
	};
	struct tpu_qr_spec s;
	struct fx f;
	char *l0, *l1, *l2, *l3;
	char *r0, *r1, *r2, *r3;

	start(&f, a, 4);
	spec_basic(&s);
	cr_assert_eq(tpu_qr_create(f.c, &s, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 3);
	cr_assert_eq(tpu_qr_create(f.c, &s, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 4);
	l0 = request_line(&f, 0);
	l1 = request_line(&f, 1);
	l2 = request_line(&f, 2);
	l3 = request_line(&f, 3);
	r0 = request_id(l0);
	r1 = request_id(l1);
	r2 = request_id(l2);
	r3 = request_id(l3);
	/* The retries of one create are the same request... */
	cr_assert_str_eq(l0, l1);
	cr_assert_str_eq(r0, r2);
	/* ...a second create is another. */
	cr_assert_str_neq(r0, r3);
	free(l0), free(l1), free(l2), free(l3);
	free(r0), free(r1), free(r2), free(r3);
	tpu_qr_spec_release(&s);
	stop(&f);
}

/* Runs one create against the answers a and returns the error. */
static int create_against(const struct tiny_answer *a, size_t n,
			  struct fx *f)
{
	struct tpu_qr_spec s;
	int rc;

	start(f, a, n);
	spec_basic(&s);
	rc = tpu_qr_create(f->c, &s, &f->e);
	tpu_qr_spec_release(&s);
	return rc;
}

Test(tpu, create_operation_error)
{
	static const struct tiny_answer a[] = {
		OK(OP_PENDING),
		OK("{\"name\":\"" OP_NAME "\",\"done\":true,\"error\":{\"code\":"
		   "8,\"message\":\"There is no more capacity in the zone\"}}"),
	};
	struct fx f;

	cr_assert_eq(create_against(a, 2, &f), CLOUD_EFAILED);
	cr_assert_str_eq(f.e.msg, "creating queued resource qr1 failed: "
			 "code 8: There is no more capacity in the zone");
	stop(&f);
}

Test(tpu, create_operation_done_at_once_with_error)
{
	static const struct tiny_answer a[] = {
		OK("{\"name\":\"" OP_NAME "\",\"done\":true,\"error\":{\"code\":"
		   "3,\"message\":\"bad\"}}"),
	};
	struct fx f;

	cr_assert_eq(create_against(a, 1, &f), CLOUD_EFAILED);
	cr_assert(strstr(f.e.msg, "code 3: bad"), "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, create_bad_spec_sends_nothing)
{
	static const struct tiny_answer a[] = { OK(OP_DONE) };
	struct tpu_qr_spec s;
	struct fx f;

	start(&f, a, 1);
	spec_basic(&s);
	cr_assert_eq(strlist_push(&s.labels, "Bad=1"), 0);
	cr_assert_eq(tpu_qr_create(f.c, &s, &f.e), CLOUD_EINVAL);
	cr_assert_eq(tiny_requests(&f.srv), 0);
	tpu_qr_spec_release(&s);
	stop(&f);
}

Test(tpu, conflict_message_and_hint)
{
	static const struct tiny_answer a[] = {
		ERR("409 Conflict", 409, "Resource '" QR_NAME
		    "' already exists"),
	};
	struct fx f;
	char want[512];

	cr_assert_eq(create_against(a, 1, &f), CLOUD_EEXISTS);
	snprintf(want, sizeof(want),
		 "POST %s/v2alpha1/" PARENT "/queuedResources: HTTP 409 "
		 "Conflict: Resource '" QR_NAME "' already exists; the name is "
		 "taken: pick another, or `slicectl delete qr1` first",
		 f.srv.base);
	cr_assert_str_eq(f.e.msg, want);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, forbidden_hints)
{
	static const struct tiny_answer a[] = {
		ERR("403 Forbidden", 403, "Permission 'tpu.queuedResources."
		    "create' denied on resource"),
	};
	static const struct tiny_answer b[] = {
		ERR("403 Forbidden", 403, "Cloud TPU API has not been used in "
		    "project 123 before or it is disabled."),
	};
	struct fx f;

	cr_assert_eq(create_against(a, 1, &f), CLOUD_EAUTH);
	cr_assert(strstr(f.e.msg, "HTTP 403 Forbidden: Permission"), "%s",
		  f.e.msg);
	cr_assert(strstr(f.e.msg, "roles/tpu.admin"), "%s", f.e.msg);
	cr_assert(strstr(f.e.msg, "gcloud services enable tpu.googleapis.com"),
		  "%s", f.e.msg);
	cr_assert(strstr(f.e.msg, "quota"), "%s", f.e.msg);
	stop(&f);
	cr_assert_eq(create_against(b, 1, &f), CLOUD_EAUTH);
	cr_assert(strstr(f.e.msg, "; the TPU API is not enabled in this "
			 "project: `gcloud services enable "
			 "tpu.googleapis.com`"), "%s", f.e.msg);
	stop(&f);
}

Test(tpu, bad_request_hints)
{
	static const struct {
		struct tiny_answer a;
		const char *hint;
	} cases[] = {
		{ E400("Quota limit 'TPUV5sLitepodPerProjectPerZone' "
		       "exceeded."), "TPU quota" },
		{ E400("Invalid value for field 'resource.tpu.nodeSpec[0]."
		       "node.acceleratorType': 'v9-8'."),
		  "accelerator type was refused" },
		{ E400("Invalid runtimeVersion"),
		  "runtime version was refused" },
		{ E400("Reservation not found"), "reservation was refused" },
		{ E400("Cannot delete queued resource in state ACTIVE: its "
		       "nodes exist. Delete the nodes first, or set "
		       "force=true"),
		  "with --force" },
		{ E400("Invalid value at 'queued_resource.tpu.node_spec[0]."
		       "node.network_config.subnetwork'"),
		  "subnetwork was refused" },
		{ E400("Invalid validUntilDuration"), "queueing durations" },
		{ E400("Constraint enforced on the project"),
		  "the message names the field" },
		{ E400("Something odd"), "the message names the field" },
	};

	for (size_t i = 0; i < NELEM(cases); i++) {
		struct fx f;

		cr_assert_eq(create_against(&cases[i].a, 1, &f), CLOUD_EHTTP);
		cr_assert(strstr(f.e.msg, "HTTP 400 Bad Request: "), "%s",
			  f.e.msg);
		cr_assert(strstr(f.e.msg, cases[i].hint), "%s", f.e.msg);
		cr_assert_eq(tiny_requests(&f.srv), 1);
		stop(&f);
	}
}

Test(tpu, not_found_hint)
{
	static const struct tiny_answer a[] = { QR_404 };
	struct tpu_qr q;
	struct fx f;
	char want[512];

	start(&f, a, 1);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), CLOUD_ENOTFOUND);
	snprintf(want, sizeof(want),
		 "GET %s/v2alpha1/" QR_NAME ": HTTP 404 Not Found: Resource '"
		 QR_NAME "' was not found; no such queued resource or node in "
		 "this project and zone: check --project and --zone, or see "
		 "`slicectl list`", f.srv.base);
	cr_assert_str_eq(f.e.msg, want);
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, rate_limited_then_unavailable_then_fine)
{
	static const struct tiny_answer a[] = {
		S429, S503, OK(QR_STATE("ACTIVE")),
	};
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 3);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), 0, "%s", f.e.msg);
	cr_assert_str_eq(q.state, "ACTIVE");
	cr_assert_eq(tiny_requests(&f.srv), 3);
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, persistent_429_gives_up_with_hint)
{
	static const struct tiny_answer a[] = {
		ERR("429 Too Many Requests", 429, "Quota exceeded for quota "
		    "metric 'Read requests'"),
	};
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 1);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), CLOUD_EHTTP);
	cr_assert(strstr(f.e.msg, "(after retries)"), "%s", f.e.msg);
	cr_assert(strstr(f.e.msg, "rate limit"), "%s", f.e.msg);
	cr_assert_gt(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, malformed_answers)
{
	static const struct tiny_answer garbage[] = { OK("<html>oops") };
	static const struct tiny_answer typed[] = {
		OK("{\"name\":\"" QR_NAME "\",\"state\":{\"state\":42}}"),
	};
	static const struct tiny_answer op_garbage[] = { OK("{\"done\":") };
	static const struct tiny_answer op_typed[] = {
		OK("{\"name\":\"" OP_NAME "\",\"done\":\"yes\"}"),
	};
	static const struct tiny_answer op_nameless[] = {
		OK("{\"done\":false}"),
	};
	static const struct tiny_answer op_dotdot[] = {
		OK("{\"name\":\"projects/../../x\",\"done\":false}"),
	};
	static const struct tiny_answer empty[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, false },
	};
	struct tpu_qr q;
	struct tpu_node n;
	struct fx f;

	start(&f, garbage, 1);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "GET ") && strstr(f.e.msg, "not JSON"),
		  "%s", f.e.msg);
	cr_assert_eq(tpu_node_get(f.c, "n", &n, &f.e), CLOUD_ECORRUPT);
	cr_assert_eq(tiny_requests(&f.srv), 2);
	stop(&f);

	start(&f, typed, 1);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "\"state.state\""), "%s", f.e.msg);
	stop(&f);

	start(&f, empty, 1);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), CLOUD_ECORRUPT);
	stop(&f);

	cr_assert_eq(create_against(op_garbage, 1, &f), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "creating queued resource qr1"), "%s",
		  f.e.msg);
	stop(&f);
	cr_assert_eq(create_against(op_typed, 1, &f), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "\"done\""), "%s", f.e.msg);
	stop(&f);
	cr_assert_eq(create_against(op_nameless, 1, &f), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "\"name\""), "%s", f.e.msg);
	stop(&f);
	cr_assert_eq(create_against(op_dotdot, 1, &f), CLOUD_ECORRUPT);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, endpoint_with_trailing_slash)
{
	static const struct tiny_answer a[] = { OK(QR_STATE("ACTIVE")) };
	struct tpu_qr q;
	struct fx f;
	char base[80];

	memset(&f, 0, sizeof(f));
	cr_assert_eq(tiny_start(&f.srv, a, 1), 0);
	snprintf(base, sizeof(base), "%s/", f.srv.base);
	setenv("SLICECTL_TPU_ENDPOINT", base, 1);
	cr_assert_eq(tpu_open(&f.c, "p", "z", &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tpu_qr_get(f.c, "qr1", &q, &f.e), 0, "%s", f.e.msg);
	assert_line(&f, 0, "GET /v2alpha1/" QR_NAME);
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, list_all_pages)
{
	static const struct tiny_answer a[] = {
		OK("{\"queuedResources\":[" QR_STATE("ACTIVE") ",{\"name\":\""
		   PARENT "/queuedResources/b\"}],\"nextPageToken\":\"t 1/=\"}"),
		OK("{\"queuedResources\":[{\"name\":\"" PARENT
		   "/queuedResources/c\",\"spot\":{}}],\"nextPageToken\":\"\"}"),
	};
	struct tpu_qr *v;
	size_t n;
	struct fx f;

	start(&f, a, 2);
	cr_assert_eq(tpu_qr_list(f.c, &v, &n, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0].id, "qr1");
	cr_assert_str_eq(v[0].state, "ACTIVE");
	cr_assert_eq(v[0].nnodes, 2);
	cr_assert_str_eq(v[1].id, "b");
	cr_assert_str_eq(v[2].id, "c");
	cr_assert_str_eq(v[2].capacity, "spot");
	assert_json_eq(v[2].json, "{\"name\":\"" PARENT "/queuedResources/c\","
		       "\"spot\":{}}");
	assert_line(&f, 0, "GET /v2alpha1/" PARENT "/queuedResources");
	assert_line(&f, 1, "GET /v2alpha1/" PARENT "/queuedResources"
		    "?pageToken=t%201%2F%3D");
	for (size_t i = 0; i < n; i++)
		tpu_qr_release(&v[i]);
	free(v);
	stop(&f);
}

Test(tpu, list_empty_and_malformed)
{
	static const struct tiny_answer empty[] = { OK("{}") };
	static const struct tiny_answer loop[] = {
		OK("{\"queuedResources\":[],\"nextPageToken\":\"same\"}"),
	};
	static const struct tiny_answer typed[] = {
		OK("{\"queuedResources\":[{\"name\":\"" PARENT
		   "/queuedResources/a\"},{\"name\":3}]}"),
	};
	static const struct tiny_answer notarray[] = {
		OK("{\"queuedResources\":{}}"),
	};
	struct tpu_qr *v = (void *)1;
	size_t n = 7;
	struct fx f;

	start(&f, empty, 1);
	cr_assert_eq(tpu_qr_list(f.c, &v, &n, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(n, 0);
	free(v);
	stop(&f);

	start(&f, loop, 1);
	cr_assert_eq(tpu_qr_list(f.c, &v, &n, &f.e), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "same page token"), "%s", f.e.msg);
	cr_assert_null(v);
	stop(&f);

	start(&f, typed, 1);
	cr_assert_eq(tpu_qr_list(f.c, &v, &n, &f.e), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "queuedResources[1]") &&
			  strstr(f.e.msg, "\"name\""), "%s", f.e.msg);
	cr_assert_eq(n, 0);
	stop(&f);

	start(&f, notarray, 1);
	cr_assert_eq(tpu_qr_list(f.c, &v, &n, &f.e), CLOUD_ECORRUPT);
	stop(&f);
}

struct seen {
	char states[16][32];
	uint64_t elapsed[16];
	size_t n;
};

static void on_progress(void *ud, const struct tpu_qr *q, uint64_t elapsed)
{
	struct seen *s = ud;

	cr_assert_lt(s->n, 16);
	snprintf(s->states[s->n], sizeof(s->states[0]), "%s", q->state);
	s->elapsed[s->n++] = elapsed;
}

/* Waits for qr1 to reach state, with no deadline and no callback, against
 * the answers a; f stays up for the caller to look at. */
static int wait_against(struct fx *f, const struct tiny_answer *a, size_t n,
			const char *state, struct tpu_qr *q)
{
	start(f, a, n);
	return tpu_qr_wait(f->c, "qr1", state, 0, NULL, NULL, q, &f->e);
}

Test(tpu, wait_reports_each_new_state)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("WAITING_FOR_RESOURCES")),
		OK(QR_STATE("WAITING_FOR_RESOURCES")),
		S503,
		OK(QR_STATE("PROVISIONING")),
		OK(QR_STATE("PROVISIONING")),
		OK(QR_STATE("ACTIVE")),
	};
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 6);
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 10000, on_progress,
				 &seen, &q, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(seen.n, 3);
	cr_assert_str_eq(seen.states[0], "WAITING_FOR_RESOURCES");
	cr_assert_str_eq(seen.states[1], "PROVISIONING");
	cr_assert_str_eq(seen.states[2], "ACTIVE");
	cr_assert_leq(seen.elapsed[0], seen.elapsed[1]);
	cr_assert_str_eq(q.state, "ACTIVE");
	cr_assert_eq(q.nnodes, 2);
	cr_assert_eq(tiny_requests(&f.srv), 6);
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, wait_already_there_and_no_callback)
{
	static const struct tiny_answer a[] = { OK(QR_STATE("ACTIVE")) };
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 1, "ACTIVE", NULL), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, wait_ends_on_failed)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("PROVISIONING")),
		OK("{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"FAILED\","
		   "\"failedData\":{\"error\":{\"code\":8,\"message\":"
		   "\"Insufficient capacity for v5litepod-8\"}}}}"),
	};
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 2);
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 0, on_progress, &seen,
				 &q, &f.e), CLOUD_EFAILED);
	cr_assert_str_eq(f.e.msg, "queued resource qr1 failed: code 8: "
			 "Insufficient capacity for v5litepod-8");
	cr_assert_eq(seen.n, 2);
	cr_assert_str_eq(seen.states[1], "FAILED");
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, wait_ends_on_suspended_unless_asked_for)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("ACTIVE")),
		OK("{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"SUSPENDING\","
		   "\"stateInitiator\":\"SERVICE\"}}"),
	};
	struct tpu_qr q;
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 2, "PROVISIONING", &q), CLOUD_EFAILED);
	cr_assert(strstr(f.e.msg, "SUSPENDING, by SERVICE"), "%s", f.e.msg);
	stop(&f);

	{
		static const struct tiny_answer b[] = {
			OK(QR_STATE("SUSPENDING")), OK(QR_STATE("SUSPENDED")),
		};

		/* On the way to what was asked for: not a reason to stop. */
		cr_assert_eq(wait_against(&f, b, 2, "SUSPENDED", &q), 0, "%s",
			     f.e.msg);
		cr_assert_eq(tiny_requests(&f.srv), 2);
		tpu_qr_release(&q);
		stop(&f);
	}
	{
		static const struct tiny_answer b[] = {
			OK(QR_STATE("SUSPENDED")),
		};

		cr_assert_eq(wait_against(&f, b, 1, "SUSPENDED", &q), 0, "%s",
			     f.e.msg);
		cr_assert_str_eq(q.state, "SUSPENDED");
		tpu_qr_release(&q);
		stop(&f);
	}
}

Test(tpu, wait_times_out)
{
	static const struct tiny_answer a[] = { OK(QR_STATE("ACCEPTED")) };
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;
	uint64_t t0;

	setenv("SLICECTL_TPU_POLL_MS", "20", 1);
	start(&f, a, 1);
	t0 = mono_ms();
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 300, on_progress, &seen,
				 &q, &f.e), CLOUD_ETIMEDOUT);
	cr_assert_geq(mono_ms() - t0, 300);
	cr_assert_lt(mono_ms() - t0, 3000);
	cr_assert(strstr(f.e.msg, "queued resource qr1 is still ACCEPTED "
			 "after") && strstr(f.e.msg, "waiting for ACTIVE"),
		  "%s", f.e.msg);
	cr_assert_eq(seen.n, 1);
	/* Backoff doubles: 20, 40, 80, 160 ms fill 300 ms in a few polls. */
	cr_assert_geq(tiny_requests(&f.srv), 3);
	cr_assert_leq(tiny_requests(&f.srv), 8);
	stop(&f);
}

Test(tpu, wait_when_it_disappears_or_the_api_fails)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("ACCEPTED")), QR_404,
	};
	static const struct tiny_answer b[] = {
		OK(QR_STATE("ACCEPTED")),
		ERR("500 Internal Server Error", 500, "backend down"),
	};
	struct tpu_qr q;
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 2, "ACTIVE", &q), CLOUD_ENOTFOUND);
	cr_assert(strstr(f.e.msg, "disappeared"), "%s", f.e.msg);
	stop(&f);

	cr_assert_eq(wait_against(&f, b, 2, "ACTIVE", &q), CLOUD_EHTTP);
	cr_assert(strstr(f.e.msg, "backend down (after retries)"), "%s",
		  f.e.msg);
	cr_assert_gt(tiny_requests(&f.srv), 3);
	stop(&f);
}

Test(tpu, delete_force_and_wait)
{
	static const struct tiny_answer a[] = {
		OK(OP_PENDING), OK(OP_DONE), OK(QR_STATE("DELETING")),
		OK(QR_STATE("DELETING")), QR_404,
	};
	struct seen seen = { .n = 0 };
	struct fx f;

	start(&f, a, 5);
	cr_assert_eq(tpu_qr_delete(f.c, "qr1", true, true, 10000, on_progress,
				   &seen, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 5);
	assert_line_rid(&f, 0, "DELETE /v2alpha1/" QR_NAME
			"?force=true&requestId=");
	assert_line(&f, 1, "GET /v2alpha1/" OP_NAME);
	assert_line(&f, 4, "GET /v2alpha1/" QR_NAME);
	cr_assert_eq(seen.n, 1);
	cr_assert_str_eq(seen.states[0], "DELETING");
	stop(&f);
}

Test(tpu, delete_without_force_or_wait)
{
	static const struct tiny_answer a[] = { OK(OP_PENDING) };
	struct fx f;

	start(&f, a, 1);
	cr_assert_eq(tpu_qr_delete(f.c, "qr1", false, false, 0, NULL, NULL,
				   &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	assert_line_rid(&f, 0, "DELETE /v2alpha1/" QR_NAME "?requestId=");
	stop(&f);
}

Test(tpu, delete_errors)
{
	static const struct tiny_answer missing[] = { QR_404 };
	static const struct tiny_answer failing[] = {
		OK("{\"name\":\"" OP_NAME "\",\"done\":true,\"error\":{\"code\":"
		   "9,\"message\":\"nodes still attached\"}}"),
	};
	static const struct tiny_answer stuck[] = {
		OK(OP_DONE), OK(QR_STATE("DELETING")),
	};
	struct fx f;

	start(&f, missing, 1);
	cr_assert_eq(tpu_qr_delete(f.c, "qr1", true, true, 0, NULL, NULL,
				   &f.e), CLOUD_ENOTFOUND);
	cr_assert(strstr(f.e.msg, "slicectl list"), "%s", f.e.msg);
	stop(&f);

	start(&f, failing, 1);
	cr_assert_eq(tpu_qr_delete(f.c, "qr1", false, true, 0, NULL, NULL,
				   &f.e), CLOUD_EFAILED);
	cr_assert_str_eq(f.e.msg, "deleting queued resource qr1 failed: code "
			 "9: nodes still attached");
	stop(&f);

	start(&f, stuck, 2);
	cr_assert_eq(tpu_qr_delete(f.c, "qr1", true, true, 150, NULL, NULL,
				   &f.e), CLOUD_ETIMEDOUT);
	cr_assert(strstr(f.e.msg, "still DELETING") &&
			  strstr(f.e.msg, "to be deleted"), "%s", f.e.msg);
	stop(&f);
}

Test(tpu, reset_and_wait_for_ready_nodes)
{
	static const struct tiny_answer a[] = {
		S503,
		OK(OP_PENDING),
		OK(OP_DONE),
		OK(QR_STATE("ACTIVE")),
		OK(NODE("qr1-0", "READY")),
		OK(NODE("qr1-1", "RESTARTING")),
		OK(NODE("qr1-0", "READY")),
		OK(NODE("qr1-1", "READY")),
	};
	struct fx f;
	char *body;

	start(&f, a, 8);
	cr_assert_eq(tpu_qr_reset(f.c, "qr1", true, 10000, &f.e), 0, "%s",
		     f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 8);
	assert_line(&f, 0, "POST /v2alpha1/" QR_NAME ":reset");
	assert_line(&f, 1, "POST /v2alpha1/" QR_NAME ":reset");
	body = request_body(&f, 1);
	cr_assert_str_eq(body, "{}");
	free(body);
	assert_line(&f, 3, "GET /v2alpha1/" QR_NAME);
	assert_line(&f, 5, "GET /v2alpha1/" PARENT "/nodes/qr1-1");
	stop(&f);
}

Test(tpu, reset_without_wait_and_timeout)
{
	static const struct tiny_answer a[] = { OK(OP_PENDING) };
	static const struct tiny_answer b[] = {
		OK(OP_DONE), OK(QR_STATE("ACTIVE")), OK(NODE("qr1-0",
							    "RESTARTING")),
	};
	struct fx f;

	start(&f, a, 1);
	cr_assert_eq(tpu_qr_reset(f.c, "qr1", false, 0, &f.e), 0, "%s",
		     f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);

	start(&f, b, 3);
	cr_assert_eq(tpu_qr_reset(f.c, "qr1", true, 150, &f.e),
		     CLOUD_ETIMEDOUT);
	cr_assert(strstr(f.e.msg, "node qr1-0 is still RESTARTING"), "%s",
		  f.e.msg);
	stop(&f);
}

Test(tpu, perform_maintenance_named_nodes_and_all)
{
	static const struct tiny_answer a[] = {
		OK(OP_PENDING), OK(OP_DONE),
	};
	static const struct tiny_answer b[] = {
		E400("No maintenance is pending on qr1-0."),
	};
	struct strlist nodes;
	struct fx f;
	char *body;

	strlist_init(&nodes);
	cr_assert_eq(strlist_push(&nodes, "qr1-1"), 0);
	cr_assert_eq(strlist_push(&nodes, PARENT "/nodes/qr1-0"), 0);
	start(&f, a, 2);
	cr_assert_eq(tpu_qr_perform_maintenance(f.c, "qr1", &nodes, true,
						10000, &f.e), 0, "%s", f.e.msg);
	assert_line(&f, 0, "POST /v2alpha1/" QR_NAME
			   ":performMaintenanceQueuedResource");
	body = request_body(&f, 0);
	cr_assert_str_eq(body, "{\"nodeNames\":[\"qr1-1\",\"" PARENT
			       "/nodes/qr1-0\"]}");
	free(body);
	stop(&f);

	start(&f, b, 1);
	cr_assert_eq(tpu_qr_perform_maintenance(f.c, "qr1", NULL, false, 0,
						&f.e), CLOUD_EHTTP);
	cr_assert(strstr(f.e.msg, "No maintenance is pending"), "%s", f.e.msg);
	body = request_body(&f, 0);
	cr_assert_str_eq(body, "{}");
	free(body);
	stop(&f);
	strlist_release(&nodes);
}

Test(tpu, node_get)
{
	static const struct tiny_answer a[] = {
		OK("{\"name\":\"" PARENT "/nodes/qr1-0\",\"state\":\"READY\","
		   "\"networkEndpoints\":[{\"ipAddress\":\"10.1.0.5\","
		   "\"port\":8470}]}"),
	};
	struct tpu_node n;
	struct fx f;

	start(&f, a, 1);
	cr_assert_eq(tpu_node_get(f.c, "qr1-0", &n, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(n.nendpoints, 1);
	cr_assert_str_eq(n.endpoints[0].ip, "10.1.0.5");
	assert_line(&f, 0, "GET /v2alpha1/" PARENT "/nodes/qr1-0");
	tpu_node_release(&n);
	stop(&f);
}

Test(tpu, node_hostkeys)
{
	static const struct tiny_answer a[] = {
		S503,
		OK("{\"guestAttributes\":[{\"queryPath\":\"hostkeys/\","
		   "\"queryValue\":{\"items\":[" ITEM("ssh-ed25519", ED25519)
		   "," ITEM("ssh-dss", "AAAA") "]}},{\"queryPath\":"
		   "\"hostkeys/\",\"queryValue\":{\"items\":[]}}]}"),
	};
	struct tpu_hostkeys *h;
	size_t n;
	struct fx f;
	char *body;

	start(&f, a, 2);
	cr_assert_eq(tpu_node_hostkeys(f.c, "qr1-0", &h, &n, &f.e), 0, "%s",
		     f.e.msg);
	cr_assert_eq(n, 2);
	cr_assert_eq(h[0].keys.n, 1);
	cr_assert_str_eq(h[0].keys.v[0], "ssh-ed25519 " ED25519);
	cr_assert_eq(h[1].keys.n, 0);
	cr_assert_eq(tiny_requests(&f.srv), 2);
	assert_line(&f, 1, "POST /v2alpha1/" PARENT
		    "/nodes/qr1-0:getGuestAttributes");
	body = request_body(&f, 1);
	assert_json_eq(body, "{\"queryPath\": \"hostkeys/\"}");
	free(body);
	tpu_hostkeys_release(h, n);
	stop(&f);
}
