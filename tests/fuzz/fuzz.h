/*
 * tests/fuzz/fuzz.h: what every fuzz target shares. A target defines
 * LLVMFuzzerTestOneInput; fuzz_util.c defines LLVMFuzzerInitialize. It is
 * linked either with libFuzzer (clang, -Dfuzz=true, scripts/fuzz) or with
 * replay.c, which feeds it its seeds and fixed findings as a test of the
 * ordinary build.
 *
 * Parsers that read files or stores are fed through those same files and
 * stores, in a private directory under TMPDIR that is removed at exit.
 * The parsers' warnings are off: a fuzzer makes millions of bad inputs.
 */
#ifndef SLICECTL_TESTS_FUZZ_H
#define SLICECTL_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct store;

/* Replaces the file name in the private directory (its parent must
 * exist) with data; aborts on failure, the harness's, not the parser's. */
void fuzz_write(const char *name, const uint8_t *data, size_t size);

/* The private directory's path with "/name", in a static buffer. */
const char *fuzz_path(const char *name);

/* The file:// store in the folder name of the private directory, opened
 * on the first call (one store per target); aborts when it cannot be. */
struct store *fuzz_store(const char *name);

/* Stops the run as a finding: a property the parser promises is broken. */
#define FUZZ_ASSERT(cond) \
	((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))
_Noreturn void fuzz_fail(const char *what, const char *file, int line);

#endif
