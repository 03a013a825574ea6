/*
 * tests/checkpoint/test_commit_race.c: a new generation discarding its
 * part of an uncommitted step while a committer of the earlier one
 * commits that step never leaves a COMMIT naming a deleted part.
 *
 * Against the GCS fake, which holds the committer's COMMIT write back
 * (a stall before it takes effect) while the discard runs: the committer
 * listed every part before the discard and writes COMMIT after it, then
 * finds the part marked abandoned and withdraws COMMIT. Also: a part
 * marked abandoned is left out of a commit, and a new save of that part
 * (a new version) commits as any other.
 */
#include "checkpoint/checkpoint.h"
#include "tests/checkpoint/ckpt_check.h"
#include "tests/checkpoint/ckpt_gcs.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEP_DIR "checkpoints/step-0000000042/"

TestSuite(race, .init = ckpt_gcs_setup, .fini = ckpt_gcs_teardown,
	  .timeout = 120);

/* Saves src as part of step 42, expecting parts parts: committed says
 * whether the step must be committed afterwards. */
static void save(struct store *s, const char *src, const char *part,
		 unsigned parts, bool committed)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct err e;

	ckpt_save_options_init(&o);
	o.part = part;
	o.parts_expected = parts;
	cr_assert_eq(ckpt_save(s, src, 42, &o, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.committed, committed, "%s: committed %d", part,
		     r.committed);
}

static bool exists(struct store *s, const char *name)
{
	struct store_object o;
	struct err e;
	int rc = store_stat(s, name, &o, &e);

	if (rc == CLOUD_ENOTFOUND)
		return false;
	cr_assert_eq(rc, 0, "%s: %s", name, e.msg);
	store_object_release(&o);
	return true;
}

struct committer {
	int rc;
	bool committed;
	char msg[1024];
};

static void *commit_step(void *arg)
{
	struct committer *c = arg;
	struct store *s;
	struct err e;

	if (store_open(&s, "gs://bkt/runs/race", &e)) {
		c->rc = e.code;
		snprintf(c->msg, sizeof(c->msg), "%s", e.msg);
		return NULL;
	}
	c->rc = ckpt_commit(s, 42, 2, &c->committed, &e);
	snprintf(c->msg, sizeof(c->msg), "%s", e.msg);
	store_close(s);
	return NULL;
}

Test(race, a_discard_during_a_commit_withdraws_the_commit)
{
	struct committer c = { -1, true, "" };
	struct store *s = ckpt_gcs_open("race");
	struct ckpt_list l;
	char src[PATHLEN];
	pthread_t t;
	struct err e;
	size_t n = 0;

	path_of(src, "src");
	make_tree(src, "race");
	/* Both parts there, neither save committing (3 expected). */
	save(s, src, "slice-0-worker-0", 3, false);
	save(s, src, "slice-0-worker-1", 3, false);
	/* The committer's COMMIT waits 2 s before it lands. */
	cr_assert_eq(fake_gcs_faults(&ckpt_fake,
				     "{\"method\": \"POST\", \"path\": "
				     "\"uploadType=media&name=[^&]*COMMIT\", "
				     "\"action\": \"stall\", \"seconds\": 2}"),
		     0);
	cr_assert_eq(pthread_create(&t, NULL, commit_step, &c), 0);
	sleep_ms(700); /* it has listed both parts by now */
	cr_assert_eq(ckpt_discard_newer(s, "slice-0-worker-0", 0, &n, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(n, 1, "the discard found the step committed already");
	cr_assert_not(exists(s, STEP_DIR "slice-0-worker-0.tar.zst"));
	pthread_join(t, NULL);

	cr_assert_eq(c.rc, 0, "%s", c.msg);
	cr_assert_not(c.committed, "a COMMIT naming a deleted part stands");
	cr_assert_not(exists(s, STEP_DIR "COMMIT"));
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < l.n; i++)
		cr_assert_not(l.v[i].committed, "step %llu committed",
			      (unsigned long long)l.v[i].step);
	ckpt_list_release(&l);

	/* The new generation saves its part again: a new version, which
	 * the mark does not touch, and the step commits. */
	save(s, src, "slice-0-worker-0", 2, true);
	cr_assert(exists(s, STEP_DIR "COMMIT"));
	store_close(s);
}

Test(race, a_part_marked_abandoned_is_left_out_of_a_commit)
{
	struct store *s = ckpt_gcs_open("race");
	struct store_object o;
	char src[PATHLEN], mark[256];
	bool committed = true;
	struct err e;

	path_of(src, "src");
	make_tree(src, "mark");
	save(s, src, "slice-0-worker-0", 3, false);
	save(s, src, "slice-0-worker-1", 3, false);
	/* A discard that marked worker 1's part, then found the step
	 * committed (so it kept the part), as a racing committer would
	 * leave it. */
	cr_assert_eq(store_stat(s, STEP_DIR "slice-0-worker-1.tar.zst", &o,
				&e), 0, "%s", e.msg);
	snprintf(mark, sizeof(mark),
		 STEP_DIR "slice-0-worker-1.tar.zst.abandoned-%lld",
		 (long long)o.generation);
	store_object_release(&o);
	cr_assert_eq(store_put(s, mark, "", 0, STORE_CREATE_ONLY, NULL, &e), 0,
		     "%s", e.msg);

	cr_assert_eq(ckpt_commit(s, 42, 2, &committed, &e), 0, "%s", e.msg);
	cr_assert_not(committed);
	cr_assert_not(exists(s, STEP_DIR "COMMIT"));
	/* Saved again, the part is a new version, and counts. */
	save(s, src, "slice-0-worker-1", 2, true);
	store_close(s);
}
