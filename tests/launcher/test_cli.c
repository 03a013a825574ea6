/*
 * slicectl's command line as a whole: every command listed by
 * `slicectl help` answers --help with exit status 0 in 80 columns, and
 * `slicectl help COMMAND` prints the very same text; an unknown command
 * is a usage error that says where help is.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMMANDS 64
#define WIDTH 80

/* Fails the test at the first line of text wider than WIDTH. */
static void assert_fits(const char *what, const char *text)
{
	unsigned line = 1;

	while (*text) {
		size_t len = strcspn(text, "\n");

		cr_expect_leq(len, WIDTH, "%s: line %u is %zu columns: %.*s",
			      what, line, len, (int)len, text);
		text += len;
		if (*text)
			text++;
		line++;
	}
}

/* The names under "Commands:" in `slicectl help`, one per line as
 * "  NAME  summary", until the blank line that ends the list. */
static size_t list_commands(char names[][32])
{
	struct run_result r;
	const char *p;
	size_t n = 0;

	cr_assert_eq(run_slicectl(&r, (const char *[]){ "help", NULL }, NULL),
		     0);
	cr_assert_eq(r.status, 0, "slicectl help: %s", r.err);
	assert_fits("slicectl help", r.out);
	p = strstr(r.out, "\nCommands:\n");
	cr_assert_not_null(p, "no command list in:\n%s", r.out);
	p += strlen("\nCommands:\n");
	while (*p == ' ' && n < MAX_COMMANDS) {
		cr_assert_eq(sscanf(p, "%31s", names[n]), 1);
		n++;
		p = strchr(p, '\n');
		cr_assert_not_null(p);
		p++;
	}
	run_result_release(&r);
	cr_assert_gt(n, 10, "too few commands listed");
	return n;
}

Test(cli, every_help_fits_80_columns)
{
	char names[MAX_COMMANDS][32];
	size_t n = list_commands(names);

	for (size_t i = 0; i < n; i++) {
		struct run_result r;
		char what[64];

		snprintf(what, sizeof(what), "slicectl %s --help", names[i]);
		cr_assert_eq(run_slicectl(&r, (const char *[]){ names[i],
								"--help",
								NULL },
					  NULL),
			     0);
		cr_expect_eq(r.status, 0, "%s: exit %d: %s", what, r.status,
			     r.err);
		cr_expect(strstr(r.out, "usage: "), "%s printed no usage",
			  what);
		assert_fits(what, r.out);
		run_result_release(&r);
	}
}

Test(cli, help_command_is_its_help)
{
	char names[MAX_COMMANDS][32];
	size_t n = list_commands(names);

	for (size_t i = 0; i < n; i++) {
		struct run_result own, help;

		cr_assert_eq(run_slicectl(&own, (const char *[]){ names[i],
								  "--help",
								  NULL },
					  NULL),
			     0);
		cr_assert_eq(run_slicectl(&help, (const char *[]){ "help",
								   names[i],
								   NULL },
					  NULL),
			     0);
		cr_expect_eq(help.status, own.status, "help %s: exit %d",
			     names[i], help.status);
		cr_expect_str_eq(help.out, own.out, "help %s", names[i]);
		run_result_release(&own);
		run_result_release(&help);
	}
}

Test(cli, help_unknown_command)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, (const char *[]){ "help", "nosuch",
							NULL },
				  NULL),
		     0);
	cr_expect_eq(r.status, 2);
	cr_expect_str_empty(r.out);
	cr_expect(strstr(r.err, "'nosuch'"), "%s", r.err);
	cr_expect(strstr(r.err, "slicectl help"), "%s", r.err);
	run_result_release(&r);
}

Test(cli, help_alone_lists_commands)
{
	struct run_result r, dash;

	cr_assert_eq(run_slicectl(&r, (const char *[]){ "help", NULL }, NULL),
		     0);
	cr_assert_eq(run_slicectl(&dash, (const char *[]){ "--help", NULL },
				  NULL),
		     0);
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "\nCommands:\n"), "%s", r.out);
	cr_expect_str_eq(dash.out, r.out);
	run_result_release(&r);
	run_result_release(&dash);
}
