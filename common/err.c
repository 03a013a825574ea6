/* err.c: an error code with a message the caller can print as it is. */
#include "common.h"

#include <string.h>

void err_init(struct err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int err_errno(struct err *e, int code, int errnum, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < sizeof(e->msg))
			snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, ": %s",
				 strerror(errnum));
		e->code = code;
	}
	return code;
}

void err_prefix(struct err *e, const char *fmt, ...)
{
	char old[sizeof(e->msg)];
	va_list ap;
	size_t len;
	int n;

	if (!e)
		return;
	memcpy(old, e->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 2 >= sizeof(e->msg))
		return;
	/* What does not fit of the old message is cut, not overflowed. */
	memcpy(e->msg + n, ": ", 2);
	n += 2;
	len = strlen(old);
	if (len > sizeof(e->msg) - (size_t)n - 1)
		len = sizeof(e->msg) - (size_t)n - 1;
	memcpy(e->msg + n, old, len);
	e->msg[(size_t)n + len] = '\0';
}
