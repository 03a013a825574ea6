/* Option parsing: the syntax every command shares. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <string.h>

static bool flag;
static const char *str;
static unsigned num, ms;
static int choice;
static struct strlist list;
static const char *const choices[] = { "yes", "accept-new", "no", NULL };
static const struct opt opts[] = {
	{ .name = "flag", .short_name = 'f', .kind = OPT_FLAG, .value = &flag,
	  .help = "a flag" },
	{ .name = "str", .short_name = 's', .kind = OPT_STRING, .value = &str,
	  .arg = "S", .help = "a string" },
	{ .name = "num", .short_name = 'n', .kind = OPT_UINT, .value = &num,
	  .arg = "N", .help = "a number", .min = 1, .max = 100 },
	{ .name = "secs", .kind = OPT_SECONDS, .value = &ms, .arg = "S",
	  .help = "seconds" },
	{ .name = "choice", .kind = OPT_CHOICE, .value = &choice, .arg = "C",
	  .help = "a choice", .choices = choices },
	{ .name = "list", .short_name = 'l', .kind = OPT_LIST, .value = &list,
	  .arg = "X", .help = "repeatable" },
	{ 0 },
};

static void reset(void)
{
	flag = false;
	str = NULL;
	num = ms = 0;
	choice = 0;
	strlist_init(&list);
}

static int parse(int argc, char **argv, struct strlist *pos, struct err *e)
{
	reset();
	strlist_init(pos);
	err_init(e);
	return opt_parse(opts, argc, argv, pos, false, e);
}

Test(opt, long_short_and_values)
{
	char *argv[] = { "cmd", "--flag", "-s", "x", "--num=42", "--secs",
			 "0.5", "--choice", "accept-new", "-l", "a", "-lb",
			 "pos1", "--", "--not-an-option", NULL };
	struct strlist pos;
	struct err e;

	cr_assert_eq(parse(15, argv, &pos, &e), OPT_OK, "%s", e.msg);
	cr_assert(flag);
	cr_assert_str_eq(str, "x");
	cr_assert_eq(num, 42);
	cr_assert_eq(ms, 500);
	cr_assert_eq(choice, 1);
	cr_assert_eq(list.n, 2);
	cr_assert_str_eq(list.v[1], "b");
	cr_assert_eq(pos.n, 2);
	cr_assert_str_eq(pos.v[0], "pos1");
	cr_assert_str_eq(pos.v[1], "--not-an-option");
	strlist_release(&pos);
	strlist_release(&list);
}

Test(opt, errors_name_the_option)
{
	struct {
		char *arg;
		const char *msg;
	} cases[] = {
		{ "--nope", "unknown option '--nope'" },
		{ "--num=0", "--num wants a whole number from 1 to 100" },
		{ "--num=12x", "not '12x'" },
		{ "--num=-1", "not '-1'" },
		{ "--secs=abc", "--secs wants a duration like 30" },
		{ "--secs=5x", "not '5x'" },
		{ "--secs=50d", "at most 46d" },
		{ "--choice=maybe", "one of yes, accept-new, no" },
		{ "--flag=1", "--flag takes no value" },
		{ "--str", "--str needs a value" },
		{ "-x", "unknown option '-x'" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = { "cmd", cases[i].arg, NULL };
		struct strlist pos;
		struct err e;

		cr_assert_eq(parse(2, argv, &pos, &e), COMMON_EUSAGE, "%s",
			     cases[i].arg);
		cr_assert(strstr(e.msg, cases[i].msg), "'%s' lacks '%s'",
			  e.msg, cases[i].msg);
		strlist_release(&pos);
		strlist_release(&list);
	}
}

Test(opt, durations_take_units)
{
	static const struct {
		const char *arg;
		unsigned ms;
	} cases[] = {
		{ "--secs=90", 90000 }, { "--secs=0.5", 500 },
		{ "--secs=90s", 90000 }, { "--secs=30m", 1800000 },
		{ "--secs=6h", 21600000 }, { "--secs=2d", 172800000 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = { "cmd", (char *)cases[i].arg, NULL };
		struct strlist pos;
		struct err e;

		cr_assert_eq(parse(2, argv, &pos, &e), 0, "%s", e.msg);
		cr_assert_eq(ms, cases[i].ms, "%s gave %u", cases[i].arg, ms);
		strlist_release(&pos);
		strlist_release(&list);
	}
}

Test(opt, help)
{
	char *argv1[] = { "cmd", "--help", NULL };
	char *argv2[] = { "cmd", "-h", NULL };
	struct strlist pos;
	struct err e;

	cr_assert_eq(parse(2, argv1, &pos, &e), OPT_HELP);
	strlist_release(&pos);
	cr_assert_eq(parse(2, argv2, &pos, &e), OPT_HELP);
	strlist_release(&pos);
}

Test(opt, stop_at_first_positional)
{
	char *argv[] = { "cmd", "--flag", "echo", "--flag", NULL };
	struct strlist pos;
	struct err e;

	reset();
	strlist_init(&pos);
	cr_assert_eq(opt_parse(opts, 4, argv, &pos, true, &e), OPT_OK);
	cr_assert_eq(pos.n, 2);
	cr_assert_str_eq(pos.v[1], "--flag");
	strlist_release(&pos);
}

/* A value that may be left out: "" alone, the value only after '=', so
 * the word after it stays a positional (slicectl job --monitoring RUN). */
Test(opt, optional_value)
{
	static const char *mon;
	static const struct opt table[] = {
		{ .name = "monitoring", .kind = OPT_OPTIONAL, .value = &mon,
		  .arg = "PROJECT", .help = "export" },
		{ 0 },
	};
	char *alone[] = { "cmd", "--monitoring", "run1", NULL };
	char *given[] = { "cmd", "run1", "--monitoring=p1", NULL };
	struct strlist pos;
	struct err e;

	strlist_init(&pos);
	cr_assert_eq(opt_parse(table, 3, alone, &pos, false, &e), OPT_OK);
	cr_assert_str_eq(mon, "");
	cr_assert_eq(pos.n, 1);
	cr_assert_str_eq(pos.v[0], "run1");
	strlist_release(&pos);
	strlist_init(&pos);
	mon = NULL;
	cr_assert_eq(opt_parse(table, 3, given, &pos, false, &e), OPT_OK);
	cr_assert_str_eq(mon, "p1");
	cr_assert_eq(pos.n, 1);
	strlist_release(&pos);
}

/* A table naming one option twice (as slicectl job once did, --local-dir
 * for the local provider's roots and for the local tier) is refused
 * whatever the arguments, naming it, rather than parsed with the second
 * unreachable. */
Test(opt, an_option_defined_twice_is_refused)
{
	static const struct opt twice[] = {
		{ .name = "dir", .kind = OPT_STRING, .value = &str, .arg = "D",
		  .help = "one" },
		{ .name = "flag", .kind = OPT_FLAG, .value = &flag,
		  .help = "a flag" },
		{ .name = "dir", .kind = OPT_STRING, .value = &str, .arg = "D",
		  .help = "two" },
		{ 0 },
	};
	char *argv[] = { "cmd", "--flag", NULL };
	struct strlist pos;
	struct err e;

	strlist_init(&pos);
	err_init(&e);
	cr_assert_eq(opt_parse(twice, 2, argv, &pos, false, &e),
		     COMMON_EINVAL);
	cr_assert_str_eq(e.msg, "internal error: option --dir is defined "
				"twice");
	strlist_release(&pos);
}
