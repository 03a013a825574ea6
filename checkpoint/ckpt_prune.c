/*
 * checkpoint/ckpt_prune.c: retention. Keeps the newest K committed
 * steps and every M-th; deletes the other committed steps older than the
 * newest one kept, COMMIT first so that a step stops existing before any
 * of its parts goes; deletes uncommitted steps only when they are older
 * than the newest committed step and nobody has written to them for
 * stale_s, each part only at the generation listed, so a live writer's
 * new part is never removed. Temporary pieces of a parallel upload that a
 * crash left behind (store_is_piece) go from every step once stale_s has
 * passed since they were written: a live upload's pieces are younger.
 */
#include "checkpoint/ckpt_internal.h"

#include <string.h>

void ckpt_prune_options_init(struct ckpt_prune_options *o)
{
	o->keep = 1;
	o->keep_every = 0;
	o->stale_s = 3600;
}

static bool valid_commit(const struct ckpt_step *st)
{
	return st->committed && !st->corrupt;
}

/* Deletes one object at its listed generation; gone already is fine. */
static int delete_object(struct store *s, const struct store_object *o,
			 struct ckpt_prune_result *r, bool *changed,
			 struct err *e)
{
	int rc = store_delete(s, o->name, o->generation, e);

	if (rc == CLOUD_ENOTFOUND) {
		err_init(e);
		return 0;
	}
	if (rc == CLOUD_EPRECONDITION) {
		log_info("prune: %s was written again meanwhile; left alone",
			 store_url(s, o->name));
		err_init(e);
		*changed = true;
		return 0;
	}
	if (rc)
		return rc;
	r->objects_deleted++;
	r->bytes_freed += o->size;
	return 0;
}

static int delete_step(struct store *s, const struct ckpt_scan_step *sst,
		       struct ckpt_prune_result *r, struct err *e)
{
	bool changed = false;
	int rc = 0;

	if (sst->has_commit) {
		rc = delete_object(s, &sst->commit, r, &changed, e);
		/* A COMMIT rewritten meanwhile means the step is live. */
		if (rc || changed)
			return rc;
	}
	/* A part written again means a live writer: the rest stays. */
	for (size_t i = 0; !rc && !changed && i < sst->nobjs; i++)
		rc = delete_object(s, &sst->objs[i], r, &changed, e);
	if (!rc && !changed) {
		r->steps_deleted++;
		log_info("prune: deleted step %llu",
			 (unsigned long long)sst->step);
	}
	return rc;
}

/* The newest write to an uncommitted step, in seconds since the epoch. */
static time_t last_touched(const struct ckpt_scan_step *sst)
{
	time_t newest = 0;

	for (size_t i = 0; i < sst->nobjs; i++) {
		time_t t = rfc3339_parse(sst->objs[i].updated);

		/* Unknown times count as now: never judged stale. */
		if (t == (time_t)-1)
			return time(NULL);
		if (t > newest)
			newest = t;
	}
	return newest;
}

static int delete_stale_pieces(struct store *s,
			       const struct ckpt_scan_step *sst,
			       unsigned stale_s, struct ckpt_prune_result *r,
			       struct err *e)
{
	time_t now = time(NULL);
	int rc = 0;

	for (size_t i = 0; !rc && i < sst->nobjs; i++) {
		const struct store_object *o = &sst->objs[i];
		time_t t = rfc3339_parse(o->updated);
		bool changed = false;

		if (!store_is_piece(o->name) || t == (time_t)-1 ||
		    now - t < (time_t)stale_s)
			continue;
		rc = delete_object(s, o, r, &changed, e);
		if (!rc && !changed)
			log_info("prune: deleted %s, a piece of an upload "
				 "that never finished", store_url(s, o->name));
	}
	return rc;
}

int ckpt_prune(struct store *s, const struct ckpt_prune_options *o,
	       struct ckpt_prune_result *r, struct err *e)
{
	struct ckpt_prune_result local;
	struct ckpt_list l;
	struct ckpt_scan sc;
	uint64_t newest = 0, oldest_kept = 0;
	bool any = false;
	unsigned kept = 0;
	int rc;

	err_init(e);
	if (!r)
		r = &local;
	memset(r, 0, sizeof(*r));
	if (!s || !o)
		return err_set(e, CKPT_EINVAL, "ckpt_prune needs a store and "
			       "options");
	if (o->keep < 1)
		return err_set(e, CKPT_EINVAL,
			       "--keep must be at least 1: the newest "
			       "committed step is always kept");
	/* Manifests tell committed from corrupt; the scan has what to
	 * delete, with generations. Both come from the same listing
	 * order; a step committed in between is seen as uncommitted and
	 * left alone unless stale. */
	rc = ckpt_list(s, &l, e);
	if (rc)
		return rc;
	rc = ckpt_scan(s, &sc, e);
	if (rc) {
		ckpt_list_release(&l);
		return rc;
	}
	for (size_t i = l.n; i-- > 0;) {
		if (!valid_commit(&l.v[i]))
			continue;
		if (!any)
			newest = l.v[i].step;
		any = true;
		if (kept < o->keep) {
			kept++;
			oldest_kept = l.v[i].step;
		}
	}
	for (size_t i = 0; !rc && i < sc.n; i++)
		rc = delete_stale_pieces(s, &sc.v[i], o->stale_s, r, e);
	for (size_t i = 0; any && !rc && i < sc.n; i++) {
		const struct ckpt_scan_step *sst = &sc.v[i];
		const struct ckpt_step *st = NULL;

		for (size_t k = 0; k < l.n; k++)
			if (l.v[k].step == sst->step)
				st = &l.v[k];
		if (sst->step >= newest)
			continue;
		if (sst->has_commit && st && st->committed) {
			if (sst->step >= oldest_kept)
				continue;
			if (o->keep_every && valid_commit(st) &&
			    sst->step % o->keep_every == 0)
				continue;
			rc = delete_step(s, sst, r, e);
		} else if (!sst->has_commit) {
			time_t t = last_touched(sst);

			if (time(NULL) - t < (time_t)o->stale_s)
				continue;
			rc = delete_step(s, sst, r, e);
		}
	}
	ckpt_scan_release(&sc);
	ckpt_list_release(&l);
	return rc;
}
