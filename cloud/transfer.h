/*
 * transfer.h (private to cloud/): parallel transfers of large objects,
 * the way `gcloud storage cp` does parallel composite uploads and sliced
 * downloads. One stream to GCS is far slower than a TPU host's network, so
 * a large upload is cut into pieces sent at once on several connections
 * (each worker thread its own gcs_client, hence its own connection) and
 * joined with compose; a large download fetches several byte ranges of one
 * generation at once and hands them to the sink in order. Small objects
 * keep one stream. Memory stays under XFER_MEMORY_MAX whatever the size.
 */
#ifndef SLICECTL_CLOUD_TRANSFER_H
#define SLICECTL_CLOUD_TRANSFER_H

#include "cloud/gcs.h"

/* Bytes held in piece buffers by one transfer, at most. */
#define XFER_MEMORY_MAX ((size_t)160 << 20)
#define XFER_STREAMS_DEFAULT 16
#define XFER_PIECE_DEFAULT ((size_t)8 << 20)

struct xfer_config {
	unsigned streams; /* connections at once; 1: one stream always */
	size_t piece;     /* bytes a piece (uploads: the first 128) */
};

/* The defaults, with SLICECTL_XFER_STREAMS and SLICECTL_XFER_PIECE_MIB
 * applied (both clamped so that streams + 1 pieces fit the memory bound). */
void xfer_config_default(struct xfer_config *cfg);

/*
 * A streaming upload of name. A resumable session starts at once and the
 * first piece is held: when the upload ends within it, the piece goes to
 * that session, one stream as before; once more comes, the session is
 * cancelled and pieces go to temporary objects named "NAME" STORE_PIECE_MARK
 * "NONCE.K" on cfg->streams connections and finish composes them into
 * name under if_generation_match, checks the composite's size and CRC32C
 * against the bytes written, and deletes every temporary object. A failed
 * or abandoned upload deletes them too.
 */
struct xfer_upload;

int xfer_upload_begin(struct gcs_client *c, const char *bucket,
		      const char *name, int64_t if_generation_match,
		      const struct xfer_config *cfg, struct xfer_upload **out,
		      struct err *e);
int xfer_upload_write(struct xfer_upload *u, const void *data, size_t len,
		      struct err *e);
/* Frees u whatever the outcome. */
int xfer_upload_finish(struct xfer_upload *u, struct store_object *out,
		       struct err *e);
void xfer_upload_abort(struct xfer_upload *u);

/* Whether meta (a stat of the generation to read) is downloaded in
 * ranges; then xfer_get_ranges delivers it to sink in order, with *got
 * and *crc (CRC32C) of the bytes handed over. */
bool xfer_get_parallel(const struct store_object *meta);
int xfer_get_ranges(struct gcs_client *c, const char *bucket,
		    const struct store_object *meta, store_sink_fn sink,
		    void *ud, uint64_t *got, uint32_t *crc, struct err *e);

#endif
