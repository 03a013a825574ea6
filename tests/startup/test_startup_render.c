/*
 * tests/startup/test_startup_render.c: the startup script as rendered:
 * values shell-quoted, malformed values refused, the metadata limit kept;
 * shellcheck lints the template and rendered scripts.
 */
#include "startup/startup.h"
#include "tests/harness/harness.h"
#include "tests/startup/startup_check.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One suite: Criterion 2.4 leaks a little when tests of several suites
 * run in parallel, which fails the sanitizer build. */
TestSuite(startup, .init = startup_setup, .fini = startup_teardown, .timeout = 60);

/* ---------------------------------------------------------------- render */

Test(startup, render_values_are_shell_quoted)
{
	struct startup_params p = {
		.run_url = "file:///runs/it's a run",
		.supervisor_sha256 = SHA_A,
		.grace_s = 120,
	};
	char *s = render(&p);

	cr_assert(!strncmp(s, "#!/bin/sh\n", 10));
	assert_has(s, "\nRUN_URL='file:///runs/it'\\''s a run'\n");
	assert_has(s, "\nSUPERVISOR_SHA256='0123456789abcdef");
	assert_has(s, "\nFROM_SOURCE='0'\n");
	assert_has(s, "\nSUPERVISOR_PORTABLE='0'\n");
	assert_has(s, "\nSOURCE_TARGET='supervisor/slice-supervisor'\n");
	assert_has(s, "\nGRACE_S='120'\n");
	/* Nothing left to fill in; the template's own '@' survive. */
	assert_lacks(s, "@RUN_URL@");
	assert_lacks(s, "@GRACE_S@");
	assert_has(s, ":@+=,-");
	free(s);

	p.supervisor_portable = true;
	s = render(&p);
	assert_has(s, "\nSUPERVISOR_PORTABLE='1'\n");
	free(s);

	p.supervisor_from_source = true;
	p.source_target = "launcher/slicectl";
	s = render(&p);
	assert_has(s, "\nFROM_SOURCE='1'\n");
	assert_has(s, "\nSOURCE_TARGET='launcher/slicectl'\n");
	free(s);
}

static void refused(const struct startup_params *p, int code,
		    const char *words)
{
	char *s = (char *)"untouched";
	size_t len = 1;
	struct err e;

	cr_assert_eq(startup_render(p, &s, &len, &e), code, "%s: %s",
		     p->run_url, e.msg);
	cr_assert_null(s);
	cr_assert_eq(len, 0);
	assert_has(e.msg, words);
}

Test(startup, render_malformed_values_are_refused)
{
	struct startup_params p = {
		.run_url = "gs://bkt/runs/r1",
		.supervisor_sha256 = SHA_A,
		.grace_s = 30,
	};
	const struct {
		const char *url;
		const char *words;
	} urls[] = {
		{ "", "a run URL is needed" },
		{ "http://example.com/run", "only gs://" },
		{ "file:relative/run", "three slashes" },
		{ "file://host/run", "three slashes" },
		{ "gs://B/run", "bucket name" },
		{ "gs://-bkt/run", "start and end" },
		{ "gs://bkt/a//b", "empty" },
		{ "gs://bkt/a/../b", "\"..\"" },
		{ "gs://bkt/a\nb", "control character" },
		{ "file:///tmp/a\tb", "control character" },
	};
	char long_prefix[1200];

	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		p.run_url = urls[i].url;
		refused(&p, STARTUP_EINVAL, urls[i].words);
	}
	memset(long_prefix, 'a', sizeof(long_prefix) - 1);
	memcpy(long_prefix, "gs://bkt/", 9);
	long_prefix[sizeof(long_prefix) - 1] = '\0';
	p.run_url = long_prefix;
	refused(&p, STARTUP_EINVAL, "1024 bytes");

	p.run_url = "gs://bkt/runs/r1/";
	free(render(&p));
	p.supervisor_sha256 = "0123";
	refused(&p, STARTUP_EINVAL, "64 hex digits, not 4");
	p.supervisor_sha256 =
		"0123456789ABCDEF0123456789abcdef"
		"0123456789abcdef0123456789abcdef";
	refused(&p, STARTUP_EINVAL, "lowercase");
	p.supervisor_sha256 = NULL;
	refused(&p, STARTUP_EINVAL, "64 hex digits");
	p.supervisor_sha256 = SHA_A;
	p.grace_s = STARTUP_MAX_GRACE_S + 1;
	refused(&p, STARTUP_EINVAL, "grace period");
	p.grace_s = STARTUP_MAX_GRACE_S;
	free(render(&p));
	const char *targets[] = { "", "/abs/x", "a/../b", "dir/", "a b",
				  "a;b" };
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		p.source_target = targets[i];
		refused(&p, STARTUP_EINVAL, "source target");
	}
}

Test(startup, render_the_metadata_limit_is_kept)
{
	struct startup_params p = {
		.run_url = "file:///r",
		.supervisor_sha256 = SHA_A,
		.grace_s = 30,
	};
	size_t base, room;
	char *s, *url;

	s = render(&p);
	base = strlen(s) - strlen(p.run_url);
	free(s);
	cr_assert_lt(base, STARTUP_MAX_BYTES / 4, "the template alone is %zu",
		     base);
	/* A URL that makes the script exactly the limit, and one byte more. */
	room = STARTUP_MAX_BYTES - base;
	url = malloc(room + 16);
	memcpy(url, "file:///", 8);
	memset(url + 8, 'r', room - 8);
	url[room] = '\0';
	p.run_url = url;
	s = render(&p);
	cr_assert_eq(strlen(s), STARTUP_MAX_BYTES);
	free(s);
	url[room] = 'r';
	url[room + 1] = '\0';
	refused(&p, STARTUP_ETOOBIG, "262144 bytes a metadata value");
	free(url);
}

/* ---------------------------------------------------------------- lint */

static void shellcheck(const char *path)
{
	const char *argv[] = { "shellcheck", "--shell=sh", "--severity=style",
			       path, NULL };
	struct run_result r;

	if (run_program(&r, argv, NULL) < 0)
		cr_assert_fail("shellcheck is not installed: run "
			       "scripts/deps, which installs it");
	cr_assert_eq(r.status, 0, "shellcheck %s:\n%s%s", path, r.out, r.err);
	run_result_release(&r);
}

Test(startup, lint_shellcheck_passes_on_the_template_and_rendered_scripts)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	struct startup_params p = {
		.run_url = "gs://bkt/runs/it's \"odd\" $HOME `x`",
		.supervisor_sha256 = SHA_A,
		.supervisor_from_source = true,
		.grace_s = 600,
	};
	char script[PATHLEN], tmpl[PATHLEN];

	cr_assert(src && *src, "SLICECTL_SRCDIR is not set (run with "
		  "meson test)");
	snprintf(tmpl, sizeof(tmpl), "%s/startup/startup.sh.in", src);
	shellcheck(tmpl);
	render_script(&p, script);
	shellcheck(script);
	p.run_url = "file:///srv/runs/r1";
	p.supervisor_from_source = false;
	render_script(&p, script);
	shellcheck(script);
}
