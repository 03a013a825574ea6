/*
 * tests/cloud/test_tpu.c: the Cloud TPU API client. The create body for
 * every capacity mode and flag, label and metadata checks; parsing of
 * queued resources, nodes and host keys, strict about types and never
 * crashing on odd JSON; and against a loopback server answering fixed
 * raw responses, the exact requests (paths, query parameters, requestId,
 * bodies), operation polling, errors with their hints, retries, paging,
 * waits and their progress callbacks.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define PARENT "projects/p/locations/z"
#define QR_NAME PARENT "/queuedResources/qr1"

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

static void env_setup(void)
{
	setenv("SLICECTL_ACCESS_TOKEN", "tok-123", 1);
	setenv("SLICECTL_TPU_POLL_MS", "5", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TPU_ENDPOINT");
	setenv("HOME", "/nonexistent", 1);
}

TestSuite(tpu_body, .init = env_setup, .timeout = 60);
TestSuite(tpu_parse, .init = env_setup, .timeout = 60);
TestSuite(tpu, .init = env_setup, .timeout = 60);

/* ---- helpers ---- */

static json_t *load(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	cr_assert(j, "not JSON (%s): %s", je.text, s);
	return j;
}

static void assert_json_eq(const char *got, const char *want)
{
	json_t *g = load(got), *w = load(want);

	cr_assert(json_equal(g, w), "got  %s\nwant %s", got, want);
	json_decref(g);
	json_decref(w);
}

static void spec_basic(struct tpu_qr_spec *s)
{
	tpu_qr_spec_init(s);
	s->id = "qr1";
	s->accelerator_type = "v5litepod-8";
	s->runtime_version = "v2-alpha-tpuv5-lite";
}

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

/* ---- the create body ---- */

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

/* ---- parsing ---- */

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

#define ED25519 "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
#define ECDSA "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg="
#define RSA "AAAAB3NzaC1yc2EAAAADAQAB"

#define ITEM(k, v) "{\"namespace\":\"hostkeys\",\"key\":\"" k "\"," \
		   "\"value\":\"" v "\"}"

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

/* ---- the client against a loopback server ---- */

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
