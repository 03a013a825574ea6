/*
 * checkpoint/ckpt_internal.h: private to the ckpt_*.c files. Names of the
 * objects of a step, one listing of checkpoints/ grouped by step, and
 * COMMIT as JSON both ways.
 */
#ifndef SLICECTL_CHECKPOINT_CKPT_INTERNAL_H
#define SLICECTL_CHECKPOINT_CKPT_INTERNAL_H

#include "checkpoint/checkpoint.h"

#include <limits.h>

#define CKPT_ROOT "checkpoints/"
#define CKPT_PART_SUFFIX ".tar.zst"
#define CKPT_COMMIT "COMMIT"
#define CKPT_FAST "FAST"       /* a fast-tier step's manifest */
/* A fast save's record: "PART.tar.zst" CKPT_FAST_TAG "CRC~SIZE~UNPACKED
 * ~HOST~SINCE[~HOST~SINCE]" ('~' is in no part name). */
#define CKPT_FAST_TAG ".fast~"
/* A record's leaf as p (its name malloc'd; generation: the record's),
 * false when leaf is not one. */
bool ckpt_fast_parse_leaf(const char *leaf, int64_t generation,
			  struct ckpt_part *p);
#define CKPT_COMMIT_MAX ((size_t)1 << 20)
#define CKPT_NAME_MAX 256

/* "checkpoints/step-NNNNNNNNNN/" followed by leaf (may be ""). */
void ckpt_object_name(char *out, size_t cap, uint64_t step,
		      const char *leaf);

/* Whether leaf (what follows the step's folder) names a part. */
bool ckpt_is_part_leaf(const char *leaf);

/* The empty object telling committers a part's unpacked size (see
 * checkpoint.h), named for the part's leaf, CRC32C and size. */
#define CKPT_UNPACKED_TAG ".unpacked-"
#define CKPT_UNPACKED_LEAF_MAX (CKPT_NAME_MAX + 64)
void ckpt_unpacked_leaf(char *out, size_t cap, const char *part_leaf,
			uint32_t crc32c, uint64_t size, uint64_t unpacked);
/* Sets p's unpacked from the first of n leaves naming such an object for
 * p (its name, CRC32C and size); leaves it alone when none does. */
void ckpt_find_unpacked(struct ckpt_part *p, char *const *leaves, size_t n);

/* Writes the empty object name (a marker whose name says it all),
 * create-only so that the store retries it; finding it there already
 * (an earlier save of the same bytes, or a retry's first attempt) is
 * success. */
int ckpt_put_marker(struct store *s, const char *name, struct err *e);

/* The empty object a new generation writes before it deletes its part of
 * an uncommitted step (ckpt_discard.c): that version of the part
 * (its object generation) may never be named by a COMMIT. A committer
 * leaves such a part out, and withdraws a COMMIT it wrote when it finds
 * one afterwards, so a discard and a commit racing never leave a COMMIT
 * naming a deleted part: each writes first and looks second. */
#define CKPT_ABANDONED_TAG ".abandoned-"
void ckpt_abandoned_leaf(char *out, size_t cap, const char *part_leaf,
			 int64_t generation);

/* Whether step has a COMMIT, in *yes. Returns 0 or the store's error
 * (e filled); a missing COMMIT is no error. */
int ckpt_has_commit(struct store *s, uint64_t step, bool *yes,
		    struct err *e);

/* The objects of one step's folder as listed. */
struct ckpt_scan_step {
	uint64_t step;
	bool has_commit;
	struct store_object commit;
	struct store_object *objs; /* everything else, parts or not */
	size_t nobjs;
};

struct ckpt_scan {
	struct ckpt_scan_step *v; /* ascending by step */
	size_t n;
};

int ckpt_scan(struct store *s, struct ckpt_scan *out, struct err *e);
void ckpt_scan_release(struct ckpt_scan *sc);

/* Reads a step's COMMIT or FAST (leaf) into st (parts, their holders
 * for FAST, time, bytes); CLOUD_ECORRUPT with the reason when it is not
 * a valid manifest of that step. */
int ckpt_read_manifest(struct store *s, uint64_t step, const char *leaf,
		       struct ckpt_step *st, struct err *e);
/* The manifest of parts as JSON (malloc'd), with their holders when
 * they have any (FAST). */
char *ckpt_commit_json(uint64_t step, const struct ckpt_part *parts,
		       size_t n);
void ckpt_step_release(struct ckpt_step *st);

/* A save's local copy being written (ckpt_local.c): to tmp, named path
 * once the upload finished. fd < 0: none (never begun, or dropped after
 * a failure, already logged). */
struct ckpt_local_copy {
	int fd;
	char path[PATH_MAX];
	char tmp[PATH_MAX + 32];
};

/* Makes dir's folder for step, where its copies go (ckpt_local_path). */
int ckpt_local_mkdir(const char *dir, uint64_t step, struct err *e);
/* -1 (logged) when there will be no copy. */
int ckpt_local_begin(struct ckpt_local_copy *c, const char *dir,
		     uint64_t step, const char *part);
void ckpt_local_write(struct ckpt_local_copy *c, const void *data,
		      size_t len);
/* -1 (logged) when the copy could not be kept. */
int ckpt_local_finish(struct ckpt_local_copy *c);
void ckpt_local_abort(struct ckpt_local_copy *c);

#endif
