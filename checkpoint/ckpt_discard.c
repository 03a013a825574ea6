/*
 * checkpoint/ckpt_discard.c: a host's parts left by an earlier
 * generation in steps that were never committed; see checkpoint.h.
 *
 * A committer of the earlier generation may still be at work (a worker
 * leaving with its last save, worker 0's commit pass), so each part is
 * first marked abandoned (ckpt_internal.h), then deleted only if the
 * step is still uncommitted: a COMMIT written before the mark is seen
 * here and the part kept; one written after it is withdrawn by its
 * committer, who looks for marks once it has written.
 *
 * Fast-tier steps newer than `after` were passed over by the restore's
 * choice (a holder gone): this host's records of them go, and their
 * FAST, so that the new generation's saves of the same step numbers are
 * committed afresh instead of standing behind a manifest whose copies
 * its own saves replace. Their copies are checked against FAST anyway.
 */
#include "checkpoint/ckpt_internal.h"

#include <stdio.h>
#include <string.h>

/* Marks version o of leaf in step abandoned; then 1 when the step turns
 * out committed (o stays), 0 when o may go, or an error. */
/* A fast-tier object of step newer than the restore: FAST, or this
 * host's record (leaf is "PART.tar.zst"). */
static bool fast_object(const char *name, const char *leaf)
{
	size_t n = strlen(leaf);

	return !strcmp(name, CKPT_FAST) ||
	       (!strncmp(name, leaf, n) &&
		!strncmp(name + n, CKPT_FAST_TAG, strlen(CKPT_FAST_TAG)));
}

static int abandon(struct store *s, uint64_t step, const char *leaf,
		   const struct store_object *o, struct err *e)
{
	char mark[CKPT_UNPACKED_LEAF_MAX], name[CKPT_NAME_MAX + 64];
	bool committed;
	int rc;

	ckpt_abandoned_leaf(mark, sizeof(mark), leaf, o->generation);
	ckpt_object_name(name, sizeof(name), step, mark);
	rc = store_put(s, name, "", 0, STORE_CREATE_ONLY, NULL, e);
	if (rc && rc != CLOUD_EPRECONDITION)
		return rc;
	err_init(e);
	rc = ckpt_has_commit(s, step, &committed, e);
	if (rc || !committed)
		return rc;
	log_info("step %llu was committed meanwhile: %s kept",
		 (unsigned long long)step, leaf);
	return 1;
}

int ckpt_discard_newer(struct store *s, const char *part, uint64_t after,
		       size_t *n, struct err *e)
{
	char leaf[CKPT_NAME_MAX];
	struct ckpt_scan sc;
	int rc;

	err_init(e);
	*n = 0;
	if (!s || !part || !*part)
		return err_set(e, CKPT_EINVAL,
			       "ckpt_discard_newer needs a store and a part");
	snprintf(leaf, sizeof(leaf), "%s%s", part, CKPT_PART_SUFFIX);
	rc = ckpt_scan(s, &sc, e);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < sc.n; i++) {
		const struct ckpt_scan_step *st = &sc.v[i];

		if (st->step <= after || st->has_commit)
			continue;
		for (size_t k = 0; !rc && k < st->nobjs; k++) {
			const struct store_object *o = &st->objs[k];
			const char *name = strrchr(o->name, '/');

			if (name && fast_object(name + 1, leaf)) {
				rc = store_delete(s, o->name, o->generation,
						  e);
				if (rc == CLOUD_ENOTFOUND ||
				    rc == CLOUD_EPRECONDITION) {
					err_init(e);
					rc = 0;
				}
				continue;
			}
			if (!name || strcmp(name + 1, leaf))
				continue;
			rc = abandon(s, st->step, leaf, o, e);
			if (rc == 1) {
				rc = 0;
				continue;
			}
			if (!rc)
				rc = store_delete(s, o->name, o->generation, e);
			if (rc == CLOUD_ENOTFOUND || rc == CLOUD_EPRECONDITION) {
				/* Gone, or written again: not ours to
				 * judge now. */
				err_init(e);
				rc = 0;
				continue;
			}
			if (!rc) {
				(*n)++;
				log_info("step %llu: %s of an earlier "
					 "generation discarded (never "
					 "committed)",
					 (unsigned long long)st->step, leaf);
			}
		}
	}
	ckpt_scan_release(&sc);
	return rc;
}
