/*
 * shquote.c: quoting for a POSIX shell. Values go inside single quotes; a
 * single quote becomes '\'' so any byte string survives one round of parsing.
 */
#include "common.h"

#include <string.h>

int shq_append(struct buf *b, const char *s)
{
	if (buf_append(b, "'", 1))
		return COMMON_ENOMEM;
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			if (buf_append(b, "'\\''", 4))
				return COMMON_ENOMEM;
		} else if (buf_append(b, p, 1)) {
			return COMMON_ENOMEM;
		}
	}
	return buf_append(b, "'", 1);
}

bool env_name_valid(const char *name, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     c == '_';
		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}
