/* log.c: messages for people, on stderr, one line each. */
#include "common.h"

static const char *prog = "slicectl";
static enum log_level current = LOG_INFO;

void log_setup(const char *progname, enum log_level level)
{
	prog = progname;
	current = level;
}

enum log_level log_level(void)
{
	return current;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "", "debug" };
	char line[2048];
	va_list ap;

	if (level > current)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (level == LOG_INFO)
		fprintf(stderr, "%s: %s\n", prog, line);
	else
		fprintf(stderr, "%s: %s: %s\n", prog, names[level], line);
}
