/*
 * tests/checkpoint/test_local_tier.c: the local tier (ckpt_local.c,
 * issue 27) in file:// stores: a save keeps its part's bytes on local
 * disk; a restore unpacks that copy without reading the part from the
 * store (the store's part is deleted first to prove it); a copy that is
 * corrupt or of the wrong size is deleted and the store's read; a copy
 * that cannot be written costs the save nothing; pruning keeps the newest
 * committed copies and those whose COMMIT may still come.
 */
#include "tests/checkpoint/ckpt_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(local_tier, .init = ckpt_setup, .fini = ckpt_teardown,
	  .timeout = 120);

#define PART "slice-0-worker-1"

static void save(struct store *s, const char *dir, uint64_t step,
		 const char *local)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct err e;

	ckpt_save_options_init(&o);
	o.part = PART;
	o.local_dir = local;
	cr_assert_eq(ckpt_save(s, dir, step, &o, &r, &e), 0, "%s", e.msg);
	cr_assert(r.committed);
}

static void bucket_part(char *out, uint64_t step)
{
	snprintf(out, PATHLEN * 2, "%s/checkpoints/step-%010llu/" PART
		 ".tar.zst", bucket, (unsigned long long)step);
}

/* Restores step into dest with the local tier at local: whether the local
 * copy was what got unpacked. */
static bool restore(struct store *s, const char *dest, uint64_t step,
		    const char *local)
{
	bool from_local = true;
	struct ckpt_restore_options o = { .step = step, .part = PART,
					  .local_dir = local,
					  .from_local = &from_local };
	uint64_t got = 0;
	struct err e;

	cr_assert_eq(ckpt_restore(s, dest, &o, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(got, step);
	return from_local;
}

/* A tree, saved as step 7 with the local tier on: the copy and the
 * store's part are the same bytes. */
static struct store *saved(char *src, char *local, char *copy)
{
	char part[PATHLEN * 2];
	struct store *s = open_store();
	char *a, *b;
	size_t na, nb;

	path_of(src, "src");
	path_of(local, "local");
	make_tree(src, "seven");
	write_random(strcat(strcpy(part, src), "/weights.bin"), 3 << 20, 7);
	save(s, src, 7, local);
	ckpt_local_path(copy, PATHLEN * 2, local, 7, PART);
	bucket_part(part, 7);
	a = read_file(copy, &na);
	b = read_file(part, &nb);
	cr_assert(a && b, "%s or %s is missing", copy, part);
	cr_assert_eq(na, nb);
	cr_assert_eq(memcmp(a, b, na), 0);
	free(a);
	free(b);
	cr_assert_eq(count_entries(local, "step-"),
		     1);
	return s;
}

Test(local_tier, a_restore_reads_no_byte_of_the_part_from_the_store)
{
	char src[PATHLEN], local[PATHLEN], dest[PATHLEN];
	char copy[PATHLEN * 2], part[PATHLEN * 2];
	struct store *s = saved(src, local, copy);

	/* The store's part gone: only the local copy can restore it. */
	bucket_part(part, 7);
	cr_assert_eq(unlink(part), 0);
	path_of(dest, "dest");
	cr_assert(restore(s, dest, 7, local));
	compare_trees(src, dest);
	store_close(s);
}

/* One byte changed, the size the same: the CRC32C says so, the copy goes
 * and the store's part restores the step. */
Test(local_tier, a_corrupt_copy_is_deleted_and_the_store_read)
{
	char src[PATHLEN], local[PATHLEN], dest[PATHLEN], copy[PATHLEN * 2];
	struct store *s = saved(src, local, copy);
	struct stat st;
	int fd = open(copy, O_RDWR);
	char c;

	cr_assert(fd >= 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pread(fd, &c, 1, st.st_size / 2), 1);
	c ^= 0x5a;
	cr_assert_eq(pwrite(fd, &c, 1, st.st_size / 2), 1);
	close(fd);
	path_of(dest, "dest");
	cr_assert_not(restore(s, dest, 7, local));
	compare_trees(src, dest);
	cr_assert(access(copy, F_OK) && errno == ENOENT);
	store_close(s);
}

Test(local_tier, a_copy_of_the_wrong_size_or_none_falls_back)
{
	char src[PATHLEN], local[PATHLEN], dest[PATHLEN], copy[PATHLEN * 2];
	struct store *s = saved(src, local, copy);

	cr_assert_eq(truncate(copy, 1000), 0);
	path_of(dest, "dest");
	cr_assert_not(restore(s, dest, 7, local));
	compare_trees(src, dest);
	cr_assert(access(copy, F_OK) && errno == ENOENT);
	/* No copy at all (a new VM): the store's, said so. */
	cr_assert_not(restore(s, dest, 7, local));
	compare_trees(src, dest);
	store_close(s);
}

/* A local tier that cannot be written (a file where its folder would
 * go) leaves the save whole and the store's part the only one. */
Test(local_tier, a_copy_that_cannot_be_written_costs_the_save_nothing)
{
	char src[PATHLEN], local[PATHLEN], dest[PATHLEN];
	struct store *s = open_store();

	path_of(src, "src");
	path_of(local, "not-a-dir");
	make_tree(src, "x");
	write_text(root, "not-a-dir", "file", 0644);
	save(s, src, 3, local);
	path_of(dest, "dest");
	cr_assert_not(restore(s, dest, 3, local));
	compare_trees(src, dest);
	store_close(s);
}

static bool has(const char *local, uint64_t step)
{
	char path[PATHLEN * 2];

	ckpt_local_path(path, sizeof(path), local, step, PART);
	return access(path, F_OK) == 0;
}

/* keep 2 with steps 10..60 on disk and 40 the newest committed: 30 and 40
 * stay, and 50, 60 whose COMMIT may still come; a new generation that
 * restores 30 drops everything above it. */
Test(local_tier, pruning_keeps_the_newest_committed_and_those_to_come)
{
	char local[PATHLEN], path[PATHLEN * 2];
	size_t dropped;

	path_of(local, "local");
	for (uint64_t step = 10; step <= 60; step += 10) {
		ckpt_local_path(path, sizeof(path), local, step, PART);
		cr_assert_eq(sh("mkdir -p \"$(dirname '%s')\" && echo x > '%s'",
				path, path), 0);
	}
	cr_assert_eq(ckpt_local_prune(local, 2, 40, UINT64_MAX, &dropped), 0);
	cr_assert_eq(dropped, 2);
	cr_assert(!has(local, 10) && !has(local, 20));
	cr_assert(has(local, 30) && has(local, 40) && has(local, 50) &&
		  has(local, 60));
	cr_assert_eq(ckpt_local_prune(local, 2, 30, 30, &dropped), 0);
	cr_assert_eq(dropped, 3);
	cr_assert(has(local, 30));
	cr_assert(!has(local, 40) && !has(local, 50) && !has(local, 60));
	/* Never the newest committed one, whatever keep is left. */
	cr_assert_eq(ckpt_local_prune(local, 1, 30, UINT64_MAX, &dropped), 0);
	cr_assert(has(local, 30));
	/* Commits learned late: of 8 newer copies, the newest keep + 2. */
	for (uint64_t step = 31; step <= 38; step++) {
		ckpt_local_path(path, sizeof(path), local, step, PART);
		cr_assert_eq(sh("mkdir -p \"$(dirname '%s')\" && echo x > '%s'",
				path, path), 0);
	}
	cr_assert_eq(ckpt_local_prune(local, 1, 30, UINT64_MAX, &dropped), 0);
	cr_assert_eq(dropped, 5);
	cr_assert(has(local, 30) && has(local, 36) && has(local, 38));
	cr_assert(!has(local, 35));
	/* A tier made but empty (a fresh host's) neither. */
	path_of(local, "empty");
	cr_assert_eq(mkdir(local, 0700), 0);
	cr_assert_eq(ckpt_local_prune(local, 2, 40, UINT64_MAX, &dropped), 0);
	cr_assert_eq(dropped, 0);
	/* A tier never made is nothing to prune. */
	path_of(local, "never");
	cr_assert_eq(ckpt_local_prune(local, 2, 40, UINT64_MAX, &dropped), 0);
	cr_assert_eq(dropped, 0);
}
