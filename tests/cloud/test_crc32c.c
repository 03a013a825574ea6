/*
 * tests/cloud/test_crc32c.c: crc32c_update against published vectors
 * (RFC 3720, appendix B.4) and the base64 form GCS reports in x-goog-hash
 * and object metadata, through both the CPU instruction and the tables.
 */
#include "cloud/cloud.h"
#include "cloud/crc32c_test.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

struct vector {
	const char *data;
	size_t len;
	uint32_t crc;
	const char *gcs; /* base64 of the big-endian value */
};

static const struct vector vectors[] = {
	{ "", 0, 0x00000000, "AAAAAA==" },
	{ "123456789", 9, 0xe3069283, "4waSgw==" },
	{ "hello world", 11, 0xc99465aa, "yZRlqg==" },
	{ "The quick brown fox jumps over the lazy dog", 43, 0x22620404,
	  "ImIEBA==" },
};

static uint32_t gcs_value(const char *b64)
{
	unsigned char be[4];
	size_t n;

	cr_assert_eq(base64_decode(b64, strlen(b64), be, sizeof(be), &n), 0);
	cr_assert_eq(n, 4);
	return (uint32_t)be[0] << 24 | (uint32_t)be[1] << 16 |
	       (uint32_t)be[2] << 8 | be[3];
}

Test(crc32c, known_vectors_and_gcs_form)
{
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		const struct vector *v = &vectors[i];

		cr_expect_eq(crc32c_update(0, v->data, v->len), v->crc,
			     "\"%s\": %08x", v->data,
			     crc32c_update(0, v->data, v->len));
		cr_expect_eq(crc32c_update_sw(0, v->data, v->len), v->crc,
			     "\"%s\" (tables)", v->data);
		cr_expect_eq(gcs_value(v->gcs), v->crc, "%s", v->gcs);
	}
}

Test(crc32c, rfc3720_vectors)
{
	unsigned char b[32];

	memset(b, 0, sizeof(b));
	cr_expect_eq(crc32c_update(0, b, 32), 0x8a9136aa);
	cr_expect_eq(crc32c_update_sw(0, b, 32), 0x8a9136aa);
	memset(b, 0xff, sizeof(b));
	cr_expect_eq(crc32c_update(0, b, 32), 0x62a8ab43);
	cr_expect_eq(crc32c_update_sw(0, b, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	cr_expect_eq(crc32c_update(0, b, 32), 0x46dd794e);
	cr_expect_eq(crc32c_update_sw(0, b, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	cr_expect_eq(crc32c_update(0, b, 32), 0x113fdb5c);
	cr_expect_eq(crc32c_update_sw(0, b, 32), 0x113fdb5c);
}

/* Any split of the input, at any alignment, gives the same value, and
 * both ways of computing agree. */
Test(crc32c, incremental_and_unaligned)
{
	size_t len = 100003;
	unsigned char *p = malloc(len + 8);
	uint64_t x = 88172645463325252ull;
	uint32_t whole;

	cr_assert(p);
	for (size_t i = 0; i < len + 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
	whole = crc32c_update(0, p, len);
	cr_assert_eq(whole, crc32c_update_sw(0, p, len));
	for (size_t split = 0; split < 40; split++) {
		uint32_t c = crc32c_update(0, p, split);

		c = crc32c_update(c, p + split, len - split);
		cr_expect_eq(c, whole, "split at %zu", split);
		c = crc32c_update_sw(0, p, split * 7);
		c = crc32c_update_sw(c, p + split * 7, len - split * 7);
		cr_expect_eq(c, whole, "tables, split at %zu", split * 7);
	}
	for (size_t off = 1; off < 8; off++)
		cr_expect_eq(crc32c_update(0, p + off, 1000),
			     crc32c_update_sw(0, p + off, 1000),
			     "offset %zu", off);
	free(p);
}
