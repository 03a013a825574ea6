/*
 * tpu.h (private to cloud/): what tpu.c, tpu_body.c and tpu_parse.c share.
 * The public side of the TPU API client is in cloud.h.
 */
#ifndef SLICECTL_CLOUD_TPU_H
#define SLICECTL_CLOUD_TPU_H

#include "cloud/cloud.h"

#include <jansson.h>

/* The limits GCE puts on instance metadata. */
#define TPU_METADATA_VALUE_MAX (256u * 1024)
#define TPU_METADATA_TOTAL_MAX (512u * 1024)
/* No slice has more hosts than this; a larger nodeCount is corrupt. */
#define TPU_NODE_COUNT_MAX 100000

/* One QueuedResource from a parsed document (a list page's item, say);
 * text/len is what goes into out->json. */
int tpu_qr_from_json(json_t *o, const char *text, size_t len,
		     struct tpu_qr *out, struct err *e);

/* A GetGuestAttributesResponse: each worker's SSH host keys, in the
 * order the API lists them. */
int tpu_hostkeys_parse(const char *json, size_t len,
		       struct tpu_hostkeys **out, size_t *n, struct err *e);

/* A long-running operation as the API sends it. */
struct tpu_operation {
	char *name;        /* NULL when the answer had none (a done one) */
	bool done;
	bool failed;       /* it has an error: code and message say which */
	int code;
	char message[512];
};

/* Parses an Operation into op, freeing the name a previous answer left
 * there, so one struct serves every poll (CLOUD_ECORRUPT when malformed).
 * An operation that is not done must have a name, to be polled by. */
int tpu_operation_parse(const char *json, size_t len,
			struct tpu_operation *op, struct err *e);

/* Whether key is an SSH host key type known_hosts can carry. */
bool tpu_ssh_key_type(const char *key);

#endif
