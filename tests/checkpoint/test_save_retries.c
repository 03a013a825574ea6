/*
 * tests/checkpoint/test_save_retries.c: a save against the GCS fake
 * survives one fault in any request it makes. Each kind of request (the
 * stats, the upload session and its chunk, the unpacked-size object, the
 * step's listing, COMMIT, the listing after it; for a large part its
 * pieces, their compose and their deletion) gets in turn a 503 and a
 * dropped connection, before the request takes effect and after (the
 * answer lost: the create-only writes then meet their own first attempt,
 * a 412). Every save must succeed and commit a step that verifies,
 * recording what the part unpacks to.
 */
#include "checkpoint/checkpoint.h"
#include "tests/checkpoint/ckpt_check.h"
#include "tests/checkpoint/ckpt_gcs.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(retries, .init = ckpt_gcs_setup, .fini = ckpt_gcs_teardown,
	  .timeout = 600);

/* One kind of request a save makes: method, a regex on path?query, and
 * how many matching requests to let through first. */
struct kind {
	const char *what;
	const char *method;
	const char *path;
	unsigned skip;
	bool create_only; /* a write a retry may find already landed */
};

struct fault {
	const char *what;
	const char *rule; /* the action's keys */
	bool processed;
};

static const struct fault faults[] = {
	{ "503", "\"action\": \"status\", \"status\": 503", false },
	{ "dropped connection", "\"action\": \"reset\"", false },
	{ "503 after it took effect",
	  "\"action\": \"status\", \"status\": 503, \"processed\": true", true },
	{ "connection dropped after it took effect",
	  "\"action\": \"reset\", \"processed\": true", true },
};

static void add_fault(const struct kind *k, const struct fault *f)
{
	char rule[512];

	cr_assert_eq(fake_gcs_call(&ckpt_fake, "POST", "/_fake/reset", "",
				   NULL), 200);
	snprintf(rule, sizeof(rule),
		 "{\"method\": \"%s\", \"path\": \"%s\", \"skip\": %u, %s}",
		 k->method, k->path, k->skip, f->rule);
	cr_assert_eq(fake_gcs_faults(&ckpt_fake, rule), 0, "%s", rule);
}

/* Every piece a parallel upload made is gone. */
static int count_pieces(void *ud, const struct store_object *o,
			bool is_prefix)
{
	(void)is_prefix;
	if (store_is_piece(o->name))
		(*(size_t *)ud)++;
	return 0;
}

/* The save of src as step under k's fault f succeeded, the fault was
 * met, and the step is committed whole. */
static void save_under_fault(const char *src, uint64_t step,
			     const struct kind *k, const struct fault *f)
{
	struct store *s = ckpt_gcs_open("retry");
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct ckpt_verify_result v;
	struct ckpt_list l;
	size_t pieces = 0;
	char *log = NULL, *rules = NULL;
	struct err e;

	add_fault(k, f);
	ckpt_save_options_init(&o);
	cr_assert_eq(ckpt_save(s, src, step, &o, &r, &e), 0,
		     "%s, %s: %s", k->what, f->what, e.msg);
	cr_assert(r.committed, "%s, %s: not committed", k->what, f->what);
	cr_assert_eq(fake_gcs_call(&ckpt_fake, "GET", "/_fake/faults", NULL,
				   &rules), 200);
	cr_assert(strstr(rules, "\"times\": 0"), "%s, %s: never met: %s",
		  k->what, f->what, rules);
	cr_assert_eq(fake_gcs_call(&ckpt_fake, "GET", "/_fake/requests", NULL,
				   &log), 200);
	if (k->create_only && f->processed)
		cr_assert(strstr(log, "\"status\": 412"),
			  "%s, %s: the retry did not meet the first "
			  "attempt", k->what, f->what);
	cr_assert_eq(ckpt_verify(s, step, &v, &e), 0, "%s", e.msg);
	cr_assert_eq(v.parts_ok, 1, "%s, %s: %s", k->what, f->what,
		     v.problem);
	cr_assert_eq(v.parts_bad, 0, "%s, %s: %s", k->what, f->what,
		     v.problem);
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 1);
	cr_assert(l.v[0].committed);
	cr_assert_eq(l.v[0].parts[0].unpacked, r.stats.bytes_unpacked,
		     "%s, %s: COMMIT records %llu unpacked, not %llu",
		     k->what, f->what,
		     (unsigned long long)l.v[0].parts[0].unpacked,
		     (unsigned long long)r.stats.bytes_unpacked);
	ckpt_list_release(&l);
	cr_assert_eq(store_list(s, "", NULL, count_pieces, &pieces, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(pieces, 0, "%s, %s: %zu pieces left", k->what, f->what,
		     pieces);
	free(log);
	free(rules);
	store_close(s);
}

static void each_fault(const char *src, const struct kind *kinds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < sizeof(faults) / sizeof(faults[0]); j++)
			save_under_fault(src, 1, &kinds[i], &faults[j]);
}

/* A small part: one resumable session. */
Test(retries, every_request_of_a_small_save)
{
	static const struct kind kinds[] = {
		{ "stat of COMMIT before the upload", "GET", "%2FCOMMIT$", 0,
		  false },
		{ "stat of the part", "GET", "worker-0\\\\.tar\\\\.zst$", 0,
		  false },
		{ "upload session start", "POST", "uploadType=resumable", 0,
		  false },
		{ "upload's chunk", "PUT", "upload_id=", 0, false },
		{ "unpacked-size object", "POST",
		  "uploadType=media&name=[^&]*unpacked-", 0, true },
		{ "stat of COMMIT before committing", "GET", "%2FCOMMIT$", 1,
		  false },
		{ "listing of the step", "GET", "/o\\\\?", 0, false },
		{ "listing of the step after COMMIT", "GET", "/o\\\\?", 1,
		  false },
		{ "COMMIT", "POST", "uploadType=media&name=[^&]*COMMIT", 0,
		  true },
	};
	char src[PATHLEN];

	path_of(src, "src");
	make_tree(src, "small");
	each_fault(src, kinds, sizeof(kinds) / sizeof(kinds[0]));
}

/* A part of several pieces on two connections, composed. */
Test(retries, every_request_of_a_parallel_save)
{
	static const struct kind kinds[] = {
		{ "a piece", "POST", "uploadType=media&name=[^&]*xfer-piece",
		  1, true },
		{ "compose", "POST", "/compose", 0, true },
		{ "a piece's deletion", "DELETE", "xfer-piece", 1, false },
	};
	char src[PATHLEN], big[PATHLEN + 16];

	setenv("SLICECTL_XFER_PIECE_MIB", "1", 1);
	setenv("SLICECTL_XFER_STREAMS", "2", 1);
	path_of(src, "src");
	make_tree(src, "big");
	snprintf(big, sizeof(big), "%s/big.bin", src);
	write_random(big, (3u << 20) + 12345, 7);
	each_fault(src, kinds, sizeof(kinds) / sizeof(kinds[0]));
}
