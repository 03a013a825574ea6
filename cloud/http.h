/*
 * http.h (private to cloud/): one HTTP client over a reused libcurl easy
 * handle, and the retry policy every Google API call shares: 408, 429,
 * 5xx, dropped connections and stalls are retried with exponential backoff
 * and full jitter, honouring Retry-After, within a bounded number of
 * attempts and a bounded time; a request that is not idempotent is retried
 * only when it carries a precondition. Other 4xx answers become cloud
 * errors carrying the server's own message and a hint.
 *
 * Debug logs name the method, URL and status with credentials redacted;
 * nothing here ever prints a header's value or a request body.
 */
#ifndef SLICECTL_CLOUD_HTTP_H
#define SLICECTL_CLOUD_HTTP_H

#include "cloud/cloud.h"

#include <curl/curl.h>

struct http_policy {
	unsigned max_attempts;       /* per request, the first included */
	unsigned max_total_ms;       /* per request, waits included */
	unsigned backoff_base_ms;
	unsigned backoff_max_ms;
	unsigned connect_timeout_ms;
	unsigned stall_ms;           /* no byte moved for this long: retry */
};

/* The defaults, with SLICECTL_HTTP_STALL_SECONDS and
 * SLICECTL_HTTP_RETRY_BASE_MS (for tests and slow links) applied. */
void http_policy_default(struct http_policy *p);

struct http_client {
	CURL *curl;
	struct http_policy policy;
	uint64_t seed;
	char errbuf[CURL_ERROR_SIZE];
	/* Optional: asked about once a second during a transfer and during
	 * the waits between retries (it may be made true from any thread);
	 * true ends the request with CLOUD_EABORTED. */
	bool (*cancelled)(void *ud);
	void *cancel_ud;
};

/* A body pulled by callbacks: read returns the bytes copied (0 at the
 * end) or (size_t)-1 on failure; rewind, when given, makes the request
 * retryable after its body was sent. */
struct http_body_source {
	size_t (*read)(void *ud, char *buf, size_t len);
	int (*rewind)(void *ud);
	void *ud;
};

struct http_request {
	const char *method;           /* "GET", "POST", "PUT", "DELETE" */
	const char *url;
	const char *const *headers;   /* "Name: value", NULL-terminated */
	const void *body;             /* from memory... */
	size_t body_len;
	const struct http_body_source *source; /* ...or from callbacks */
	/* Sends that may change state twice must say so: they are retried
	 * only when precondition is also set. */
	bool not_idempotent;
	bool precondition;
	unsigned max_attempts;        /* 0: the client's policy */
	/* 0: none. Else each attempt's own time limit, which also replaces
	 * the policy's stall limit when longer: for long polls, where the
	 * server is silent by design. */
	unsigned timeout_ms;
	/* 2xx bodies go to sink when given, else to memory up to max_body
	 * (0: 16 MiB). Error bodies always go to memory. */
	store_sink_fn sink;
	void *sink_ud;
	size_t max_body;
	/* The advice appended to a 4xx error ("; ..."), given the status and
	 * the server's message; NULL or "" falls back to the generic one. */
	const char *(*hint)(long status, const char *message);
};

struct http_response {
	long status;          /* 0 when no answer came */
	struct buf body;
	struct buf headers;   /* "name: value\r\n" lines of the last answer */
	uint64_t delivered;   /* bytes handed to the sink */
	unsigned attempts;
	unsigned retry_after_ms;
	CURLcode curl_code;   /* of the last attempt */
};

void http_response_init(struct http_response *r);
void http_response_release(struct http_response *r);
/* The value of the first header called name (any case), NUL-terminated
 * into out; false when absent or too long. */
bool http_response_header(const struct http_response *r, const char *name,
			  char *out, size_t len);

int http_client_init(struct http_client *c, const struct http_policy *p,
		     struct err *e);
void http_client_release(struct http_client *c);

/*
 * Sends req, retrying as the policy allows. Returns 0 when an answer with a
 * status below 400 came (resp->status says which); otherwise the cloud
 * error for the last answer or transport failure, with e naming the
 * request and the server's message. A sink's error stops at once and is
 * returned as it is (CLOUD_EABORTED when not a cloud error); a transfer that
 * broke after bytes reached the sink is not retried here, since only the
 * caller knows how to resume it.
 */
int http_do(struct http_client *c, const struct http_request *req,
	    struct http_response *resp, struct err *e);

/* For callers that run their own resume loops with the same policy. */
struct http_retry {
	const struct http_policy *policy;
	struct http_client *client;
	struct backoff backoff;
	unsigned attempts;
	uint64_t start_ms;
};

void http_retry_init(struct http_retry *r, struct http_client *c);
/* After a failed attempt: whether it may be retried (transient status or
 * transport failure, within the budget); if so sleeps first (cut short
 * when the client's cancel hook fires: the next attempt then ends with
 * CLOUD_EABORTED). */
bool http_retry_again(struct http_retry *r, int rc,
		      const struct http_response *resp);
/* Progress was made: the next failure starts the backoff afresh. */
void http_retry_progress(struct http_retry *r);

/* Whether a failure of this kind is worth another attempt. */
bool http_transient(int rc, const struct http_response *resp);

/* Percent-encodes s (all but A-Z a-z 0-9 - . _ ~) onto b. */
int http_escape_append(struct buf *b, const char *s);
/* Appends "?name=value", or "&name=value" once u has a query; value
 * escaped as above. */
int http_query_append(struct buf *u, const char *name, const char *value);

/* Copies text to out with the values of credentials (Authorization
 * headers, access, refresh and ID tokens, assertions, client secrets,
 * upload ids) replaced by "<redacted>". */
int http_redact(struct buf *out, const char *text);

/* The message of an error body: GCS's {"error": {"message"}}, OAuth's
 * {"error", "error_description"}, or the start of a text body. */
void http_error_message(const struct http_response *resp, char *out,
			size_t len);

#endif
