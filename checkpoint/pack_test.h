/*
 * checkpoint/pack_test.h: private to pack.c and its tests. A hook that
 * lets a test change a file between the moment its tar header is written
 * and the moment its contents are read, which no real-time test can hit
 * reliably.
 */
#ifndef SLICECTL_CHECKPOINT_PACK_TEST_H
#define SLICECTL_CHECKPOINT_PACK_TEST_H

/* NULL except in tests; called with the path the packer is about to read. */
extern void (*pack_test_before_data)(const char *path);

#endif
