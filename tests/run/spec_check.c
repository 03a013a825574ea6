/* tests/run/spec_check.c: see spec_check.h. */
#include "tests/run/spec_check.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char root[512];
char url[600];

void spec_setup(void)
{
	cr_assert_eq(make_temp_dir(root, sizeof(root), "spec"), 0);
	snprintf(url, sizeof(url), "file://%s/bucket/run-1", root);
	log_setup("spec_check", LOG_ERROR);
}

void spec_teardown(void)
{
	if (root[0])
		rm_rf(root);
}

struct store *open_store(void)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

bool is_rfc3339_utc(const char *t)
{
	int y, mo, d, h, mi, s, n = 0;

	return strlen(t) == 20 &&
	       sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi,
		      &s, &n) == 6 && n == 20 && y >= 2020 && mo >= 1 &&
	       mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && s < 61;
}

json_t *read_json(struct store *s, const char *name)
{
	char *data;
	size_t len;
	struct err e;
	json_error_t jerr;
	json_t *j;

	cr_assert_eq(store_read(s, name, 1 << 20, &data, &len, NULL, &e), 0,
		     "%s", e.msg);
	j = json_loadb(data, len, 0, &jerr);
	cr_assert(j, "%s: %s\n%s", name, jerr.text, data);
	free(data);
	return j;
}

void put_raw(struct store *s, const char *name, const char *text)
{
	struct err e;

	cr_assert_eq(store_put(s, name, text, strlen(text),
			       STORE_ANY_GENERATION, NULL, &e), 0, "%s",
		     e.msg);
}
