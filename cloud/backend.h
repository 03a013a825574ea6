/*
 * backend.h (private to cloud/): what a storage backend provides to the
 * store facade (store.c). store.c parses the URL, owns struct store and
 * forwards every call to the backend chosen by the scheme: gs:// is
 * store_gs.c (the GCS JSON API), file:// is store_file.c. Both give the
 * same semantics, documented in cloud.h; the facade adds nothing but
 * dispatch, prefixing and argument checks.
 */
#ifndef SLICECTL_CLOUD_BACKEND_H
#define SLICECTL_CLOUD_BACKEND_H

#include "cloud/cloud.h"

struct store_backend;

/* An upload in progress; each backend embeds this first in its own. */
struct store_upload {
	struct store *store;
	/* For SLICECTL_STORE_TRACE (store.c): the object's name (NULL when
	 * not tracing) and the bytes written so far. */
	char *trace_name;
	uint64_t written;
};

struct store_ops {
	const char *scheme; /* "gs" or "file" */
	/* where is what follows "scheme://": "bucket/prefix" or "/dir". */
	int (*open)(struct store_backend **out, const char *where,
		    struct err *e);
	void (*close)(struct store_backend *b);
	/* Names passed below are full: the store's prefix already applied. */
	int (*put)(struct store_backend *b, const char *name, const void *data,
		   size_t len, int64_t if_generation_match,
		   struct store_object *out, struct err *e);
	int (*upload_begin)(struct store_backend *b, const char *name,
			    int64_t if_generation_match,
			    struct store_upload **out, struct err *e);
	int (*upload_write)(struct store_upload *u, const void *data,
			    size_t len, struct err *e);
	int (*upload_finish)(struct store_upload *u, struct store_object *out,
			     struct err *e);
	void (*upload_abort)(struct store_upload *u);
	int (*get)(struct store_backend *b, const char *name,
		   int64_t generation, store_sink_fn sink, void *ud,
		   struct store_object *out, struct err *e);
	int (*stat)(struct store_backend *b, const char *name,
		    struct store_object *out, struct err *e);
	int (*list)(struct store_backend *b, const char *prefix,
		    const char *delimiter, store_list_fn fn, void *ud,
		    struct err *e);
	int (*del)(struct store_backend *b, const char *name,
		   int64_t if_generation_match, struct err *e);
};

extern const struct store_ops store_file_ops;
extern const struct store_ops store_gs_ops;

#endif
