/*
 * fuzz_commit.c: COMMIT manifests as `ckpt ls`, restore and prune read
 * them (ckpt_list, checkpoint/ckpt_list.c), from a file:// store holding
 * one step whose COMMIT is the input. A manifest that does not parse
 * makes the step corrupt, never the listing fail; one that parses names
 * only part files of that step.
 */
#include "fuzz.h"

#include "checkpoint/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STEP 7
#define STEP_DIR "store/checkpoints/step-0000000007"

/* The store, with the step's folder made the first time. */
static struct store *step_store(void)
{
	static bool made;
	struct store *s = fuzz_store("store");

	if (!made && (mkdir(fuzz_path("store/checkpoints"), 0755) ||
		      mkdir(fuzz_path(STEP_DIR), 0755))) {
		perror("fuzz: mkdir");
		abort();
	}
	made = true;
	return s;
}

static bool part_name(const char *s)
{
	static const char suffix[] = ".tar.zst";
	size_t n = strlen(s);

	return n > sizeof(suffix) - 1 && !strchr(s, '/') && s[0] != '.' &&
	       !strcmp(s + n - (sizeof(suffix) - 1), suffix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store *s = step_store();
	struct ckpt_list l;
	struct err e;
	const struct ckpt_step *st;

	fuzz_write(STEP_DIR "/COMMIT", data, size);
	FUZZ_ASSERT(ckpt_list(s, &l, &e) == 0);
	FUZZ_ASSERT(l.n == 1);
	st = &l.v[0];
	FUZZ_ASSERT(st->step == STEP && st->committed);
	FUZZ_ASSERT(st->corrupt || st->nparts >= 1);
	FUZZ_ASSERT(memchr(st->time, '\0', sizeof(st->time)));
	for (size_t i = 0; i < st->nparts; i++)
		FUZZ_ASSERT(part_name(st->parts[i].name) &&
			    st->parts[i].generation > 0);
	ckpt_list_release(&l);
	return 0;
}
