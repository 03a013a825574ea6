/*
 * client.h (private to kube/): what client.c, status.c, watch.c and
 * config.c share: the client, one attempt of a request, the retry budget
 * and the translation of a failed answer into a kube_error.
 */
#ifndef SLICECTL_KUBE_CLIENT_H
#define SLICECTL_KUBE_CLIENT_H

#include "kube/kube.h"

#include <curl/curl.h>

struct kube_policy {
	unsigned max_attempts;       /* per request, the first included */
	unsigned max_total_ms;       /* per request, waits included */
	unsigned backoff_base_ms;
	unsigned backoff_max_ms;
	unsigned retry_after_max_ms; /* a longer Retry-After is cut to this */
	unsigned connect_timeout_ms;
	unsigned stall_ms;           /* no byte for this long: retry */
};

struct kube_client {
	struct kube_config cfg;
	struct kube_policy policy;
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
	uint64_t seed;
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

struct kube_answer {
	long status;          /* 0: no answer */
	struct buf body;      /* a kept body (an error's: its start) */
	unsigned retry_after_ms;
	CURLcode curl_code;
	int sink_rc;          /* what stopped the sink, or 0 */
	bool streamed;        /* bytes reached the sink */
};

void kube_answer_init(struct kube_answer *a);
void kube_answer_release(struct kube_answer *a);

/* Sends one attempt (running the exec plugin first when the credential
 * is missing or expiring). Returns 0 whenever the attempt ran, whatever
 * came back (see a); an error only when it could not be made. */
int kube_attempt(struct kube_client *k, const struct kube_call *c,
		 struct kube_answer *a, struct err *e);

/* The attempts of one request: a budget of tries and time. */
struct kube_retry {
	struct backoff backoff;
	unsigned attempts;
	uint64_t start_ms;
	bool reauthed;
};

void kube_retry_init(struct kube_client *k, struct kube_retry *r);
/* After an attempt that failed: whether to try again (after sleeping as
 * the backoff or Retry-After says). A 401 with an exec plugin gets one
 * more attempt with a fresh credential. */
bool kube_retry_again(struct kube_client *k, struct kube_retry *r,
		      const struct kube_answer *a);
/* Progress was made (a watch delivered events): the backoff restarts. */
void kube_retry_progress(struct kube_retry *r);

/* The error for a failed answer: "METHOD PATH: STATUS REASON: the
 * server's message; hint" (status.c). retried: more than one attempt
 * was sent. */
int kube_failure(const struct kube_client *k, const struct kube_call *c,
		 const struct kube_answer *a, bool retried, struct err *e);

/* config.c */
int kube_config_copy(struct kube_config *dst, const struct kube_config *src,
		     struct err *e);
/* A small file whole, NUL-terminated (*data malloc'd). */
int kube_read_file(const char *path, char **data, size_t *len,
		   struct err *e);

#endif
