/*
 * tests/cloud/test_tpu_ops.c: the Cloud TPU API client's delete, reset and
 * maintenance of a queued resource, and its nodes (get, host keys),
 * against a loopback server answering fixed raw responses: the exact
 * requests, the waits after them, errors.
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
