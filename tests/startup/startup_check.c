/* tests/startup/startup_check.c: see startup_check.h. */
#include "tests/startup/startup_check.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char tmp[PATHLEN];

void startup_setup(void)
{
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "startup"), 0);
}

void startup_teardown(void)
{
	if (tmp[0])
		rm_rf(tmp);
}

void path_in(char *out, const char *fmt, const char *name)
{
	int n = snprintf(out, PATHLEN, fmt, tmp, name);

	cr_assert(n > 0 && n < PATHLEN);
}

void mkdir_p(const char *path)
{
	char p[PATHLEN];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s",
			  p);
		*s = '/';
	}
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
}

void write_file(const char *path, const void *data, size_t len,
		       mode_t mode)
{
	char dir[PATHLEN];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	mkdir_p(dir);
	f = fopen(path, "w");
	cr_assert(f, "create %s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(path, mode), 0);
}

void write_text(const char *path, const char *text, mode_t mode)
{
	write_file(path, text, strlen(text), mode);
}

char *render(const struct startup_params *p)
{
	char *s;
	size_t len;
	struct err e;

	cr_assert_eq(startup_render(p, &s, &len, &e), 0, "%s", e.msg);
	cr_assert_eq(strlen(s), len);
	return s;
}

void render_script(const struct startup_params *p, char *script)
{
	char *s = render(p);

	path_in(script, "%s/%s", "startup.sh");
	write_text(script, s, 0755);
	free(s);
}

bool contains(const char *s, const char *needle)
{
	return s && strstr(s, needle) != NULL;
}
