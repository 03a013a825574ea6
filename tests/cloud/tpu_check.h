/*
 * tests/cloud/tpu_check.h: what the Cloud TPU API client's tests share:
 * the environment they run in, the names and host keys their documents
 * use, a basic queued-resource spec, JSON comparison, and for the client
 * itself (test_tpu_client.c, _wait.c, _ops.c) raw answers for a loopback
 * server and the requests it got. Failures are the current Criterion
 * test's.
 */
#ifndef SLICECTL_TESTS_TPU_CHECK_H
#define SLICECTL_TESTS_TPU_CHECK_H

#include "cloud/tpu.h"
#include "tests/cloud/tiny_http.h"

#include <jansson.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define PARENT "projects/p/locations/z"
#define QR_NAME PARENT "/queuedResources/qr1"

#define ED25519 "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

/* One guest attribute item of the hostkeys/ query. */
#define ITEM(k, v) "{\"namespace\":\"hostkeys\",\"key\":\"" k "\"," \
		   "\"value\":\"" v "\"}"

/* A fixed token, fast polls and retries, no endpoint and no credentials
 * from the machine: every suite's .init. */
void env_setup(void);
/* s parsed, or the test fails. */
json_t *load(const char *s);
/* got and want are equal JSON values. */
void assert_json_eq(const char *got, const char *want);
/* Queued resource qr1: one v5litepod-8 node. */
void spec_basic(struct tpu_qr_spec *s);

/* Raw answers for tiny_http: JSON with a status, an API error, empty
 * 503 and 429. */
#define HEAD(status) "HTTP/1.1 " status "\r\nContent-Type: application/json" \
		     "\r\nContent-Length: *\r\n\r\n"
#define OK(body) { HEAD("200 OK") body, 0, false }
#define ERR(status, code, msg)                                              \
	{ HEAD(status) "{\"error\":{\"code\":" #code ",\"message\":\"" msg \
		       "\",\"status\":\"X\"}}", 0, false }
#define E400(msg) ERR("400 Bad Request", 400, msg)
#define S503 { "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0" \
	       "\r\n\r\n", 0, false }
#define S429 { "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0" \
	       "\r\n\r\n", 0, false }

#define OP_NAME PARENT "/operations/op-1"
#define OP_PENDING "{\"name\":\"" OP_NAME "\",\"done\":false}"
#define OP_DONE "{\"name\":\"" OP_NAME "\",\"done\":true,\"response\":{}}"

#define QR_STATE(state) "{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"" \
	state "\"},\"tpu\":{\"nodeSpec\":[{\"parent\":\"" PARENT "\","     \
	"\"multiNodeParams\":{\"nodeCount\":2,\"nodeIdPrefix\":\"qr1\"},"   \
	"\"node\":{\"acceleratorType\":\"v5litepod-8\"}}]}}"
#define QR_404 ERR("404 Not Found", 404, "Resource '" QR_NAME \
		   "' was not found")

#define NODE(id, state) "{\"name\":\"" PARENT "/nodes/" id "\",\"state\":\"" \
	state "\"}"

/* A tiny_http server and a client of it. */
struct fx {
	struct tiny_http srv;
	struct tpu_client *c;
	struct err e;
	char *log;
};

/* Serves the n answers a, and opens f->c on it for project p, zone z. */
void start(struct fx *f, const struct tiny_answer *a, size_t n);
void stop(struct fx *f);
/* The i-th request the server got (a copy to free), whole. */
char *request(struct fx *f, unsigned i);
/* Its first line, without " HTTP/1.1". */
char *request_line(struct fx *f, unsigned i);
/* Its body. */
char *request_body(struct fx *f, unsigned i);
/* s (n bytes) is a v4 UUID. */
bool is_uuid4(const char *s, size_t n);
/* The i-th request line is want. */
void assert_line(struct fx *f, unsigned i, const char *want);
/* prefix and then a v4 UUID, the requestId, ending the line. */
void assert_line_rid(struct fx *f, unsigned i, const char *prefix);

/* What a progress callback saw: states and elapsed times, in order. */
struct seen {
	char states[16][32];
	uint64_t elapsed[16];
	size_t n;
};

/* A progress callback; ud is a struct seen. */
void on_progress(void *ud, const struct tpu_qr *q, uint64_t elapsed);

#endif
