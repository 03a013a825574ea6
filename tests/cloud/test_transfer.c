/*
 * tests/cloud/test_transfer.c: parallel composite uploads and ranged
 * downloads (cloud/transfer.c) against tests/fakes/gcs_fake.py, with 1 MiB
 * pieces so that a few MiB make many: round trips around the size where
 * one stream turns into pieces and past one round of compose, every fault
 * the fake injects during a piece, a compose and a range with the data
 * compared afterwards, no temporary piece left after success, failure or
 * abort, the pieces really on several connections at once, and one
 * token fetch shared by every connection.
 */
#include "cloud/transfer.h"
#include "tests/cloud/gcs_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024u * 1024)
#define BUCKET "bkt"

static struct fake_gcs fake;
static struct gcs_client client;

static void setup(void)
{
	struct http_policy p;
	struct err e;

	gcs_check_clean_env();
	setenv("SLICECTL_XFER_PIECE_MIB", "1", 1);
	setenv("SLICECTL_XFER_STREAMS", "4", 1);
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
	gcs_check_policy(&p);
	cr_assert_eq(gcs_client_init(&client, &p, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
	gcs_client_release(&client);
	fake_gcs_stop(&fake);
}

TestSuite(transfer, .init = setup, .fini = teardown, .timeout = 300);

static int count_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	(void)is_prefix;
	if (store_is_piece(o->name))
		++*(unsigned *)ud;
	return 0;
}

static void no_pieces_left(void)
{
	unsigned n = 0;
	struct err e;

	cr_assert_eq(gcs_list(&client, BUCKET, NULL, NULL, 0, count_cb, &n,
			      &e), 0, "%s", e.msg);
	cr_assert_eq(n, 0, "%u temporary pieces left", n);
}

/* Writes data in uneven slices, as pack_tree does. */
static int upload(const char *name, const unsigned char *data, size_t len,
		  int64_t if_gen, struct store_object *out, struct err *e)
{
	struct xfer_config cfg;
	struct xfer_upload *u;
	size_t off = 0, step = 333333;
	int rc;

	xfer_config_default(&cfg);
	rc = xfer_upload_begin(&client, BUCKET, name, if_gen, &cfg, &u, e);
	if (rc)
		return rc;
	while (off < len && !rc) {
		size_t n = len - off < step ? len - off : step;

		rc = xfer_upload_write(u, data + off, n, e);
		off += n;
	}
	if (rc) {
		xfer_upload_abort(u);
		return rc;
	}
	return xfer_upload_finish(u, out, e);
}

static void round_trip(size_t len, unsigned seed)
{
	unsigned char *data = gcs_check_pattern(len, seed);
	struct store_object o;
	char name[64];
	struct err e;

	snprintf(name, sizeof(name), "rt/%zu", len);
	cr_assert_eq(upload(name, data, len, STORE_CREATE_ONLY, &o, &e), 0,
		     "%zu: %s", len, e.msg);
	cr_assert_eq(o.size, len);
	cr_assert_eq(o.crc32c, crc32c_update(0, data, len));
	store_object_release(&o);
	gcs_check_object(&client, BUCKET, name, data, len);
	free(data);
}

Test(transfer, round_trips_from_one_stream_to_two_compose_rounds)
{
	json_t *log, *v;
	size_t i;
	unsigned composes = 0, sessions = 0;

	round_trip(0, 1);
	round_trip(MiB, 2);
	log = gcs_check_requests(&fake);
	json_array_foreach(log, i, v) {
		const char *path = json_string_value(json_object_get(v,
								     "path"));
		json_t *q = json_object_get(v, "query");
		const char *ut = json_string_value(json_object_get(q,
							"uploadType"));

		const char *method = json_string_value(json_object_get(v,
								      "method"));

		composes += strstr(path, "/compose") != NULL;
		sessions += ut && !strcmp(ut, "resumable") &&
			    !strcmp(method, "POST");
	}
	json_decref(log);
	/* Within one piece: one resumable session each, no pieces. */
	cr_assert_eq(composes, 0);
	cr_assert_eq(sessions, 2);
	round_trip(MiB + 1, 3);
	round_trip(5 * MiB + 12345, 4);
	/* 41 pieces: two rounds of compose. */
	round_trip(40 * MiB + 7, 5);
	no_pieces_left();
}

Test(transfer, pieces_and_ranges_go_on_several_connections)
{
	size_t len = 8 * MiB;
	unsigned char *data = gcs_check_pattern(len, 6);
	unsigned long ports_put[64], ports_get[64];
	size_t nput = 0, nget = 0, i;
	json_t *log, *v;
	struct err e;

	cr_assert_eq(upload("conn", data, len, STORE_CREATE_ONLY, NULL, &e),
		     0, "%s", e.msg);
	gcs_check_object(&client, BUCKET, "conn", data, len);
	log = gcs_check_requests(&fake);
	json_array_foreach(log, i, v) {
		json_t *q = json_object_get(v, "query");
		const char *ut = json_string_value(json_object_get(q,
							"uploadType"));
		const char *alt = json_string_value(json_object_get(q, "alt"));
		unsigned long port = (unsigned long)json_integer_value(
			json_object_get(v, "connection"));
		unsigned long *ports = NULL;
		size_t *n = NULL;
		bool seen = false;

		if (ut && !strcmp(ut, "media")) {
			ports = ports_put;
			n = &nput;
		} else if (alt && !strcmp(alt, "media")) {
			ports = ports_get;
			n = &nget;
		}
		if (!ports)
			continue;
		for (size_t k = 0; k < *n; k++)
			seen |= ports[k] == port;
		if (!seen && *n < 64)
			ports[(*n)++] = port;
	}
	json_decref(log);
	cr_assert_eq(nput, 4, "pieces went on %zu connections", nput);
	cr_assert_eq(nget, 4, "ranges went on %zu connections", nget);
	no_pieces_left();
	free(data);
}

static const char *const piece_faults[] = {
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"status\", \"status\": 408}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"status\", \"status\": 429}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"status\", \"status\": 503, \"times\": 3}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"reset\"}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"cut\", \"after_bytes\": 300000}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"stall\", \"seconds\": 3}",
	"{\"method\": \"POST\", \"path\": \"uploadType=media\", \"action\": "
	"\"reset\", \"processed\": true}",
	"{\"method\": \"POST\", \"path\": \"/compose\", \"action\": "
	"\"status\", \"status\": 503}",
	"{\"method\": \"POST\", \"path\": \"/compose\", \"action\": "
	"\"reset\"}",
	/* The final compose lands but its answer is lost. */
	"{\"method\": \"POST\", \"path\": \"/compose\", \"action\": "
	"\"reset\", \"processed\": true}",
	"{\"method\": \"DELETE\", \"path\": \"xfer-piece\", \"action\": "
	"\"status\", \"status\": 503}",
};

Test(transfer, faults_during_pieces_and_compose)
{
	size_t len = 5 * MiB + 777;
	unsigned char *data = gcs_check_pattern(len, 7);

	for (size_t i = 0; i < sizeof(piece_faults) / sizeof(*piece_faults);
	     i++) {
		char name[32];
		struct store_object o;
		struct err e;

		snprintf(name, sizeof(name), "f/%zu", i);
		gcs_check_fault(&fake, piece_faults[i]);
		cr_assert_eq(upload(name, data, len, STORE_CREATE_ONLY, &o,
				    &e), 0, "%s: %s", piece_faults[i], e.msg);
		cr_assert_eq(o.crc32c, crc32c_update(0, data, len));
		store_object_release(&o);
		gcs_check_no_faults_left(&fake);
		gcs_check_object(&client, BUCKET, name, data, len);
		no_pieces_left();
	}
	free(data);
}

Test(transfer, faults_during_ranges)
{
	static const char *const rules[] = {
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 408}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 429}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"status\", \"status\": 503, \"times\": 3}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"reset\"}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"cut\", \"after_bytes\": 300000, \"times\": 3}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"stall\", \"seconds\": 3}",
		"{\"method\": \"GET\", \"path\": \"alt=media\", \"action\": "
		"\"stall\", \"seconds\": 3, \"after_bytes\": 500000}",
	};
	size_t len = 6 * MiB + 3;
	unsigned char *data = gcs_check_pattern(len, 8);
	struct buf got;
	struct err e;

	buf_init(&got);
	cr_assert_eq(upload("dl", data, len, STORE_CREATE_ONLY, NULL, &e), 0,
		     "%s", e.msg);
	for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++) {
		gcs_check_fault(&fake, rules[i]);
		gcs_check_object(&client, BUCKET, "dl", data, len);
		gcs_check_no_faults_left(&fake);
	}
	/* A range damaged on the way fails the whole, as one stream does. */
	gcs_check_fault(&fake, "{\"method\": \"GET\", \"path\": \"alt=media\", "
			"\"action\": \"corrupt\", \"after_bytes\": 1000}");
	cr_assert_eq(gcs_get(&client, BUCKET, "dl", 0, gcs_check_to_buf, &got,
			     NULL, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "damaged"), "%s", e.msg);
	buf_release(&got);
	free(data);
}

Test(transfer, a_failed_or_abandoned_upload_leaves_no_piece)
{
	size_t len = 6 * MiB;
	unsigned char *data = gcs_check_pattern(len, 9);
	struct xfer_config cfg;
	struct xfer_upload *u;
	struct store_object o;
	struct err e;

	/* A piece refused for good fails the upload. */
	gcs_check_fault(&fake, "{\"method\": \"POST\", \"path\": \"uploadType=media\", "
	      "\"action\": \"status\", \"status\": 403, \"times\": 100}");
	cr_assert_neq(upload("fail", data, len, STORE_CREATE_ONLY, NULL, &e),
		      0);
	cr_assert(strstr(e.msg, "403"), "%s", e.msg);
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
	no_pieces_left();
	cr_assert_eq(gcs_stat(&client, BUCKET, "fail", 0, NULL, &e),
		     CLOUD_ENOTFOUND);
	/* Abandoned after some pieces went. */
	xfer_config_default(&cfg);
	cr_assert_eq(xfer_upload_begin(&client, BUCKET, "gone",
				       STORE_CREATE_ONLY, &cfg, &u, &e), 0);
	cr_assert_eq(xfer_upload_write(u, data, len, &e), 0, "%s", e.msg);
	xfer_upload_abort(u);
	no_pieces_left();
	/* The precondition holds for the composed object as a whole. */
	cr_assert_eq(upload("once", data, len, STORE_CREATE_ONLY, &o, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(upload("once", data + 1, len - 1, STORE_CREATE_ONLY,
			    NULL, &e), CLOUD_EPRECONDITION, "%s", e.msg);
	cr_assert_eq(upload("once", data + 1, len - 1, o.generation, NULL,
			    &e), 0, "%s", e.msg);
	gcs_check_object(&client, BUCKET, "once", data + 1, len - 1);
	no_pieces_left();
	store_object_release(&o);
	free(data);
}

Test(transfer, every_connection_borrows_one_token)
{
	char dir[] = "/tmp/slicectl-xfer-token-XXXXXX";
	char cmd[512], pub[64], key[64], sa[64], uri[128];
	const char *args[] = { "--jwt-public-key", pub, NULL };
	size_t len = 6 * MiB, i;
	unsigned char *data = gcs_check_pattern(len, 10);
	unsigned tokens = 0, bearer = 0, media = 0;
	struct fake_gcs locked;
	struct http_policy p;
	char *pem, *text;
	json_t *o, *log, *v;
	FILE *f;
	struct err e;

	cr_assert(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/k.pem", dir);
	snprintf(pub, sizeof(pub), "%s/k.pub", dir);
	snprintf(sa, sizeof(sa), "%s/sa.json", dir);
	snprintf(cmd, sizeof(cmd), "openssl genpkey -algorithm RSA -pkeyopt "
		 "rsa_keygen_bits:2048 -out %s 2>/dev/null && openssl pkey "
		 "-in %s -pubout -out %s", key, key, pub);
	cr_assert_eq(system(cmd), 0);
	pem = calloc(1, 8192);
	f = fopen(key, "r");
	cr_assert(pem && f);
	cr_assert_gt(fread(pem, 1, 8191, f), 100);
	fclose(f);
	cr_assert_eq(fake_gcs_start(&locked, args), 0);
	snprintf(uri, sizeof(uri), "%s/token", locked.base);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type",
		      "service_account", "private_key_id", "kid",
		      "private_key", pem, "client_email", "sa@p.iam",
		      "client_id", "1", "token_uri", uri);
	cr_assert_eq(json_dump_file(o, sa, 0), 0);
	json_decref(o);
	gcs_client_release(&client);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	setenv("STORAGE_EMULATOR_HOST", locked.base, 1);
	http_policy_default(&p);
	cr_assert_eq(gcs_client_init(&client, &p, &e), 0, "%s", e.msg);

	cr_assert_eq(upload("tok", data, len, STORE_CREATE_ONLY, NULL, &e), 0,
		     "%s", e.msg);
	gcs_check_object(&client, BUCKET, "tok", data, len);
	cr_assert_eq(fake_gcs_call(&locked, "GET", "/_fake/requests", NULL,
				   &text), 200);
	log = json_loads(text, 0, NULL);
	free(text);
	json_array_foreach(log, i, v) {
		const char *path = json_string_value(json_object_get(v,
								     "path"));
		const char *auth = json_string_value(json_object_get(
			json_object_get(v, "headers"), "authorization"));
		json_t *q = json_object_get(v, "query");

		tokens += !strcmp(path, "/token");
		if (json_object_get(q, "uploadType") ||
		    json_object_get(q, "alt")) {
			media++;
			bearer += auth && !strncmp(auth, "Bearer ya29.", 12);
		}
	}
	json_decref(log);
	cr_assert_gt(media, 8);
	cr_assert_eq(bearer, media, "%u of %u without the token",
		     media - bearer, media);
	cr_assert_eq(tokens, 1, "%u token fetches", tokens);
	fake_gcs_stop(&locked);
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	free(pem);
	free(data);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}
