/*
 * cloud/cloud.h: everything that speaks to Google Cloud, and the object
 * store facade that gives gs:// and file:// URLs the same semantics:
 * atomic create, create-only, compare-and-swap on a generation, streaming
 * uploads and downloads checked end to end with CRC32C.
 *
 * Object names are relative to the URL's prefix: store_open("gs://b/p/run")
 * then store_put(s, "control.json") writes gs://b/p/run/control.json.
 */
#ifndef SLICECTL_CLOUD_H
#define SLICECTL_CLOUD_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cloud_error {
	CLOUD_OK = 0,
	CLOUD_ENOMEM = COMMON_ENOMEM,
	CLOUD_EINVAL = COMMON_EINVAL,
	CLOUD_EIO = COMMON_EIO,
	CLOUD_EURL = 30,     /* not a gs:// or file:// URL we can use */
	CLOUD_ENOTFOUND,     /* no such object or bucket (404, ENOENT) */
	CLOUD_EPRECONDITION, /* a generation precondition failed (412) */
	CLOUD_EAUTH,         /* no credentials, or refused (401, 403) */
	CLOUD_EHTTP,         /* any other HTTP error; the message has the
				server's own words */
	CLOUD_ENETWORK,      /* no answer after every retry */
	CLOUD_ECORRUPT,      /* CRC32C mismatch, or malformed server JSON */
	CLOUD_ENOSPACE,      /* a local disk (or file size limit) is full */
	CLOUD_EABORTED,      /* a caller's callback asked to stop */
};

/* Preconditions on the generation of the object being written or deleted. */
#define STORE_ANY_GENERATION (-1) /* none */
#define STORE_CREATE_ONLY 0       /* the object must not exist yet */

struct store;

struct store_object {
	char *name;          /* relative to the store's prefix */
	uint64_t size;
	int64_t generation;  /* > 0; changes on every write of the name */
	uint32_t crc32c;
	char updated[40];    /* RFC 3339 time of the last write */
};

void store_object_release(struct store_object *o);

/* Opens gs://BUCKET[/PREFIX] or file:///DIR (DIR created if missing). */
int store_open(struct store **out, const char *url, struct err *e);
void store_close(struct store *s);
/* The URL of an object, for messages: "gs://b/p/name". Valid until the
 * next call on s. */
const char *store_url(struct store *s, const char *name);

/* Small objects in one request. if_generation_match is a generation,
 * STORE_CREATE_ONLY or STORE_ANY_GENERATION. out may be NULL. */
int store_put(struct store *s, const char *name, const void *data,
	      size_t len, int64_t if_generation_match,
	      struct store_object *out, struct err *e);

/* Streaming uploads of any size with bounded memory. Nothing is visible
 * under name until store_upload_finish succeeds; abort (or a crash) leaves
 * nothing behind that a reader could see. */
struct store_upload;
int store_upload_begin(struct store *s, const char *name,
		       int64_t if_generation_match, struct store_upload **out,
		       struct err *e);
int store_upload_write(struct store_upload *u, const void *data, size_t len,
		       struct err *e);
/* Commits and frees u, whatever the result. out may be NULL. */
int store_upload_finish(struct store_upload *u, struct store_object *out,
			struct err *e);
void store_upload_abort(struct store_upload *u);

/* Returns 0, or an error code after filling e (then the download stops
 * with CLOUD_EABORTED unless the callback's own code is a cloud_error). */
typedef int (*store_sink_fn)(void *ud, const void *data, size_t len,
			     struct err *e);

/* Streams an object to sink, pinned to one generation (0: the current
 * one) so a concurrent overwrite cannot mix versions; a broken stream is
 * resumed from where it broke; the CRC32C of all bytes is checked against
 * the object's before returning 0. out may be NULL. */
int store_get(struct store *s, const char *name, int64_t generation,
	      store_sink_fn sink, void *ud, struct store_object *out,
	      struct err *e);
/* Reads a small object whole (at most max bytes) into *data (malloc'd,
 * NUL-terminated). */
int store_read(struct store *s, const char *name, size_t max, char **data,
	       size_t *len, struct store_object *out, struct err *e);
int store_stat(struct store *s, const char *name, struct store_object *out,
	       struct err *e);

/* Lists objects under prefix in name order. With a delimiter ("/"), names
 * below the next delimiter are rolled up and reported once with
 * is_prefix set (o->name ends with the delimiter). The callback's non-zero
 * return stops the listing and is returned. */
typedef int (*store_list_fn)(void *ud, const struct store_object *o,
			     bool is_prefix);
int store_list(struct store *s, const char *prefix, const char *delimiter,
	       store_list_fn fn, void *ud, struct err *e);

int store_delete(struct store *s, const char *name,
		 int64_t if_generation_match, struct err *e);

/* crc32c.c: CRC-32C (Castagnoli), as GCS computes it. Start with 0. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

#endif
