/*
 * base64.c: decoding of base64 as keys and known_hosts carry it: line breaks
 * and spaces skipped, "=" padding optional but only at the end.
 */
#include "common.h"

static int value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int base64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
		  size_t *out_len)
{
	uint32_t acc = 0;
	unsigned bits = 0, pad = 0;
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;

		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=' && ++pad <= 2)
			continue;
		v = value(c);
		if (v < 0 || pad)
			return COMMON_EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return COMMON_EINVAL;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	/* Six leftover bits cannot end a valid encoding. */
	if (bits >= 6)
		return COMMON_EINVAL;
	*out_len = n;
	return 0;
}
