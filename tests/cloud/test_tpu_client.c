/*
 * tests/cloud/test_tpu_client.c: the Cloud TPU API client against a
 * loopback server answering fixed raw responses: the exact requests
 * (paths, query parameters, requestId, bodies), operation polling, errors
 * with their hints, retries and paging. Waits are in test_tpu_wait.c,
 * delete, reset, maintenance and nodes in test_tpu_ops.c; the server and
 * the answers are tpu_check.c's.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tiny_http.h"
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tpu, .init = env_setup, .timeout = 60);

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
