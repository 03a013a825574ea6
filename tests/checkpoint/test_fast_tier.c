/*
 * tests/checkpoint/test_fast_tier.c: steps that live on the fast tiers
 * alone (ckpt_fast.c, issue 27), in file:// stores. A fast save writes no
 * byte to the store; the committer's FAST names every part's checksum
 * and holders once each has its record, and never with a part missing or
 * recorded twice differently; ckpt_choose_step takes the newest fast step
 * every part of which has a live holder (its local tier's id marked in
 * the bucket: kept by a reboot, not by a new disk or a notice), else the
 * store's newest; a fast step restores from the local tier and
 * never from the store, whose absence is a clear error; a corrupt FAST
 * and malformed records are no step; a new generation discards its fast
 * records and FAST above the step it restored.
 */
#include "checkpoint/ckpt_internal.h"
#include "tests/checkpoint/ckpt_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(fast_tier, .init = ckpt_setup, .fini = ckpt_teardown,
	  .timeout = 120);

static const char *const hosts[2] = { "slice-0-worker-0", "slice-1-worker-0" };

/* Host h's local tier's id, marked live in the bucket as its
 * supervisor does at its start (again after a reboot: the same id). */
static int64_t mark(struct store *s, int h, char local[2][PATHLEN])
{
	int64_t id = 0;
	struct err e;

	cr_assert_eq(ckpt_tier_id(local[h], &id, &e), 0, "%s", e.msg);
	cr_assert_gt(id, 0);
	cr_assert_eq(ckpt_tier_mark(s, hosts[h], id, true, &e), 0, "%s",
		     e.msg);
	return id;
}

/* Host h's part of step, kept fast in its local tier local[h], held by
 * itself and its partner (the other host); committed by host 0 once
 * both are recorded. Returns whether the step was committed. */
static bool save_fast(struct store *s, const char *src, uint64_t step,
		      int h, char local[2][PATHLEN])
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct ckpt_holder held[2];
	struct err e;
	char path[PATHLEN * 2];
	struct stat st;
	bool committed = false;

	ckpt_save_options_init(&o);
	o.part = hosts[h];
	o.local_dir = local[h];
	o.fast = true;
	cr_assert_eq(ckpt_save(s, src, step, &o, &r, &e), 0, "%s", e.msg);
	cr_assert(!r.committed);
	ckpt_local_path(path, sizeof(path), local[h], step, hosts[h]);
	cr_assert_eq(stat(path, &st), 0, "no local copy %s", path);
	cr_assert_eq((uint64_t)st.st_size, r.bytes);
	for (int k = 0; k < 2; k++) {
		snprintf(held[k].host, sizeof(held[k].host), "%s",
			 hosts[(h + k) % 2]);
		held[k].tier = mark(s, (h + k) % 2, local);
	}
	cr_assert_eq(ckpt_fast_record(s, step, hosts[h], &r, held, 2, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(ckpt_commit(s, step, 2, &committed, &e), 0, "%s", e.msg);
	return committed;
}

/* A store step 10 with both parts, then fast steps 20 and 30. */
static struct store *three_steps(char *src, char local[2][PATHLEN])
{
	struct store *s = open_store();
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct err e;

	path_of(src, "src");
	path_of(local[0], "local-0");
	path_of(local[1], "local-1");
	make_tree(src, "fast");
	for (int h = 0; h < 2; h++) {
		ckpt_save_options_init(&o);
		o.part = hosts[h];
		o.parts_expected = 2;
		cr_assert_eq(ckpt_save(s, src, 10, &o, &r, &e), 0, "%s", e.msg);
	}
	cr_assert(r.committed);
	for (uint64_t step = 20; step <= 30; step += 10) {
		cr_assert_not(save_fast(s, src, step, 1, local));
		cr_assert(save_fast(s, src, step, 0, local));
	}
	return s;
}

static uint64_t chosen(struct store *s, uint64_t below, bool *fast)
{
	uint64_t step = 99;
	struct err e;

	cr_assert_eq(ckpt_choose_step(s, below, &step, fast, &e), 0, "%s",
		     e.msg);
	return step;
}

Test(fast_tier, fast_steps_put_no_part_in_the_store_and_list_their_holders)
{
	char src[PATHLEN], local[2][PATHLEN], name[PATHLEN * 2];
	struct store *s = three_steps(src, local);
	struct ckpt_list l;
	struct err e;

	snprintf(name, sizeof(name), "%s/checkpoints/step-0000000020", bucket);
	cr_assert_eq(count_entries(name, "slice-0-worker-0.tar.zst.fast~"),
		     1);
	cr_assert_eq(count_entries(name, "FAST"), 1);
	cr_assert_eq(count_entries(name, "COMMIT"), 0);
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 3);
	cr_assert(l.v[0].committed && !l.v[0].fast);
	for (size_t i = 1; i < 3; i++) {
		cr_assert(l.v[i].fast && !l.v[i].committed);
		cr_assert_eq(l.v[i].nparts, 2);
		for (size_t k = 0; k < 2; k++) {
			const struct ckpt_part *p = &l.v[i].parts[k];

			cr_assert_eq(p->nholders, 2);
			cr_assert_gt(p->unpacked, 0);
			cr_assert_str_eq(p->holders[0].host,
					 k ? hosts[1] : hosts[0]);
			cr_assert_str_eq(p->holders[1].host,
					 k ? hosts[0] : hosts[1]);
		}
	}
	ckpt_list_release(&l);
	store_close(s);
}

Test(fast_tier, the_newest_step_held_by_a_live_host_is_chosen)
{
	char src[PATHLEN], local[2][PATHLEN];
	struct store *s = three_steps(src, local);
	bool fast = false;

	cr_assert_eq(chosen(s, 0, &fast), 30);
	cr_assert(fast);
	cr_assert_eq(chosen(s, 30, &fast), 20);
	cr_assert_eq(chosen(s, 20, &fast), 10);
	cr_assert_not(fast);
	/* Both rebooted, their disks kept: still held. */
	mark(s, 0, local);
	mark(s, 1, local);
	cr_assert_eq(chosen(s, 0, &fast), 30);
	/* One host on a new disk (a new id; its old mark goes): its
	 * partner still holds its part, and it holds its partner's. */
	cr_assert_eq(sh("rm -rf '%s'", local[1]), 0);
	mark(s, 1, local);
	cr_assert_eq(chosen(s, 0, &fast), 30);
	cr_assert(fast);
	/* The other told its machine is going away: no live holder of
	 * host 1's part is left. */
	{
		int64_t id = mark(s, 0, local);
		struct err e;

		cr_assert_eq(ckpt_tier_mark(s, hosts[0], id, false, &e), 0,
			     "%s", e.msg);
	}
	cr_assert_eq(chosen(s, 0, &fast), 10);
	cr_assert_not(fast);
	store_close(s);
}

Test(fast_tier, a_fast_step_restores_from_the_local_tier_never_the_store)
{
	char src[PATHLEN], local[2][PATHLEN], dest[PATHLEN];
	char copy[PATHLEN * 2];
	struct store *s = three_steps(src, local);
	bool from_local = false;
	struct ckpt_restore_options o = { .step = 30, .part = hosts[1],
					  .local_dir = local[1],
					  .from_local = &from_local };
	uint64_t got = 0;
	struct err e;
	int rc;

	path_of(dest, "dest");
	cr_assert_eq(ckpt_restore(s, dest, &o, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(got, 30);
	cr_assert(from_local);
	compare_trees(src, dest);
	/* A newest-step restore never takes a fast step on its own. */
	o.step = 0;
	cr_assert_eq(ckpt_restore(s, dest, &o, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(got, 10);
	/* The copy flipped: deleted, and the store has no part to offer. */
	ckpt_local_path(copy, sizeof(copy), local[1], 30, hosts[1]);
	{
		FILE *f = fopen(copy, "r+b");

		cr_assert_not_null(f);
		fseek(f, 40, SEEK_SET);
		fputc(fgetc(f) ^ 0xff, f);
		fclose(f);
	}
	o.step = 30;
	rc = ckpt_restore(s, dest, &o, &got, &e);
	cr_assert_eq(rc, CLOUD_ENOTFOUND, "%d %s", rc, e.msg);
	cr_assert(strstr(e.msg, "fast tiers alone") &&
		  strstr(e.msg, "an older step must be restored"), "%s",
		  e.msg);
	cr_assert_neq(access(copy, F_OK), 0);
	store_close(s);
}

/* A part recorded twice with different bytes (two saves, not a retry):
 * which copy the holders have is unknown, so no FAST. A part missing:
 * none either. */
Test(fast_tier, a_part_missing_or_recorded_twice_commits_nothing)
{
	char src[PATHLEN], local[2][PATHLEN], name[PATHLEN * 2];
	struct store *s = open_store();

	path_of(src, "src");
	path_of(local[0], "local-0");
	path_of(local[1], "local-1");
	make_tree(src, "one");
	cr_assert_not(save_fast(s, src, 40, 0, local));
	write_text(src, "more.txt", "a different tree", 0644);
	cr_assert_not(save_fast(s, src, 40, 0, local));
	cr_assert_not(save_fast(s, src, 40, 1, local));
	snprintf(name, sizeof(name), "%s/checkpoints/step-0000000040", bucket);
	cr_assert_eq(count_entries(name, "FAST"), 0);
	store_close(s);
}

/* Malformed FAST and records: listed as no step, never chosen. */
Test(fast_tier, a_corrupt_manifest_or_record_is_no_step)
{
	char src[PATHLEN], local[2][PATHLEN], name[PATHLEN * 2];
	struct store *s = three_steps(src, local);
	const char *bad[] = {
		"{\"step\": 30, \"time\": \"x\", \"parts\": [{\"name\": "
		"\"slice-0-worker-0.tar.zst\", \"size\": 1, \"crc32c\": 1, "
		"\"generation\": 1}]}",
		"{\"step\": 30, \"time\": \"x\", \"parts\": [{\"name\": "
		"\"slice-0-worker-0.tar.zst\", \"size\": 1, \"crc32c\": 1, "
		"\"generation\": 1, \"holders\": [{\"host\": \"\", "
		"\"tier\": 1}]}]}",
		"[1, 2",
		"{\"step\": 31, \"time\": \"x\", \"parts\": []}",
	};
	struct ckpt_part p;

	snprintf(name, sizeof(name), "%s/checkpoints/step-0000000030/FAST",
		 bucket);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		FILE *f = fopen(name, "w");
		bool fast = true;

		cr_assert_not_null(f);
		fputs(bad[i], f);
		fclose(f);
		cr_assert_eq(chosen(s, 0, &fast), 20, "%s", bad[i]);
	}
	cr_assert_not(ckpt_fast_parse_leaf("a.tar.zst.fast~zz~1~1~h~1", 1, &p));
	cr_assert_not(ckpt_fast_parse_leaf("a.tar.zst.fast~1~1~1", 1, &p));
	cr_assert_not(ckpt_fast_parse_leaf("a.tar.zst.fast~1~1~1~h~0", 1, &p));
	cr_assert_not(ckpt_fast_parse_leaf("a.tar.zst.fast~1~1~1~h~1~", 1,
					   &p));
	cr_assert_not(ckpt_fast_parse_leaf("a.tar.zst.fast~1~-1~1~h~1", 1,
					   &p));
	cr_assert(ckpt_fast_parse_leaf("a.tar.zst.fast~ff~2~3~h~4~g~5", 7, &p));
	cr_assert_str_eq(p.name, "a.tar.zst");
	cr_assert_eq(p.crc32c, 0xff);
	cr_assert_eq(p.size, 2);
	cr_assert_eq(p.unpacked, 3);
	cr_assert_eq(p.nholders, 2);
	cr_assert_str_eq(p.holders[1].host, "g");
	cr_assert_eq(p.holders[1].tier, 5);
	free(p.name);
	store_close(s);
}

/* A new generation that restored step 10 (the fast steps' holders were
 * gone) discards its records and the FAST of the steps above. */
Test(fast_tier, a_new_generation_discards_fast_steps_above_its_restore)
{
	char src[PATHLEN], local[2][PATHLEN];
	struct store *s = three_steps(src, local);
	struct ckpt_list l;
	size_t n = 0;
	struct err e;

	for (int h = 0; h < 2; h++)
		cr_assert_eq(ckpt_discard_newer(s, hosts[h], 10, &n, &e), 0,
			     "%s", e.msg);
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 1, "%zu steps left", l.n);
	cr_assert_eq(l.v[0].step, 10);
	ckpt_list_release(&l);
	cr_assert_eq(chosen(s, 0, NULL), 10);
	store_close(s);
}
