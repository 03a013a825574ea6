/* Buffers and string lists. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <string.h>

Test(buf, append_format_consume)
{
	struct buf b;

	buf_init(&b);
	cr_assert_eq(buf_appends(&b, "hello"), 0);
	cr_assert_eq(buf_appendf(&b, " %d %s", 42, "x"), 0);
	cr_assert_str_eq(b.data, "hello 42 x");
	buf_consume(&b, 6);
	cr_assert_str_eq(b.data, "42 x");
	for (int i = 0; i < 10000; i++)
		cr_assert_eq(buf_append(&b, "y", 1), 0);
	cr_assert_eq(b.len, 10004);
	cr_assert_eq(b.data[b.len], '\0');
	char *p = buf_detach(&b);
	cr_assert_null(b.data);
	free(p);
	buf_release(&b);
}

Test(strlist, push_owns_copies)
{
	struct strlist l;
	char s[] = "abc";

	strlist_init(&l);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(strlist_push(&l, s), 0);
	s[0] = 'z';
	cr_assert_str_eq(l.v[99], "abc");
	cr_assert_null(l.v[100]);
	strlist_release(&l);
}
