/*
 * checkpoint/ckpt_discard.c: a host's parts left by an earlier
 * generation in steps that were never committed; see checkpoint.h.
 */
#include "checkpoint/ckpt_internal.h"

#include <stdio.h>
#include <string.h>

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

			if (!name || strcmp(name + 1, leaf))
				continue;
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
