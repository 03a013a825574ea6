/*
 * transfer.c: parallel composite uploads and sliced downloads (see
 * transfer.h). Each worker thread owns a gcs_client, so every piece and
 * every range travels on its own connection with the full retry policy of
 * gcs.c: a fault costs one piece's retry, never the whole transfer.
 */
#include "cloud/transfer.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Pieces of one size before it doubles (up to half the memory bound):
 * GCS allows 1024 components in a composite, which reach 50 GiB at the
 * defaults, while parts of a few hundred MiB still get small pieces and
 * so every stream. */
#define PIECES_PER_SIZE 128
#define COMPONENTS_MAX 1024
#define COMPOSE_MAX 32
/* The first piece's buffer starts this small and doubles as data comes:
 * an upload that ends within it (most objects) holds what it sends, not
 * a whole piece. */
#define FIRST_FILL ((size_t)64 << 10)

static unsigned env_unsigned(const char *name, unsigned dflt, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	n = strtoul(v, &end, 10);
	if (*end || n == 0 || n > max) {
		log_warn("%s=%s is not a number from 1 to %u; using %u", name,
			 v, max, dflt);
		return dflt;
	}
	return (unsigned)n;
}

void xfer_config_default(struct xfer_config *cfg)
{
	size_t mib = env_unsigned("SLICECTL_XFER_PIECE_MIB",
				  (unsigned)(XFER_PIECE_DEFAULT >> 20),
				  (unsigned)(XFER_MEMORY_MAX >> 21));

	cfg->streams = env_unsigned("SLICECTL_XFER_STREAMS",
				    XFER_STREAMS_DEFAULT, 64);
	cfg->piece = mib << 20;
	/* The filling piece and one per stream must fit the bound. */
	if ((cfg->streams + 1) * cfg->piece > XFER_MEMORY_MAX)
		cfg->streams = (unsigned)(XFER_MEMORY_MAX / cfg->piece) - 1;
}

/* ---- worker clients */

struct pool {
	struct gcs_client *parent;
	struct gcs_client *wc;
	unsigned n;
	pthread_mutex_t auth_mu; /* the parent's tokens, lent to all */
	atomic_bool abort; /* a failure or the caller's cancel: stop now */
};

static bool pool_cancelled(void *ud)
{
	struct pool *p = ud;
	struct http_client *h = &p->parent->http;

	return atomic_load(&p->abort) || (h->cancelled &&
					  h->cancelled(h->cancel_ud));
}

static int pool_open(struct pool *p, struct gcs_client *parent, unsigned n,
		     struct err *e)
{
	int rc = 0;

	/* Jansson seeds its hash function on first use; its documentation
	 * asks threaded programs to have that done before the threads. */
	json_object_seed(0);
	p->parent = parent;
	p->n = 0;
	atomic_init(&p->abort, false);
	pthread_mutex_init(&p->auth_mu, NULL);
	p->wc = calloc(n, sizeof(*p->wc));
	if (!p->wc)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	while (p->n < n && !rc) {
		rc = gcs_client_init_worker(&p->wc[p->n], parent, &p->auth_mu,
					    e);
		if (!rc) {
			p->wc[p->n].http.cancelled = pool_cancelled;
			p->wc[p->n].http.cancel_ud = p;
			p->n++;
		}
	}
	return rc;
}

static void pool_close(struct pool *p)
{
	for (unsigned i = 0; i < p->n; i++)
		gcs_client_release(&p->wc[i]);
	free(p->wc);
	p->wc = NULL;
	p->n = 0;
	pthread_mutex_destroy(&p->auth_mu);
}

struct pool_job {
	void *ud;
	struct gcs_client *c;
};

struct threads {
	pthread_t *th;
	struct pool_job *jobs;
	unsigned n;
};

/* Starts fn on one thread per client of p, each given a struct pool_job.
 * On failure those started run on: the caller stops them and joins them
 * (pool_join) as it would have anyway. */
static int pool_start(struct pool *p, struct threads *t, void *(*fn)(void *),
		      void *ud, struct err *e)
{
	t->n = 0;
	t->th = calloc(p->n, sizeof(*t->th));
	t->jobs = calloc(p->n, sizeof(*t->jobs));
	if (!t->th || !t->jobs) {
		free(t->th);
		free(t->jobs);
		t->th = NULL;
		t->jobs = NULL;
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	for (; t->n < p->n; t->n++) {
		t->jobs[t->n].ud = ud;
		t->jobs[t->n].c = &p->wc[t->n];
		if (thread_start(&t->th[t->n], fn, &t->jobs[t->n]))
			return err_set(e, CLOUD_ENOMEM, "cannot start a "
				       "transfer thread");
	}
	return 0;
}

static void pool_join(struct threads *t)
{
	for (unsigned i = 0; i < t->n; i++)
		pthread_join(t->th[i], NULL);
	free(t->th);
	free(t->jobs);
	t->th = NULL;
	t->jobs = NULL;
	t->n = 0;
}

/* ---- uploads */

struct piece {
	struct piece *next;
	const char *name; /* in temps */
	char *data;
	size_t len, cap;
};

struct xfer_upload {
	struct gcs_client *c;
	char *bucket, *name;
	int64_t if_gen;
	struct xfer_config cfg;
	char nonce[17];
	/* The session the upload goes to while it fits in one piece (all
	 * along with one stream): started at once, as a single-stream
	 * upload always was, so that its faults come where they always
	 * came; cancelled when the pieces start. */
	struct gcs_upload single;
	bool has_single;
	bool passthrough;         /* streams == 1: writes go straight to it */
	char *fill;               /* the piece being written */
	size_t fill_len, fill_cap;
	uint64_t total;
	uint32_t crc;
	bool parallel;
	struct pool pool;
	struct threads threads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct piece *head, *tail; /* full pieces waiting for a worker */
	size_t inflight;          /* bytes of pieces queued or being sent */
	bool closing;
	int rc;                   /* the first worker's failure, and why */
	struct err err;
	struct strlist temps;     /* every temporary object, pieces first */
};

/* Piece k's size: doubling every PIECES_PER_SIZE pieces keeps a large
 * part within the component limit; fewer fit in memory at once then. */
static size_t piece_size(const struct xfer_upload *u, size_t k)
{
	unsigned shift = (unsigned)(k / PIECES_PER_SIZE);
	size_t max = XFER_MEMORY_MAX / 2;

	if (shift > 8 || u->cfg.piece > (max >> shift))
		return max;
	return u->cfg.piece << shift;
}

static int push_temp(struct xfer_upload *u, const char *kind, size_t k,
		     const char **name, struct err *e)
{
	struct buf b;
	int rc;

	buf_init(&b);
	if (buf_appendf(&b, "%s" STORE_PIECE_MARK "%s.%s%zu", u->name,
			u->nonce, kind, k)) {
		buf_release(&b);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	/* Under the same lock as the workers' reads of the list. */
	pthread_mutex_lock(&u->mu);
	rc = strlist_push(&u->temps, b.data);
	if (!rc)
		*name = u->temps.v[u->temps.n - 1];
	pthread_mutex_unlock(&u->mu);
	buf_release(&b);
	return rc ? err_set(e, CLOUD_ENOMEM, "out of memory") : 0;
}

static void fail_locked(struct xfer_upload *u, int rc, const struct err *e)
{
	if (u->rc)
		return;
	u->rc = rc;
	u->err = *e;
	atomic_store(&u->pool.abort, true);
	pthread_cond_broadcast(&u->cv);
}

static void *upload_worker(void *arg)
{
	struct pool_job *j = arg;
	struct xfer_upload *u = j->ud;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		struct piece *p;
		struct err e;
		int rc;

		while (!u->head && !u->closing && !u->rc)
			pthread_cond_wait(&u->cv, &u->mu);
		if (u->rc || !u->head)
			break;
		p = u->head;
		u->head = p->next;
		if (!u->head)
			u->tail = NULL;
		pthread_mutex_unlock(&u->mu);
		err_init(&e);
		rc = gcs_put(j->c, u->bucket, p->name, p->data, p->len,
			     STORE_CREATE_ONLY, NULL, &e);
		pthread_mutex_lock(&u->mu);
		u->inflight -= p->cap;
		if (rc)
			fail_locked(u, rc, &e);
		free(p->data);
		free(p);
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

static int go_parallel(struct xfer_upload *u, struct err *e)
{
	int rc;

	u->parallel = true;
	rc = pool_open(&u->pool, u->c, u->cfg.streams, e);
	if (!rc)
		rc = pool_start(&u->pool, &u->threads, upload_worker, u, e);
	if (!rc)
		log_debug("gcs: uploading gs://%s/%s in pieces of %zu bytes on "
			  "%u connections", u->bucket, u->name, u->cfg.piece,
			  u->cfg.streams);
	return rc;
}

/* A worker's failure, which ends the upload: no more packing for it. */
static int worker_failure(struct xfer_upload *u, struct err *e)
{
	int rc;

	pthread_mutex_lock(&u->mu);
	rc = u->rc;
	if (rc)
		*e = u->err;
	pthread_mutex_unlock(&u->mu);
	return rc;
}

/* Queues the filled piece for a worker. */
static int submit(struct xfer_upload *u, struct err *e)
{
	struct piece *p;
	size_t k = u->temps.n;
	int rc;

	if (u->parallel && (rc = worker_failure(u, e)))
		return rc;
	if (k == COMPONENTS_MAX)
		return err_set(e, CLOUD_EINVAL,
			       "uploading gs://%s/%s: more than %d pieces "
			       "(%" PRIu64 " bytes); set SLICECTL_XFER_PIECE_MIB "
			       "higher", u->bucket, u->name, COMPONENTS_MAX,
			       u->total);
	if (!u->parallel) {
		gcs_upload_release(&u->single);
		u->has_single = false;
		rc = go_parallel(u, e);
		if (rc)
			return rc;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	rc = push_temp(u, "", k, &p->name, e);
	if (rc) {
		free(p);
		return rc;
	}
	p->data = u->fill;
	p->len = u->fill_len;
	p->cap = u->fill_cap;
	u->fill = NULL;
	u->fill_len = u->fill_cap = 0;
	pthread_mutex_lock(&u->mu);
	u->inflight += p->cap;
	if (u->tail)
		u->tail->next = p;
	else
		u->head = p;
	u->tail = p;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return 0;
}

/* A buffer for the next piece, once the memory bound allows it; for the
 * first, a small one that grow_fill doubles. */
static int next_fill(struct xfer_upload *u, struct err *e)
{
	size_t cap = piece_size(u, u->temps.n);
	int rc = 0;

	if (!u->parallel && cap > FIRST_FILL)
		cap = FIRST_FILL;

	if (u->parallel) {
		pthread_mutex_lock(&u->mu);
		while (!u->rc && u->inflight &&
		       u->inflight + cap > XFER_MEMORY_MAX)
			pthread_cond_wait(&u->cv, &u->mu);
		pthread_mutex_unlock(&u->mu);
		rc = worker_failure(u, e);
		if (rc)
			return rc;
	}
	u->fill = malloc(cap);
	if (!u->fill)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	u->fill_cap = cap;
	u->fill_len = 0;
	return 0;
}

int xfer_upload_begin(struct gcs_client *c, const char *bucket,
		      const char *name, int64_t if_generation_match,
		      const struct xfer_config *cfg, struct xfer_upload **out,
		      struct err *e)
{
	struct xfer_upload *u = calloc(1, sizeof(*u));
	uint64_t r = mono_us() ^ ((uint64_t)(uintptr_t)u << 16);
	int rc;

	*out = NULL;
	if (!u)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	u->c = c;
	u->if_gen = if_generation_match;
	u->cfg = *cfg;
	strlist_init(&u->temps);
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	/* Only this upload writes names with its nonce: a create-only
	 * write that finds one there finds its own earlier attempt. */
	r *= 0x9e3779b97f4a7c15ull;
	snprintf(u->nonce, sizeof(u->nonce), "%016" PRIx64, r);
	u->bucket = strdup(bucket);
	u->name = strdup(name);
	if (!u->bucket || !u->name) {
		xfer_upload_abort(u);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	rc = gcs_upload_begin(c, bucket, name, if_generation_match, 0,
			      &u->single, e);
	if (rc) {
		xfer_upload_abort(u);
		return rc;
	}
	u->has_single = true;
	u->passthrough = cfg->streams <= 1;
	*out = u;
	return 0;
}

static int grow_fill(struct xfer_upload *u, size_t max, struct err *e)
{
	size_t cap = u->fill_cap * 2 < max ? u->fill_cap * 2 : max;
	char *p = realloc(u->fill, cap);

	if (!p)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	u->fill = p;
	u->fill_cap = cap;
	return 0;
}

int xfer_upload_write(struct xfer_upload *u, const void *data, size_t len,
		      struct err *e)
{
	const char *p = data;
	int rc = 0;

	if (u->passthrough)
		return gcs_upload_write(&u->single, data, len, e);
	while (len && !rc) {
		size_t n, max = piece_size(u, u->temps.n);

		/* A full piece is sent only once more data comes: an upload
		 * that ends within its first piece stays one stream. */
		if (u->fill && u->fill_len == u->fill_cap)
			rc = u->fill_cap < max ? grow_fill(u, max, e)
					       : submit(u, e);
		if (!rc && !u->fill)
			rc = next_fill(u, e);
		if (rc)
			break;
		n = u->fill_cap - u->fill_len;
		if (n > len)
			n = len;
		memcpy(u->fill + u->fill_len, p, n);
		u->crc = crc32c_update(u->crc, p, n);
		u->fill_len += n;
		u->total += n;
		p += n;
		len -= n;
	}
	return rc;
}

/* A create-only write that found its name taken after a retry found its
 * own first attempt (the nonce makes the name ours alone). */
static int compose_temp(struct xfer_upload *u, const char *dest,
			const char *const *src, size_t n, struct err *e)
{
	int rc = gcs_compose(u->c, u->bucket, dest, src, n, STORE_CREATE_ONLY,
			     NULL, e);

	if (rc == CLOUD_EPRECONDITION) {
		err_init(e);
		rc = 0;
	}
	return rc;
}

/* Joins the pieces into the object, by rounds of at most COMPOSE_MAX
 * sources, and checks the result against the bytes written. */
static int compose_all(struct xfer_upload *u, struct store_object *out,
		       struct err *e)
{
	size_t n = u->temps.n, round = 0;
	const char **cur = malloc(n * sizeof(*cur));
	struct store_object o;
	int rc = 0;

	if (!cur)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	memcpy(cur, u->temps.v, n * sizeof(*cur));
	while (!rc && n > COMPOSE_MAX) {
		size_t m = 0;
		char kind[24];

		snprintf(kind, sizeof(kind), "c%zu-", round++);
		for (size_t i = 0; !rc && i < n; i += COMPOSE_MAX, m++) {
			size_t k = n - i < COMPOSE_MAX ? n - i : COMPOSE_MAX;
			const char *dest;

			rc = push_temp(u, kind, m, &dest, e);
			if (!rc)
				rc = compose_temp(u, dest, cur + i, k, e);
			cur[m] = dest;
		}
		n = m;
	}
	if (!rc)
		rc = gcs_compose(u->c, u->bucket, u->name, cur, n, u->if_gen,
				 &o, e);
	/* The compose may have landed with its answer lost. */
	if (rc == CLOUD_EPRECONDITION &&
	    gcs_landed(u->c, u->bucket, u->name, u->total, u->crc, &o)) {
		err_init(e);
		rc = 0;
	}
	free(cur);
	if (rc)
		return rc;
	return gcs_written_as(&o, u->total, u->crc, u->bucket, u->name, out,
			      e);
}

static void *delete_worker(void *arg)
{
	struct pool_job *j = arg;
	struct xfer_upload *u = j->ud;

	for (;;) {
		const char *name = NULL;
		struct err e;
		int rc;

		pthread_mutex_lock(&u->mu);
		if (u->temps.n)
			name = u->temps.v[--u->temps.n];
		pthread_mutex_unlock(&u->mu);
		if (!name)
			break;
		err_init(&e);
		rc = gcs_delete_own(j->c, u->bucket, name, &e);
		if (rc)
			log_warn("%s; `slicectl ckpt prune` removes it later",
				 e.msg);
		free((char *)name);
	}
	return NULL;
}

/* Stops the workers, drops what they did not send and deletes every
 * temporary object (gone already is fine: a piece may never have come). */
static void wind_up(struct xfer_upload *u)
{
	struct err e;

	if (!u->parallel)
		return;
	pthread_mutex_lock(&u->mu);
	u->closing = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pool_join(&u->threads);
	while (u->head) {
		struct piece *p = u->head;

		u->head = p->next;
		free(p->data);
		free(p);
	}
	u->tail = NULL;
	atomic_store(&u->pool.abort, false);
	err_init(&e);
	if (u->temps.n && pool_start(&u->pool, &u->threads, delete_worker, u,
				     &e))
		log_warn("%s", e.msg);
	/* A thread that could not start leaves its share to the others. */
	pool_join(&u->threads);
	if (u->temps.n)
		log_warn("gs://%s/%s: %zu temporary pieces left; `slicectl "
			 "ckpt prune` removes them", u->bucket, u->name,
			 u->temps.n);
	pool_close(&u->pool);
	u->parallel = false;
}

static void upload_free(struct xfer_upload *u)
{
	if (u->has_single)
		gcs_upload_release(&u->single);
	strlist_release(&u->temps);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u->fill);
	free(u->bucket);
	free(u->name);
	free(u);
}

int xfer_upload_finish(struct xfer_upload *u, struct store_object *out,
		       struct err *e)
{
	int rc = 0;

	if (!u->parallel) {
		if (!u->passthrough)
			rc = gcs_upload_write(&u->single, u->fill, u->fill_len,
					      e);
		if (!rc)
			rc = gcs_upload_finish(&u->single, out, e);
	} else {
		if (u->fill_len)
			rc = submit(u, e);
		pthread_mutex_lock(&u->mu);
		u->closing = true;
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->mu);
		pool_join(&u->threads);
		if (!rc && u->rc) {
			rc = u->rc;
			*e = u->err;
		}
		if (!rc)
			rc = compose_all(u, out, e);
		wind_up(u);
	}
	upload_free(u);
	return rc;
}

void xfer_upload_abort(struct xfer_upload *u)
{
	if (!u)
		return;
	if (u->parallel) {
		pthread_mutex_lock(&u->mu);
		atomic_store(&u->pool.abort, true);
		pthread_mutex_unlock(&u->mu);
	}
	wind_up(u);
	upload_free(u);
}

/* ---- downloads */

struct slot {
	char *buf;
	size_t len;
	bool ready;
};

struct ranges {
	const char *bucket;
	const struct store_object *meta;
	size_t piece, npieces;
	unsigned nslots;
	struct slot *slots;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t next;      /* the next piece a worker takes */
	size_t delivered; /* pieces handed to the sink */
	int rc;
	struct err err;
	struct pool *pool;
};

static int slot_sink(void *ud, const void *data, size_t len, struct err *e)
{
	struct slot *s = ud;

	(void)e;
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	return 0;
}

static void ranges_fail_locked(struct ranges *r, int rc, const struct err *e)
{
	if (r->rc)
		return;
	r->rc = rc;
	r->err = *e;
	atomic_store(&r->pool->abort, true);
	pthread_cond_broadcast(&r->cv);
}

static void *range_worker(void *arg)
{
	struct pool_job *j = arg;
	struct ranges *r = j->ud;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct slot *s;
		uint64_t start, len, got;
		uint32_t crc;
		struct err e;
		size_t k;
		int rc;

		while (!r->rc && r->next < r->npieces &&
		       r->next >= r->delivered + r->nslots)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->rc || r->next >= r->npieces)
			break;
		k = r->next++;
		s = &r->slots[k % r->nslots];
		pthread_mutex_unlock(&r->mu);
		start = (uint64_t)k * r->piece;
		len = r->meta->size - start < r->piece ? r->meta->size - start
						       : r->piece;
		s->len = 0;
		err_init(&e);
		rc = gcs_get_range(j->c, r->bucket, r->meta, start, len,
				   slot_sink, s, &got, &crc, &e);
		pthread_mutex_lock(&r->mu);
		if (rc)
			ranges_fail_locked(r, rc, &e);
		else
			s->ready = true;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Ranges of about size/streams bytes, so that every stream has work,
 * but no more than the configured piece and no less than 1 MiB. */
static size_t range_size(const struct xfer_config *cfg, uint64_t size)
{
	uint64_t p = size / cfg->streams;

	p = (p + GCS_CHUNK_ALIGN - 1) / GCS_CHUNK_ALIGN * GCS_CHUNK_ALIGN;
	if (p > cfg->piece)
		p = cfg->piece;
	if (p < ((uint64_t)1 << 20))
		p = (uint64_t)1 << 20;
	return (size_t)p;
}

bool xfer_get_parallel(const struct store_object *meta)
{
	struct xfer_config cfg;

	xfer_config_default(&cfg);
	return cfg.streams > 1 && meta->size > cfg.piece;
}

int xfer_get_ranges(struct gcs_client *c, const char *bucket,
		    const struct store_object *meta, store_sink_fn sink,
		    void *ud, uint64_t *got, uint32_t *crc, struct err *e)
{
	struct xfer_config cfg;
	struct ranges r = { .bucket = bucket, .meta = meta };
	struct pool pool;
	struct threads th = { 0 };
	unsigned streams;
	int rc;

	*got = 0;
	*crc = 0;
	xfer_config_default(&cfg);
	r.piece = range_size(&cfg, meta->size);
	r.npieces = (size_t)((meta->size + r.piece - 1) / r.piece);
	streams = cfg.streams < r.npieces ? cfg.streams : (unsigned)r.npieces;
	r.nslots = streams + 2;
	if (r.nslots * r.piece > XFER_MEMORY_MAX)
		r.nslots = (unsigned)(XFER_MEMORY_MAX / r.piece);
	r.pool = &pool;
	r.slots = calloc(r.nslots, sizeof(*r.slots));
	if (!r.slots)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	for (unsigned i = 0; i < r.nslots; i++)
		if (!(r.slots[i].buf = malloc(r.piece))) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			goto free_slots;
		}
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	log_debug("gcs: downloading gs://%s/%s in %zu ranges on %u "
		  "connections", bucket, meta->name, r.npieces, streams);
	rc = pool_open(&pool, c, streams, e);
	if (!rc)
		rc = pool_start(&pool, &th, range_worker, &r, e);
	for (size_t k = 0; !rc && k < r.npieces; k++) {
		struct slot *s = &r.slots[k % r.nslots];

		pthread_mutex_lock(&r.mu);
		while (!s->ready && !r.rc)
			pthread_cond_wait(&r.cv, &r.mu);
		if (!s->ready) {
			rc = r.rc;
			*e = r.err;
		}
		pthread_mutex_unlock(&r.mu);
		if (rc)
			break;
		rc = sink(ud, s->buf, s->len, e);
		pthread_mutex_lock(&r.mu);
		if (rc) {
			/* The sink's own error, returned as it is. */
			r.rc = rc;
			atomic_store(&pool.abort, true);
		} else {
			*crc = crc32c_update(*crc, s->buf, s->len);
			*got += s->len;
			s->ready = false;
			r.delivered++;
		}
		pthread_cond_broadcast(&r.cv);
		pthread_mutex_unlock(&r.mu);
	}
	if (rc) {
		pthread_mutex_lock(&r.mu);
		if (!r.rc)
			r.rc = rc;
		atomic_store(&pool.abort, true);
		pthread_cond_broadcast(&r.cv);
		pthread_mutex_unlock(&r.mu);
	}
	pool_join(&th);
	pool_close(&pool);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
free_slots:
	for (unsigned i = 0; i < r.nslots; i++)
		free(r.slots[i].buf);
	free(r.slots);
	return rc;
}
