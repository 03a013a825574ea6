/*
 * tests/fuzz/fuzz.h: what every fuzz target shares. A target defines the
 * two libFuzzer entry points; it is linked either with libFuzzer (clang,
 * -Dfuzz=true, scripts/fuzz) or with replay.c, which feeds it the files
 * of its seed corpus as a regression test of the ordinary build.
 *
 * Parsers that read files or stores are fed through those same files and
 * stores, in a private directory under TMPDIR that is removed at exit.
 */
#ifndef SLICECTL_TESTS_FUZZ_H
#define SLICECTL_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Quiets the parsers' warnings (a fuzzer makes millions of bad inputs)
 * and makes the private directory; aborts when it cannot. */
void fuzz_setup(void);

/* The private directory (no trailing '/'). */
const char *fuzz_dir(void);

/* Replaces the file fuzz_dir()/name (its parent must exist) with data;
 * aborts on failure, which is the harness's, not the parser's. */
void fuzz_write(const char *name, const uint8_t *data, size_t size);

/* fuzz_dir()/name in a static buffer. */
const char *fuzz_path(const char *name);

/* Stops the run as a finding: a property the parser promises is broken. */
#define FUZZ_ASSERT(cond) \
	((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))
_Noreturn void fuzz_fail(const char *what, const char *file, int line);

#endif
