/*
 * client.h (private to kube/): what client.c, status.c, watch.c and
 * config.c share: the client, a request sent through cloud/'s HTTP
 * transport, the retry budget and the translation of a failed answer
 * into a kube_error.
 */
#ifndef SLICECTL_KUBE_CLIENT_H
#define SLICECTL_KUBE_CLIENT_H

#include "cloud/cloud.h"
#include "kube/kube.h"

struct kube_client {
	struct kube_config cfg;
	struct http_client http; /* cloud/'s transport and its retry policy */
};

/* One request. */
struct kube_call {
	const char *method;
	const char *path;     /* the API's path, query included */
	const char *body;     /* JSON, or NULL */
	/* A 2xx body is handed here as it arrives (watch streams) instead
	 * of being kept; a non-zero return stops the transfer. */
	int (*sink)(void *ud, const char *data, size_t len);
	void *sink_ud;
	unsigned timeout_ms;  /* the attempt's whole time; 0: none */
};

/*
 * Sends c through the transport (running the exec plugin first when the
 * credential is missing or expiring): max_attempts 0 retries as the
 * client's policy allows, 1 sends one attempt (a watch resumes by
 * itself). Returns 0 whenever the request ran, whatever came back (resp:
 * status 0 when no answer came; also when the sink stopped it); an error
 * only when it could not be made or the answer was too large.
 */
int kube_send(struct kube_client *k, const struct kube_call *c,
	      unsigned max_attempts, struct http_response *resp,
	      struct err *e);

/* After an answer that failed: whether to try again (after sleeping as
 * the backoff or Retry-After says). A 401 with an exec plugin gets one
 * more attempt with a fresh credential (*reauthed then set). */
bool kube_retry_again(struct kube_client *k, struct http_retry *r,
		      bool *reauthed, const struct http_response *resp);

/* The error for a failed answer: "METHOD PATH: STATUS REASON: the
 * server's message; hint" (status.c). retried: more than one attempt
 * was sent. */
int kube_failure(const struct kube_client *k, const struct kube_call *c,
		 const struct http_response *a, bool retried, struct err *e);

/* config.c */
int kube_config_copy(struct kube_config *dst, const struct kube_config *src,
		     struct err *e);
/* A small file whole, NUL-terminated (*data malloc'd). */
int kube_read_file(const char *path, char **data, size_t *len,
		   struct err *e);

#endif
