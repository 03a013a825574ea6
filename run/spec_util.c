/*
 * run/spec_util.c: text helpers of control.json and the
 * status objects (spec_util.h).
 */
#include "run/spec_util.h"

#include <stdio.h>
#include <string.h>

void spec_copy_text(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

bool spec_one_of(const char *s, const char *const *words, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, words[i]))
			return true;
	return false;
}

int spec_append_text(struct buf *b, const char *key, const char *value)
{
	int r = buf_appendf(b, ",\n  \"%s\": ", key);

	return r ? r : json_append_string(b, value, strlen(value));
}
