/*
 * gcs.h (private to cloud/): a client of the Cloud Storage JSON API with
 * the semantics store_gs.c needs: simple and resumable uploads that check
 * CRC32C and survive any fault by asking the server how far it got,
 * downloads pinned to a generation that resume after a broken stream and
 * check CRC32C, paginated listing, stat, delete and compose, all with
 * generation preconditions. STORAGE_EMULATOR_HOST redirects it to an
 * emulator.
 */
#ifndef SLICECTL_CLOUD_GCS_H
#define SLICECTL_CLOUD_GCS_H

#include "cloud/auth.h"
#include "cloud/cloud.h"

#include <pthread.h>

/* GCS refuses non-final resumable chunks of other sizes. */
#define GCS_CHUNK_ALIGN (256u * 1024)
#define GCS_CHUNK_DEFAULT (8u << 20)

struct gcs_client {
	struct http_client http;
	struct auth auth;
	char *base; /* "https://storage.googleapis.com" or the emulator */
	/* A worker's client (gcs_client_init_worker): its tokens come from
	 * lender's, under lender_mu, so that N connections cost one token
	 * fetch, not N. */
	struct gcs_client *lender;
	pthread_mutex_t *lender_mu;
};

/* p may be NULL for the defaults. Credentials are looked up now (see
 * auth.h); with STORAGE_EMULATOR_HOST set they are used only when
 * SLICECTL_ACCESS_TOKEN or GOOGLE_APPLICATION_CREDENTIALS is set. */
int gcs_client_init(struct gcs_client *c, const struct http_policy *p,
		    struct err *e);
void gcs_client_release(struct gcs_client *c);
/* A client for another thread, with its own connection and parent's
 * policy, borrowing parent's tokens under mu (shared by every worker of
 * parent; parent itself must not send while the workers do). */
int gcs_client_init_worker(struct gcs_client *w, struct gcs_client *parent,
			   pthread_mutex_t *mu, struct err *e);

/* if_generation_match: a generation, STORE_CREATE_ONLY (0) or
 * STORE_ANY_GENERATION (-1). out may be NULL where it is a result. */
int gcs_stat(struct gcs_client *c, const char *bucket, const char *name,
	     int64_t generation, struct store_object *out, struct err *e);
int gcs_put(struct gcs_client *c, const char *bucket, const char *name,
	    const void *data, size_t len, int64_t if_generation_match,
	    struct store_object *out, struct err *e);
int gcs_get(struct gcs_client *c, const char *bucket, const char *name,
	    int64_t generation, store_sink_fn sink, void *ud,
	    struct store_object *out, struct err *e);
/* len bytes of the generation meta describes, from byte start, resumed after
 * any fault the policy forgives; *got and *crc (CRC32C) say what reached
 * sink, whatever the outcome. */
int gcs_get_range(struct gcs_client *c, const char *bucket,
		  const struct store_object *meta, uint64_t start,
		  uint64_t len, store_sink_fn sink, void *ud, uint64_t *got,
		  uint32_t *crc, struct err *e);
/* max_results 0 lets the server choose the page size. */
int gcs_list(struct gcs_client *c, const char *bucket, const char *prefix,
	     const char *delimiter, unsigned max_results, store_list_fn fn,
	     void *ud, struct err *e);
int gcs_delete(struct gcs_client *c, const char *bucket, const char *name,
	       int64_t if_generation_match, struct err *e);
/* Deletes an object only the caller ever writes (a temporary piece), so
 * repeating the request is harmless: retried like a read; gone is fine. */
int gcs_delete_own(struct gcs_client *c, const char *bucket,
		   const char *name, struct err *e);
int gcs_compose(struct gcs_client *c, const char *bucket, const char *dest,
		const char *const *sources, size_t n,
		int64_t if_generation_match, struct store_object *out,
		struct err *e);

/* A resumable upload: the data is sent in chunks of chunk bytes (a
 * multiple of GCS_CHUNK_ALIGN) as it comes, and the object appears only
 * when gcs_upload_finish succeeds. */
struct gcs_upload {
	struct gcs_client *c;
	char *bucket;
	char *name;
	char *session;      /* the session URI */
	struct buf pending; /* bytes from offset persisted on */
	uint64_t persisted; /* bytes the server has confirmed */
	uint64_t total;     /* bytes written so far */
	uint32_t crc;       /* CRC32C of those bytes */
	size_t chunk;
	bool finished;
};

/* chunk 0: GCS_CHUNK_DEFAULT. */
int gcs_upload_begin(struct gcs_client *c, const char *bucket,
		     const char *name, int64_t if_generation_match,
		     size_t chunk, struct gcs_upload *u, struct err *e);
int gcs_upload_write(struct gcs_upload *u, const void *data, size_t len,
		     struct err *e);
int gcs_upload_finish(struct gcs_upload *u, struct store_object *out,
		      struct err *e);
/* Frees u's contents; cancels the session when it was not finished. */
void gcs_upload_release(struct gcs_upload *u);

/* After a write with a precondition met 412: whether the object is now
 * size bytes of CRC32C crc, that is an earlier attempt of this very write
 * landed with its answer lost. Then out (may be NULL) gets it. */
bool gcs_landed(struct gcs_client *c, const char *bucket, const char *name,
		uint64_t size, uint32_t crc, struct store_object *out);

/* Takes o, what a write stored, and checks it is size bytes of CRC32C
 * crc (CLOUD_ECORRUPT otherwise); then hands it to out, or releases it. */
int gcs_written_as(struct store_object *o, uint64_t size, uint32_t crc,
		   const char *bucket, const char *name,
		   struct store_object *out, struct err *e);

/* The object metadata of a GCS JSON resource (CLOUD_ECORRUPT when it is
 * malformed). */
int gcs_parse_object(const char *json, size_t len, struct store_object *out,
		     struct err *e);

#endif
