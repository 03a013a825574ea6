/* tests/fuzz/fuzz_store.c: the private directory's store (fuzz.h), apart
 * from fuzz_util.c so that targets without a store do not link cloud/. */
#include "fuzz.h"

#include "cloud/cloud.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

struct store *fuzz_store(const char *name)
{
	static struct store *s;
	char url[PATH_MAX + 16];
	struct err e;

	if (s)
		return s;
	/* Opening a store to read it need not create its folder. */
	if (mkdir(fuzz_path(name), 0755)) {
		perror("fuzz: mkdir");
		abort();
	}
	snprintf(url, sizeof(url), "file://%s", fuzz_path(name));
	if (store_open(&s, url, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	return s;
}
