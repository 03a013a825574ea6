/*
 * tests/cloud/tiny_http.h: a loopback HTTP server in a thread of the test
 * that answers each request with the next of a fixed list of raw answers
 * (the last one repeats), and records every request it received. For the
 * cases a faithful fake should never produce: garbage, odd headers,
 * dropped connections at exact moments.
 */
#ifndef SLICECTL_TESTS_TINY_HTTP_H
#define SLICECTL_TESTS_TINY_HTTP_H

#include "common/common.h"

#include <pthread.h>

struct tiny_answer {
	/* Status line, headers and body, as sent, except that
	 * "Content-Length: *" is replaced by the body's length. The
	 * connection closes after the answer unless it says
	 * "Connection: keep-alive": then the next request on it gets the
	 * next answer. */
	const char *raw;
	unsigned delay_ms; /* before answering */
	bool drop;         /* close the connection without answering */
};

struct tiny_http {
	int fd;
	unsigned port;
	char base[64];     /* "http://127.0.0.1:PORT" */
	pthread_t thread;
	pthread_mutex_t mu;
	const struct tiny_answer *answers;
	size_t n;
	unsigned requests; /* received so far */
	struct buf log;    /* every request, headers and body, in order */
	bool stop;
};

/* Returns 0, or -1 after printing why. */
int tiny_start(struct tiny_http *t, const struct tiny_answer *answers,
	       size_t n);
void tiny_stop(struct tiny_http *t);
/* A copy of the log (free it). */
char *tiny_log(struct tiny_http *t);
unsigned tiny_requests(struct tiny_http *t);

/* Debug logging sent to a temporary file instead of stderr, for cases
 * that check what a client logs (its credentials redacted, say). */
struct log_capture {
	int fd, saved;
};

/* Returns 0, or -1 after printing why. */
int log_capture_begin(struct log_capture *c);
/* Back to stderr at LOG_INFO; what was logged (free it), or NULL. */
char *log_capture_end(struct log_capture *c);

#endif
