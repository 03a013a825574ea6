/*
 * json.c: JSON string literals from arbitrary bytes. Remote output is not
 * guaranteed to be UTF-8; invalid sequences become U+FFFD so that every
 * line we emit parses.
 */
#include "common.h"

/* Length of the valid UTF-8 sequence at p, or 0 if it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

bool json_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0, len; i < n; i += len) {
		len = utf8_len(p + i, n - i);
		if (!len)
			return false;
	}
	return true;
}

int json_append_string(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	if (buf_reserve(b, n + 2) || buf_append(b, "\"", 1))
		return COMMON_ENOMEM;
	while (i < n) {
		size_t len = utf8_len(p + i, n - i);
		int rc;

		if (len == 0) {
			rc = buf_appends(b, "\\ufffd");
			len = 1;
		} else if (p[i] == '"') {
			rc = buf_appends(b, "\\\"");
		} else if (p[i] == '\\') {
			rc = buf_appends(b, "\\\\");
		} else if (p[i] == '\n') {
			rc = buf_appends(b, "\\n");
		} else if (p[i] == '\t') {
			rc = buf_appends(b, "\\t");
		} else if (p[i] == '\r') {
			rc = buf_appends(b, "\\r");
		} else if (p[i] < 0x20 || p[i] == 0x7f) {
			rc = buf_appendf(b, "\\u%04x", p[i]);
		} else {
			rc = buf_append(b, p + i, len);
		}
		if (rc)
			return COMMON_ENOMEM;
		i += len;
	}
	return buf_append(b, "\"", 1);
}
