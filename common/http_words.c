/* http_words.c: what HTTP answers say that every client here reads the
 * same way (cloud/ and kube/ alike): the reason phrase of a status, the
 * wait a Retry-After asks for, and the retry base the environment sets
 * for tests and slow links. */
#define _GNU_SOURCE /* strptime, timegm */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest wait a Retry-After may ask for; longer ones are cut. */
#define RETRY_AFTER_MAX_S 3600

const char *http_reason_phrase(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

/* An HTTP-date in any of the three forms RFC 9110 says a recipient takes
 * (IMF-fixdate, RFC 850, asctime), always GMT; (time_t)-1 otherwise. */
static time_t http_date(const char *v)
{
	static const char *const forms[] = {
		"%a, %d %b %Y %H:%M:%S GMT",
		"%A, %d-%b-%y %H:%M:%S GMT",
		"%a %b %d %H:%M:%S %Y",
	};

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct tm tm;
		const char *end;

		memset(&tm, 0, sizeof(tm));
		end = strptime(v, forms[i], &tm);
		if (end && strspn(end, " \t\r\n") == strlen(end))
			return timegm(&tm);
	}
	return (time_t)-1;
}

unsigned http_retry_after_ms(const char *value, time_t now)
{
	const char *v = value + strspn(value, " \t");
	char *end;
	unsigned long s;
	time_t when;

	if (*v >= '0' && *v <= '9') {
		errno = 0;
		s = strtoul(v, &end, 10);
		if (strspn(end, " \t\r\n") != strlen(end))
			return 0;
		return errno || s > RETRY_AFTER_MAX_S
			       ? RETRY_AFTER_MAX_S * 1000u
			       : (unsigned)s * 1000u;
	}
	when = http_date(v);
	if (when == (time_t)-1 || when <= now ||
	    when - now >= RETRY_AFTER_MAX_S)
		return 0;
	return (unsigned)(when - now) * 1000u;
}

unsigned http_retry_base_ms(void)
{
	const char *v = getenv("SLICECTL_HTTP_RETRY_BASE_MS");
	char *end;
	unsigned long ms;

	if (!v || *v < '0' || *v > '9')
		return 0;
	errno = 0;
	ms = strtoul(v, &end, 10);
	if (errno || *end || ms == 0 || ms >= HTTP_RETRY_BASE_MAX_MS)
		return 0;
	return (unsigned)ms;
}
