/*
 * slurm_rest.c's calls through cloud/'s HTTP transport, against a
 * loopback server that answers exactly what each case needs (tiny_http):
 * a 503 with Retry-After and a connection dropped after the request are
 * retried for the calls that may run twice, a submission is not (it
 * could queue a second job), Slurm's own 500 is final, and the token
 * never shows in a message or a log line.
 */
#include "cloud/cloud.h"
#include "launcher/target/slurm/slurm.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_JSON "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
	"Content-Length: *\r\n\r\n{\"jobs\": [{\"job_state\": \"RUNNING\", " \
	"\"state_reason\": \"None\", \"nodes\": \"n[1-2]\", " \
	"\"restart_cnt\": 2}], \"errors\": []}"
#define EMPTY_JSON "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
	"Content-Length: *\r\n\r\n{\"errors\": []}"
#define BUSY_RETRY_AFTER "HTTP/1.1 503 Service Unavailable\r\n" \
	"Retry-After: 1\r\nContent-Length: *\r\n\r\nbusy"
#define S503 "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
#define TOKEN "eyJsecret.token.77"

static struct tiny_http srv;

static void setup(void)
{
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("SLURM_JWT");
}

static void serve(const struct tiny_answer *a, size_t n)
{
	cr_assert_eq(tiny_start(&srv, a, n), 0);
}

static struct slurm_spec spec(void)
{
	struct slurm_spec s = { .run = "r1", .partition = "debug",
				.nodes = 2, .grace_s = 30 };

	return s;
}

Test(slurm_rest_retry, status_after_503_with_retry_after_and_a_drop,
     .init = setup)
{
	static const struct tiny_answer a[] = {
		{ BUSY_RETRY_AFTER, 0, false }, { NULL, 0, true },
		{ JOB_JSON, 0, false },
	};
	struct slurm_job_info info;
	struct err e;
	uint64_t t0 = mono_ms();

	serve(a, 3);
	err_init(&e);
	cr_assert_eq(slurm_rest_job(srv.base, "12", &info, &e), 0, "%s",
		     e.msg);
	cr_expect_str_eq(info.state, "RUNNING");
	cr_expect_eq(info.restarts, 2);
	cr_expect_eq(tiny_requests(&srv), 3);
	/* The 503's Retry-After: 1 s, not the 5 ms backoff. */
	cr_expect_geq(mono_ms() - t0, 1000, "%llu ms",
		      (unsigned long long)(mono_ms() - t0));
	tiny_stop(&srv);
}

Test(slurm_rest_retry, release_and_cancel_are_retried, .init = setup)
{
	static const struct tiny_answer a[] = {
		{ NULL, 0, true }, { S503, 0, false }, { EMPTY_JSON, 0, false },
	};
	struct err e;
	char *log;

	serve(a, 3);
	err_init(&e);
	cr_assert_eq(slurm_rest_release(srv.base, "12", &e), 0, "%s", e.msg);
	cr_expect_eq(tiny_requests(&srv), 3);
	log = tiny_log(&srv);
	cr_expect(strstr(log, "POST /slurm/v0.0.38/job/12 "), "%s", log);
	free(log);
	tiny_stop(&srv);

	serve(a, 3);
	cr_assert_eq(slurm_rest_cancel(srv.base, "12", &e), 0, "%s", e.msg);
	cr_expect_eq(tiny_requests(&srv), 3);
	tiny_stop(&srv);
}

Test(slurm_rest_retry, slurm_refusals_are_final, .init = setup)
{
	static const struct tiny_answer a[] = { {
		"HTTP/1.1 500 Internal Server Error\r\nContent-Length: *\r\n"
		"\r\n{\"errors\": [{\"error\": \"Invalid job id specified\"}]}",
		0, false } };
	struct slurm_job_info info;
	struct err e;

	serve(a, 1);
	err_init(&e);
	cr_assert_eq(slurm_rest_job(srv.base, "99", &info, &e), 0, "%s",
		     e.msg);
	cr_expect(info.missing);
	cr_expect_eq(tiny_requests(&srv), 1);
	tiny_stop(&srv);
}

Test(slurm_rest_retry, a_submission_is_never_sent_twice, .init = setup)
{
	static const struct tiny_answer busy[] = {
		{ S503, 0, false }, { EMPTY_JSON, 0, false } };
	static const struct tiny_answer drop[] = {
		{ NULL, 0, true }, { EMPTY_JSON, 0, false } };
	struct slurm_spec s = spec();
	struct err e;
	char id[32];

	serve(busy, 2);
	err_init(&e);
	cr_assert_eq(slurm_rest_submit(srv.base, &s, "#!/bin/sh\n", id,
				       sizeof(id), &e), COMMON_EIO);
	cr_expect(strstr(e.msg, "HTTP 503"), "%s", e.msg);
	cr_expect_eq(tiny_requests(&srv), 1);
	tiny_stop(&srv);

	/* Dropped once sent: it may have been queued, and the error says
	 * where to look. */
	serve(drop, 2);
	cr_assert_eq(slurm_rest_submit(srv.base, &s, "#!/bin/sh\n", id,
				       sizeof(id), &e), COMMON_EIO);
	cr_expect(strstr(e.msg, "did not answer POST /job/submit"), "%s",
		  e.msg);
	cr_expect(strstr(e.msg, "squeue --name r1"), "%s", e.msg);
	cr_expect_eq(tiny_requests(&srv), 1);
	tiny_stop(&srv);
}

Test(slurm_rest_retry, a_submission_that_never_connected_is_retried,
     .init = setup)
{
	static const struct tiny_answer a[] = { { EMPTY_JSON, 0, false } };
	struct slurm_spec s = spec();
	char base[64], id[32];
	struct err e;
	uint64_t t0 = mono_ms();

	/* A port that was just free: every attempt is refused. */
	serve(a, 1);
	snprintf(base, sizeof(base), "%s", srv.base);
	tiny_stop(&srv);
	err_init(&e);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "200", 1);
	cr_assert_eq(slurm_rest_submit(base, &s, "#!/bin/sh\n", id,
				       sizeof(id), &e), COMMON_EIO);
	cr_expect(strstr(e.msg, "did not answer POST /job/submit"), "%s",
		  e.msg);
	cr_expect_null(strstr(e.msg, "squeue"), "%s", e.msg);
	/* Retried: some backoff was waited through. */
	cr_expect_geq(mono_ms() - t0, 200, "%llu ms",
		      (unsigned long long)(mono_ms() - t0));
}

Test(slurm_rest_retry, the_token_is_sent_but_never_shown, .init = setup)
{
	static const struct tiny_answer a[] = {
		{ "HTTP/1.1 401 Unauthorized\r\nContent-Length: *\r\n\r\n"
		  "X-SLURM-USER-TOKEN: " TOKEN " refused", 0, false },
	};
	struct log_capture cap;
	struct slurm_job_info info;
	char *text, *log;
	struct err e;

	setenv("SLURM_JWT", TOKEN, 1);
	serve(a, 1);
	err_init(&e);
	cr_assert_eq(log_capture_begin(&cap), 0);
	cr_expect_eq(slurm_rest_job(srv.base, "12", &info, &e), COMMON_EIO);
	text = log_capture_end(&cap);
	cr_assert(text);
	log = tiny_log(&srv);
	cr_expect(strstr(log, "X-SLURM-USER-TOKEN: " TOKEN), "%s", log);
	free(log);
	cr_expect(strstr(e.msg, "HTTP 401") && strstr(e.msg, "SLURM_JWT"),
		  "%s", e.msg);
	cr_expect(strstr(e.msg, "<redacted>"), "%s", e.msg);
	cr_expect_null(strstr(e.msg, TOKEN), "%s", e.msg);
	cr_expect(strstr(text, "X-SLURM-USER-TOKEN: <redacted>"), "%s", text);
	cr_expect_null(strstr(text, TOKEN), "%s", text);
	free(text);
	tiny_stop(&srv);
	unsetenv("SLURM_JWT");
}
