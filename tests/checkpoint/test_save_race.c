/*
 * tests/checkpoint/test_save_race.c: a committed step's parts are final,
 * even against a save of the same part that was under way when the step
 * was committed. The GCS fake holds one request of that save back (a
 * stall) while another host's part commits the step, which makes the
 * interleaving exact: the held save either never joined the COMMIT or
 * is refused by the store; COMMIT still verifies.
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

#define GS_URL "gs://bkt/runs/race"
#define W0_PART "checkpoints/step-%010llu/slice-0-worker-0.tar.zst"

TestSuite(race, .init = ckpt_gcs_setup, .fini = ckpt_gcs_teardown,
	  .timeout = 120);

static struct store *open_gs(void)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, GS_URL, &e), 0, "%s", e.msg);
	return s;
}

/* A save of dir as part of step (of 2 parts) on its own store handle. */
struct held_save {
	const char *dir, *part;
	uint64_t step;
	int rc;
	struct ckpt_save_result r;
	struct err e;
};

static void *held_save_main(void *arg)
{
	struct held_save *h = arg;
	struct ckpt_save_options o;
	struct store *s;

	ckpt_save_options_init(&o);
	o.part = h->part;
	o.parts_expected = 2;
	h->rc = store_open(&s, GS_URL, &h->e);
	if (h->rc)
		return NULL;
	h->rc = ckpt_save(s, h->dir, h->step, &o, &h->r, &h->e);
	store_close(s);
	return NULL;
}

/* Whether the save committed step. */
static bool save_part(struct store *s, const char *dir, uint64_t step,
		      const char *part)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct err e;

	ckpt_save_options_init(&o);
	o.part = part;
	o.parts_expected = 2;
	cr_assert_eq(ckpt_save(s, dir, step, &o, &r, &e), 0, "%s", e.msg);
	return r.committed;
}

/* Holds the next request matching method and path back for 2 s. */
static void hold_next(const char *method, const char *path)
{
	char rule[256];

	snprintf(rule, sizeof(rule), "{\"action\": \"stall\", \"seconds\": 2,"
		 " \"method\": \"%s\", \"path\": \"%s\", \"times\": 1}",
		 method, path);
	cr_assert_eq(fake_gcs_faults(&ckpt_fake, rule), 0, "%s", rule);
}

/* Waits until the held request has reached the fake. */
static void wait_held(void)
{
	for (int i = 0; i < 1000; i++) {
		char *rules = NULL;
		bool met;

		cr_assert_eq(fake_gcs_call(&ckpt_fake, "GET", "/_fake/faults",
					   NULL, &rules), 200);
		met = strstr(rules, "\"times\": 0") != NULL;
		free(rules);
		if (met)
			return;
		sleep_ms(10);
	}
	cr_assert_fail("the held request never came");
}

static int64_t w0_generation(struct store *s, uint64_t step)
{
	struct store_object o;
	char name[128];
	struct err e;
	int64_t g;

	snprintf(name, sizeof(name), W0_PART, (unsigned long long)step);
	cr_assert_eq(store_stat(s, name, &o, &e), 0, "%s", e.msg);
	g = o.generation;
	store_object_release(&o);
	return g;
}

static void assert_verifies(struct store *s, uint64_t step)
{
	struct ckpt_verify_result v;
	struct err e;

	cr_assert_eq(ckpt_verify(s, step, &v, &e), 0, "%s", e.msg);
	cr_assert_eq(v.parts_bad, 0, "step %llu: %s",
		     (unsigned long long)step, v.problem);
	cr_assert_eq(v.parts_ok, 2, "step %llu: %s",
		     (unsigned long long)step, v.problem);
}

/* Worker 0 saves step 5 twice (a periodic save, then its final one);
 * worker 1's part commits the step while the second is under way. */
Test(race, a_part_saved_again_is_not_replaced_under_a_commit)
{
	char first[PATHLEN], again[PATHLEN], other[PATHLEN], dest[PATHLEN];
	struct held_save h = { .part = "slice-0-worker-0", .step = 5 };
	struct store *s = open_gs();
	pthread_t t;

	path_of(first, "first");
	path_of(again, "again");
	path_of(other, "other");
	path_of(dest, "dest");
	make_tree(first, "first save\n");
	make_tree(again, "saved again, other bytes\n");
	make_tree(other, "worker 1\n");
	cr_assert(!save_part(s, first, 5, "slice-0-worker-0"));

	/* The second save's upload session is held back... */
	hold_next("POST", "uploadType=resumable");
	h.dir = again;
	cr_assert_eq(pthread_create(&t, NULL, held_save_main, &h), 0);
	wait_held();
	/* ...while worker 1's part arrives (and commits the step, unless
	 * worker 0's earlier part is gone by now). */
	save_part(s, other, 5, "slice-0-worker-1");
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(h.rc, 0, "%s", h.e.msg);

	/* COMMIT names worker 0's part as it is. */
	assert_verifies(s, 5);
	cr_assert_eq(ckpt_restore(s, dest, &(struct ckpt_restore_options){
					  5, "slice-0-worker-0" },
				  NULL, &h.e), 0, "%s", h.e.msg);
	compare_trees(again, dest);
	store_close(s);
}

/* A save whose part was absent when it began meets, when it ends, the
 * same part saved and committed meanwhile: the store refuses it. */
Test(race, a_save_that_ends_after_the_commit_is_refused_by_the_store)
{
	char late[PATHLEN], early[PATHLEN], other[PATHLEN];
	struct held_save h = { .part = "slice-0-worker-0", .step = 6 };
	struct store *s = open_gs();
	pthread_t t;
	int64_t g;

	path_of(late, "late");
	path_of(early, "early");
	path_of(other, "other");
	make_tree(late, "late\n");
	make_tree(early, "early\n");
	make_tree(other, "worker 1\n");

	/* The late save's last chunk (which creates the object) is held. */
	hold_next("PUT", "upload_id=");
	h.dir = late;
	cr_assert_eq(pthread_create(&t, NULL, held_save_main, &h), 0);
	wait_held();
	cr_assert(!save_part(s, early, 6, "slice-0-worker-0"));
	cr_assert(save_part(s, other, 6, "slice-0-worker-1"));
	g = w0_generation(s, 6);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(h.rc, CLOUD_EPRECONDITION, "%d %s", h.rc, h.e.msg);
	cr_assert_eq(w0_generation(s, 6), g, "the committed part changed");
	assert_verifies(s, 6);
	store_close(s);
}
