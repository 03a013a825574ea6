/*
 * tests/cloud/test_tpu_wait.c: the Cloud TPU API client's waits for a
 * queued resource's state against a loopback server answering fixed raw
 * responses: their progress callbacks, failed and suspended states,
 * deadlines, a resource that disappears and an API that fails.
 */
#include "cloud/cloud.h"
#include "cloud/tpu.h"
#include "tests/cloud/tiny_http.h"
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tpu, .init = env_setup, .timeout = 60);

/* Waits for qr1 to reach state, with no deadline and no callback, against
 * the answers a; f stays up for the caller to look at. */
static int wait_against(struct fx *f, const struct tiny_answer *a, size_t n,
			const char *state, struct tpu_qr *q)
{
	start(f, a, n);
	return tpu_qr_wait(f->c, "qr1", state, 0, NULL, NULL, q, &f->e);
}

Test(tpu, wait_reports_each_new_state)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("WAITING_FOR_RESOURCES")),
		OK(QR_STATE("WAITING_FOR_RESOURCES")),
		S503,
		OK(QR_STATE("PROVISIONING")),
		OK(QR_STATE("PROVISIONING")),
		OK(QR_STATE("ACTIVE")),
	};
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 6);
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 10000, on_progress,
				 &seen, &q, &f.e), 0, "%s", f.e.msg);
	cr_assert_eq(seen.n, 3);
	cr_assert_str_eq(seen.states[0], "WAITING_FOR_RESOURCES");
	cr_assert_str_eq(seen.states[1], "PROVISIONING");
	cr_assert_str_eq(seen.states[2], "ACTIVE");
	cr_assert_leq(seen.elapsed[0], seen.elapsed[1]);
	cr_assert_str_eq(q.state, "ACTIVE");
	cr_assert_eq(q.nnodes, 2);
	cr_assert_eq(tiny_requests(&f.srv), 6);
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, wait_already_there_and_no_callback)
{
	static const struct tiny_answer a[] = { OK(QR_STATE("ACTIVE")) };
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 1, "ACTIVE", NULL), 0, "%s", f.e.msg);
	cr_assert_eq(tiny_requests(&f.srv), 1);
	stop(&f);
}

Test(tpu, wait_ends_on_failed)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("PROVISIONING")),
		OK("{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"FAILED\","
		   "\"failedData\":{\"error\":{\"code\":8,\"message\":"
		   "\"Insufficient capacity for v5litepod-8\"}}}}"),
	};
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;

	start(&f, a, 2);
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 0, on_progress, &seen,
				 &q, &f.e), CLOUD_EFAILED);
	cr_assert_str_eq(f.e.msg, "queued resource qr1 failed: code 8: "
			 "Insufficient capacity for v5litepod-8");
	cr_assert_eq(seen.n, 2);
	cr_assert_str_eq(seen.states[1], "FAILED");
	tpu_qr_release(&q);
	stop(&f);
}

Test(tpu, wait_ends_on_suspended_unless_asked_for)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("ACTIVE")),
		OK("{\"name\":\"" QR_NAME "\",\"state\":{\"state\":\"SUSPENDING\","
		   "\"stateInitiator\":\"SERVICE\"}}"),
	};
	struct tpu_qr q;
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 2, "PROVISIONING", &q), CLOUD_EFAILED);
	cr_assert(strstr(f.e.msg, "SUSPENDING, by SERVICE"), "%s", f.e.msg);
	stop(&f);

	{
		static const struct tiny_answer b[] = {
			OK(QR_STATE("SUSPENDING")), OK(QR_STATE("SUSPENDED")),
		};

		/* On the way to what was asked for: not a reason to stop. */
		cr_assert_eq(wait_against(&f, b, 2, "SUSPENDED", &q), 0, "%s",
			     f.e.msg);
		cr_assert_eq(tiny_requests(&f.srv), 2);
		tpu_qr_release(&q);
		stop(&f);
	}
	{
		static const struct tiny_answer b[] = {
			OK(QR_STATE("SUSPENDED")),
		};

		cr_assert_eq(wait_against(&f, b, 1, "SUSPENDED", &q), 0, "%s",
			     f.e.msg);
		cr_assert_str_eq(q.state, "SUSPENDED");
		tpu_qr_release(&q);
		stop(&f);
	}
}

Test(tpu, wait_times_out)
{
	static const struct tiny_answer a[] = { OK(QR_STATE("ACCEPTED")) };
	struct seen seen = { .n = 0 };
	struct tpu_qr q;
	struct fx f;
	uint64_t t0;

	setenv("SLICECTL_TPU_POLL_MS", "20", 1);
	start(&f, a, 1);
	t0 = mono_ms();
	cr_assert_eq(tpu_qr_wait(f.c, "qr1", "ACTIVE", 300, on_progress, &seen,
				 &q, &f.e), CLOUD_ETIMEDOUT);
	cr_assert_geq(mono_ms() - t0, 300);
	cr_assert_lt(mono_ms() - t0, 3000);
	cr_assert(strstr(f.e.msg, "queued resource qr1 is still ACCEPTED "
			 "after") && strstr(f.e.msg, "waiting for ACTIVE"),
		  "%s", f.e.msg);
	cr_assert_eq(seen.n, 1);
	/* Backoff doubles: 20, 40, 80, 160 ms fill 300 ms in a few polls. */
	cr_assert_geq(tiny_requests(&f.srv), 3);
	cr_assert_leq(tiny_requests(&f.srv), 8);
	stop(&f);
}

Test(tpu, wait_when_it_disappears_or_the_api_fails)
{
	static const struct tiny_answer a[] = {
		OK(QR_STATE("ACCEPTED")), QR_404,
	};
	static const struct tiny_answer b[] = {
		OK(QR_STATE("ACCEPTED")),
		ERR("500 Internal Server Error", 500, "backend down"),
	};
	struct tpu_qr q;
	struct fx f;

	cr_assert_eq(wait_against(&f, a, 2, "ACTIVE", &q), CLOUD_ENOTFOUND);
	cr_assert(strstr(f.e.msg, "disappeared"), "%s", f.e.msg);
	stop(&f);

	cr_assert_eq(wait_against(&f, b, 2, "ACTIVE", &q), CLOUD_EHTTP);
	cr_assert(strstr(f.e.msg, "backend down (after retries)"), "%s",
		  f.e.msg);
	cr_assert_gt(tiny_requests(&f.srv), 3);
	stop(&f);
}
