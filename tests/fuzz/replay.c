/*
 * tests/fuzz/replay.c: runs a fuzz target over files, without libFuzzer,
 * so the ordinary build (gcc, and its --sanitize variant) replays every
 * seed and every saved finding as a test. Arguments are files or
 * directories of files; it exits non-zero when one cannot be read (a
 * finding aborts by itself).
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (;;) {
		uint8_t *bigger;
		size_t n;

		if (len == cap) {
			cap = cap ? 2 * cap : 4096;
			bigger = realloc(data, cap);
			if (!bigger) {
				fprintf(stderr, "replay: out of memory\n");
				free(data);
				fclose(f);
				return 1;
			}
			data = bigger;
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(data);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int replay(const char *path, unsigned *count)
{
	struct dirent **names;
	struct stat st;
	int n, bad = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char sub[4096];

		if (names[i]->d_name[0] != '.' &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/%s", path,
				     names[i]->d_name) < sizeof(sub))
			bad |= replay(sub, count);
		free(names[i]);
	}
	free(names);
	return bad;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		bad |= replay(argv[i], &count);
	printf("replayed %u inputs\n", count);
	return bad || !count;
}
