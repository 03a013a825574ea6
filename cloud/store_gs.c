/*
 * store_gs.c: the gs:// backend of the store facade, over gcs.c. Puts are
 * simple uploads; streaming uploads go through transfer.c (one resumable
 * session when small, pieces on several connections composed when
 * large), bounded in memory, and the object appears only when finished;
 * STORE_CREATE_ONLY is ifGenerationMatch=0, as in GCS itself.
 */
#include "cloud/backend.h"
#include "cloud/transfer.h"

#include <stdlib.h>
#include <string.h>

/* Page size for listings: the most the JSON API gives in one page. */
#define LIST_PAGE 1000

struct store_backend {
	struct gcs_client client;
	char *bucket;
};

struct gs_upload {
	struct store_upload base; /* first, as backend.h requires */
	struct xfer_upload *up;
};

static int gs_open(struct store_backend **out, const char *where,
		   struct err *e)
{
	struct store_backend *b;
	size_t blen = strcspn(where, "/");
	int rc;

	*out = NULL;
	if (blen == 0)
		return err_set(e, CLOUD_EURL, "gs://%s has no bucket", where);
	b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	b->bucket = strndup(where, blen);
	if (!b->bucket) {
		free(b);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	rc = gcs_client_init(&b->client, NULL, e);
	if (rc) {
		free(b->bucket);
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

static void gs_close(struct store_backend *b)
{
	if (!b)
		return;
	gcs_client_release(&b->client);
	free(b->bucket);
	free(b);
}

static int gs_put(struct store_backend *b, const char *name, const void *data,
		  size_t len, int64_t if_generation_match,
		  struct store_object *out, struct err *e)
{
	return gcs_put(&b->client, b->bucket, name, data, len,
		       if_generation_match, out, e);
}

static int gs_upload_begin(struct store_backend *b, const char *name,
			   int64_t if_generation_match,
			   struct store_upload **out, struct err *e)
{
	struct gs_upload *u = calloc(1, sizeof(*u));
	struct xfer_config cfg;
	int rc;

	*out = NULL;
	if (!u)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	xfer_config_default(&cfg);
	rc = xfer_upload_begin(&b->client, b->bucket, name,
			       if_generation_match, &cfg, &u->up, e);
	if (rc) {
		free(u);
		return rc;
	}
	*out = &u->base;
	return 0;
}

static int gs_upload_write(struct store_upload *base, const void *data,
			   size_t len, struct err *e)
{
	struct gs_upload *u = (struct gs_upload *)base;

	return xfer_upload_write(u->up, data, len, e);
}

static int gs_upload_finish(struct store_upload *base,
			    struct store_object *out, struct err *e)
{
	struct gs_upload *u = (struct gs_upload *)base;
	int rc = xfer_upload_finish(u->up, out, e);

	free(u);
	return rc;
}

static void gs_upload_abort(struct store_upload *base)
{
	struct gs_upload *u = (struct gs_upload *)base;

	xfer_upload_abort(u->up);
	free(u);
}

static int gs_get(struct store_backend *b, const char *name,
		  int64_t generation, store_sink_fn sink, void *ud,
		  struct store_object *out, struct err *e)
{
	return gcs_get(&b->client, b->bucket, name, generation, sink, ud, out,
		       e);
}

static int gs_stat(struct store_backend *b, const char *name,
		   struct store_object *out, struct err *e)
{
	return gcs_stat(&b->client, b->bucket, name, 0, out, e);
}

static int gs_list(struct store_backend *b, const char *prefix,
		   const char *delimiter, store_list_fn fn, void *ud,
		   struct err *e)
{
	return gcs_list(&b->client, b->bucket, prefix, delimiter, LIST_PAGE,
			fn, ud, e);
}

static int gs_del(struct store_backend *b, const char *name,
		  int64_t if_generation_match, struct err *e)
{
	return gcs_delete(&b->client, b->bucket, name, if_generation_match,
			  e);
}

const struct store_ops store_gs_ops = {
	.scheme = "gs",
	.open = gs_open,
	.close = gs_close,
	.put = gs_put,
	.upload_begin = gs_upload_begin,
	.upload_write = gs_upload_write,
	.upload_finish = gs_upload_finish,
	.upload_abort = gs_upload_abort,
	.get = gs_get,
	.stat = gs_stat,
	.list = gs_list,
	.del = gs_del,
};
