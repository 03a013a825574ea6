/* clock.c: monotonic time (wall-clock jumps must never fire a timeout),
 * and wall-clock times as the stores and the specs write them. */
#include "common.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mono_ms(void)
{
	return mono_us() / 1000u;
}

void rfc3339_now(char *out, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;

	if (!gmtime_r(&now, &tm) ||
	    !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, cap, "1970-01-01T00:00:00Z");
}

static bool two_digits(const char *p, int *v)
{
	if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9')
		return false;
	*v = (p[0] - '0') * 10 + (p[1] - '0');
	return true;
}

time_t rfc3339_parse(const char *t)
{
	struct tm tm;
	int y1, y2, off_h, off_m, off = 0;
	const char *p;

	memset(&tm, 0, sizeof(tm));
	if (!t || strlen(t) < 20 || !two_digits(t, &y1) ||
	    !two_digits(t + 2, &y2) || t[4] != '-' ||
	    !two_digits(t + 5, &tm.tm_mon) || t[7] != '-' ||
	    !two_digits(t + 8, &tm.tm_mday) ||
	    (t[10] != 'T' && t[10] != 't' && t[10] != ' ') ||
	    !two_digits(t + 11, &tm.tm_hour) || t[13] != ':' ||
	    !two_digits(t + 14, &tm.tm_min) || t[16] != ':' ||
	    !two_digits(t + 17, &tm.tm_sec))
		return (time_t)-1;
	p = t + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return (time_t)-1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if ((*p == 'Z' || *p == 'z') && !p[1]) {
		off = 0;
	} else if ((*p == '+' || *p == '-') && two_digits(p + 1, &off_h) &&
		   p[3] == ':' && two_digits(p + 4, &off_m) && !p[6]) {
		off = (off_h * 60 + off_m) * 60 * (*p == '-' ? -1 : 1);
	} else {
		return (time_t)-1;
	}
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
	    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
	    tm.tm_sec > 60)
		return (time_t)-1;
	tm.tm_year = y1 * 100 + y2 - 1900;
	tm.tm_mon -= 1;
	return timegm(&tm) - off;
}
