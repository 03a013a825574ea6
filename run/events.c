/*
 * run/events.c: the run's history, events/ (run.h).
 *
 * A supervisor's events go through its writer (struct events_writer,
 * which it opens and passes to whatever records them; nothing of it is
 * process-wide, so two writers in one process are two): one thread, to
 * which event_record only queues (and appends the event to a spool file,
 * so a store outage or a crash loses nothing), and which writes
 * everything queued as one object at most once a second. The object's
 * sequence number is the Unix second of its write, so a writer restarted
 * within a second, or a late batch, never reuses a name: a create-only
 * refusal moves it one on.
 * Other processes (slicectl restart, stop; the local provider) record
 * few events and write each at once.
 */
#include "run/run.h"

#include "cloud/cloud.h"
#include "run/events_read.h"
#include "run/spec_util.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One object holds a writer's events of about a second; generous. */
#define EVENTS_OBJECT_MAX ((size_t)4 << 20)
/* Attempts at a free name when a writer's seconds are taken. */
#define NAME_TRIES 16
/* The writer's pause between writes, and the longest after failures. */
#define TICK_MS 1000
#define RETRY_MAX_MS 30000

bool event_forensics(const struct event *ev, char *name, size_t cap)
{
	json_t *d = strcmp(ev->kind, "hang") || !*ev->details
			    ? NULL
			    : json_loads(ev->details, 0, NULL);
	const char *v = json_string_value(json_object_get(d, "forensics"));
	bool ok = v && !strncmp(v, "forensics/", 10) && !strstr(v, "..") &&
		  strlen(v) < cap;

	if (ok)
		snprintf(name, cap, "%s", v);
	json_decref(d);
	return ok;
}

void event_init(struct event *ev, const char *kind, int64_t generation,
		const char *worker)
{
	struct timespec ts;
	struct tm tm;
	char when[128];

	memset(ev, 0, sizeof(*ev));
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 ts.tv_nsec / 1000000);
	spec_copy_text(ev->time, sizeof(ev->time), when);
	spec_copy_text(ev->kind, sizeof(ev->kind), kind);
	spec_copy_text(ev->worker, sizeof(ev->worker), worker);
	ev->generation = generation;
	ev->step = -1;
}

/* ---- one event as JSON, and back ---- */

static json_t *event_json(const struct event *ev)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "time",
			      ev->time, "kind", ev->kind, "generation",
			      (json_int_t)ev->generation, "worker", ev->worker,
			      "cause", ev->cause, "by", ev->by);
	json_t *d = *ev->details ? json_loads(ev->details, 0, NULL) : NULL;

	if (!o) {
		json_decref(d);
		return NULL;
	}
	json_object_set_new(o, "step", ev->step >= 0
					       ? json_integer(ev->step)
					       : json_null());
	json_object_set_new(o, "details", d ? d : json_object());
	return o;
}

static void text_member(json_t *o, const char *key, char *dst, size_t cap)
{
	json_t *v = json_object_get(o, key);

	spec_copy_text(dst, cap, json_is_string(v) ? json_string_value(v)
						    : "");
}

/* 0, or -1 when o is not an event. */
static int event_parse(json_t *o, struct event *ev)
{
	json_t *gen = json_object_get(o, "generation");
	json_t *step = json_object_get(o, "step");
	json_t *d = json_object_get(o, "details");
	char *text;

	if (!json_is_object(o) || !json_is_string(json_object_get(o, "time")) ||
	    !json_is_string(json_object_get(o, "kind")))
		return -1;
	memset(ev, 0, sizeof(*ev));
	text_member(o, "time", ev->time, sizeof(ev->time));
	text_member(o, "kind", ev->kind, sizeof(ev->kind));
	text_member(o, "worker", ev->worker, sizeof(ev->worker));
	text_member(o, "cause", ev->cause, sizeof(ev->cause));
	text_member(o, "by", ev->by, sizeof(ev->by));
	ev->generation = json_is_integer(gen) ? json_integer_value(gen) : 0;
	ev->step = json_is_integer(step) ? json_integer_value(step) : -1;
	if (json_is_object(d) && json_object_size(d) &&
	    (text = json_dumps(d, JSON_COMPACT))) {
		if (strlen(text) < sizeof(ev->details))
			memcpy(ev->details, text, strlen(text) + 1);
		free(text);
	}
	return 0;
}

/* {"writer": W, "events": [...]} of v[0..n), compact (*out malloc'd). */
static int batch_text(const char *writer, const struct event *v, size_t n,
		      char **out)
{
	json_t *a = json_array(), *root;

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, event_json(&v[i]))) {
			json_decref(a);
			a = NULL;
		}
	root = a ? json_pack("{s:s, s:o}", "writer", writer, "events", a)
		 : NULL;
	*out = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return *out ? 0 : -1;
}

/* Writes v[0..n) as one new object for writer: the first free name at or
 * after second *seq (which is left at the name used). */
static int write_batch(struct store *s, const char *writer,
		       const struct event *v, size_t n, int64_t *seq,
		       struct err *e)
{
	char name[160], *text;
	int r = CLOUD_EPRECONDITION;

	if (batch_text(writer, v, n, &text))
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	for (int t = 0; t < NAME_TRIES && r == CLOUD_EPRECONDITION; t++) {
		if (t)
			++*seq;
		snprintf(name, sizeof(name),
			 EVENTS_PREFIX "%06lld-%010lld-%s.json",
			 (long long)v[0].generation, (long long)*seq, writer);
		err_init(e);
		r = store_put(s, name, text, strlen(text), STORE_CREATE_ONLY,
			      NULL, e);
	}
	free(text);
	return r;
}

/* ---- a writer: its thread, queue and spool ---- */

struct events_writer {
	struct store *store;
	char name[64];
	char spool[1100];        /* the spool file, "" none */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct event *q;         /* queued, oldest first */
	size_t nq, capq;
	int64_t last_seq;        /* second of the last object written */
	uint64_t flush_by_ms;    /* events_writer_stop's deadline, 0
				    running */
	bool stopping;
	bool failing;            /* the last write failed (said once) */
};

static int queue_push(struct events_writer *w, const struct event *ev)
{
	if (w->nq == w->capq) {
		size_t cap = w->capq ? 2 * w->capq : 16;
		struct event *q = realloc(w->q, cap * sizeof(*q));

		if (!q)
			return -1;
		w->q = q;
		w->capq = cap;
	}
	w->q[w->nq++] = *ev;
	return 0;
}

static void spool_append(const char *path, const struct event *ev)
{
	json_t *o = event_json(ev);
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	FILE *f = line ? fopen(path, "ae") : NULL;

	if (f) {
		fprintf(f, "%s\n", line);
		fclose(f);
	}
	free(line);
	json_decref(o);
}

/* The spool holds exactly the queue (after a write took some of it). */
static void spool_rewrite(struct events_writer *w)
{
	struct buf b;
	bool ok = true;

	buf_init(&b);
	for (size_t i = 0; i < w->nq && ok; i++) {
		json_t *o = event_json(&w->q[i]);
		char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;

		if (line)
			ok = !buf_appendf(&b, "%s\n", line);
		free(line);
		json_decref(o);
	}
	/* Best effort, as appending is: the old spool stays on failure. */
	if (ok)
		fs_write_atomic(w->spool, b.data ? b.data : "", b.len, 0666,
				true, NULL);
	buf_release(&b);
}

/* What an earlier process of this worker could not write. */
static void spool_load(struct events_writer *w)
{
	FILE *f = fopen(w->spool, "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		json_t *o = json_loads(line, 0, NULL);
		struct event ev;

		if (o && !event_parse(o, &ev))
			queue_push(w, &ev);
		json_decref(o);
	}
	free(line);
	fclose(f);
	if (w->nq)
		log_info("%zu events of an earlier run of this worker are "
			 "still to be written", w->nq);
}

static void wait_ms(struct events_writer *w, uint64_t ms)
{
	mono_cond_wait_until(&w->cv, &w->mu, mono_ms() + ms);
}

/* One write of everything queued (called with mu held; drops it while
 * writing). */
static int flush_once(struct events_writer *w)
{
	size_t n = w->nq;
	struct event *v = n ? malloc(n * sizeof(*v)) : NULL;
	int64_t seq = (int64_t)time(NULL);
	struct err e;
	int r;

	if (!n)
		return 0;
	if (!v)
		return -1;
	memcpy(v, w->q, n * sizeof(*v));
	if (seq <= w->last_seq)
		seq = w->last_seq + 1;
	pthread_mutex_unlock(&w->mu);
	r = write_batch(w->store, w->name, v, n, &seq, &e);
	pthread_mutex_lock(&w->mu);
	free(v);
	if (r) {
		if (!w->failing)
			log_warn("events not written yet (kept in %s, "
				 "retrying): %s", *w->spool ? w->spool
							     : "memory",
				 e.msg);
		w->failing = true;
		return r;
	}
	if (w->failing)
		log_info("events written again");
	w->failing = false;
	w->last_seq = seq;
	memmove(w->q, w->q + n, (w->nq - n) * sizeof(*w->q));
	w->nq -= n;
	if (*w->spool)
		spool_rewrite(w);
	return 0;
}

static void *writer_main(void *arg)
{
	struct events_writer *w = arg;
	uint64_t pause = TICK_MS;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		if (w->stopping && (!w->nq || mono_ms() >= w->flush_by_ms))
			break;
		if (!w->stopping)
			wait_ms(w, pause);
		if (!w->nq)
			continue;
		if (flush_once(w)) {
			pause = 2 * pause < RETRY_MAX_MS ? 2 * pause
							 : RETRY_MAX_MS;
			if (w->stopping)
				wait_ms(w, TICK_MS);
		} else {
			pause = TICK_MS;
			/* At most one object a second. */
			if (w->stopping && w->nq)
				wait_ms(w, TICK_MS);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int events_writer_start(struct events_writer **out, const char *run_url,
			const char *writer, const char *spool_dir,
			struct err *e)
{
	struct events_writer *w = calloc(1, sizeof(*w));
	bool cv_ok;
	int r;

	err_init(e);
	*out = NULL;
	if (!w)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	r = store_open(&w->store, run_url, e);
	if (r) {
		free(w);
		return r;
	}
	spec_copy_text(w->name, sizeof(w->name), writer);
	if (spool_dir)
		snprintf(w->spool, sizeof(w->spool), "%s/events.spool",
			 spool_dir);
	pthread_mutex_init(&w->mu, NULL);
	cv_ok = !mono_cond_init(&w->cv);
	if (cv_ok && *w->spool)
		spool_load(w);
	if (!cv_ok || thread_start(&w->thread, writer_main, w)) {
		if (cv_ok)
			pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		store_close(w->store);
		free(w->q);
		free(w);
		return err_set(e, COMMON_EIO, "cannot start the events "
			       "writer");
	}
	*out = w;
	return 0;
}

void events_writer_stop(struct events_writer *w, uint64_t deadline_ms)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	w->flush_by_ms = deadline_ms;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	if (w->nq)
		log_warn("%zu events not written (the store did not answer); "
			 "the next start of this worker writes them", w->nq);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	store_close(w->store);
	free(w->q);
	free(w);
}

int event_record(struct events_writer *w, struct store *s,
		 const struct event *ev, struct err *e)
{
	int64_t seq = (int64_t)time(NULL);
	int r = 0;

	err_init(e);
	if (w) {
		pthread_mutex_lock(&w->mu);
		if (queue_push(w, ev))
			r = err_set(e, CLOUD_ENOMEM, "out of memory");
		else if (*w->spool)
			spool_append(w->spool, ev);
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		return r;
	}
	if (!s)
		return err_set(e, CLOUD_EINVAL, "event_record: no store");
	return write_batch(s, *ev->worker ? ev->worker : "slicectl", ev, 1,
			   &seq, e);
}

int event_record_as(struct store *s, const char *who, const char *kind,
		    int64_t generation, const char *cause,
		    const char *details, struct err *e)
{
	struct event ev;

	event_init(&ev, kind, generation, who);
	spec_copy_text(ev.cause, sizeof(ev.cause), cause);
	spec_copy_text(ev.by, sizeof(ev.by), who);
	if (details && strlen(details) < sizeof(ev.details))
		memcpy(ev.details, details, strlen(details) + 1);
	return event_record(NULL, s, &ev, e);
}

/* ---- reading them back ---- */

/* Room for one more event in rd (the arrays grow together). */
static int reading_grow(struct events_read *rd)
{
	size_t cap = rd->cap ? 2 * rd->cap : 256;
	struct event *v;
	size_t *ord;

	if (rd->n < rd->cap)
		return 0;
	v = realloc(rd->v, cap * sizeof(*v));
	if (v)
		rd->v = v;
	ord = v ? realloc(rd->order, cap * sizeof(*ord)) : NULL;
	if (!ord)
		return -1;
	rd->order = ord;
	rd->cap = cap;
	return 0;
}

int events_read_object(struct store *s, const char *name,
		       struct events_read *rd, struct err *e)
{
	char *data;
	size_t len, i = 0;
	json_t *root, *a, *it;
	int rc = store_read(s, name, EVENTS_OBJECT_MAX, &data, &len, NULL, e);

	if (rc == CLOUD_ENOTFOUND) { /* deleted meanwhile */
		err_init(e);
		return 0;
	}
	if (rc)
		return rc;
	root = json_loadb(data, len, 0, NULL);
	free(data);
	a = json_object_get(root, "events");
	if (!json_is_array(a))
		log_warn("%s is not a batch of events: skipped",
			 store_url(s, name));
	json_array_foreach(a, i, it) {
		if (reading_grow(rd)) {
			json_decref(root);
			return err_set(e, CLOUD_ENOMEM, "out of memory");
		}
		/* Parsed in place: a week's history is 10^5 events of
		 * 700 bytes, and every copy of them costs. */
		if (event_parse(it, &rd->v[rd->n]))
			continue;
		rd->order[rd->n++] = rd->objects << 20 | (i & 0xfffff);
	}
	rd->objects++;
	json_decref(root);
	return 0;
}

struct listing {
	struct store *s;
	struct events_read *rd;
	struct err *e;
	int rc;
};

static int read_listed(void *ud, const struct store_object *o,
		       bool is_prefix)
{
	struct listing *l = ud;

	if (is_prefix || !strstr(o->name, ".json"))
		return 0;
	l->rc = events_read_object(l->s, o->name, l->rd, l->e);
	return l->rc != 0;
}

struct sortable {
	uint64_t key;            /* the time's digits, or UINT64_MAX */
	const struct event *ev;
	size_t order;
};

/*
 * The digits of a time as the writers stamp it ("YYYY-MM-DDTHH:MM:SS.mmmZ",
 * 17 digits) as one number, which orders as the text does: sorting a
 * week's history compared 10^6 pairs of strings with a common prefix of
 * 15 characters. Any other form gives UINT64_MAX (after every stamped
 * time, then by its text).
 */
static uint64_t time_key(const char *t)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	uint64_t k = 0;

	for (size_t i = 0; i < sizeof(shape); i++) {
		if (shape[i] == 'd') {
			if (t[i] < '0' || t[i] > '9')
				return UINT64_MAX;
			k = k * 10 + (uint64_t)(t[i] - '0');
		} else if (t[i] != shape[i]) {
			return UINT64_MAX;
		}
	}
	return k;
}

static int by_time(const void *a, const void *b)
{
	const struct sortable *x = a, *y = b;
	int c = x->key < y->key ? -1 : x->key > y->key;

	if (!c && x->key == UINT64_MAX)
		c = strcmp(x->ev->time, y->ev->time);
	if (!c)
		c = strcmp(x->ev->worker, y->ev->worker);
	if (!c)
		c = x->order < y->order ? -1 : x->order > y->order;
	return c;
}

/* Puts v in the order src gives (v[i] becomes the old v[src[i]]), moving
 * each event once and allocating nothing: a week's history is 100 MB.
 * src is spent. */
static void permute(struct event *v, size_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct event held;
		size_t j = i;

		if (src[i] == i || src[i] == SIZE_MAX)
			continue;
		held = v[i];
		while (src[j] != i) {
			size_t k = src[j];

			v[j] = v[k];
			src[j] = SIZE_MAX;
			j = k;
		}
		v[j] = held;
		src[j] = SIZE_MAX;
	}
}

int events_read_sort(struct events_read *rd, struct err *e)
{
	struct sortable *idx = rd->n ? malloc(rd->n * sizeof(*idx)) : NULL;
	size_t kept = 0;

	if (!rd->n)
		return 0;
	if (!idx)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	for (size_t i = 0; i < rd->n; i++)
		idx[i] = (struct sortable){ time_key(rd->v[i].time),
					    &rd->v[i], rd->order[i] };
	qsort(idx, rd->n, sizeof(*idx), by_time);
	for (size_t i = 0; i < rd->n; i++)
		rd->order[i] = (size_t)(idx[i].ev - rd->v);
	permute(rd->v, rd->order, rd->n);
	for (size_t i = 0; i < rd->n; i++)
		rd->order[i] = idx[i].order;
	free(idx);
	for (size_t i = 0; i < rd->n; i++)
		if (!kept || memcmp(&rd->v[kept - 1], &rd->v[i],
				    sizeof(*rd->v))) {
			if (kept != i) {
				rd->v[kept] = rd->v[i];
				rd->order[kept] = rd->order[i];
			}
			kept++;
		}
	rd->n = kept;
	return 0;
}

void events_read_release(struct events_read *rd)
{
	free(rd->v);
	free(rd->order);
	memset(rd, 0, sizeof(*rd));
}

int events_list(struct store *s, struct event **out, size_t *n,
		struct err *e)
{
	struct events_read rd = { 0 };
	struct listing l = { .s = s, .rd = &rd, .e = e };
	int r;

	err_init(e);
	*out = NULL;
	*n = 0;
	r = store_list(s, EVENTS_PREFIX, NULL, read_listed, &l, e);
	if (!r && l.rc)
		r = l.rc;
	if (r == CLOUD_ENOTFOUND) {
		err_init(e);
		r = 0;
	}
	if (!r)
		r = events_read_sort(&rd, e);
	if (!r && rd.n) {
		*out = rd.v;
		*n = rd.n;
		rd.v = NULL;
	}
	events_read_release(&rd);
	return r;
}

/* ---- following them ---- */

/* An event's identity across listings (FNV-1a of all its fields). */
static uint64_t event_hash(const struct event *ev)
{
	const unsigned char *p = (const unsigned char *)ev;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < sizeof(*ev); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int events_new(struct store *s, struct events_seen *seen, struct event **out,
	       size_t *n, struct err *e)
{
	struct event *v;
	size_t all, added = 0;
	uint64_t *grown;
	int r = events_list(s, &v, &all, e);

	*out = NULL;
	*n = 0;
	if (r)
		return r;
	grown = all ? realloc(seen->v, (seen->n + all) * sizeof(*grown))
		    : seen->v;
	if (all && !grown) {
		free(v);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	seen->v = grown;
	for (size_t i = 0; i < all; i++) {
		uint64_t h = event_hash(&v[i]);

		if (seen->n && bsearch(&h, seen->v, seen->n, sizeof(h),
				       cmp_u64))
			continue;
		seen->v[seen->n + added++] = h;
		v[(*n)++] = v[i];
	}
	seen->n += added;
	if (seen->n)
		qsort(seen->v, seen->n, sizeof(*seen->v), cmp_u64);
	if (*n)
		*out = v;
	else
		free(v);
	return 0;
}

void events_seen_release(struct events_seen *seen)
{
	free(seen->v);
	seen->v = NULL;
	seen->n = 0;
}

int64_t event_ms(const struct event *ev)
{
	time_t s = rfc3339_parse(ev->time);
	const char *dot = strchr(ev->time, '.');
	double frac = dot ? strtod(dot, NULL) : 0;

	if (s == (time_t)-1)
		return -1;
	return (int64_t)s * 1000 + (int64_t)(frac < 1 ? frac * 1000 + 0.5 : 0);
}
