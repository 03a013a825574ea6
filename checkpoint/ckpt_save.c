/*
 * checkpoint/ckpt_save.c: a directory streamed as one part of a step
 * (pack_tree straight into a store upload, nothing staged on disk), and
 * the commit protocol: COMMIT is written last, create-only, once every
 * expected part is listed, so a step is either committed whole or not at
 * all, whatever is killed when. Only a committing save lists the step:
 * the others upload their part and leave the commit to the committer.
 */
#include "checkpoint/ckpt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_PART_NAME_MAX 200

void ckpt_save_options_init(struct ckpt_save_options *o)
{
	pack_options_init(&o->pack);
	o->part = NULL;
	o->local_dir = NULL;
	o->parts_expected = 1;
	o->commit = true;
	o->cancel = NULL;
	o->fast = false;
}

static bool cancelled(const struct ckpt_save_options *o, struct err *e,
		      int *rc)
{
	if (!o->cancel || !atomic_load(o->cancel))
		return false;
	*rc = err_set(e, CLOUD_EABORTED, "the save was cancelled");
	return true;
}

static int check_part(const char *part, struct err *e)
{
	size_t n = strlen(part);

	if (!n || n > CKPT_PART_NAME_MAX || part[0] == '.' ||
	    n != strspn(part, "abcdefghijklmnopqrstuvwxyz"
			      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"))
		return err_set(e, CKPT_EINVAL,
			       "part name \"%s\" is not usable; use letters, "
			       "digits, '.', '_' and '-' (like "
			       "\"" CKPT_DEFAULT_PART "\")", part);
	return 0;
}

struct save_sink {
	struct store_upload *u;
	const struct ckpt_save_options *o;
	int code; /* the store's own error, kept apart from pack's */
	uint64_t bytes;
	uint32_t crc; /* of what was uploaded, as the store will say */
	struct ckpt_local_copy local;
};

static int save_write(void *ud, const void *data, size_t len, struct err *e)
{
	struct save_sink *s = ud;
	int r;

	if (cancelled(s->o, e, &r)) {
		s->code = r;
		return r;
	}
	r = s->u ? store_upload_write(s->u, data, len, e) : 0;
	if (r) {
		s->code = r;
		return r;
	}
	s->bytes += len;
	s->crc = crc32c_update(s->crc, data, len);
	ckpt_local_write(&s->local, data, len);
	if (!s->u && s->local.fd < 0) {
		s->code = CLOUD_EIO;
		return err_set(e, CLOUD_EIO, "the local tier could not keep "
			       "the copy (see the warning above)");
	}
	return 0;
}

/* A fast-tier step's part: the local tier's copy alone (checkpoint.h). */
static int save_fast(const char *dir, uint64_t step, const char *part,
		     const struct ckpt_save_options *o,
		     struct ckpt_save_result *r, struct err *e)
{
	struct save_sink sink = { .o = o, .local = { .fd = -1 } };
	int rc;

	if (!o->local_dir)
		return err_set(e, CKPT_EINVAL, "a fast-tier save needs a "
			       "local tier");
	if (ckpt_local_begin(&sink.local, o->local_dir, step, part))
		return err_set(e, CLOUD_EIO, "the local tier %s cannot keep "
			       "step %llu", o->local_dir,
			       (unsigned long long)step);
	rc = pack_tree(dir, &o->pack, save_write, &sink, &r->stats, e);
	if (rc) {
		ckpt_local_abort(&sink.local);
		if (sink.code)
			e->code = rc = sink.code;
		return rc;
	}
	if (cancelled(o, e, &rc)) {
		ckpt_local_abort(&sink.local);
		return rc;
	}
	if (ckpt_local_finish(&sink.local))
		return err_set(e, CLOUD_EIO, "the local tier %s could not keep "
			       "step %llu", o->local_dir,
			       (unsigned long long)step);
	r->bytes = sink.bytes;
	r->crc32c = sink.crc;
	return 0;
}

/* Tells committers what the part unpacks to, before the part exists, so
 * any COMMIT naming it can record that (checkpoint.h). Create-only, so
 * that the store retries it as it retries every other write of a save (a
 * write without a precondition is never sent twice). Its name is all it
 * says: finding it there already (an earlier save of these very bytes)
 * is success; a retry that finds its own first attempt landed is success
 * inside the store, which checks it holds what was sent. */
static int put_unpacked(struct store *s, uint64_t step, const char *leaf,
			const struct save_sink *sink, uint64_t unpacked,
			struct err *e)
{
	char tag[CKPT_UNPACKED_LEAF_MAX], obj[CKPT_UNPACKED_LEAF_MAX + 32];

	ckpt_unpacked_leaf(tag, sizeof(tag), leaf, sink->crc, sink->bytes,
			   unpacked);
	ckpt_object_name(obj, sizeof(obj), step, tag);
	return ckpt_put_marker(s, obj, e);
}

int ckpt_put_marker(struct store *s, const char *name, struct err *e)
{
	int rc = store_put(s, name, "", 0, STORE_CREATE_ONLY, NULL, e);

	if (rc == CLOUD_EPRECONDITION) {
		err_init(e);
		rc = 0;
	}
	return rc;
}

/* Fails when the step is committed; otherwise the generation the part
 * must still have when the upload ends (or STORE_CREATE_ONLY): a save
 * racing another save of the same part fails instead of mixing. */
static int before_upload(struct store *s, uint64_t step, const char *obj,
			 int64_t *if_gen, struct err *e)
{
	char commit[CKPT_NAME_MAX];
	struct store_object o;
	bool committed;
	int r;

	r = ckpt_has_commit(s, step, &committed, e);
	if (r)
		return r;
	if (committed) {
		ckpt_object_name(commit, sizeof(commit), step, CKPT_COMMIT);
		return err_set(e, CKPT_ECOMMITTED,
			       "step %llu is already committed (%s exists); "
			       "its parts are final: save to a new step",
			       (unsigned long long)step,
			       store_url(s, commit));
	}
	r = store_stat(s, obj, &o, e);
	if (r == CLOUD_ENOTFOUND) {
		err_init(e);
		*if_gen = STORE_CREATE_ONLY;
		return 0;
	}
	if (r)
		return r;
	*if_gen = o.generation;
	store_object_release(&o);
	return 0;
}

int ckpt_save(struct store *s, const char *dir, uint64_t step,
	      const struct ckpt_save_options *o, struct ckpt_save_result *r,
	      struct err *e)
{
	struct ckpt_save_options defaults;
	struct ckpt_save_result local;
	struct save_sink sink = { .local = { .fd = -1 } };
	struct store_object done;
	char leaf[CKPT_PART_NAME_MAX + sizeof(CKPT_PART_SUFFIX)];
	char obj[CKPT_NAME_MAX];
	int64_t if_gen = STORE_CREATE_ONLY;
	int rc;

	err_init(e);
	if (!o) {
		ckpt_save_options_init(&defaults);
		o = &defaults;
	}
	if (!r)
		r = &local;
	memset(r, 0, sizeof(*r));
	if (!s || !dir || !*dir)
		return err_set(e, CKPT_EINVAL,
			       "ckpt_save needs a store and a directory");
	rc = check_part(o->part ? o->part : CKPT_DEFAULT_PART, e);
	if (rc)
		return rc;
	if (o->fast)
		return save_fast(dir, step, o->part ? o->part
						     : CKPT_DEFAULT_PART,
				 o, r, e);
	sink.o = o;
	snprintf(leaf, sizeof(leaf), "%s" CKPT_PART_SUFFIX,
		 o->part ? o->part : CKPT_DEFAULT_PART);
	ckpt_object_name(obj, sizeof(obj), step, leaf);

	if (cancelled(o, e, &rc))
		return rc;
	rc = before_upload(s, step, obj, &if_gen, e);
	if (rc)
		return rc;
	if (cancelled(o, e, &rc))
		return rc;
	rc = store_upload_begin(s, obj, if_gen, &sink.u, e);
	if (rc)
		return rc;
	if (o->local_dir)
		ckpt_local_begin(&sink.local, o->local_dir, step,
				 o->part ? o->part : CKPT_DEFAULT_PART);
	rc = pack_tree(dir, &o->pack, save_write, &sink, &r->stats, e);
	if (rc) {
		ckpt_local_abort(&sink.local);
		store_upload_abort(sink.u);
		if (sink.code) {
			e->code = sink.code;
			return sink.code;
		}
		return rc;
	}
	if (!cancelled(o, e, &rc))
		rc = put_unpacked(s, step, leaf, &sink,
				  r->stats.bytes_unpacked, e);
	if (rc) {
		ckpt_local_abort(&sink.local);
		store_upload_abort(sink.u);
		return rc;
	}
	rc = store_upload_finish(sink.u, &done, e);
	if (rc)
		ckpt_local_abort(&sink.local);
	else
		ckpt_local_finish(&sink.local);
	if (rc == CLOUD_EPRECONDITION) {
		return err_set(e, CLOUD_EPRECONDITION,
			       "another save of %s finished while this one "
			       "ran; this one was dropped",
			       store_url(s, obj));
	}
	if (rc)
		return rc;
	r->bytes = done.size;
	r->crc32c = done.crc32c;
	store_object_release(&done);
	log_debug("saved %s: %llu bytes", store_url(s, obj),
		  (unsigned long long)r->bytes);
	if (cancelled(o, e, &rc) || !o->commit)
		return rc;
	return ckpt_commit(s, step, o->parts_expected, &r->committed, e);
}

struct part_list {
	struct ckpt_part *v;
	size_t n, cap;
	char **tags;        /* leaves of the parts' unpacked-size objects */
	size_t ntags;
	char **marks;       /* leaves of abandoned-part markers */
	size_t nmarks;
	struct ckpt_part *fast; /* fast-tier records, as parts */
	size_t nfast;
	struct err *e;
};

static int add_leaf(struct part_list *l, char ***v, size_t *n,
		    const char *leaf)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return err_set(l->e, CKPT_ENOMEM, "out of memory");
	*v = nv;
	nv[*n] = strdup(leaf);
	if (!nv[*n])
		return err_set(l->e, CKPT_ENOMEM, "out of memory");
	(*n)++;
	return 0;
}

static int add_fast(struct part_list *l, const char *leaf, int64_t gen)
{
	struct ckpt_part p, *nv;

	if (!ckpt_fast_parse_leaf(leaf, gen, &p))
		return 0; /* not ours to judge: never a part */
	nv = realloc(l->fast, (l->nfast + 1) * sizeof(*nv));
	if (!nv) {
		free(p.name);
		return err_set(l->e, CKPT_ENOMEM, "out of memory");
	}
	l->fast = nv;
	l->fast[l->nfast++] = p;
	return 0;
}

static int part_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	struct part_list *l = ud;
	const char *leaf = strrchr(o->name, '/');
	struct ckpt_part *p;

	if (is_prefix || !leaf)
		return 0;
	if (strstr(leaf + 1, CKPT_PART_SUFFIX CKPT_UNPACKED_TAG))
		return add_leaf(l, &l->tags, &l->ntags, leaf + 1);
	if (strstr(leaf + 1, CKPT_PART_SUFFIX CKPT_ABANDONED_TAG))
		return add_leaf(l, &l->marks, &l->nmarks, leaf + 1);
	if (strstr(leaf + 1, CKPT_PART_SUFFIX CKPT_FAST_TAG))
		return add_fast(l, leaf + 1, o->generation);
	if (!ckpt_is_part_leaf(leaf + 1))
		return 0;
	if (l->n == l->cap) {
		size_t nc = l->cap ? 2 * l->cap : 8;
		struct ckpt_part *nv = realloc(l->v, nc * sizeof(*nv));

		if (!nv)
			return err_set(l->e, CKPT_ENOMEM, "out of memory");
		l->v = nv;
		l->cap = nc;
	}
	p = &l->v[l->n];
	memset(p, 0, sizeof(*p));
	p->name = strdup(leaf + 1);
	if (!p->name)
		return err_set(l->e, CKPT_ENOMEM, "out of memory");
	p->size = o->size;
	p->crc32c = o->crc32c;
	p->generation = o->generation;
	p->unpacked = 0;
	l->n++;
	return 0;
}

static void free_leaves(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void part_list_release(struct part_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	free_leaves(l->tags, l->ntags);
	free_leaves(l->marks, l->nmarks);
	for (size_t i = 0; i < l->nfast; i++)
		free(l->fast[i].name);
	free(l->fast);
}

/* Whether a marker in marks voids this version of part p. */
static bool abandoned(const struct ckpt_part *p, char *const *marks,
		      size_t n)
{
	char leaf[CKPT_UNPACKED_LEAF_MAX];

	ckpt_abandoned_leaf(leaf, sizeof(leaf), p->name, p->generation);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(marks[i], leaf))
			return true;
	return false;
}

/* Leaves out of l the parts a newer generation abandoned. */
static void drop_abandoned(struct part_list *l, uint64_t step)
{
	size_t k = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (abandoned(&l->v[i], l->marks, l->nmarks)) {
			log_info("step %llu: %s (generation %lld) was "
				 "abandoned by a newer generation; it is not "
				 "committed", (unsigned long long)step,
				 l->v[i].name, (long long)l->v[i].generation);
			free(l->v[i].name);
			continue;
		}
		l->v[k++] = l->v[i];
	}
	l->n = k;
}

/* After COMMIT (made) is written: a part it names that a newer
 * generation abandoned meanwhile may be deleted already, so COMMIT is
 * withdrawn. *committed tells what stands. A failed look keeps COMMIT:
 * a restore that finds a part missing falls back to the step before. */
static int confirm_commit(struct store *s, uint64_t step, const char *dir,
			  const char *commit, const struct store_object *made,
			  const struct part_list *named, bool *committed)
{
	struct part_list now = { .e = NULL };
	const char *lost = NULL;
	struct err e;
	int r;

	*committed = true;
	err_init(&e);
	now.e = &e;
	r = store_list(s, dir, "/", part_cb, &now, &e);
	if (r) {
		log_warn("step %llu: committed, but its parts could not be "
			 "listed again: %s", (unsigned long long)step, e.msg);
		part_list_release(&now);
		return 0;
	}
	for (size_t i = 0; !lost && i < named->n; i++)
		if (abandoned(&named->v[i], now.marks, now.nmarks))
			lost = named->v[i].name;
	if (lost) {
		log_warn("step %llu: %s was abandoned by a newer generation "
			 "while the step was committed; COMMIT withdrawn",
			 (unsigned long long)step, lost);
		r = store_delete(s, commit, made->generation, &e);
		if (r && r != CLOUD_ENOTFOUND && r != CLOUD_EPRECONDITION)
			log_warn("withdrawing %s: %s", store_url(s, commit),
				 e.msg);
		*committed = false;
	}
	part_list_release(&now);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct ckpt_part *)a)->name,
		      ((const struct ckpt_part *)b)->name);
}

/* A fast-tier step whose every part has its record: FAST, create-only.
 * Two records of one part that differ (two saves of it, not a retry)
 * leave the step uncommitted: which copy the holders have is unknown. */
static int commit_fast(struct store *s, uint64_t step, struct part_list *l,
		       unsigned parts_expected, bool *committed,
		       struct err *e)
{
	char name[CKPT_NAME_MAX];
	char *json;
	int r;

	qsort(l->fast, l->nfast, sizeof(*l->fast), by_name);
	for (size_t i = 1; i < l->nfast; i++)
		if (!strcmp(l->fast[i].name, l->fast[i - 1].name)) {
			log_warn("step %llu: %s has two fast-tier records; the "
				 "step is not committed",
				 (unsigned long long)step, l->fast[i].name);
			return 0;
		}
	if (l->nfast < parts_expected) {
		log_info("step %llu has %zu of %u fast-tier parts; it is "
			 "committed once all are kept", (unsigned long long)step,
			 l->nfast, parts_expected);
		return 0;
	}
	json = ckpt_commit_json(step, l->fast, l->nfast);
	if (!json)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	ckpt_object_name(name, sizeof(name), step, CKPT_FAST);
	r = store_put(s, name, json, strlen(json), STORE_CREATE_ONLY, NULL, e);
	free(json);
	if (r == CLOUD_EPRECONDITION) {
		err_init(e);
		r = 0;
	}
	if (!r) {
		*committed = true;
		log_info("step %llu is committed on the fast tiers (%zu parts, "
			 "none in the bucket)", (unsigned long long)step,
			 l->nfast);
	}
	return r;
}

int ckpt_commit(struct store *s, uint64_t step, unsigned parts_expected,
		bool *committed, struct err *e)
{
	char commit[CKPT_NAME_MAX], dir[CKPT_NAME_MAX];
	struct part_list parts = { .e = e };
	struct store_object o;
	char *json;
	int r;

	err_init(e);
	*committed = false;
	if (!s)
		return err_set(e, CKPT_EINVAL, "ckpt_commit needs a store");
	if (!parts_expected)
		parts_expected = 1;
	ckpt_object_name(commit, sizeof(commit), step, CKPT_COMMIT);
	ckpt_object_name(dir, sizeof(dir), step, "");
	r = ckpt_has_commit(s, step, committed, e);
	if (r || *committed)
		return r;
	r = store_list(s, dir, "/", part_cb, &parts, e);
	if (!r)
		drop_abandoned(&parts, step);
	if (!r && parts.nfast && parts.n < parts_expected) {
		r = commit_fast(s, step, &parts, parts_expected, committed, e);
	} else if (!r && parts.n < parts_expected) {
		log_info("step %llu has %zu of %u parts; it is committed "
			 "once all are saved", (unsigned long long)step,
			 parts.n, parts_expected);
	} else if (!r) {
		for (size_t i = 0; i < parts.n; i++)
			ckpt_find_unpacked(&parts.v[i], parts.tags,
					   parts.ntags);
		json = ckpt_commit_json(step, parts.v, parts.n);
		if (!json) {
			r = err_set(e, CKPT_ENOMEM, "out of memory");
		} else {
			r = store_put(s, commit, json, strlen(json),
				      STORE_CREATE_ONLY, &o, e);
			free(json);
		}
		if (!r) {
			r = confirm_commit(s, step, dir, commit, &o, &parts,
					   committed);
			store_object_release(&o);
		} else if (r == CLOUD_EPRECONDITION) {
			/* Another host committed first: the same outcome. */
			err_init(e);
			r = 0;
			*committed = true;
		}
	}
	part_list_release(&parts);
	return r;
}
