/*
 * tests/cloud/test_tpu_parse.c: the Cloud TPU API client's parsing of
 * queued resources, nodes and host keys, strict about types and never
 * crashing on odd JSON, and the schedule it prints from them.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tpu_parse, .init = env_setup, .timeout = 60);

/* got[i] is want[i] ("" for NULL), for each of the n. */
static void assert_strs(const char *const *got, const char *const *want,
			size_t n, const char *doc)
{
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(got[i], want[i] ? want[i] : "", "[%zu] of %s",
				 i, doc);
}

/* What doc parses to: a NULL string is "", a NULL capacity "on-demand";
 * the name is always QR_NAME. */
struct qr_want {
	const char *doc;
	const char *state, *state_initiator, *create_time, *accelerator_type,
		*runtime_version, *capacity, *reservation, *error_message;
	int error_code;
	const char *node_ids[4]; /* up to the first NULL */
};

static void assert_qr(const struct qr_want *w)
{
	struct tpu_qr q;
	struct err e;
	size_t n = 0;

	err_init(&e);
	cr_assert_eq(tpu_qr_parse(w->doc, strlen(w->doc), &q, &e), 0,
		     "%s: %s", w->doc, e.msg);
	assert_strs((const char *[]){ q.name, q.id, q.json, q.state,
				      q.state_initiator, q.create_time,
				      q.accelerator_type, q.runtime_version,
				      q.capacity, q.reservation,
				      q.error_message },
		    (const char *[]){ QR_NAME, "qr1", w->doc, w->state,
				      w->state_initiator, w->create_time,
				      w->accelerator_type, w->runtime_version,
				      w->capacity ? w->capacity : "on-demand",
				      w->reservation, w->error_message },
		    11, w->doc);
	cr_assert_eq(q.error_code, w->error_code, "%s", w->doc);
	while (n < NELEM(w->node_ids) && w->node_ids[n])
		n++;
	cr_assert_eq(q.nnodes, n, "%s", w->doc);
	assert_strs((const char *const *)q.node_ids, w->node_ids, n, w->doc);
	tpu_qr_release(&q);
	/* A second release finds nothing to free. */
	tpu_qr_release(&q);
}

Test(tpu_parse, queued_resource_full)
{
	static const struct qr_want want = {
		.doc = "{\"name\":\"" QR_NAME "\",\"createTime\":"
		       "\"2024-05-01T10:00:00Z\",\"state\":{\"state\":"
		       "\"ACTIVE\",\"stateInitiator\":\"USER\",\"activeData\":"
		       "{}},\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT "\","
		       "\"multiNodeParams\":{\"nodeCount\":3,\"nodeIdPrefix\":"
		       "\"pfx\"},\"node\":{\"acceleratorType\":"
		       "\"v5litepod-16\",\"runtimeVersion\":\"rt\","
		       "\"unknownField\":[1,2]}}]},\"spot\":{},"
		       "\"queueingPolicy\":{\"validUntilDuration\":\"60s\"}}",
		.state = "ACTIVE",
		.state_initiator = "USER",
		.create_time = "2024-05-01T10:00:00Z",
		.accelerator_type = "v5litepod-16",
		.runtime_version = "rt",
		.capacity = "spot",
		.node_ids = { "pfx-0", "pfx-1", "pfx-2" },
	};

	assert_qr(&want);
}

Test(tpu_parse, queued_resource_variants)
{
	static const struct qr_want cases[] = {
		/* Only the name: everything else empty, nothing NULL. */
		{ .doc = "{\"name\":\"" QR_NAME "\"}" },
		/* nodeId; prefix defaulting to the id; several specs in
		 * order. */
		{ .doc = "{\"name\":\"" QR_NAME "\",\"tpu\":{\"nodeSpec\":["
			 "{\"nodeId\":\"solo\"},{\"multiNodeParams\":{"
			 "\"nodeCount\":2}},{\"node\":{}}]},\"bestEffort\":{}}",
		  .capacity = "best-effort",
		  .node_ids = { "solo", "qr1-0", "qr1-1" } },
		{ .doc = "{\"name\":\"" QR_NAME "\",\"guaranteed\":{"
			 "\"reserved\":true},\"reservationName\":\"" PARENT
			 "/reservations/r\"}",
		  .capacity = "reserved",
		  .reservation = PARENT "/reservations/r" },
		{ .doc = "{\"name\":\"" QR_NAME "\",\"guaranteed\":{}}" },
		{ .doc = "{\"name\":\"" QR_NAME "\",\"state\":{\"state\":"
			 "\"FAILED\",\"failedData\":{\"error\":{\"code\":8,"
			 "\"message\":\"no capacity\"}}}}",
		  .state = "FAILED",
		  .error_code = 8,
		  .error_message = "no capacity" },
		/* null counts as absent. */
		{ .doc = "{\"name\":\"" QR_NAME "\",\"state\":null,"
			 "\"spot\":null}" },
		/* gcloud 528 alpha's --spot: the tier decides. */
		{ .doc = "{\"name\":\"" QR_NAME "\",\"provisioningModel\":"
			 "\"STANDARD\",\"spot\":{}}",
		  .capacity = "spot" },
	};

	for (size_t i = 0; i < NELEM(cases); i++)
		assert_qr(&cases[i]);
}

Test(tpu_parse, flex_start_run_duration)
{
	static const char doc[] =
		"{\"name\":\"" QR_NAME "\",\"provisioningModel\":"
		"\"FLEX_START\",\"runDuration\":{\"maxRunDuration\":"
		"\"259200s\",\"terminationTime\":\"2030-01-04T00:00:00Z\"}}";
	static const char *const bad[] = {
		"{\"name\":\"" QR_NAME "\",\"runDuration\":[]}",
		"{\"name\":\"" QR_NAME "\",\"runDuration\":{"
		"\"terminationTime\":5}}",
		"{\"name\":\"" QR_NAME "\",\"provisioningModel\":1}",
	};
	struct tpu_qr q;
	struct err e;

	err_init(&e);
	cr_assert_eq(tpu_qr_parse(doc, strlen(doc), &q, &e), 0, "%s", e.msg);
	cr_assert_str_eq(q.capacity, "flex-start");
	cr_assert_str_eq(q.max_run_duration, "259200s");
	cr_assert_str_eq(q.termination_time, "2030-01-04T00:00:00Z");
	tpu_qr_release(&q);
	for (size_t i = 0; i < NELEM(bad); i++) {
		cr_assert_eq(tpu_qr_parse(bad[i], strlen(bad[i]), &q, &e),
			     CLOUD_ECORRUPT, "%s", bad[i]);
		cr_assert(strstr(e.msg, i == 2 ? "provisioningModel"
					       : "runDuration"), "%s", e.msg);
	}
}

#define UPCOMING "\"upcomingMaintenance\":{\"type\":\"SCHEDULED\"," \
	"\"canReschedule\":true,\"windowStartTime\":"                  \
	"\"2030-01-01T00:00:00Z\",\"windowEndTime\":"                   \
	"\"2030-01-01T06:00:00Z\",\"latestWindowStartTime\":"           \
	"\"2030-01-03T00:00:00Z\",\"maintenanceStatus\":\"PENDING\"}"

Test(tpu_parse, node_upcoming_maintenance)
{
	static const char doc[] = "{\"name\":\"" PARENT "/nodes/n-1\","
				  "\"state\":\"UNKNOWN\"," UPCOMING "}";
	static const char none[] = "{\"name\":\"" PARENT "/nodes/n-0\"}";
	static const char bad[] = "{\"name\":\"" PARENT "/nodes/n-0\","
				  "\"upcomingMaintenance\":{"
				  "\"canReschedule\":\"yes\"}}";
	struct tpu_node n;
	struct err e;

	err_init(&e);
	cr_assert_eq(tpu_node_parse(doc, strlen(doc), &n, &e), 0, "%s", e.msg);
	cr_assert_str_eq(n.state, "UNKNOWN");
	cr_assert(n.maintenance.announced && n.maintenance.can_reschedule);
	cr_assert_str_eq(n.maintenance.type, "SCHEDULED");
	cr_assert_str_eq(n.maintenance.status, "PENDING");
	cr_assert_str_eq(n.maintenance.window_start, "2030-01-01T00:00:00Z");
	cr_assert_str_eq(n.maintenance.window_end, "2030-01-01T06:00:00Z");
	cr_assert_str_eq(n.maintenance.latest_start, "2030-01-03T00:00:00Z");
	tpu_node_release(&n);
	cr_assert_eq(tpu_node_parse(none, strlen(none), &n, &e), 0);
	cr_assert(!n.maintenance.announced);
	cr_assert_str_eq(n.maintenance.window_start, "");
	tpu_node_release(&n);
	cr_assert_eq(tpu_node_parse(bad, strlen(bad), &n, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "upcomingMaintenance.canReschedule"), "%s",
		  e.msg);
}

/* What tpu_print_schedule writes for q and its nodes' documents. */
static char *schedule_text(const char *qr_doc, const char *const *node_docs,
			   size_t n)
{
	struct tpu_node nodes[4];
	struct tpu_qr q;
	struct err e;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_not_null(f);
	err_init(&e);
	cr_assert_eq(tpu_qr_parse(qr_doc, strlen(qr_doc), &q, &e), 0, "%s",
		     e.msg);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tpu_node_parse(node_docs[i], strlen(node_docs[i]),
					    &nodes[i], &e), 0, "%s", e.msg);
	tpu_print_schedule(f, &q, nodes, n);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		tpu_node_release(&nodes[i]);
	tpu_qr_release(&q);
	return text;
}

Test(tpu_parse, schedule_text)
{
	static const char *const nodes[] = {
		"{\"name\":\"" PARENT "/nodes/qr1-0\"}",
		"{\"name\":\"" PARENT "/nodes/qr1-1\"," UPCOMING "}",
	};
	char *t;

	t = schedule_text("{\"name\":\"" QR_NAME "\",\"tpu\":{\"nodeSpec\":"
			  "[{\"multiNodeParams\":{\"nodeCount\":2}}]},"
			  "\"provisioningModel\":\"FLEX_START\","
			  "\"runDuration\":{\"maxRunDuration\":\"600s\","
			  "\"terminationTime\":\"2030-01-04T00:00:00Z\"}}",
			  nodes, 2);
	cr_assert_str_eq(t, "run ends:     2030-01-04T00:00:00Z (flex-start, "
			    "at most 600s)\n"
			    "maintenance:  qr1-1: SCHEDULED, PENDING, window "
			    "2030-01-01T00:00:00Z to 2030-01-01T06:00:00Z, can "
			    "be rescheduled to start by 2030-01-03T00:00:00Z\n");
	free(t);
	t = schedule_text("{\"name\":\"" QR_NAME "\",\"provisioningModel\":"
			  "\"FLEX_START\",\"runDuration\":{"
			  "\"maxRunDuration\":\"600s\"}}", NULL, 0);
	cr_assert_str_eq(t, "run ends:     600s after it is ACTIVE "
			    "(flex-start)\n");
	free(t);
	t = schedule_text("{\"name\":\"" QR_NAME "\"}", NULL, 0);
	cr_assert_str_eq(t, "");
	free(t);
}

/* A document a parser must refuse, and what its message must name. */
struct bad_doc {
	const char *doc;
	const char *names;
};

/* Each parses doc, expecting CLOUD_ECORRUPT and nothing left behind. */
typedef void (*refuse_fn)(const char *doc, struct err *e);

static void refuse_all(const struct bad_doc *cases, size_t n,
		       refuse_fn refuse)
{
	for (size_t i = 0; i < n; i++) {
		struct err e;

		err_init(&e);
		refuse(cases[i].doc, &e);
		cr_assert(strstr(e.msg, cases[i].names), "%s: %s",
			  cases[i].doc, e.msg);
	}
}

static void refuse_qr(const char *doc, struct err *e)
{
	struct tpu_qr q;

	cr_assert_eq(tpu_qr_parse(doc, strlen(doc), &q, e), CLOUD_ECORRUPT,
		     "%s", doc);
	cr_assert_null(q.name);
	tpu_qr_release(&q);
}

static void refuse_node(const char *doc, struct err *e)
{
	struct tpu_node n;

	cr_assert_eq(tpu_node_parse(doc, strlen(doc), &n, e), CLOUD_ECORRUPT,
		     "%s", doc);
	cr_assert_null(n.name);
}

static void refuse_hostkeys(const char *doc, struct err *e)
{
	struct tpu_hostkeys *h = (void *)1;
	size_t n = 9;

	cr_assert_eq(tpu_hostkeys_parse(doc, strlen(doc), &h, &n, e),
		     CLOUD_ECORRUPT, "%s", doc);
	cr_assert_null(h);
	cr_assert_eq(n, 0);
}

Test(tpu_parse, queued_resource_malformed)
{
	static const struct bad_doc cases[] = {
		{ "", "not JSON" },
		{ "{\"name\":", "not JSON" },
		{ "[1,2]", "not a JSON object" },
		{ "\"x\"", "not JSON" },
		{ "{}", "\"name\"" },
		{ "{\"name\":7}", "\"name\"" },
		{ "{\"name\":\"\"}", "\"name\"" },
		{ "{\"name\":\"n\",\"state\":\"ACTIVE\"}", "\"state\"" },
		{ "{\"name\":\"n\",\"state\":{\"state\":1}}", "\"state.state\"" },
		{ "{\"name\":\"n\",\"state\":{\"failedData\":{\"error\":{"
		  "\"code\":\"8\"}}}}", "\"state.failedData.error.code\"" },
		{ "{\"name\":\"n\",\"state\":{\"failedData\":[]}}",
		  "\"state.failedData\"" },
		{ "{\"name\":\"n\",\"createTime\":1}", "\"createTime\"" },
		{ "{\"name\":\"n\",\"tpu\":[]}", "\"tpu\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":{}}}",
		  "\"tpu.nodeSpec\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{},\"x\"]}}",
		  "\"tpu.nodeSpec[1]\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"nodeId\":5}]}}",
		  "\"tpu.nodeSpec[0].nodeId\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"multiNodeParams\":"
		  "{\"nodeCount\":\"2\"}}]}}",
		  "\"tpu.nodeSpec[0].multiNodeParams.nodeCount\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"multiNodeParams\":"
		  "{\"nodeCount\":99999999999}}]}}",
		  "\"tpu.nodeSpec[0].multiNodeParams.nodeCount\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"multiNodeParams\":"
		  "{\"nodeCount\":-1}}]}}",
		  "\"tpu.nodeSpec[0].multiNodeParams.nodeCount\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"multiNodeParams\":"
		  "{\"nodeCount\":2,\"nodeIdPrefix\":[]}}]}}",
		  "\"tpu.nodeSpec[0].multiNodeParams.nodeIdPrefix\"" },
		{ "{\"name\":\"n\",\"tpu\":{\"nodeSpec\":[{\"node\":{"
		  "\"acceleratorType\":{}}}]}}",
		  "\"tpu.nodeSpec[0].node.acceleratorType\"" },
		{ "{\"name\":\"n\",\"spot\":true}", "\"spot\"" },
		{ "{\"name\":\"n\",\"guaranteed\":{\"reserved\":\"yes\"}}",
		  "\"guaranteed.reserved\"" },
		{ "{\"name\":\"n\",\"bestEffort\":1}", "\"bestEffort\"" },
		{ "{\"name\":\"n\",\"reservationName\":false}",
		  "\"reservationName\"" },
	};

	refuse_all(cases, NELEM(cases), refuse_qr);
	{
		struct tpu_qr q;
		struct err e;

		cr_assert_eq(tpu_qr_parse(NULL, 0, &q, &e), CLOUD_ECORRUPT);
	}
}

/* Cuts a good document at every length, and puts every JSON type in
 * place of each value: never a crash, only 0 or CLOUD_ECORRUPT. */
static void replace_each(json_t *root, json_t *v,
			 int (*parse)(const char *, size_t, void *,
				      struct err *),
			 unsigned *corrupt)
{
	static json_t *kinds[6];
	const char *key;
	json_t *child;
	void *tmp;

	if (!kinds[0]) {
		kinds[0] = json_null();
		kinds[1] = json_true();
		kinds[2] = json_integer(-3);
		kinds[3] = json_string("s");
		kinds[4] = json_array();
		kinds[5] = json_object();
	}
	if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v); i++)
			replace_each(root, json_array_get(v, i), parse,
				     corrupt);
		for (size_t i = 0; i < json_array_size(v); i++) {
			json_t *keep = json_incref(json_array_get(v, i));

			for (size_t k = 0; k < 6; k++) {
				char *s;
				union { struct tpu_qr q; struct tpu_node n; }
					out;
				struct err e;
				int rc;

				json_array_set(v, i, kinds[k]);
				s = json_dumps(root, JSON_COMPACT);
				rc = parse(s, strlen(s), &out, &e);
				cr_assert(rc == 0 || rc == CLOUD_ECORRUPT,
					  "%d on %s", rc, s);
				*corrupt += rc != 0;
				free(s);
			}
			json_array_set_new(v, i, keep);
		}
		return;
	}
	if (!json_is_object(v))
		return;
	json_object_foreach_safe(v, tmp, key, child)
		replace_each(root, child, parse, corrupt);
	json_object_foreach_safe(v, tmp, key, child) {
		json_t *keep = json_incref(child);

		for (size_t k = 0; k < 6; k++) {
			char *s;
			union { struct tpu_qr q; struct tpu_node n; } out;
			struct err e;
			int rc;

			json_object_set(v, key, kinds[k]);
			s = json_dumps(root, JSON_COMPACT);
			rc = parse(s, strlen(s), &out, &e);
			cr_assert(rc == 0 || rc == CLOUD_ECORRUPT, "%d on %s",
				  rc, s);
			*corrupt += rc != 0;
			free(s);
		}
		json_object_set_new(v, key, keep);
	}
}

static int parse_qr_any(const char *s, size_t len, void *out, struct err *e)
{
	int rc = tpu_qr_parse(s, len, out, e);

	if (!rc)
		tpu_qr_release(out);
	return rc;
}

static int parse_node_any(const char *s, size_t len, void *out,
			  struct err *e)
{
	int rc = tpu_node_parse(s, len, out, e);

	if (!rc)
		tpu_node_release(out);
	return rc;
}

static void torture(const char *doc,
		    int (*parse)(const char *, size_t, void *, struct err *))
{
	union { struct tpu_qr q; struct tpu_node n; } out;
	size_t len = strlen(doc);
	unsigned corrupt = 0;
	json_t *root;
	struct err e;

	for (size_t n = 0; n < len; n++) {
		char *cut = strndup(doc, n);

		cr_assert_eq(parse(cut, n, &out, &e), CLOUD_ECORRUPT, "%s", cut);
		free(cut);
	}
	cr_assert_eq(parse(doc, len, &out, &e), 0, "%s", e.msg);
	root = load(doc);
	replace_each(root, root, parse, &corrupt);
	cr_assert_gt(corrupt, 10);
	json_decref(root);
}

Test(tpu_parse, queued_resource_torture)
{
	torture("{\"name\":\"" QR_NAME "\",\"createTime\":\"t\",\"state\":{"
		"\"state\":\"FAILED\",\"stateInitiator\":\"SERVICE\","
		"\"failedData\":{\"error\":{\"code\":9,\"message\":\"m\"}}},"
		"\"tpu\":{\"nodeSpec\":[{\"parent\":\"p\",\"nodeId\":\"a\","
		"\"node\":{\"acceleratorType\":\"v\",\"runtimeVersion\":\"r\"}},"
		"{\"multiNodeParams\":{\"nodeCount\":2,\"nodeIdPrefix\":\"x\"}}"
		"]},\"guaranteed\":{\"reserved\":true},\"reservationName\":"
		"\"r\",\"spot\":{},\"bestEffort\":{}}", parse_qr_any);
}

/* What doc parses to; a NULL string is "". */
struct node_want {
	const char *doc;
	const char *name, *id, *uid, *state, *health, *accelerator_type;
	size_t nendpoints;
	struct {
		const char *ip, *external_ip;
		unsigned port;
	} endpoints[3];
};

static void assert_node(const struct node_want *w)
{
	struct tpu_node n;
	struct err e;

	err_init(&e);
	cr_assert_eq(tpu_node_parse(w->doc, strlen(w->doc), &n, &e), 0,
		     "%s: %s", w->doc, e.msg);
	assert_strs((const char *[]){ n.name, n.id, n.uid, n.state, n.health,
				      n.accelerator_type, n.json },
		    (const char *[]){ w->name, w->id, w->uid, w->state,
				      w->health, w->accelerator_type, w->doc },
		    7, w->doc);
	cr_assert_eq(n.nendpoints, w->nendpoints, "%s", w->doc);
	for (size_t i = 0; i < n.nendpoints; i++) {
		assert_strs((const char *[]){ n.endpoints[i].ip,
					      n.endpoints[i].external_ip },
			    (const char *[]){ w->endpoints[i].ip,
					      w->endpoints[i].external_ip },
			    2, w->doc);
		cr_assert_eq(n.endpoints[i].port, w->endpoints[i].port);
	}
	tpu_node_release(&n);
}

Test(tpu_parse, node_full)
{
	static const struct node_want cases[] = {
		{ .doc = "{\"name\":\"" PARENT "/nodes/qr1-0\",\"id\":"
			 "\"8812345\",\"state\":\"READY\",\"health\":"
			 "\"HEALTHY\",\"acceleratorType\":\"v5litepod-16\","
			 "\"networkEndpoints\":[{\"ipAddress\":\"10.0.0.2\","
			 "\"port\":8470,\"accessConfig\":{\"externalIp\":"
			 "\"34.1.2.3\"}},{\"ipAddress\":\"10.0.0.3\","
			 "\"port\":8470},{}]}",
		  .name = PARENT "/nodes/qr1-0",
		  .id = "qr1-0",
		  .uid = "8812345",
		  .state = "READY",
		  .health = "HEALTHY",
		  .accelerator_type = "v5litepod-16",
		  .nendpoints = 3,
		  .endpoints = { { "10.0.0.2", "34.1.2.3", 8470 },
				 { "10.0.0.3", NULL, 8470 },
				 { NULL, NULL, 0 } } },
		/* A numeric id; nothing else. */
		{ .doc = "{\"name\":\"n1\",\"id\":42}",
		  .name = "n1",
		  .id = "n1",
		  .uid = "42" },
	};

	for (size_t i = 0; i < NELEM(cases); i++)
		assert_node(&cases[i]);
}

Test(tpu_parse, node_malformed)
{
	static const struct bad_doc cases[] = {
		{ "nope", "not JSON" },
		{ "{\"state\":\"READY\"}", "\"name\"" },
		{ "{\"name\":\"n\",\"id\":[]}", "\"id\"" },
		{ "{\"name\":\"n\",\"state\":5}", "\"state\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":{}}",
		  "\"networkEndpoints\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":[{},{\"port\":\"22\"}]}",
		  "\"networkEndpoints[1].port\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":[{\"port\":70000}]}",
		  "\"networkEndpoints[0].port\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":[{\"ipAddress\":1}]}",
		  "\"networkEndpoints[0].ipAddress\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":[{\"accessConfig\":{"
		  "\"externalIp\":true}}]}",
		  "\"networkEndpoints[0].accessConfig.externalIp\"" },
		{ "{\"name\":\"n\",\"networkEndpoints\":[3]}",
		  "\"networkEndpoints[0]\"" },
	};

	refuse_all(cases, NELEM(cases), refuse_node);
	torture("{\"name\":\"n\",\"id\":\"1\",\"state\":\"READY\",\"health\":"
		"\"HEALTHY\",\"acceleratorType\":\"a\",\"networkEndpoints\":[{"
		"\"ipAddress\":\"10.0.0.1\",\"port\":1,\"accessConfig\":{"
		"\"externalIp\":\"1.2.3.4\"}}]}", parse_node_any);
}

#define ECDSA "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg="
#define RSA "AAAAB3NzaC1yc2EAAAADAQAB"

Test(tpu_parse, hostkeys)
{
	static const char doc[] =
		"{\"guestAttributes\":["
		"{\"queryPath\":\"hostkeys/\",\"queryValue\":{\"items\":["
		ITEM("ssh-ed25519", ED25519) ","
		ITEM("ecdsa-sha2-nistp256", ECDSA) ","
		ITEM("ssh-dss", "AAAAB3NzaC1kc3M=") ","
		ITEM("not-a-key", "AAAA") ","
		ITEM("ssh-rsa", "!!not base64!!") ","
		ITEM("ssh-rsa", "AAAA BBBB") ","
		ITEM("ssh-rsa", "") ","
		"{\"namespace\":\"hostkeys\",\"key\":\"ssh-rsa\"}]}},"
		"{\"queryPath\":\"hostkeys/\"},"
		"{\"queryPath\":\"hostkeys/\",\"queryValue\":{\"items\":["
		ITEM("ssh-rsa", RSA) "," ITEM("ecdsa-sha2-nistp521", "AAAA")
		"]}}]}";
	struct tpu_hostkeys *h;
	size_t n;
	struct err e;

	cr_assert_eq(tpu_hostkeys_parse(doc, strlen(doc), &h, &n, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(n, 3);
	cr_assert_eq(h[0].keys.n, 2);
	cr_assert_str_eq(h[0].keys.v[0], "ssh-ed25519 " ED25519);
	cr_assert_str_eq(h[0].keys.v[1], "ecdsa-sha2-nistp256 " ECDSA);
	cr_assert_eq(h[1].keys.n, 0);
	cr_assert_eq(h[2].keys.n, 2);
	cr_assert_str_eq(h[2].keys.v[0], "ssh-rsa " RSA);
	cr_assert_str_eq(h[2].keys.v[1], "ecdsa-sha2-nistp521 AAAA");
	tpu_hostkeys_release(h, n);

	cr_assert_eq(tpu_hostkeys_parse("{}", 2, &h, &n, &e), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(h);
	tpu_hostkeys_release(h, n);
}

Test(tpu_parse, hostkeys_malformed)
{
	static const struct bad_doc cases[] = {
		{ "<html>", "not JSON" },
		{ "[]", "not a JSON object" },
		{ "{\"guestAttributes\":{}}", "\"guestAttributes\"" },
		{ "{\"guestAttributes\":[1]}", "\"guestAttributes[0]\"" },
		{ "{\"guestAttributes\":[{},{\"queryValue\":[]}]}",
		  "\"guestAttributes[1].queryValue\"" },
		{ "{\"guestAttributes\":[{\"queryValue\":{\"items\":{}}}]}",
		  "\"guestAttributes[0].queryValue.items\"" },
		{ "{\"guestAttributes\":[{\"queryValue\":{\"items\":[\"k\"]}}]}",
		  "\"guestAttributes[0].queryValue.items[0]\"" },
		{ "{\"guestAttributes\":[{\"queryValue\":{\"items\":[{\"key\":"
		  "\"ssh-rsa\",\"value\":5}]}}]}",
		  "\"guestAttributes[0].queryValue.items[0].value\"" },
		{ "{\"guestAttributes\":[{\"queryValue\":{\"items\":[{\"key\":"
		  "[],\"value\":\"AAAA\"}]}}]}",
		  "\"guestAttributes[0].queryValue.items[0].key\"" },
	};

	refuse_all(cases, NELEM(cases), refuse_hostkeys);
}
