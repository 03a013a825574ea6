/*
 * cloud/crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78),
 * the checksum GCS keeps for every object. The SSE4.2 crc32 instruction
 * is used when the CPU has it (checked once at run time); otherwise a
 * slicing-by-8 table walk, which gives the same values everywhere.
 */
#include "cloud/cloud.h"
#include "cloud/crc32c_test.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define CRC32C_HAVE_SSE42 1
#endif

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
#ifdef CRC32C_HAVE_SSE42
static bool crc_hw;
#endif

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] &
						       0xff];
#ifdef CRC32C_HAVE_SSE42
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Works on the inverted register, as both walks below do. */
static uint32_t crc_sw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		uint32_t lo, hi;

		/* Little-endian loads: the table walk below assumes the
		 * first byte is the lowest. */
		lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
		     (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		lo ^= c;
		c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		    crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		    crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#ifdef CRC32C_HAVE_SSE42
__attribute__((target("sse4.2")))
static uint32_t crc_hw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64;

	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8(c, *p++);
		len--;
	}
	c64 = c;
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = _mm_crc32_u64(c64, v);
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	while (len--)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw_raw(~crc, data, len);
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
#ifdef CRC32C_HAVE_SSE42
	if (crc_hw)
		return ~crc_hw_raw(~crc, data, len);
#endif
	return ~crc_sw_raw(~crc, data, len);
}
