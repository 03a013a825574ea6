/* Shell quoting, JSON strings, backoff and env names. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* What a real shell makes of a quoted value is the only test that counts. */
static void check_roundtrip(const char *value)
{
	struct buf b;
	char out[256] = "";
	FILE *p;

	buf_init(&b);
	buf_appends(&b, "printf %s ");
	cr_assert_eq(shq_append(&b, value), 0);
	p = popen(b.data, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	pclose(p);
	cr_assert_str_eq(out, value, "quoted as %s", b.data);
	buf_release(&b);
}

Test(shquote, survives_a_shell)
{
	check_roundtrip("plain");
	check_roundtrip("it's");
	check_roundtrip("''");
	check_roundtrip("$HOME `id` $(id) \\ \" ; & | * ? ~ #");
	check_roundtrip("new\nline");
	check_roundtrip("");
}

Test(env, names)
{
	cr_assert(env_name_valid("SLICE_ID", 8));
	cr_assert(env_name_valid("_x1", 3));
	cr_assert_not(env_name_valid("1X", 2));
	cr_assert_not(env_name_valid("A-B", 3));
	cr_assert_not(env_name_valid("", 0));
}

Test(json, escapes_and_repairs_utf8)
{
	struct buf b;
	const char in[] = "a\"b\\c\n\t\x01 \xc3\xa9 \xff \xe2\x82";

	buf_init(&b);
	cr_assert_eq(json_append_string(&b, in, sizeof(in) - 1), 0);
	cr_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001 \xc3\xa9 \\ufffd "
				 "\\ufffd\\ufffd\"");
	buf_release(&b);
}

Test(backoff, grows_with_jitter_and_caps)
{
	struct backoff b;
	unsigned prev_cap = 0;

	backoff_init(&b, 100, 1600, 7);
	for (int i = 0; i < 10; i++) {
		unsigned cap = 100u << (i < 4 ? i : 4);
		unsigned v = backoff_next_ms(&b);

		cr_assert_geq(v, cap / 2, "attempt %d: %u", i, v);
		cr_assert_leq(v, cap, "attempt %d: %u", i, v);
		cr_assert_geq(cap, prev_cap);
		prev_cap = cap;
	}
}
