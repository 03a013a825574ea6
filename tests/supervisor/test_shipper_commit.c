/*
 * tests/supervisor/test_shipper_commit.c: one committer per step
 * (docs/DESIGN.md, "Commit protocol"). N shippers saving one step
 * against the GCS fake make one COMMIT write and a few listings of the
 * step whatever N, counted in the fake's request log, where N savers
 * that each commit (as every worker did before) list N times; with the
 * committer gone, the first deputy commits after its takeover bound and
 * not before; with a part missing, nobody commits; a worker flushed
 * while its upload runs commits on its way out.
 */

#include "tests/supervisor/shipper_check.h"
#include "tests/cloud/gcs_check.h"
#include <criterion/criterion.h>
#include <jansson.h>

TestSuite(shipper, .init = setup, .fini = teardown, .timeout = 120);

#define URL "gs://bkt/runs/commit"
#define MAX_WORKERS 16
/* The committer's listings of one step: the one after its upload and
 * its backoff passes (100 ms doubling to 2.5 s here) while the other
 * parts land, whatever the number of workers. */
#define LIST_BOUND 10

struct counts {
	unsigned lists;         /* listings of a step's folder */
	unsigned commit_writes; /* COMMIT write attempts */
	unsigned commit_412;    /* of which refused: another committer won */
};

static bool is_commit_write(json_t *r)
{
	const char *name = json_string_value(
		json_object_get(json_object_get(r, "query"), "name"));
	size_t n = name ? strlen(name) : 0;

	return !strcmp(json_string_value(json_object_get(r, "method")),
		       "POST") &&
	       n > 7 && !strcmp(name + n - 7, "/COMMIT");
}

/* Counts the fake's requests so far, then forgets them. */
static struct counts take_counts(void)
{
	struct counts c = { 0, 0, 0 };
	json_t *log = gcs_check_requests(&fake), *r;
	size_t i;

	json_array_foreach(log, i, r) {
		const char *path = json_string_value(
			json_object_get(r, "path"));
		const char *prefix = json_string_value(json_object_get(
			json_object_get(r, "query"), "prefix"));

		if (!strcmp(path, "/storage/v1/b/bkt/o") && prefix &&
		    strstr(prefix, "/checkpoints/step-"))
			c.lists++;
		if (is_commit_write(r)) {
			c.commit_writes++;
			c.commit_412 += json_integer_value(
				json_object_get(r, "status")) == 412;
		}
	}
	json_decref(log);
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/requests", NULL,
				   NULL), 200);
	return c;
}

struct worker {
	char dir[PATHLEN], spool[PATHLEN], part[32];
	struct shipper *s;
};

/* Worker i's directories and its shipper's configuration (rank i). */
static void worker_config(struct worker *w, unsigned i, unsigned n,
			  const char *url, struct shipper_config *c)
{
	snprintf(w->dir, sizeof(w->dir), "%s/w%u-of-%u", root, i, n);
	snprintf(w->spool, sizeof(w->spool), "%s/spool%u-of-%u", root, i, n);
	snprintf(w->part, sizeof(w->part), "slice-0-worker-%u", i);
	cr_assert_eq(mkdir(w->dir, 0755), 0);
	config_init(c, url);
	c->ckpt_dir = w->dir;
	c->spool_dir = w->spool;
	c->part = w->part;
	c->parts_expected = n;
	c->rank = i;
	c->poll_ms = 100;
}

/* n shippers save step: the requests it took once worker 0 saw it
 * committed. Deputies keep out of it (a takeover bound of a minute). */
static struct counts shippers_save(unsigned n, uint64_t step)
{
	struct worker w[MAX_WORKERS];
	struct shipper_config c;

	for (unsigned i = 0; i < n; i++) {
		worker_config(&w[i], i, n, URL, &c);
		c.takeover_ms = 60000;
		w[i].s = start(&c);
	}
	take_counts();
	for (unsigned i = 0; i < n; i++)
		write_step_dir(w[i].dir, step, 20 * KiB);
	for (unsigned i = 0; i < n; i++)
		mark_done(w[i].dir, step);
	wait_state(w[0].s, committed_is, (int64_t)step, 30000,
		   "worker 0 committed");
	for (unsigned i = 0; i < n; i++)
		shipper_stop(w[i].s);
	return take_counts();
}

struct saver {
	char dir[PATHLEN], part[32];
	uint64_t step;
	unsigned n;
	int rc;
	struct err e;
};

static void *save_one(void *arg)
{
	struct saver *v = arg;
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct store *s;

	v->rc = store_open(&s, URL, &v->e);
	if (!v->rc) {
		ckpt_save_options_init(&o);
		o.part = v->part;
		o.parts_expected = v->n;
		o.pack.threads = 1;
		v->rc = ckpt_save(s, v->dir, v->step, &o, &r, &v->e);
		store_close(s);
	}
	return NULL;
}

/* n savers that each commit save step at once, as every worker did
 * before the step had one committer: the requests it took. */
static struct counts every_saver_commits(unsigned n, uint64_t step)
{
	struct saver v[MAX_WORKERS];
	pthread_t t[MAX_WORKERS];

	for (unsigned i = 0; i < n; i++) {
		snprintf(v[i].dir, sizeof(v[i].dir), "%s/all%u-of-%u", root,
			 i, n);
		cr_assert_eq(mkdir(v[i].dir, 0755), 0);
		write_step_dir(v[i].dir, step, 20 * KiB);
		snprintf(v[i].dir, sizeof(v[i].dir), "%s/all%u-of-%u/step-%llu",
			 root, i, n, (unsigned long long)step);
		snprintf(v[i].part, sizeof(v[i].part), "slice-0-worker-%u",
			 i);
		v[i].step = step;
		v[i].n = n;
	}
	take_counts();
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, save_one, &v[i]), 0);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(v[i].rc, 0, "saver %u: %s", i, v[i].e.msg);
	}
	return take_counts();
}

Test(shipper, one_commit_write_and_a_few_listings_whatever_the_workers,
     .timeout = 180)
{
	static const unsigned sizes[] = { 8, 16 };

	start_fake();
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned n = sizes[k];
		struct counts before = every_saver_commits(n, 100 + n);
		struct counts after = shippers_save(n, 200 + n);

		fprintf(stderr, "%u workers: every saver commits: %u "
			"listings, %u COMMIT writes (%u refused); one "
			"committer: %u listings, %u COMMIT writes (%u "
			"refused)\n", n, before.lists, before.commit_writes,
			before.commit_412, after.lists, after.commit_writes,
			after.commit_412);
		/* Before: each saver lists, unless COMMIT is there by its
		 * turn; the last few race to write it. */
		cr_expect_geq(before.commit_writes, 1);
		cr_expect_eq(after.commit_writes, 1, "%u workers", n);
		cr_expect_eq(after.commit_412, 0, "%u workers", n);
		cr_expect_geq(after.lists, 1);
		cr_expect_leq(after.lists, LIST_BOUND, "%u workers: %u "
			      "listings", n, after.lists);
	}
	expect_steps(URL, "108:c:8 116:c:16 208:c:8 216:c:16");
}

/* The committer's part went up and the committer died before it listed:
 * deputy 1 commits the step one takeover bound after its own part went
 * up (deputy 2's turn would come at twice that). */
Test(shipper, a_deputy_commits_after_the_takeover_bound)
{
	enum { TAKEOVER_MS = 1500 };
	struct worker w[3];
	struct shipper_config c;
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct store *store;
	struct err e;
	uint64_t up_ms, took;

	for (unsigned i = 1; i < 3; i++) {
		worker_config(&w[i], i, 3, file_url, &c);
		c.takeover_ms = TAKEOVER_MS;
		w[i].s = start(&c);
		make_step(w[i].dir, 4, 20 * KiB);
	}
	wait_state(w[1].s, uploaded_is, 4, 10000, "worker 1 uploaded");
	up_ms = mono_ms();
	wait_state(w[2].s, uploaded_is, 4, 10000, "worker 2 uploaded");

	snprintf(w[0].dir, sizeof(w[0].dir), "%s/w0", root);
	cr_assert_eq(mkdir(w[0].dir, 0755), 0);
	write_step_dir(w[0].dir, 4, 20 * KiB);
	snprintf(w[0].dir, sizeof(w[0].dir), "%s/w0/step-4", root);
	store = open_store(file_url);
	ckpt_save_options_init(&o);
	o.part = "slice-0-worker-0";
	o.parts_expected = 3;
	o.commit = false;
	cr_assert_eq(ckpt_save(store, w[0].dir, 4, &o, &r, &e), 0, "%s",
		     e.msg);
	cr_assert(!r.committed);
	store_close(store);
	expect_steps(file_url, "4:u:3");

	wait_state(w[1].s, committed_is, 4, 10000, "deputy 1 committed");
	took = mono_ms() - up_ms;
	cr_expect_geq(took, TAKEOVER_MS - 100, "committed %llu ms after "
		      "its part went up", (unsigned long long)took);
	expect_steps(file_url, "4:c:3");
	shipper_stop(w[1].s);
	shipper_stop(w[2].s);
}

/* Worker 2 never saves: the committer and a deputy list the step
 * (boundedly), and nobody commits it. */
Test(shipper, a_missing_part_is_never_committed)
{
	struct worker w[2];
	struct shipper_config c;
	struct shipper_state st;
	struct counts n;

	start_fake();
	for (unsigned i = 0; i < 2; i++) {
		worker_config(&w[i], i, 3, URL, &c);
		c.takeover_ms = 500;
		w[i].s = start(&c);
	}
	take_counts();
	for (unsigned i = 0; i < 2; i++)
		make_step(w[i].dir, 6, 20 * KiB);
	for (unsigned i = 0; i < 2; i++)
		wait_state(w[i].s, uploaded_is, 6, 10000, "uploaded");
	sleep_ms(3000);
	for (unsigned i = 0; i < 2; i++) {
		shipper_get(w[i].s, &st);
		cr_expect_eq(st.newest_committed, -1, "worker %u", i);
		shipper_stop(w[i].s);
	}
	n = take_counts();
	cr_expect_eq(n.commit_writes, 0);
	/* The committer: after its upload and about 5 passes in 3 s; the
	 * deputy: one a half second. */
	cr_expect_leq(n.lists, 14, "%u listings in 3 s", n.lists);
	expect_steps(URL, "6:u:2");
}

/* A non-committer holds the only missing part, uploaded before a flush
 * or under way when it comes (the worker is leaving, and the committer
 * may be gone): the flush returns with the step committed. */
Test(shipper, a_flush_commits_a_non_committers_last_part)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	struct err e;

	start_fake();
	faults("{\"action\": \"stall\", \"seconds\": 1.5, \"method\": "
	       "\"POST\", \"path\": \"uploadType=resumable\", "
	       "\"times\": 1}");
	config_init(&c, URL);
	c.rank = 1;
	c.takeover_ms = 60000;
	s = start(&c);
	make_step(ckpt_dir, 9, 20 * KiB);
	wait_state(s, done_is, 9, 5000, "taken");
	sleep_ms(300);
	cr_assert_eq(shipper_flush(s, mono_ms() + 10000, &e), 0, "%s", e.msg);
	shipper_get(s, &st);
	cr_expect_eq(st.newest_uploaded, 9);
	cr_expect_eq(st.newest_committed, 9);

	make_step(ckpt_dir, 10, 20 * KiB);
	shipper_kick(s);
	st = wait_state(s, uploaded_is, 10, 10000, "step 10 uploaded");
	cr_expect_eq(st.newest_committed, 9, "a non-committer committed");
	cr_assert_eq(shipper_flush(s, mono_ms() + 10000, &e), 0, "%s", e.msg);
	shipper_get(s, &st);
	cr_expect_eq(st.newest_committed, 10);
	shipper_stop(s);
	expect_steps(URL, "9:c:1 10:c:1");
}
