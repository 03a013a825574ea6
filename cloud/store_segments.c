/*
 * store_segments.c: an append-only object (a log) published as
 * immutable segments, so that what grows is sent once: each segment is
 * DIR + the 16-digit offset of its first byte + ".seg", written once and
 * create-only (no object is written twice, whatever the cadence), and a
 * reader concatenates them in name order, which is offset order.
 */
#include "cloud/cloud.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SEG_DIGITS 16
#define SEG_SUFFIX ".seg"

int store_segment_put(struct store *s, const char *dir, uint64_t offset,
		      const void *data, size_t len, uint64_t *stored,
		      struct err *e)
{
	struct store_object o = { 0 };
	struct buf name;
	int rc;

	buf_init(&name);
	if (buf_appendf(&name, "%s%0*" PRIu64 SEG_SUFFIX, dir, SEG_DIGITS,
			offset))
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	rc = store_put(s, name.data, data, len, STORE_CREATE_ONLY, NULL, e);
	if (!rc && stored)
		*stored = len;
	/* Written already, by this writer before a restart: what is there
	 * is the log's bytes from offset on, however many. */
	if (rc == CLOUD_EPRECONDITION) {
		err_init(e);
		rc = store_stat(s, name.data, &o, e);
		if (!rc && stored)
			*stored = o.size;
		store_object_release(&o);
	}
	buf_release(&name);
	return rc;
}

struct segment {
	char *name;
	uint64_t offset, size;
	int64_t generation;
};

struct seg_list {
	struct segment *v;
	size_t n, cap;
	size_t dir_len;
	struct err *e;
};

/* The offset a segment's name gives; false for other objects. */
static bool segment_offset(const char *leaf, uint64_t *out)
{
	if (strlen(leaf) != SEG_DIGITS + strlen(SEG_SUFFIX) ||
	    strspn(leaf, "0123456789") != SEG_DIGITS ||
	    strcmp(leaf + SEG_DIGITS, SEG_SUFFIX))
		return false;
	*out = strtoull(leaf, NULL, 10);
	return true;
}

static int collect(void *ud, const struct store_object *o, bool is_prefix)
{
	struct seg_list *l = ud;
	uint64_t off;

	if (is_prefix || strlen(o->name) < l->dir_len ||
	    !segment_offset(o->name + l->dir_len, &off))
		return 0;
	if (l->n == l->cap) {
		size_t nc = l->cap ? 2 * l->cap : 16;
		struct segment *nv = realloc(l->v, nc * sizeof(*nv));

		if (!nv)
			return err_set(l->e, CLOUD_ENOMEM, "out of memory");
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n].name = strdup(o->name);
	if (!l->v[l->n].name)
		return err_set(l->e, CLOUD_ENOMEM, "out of memory");
	l->v[l->n].offset = off;
	l->v[l->n].size = o->size;
	l->v[l->n].generation = o->generation;
	l->n++;
	return 0;
}

struct skip_sink {
	store_sink_fn sink;
	void *ud;
	uint64_t skip;
};

static int skip_sink(void *ud, const void *data, size_t len, struct err *e)
{
	struct skip_sink *k = ud;
	const char *p = data;

	if (k->skip >= len) {
		k->skip -= len;
		return 0;
	}
	p += k->skip;
	len -= (size_t)k->skip;
	k->skip = 0;
	return k->sink(k->ud, p, len, e);
}

int store_segments_read(struct store *s, const char *dir, uint64_t from,
			store_sink_fn sink, void *ud, uint64_t *end,
			struct err *e)
{
	struct seg_list l = { .dir_len = strlen(dir), .e = e };
	uint64_t pos = from;
	int rc;

	err_init(e);
	rc = store_list(s, dir, NULL, collect, &l, e);
	/* Listed in name order, which is offset order. */
	for (size_t i = 0; !rc && i < l.n; i++) {
		const struct segment *g = &l.v[i];
		struct skip_sink k = { sink, ud, 0 };

		if (g->offset + g->size <= pos)
			continue;
		/* A gap is what the writer chose not to send (a burst over
		 * its bound): the reader goes on after it. */
		if (g->offset > pos)
			pos = g->offset;
		k.skip = pos - g->offset;
		rc = store_get(s, g->name, g->generation, skip_sink, &k, NULL,
			       e);
		if (!rc)
			pos = g->offset + g->size;
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	if (!rc && end)
		*end = pos;
	return rc;
}
