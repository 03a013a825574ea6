/*
 * tests/cloud/test_http.c: the HTTP layer's retry policy, its error
 * translation and its redaction of credentials, against a loopback server
 * that answers exactly what each case needs.
 */
#include "cloud/cloud.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define OK_JSON "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
		"Content-Length: *\r\n\r\n{\"a\": true}"
#define S503 "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"

static void fast_policy(struct http_policy *p)
{
	http_policy_default(p);
	p->backoff_base_ms = 5;
	p->backoff_max_ms = 20;
	p->max_attempts = 5;
	p->stall_ms = 1000;
	p->connect_timeout_ms = 2000;
}

struct fixture {
	struct tiny_http srv;
	struct http_client c;
	struct http_response resp;
	struct err e;
	char url[128];
};

static void start(struct fixture *f, const struct tiny_answer *a, size_t n)
{
	struct http_policy p;

	fast_policy(&p);
	cr_assert_eq(tiny_start(&f->srv, a, n), 0);
	cr_assert_eq(http_client_init(&f->c, &p, &f->e), 0);
	http_response_init(&f->resp);
	err_init(&f->e);
	snprintf(f->url, sizeof(f->url), "%s/storage/v1/b/x/o?q=1",
		 f->srv.base);
}

static void stop(struct fixture *f)
{
	http_response_release(&f->resp);
	http_client_release(&f->c);
	tiny_stop(&f->srv);
}

static int get(struct fixture *f, bool not_idempotent, bool precondition)
{
	struct http_request req = { .method = not_idempotent ? "POST" : "GET",
				    .url = f->url,
				    .not_idempotent = not_idempotent,
				    .precondition = precondition };

	return http_do(&f->c, &req, &f->resp, &f->e);
}

Test(http, plain_get)
{
	static const struct tiny_answer a[] = { { OK_JSON, 0, false } };
	struct fixture f;
	char v[64];

	start(&f, a, 1);
	cr_assert_eq(get(&f, false, false), 0, "%s", f.e.msg);
	cr_assert_eq(f.resp.status, 200);
	cr_assert_str_eq(f.resp.body.data, "{\"a\": true}");
	cr_assert(http_response_header(&f.resp, "content-type", v,
				       sizeof(v)));
	cr_assert_str_eq(v, "application/json");
	cr_assert_eq(f.resp.attempts, 1);
	stop(&f);
}

Test(http, transient_statuses_are_retried)
{
	static const struct tiny_answer a[] = {
		{ S503, 0, false },
		{ "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n",
		  0, false },
		{ "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n",
		  0, false },
		{ "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", 0, false },
		{ OK_JSON, 0, false },
	};
	struct fixture f;

	start(&f, a, 5);
	cr_assert_eq(get(&f, false, false), 0, "%s", f.e.msg);
	cr_assert_eq(f.resp.attempts, 5);
	cr_assert_eq(tiny_requests(&f.srv), 5);
	stop(&f);
}

Test(http, dropped_connection_is_retried)
{
	static const struct tiny_answer a[] = {
		{ "", 0, true },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", 0,
		  false },
		{ OK_JSON, 0, false },
	};
	struct fixture f;

	start(&f, a, 3);
	cr_assert_eq(get(&f, false, false), 0, "%s", f.e.msg);
	cr_assert_eq(f.resp.attempts, 3);
	stop(&f);
}

Test(http, stall_is_detected_and_retried)
{
	static const struct tiny_answer a[] = {
		{ OK_JSON, 3000, false },
		{ OK_JSON, 0, false },
	};
	struct fixture f;

	start(&f, a, 2);
	cr_assert_eq(get(&f, false, false), 0, "%s", f.e.msg);
	/* The server answers one request at a time, so the retry may wait
	 * behind the stalled one and stall too. */
	cr_assert_geq(f.resp.attempts, 2);
	stop(&f);
}

Test(http, attempts_are_bounded)
{
	static const struct tiny_answer a[] = { { S503, 0, false } };
	struct fixture f;

	start(&f, a, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_EHTTP);
	cr_assert_eq(f.resp.attempts, 5);
	cr_assert_eq(tiny_requests(&f.srv), 5);
	cr_assert(strstr(f.e.msg, "503"), "%s", f.e.msg);
	stop(&f);
}

Test(http, not_idempotent_needs_a_precondition)
{
	static const struct tiny_answer a[] = {
		{ S503, 0, false }, { OK_JSON, 0, false },
	};
	struct fixture f;

	start(&f, a, 2);
	cr_assert_eq(get(&f, true, false), CLOUD_EHTTP);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);

	start(&f, a, 2);
	cr_assert_eq(get(&f, true, true), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 2);
	stop(&f);
}

Test(http, retry_after_is_honoured)
{
	static const struct tiny_answer a[] = {
		{ "HTTP/1.1 503 Busy\r\nRetry-After: 1\r\n"
		  "Content-Length: 0\r\n\r\n", 0, false },
		{ OK_JSON, 0, false },
	};
	struct fixture f;
	uint64_t t0;

	start(&f, a, 2);
	t0 = mono_ms();
	cr_assert_eq(get(&f, false, false), 0, "%s", f.e.msg);
	/* The server asked for a second; backoff alone waits 20 ms. */
	cr_assert_geq(mono_ms() - t0, 1000);
	stop(&f);
}

Test(http, errors_carry_the_server_message_and_a_hint)
{
	static const struct tiny_answer a404[] = { {
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
		"Content-Length: *\r\n\r\n"
		"{\"error\": {\"code\": 404, "
		"\"message\": \"No such object: x/y\"}}",
		0, false } };
	static const struct tiny_answer a401[] = { {
		"HTTP/1.1 401 Unauthorized\r\nContent-Length: *\r\n\r\n"
		"{\"error\": {\"code\": 401, \"message\": \"Invalid Creds\"}}",
		0, false } };
	static const struct tiny_answer a403[] = { {
		"HTTP/1.1 403 Forbidden\r\nContent-Length: *\r\n\r\n"
		"{\"error\": {\"code\": 403, "
		"\"message\": \"sa has no access\"}}",
		0, false } };
	static const struct tiny_answer a412[] = { {
		"HTTP/1.1 412 Precondition Failed\r\nContent-Length: *\r\n\r\n"
		"not json!", 0, false } };
	static const struct tiny_answer a400[] = { {
		"HTTP/1.1 400 Bad Request\r\nContent-Length: *\r\n\r\n"
		"{\"error\": \"invalid_grant\", "
		"\"error_description\": \"Bad key\"}",
		0, false } };
	struct fixture f;

	start(&f, a404, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_ENOTFOUND);
	cr_assert(strstr(f.e.msg, "No such object: x/y"), "%s", f.e.msg);
	cr_assert(!strstr(f.e.msg, "q=1"), "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);

	start(&f, a401, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_EAUTH);
	cr_assert(strstr(f.e.msg, "Invalid Creds"), "%s", f.e.msg);
	cr_assert(strstr(f.e.msg, "GOOGLE_APPLICATION_CREDENTIALS"), "%s",
		  f.e.msg);
	stop(&f);

	start(&f, a403, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_EAUTH);
	cr_assert(strstr(f.e.msg, "sa has no access"), "%s", f.e.msg);
	cr_assert(strstr(f.e.msg, "roles/storage.objectAdmin"), "%s",
		  f.e.msg);
	stop(&f);

	start(&f, a412, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_EPRECONDITION);
	cr_assert(strstr(f.e.msg, "not json!"), "%s", f.e.msg);
	stop(&f);

	start(&f, a400, 1);
	cr_assert_eq(get(&f, false, false), CLOUD_EHTTP);
	cr_assert(strstr(f.e.msg, "invalid_grant: Bad key"), "%s", f.e.msg);
	stop(&f);
}

Test(http, connection_refused_is_a_network_error)
{
	struct http_policy p;
	struct http_client c;
	struct http_response resp;
	struct http_request req = { .method = "GET" };
	struct tiny_http srv;
	static const struct tiny_answer a[] = { { OK_JSON, 0, false } };
	char url[128];
	struct err e;

	/* A port that was just free. */
	cr_assert_eq(tiny_start(&srv, a, 1), 0);
	snprintf(url, sizeof(url), "%s/x", srv.base);
	tiny_stop(&srv);
	fast_policy(&p);
	p.max_attempts = 2;
	cr_assert_eq(http_client_init(&c, &p, &e), 0);
	http_response_init(&resp);
	req.url = url;
	cr_assert_eq(http_do(&c, &req, &resp, &e), CLOUD_ENETWORK);
	cr_assert_eq(resp.attempts, 2);
	cr_assert(strstr(e.msg, "no answer after 2 attempts"), "%s", e.msg);
	/* Nothing was sent: a request that is not idempotent is retried
	 * too. */
	http_response_release(&resp);
	http_response_init(&resp);
	req.not_idempotent = true;
	cr_assert_eq(http_do(&c, &req, &resp, &e), CLOUD_ENETWORK);
	cr_assert_eq(resp.attempts, 2);
	http_response_release(&resp);
	http_client_release(&c);
}

static int count_sink(void *ud, const void *data, size_t len, struct err *e)
{
	struct buf *b = ud;

	(void)e;
	return buf_append(b, data, len);
}

static int refusing_sink(void *ud, const void *data, size_t len,
			 struct err *e)
{
	(void)ud;
	(void)data;
	(void)len;
	return err_set(e, 12345, "the disk said no");
}

Test(http, sinks_and_caps)
{
	static const struct tiny_answer a[] = { { OK_JSON, 0, false } };
	struct fixture f;
	struct buf got;
	struct http_request req = { .method = "GET", .sink = count_sink };

	start(&f, a, 1);
	buf_init(&got);
	req.url = f.url;
	req.sink_ud = &got;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), 0, "%s", f.e.msg);
	cr_assert_str_eq(got.data, "{\"a\": true}");
	cr_assert_eq(f.resp.delivered, 11);
	cr_assert_eq(f.resp.body.len, 0);

	req.sink = refusing_sink;
	http_response_release(&f.resp);
	http_response_init(&f.resp);
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), CLOUD_EABORTED);
	cr_assert_str_eq(f.e.msg, "the disk said no");
	cr_assert_eq(tiny_requests(&f.srv), 2);

	req.sink = NULL;
	req.max_body = 4;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), CLOUD_ECORRUPT);
	cr_assert(strstr(f.e.msg, "larger than 4 bytes"), "%s", f.e.msg);
	buf_release(&got);
	stop(&f);
}

static size_t count_substr_local(const char *h, const char *needle)
{
	size_t n = 0;

	for (const char *p = h; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

struct source {
	const char *text;
	size_t off;
	unsigned rewinds;
};

static size_t source_read(void *ud, char *out, size_t len)
{
	struct source *s = ud;
	size_t left = strlen(s->text) - s->off;

	if (len > left)
		len = left;
	memcpy(out, s->text + s->off, len);
	s->off += len;
	return len;
}

static int source_rewind(void *ud)
{
	struct source *s = ud;

	s->off = 0;
	s->rewinds++;
	return 0;
}

Test(http, bodies_from_memory_and_callbacks)
{
	static const struct tiny_answer a[] = {
		{ S503, 0, false }, { OK_JSON, 0, false },
		{ OK_JSON, 0, false },
	};
	struct source s = { "streamed body", 0, 0 };
	struct http_body_source src = { source_read, source_rewind, &s };
	const char *headers[] = { "Content-Type: text/plain", NULL };
	struct http_request req = { .method = "PUT", .headers = headers,
				    .source = &src };
	struct fixture f;
	char *log;

	start(&f, a, 3);
	req.url = f.url;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(s.rewinds, 1);
	req.source = NULL;
	req.method = "POST";
	req.body = "in memory";
	req.body_len = 9;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), 0, "%s", f.e.msg);
	log = tiny_log(&f.srv);
	cr_assert_eq(count_substr_local(log, "streamed body"), 2, "%s", log);
	cr_assert(strstr(log, "POST /storage/v1/b/x/o?q=1 HTTP/1.1"), "%s",
		  log);
	cr_assert(strstr(log, "\r\n\r\nin memory"), "%s", log);
	cr_assert(strstr(log, "Content-Type: text/plain"), "%s", log);
	cr_assert(!strstr(log, "Expect:"), "%s", log);
	free(log);
	stop(&f);
}

#define KEEP_OK "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n" \
		"Content-Length: *\r\n\r\n{}"

/* A server may close a kept connection just as the next request goes out
 * on it, having read it. curl could send the request again by itself (it
 * would with a seek callback), but a request sent twice is not ours to
 * allow there: each attempt is the retry policy's. So an idempotent PUT
 * is sent again as its second attempt, its body rewound, while a POST
 * that is neither idempotent nor under a precondition fails, sent once. */
Test(http, a_kept_connection_closed_under_a_request)
{
	static const struct tiny_answer a[] = {
		{ KEEP_OK, 0, false }, { "", 0, true },
		{ KEEP_OK, 0, false }, { "", 0, true },
	};
	struct source s = { "streamed body", 0, 0 };
	struct http_body_source src = { source_read, source_rewind, &s };
	struct http_request req = { .method = "GET" };
	struct fixture f;
	char *log;

	start(&f, a, 4);
	req.url = f.url;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), 0, "%s", f.e.msg);
	f.resp.attempts = 0; /* as gcs.c counts a request's own */
	req.method = "PUT";
	req.source = &src;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(f.resp.attempts, 2);
	cr_assert_eq(s.rewinds, 1);
	req.source = NULL;
	req.method = "POST";
	req.body = "in memory";
	req.body_len = 9;
	req.not_idempotent = true;
	cr_assert_eq(http_do(&f.c, &req, &f.resp, &f.e), CLOUD_ENETWORK,
		     "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 4);
	log = tiny_log(&f.srv);
	cr_assert_eq(count_substr_local(log, "streamed body"), 2, "%s", log);
	cr_assert_eq(count_substr_local(log, "\r\n\r\nin memory"), 1, "%s",
		     log);
	free(log);
	stop(&f);
}

Test(http, escape)
{
	struct buf b;

	buf_init(&b);
	cr_assert_eq(http_escape_append(&b, "ckpt/step 1/a+b~c_d.e-f%"), 0);
	cr_assert_str_eq(b.data, "ckpt%2Fstep%201%2Fa%2Bb~c_d.e-f%25");
	buf_release(&b);
}

static char *redact(const char *s)
{
	struct buf b;

	buf_init(&b);
	cr_assert_eq(http_redact(&b, s), 0);
	return buf_detach(&b);
}

Test(http, redaction)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "Authorization: Bearer ya29.secret\nnext",
		  "Authorization: <redacted>\nnext" },
		{ "x\n  authorization: Basic Zm9v\r\n",
		  "x\n  authorization: <redacted>\r\n" },
		{ "hdr: Bearer abc.def rest", "hdr: Bearer <redacted> rest" },
		{ "{\"access_token\": \"ya29.a0\\\"b\", \"expires_in\": 3599}",
		  "{\"access_token\": \"<redacted>\", \"expires_in\": 3599}" },
		{ "grant_type=refresh_token&client_id=abc&client_secret=s3&"
		  "refresh_token=1//r",
		  "grant_type=refresh_token&client_id=abc&client_secret="
		  "<redacted>&refresh_token=<redacted>" },
		{ "assertion=eyJ.eyJ.sig&x=1", "assertion=<redacted>&x=1" },
		{ "PUT http://h/upload?uploadType=resumable"
		  "&upload_id=ABC -> 308",
		  "PUT http://h/upload?uploadType=resumable&upload_id="
		  "<redacted> -> 308" },
		{ "my_access_token=keep", "my_access_token=keep" },
		{ "X-SLURM-USER-NAME: root\nX-SLURM-USER-TOKEN: eyJ.a.b\nx",
		  "X-SLURM-USER-NAME: root\nX-SLURM-USER-TOKEN: <redacted>\n"
		  "x" },
		{ "Proxy-Authorization: Basic Zm9v",
		  "Proxy-Authorization: <redacted>" },
		{ "export SLURM_JWT=eyJ.a.b && scontrol",
		  "export SLURM_JWT=<redacted> && scontrol" },
		{ "", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = redact(cases[i].in);

		cr_assert_str_eq(got, cases[i].out, "case %zu", i);
		free(got);
	}
}

Test(http, debug_log_hides_credentials)
{
	static const struct tiny_answer a[] = { {
		"HTTP/1.1 400 Bad\r\nContent-Length: *\r\n\r\n"
		"{\"error\": \"x\", \"access_token\": \"leaked77\"}",
		0, false } };
	const char *headers[] = { "Authorization: Bearer sekrit-token-99",
				  NULL };
	struct http_request req = { .method = "GET", .headers = headers };
	struct fixture f;
	struct log_capture cap;
	char *text;

	start(&f, a, 1);
	snprintf(f.url, sizeof(f.url),
		 "%s/up?upload_id=sessionsecret&access_token=qq", f.srv.base);
	req.url = f.url;
	cr_assert_eq(log_capture_begin(&cap), 0);
	cr_expect_eq(http_do(&f.c, &req, &f.resp, &f.e), CLOUD_EHTTP);
	text = log_capture_end(&cap);
	cr_assert(text && *text);
	cr_assert(strstr(text, "GET http://127.0.0.1"), "%s", text);
	cr_assert(strstr(text, "-> 400"), "%s", text);
	cr_assert(strstr(text, "Authorization: <redacted>"), "%s", text);
	cr_assert(!strstr(text, "sekrit"), "%s", text);
	cr_assert(!strstr(text, "sessionsecret"), "%s", text);
	cr_assert(!strstr(text, "=qq"), "%s", text);
	cr_assert(!strstr(f.e.msg, "sessionsecret"), "%s", f.e.msg);
	cr_assert(!strstr(f.e.msg, "sekrit"), "%s", f.e.msg);
	free(text);
	stop(&f);
}
