/*
 * tests/checkpoint/ckpt_check.h: what the checkpoint tests share: a
 * file:// run in a temporary directory, trees to save and compare, and
 * archives crafted to write outside their destination. Each fails the
 * current Criterion test.
 */
#ifndef SLICECTL_TESTS_CKPT_CHECK_H
#define SLICECTL_TESTS_CKPT_CHECK_H

#include "checkpoint/checkpoint.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PATHLEN 4096

/* Short enough that every path built from it fits PATHLEN: the test's
 * directory, ROOT/bucket/run-1, and that as a file:// URL. */
extern char root[1024];
extern char bucket[1200];
extern char url[1300];

/* Makes them: the suite's .init. */
void ckpt_setup(void);
/* Removes root, locked directories too: the suite's .fini. */
void ckpt_teardown(void);
/* out (PATHLEN) = ROOT/name. */
void path_of(char *out, const char *name);
void write_text(const char *dir, const char *name, const char *text,
		mode_t mode);
/* len pseudo-random bytes from seed. */
void write_random(const char *path, size_t len, uint64_t seed);
/* A small tree with what checkpoints hold: modes, symlinks (inside and
 * dangling), empty and locked directories, nested files. */
void make_tree(const char *dir, const char *tag);
/* Same names, types, modes, symlink targets and bytes. */
void compare_trees(const char *a, const char *b);
/* The store at url (to store_close). */
struct store *open_store(void);
/* Entries directly in dir whose names start with prefix. */
size_t count_entries(const char *dir, const char *prefix);
/* Writes tarf: a zstd tar (PAX) of spec, a Python list of (name, kind,
 * target) with kind 'f' (a 4-byte file), 's' (symlink) or 'h' (hard
 * link), made by Python's tarfile. */
void write_evil_tar(const char *spec, const char *tarf);

#endif
