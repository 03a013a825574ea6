/*
 * env_number.c: a number from an environment variable that tunes a
 * period (tests shorten them, operators may lengthen them). A value that
 * is not one is said once and ignored: a typo must not stop a daemon.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>

unsigned env_number(const char *name, unsigned long min, unsigned long max,
		    unsigned dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || *v == '-' || n < min || n > max) {
		log_warn("%s=%s is not a number from %lu to %lu: taking %u",
			 name, v, min, max, dflt);
		return dflt;
	}
	return (unsigned)n;
}
