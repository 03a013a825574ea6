/*
 * tests/checkpoint/pack_check.h: what pack_tree's tests (test_pack*.c)
 * share: a temporary directory per test, trees to pack, a writer into a
 * file that can be told to fail, and unpacking as the hosts do
 * (`zstd -dc | tar -xf -`) to compare with the source. Each fails the
 * current Criterion test.
 */
#ifndef SLICECTL_TESTS_PACK_CHECK_H
#define SLICECTL_TESTS_PACK_CHECK_H

#include "checkpoint/checkpoint.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PATHLEN 4096

/* A writer into a file, which can be told to fail. */
struct file_sink {
	int fd;
	size_t calls;
	size_t calls_after_failure;
	size_t short_chunks; /* smaller than ZSTD_CStreamOutSize() */
	uint64_t written;
	uint64_t fail_after; /* 0: never */
	bool failed;
};

/* The tree every format test uses; returns its counts. */
struct tree_counts {
	uint64_t files, dirs, symlinks, bytes;
};

extern char tmp_root[PATHLEN];

/* The suite's .init and .fini: tmp_root made, and removed with whatever
 * a test locked. */
void setup_tmp(void);
void teardown_tmp(void);
/* out (PATHLEN) = a/b, or tmp_root/name. */
void path_join(char *out, const char *a, const char *b);
void tmp_path(char *out, const char *name);
void write_text(const char *dir, const char *name, const char *text,
		mode_t mode);
/* len bytes that do not compress, the same for the same seed. */
void write_random(const char *path, size_t len, uint64_t seed);
void make_dir(const char *dir, const char *name, mode_t mode);
void make_symlink(const char *dir, const char *name, const char *target);
/* A pack_tree writer; ud is a struct file_sink. */
int file_write(void *ud, const void *data, size_t len, struct err *e);
/* pack_tree of src into out (NULL: nowhere) with its return code; checks
 * that only the last chunk was short and that bytes_out is what the
 * writer got. */
int pack_to(const char *src, const char *out, unsigned threads,
	    struct pack_stats *st, struct err *e);
void pack_ok(const char *src, const char *out, unsigned threads,
	     struct pack_stats *st);
/* Unpacks as the hosts do; returns what tar printed on stderr (to
 * free). */
char *unpack(const char *archive, const char *out_dir);
bool same_bytes(const char *a, const char *b);
/* Compares trees a (source) and b (unpacked); sockets, fifos and devices
 * in a are expected to be missing from b. */
void compare_trees(const char *a, const char *b);
/* Odd names, modes, links, a fifo, 40 levels deep; c: what pack_tree
 * should count. */
void build_odd_tree(const char *src, struct tree_counts *c);

#endif
