/*
 * tests/startup/startup_check.h: what the startup script's tests share: a
 * temporary directory per test, files written there, the script rendered
 * there, and text checks, each failing the current Criterion test.
 */
#ifndef SLICECTL_TESTS_STARTUP_CHECK_H
#define SLICECTL_TESTS_STARTUP_CHECK_H

#include "startup/startup.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PATHLEN 4096

/* A well-formed supervisor sha256. */
#define SHA_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Every test's files: TMP/run (the run's prefix), TMP/root (SLICE_ROOT). */
extern char tmp[PATHLEN];

/* Makes tmp: the suite's .init. */
void startup_setup(void);
/* Removes it: the suite's .fini. */
void startup_teardown(void);
/* out (PATHLEN) = fmt with tmp and name. */
void path_in(char *out, const char *fmt, const char *name);
void mkdir_p(const char *path);
/* Writes path (making its directory) with mode. */
void write_file(const char *path, const void *data, size_t len,
		mode_t mode);
void write_text(const char *path, const char *text, mode_t mode);
/* The script for p (to free). */
char *render(const struct startup_params *p);
/* Renders p into TMP/startup.sh. */
void render_script(const struct startup_params *p, char *script);
/* s (may be NULL) holds needle. */
bool contains(const char *s, const char *needle);

#define assert_has(s, needle) \
	cr_assert(contains((s), (needle)), "no \"%s\" in:\n%s", (needle), (s))
#define assert_lacks(s, needle) \
	cr_assert(!contains((s), (needle)), "\"%s\" in:\n%s", (needle), (s))

#endif
