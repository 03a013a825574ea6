/*
 * tests/cloud/test_tpu_body.c: the Cloud TPU API client's create body for
 * every capacity mode and flag, and its label and metadata checks.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tpu_body, .init = env_setup, .timeout = 60);

/* A spec with nothing but its name. */
static void spec_named(struct tpu_qr_spec *s)
{
	tpu_qr_spec_init(s);
	s->id = "q";
}

static char *body_of(const struct tpu_qr_spec *s)
{
	struct err e;
	char *out = NULL;

	err_init(&e);
	cr_assert_eq(tpu_qr_body(s, PARENT, &out, &e), 0, "%s", e.msg);
	cr_assert(out);
	return out;
}

static int body_err(const struct tpu_qr_spec *s, struct err *e)
{
	char *out = (char *)"untouched";
	int rc;

	err_init(e);
	rc = tpu_qr_body(s, PARENT, &out, e);
	cr_assert_null(out);
	return rc;
}

/* s is refused as invalid, with a message holding want and also (unless
 * NULL). */
static void assert_refused(const struct tpu_qr_spec *s, const char *want,
			   const char *also)
{
	struct err e;

	cr_assert_eq(body_err(s, &e), CLOUD_EINVAL, "%s", want);
	cr_assert(strstr(e.msg, want), "%s", e.msg);
	cr_assert(!also || strstr(e.msg, also), "%s", e.msg);
}

/* The node of the body's only nodeSpec. */
static json_t *body_node(json_t *body)
{
	return json_object_get(json_array_get(json_object_get(
		json_object_get(body, "tpu"), "nodeSpec"), 0), "node");
}

Test(tpu_body, spec_init_and_release)
{
	struct tpu_qr_spec s;

	tpu_qr_spec_init(&s);
	cr_assert_eq(s.node_count, 1);
	cr_assert_eq(s.capacity, TPU_CAPACITY_ON_DEMAND);
	cr_assert_null(s.id);
	cr_assert_eq(strlist_push(&s.labels, "a=b"), 0);
	cr_assert_eq(strlist_push(&s.metadata, "k=v"), 0);
	cr_assert_eq(strlist_push(&s.scopes, "x"), 0);
	cr_assert_eq(strlist_push(&s.tags, "t"), 0);
	tpu_qr_spec_release(&s);
	cr_assert_eq(s.labels.n, 0);
	cr_assert_eq(s.node_count, 1);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, single_node_exact)
{
	struct tpu_qr_spec s;
	char *b;

	spec_basic(&s);
	b = body_of(&s);
	cr_assert_str_eq(b, "{\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT
			 "\",\"nodeId\":\"qr1\",\"node\":{\"acceleratorType\":"
			 "\"v5litepod-8\",\"runtimeVersion\":"
			 "\"v2-alpha-tpuv5-lite\"}}]}}");
	free(b);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, multislice_exact)
{
	struct tpu_qr_spec s;
	char *b;

	spec_basic(&s);
	s.node_count = 4;
	b = body_of(&s);
	cr_assert_str_eq(b, "{\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT
			 "\",\"multiNodeParams\":{\"nodeCount\":4,"
			 "\"nodeIdPrefix\":\"qr1\"},\"node\":{"
			 "\"acceleratorType\":\"v5litepod-8\","
			 "\"runtimeVersion\":\"v2-alpha-tpuv5-lite\"}}]}}");
	free(b);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, capacity_modes)
{
	static const char *const tail[] = {
		[TPU_CAPACITY_ON_DEMAND] = "",
		[TPU_CAPACITY_SPOT] = ",\"spot\":{}",
		[TPU_CAPACITY_RESERVED] = ",\"guaranteed\":{\"reserved\":true}",
		[TPU_CAPACITY_BEST_EFFORT] = ",\"bestEffort\":{}",
		/* gcloud 528's flex-start body: no tier. */
		[TPU_CAPACITY_FLEX_START] = ",\"provisioningModel\":"
					    "\"FLEX_START\",\"runDuration\":{"
					    "\"maxRunDuration\":\"259200s\"}",
	};

	for (size_t i = 0; i < NELEM(tail); i++) {
		struct tpu_qr_spec s;
		char want[512], *b;

		spec_named(&s);
		s.capacity = (enum tpu_capacity)i;
		if (s.capacity == TPU_CAPACITY_FLEX_START)
			s.max_run_duration_s = 259200;
		b = body_of(&s);
		snprintf(want, sizeof(want),
			 "{\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT
			 "\",\"nodeId\":\"q\",\"node\":{}}]}%s}", tail[i]);
		cr_assert_str_eq(b, want);
		free(b);
		tpu_qr_spec_release(&s);
	}
}

Test(tpu_body, reservation)
{
	struct tpu_qr_spec s;
	char *b;

	spec_named(&s);
	s.reservation = "res1";
	b = body_of(&s);
	assert_json_eq(b, "{\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT
		       "\",\"nodeId\":\"q\",\"node\":{}}]},\"guaranteed\":"
		       "{\"reserved\":true},\"reservationName\":\"" PARENT
		       "/reservations/res1\"}");
	free(b);
	s.reservation = "projects/other/locations/z2/reservations/r9";
	s.capacity = TPU_CAPACITY_RESERVED;
	b = body_of(&s);
	cr_assert(strstr(b, "\"reservationName\":\"projects/other/locations/"
			 "z2/reservations/r9\""), "%s", b);
	free(b);
	s.capacity = TPU_CAPACITY_SPOT;
	assert_refused(&s, "cannot also be spot", NULL);
	s.capacity = TPU_CAPACITY_BEST_EFFORT;
	assert_refused(&s, "cannot also be best-effort", NULL);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, every_flag)
{
	struct tpu_qr_spec s;
	char *b;

	spec_basic(&s);
	s.node_count = 2;
	s.capacity = TPU_CAPACITY_SPOT;
	s.valid_until_s = 3600;
	s.valid_after_s = 60;
	s.network = "projects/p/global/networks/n";
	s.subnetwork = "projects/p/regions/r/subnetworks/s";
	s.external_ips = true;
	s.service_account = "sa@p.iam.gserviceaccount.com";
	s.description = "a \"quoted\" run";
	cr_assert_eq(strlist_push(&s.scopes,
				  "https://www.googleapis.com/auth/"
				  "cloud-platform"), 0);
	cr_assert_eq(strlist_push(&s.tags, "ml"), 0);
	cr_assert_eq(strlist_push(&s.tags, "tpu"), 0);
	cr_assert_eq(strlist_push(&s.labels, "team=ml-infra"), 0);
	cr_assert_eq(strlist_push(&s.labels, "run_id=r-7"), 0);
	cr_assert_eq(strlist_push(&s.metadata, "ssh-keys=me:ssh-ed25519 AAA"),
		     0);
	cr_assert_eq(strlist_push(&s.metadata,
				  "startup-script=#!/bin/sh\necho \"a=b\" "
				  "\xc3\xbc\n"), 0);
	b = body_of(&s);
	assert_json_eq(b,
		"{\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT "\","
		"\"multiNodeParams\":{\"nodeCount\":2,\"nodeIdPrefix\":"
		"\"qr1\"},\"node\":{\"acceleratorType\":\"v5litepod-8\","
		"\"runtimeVersion\":\"v2-alpha-tpuv5-lite\",\"description\":"
		"\"a \\\"quoted\\\" run\",\"networkConfig\":{\"network\":"
		"\"projects/p/global/networks/n\",\"subnetwork\":"
		"\"projects/p/regions/r/subnetworks/s\",\"enableExternalIps\":"
		"true},\"serviceAccount\":{\"email\":"
		"\"sa@p.iam.gserviceaccount.com\",\"scope\":["
		"\"https://www.googleapis.com/auth/cloud-platform\"]},"
		"\"tags\":[\"ml\",\"tpu\"],\"labels\":{\"team\":\"ml-infra\","
		"\"run_id\":\"r-7\"},\"metadata\":{\"ssh-keys\":"
		"\"me:ssh-ed25519 AAA\",\"startup-script\":"
		"\"#!/bin/sh\\necho \\\"a=b\\\" \\u00fc\\n\"}}}]},"
		"\"spot\":{},\"queueingPolicy\":{\"validUntilDuration\":"
		"\"3600s\",\"validAfterDuration\":\"60s\"}}");
	free(b);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, optional_blocks_only_when_given)
{
	struct tpu_qr_spec s;
	json_t *j, *node;
	char *b;

	spec_named(&s);
	s.network = "n";
	s.valid_until_s = 7200;
	cr_assert_eq(strlist_push(&s.scopes, "sc"), 0);
	b = body_of(&s);
	j = load(b);
	node = body_node(j);
	{
		json_t *net = json_pack("{s:s}", "network", "n");
		json_t *sa = json_pack("{s:[s]}", "scope", "sc");
		json_t *qp = json_pack("{s:s}", "validUntilDuration", "7200s");

		cr_assert(json_equal(json_object_get(node, "networkConfig"),
				     net), "%s", b);
		cr_assert(json_equal(json_object_get(node, "serviceAccount"),
				     sa), "%s", b);
		cr_assert(json_equal(json_object_get(j, "queueingPolicy"), qp),
			  "%s", b);
		json_decref(net);
		json_decref(sa);
		json_decref(qp);
	}
	cr_assert_null(json_object_get(node, "tags"));
	cr_assert_null(json_object_get(node, "labels"));
	cr_assert_null(json_object_get(node, "metadata"));
	cr_assert_null(json_object_get(node, "acceleratorType"));
	json_decref(j);
	free(b);

	/* Only the flag: networkConfig holds enableExternalIps alone. */
	s.network = NULL;
	s.external_ips = true;
	s.valid_until_s = 0;
	strlist_release(&s.scopes);
	b = body_of(&s);
	cr_assert(strstr(b, "\"networkConfig\":{\"enableExternalIps\":true}"),
		  "%s", b);
	cr_assert_null(strstr(b, "serviceAccount"), "%s", b);
	cr_assert_null(strstr(b, "queueingPolicy"), "%s", b);
	free(b);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, provisioning_model_names)
{
	static const struct {
		const char *name;
		enum tpu_capacity capacity;
	} names[] = {
		{ "standard", TPU_CAPACITY_ON_DEMAND },
		{ "spot", TPU_CAPACITY_SPOT },
		{ "reservation-bound", TPU_CAPACITY_RESERVED },
		{ "flex-start", TPU_CAPACITY_FLEX_START },
	};
	enum tpu_capacity c = TPU_CAPACITY_BEST_EFFORT;
	struct err e;

	for (size_t i = 0; i < NELEM(names); i++) {
		cr_assert_eq(tpu_provisioning_model(names[i].name, &c, NULL), 0);
		cr_assert_eq(c, names[i].capacity, "%s", names[i].name);
	}
	err_init(&e);
	cr_assert_eq(tpu_provisioning_model("FLEX_START", &c, &e),
		     CLOUD_EINVAL);
	cr_assert(strstr(e.msg, "standard, spot, reservation-bound and "
				"flex-start"), "%s", e.msg);
	cr_assert_eq(tpu_provisioning_model(NULL, &c, &e), CLOUD_EINVAL);
}

Test(tpu_body, capacity_choose_flags_and_model)
{
	enum tpu_capacity c;
	struct err e;

	err_init(&e);
	cr_assert_eq(tpu_capacity_choose(NULL, TPU_CAPACITY_SPOT, "--spot", &c,
					 &e), 0);
	cr_assert_eq(c, TPU_CAPACITY_SPOT);
	cr_assert_eq(tpu_capacity_choose("flex-start", TPU_CAPACITY_ON_DEMAND,
					 NULL, &c, &e), 0);
	cr_assert_eq(c, TPU_CAPACITY_FLEX_START);
	/* --spot stays a synonym of the spot model. */
	cr_assert_eq(tpu_capacity_choose("spot", TPU_CAPACITY_SPOT, "--spot",
					 &c, &e), 0);
	cr_assert_eq(c, TPU_CAPACITY_SPOT);
	cr_assert_eq(tpu_capacity_choose("reservation-bound",
					 TPU_CAPACITY_RESERVED, "--reserved",
					 &c, &e), 0);
	cr_assert_eq(c, TPU_CAPACITY_RESERVED);
	cr_assert_eq(tpu_capacity_choose("flex-start", TPU_CAPACITY_SPOT,
					 "--spot", &c, &e), CLOUD_EINVAL);
	cr_assert_str_eq(e.msg, "--spot contradicts --provisioning-model "
				"flex-start; give one of them");
	cr_assert_eq(tpu_capacity_choose("standard", TPU_CAPACITY_BEST_EFFORT,
					 "--best-effort", &c, &e),
		     CLOUD_EINVAL);
	cr_assert_eq(tpu_capacity_choose("preemptible", TPU_CAPACITY_ON_DEMAND,
					 NULL, &c, &e), CLOUD_EINVAL);
	cr_assert(!strncmp(e.msg, "--provisioning-model: ", 22), "%s", e.msg);
}

Test(tpu_body, capacity_combinations_refused)
{
	struct tpu_qr_spec s;
	struct err e;

	spec_named(&s);
	s.capacity = TPU_CAPACITY_FLEX_START;
	assert_refused(&s, "needs a maximum run duration", NULL);
	s.max_run_duration_s = 7 * 86400 + 1;
	assert_refused(&s, "longer than the 7 days", NULL);
	s.max_run_duration_s = 7 * 86400;
	free(body_of(&s));
	s.reservation = "r1";
	assert_refused(&s, "flex-start capacity comes from no reservation",
		       "reservation r1");
	s.reservation = NULL;
	for (int c = TPU_CAPACITY_ON_DEMAND; c < TPU_CAPACITY_FLEX_START;
	     c++) {
		s.capacity = (enum tpu_capacity)c;
		assert_refused(&s, "for flex-start capacity only", NULL);
	}
	/* The same check without a parent, for callers that must refuse
	 * before any request. */
	err_init(&e);
	cr_assert_eq(tpu_qr_spec_check(&s, &e), CLOUD_EINVAL);
	s.max_run_duration_s = 0;
	cr_assert_eq(tpu_qr_spec_check(&s, &e), 0, "%s", e.msg);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, bad_spec)
{
	struct tpu_qr_spec s;

	tpu_qr_spec_init(&s);
	assert_refused(&s, "has no name", NULL);
	s.id = "q";
	s.node_count = 0;
	assert_refused(&s, "node count of 0", NULL);
	s.node_count = 1;
	s.accelerator_type = "v5\xff";
	assert_refused(&s, "accelerator type", NULL);
	tpu_qr_spec_release(&s);
}

Test(tpu_body, labels)
{
	static const char *const bad[] = {
		"nokv", "=v", "Team=x", "1team=x", "te am=x", "team=Upper",
		"team=a.b", "team=\xc3\xbc",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"=x", /* 64 */
		"k=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	struct tpu_qr_spec s;
	char *b;

	for (size_t i = 0; i < NELEM(bad); i++) {
		char names[16];

		/* The message quotes the entry at fault. */
		snprintf(names, sizeof(names), "label \"%.4s", bad[i]);
		spec_named(&s);
		cr_assert_eq(strlist_push(&s.labels, "ok=1"), 0);
		cr_assert_eq(strlist_push(&s.labels, bad[i]), 0);
		assert_refused(&s, names, NULL);
		tpu_qr_spec_release(&s);
	}
	spec_named(&s);
	cr_assert_eq(strlist_push(&s.labels, "a=1"), 0);
	cr_assert_eq(strlist_push(&s.labels, "empty="), 0);
	cr_assert_eq(strlist_push(&s.labels, "a=2"), 0);
	cr_assert_eq(strlist_push(&s.labels,
				  "k23456789012345678901234567890123456789012"
				  "345678901234567890123=v_-9"), 0); /* 63 */
	b = body_of(&s);
	cr_assert(strstr(b, "\"labels\":{\"a\":\"2\",\"empty\":\"\",\"k2345"),
		  "%s", b);
	free(b);
	tpu_qr_spec_release(&s);
}

static char *filled(size_t n, char c)
{
	char *s = malloc(n + 1);

	cr_assert(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void push_meta(struct tpu_qr_spec *s, const char *key, size_t vlen)
{
	struct buf b;
	char *v = filled(vlen, 'x');

	buf_init(&b);
	cr_assert_eq(buf_appendf(&b, "%s=%s", key, v), 0);
	cr_assert_eq(strlist_push(&s->metadata, b.data), 0);
	buf_release(&b);
	free(v);
}

Test(tpu_body, metadata)
{
	static const struct {
		const char *entry;
		const char *names, *also;
	} bad[] = {
		{ "startup-script", "metadata \"startup-script\"", NULL },
		{ "=v", "empty key", NULL },
		{ "bin=\xff\xfe", "\"bin\"", "UTF-8" },
	};
	struct tpu_qr_spec s;
	char *b;
	json_t *j, *md;

	/* Split at the first '=', any text, the last repeat wins. */
	spec_named(&s);
	cr_assert_eq(strlist_push(&s.metadata, "a=b=c"), 0);
	cr_assert_eq(strlist_push(&s.metadata, "empty="), 0);
	cr_assert_eq(strlist_push(&s.metadata, "k=first"), 0);
	cr_assert_eq(strlist_push(&s.metadata, "k=sec\tond\n\xe2\x82\xac"), 0);
	b = body_of(&s);
	j = load(b);
	md = json_object_get(body_node(j), "metadata");
	cr_assert_eq(json_object_size(md), 3, "%s", b);
	cr_assert_str_eq(json_string_value(json_object_get(md, "a")), "b=c");
	cr_assert_str_eq(json_string_value(json_object_get(md, "empty")), "");
	cr_assert_str_eq(json_string_value(json_object_get(md, "k")),
			 "sec\tond\n\xe2\x82\xac");
	json_decref(j);
	free(b);
	tpu_qr_spec_release(&s);

	/* No '=', an empty key, text that is not UTF-8. */
	for (size_t i = 0; i < NELEM(bad); i++) {
		spec_named(&s);
		cr_assert_eq(strlist_push(&s.metadata, bad[i].entry), 0);
		assert_refused(&s, bad[i].names, bad[i].also);
		tpu_qr_spec_release(&s);
	}

	/* One value: 256 KiB passes, one byte more does not. */
	spec_named(&s);
	push_meta(&s, "big", 256 * 1024);
	free(body_of(&s));
	push_meta(&s, "huge", 256 * 1024 + 1);
	assert_refused(&s, "\"huge\"", "256 KiB");
	tpu_qr_spec_release(&s);

	/* In all: 512 KiB, counted after repeats are replaced. */
	spec_named(&s);
	push_meta(&s, "a", 200 * 1024);
	push_meta(&s, "b", 200 * 1024);
	push_meta(&s, "a", 100 * 1024);
	push_meta(&s, "c", 200 * 1024);
	free(body_of(&s));
	push_meta(&s, "d", 20 * 1024);
	assert_refused(&s, "\"d\"", "512 KiB");
	tpu_qr_spec_release(&s);
}
