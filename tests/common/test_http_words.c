/* http_words.c: reason phrases, Retry-After values in both forms, and
 * SLICECTL_HTTP_RETRY_BASE_MS. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

Test(http_words, reason_phrases)
{
	cr_assert_str_eq(http_reason_phrase(404), "Not Found");
	cr_assert_str_eq(http_reason_phrase(422), "Unprocessable Entity");
	cr_assert_str_eq(http_reason_phrase(503), "Service Unavailable");
	cr_assert_str_eq(http_reason_phrase(299), "");
}

Test(http_words, retry_after_seconds)
{
	cr_assert_eq(http_retry_after_ms("7", 0), 7000);
	cr_assert_eq(http_retry_after_ms(" 2 \r\n", 0), 2000);
	cr_assert_eq(http_retry_after_ms("99999", 0), 3600u * 1000);
	cr_assert_eq(http_retry_after_ms("3x", 0), 0);
	cr_assert_eq(http_retry_after_ms("", 0), 0);
	cr_assert_eq(http_retry_after_ms("soon", 0), 0);
}

Test(http_words, retry_after_dates)
{
	/* 1994-11-06T08:49:37Z, RFC 9110's example, in its three forms. */
	const time_t t = 784111777;

	cr_assert_eq(http_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT",
					 t - 30), 30000);
	cr_assert_eq(http_retry_after_ms("Sunday, 06-Nov-94 08:49:37 GMT\r\n",
					 t - 5), 5000);
	cr_assert_eq(http_retry_after_ms("Sun Nov  6 08:49:37 1994", t - 1),
		     1000);
	/* Past, or further than an hour: no wait from it. */
	cr_assert_eq(http_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT",
					 t + 1), 0);
	cr_assert_eq(http_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT",
					 t - 7200), 0);
}

Test(http_words, retry_base_from_the_environment)
{
	unsetenv("SLICECTL_HTTP_RETRY_BASE_MS");
	cr_assert_eq(http_retry_base_ms(), 0);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "10", 1);
	cr_assert_eq(http_retry_base_ms(), 10);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "0", 1);
	cr_assert_eq(http_retry_base_ms(), 0);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "60000", 1);
	cr_assert_eq(http_retry_base_ms(), 0);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "10ms", 1);
	cr_assert_eq(http_retry_base_ms(), 0);
	unsetenv("SLICECTL_HTTP_RETRY_BASE_MS");
}
