/*
 * checkpoint/ckpt_list.c: what the store holds under checkpoints/, from
 * one listing grouped by step, and COMMIT manifests read and written as
 * JSON. A malformed COMMIT makes its step "corrupt", never a failure of
 * the whole listing.
 */
#include "checkpoint/ckpt_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void ckpt_object_name(char *out, size_t cap, uint64_t step, const char *leaf)
{
	snprintf(out, cap, CKPT_ROOT "step-%010llu/%s",
		 (unsigned long long)step, leaf);
}

bool ckpt_is_part_leaf(const char *leaf)
{
	size_t n = strlen(leaf), sl = strlen(CKPT_PART_SUFFIX);

	return n > sl && !strchr(leaf, '/') && leaf[0] != '.' &&
	       !strcmp(leaf + n - sl, CKPT_PART_SUFFIX);
}

void ckpt_abandoned_leaf(char *out, size_t cap, const char *part_leaf,
			 int64_t generation)
{
	snprintf(out, cap, "%s" CKPT_ABANDONED_TAG "%lld", part_leaf,
		 (long long)generation);
}

int ckpt_has_commit(struct store *s, uint64_t step, bool *yes,
		    struct err *e)
{
	char name[CKPT_NAME_MAX];

	ckpt_object_name(name, sizeof(name), step, CKPT_COMMIT);
	return store_exists(s, name, yes, e);
}

void ckpt_unpacked_leaf(char *out, size_t cap, const char *part_leaf,
			uint32_t crc32c, uint64_t size, uint64_t unpacked)
{
	snprintf(out, cap, "%s" CKPT_UNPACKED_TAG "%08x-%llu-%llu", part_leaf,
		 crc32c, (unsigned long long)size,
		 (unsigned long long)unpacked);
}

void ckpt_find_unpacked(struct ckpt_part *p, char *const *leaves, size_t n)
{
	char want[CKPT_UNPACKED_LEAF_MAX];
	size_t len;

	ckpt_unpacked_leaf(want, sizeof(want), p->name, p->crc32c, p->size, 0);
	len = strlen(want) - 1; /* all but the trailing "0" */
	for (size_t i = 0; i < n; i++) {
		const char *v = leaves[i] + len;
		char *end;
		unsigned long long u;

		if (strncmp(leaves[i], want, len) || *v < '1' || *v > '9')
			continue;
		errno = 0;
		u = strtoull(v, &end, 10);
		if (!errno && !*end && u <= INT64_MAX) {
			p->unpacked = u;
			return;
		}
	}
}

void ckpt_step_release(struct ckpt_step *st)
{
	for (size_t i = 0; i < st->nparts; i++)
		free(st->parts[i].name);
	free(st->parts);
	st->parts = NULL;
	st->nparts = 0;
}

void ckpt_list_release(struct ckpt_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		ckpt_step_release(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void ckpt_scan_release(struct ckpt_scan *sc)
{
	for (size_t i = 0; i < sc->n; i++) {
		struct ckpt_scan_step *st = &sc->v[i];

		store_object_release(&st->commit);
		for (size_t k = 0; k < st->nobjs; k++)
			store_object_release(&st->objs[k]);
		free(st->objs);
	}
	free(sc->v);
	sc->v = NULL;
	sc->n = 0;
}

/* The step of "checkpoints/step-NNNNNNNNNN/leaf", written as this code
 * writes it; other spellings are not steps. */
static bool parse_step_name(const char *name, uint64_t *step,
			    const char **leaf)
{
	const char *p = name + strlen(CKPT_ROOT "step-");
	char canon[64];
	char *end;
	unsigned long long v;
	size_t dl;

	if (strncmp(name, CKPT_ROOT "step-", strlen(CKPT_ROOT "step-")) ||
	    *p < '0' || *p > '9')
		return false;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || *end != '/')
		return false;
	dl = (size_t)(end - p);
	snprintf(canon, sizeof(canon), "%010llu", v);
	if (strlen(canon) != dl || strncmp(canon, p, dl))
		return false;
	*step = v;
	*leaf = end + 1;
	return true;
}

struct scan_ctx {
	struct ckpt_scan *sc;
	size_t cap;
	struct err *e;
};

static int copy_object(struct store_object *dst,
		       const struct store_object *src)
{
	*dst = *src;
	dst->name = strdup(src->name);
	return dst->name ? 0 : CKPT_ENOMEM;
}

static int scan_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	struct scan_ctx *c = ud;
	struct ckpt_scan *sc = c->sc;
	struct ckpt_scan_step *st;
	const char *leaf;
	uint64_t step;

	if (is_prefix || !parse_step_name(o->name, &step, &leaf) || !*leaf)
		return 0;
	if (!sc->n || sc->v[sc->n - 1].step != step) {
		if (sc->n == c->cap) {
			size_t nc = c->cap ? 2 * c->cap : 16;
			struct ckpt_scan_step *nv =
				realloc(sc->v, nc * sizeof(*nv));

			if (!nv)
				return err_set(c->e, CKPT_ENOMEM,
					       "out of memory");
			sc->v = nv;
			c->cap = nc;
		}
		memset(&sc->v[sc->n], 0, sizeof(sc->v[0]));
		sc->v[sc->n++].step = step;
	}
	st = &sc->v[sc->n - 1];
	if (!strcmp(leaf, CKPT_COMMIT)) {
		st->has_commit = true;
		if (copy_object(&st->commit, o))
			return err_set(c->e, CKPT_ENOMEM, "out of memory");
		return 0;
	}
	{
		struct store_object *nv =
			realloc(st->objs, (st->nobjs + 1) * sizeof(*nv));

		if (!nv)
			return err_set(c->e, CKPT_ENOMEM, "out of memory");
		st->objs = nv;
		if (copy_object(&st->objs[st->nobjs], o))
			return err_set(c->e, CKPT_ENOMEM, "out of memory");
		st->nobjs++;
	}
	return 0;
}

static int scan_step_cmp(const void *a, const void *b)
{
	const struct ckpt_scan_step *x = a, *y = b;

	return x->step < y->step ? -1 : x->step > y->step;
}

int ckpt_scan(struct store *s, struct ckpt_scan *out, struct err *e)
{
	struct scan_ctx c = { out, 0, e };
	int r;

	memset(out, 0, sizeof(*out));
	r = store_list(s, CKPT_ROOT, NULL, scan_cb, &c, e);
	if (r) {
		ckpt_scan_release(out);
		return r;
	}
	/* Steps past 10 digits sort after the padded ones by name. */
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(out->v[0]), scan_step_cmp);
	return 0;
}

static int bad_manifest(struct store *s, uint64_t step, const char *leaf,
			struct err *e, const char *why)
{
	char name[CKPT_NAME_MAX];

	ckpt_object_name(name, sizeof(name), step, leaf);
	return err_set(e, CLOUD_ECORRUPT, "%s is not a valid manifest: %s",
		       store_url(s, name), why);
}

/* A fast step's part's holders (FAST): one at least. */
static int parse_holders(json_t *arr, struct ckpt_part *part)
{
	size_t i;
	json_t *h;

	if (!json_is_array(arr) || !json_array_size(arr) ||
	    json_array_size(arr) > CKPT_HOLDERS_MAX)
		return -1;
	json_array_foreach(arr, i, h) {
		const char *host = json_string_value(json_object_get(h,
								     "host"));
		json_t *tier = json_object_get(h, "tier");

		if (!host || !*host ||
		    strlen(host) >= sizeof(part->holders[0].host) ||
		    !json_is_integer(tier) || json_integer_value(tier) <= 0)
			return -1;
		snprintf(part->holders[i].host, sizeof(part->holders[i].host),
			 "%s", host);
		part->holders[i].tier = (int64_t)json_integer_value(tier);
		part->nholders++;
	}
	return 0;
}

static int parse_parts(struct store *s, uint64_t step, const char *leaf,
		       json_t *parts, struct ckpt_step *st, struct err *e)
{
	size_t i;
	json_t *p;

	if (!json_is_array(parts) || !json_array_size(parts))
		return bad_manifest(s, step, leaf, e, "\"parts\" is not a non-empty "
				  "list");
	st->parts = calloc(json_array_size(parts), sizeof(*st->parts));
	if (!st->parts)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	json_array_foreach(parts, i, p) {
		json_t *name = json_object_get(p, "name");
		json_t *size = json_object_get(p, "size");
		json_t *crc = json_object_get(p, "crc32c");
		json_t *gen = json_object_get(p, "generation");
		json_t *unpacked = json_object_get(p, "unpacked");
		struct ckpt_part *part = &st->parts[i];

		if (!json_is_string(name) ||
		    !ckpt_is_part_leaf(json_string_value(name)) ||
		    strlen(json_string_value(name)) > 200 ||
		    !json_is_integer(size) || json_integer_value(size) < 0 ||
		    !json_is_integer(crc) || json_integer_value(crc) < 0 ||
		    json_integer_value(crc) > (json_int_t)UINT32_MAX ||
		    !json_is_integer(gen) || json_integer_value(gen) <= 0)
			return bad_manifest(s, step, leaf, e,
					  "a part lacks a valid name, size, "
					  "crc32c or generation");
		/* Optional: older COMMITs do not have it. */
		if (unpacked && (!json_is_integer(unpacked) ||
				 json_integer_value(unpacked) <= 0))
			return bad_manifest(s, step, leaf, e,
					  "a part's \"unpacked\" is not a "
					  "positive integer");
		part->name = strdup(json_string_value(name));
		if (!part->name)
			return err_set(e, CKPT_ENOMEM, "out of memory");
		part->size = (uint64_t)json_integer_value(size);
		part->crc32c = (uint32_t)json_integer_value(crc);
		part->generation = (int64_t)json_integer_value(gen);
		part->unpacked = unpacked ? (uint64_t)json_integer_value(
						    unpacked) : 0;
		st->nparts++;
		st->bytes += part->size;
		if (st->fast && parse_holders(json_object_get(p, "holders"),
					      part))
			return bad_manifest(s, step, leaf, e, "a part has no "
					    "valid \"holders\"");
	}
	return 0;
}

int ckpt_read_manifest(struct store *s, uint64_t step, const char *leaf,
		       struct ckpt_step *st, struct err *e)
{
	char name[CKPT_NAME_MAX];
	json_error_t jerr;
	json_t *root, *jstep, *jtime;
	char *data;
	size_t len;
	int r;

	st->fast = !strcmp(leaf, CKPT_FAST);
	ckpt_object_name(name, sizeof(name), step, leaf);
	r = store_read(s, name, CKPT_COMMIT_MAX, &data, &len, NULL, e);
	if (r == CLOUD_EINVAL)
		return bad_manifest(s, step, leaf, e, "it is larger than 1 MiB");
	if (r)
		return r;
	root = json_loadb(data, len, 0, &jerr);
	free(data);
	if (!root)
		return bad_manifest(s, step, leaf, e, jerr.text);
	jstep = json_object_get(root, "step");
	jtime = json_object_get(root, "time");
	if (!json_is_object(root))
		r = bad_manifest(s, step, leaf, e, "it is not a JSON object");
	else if (!json_is_integer(jstep) ||
		 (uint64_t)json_integer_value(jstep) != step)
		r = bad_manifest(s, step, leaf, e, "its \"step\" is not this step");
	else if (!json_is_string(jtime))
		r = bad_manifest(s, step, leaf, e, "it has no \"time\"");
	else
		r = parse_parts(s, step, leaf, json_object_get(root, "parts"),
				st, e);
	if (!r)
		snprintf(st->time, sizeof(st->time), "%s",
			 json_string_value(jtime));
	json_decref(root);
	if (r)
		ckpt_step_release(st);
	return r;
}

static int add_holders(json_t *p, const struct ckpt_part *part)
{
	json_t *arr = json_array();

	for (size_t k = 0; arr && k < part->nholders; k++)
		if (json_array_append_new(arr, json_pack(
				"{s:s, s:I}", "host", part->holders[k].host,
				"tier", (json_int_t)part->holders[k].tier))) {
			json_decref(arr);
			arr = NULL;
		}
	return !arr || json_object_set_new(p, "holders", arr);
}

char *ckpt_commit_json(uint64_t step, const struct ckpt_part *parts,
		       size_t n)
{
	char now[40];
	json_t *root = json_object(), *arr = json_array();
	char *text = NULL;
	bool ok = root && arr;

	rfc3339_now(now, sizeof(now));
	for (size_t i = 0; ok && i < n; i++) {
		json_t *p = json_pack("{s:s, s:I, s:I, s:I}",
				      "name", parts[i].name,
				      "size", (json_int_t)parts[i].size,
				      "crc32c", (json_int_t)parts[i].crc32c,
				      "generation",
				      (json_int_t)parts[i].generation);

		if (p && parts[i].nholders && add_holders(p, &parts[i])) {
			json_decref(p);
			p = NULL;
		}
		if (p && parts[i].unpacked &&
		    json_object_set_new(p, "unpacked", json_integer(
				(json_int_t)parts[i].unpacked))) {
			json_decref(p);
			p = NULL;
		}
		ok = p && !json_array_append_new(arr, p);
	}
	if (ok)
		ok = !json_object_set_new(root, "step",
					  json_integer((json_int_t)step)) &&
		     !json_object_set_new(root, "time", json_string(now)) &&
		     !json_object_set(root, "parts", arr);
	if (ok)
		text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(arr);
	json_decref(root);
	return text;
}

/* A step as listed: its parts, the newest part's time and their size. */
static int listed_step(const struct ckpt_scan_step *sst, struct ckpt_step *st,
		       struct err *e)
{
	st->parts = calloc(sst->nobjs ? sst->nobjs : 1, sizeof(*st->parts));
	if (!st->parts)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	for (size_t k = 0; k < sst->nobjs; k++) {
		const struct store_object *o = &sst->objs[k];
		const char *leaf = strchr(o->name + strlen(CKPT_ROOT), '/') + 1;
		struct ckpt_part *p = &st->parts[st->nparts];

		if (!ckpt_is_part_leaf(leaf))
			continue;
		p->name = strdup(leaf);
		if (!p->name)
			return err_set(e, CKPT_ENOMEM, "out of memory");
		p->size = o->size;
		p->crc32c = o->crc32c;
		p->generation = o->generation;
		st->bytes += o->size;
		st->nparts++;
		if (strcmp(o->updated, st->time) > 0)
			snprintf(st->time, sizeof(st->time), "%s",
				 o->updated);
	}
	return 0;
}

static bool has_fast(const struct ckpt_scan_step *sst)
{
	for (size_t k = 0; k < sst->nobjs; k++) {
		const char *leaf = strrchr(sst->objs[k].name, '/');

		if (leaf && !strcmp(leaf + 1, CKPT_FAST))
			return true;
	}
	return false;
}

int ckpt_list(struct store *s, struct ckpt_list *out, struct err *e)
{
	struct ckpt_scan sc;
	int r;

	err_init(e);
	memset(out, 0, sizeof(*out));
	if (!s)
		return err_set(e, CKPT_EINVAL, "ckpt_list needs a store");
	r = ckpt_scan(s, &sc, e);
	if (r)
		return r;
	out->v = calloc(sc.n ? sc.n : 1, sizeof(*out->v));
	if (!out->v) {
		ckpt_scan_release(&sc);
		return err_set(e, CKPT_ENOMEM, "out of memory");
	}
	for (size_t i = 0; !r && i < sc.n; i++) {
		struct ckpt_scan_step *sst = &sc.v[i];
		struct ckpt_step *st = &out->v[out->n];

		memset(st, 0, sizeof(*st));
		st->step = sst->step;
		if (sst->has_commit) {
			r = ckpt_read_manifest(s, sst->step, CKPT_COMMIT, st, e);
			if (!r) {
				st->committed = true;
			} else if (r == CLOUD_ECORRUPT) {
				log_warn("%s", e->msg);
				err_init(e);
				st->committed = true;
				st->corrupt = true;
				r = listed_step(sst, st, e);
			} else if (r == CLOUD_ENOTFOUND) {
				/* Pruned tier it was listed. */
				err_init(e);
				r = 0;
				if (!sst->nobjs)
					continue;
				r = listed_step(sst, st, e);
			}
		} else if (has_fast(sst)) {
			r = ckpt_read_manifest(s, sst->step, CKPT_FAST, st, e);
			if (r == CLOUD_ECORRUPT || r == CLOUD_ENOTFOUND) {
				/* Not restorable: listed as it is. */
				if (r == CLOUD_ECORRUPT)
					log_warn("%s", e->msg);
				err_init(e);
				ckpt_step_release(st);
				st->fast = false;
				r = listed_step(sst, st, e);
			}
		} else {
			r = listed_step(sst, st, e);
		}
		out->n++;
	}
	ckpt_scan_release(&sc);
	if (r)
		ckpt_list_release(out);
	return r;
}
