/*
 * cloud/crc32c_test.h: private to crc32c.c and its tests. Both ways of
 * computing CRC-32C must agree, and a test on a CPU with SSE4.2 would
 * otherwise never run the table walk.
 */
#ifndef SLICECTL_CLOUD_CRC32C_TEST_H
#define SLICECTL_CLOUD_CRC32C_TEST_H

#include <stddef.h>
#include <stdint.h>

/* crc32c_update, always through the slicing-by-8 tables. */
uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len);

#endif
