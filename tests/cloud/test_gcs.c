/*
 * tests/cloud/test_gcs.c: the GCS client and the gs:// store against
 * tests/fakes/gcs_fake.py: round trips, the exact requests (chunk sizes,
 * escaping, preconditions), every injected fault during upload init, a
 * middle chunk, the final chunk, listing and download with the data
 * identical afterwards, pagination, compose, and malformed answers.
 */
#include "cloud/gcs.h"
#include "tests/cloud/gcs_check.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024u * 1024)
#define BUCKET "bkt"

static struct fake_gcs fake;
static struct gcs_client client;

static void start_client(struct gcs_client *c)
{
	struct http_policy p;
	struct err e;

	gcs_check_policy(&p);
	cr_assert_eq(gcs_client_init(c, &p, &e), 0, "%s", e.msg);
}

static void setup(void)
{
	gcs_check_clean_env();
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
	start_client(&client);
}

static void teardown(void)
{
	gcs_client_release(&client);
	fake_gcs_stop(&fake);
}

TestSuite(gcs, .init = setup, .fini = teardown, .timeout = 300);

static void expect_object(const char *name, const void *want, size_t len)
{
	gcs_check_object(&client, BUCKET, name, want, len);
}

static void fault(const char *rules)
{
	gcs_check_fault(&fake, rules);
}

static void no_faults_left(void)
{
	gcs_check_no_faults_left(&fake);
}

static json_t *requests(void)
{
	return gcs_check_requests(&fake);
}

static void forget_requests(void)
{
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/requests", NULL,
				   NULL), 200);
}

Test(gcs, simple_round_trip_and_escaping)
{
	const char *name = "ckpt/step 1/a+b?c#d%e.json";
	struct store_object o, s;
	struct err e;
	json_t *log, *v;
	size_t i;
	bool seen = false;

	cr_assert_eq(gcs_put(&client, BUCKET, name, "hello", 5,
			     STORE_CREATE_ONLY, &o, &e), 0, "%s", e.msg);
	cr_assert_str_eq(o.name, name);
	cr_assert_gt(o.generation, 0);
	cr_assert_eq(o.size, 5);
	cr_assert_eq(o.crc32c, crc32c_update(0, "hello", 5));
	cr_assert_eq(gcs_stat(&client, BUCKET, name, 0, &s, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(s.generation, o.generation);
	cr_assert(s.updated[0]);
	expect_object(name, "hello", 5);
	log = requests();
	json_array_foreach(log, i, v) {
		const char *path = json_string_value(json_object_get(v,
								     "path"));
		json_t *q = json_object_get(v, "query");

		if (!strcmp(json_string_value(json_object_get(v, "method")),
			    "GET") && json_object_get(q, "alt")) {
			cr_assert_str_eq(path, "/storage/v1/b/bkt/o/"
				"ckpt%2Fstep%201%2Fa%2Bb%3Fc%23d%25e.json");
			cr_assert_eq(atoll(json_string_value(json_object_get(
					     q, "generation"))), o.generation);
			seen = true;
		}
		if (!strcmp(json_string_value(json_object_get(v, "method")),
			    "POST")) {
			cr_assert_str_eq(json_string_value(json_object_get(
						 q, "uploadType")), "media");
			cr_assert_str_eq(json_string_value(json_object_get(
						 q, "ifGenerationMatch")), "0");
			cr_assert_str_eq(json_string_value(json_object_get(
				json_object_get(v, "headers"), "x-goog-hash")),
				"crc32c=mnG7TA==");
		}
	}
	cr_assert(seen);
	json_decref(log);
	store_object_release(&o);
	store_object_release(&s);
	/* Empty objects too. */
	cr_assert_eq(gcs_put(&client, BUCKET, "empty", "", 0,
			     STORE_ANY_GENERATION, NULL, &e), 0, "%s", e.msg);
	expect_object("empty", "", 0);
}

Test(gcs, preconditions)
{
	struct store_object o, o2;
	struct err e;

	cr_assert_eq(gcs_put(&client, BUCKET, "c.json", "1", 1,
			     STORE_CREATE_ONLY, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(gcs_put(&client, BUCKET, "c.json", "2", 1,
			     STORE_CREATE_ONLY, NULL, &e),
		     CLOUD_EPRECONDITION);
	cr_assert(strstr(e.msg, "gs://bkt/c.json"), "%s", e.msg);
	/* Compare-and-swap on the generation. */
	cr_assert_eq(gcs_put(&client, BUCKET, "c.json", "3", 1, o.generation,
			     &o2, &e), 0, "%s", e.msg);
	cr_assert_gt(o2.generation, o.generation);
	cr_assert_eq(gcs_put(&client, BUCKET, "c.json", "4", 1, o.generation,
			     NULL, &e), CLOUD_EPRECONDITION);
	cr_assert_eq(gcs_delete(&client, BUCKET, "c.json", o.generation, &e),
		     CLOUD_EPRECONDITION);
	cr_assert_eq(gcs_delete(&client, BUCKET, "c.json", o2.generation, &e),
		     0, "%s", e.msg);
	store_object_release(&o);
	cr_assert_eq(gcs_stat(&client, BUCKET, "c.json", 0, &o, &e),
		     CLOUD_ENOTFOUND);
	cr_assert(strstr(e.msg, "gs://bkt/c.json"), "%s", e.msg);
	cr_assert_eq(gcs_delete(&client, BUCKET, "c.json",
				STORE_ANY_GENERATION, &e), CLOUD_ENOTFOUND);
	store_object_release(&o2);
	/* A resumable create-only upload over an existing object. */
	{
		struct gcs_upload u;

		cr_assert_eq(gcs_put(&client, BUCKET, "d", "x", 1,
				     STORE_CREATE_ONLY, NULL, &e), 0);
		cr_assert_eq(gcs_upload_begin(&client, BUCKET, "d",
					      STORE_CREATE_ONLY, 0, &u, &e),
			     CLOUD_EPRECONDITION);
	}
}

/* Uploads data through a resumable session in writes of step bytes. */
static int upload(const char *name, const unsigned char *data, size_t len,
		  size_t chunk, size_t step, struct store_object *out,
		  struct err *e)
{
	struct gcs_upload u;
	int rc = gcs_upload_begin(&client, BUCKET, name, STORE_CREATE_ONLY,
				  chunk, &u, e);

	if (rc)
		return rc;
	for (size_t off = 0; off < len && !rc; off += step)
		rc = gcs_upload_write(&u, data + off,
				      len - off < step ? len - off : step, e);
	if (!rc)
		rc = gcs_upload_finish(&u, out, e);
	gcs_upload_release(&u);
	return rc;
}

Test(gcs, resumable_64mib_in_aligned_chunks)
{
	size_t len = 64 * MiB + 12345;
	unsigned char *data = gcs_check_pattern(len, 1);
	struct store_object o;
	struct err e;
	json_t *log, *v;
	size_t i;
	unsigned puts = 0;

	forget_requests();
	cr_assert_eq(upload("big", data, len, 0, 1000003, &o, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(o.size, len);
	log = requests();
	json_array_foreach(log, i, v) {
		json_t *h = json_object_get(v, "headers");
		const char *cr = json_string_value(json_object_get(
			h, "content-range"));
		unsigned long long a, b;

		if (strcmp(json_string_value(json_object_get(v, "method")),
			   "PUT"))
			continue;
		puts++;
		cr_assert(cr);
		cr_assert_eq(sscanf(cr, "bytes %llu-%llu/", &a, &b), 2, "%s",
			     cr);
		cr_assert_eq(a % GCS_CHUNK_ALIGN, 0, "%s", cr);
		if (!strstr(cr, "/*"))
			continue;
		/* Non-final chunks: exactly the default chunk size. */
		cr_assert_eq(b - a + 1, GCS_CHUNK_DEFAULT, "%s", cr);
	}
	cr_assert_eq(puts, 9);
	json_decref(log);
	expect_object("big", data, len);
	store_object_release(&o);
	free(data);
}

/* One fault during one phase of a 3 MiB upload in 1 MiB chunks: init
 * (before begin), middle (before the second chunk), final (before
 * finish). */
static void upload_with_fault(const char *phase, const char *rule)
{
	size_t len = 3 * MiB + 777;
	unsigned char *data = gcs_check_pattern(len, 7);
	char name[64];
	struct gcs_upload u;
	struct store_object o;
	struct err e;

	snprintf(name, sizeof(name), "f/%s-%u", phase, (unsigned)mono_us());
	if (!strcmp(phase, "init"))
		fault(rule);
	cr_assert_eq(gcs_upload_begin(&client, BUCKET, name, STORE_CREATE_ONLY,
				      MiB, &u, &e), 0, "%s: %s", rule, e.msg);
	cr_assert_eq(gcs_upload_write(&u, data, MiB, &e), 0, "%s", e.msg);
	if (!strcmp(phase, "middle"))
		fault(rule);
	cr_assert_eq(gcs_upload_write(&u, data + MiB, 2 * MiB, &e), 0,
		     "%s: %s", rule, e.msg);
	if (!strcmp(phase, "final"))
		fault(rule);
	cr_assert_eq(gcs_upload_write(&u, data + 3 * MiB, len - 3 * MiB, &e),
		     0, "%s", e.msg);
	cr_assert_eq(gcs_upload_finish(&u, &o, &e), 0, "%s: %s", rule, e.msg);
	gcs_upload_release(&u);
	no_faults_left();
	expect_object(name, data, len);
	store_object_release(&o);
	free(data);
}

static const char *const upload_faults[] = {
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"status\", "
	"\"status\": 408}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"status\", "
	"\"status\": 429}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"status\", "
	"\"status\": 503}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"reset\"}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"cut\", "
	"\"after_bytes\": 300000}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"stall\", "
	"\"seconds\": 3}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"reset\", "
	"\"processed\": true}",
	"{\"method\": \"%s\", \"path\": \"%s\", \"action\": \"status\", "
	"\"status\": 503, \"times\": 3}",
};

static void each_upload_fault(const char *phase)
{
	const char *method = strcmp(phase, "init") ? "PUT" : "POST";
	const char *path = strcmp(phase, "init") ? "upload_id="
						  : "uploadType=resumable";

	for (size_t i = 0; i < sizeof(upload_faults) / sizeof(*upload_faults);
	     i++) {
		char rule[256];

		/* A cut needs a body: the init request has none. */
		if (!strcmp(phase, "init") && strstr(upload_faults[i], "cut"))
			continue;
		snprintf(rule, sizeof(rule), upload_faults[i], method, path);
		upload_with_fault(phase, rule);
	}
}

Test(gcs, faults_during_upload_init)
{
	each_upload_fault("init");
}

Test(gcs, faults_during_a_middle_chunk)
{
	each_upload_fault("middle");
}

Test(gcs, faults_during_the_final_chunk)
{
	each_upload_fault("final");
}

Test(gcs, faults_during_simple_uploads_with_a_precondition)
{
	struct err e;

	fault("{\"method\": \"POST\", \"path\": \"uploadType=media\", "
	      "\"action\": \"status\", \"status\": 503}");
	cr_assert_eq(gcs_put(&client, BUCKET, "p1", "abc", 3,
			     STORE_CREATE_ONLY, NULL, &e), 0, "%s", e.msg);
	/* The first attempt lands but its answer is lost: the retry's 412
	 * is recognized as our own write. */
	fault("{\"method\": \"POST\", \"path\": \"uploadType=media\", "
	      "\"action\": \"reset\", \"processed\": true}");
	cr_assert_eq(gcs_put(&client, BUCKET, "p2", "abc", 3,
			     STORE_CREATE_ONLY, NULL, &e), 0, "%s", e.msg);
	no_faults_left();
	/* Without a precondition a write is not repeated. */
	fault("{\"method\": \"POST\", \"path\": \"uploadType=media\", "
	      "\"action\": \"status\", \"status\": 503}");
	cr_assert_eq(gcs_put(&client, BUCKET, "p3", "abc", 3,
			     STORE_ANY_GENERATION, NULL, &e), CLOUD_EHTTP);
	cr_assert(strstr(e.msg, "503"), "%s", e.msg);
	expect_object("p1", "abc", 3);
	expect_object("p2", "abc", 3);
}

static void download_with_fault(const char *rule, size_t len)
{
	unsigned char *data = gcs_check_pattern(len, 3);
	struct err e;

	cr_assert_eq(gcs_put(&client, BUCKET, "dl", data, len,
			     STORE_ANY_GENERATION, NULL, &e), 0, "%s", e.msg);
	fault(rule);
	expect_object("dl", data, len);
	no_faults_left();
	free(data);
}

Test(gcs, faults_during_download)
{
	static const char *const rules[] = {
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 408}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 429}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 503, \"times\": 2}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"reset\"}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"cut\", \"after_bytes\": 1000000, \"times\": 3}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"stall\", \"seconds\": 3}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"stall\", \"seconds\": 3, \"after_bytes\": 500000}",
		"{\"method\": \"GET\", \"path\": \"/o/dl$\", \"action\": "
		"\"status\", \"status\": 503}",
	};

	for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++)
		download_with_fault(rules[i], 5 * MiB + 3);
}

Test(gcs, resumed_download_asks_for_the_rest_of_one_generation)
{
	size_t len = 2 * MiB;
	unsigned char *data = gcs_check_pattern(len, 4);
	struct store_object o;
	struct err e;
	json_t *log, *v;
	size_t i;
	unsigned ranged = 0;

	cr_assert_eq(gcs_put(&client, BUCKET, "r", data, len,
			     STORE_ANY_GENERATION, &o, &e), 0, "%s", e.msg);
	forget_requests();
	fault("{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
	      "\"cut\", \"after_bytes\": 700000}");
	expect_object("r", data, len);
	log = requests();
	json_array_foreach(log, i, v) {
		const char *range = json_string_value(json_object_get(
			json_object_get(v, "headers"), "range"));
		const char *gen = json_string_value(json_object_get(
			json_object_get(v, "query"), "generation"));

		if (!json_object_get(json_object_get(v, "query"), "alt"))
			continue;
		cr_assert(gen);
		cr_assert_eq(atoll(gen), o.generation);
		if (range) {
			cr_assert_str_eq(range, "bytes=700000-");
			ranged++;
		}
	}
	cr_assert_eq(ranged, 1);
	json_decref(log);
	store_object_release(&o);
	free(data);
}

Test(gcs, corrupted_download_is_caught)
{
	size_t len = 100000;
	unsigned char *data = gcs_check_pattern(len, 5);
	struct buf got;
	struct err e;

	cr_assert_eq(gcs_put(&client, BUCKET, "c", data, len,
			     STORE_ANY_GENERATION, NULL, &e), 0, "%s", e.msg);
	fault("{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
	      "\"corrupt\", \"after_bytes\": 5000}");
	buf_init(&got);
	cr_assert_eq(gcs_get(&client, BUCKET, "c", 0, gcs_check_to_buf, &got, NULL, &e),
		     CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "crc32c"), "%s", e.msg);
	buf_release(&got);
	free(data);
}

struct names {
	struct strlist names;
	unsigned prefixes;
};

static int collect(void *ud, const struct store_object *o, bool is_prefix)
{
	struct names *n = ud;

	if (is_prefix)
		n->prefixes++;
	else
		cr_assert_gt(o->generation, 0);
	return strlist_push(&n->names, o->name) ? CLOUD_ENOMEM : 0;
}

Test(gcs, pagination_and_delimiters)
{
	struct names n = { 0 };
	struct err e;
	char name[64];
	json_t *log, *v;
	size_t i;
	unsigned pages = 0;

	strlist_init(&n.names);
	for (unsigned k = 0; k < 1050; k++) {
		snprintf(name, sizeof(name), "many/%05u", k);
		cr_assert_eq(gcs_put(&client, BUCKET, name, "x", 1,
				     STORE_ANY_GENERATION, NULL, &e), 0, "%s",
			     e.msg);
	}
	forget_requests();
	fault("{\"method\": \"GET\", \"path\": \"pageToken\", \"action\": "
	      "\"status\", \"status\": 503}");
	fault("{\"method\": \"GET\", \"path\": \"pageToken\", \"action\": "
	      "\"reset\"}");
	fault("{\"method\": \"GET\", \"path\": \"pageToken\", \"action\": "
	      "\"cut\", \"after_bytes\": 100}");
	cr_assert_eq(gcs_list(&client, BUCKET, "many/", NULL, 100, collect,
			      &n, &e), 0, "%s", e.msg);
	no_faults_left();
	cr_assert_eq(n.names.n, 1050);
	for (unsigned k = 0; k < 1050; k++) {
		snprintf(name, sizeof(name), "many/%05u", k);
		cr_assert_str_eq(n.names.v[k], name);
	}
	log = requests();
	json_array_foreach(log, i, v)
		if (json_integer_value(json_object_get(v, "status")) == 200 &&
		    json_is_null(json_object_get(v, "fault")))
			pages++;
	cr_assert_eq(pages, 11);
	json_decref(log);
	strlist_release(&n.names);

	/* Prefixes and objects merge in name order. */
	strlist_init(&n.names);
	n.prefixes = 0;
	for (unsigned k = 0; k < 4; k++) {
		static const char *const more[] = { "d/a", "d/b/1", "d/b/2",
						    "d/c" };

		cr_assert_eq(gcs_put(&client, BUCKET, more[k], "x", 1,
				     STORE_ANY_GENERATION, NULL, &e), 0);
	}
	cr_assert_eq(gcs_list(&client, BUCKET, "d/", "/", 0, collect, &n, &e),
		     0, "%s", e.msg);
	cr_assert_eq(n.names.n, 3);
	cr_assert_str_eq(n.names.v[0], "d/a");
	cr_assert_str_eq(n.names.v[1], "d/b/");
	cr_assert_str_eq(n.names.v[2], "d/c");
	cr_assert_eq(n.prefixes, 1);
	strlist_release(&n.names);
}

Test(gcs, compose)
{
	const char *src[] = { "part/0", "part/1", "part/2" };
	unsigned char *data = gcs_check_pattern(3000, 9);
	struct store_object o;
	struct err e;

	for (int k = 0; k < 3; k++)
		cr_assert_eq(gcs_put(&client, BUCKET, src[k], data + k * 1000,
				     1000, STORE_CREATE_ONLY, NULL, &e), 0);
	cr_assert_eq(gcs_compose(&client, BUCKET, "whole", src, 3,
				 STORE_CREATE_ONLY, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(o.size, 3000);
	cr_assert_eq(o.crc32c, crc32c_update(0, data, 3000));
	expect_object("whole", data, 3000);
	cr_assert_eq(gcs_compose(&client, BUCKET, "whole", src, 3,
				 STORE_CREATE_ONLY, NULL, &e),
		     CLOUD_EPRECONDITION);
	store_object_release(&o);
	free(data);
}

Test(gcs, tokens_are_sent_and_refusals_explained)
{
	struct fake_gcs locked;
	const char *args[] = { "--require-token", "ya29.right", NULL };
	struct gcs_client c;
	struct err e;

	cr_assert_eq(fake_gcs_start(&locked, args), 0);
	setenv("STORAGE_EMULATOR_HOST", locked.base, 1);
	start_client(&c);
	cr_assert_eq(gcs_put(&c, BUCKET, "x", "1", 1, STORE_ANY_GENERATION,
			     NULL, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "401"), "%s", e.msg);
	cr_assert(strstr(e.msg, "application-default login"), "%s", e.msg);
	gcs_client_release(&c);
	setenv("SLICECTL_ACCESS_TOKEN", "ya29.right", 1);
	start_client(&c);
	cr_assert_eq(gcs_put(&c, BUCKET, "x", "1", 1, STORE_ANY_GENERATION,
			     NULL, &e), 0, "%s", e.msg);
	gcs_client_release(&c);
	setenv("SLICECTL_ACCESS_TOKEN", "ya29.wrong", 1);
	start_client(&c);
	cr_assert_eq(gcs_stat(&c, BUCKET, "x", 0, NULL, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "Invalid Credentials"), "%s", e.msg);
	gcs_client_release(&c);
	fake_gcs_stop(&locked);
}

Test(gcs, malformed_answers)
{
	static const struct tiny_answer ans[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n"
		  "{\"name\": \"x\", \"generation\": \"abc\", "
		  "\"size\": \"1\", \"crc32c\": \"AAAAAA==\"}", 0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n<html>oops",
		  0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n"
		  "{\"items\": 5}",
		  0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n"
		  "{\"items\": [{\"name\": \"a\", \"generation\": \"1\", "
		  "\"size\": \"1\"}]}",
		  0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n[]", 0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n{}", 0, false },
	};
	struct tiny_http srv;
	struct gcs_client c;
	struct store_object o;
	struct names n = { 0 };
	struct gcs_upload u;
	struct err e;

	cr_assert_eq(tiny_start(&srv, ans, 6), 0);
	setenv("STORAGE_EMULATOR_HOST", srv.base, 1);
	start_client(&c);
	strlist_init(&n.names);
	cr_assert_eq(gcs_stat(&c, BUCKET, "x", 0, &o, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "generation"), "%s", e.msg);
	cr_assert_eq(gcs_stat(&c, BUCKET, "x", 0, &o, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "not JSON"), "%s", e.msg);
	cr_assert_eq(gcs_list(&c, BUCKET, "", NULL, 0, collect, &n, &e),
		     CLOUD_ECORRUPT);
	cr_assert_eq(gcs_list(&c, BUCKET, "", NULL, 0, collect, &n, &e),
		     CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "crc32c"), "%s", e.msg);
	cr_assert_eq(gcs_list(&c, BUCKET, "", NULL, 0, collect, &n, &e),
		     CLOUD_ECORRUPT);
	/* A session answer without Location. */
	cr_assert_eq(gcs_upload_begin(&c, BUCKET, "u", STORE_CREATE_ONLY, 0,
				      &u, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "Location"), "%s", e.msg);
	gcs_client_release(&c);
	tiny_stop(&srv);
	strlist_release(&n.names);
}

Test(gcs, store_facade_over_gs)
{
	struct store *s;
	struct store_upload *u;
	struct store_object o;
	struct names n = { 0 };
	struct err e;
	char *text;
	size_t len;
	unsigned char *data = gcs_check_pattern(20 * MiB, 11);

	cr_assert_eq(store_open(&s, "gs://bkt/runs/r1", &e), 0, "%s", e.msg);
	cr_assert_eq(store_put(s, "control.json", "{}", 2, STORE_CREATE_ONLY,
			       &o, &e), 0, "%s", e.msg);
	cr_assert_str_eq(o.name, "control.json");
	store_object_release(&o);
	cr_assert_eq(store_put(s, "control.json", "{}", 2, STORE_CREATE_ONLY,
			       NULL, &e), CLOUD_EPRECONDITION);
	cr_assert_eq(store_read(s, "control.json", 100, &text, &len, NULL, &e),
		     0, "%s", e.msg);
	cr_assert_str_eq(text, "{}");
	free(text);
	cr_assert_eq(store_upload_begin(s, "ckpt/part", STORE_CREATE_ONLY, &u,
					&e), 0, "%s", e.msg);
	for (size_t off = 0; off < 20 * MiB; off += MiB)
		cr_assert_eq(store_upload_write(u, data + off, MiB, &e), 0,
			     "%s", e.msg);
	/* Nothing is visible before finish. */
	cr_assert_eq(store_stat(s, "ckpt/part", &o, &e), CLOUD_ENOTFOUND);
	cr_assert_eq(store_upload_finish(u, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(o.size, 20 * MiB);
	store_object_release(&o);
	cr_assert_eq(store_upload_begin(s, "ckpt/aborted", STORE_CREATE_ONLY,
					&u, &e), 0, "%s", e.msg);
	cr_assert_eq(store_upload_write(u, data, 9 * MiB, &e), 0, "%s", e.msg);
	store_upload_abort(u);
	cr_assert_eq(store_stat(s, "ckpt/aborted", &o, &e), CLOUD_ENOTFOUND);
	strlist_init(&n.names);
	cr_assert_eq(store_list(s, "", "/", collect, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n.names.n, 2);
	cr_assert_str_eq(n.names.v[0], "ckpt/");
	cr_assert_str_eq(n.names.v[1], "control.json");
	strlist_release(&n.names);
	expect_object("runs/r1/ckpt/part", data, 20 * MiB);
	cr_assert_eq(store_delete(s, "control.json", STORE_ANY_GENERATION, &e),
		     0, "%s", e.msg);
	store_close(s);
	free(data);
}

static int count_only(void *ud, const void *data, size_t len, struct err *e)
{
	(void)data;
	(void)e;
	*(uint64_t *)ud += len;
	return 0;
}

/* A 2 GiB object through the fake: about 10 s here and 2 GiB of the
 * fake's memory; SLICECTL_TEST_2GIB=0 skips it on small machines. */
Test(gcs, two_gib_round_trip)
{
	const char *on = getenv("SLICECTL_TEST_2GIB");
	size_t piece = 8 * MiB;
	uint64_t total = 2048ull * MiB, got = 0;
	unsigned char *data;
	struct gcs_upload u;
	struct store_object o;
	uint64_t t0;
	struct err e;

	if (on && !strcmp(on, "0"))
		cr_skip_test("SLICECTL_TEST_2GIB=0");
	data = gcs_check_pattern(piece, 2);
	t0 = mono_ms();
	cr_assert_eq(gcs_upload_begin(&client, BUCKET, "huge",
				      STORE_CREATE_ONLY, 0, &u, &e), 0);
	for (uint64_t off = 0; off < total; off += piece) {
		data[0] = (unsigned char)(off >> 23);
		cr_assert_eq(gcs_upload_write(&u, data, piece, &e), 0, "%s",
			     e.msg);
	}
	cr_assert_eq(gcs_upload_finish(&u, &o, &e), 0, "%s", e.msg);
	gcs_upload_release(&u);
	cr_log_info("2 GiB upload: %llu ms",
		    (unsigned long long)(mono_ms() - t0));
	cr_assert_eq(o.size, total);
	t0 = mono_ms();
	/* gcs_get checks the CRC32C of all bytes against the object's. */
	cr_assert_eq(gcs_get(&client, BUCKET, "huge", o.generation,
			     count_only, &got, NULL, &e), 0, "%s", e.msg);
	cr_log_info("2 GiB download: %llu ms",
		    (unsigned long long)(mono_ms() - t0));
	cr_assert_eq(got, total);
	store_object_release(&o);
	free(data);
}
