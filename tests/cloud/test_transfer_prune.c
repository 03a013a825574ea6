/*
 * tests/cloud/test_transfer_prune.c: `ckpt prune` removes the temporary
 * pieces of parallel uploads that a crash left behind (store_is_piece),
 * in any step, kept ones included, once they are stale, and leaves a live
 * upload's young pieces and every real part alone. Against the GCS fake.
 */
#include "checkpoint/checkpoint.h"
#include "tests/cloud/gcs_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct fake_gcs fake;
static char dir[] = "/tmp/slicectl-prune-pieces-XXXXXX";

static void setup(void)
{
	char path[sizeof(dir) + 16];
	FILE *f;

	gcs_check_clean_env();
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/w.bin", dir);
	f = fopen(path, "w");
	cr_assert(f);
	fputs("weights", f);
	fclose(f);
}

static void teardown(void)
{
	char path[sizeof(dir) + 16];

	snprintf(path, sizeof(path), "%s/w.bin", dir);
	unlink(path);
	rmdir(dir);
	fake_gcs_stop(&fake);
}

TestSuite(prune_pieces, .init = setup, .fini = teardown, .timeout = 120);

static int count_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	(void)is_prefix;
	if (store_is_piece(o->name))
		++*(unsigned *)ud;
	return 0;
}

static unsigned pieces(struct store *s)
{
	unsigned n = 0;
	struct err e;

	cr_assert_eq(store_list(s, "", NULL, count_cb, &n, &e), 0, "%s",
		     e.msg);
	return n;
}

Test(prune_pieces, stale_pieces_go_from_every_step)
{
	static const char *const left[] = {
		"checkpoints/step-0000000002/part.tar.zst" STORE_PIECE_MARK
		"0123456789abcdef.0",
		"checkpoints/step-0000000002/part.tar.zst" STORE_PIECE_MARK
		"0123456789abcdef.c0-0",
		"checkpoints/step-0000000003/part.tar.zst" STORE_PIECE_MARK
		"fedcba9876543210.4",
	};
	struct ckpt_prune_options po;
	struct ckpt_prune_result pr;
	struct ckpt_verify_result vr;
	struct store *s;
	struct err e;

	cr_assert(store_is_piece(left[0]));
	cr_assert(!store_is_piece("checkpoints/step-0000000002/p.tar.zst"));
	cr_assert_eq(store_open(&s, "gs://bkt/run", &e), 0, "%s", e.msg);
	cr_assert_eq(ckpt_save(s, dir, 1, NULL, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(ckpt_save(s, dir, 2, NULL, NULL, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < sizeof(left) / sizeof(*left); i++)
		cr_assert_eq(store_put(s, left[i], "x", 1, STORE_CREATE_ONLY,
				       NULL, &e), 0, "%s", e.msg);
	ckpt_prune_options_init(&po);
	/* Young pieces may be a live upload's. */
	cr_assert_eq(ckpt_prune(s, &po, &pr, &e), 0, "%s", e.msg);
	cr_assert_eq(pieces(s), 3);
	cr_assert_eq(pr.steps_deleted, 1);
	sleep(1);
	po.stale_s = 1;
	cr_assert_eq(ckpt_prune(s, &po, &pr, &e), 0, "%s", e.msg);
	cr_assert_eq(pieces(s), 0);
	/* The kept step is whole. */
	cr_assert_eq(ckpt_verify(s, 2, &vr, &e), 0, "%s", e.msg);
	store_close(s);
}
