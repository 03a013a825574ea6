/*
 * run/events_follow.c: following a run's history without reading it all
 * again (run.h, struct events_follower).
 *
 * The history's objects are written create-only and never changed, and
 * a writer never reuses a name, so an object read once is read for good:
 * each call lists the prefix (a listing page holds 1000 names) and GETs
 * only the names it has not seen. A week of 1024 workers is about 11,000
 * objects; reading them all every minute, as events_list would, is
 * 11,000 GETs a minute for one worker's export.
 */
#include "run/events_read.h"

#include "cloud/cloud.h"

#include <stdlib.h>
#include <string.h>

struct events_follower {
	struct events_read rd;   /* the history so far, in time order */
	struct strlist seen;     /* names read (or found gone), sorted */
	struct strlist fresh;    /* this call's names not seen yet */
	bool unsorted;           /* rd gained events not put in order */
};

int events_follower_new(struct events_follower **out, struct err *e)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	strlist_init(&(*out)->seen);
	strlist_init(&(*out)->fresh);
	return 0;
}

void events_follower_free(struct events_follower *f)
{
	if (!f)
		return;
	events_read_release(&f->rd);
	strlist_release(&f->seen);
	strlist_release(&f->fresh);
	free(f);
}

size_t events_follower_objects(const struct events_follower *f)
{
	return f->seen.n;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool seen_before(const struct events_follower *f, const char *name)
{
	return f->seen.n && bsearch(&name, f->seen.v, f->seen.n,
				    sizeof(*f->seen.v), by_name);
}

struct follow_listing {
	struct events_follower *f;
	int rc;
};

static int note_fresh(void *ud, const struct store_object *o, bool is_prefix)
{
	struct follow_listing *l = ud;

	if (is_prefix || !strstr(o->name, ".json") ||
	    seen_before(l->f, o->name))
		return 0;
	l->rc = strlist_push(&l->f->fresh, o->name);
	return l->rc != 0;
}

/* Reads the fresh names; a name is seen once its events are in rd (or it
 * is gone), so a read that fails is tried again by the next call. */
static int read_fresh(struct events_follower *f, struct store *s,
		      struct err *e)
{
	int rc = 0;

	for (size_t i = 0; i < f->fresh.n && !rc; i++) {
		size_t before = f->rd.n;

		rc = events_read_object(s, f->fresh.v[i], &f->rd, e);
		if (!rc && strlist_push(&f->seen, f->fresh.v[i]))
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		if (f->rd.n != before)
			f->unsorted = true;
	}
	if (f->seen.n)
		qsort(f->seen.v, f->seen.n, sizeof(*f->seen.v), by_name);
	return rc;
}

int events_follow(struct events_follower *f, struct store *s,
		  const struct event **v, size_t *n, struct err *e)
{
	struct follow_listing l = { .f = f };
	int rc;

	err_init(e);
	strlist_release(&f->fresh);
	strlist_init(&f->fresh);
	rc = store_list(s, EVENTS_PREFIX, NULL, note_fresh, &l, e);
	if (!rc && l.rc)
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	if (rc == CLOUD_ENOTFOUND) {
		err_init(e);
		rc = 0;
	}
	if (!rc)
		rc = read_fresh(f, s, e);
	if (!rc && f->unsorted) {
		rc = events_read_sort(&f->rd, e);
		f->unsorted = rc != 0;
	}
	*v = f->rd.v;
	*n = f->rd.n;
	return rc;
}
