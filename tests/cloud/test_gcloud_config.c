/*
 * tests/cloud/test_gcloud_config.c: gcloud's project, zone and region
 * defaults: every step of the precedence (flag, CLOUDSDK_SECTION_KEY, the
 * active configuration named by CLOUDSDK_ACTIVE_CONFIG_NAME, active_config
 * or "default", in CLOUDSDK_CONFIG or ~/.config/gcloud), the INI forms
 * gcloud's configparser accepts, and malformed files, which are errors
 * naming the file and the line.
 */
#include "cloud/cloud.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[] = "/tmp/slicectl-gcloud-XXXXXX";
static char gdir[128]; /* DIR/.config/gcloud */

static void setup(void)
{
	char p[300];

	cr_assert(mkdtemp(dir));
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("CLOUDSDK_ACTIVE_CONFIG_NAME");
	unsetenv("CLOUDSDK_CORE_PROJECT");
	unsetenv("CLOUDSDK_COMPUTE_ZONE");
	unsetenv("CLOUDSDK_COMPUTE_REGION");
	setenv("HOME", dir, 1);
	snprintf(p, sizeof(p), "%s/.config", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(gdir, sizeof(gdir), "%s/.config/gcloud", dir);
	cr_assert_eq(mkdir(gdir, 0700), 0);
	snprintf(p, sizeof(p), "%s/configurations", gdir);
	cr_assert_eq(mkdir(p, 0700), 0);
}

static void teardown(void)
{
	cr_assert_eq(rm_rf(dir), 0);
}

TestSuite(gcloud, .init = setup, .fini = teardown);

static void write_at(const char *base, const char *name, const char *text)
{
	char path[400];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", base, name);
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* DIR/.config/gcloud/configurations/config_NAME */
static void config_file(const char *name, const char *text)
{
	char file[64];

	snprintf(file, sizeof(file), "configurations/config_%s", name);
	write_at(gdir, file, text);
}

static const char *get(const char *section, const char *key)
{
	static char out[128];
	struct err e;

	err_init(&e);
	cr_assert_eq(gcloud_config_get(section, key, out, sizeof(out), &e), 0,
		     "%s", e.msg);
	return out;
}

/* gcloud_default's answer, "(none)" for NULL. */
static const char *prop(const char *flag, const char *section,
			const char *key)
{
	static char buf[128];
	const char *out;
	struct err e;

	err_init(&e);
	cr_assert_eq(gcloud_default(flag, section, key, buf, sizeof(buf),
				    &out, &e), 0, "%s", e.msg);
	cr_assert(!out || *out);
	return out ? out : "(none)";
}

Test(gcloud, nothing_configured_is_empty)
{
	cr_assert_str_eq(get("core", "project"), "");
	cr_assert_str_eq(prop(NULL, "compute", "zone"), "(none)");
	/* No HOME and no CLOUDSDK_CONFIG: no directory to look in. */
	unsetenv("HOME");
	cr_assert_str_eq(get("core", "project"), "");
}

Test(gcloud, precedence_flag_env_then_active_configuration)
{
	config_file("default", "[core]\naccount = me@example.com\n"
			       "project = from-config\n\n[compute]\n"
			       "zone = us-central2-b\nregion = us-central2\n");
	cr_assert_str_eq(prop(NULL, "core", "project"), "from-config");
	cr_assert_str_eq(prop(NULL, "compute", "zone"), "us-central2-b");
	cr_assert_str_eq(prop(NULL, "compute", "region"), "us-central2");
	setenv("CLOUDSDK_CORE_PROJECT", "from-env", 1);
	setenv("CLOUDSDK_COMPUTE_ZONE", "europe-west4-a", 1);
	setenv("CLOUDSDK_COMPUTE_REGION", "europe-west4", 1);
	cr_assert_str_eq(prop(NULL, "core", "project"), "from-env");
	cr_assert_str_eq(prop(NULL, "compute", "zone"), "europe-west4-a");
	cr_assert_str_eq(prop(NULL, "compute", "region"), "europe-west4");
	cr_assert_str_eq(prop("from-flag", "core", "project"), "from-flag");
	/* An empty flag or variable is not a value. */
	cr_assert_str_eq(prop("", "core", "project"), "from-env");
	setenv("CLOUDSDK_CORE_PROJECT", "", 1);
	cr_assert_str_eq(prop(NULL, "core", "project"), "from-config");
}

Test(gcloud, active_configuration_name)
{
	config_file("default", "[core]\nproject = p-default\n");
	config_file("work", "[core]\nproject = p-work\n");
	config_file("home-2", "[core]\nproject = p-home\n");
	cr_assert_str_eq(get("core", "project"), "p-default");
	/* As `gcloud config configurations activate work` leaves it. */
	write_at(gdir, "active_config", "work\n");
	cr_assert_str_eq(get("core", "project"), "p-work");
	setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "home-2", 1);
	cr_assert_str_eq(get("core", "project"), "p-home");
	/* A named configuration without a file sets nothing. */
	setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "gone", 1);
	cr_assert_str_eq(get("core", "project"), "");
	unsetenv("CLOUDSDK_ACTIVE_CONFIG_NAME");
	write_at(gdir, "active_config", "  \n");
	cr_assert_str_eq(get("core", "project"), "p-default");
}

Test(gcloud, cloudsdk_config_replaces_the_home_directory)
{
	char other[300], p[340];

	config_file("default", "[core]\nproject = p-home\n");
	snprintf(other, sizeof(other), "%s/other", dir);
	cr_assert_eq(mkdir(other, 0700), 0);
	snprintf(p, sizeof(p), "%s/configurations", other);
	cr_assert_eq(mkdir(p, 0700), 0);
	write_at(other, "active_config", "ci");
	write_at(other, "configurations/config_ci", "[core]\nproject=p-ci\n");
	setenv("CLOUDSDK_CONFIG", other, 1);
	cr_assert_str_eq(get("core", "project"), "p-ci");
}

Test(gcloud, ini_forms_gcloud_reads)
{
	config_file("default",
		    "# gcloud writes none of these, people do\n"
		    "; a comment\n"
		    "[Core]\nproject = wrong-section-case\n"
		    "[core]\n"
		    "  Project :   spaced-out  \n"
		    "disable_prompts = True\n"
		    "[compute]\n"
		    "zone =\n"
		    "[other]\nzone = not-this-one\n");
	cr_assert_str_eq(get("core", "project"), "spaced-out");
	cr_assert_str_eq(get("compute", "zone"), "");
	cr_assert_str_eq(get("compute", "region"), "");
	cr_assert_str_eq(get("nosuch", "zone"), "");
	/* A value going on over an indented line, not the one asked for. */
	config_file("default", "[core]\ncustom = one\n  two\nproject = p\n");
	cr_assert_str_eq(get("core", "project"), "p");
	/* No final newline, CRLF line ends. */
	config_file("default", "[core]\r\nproject = crlf\r\n[compute]\r\n"
			       "zone = z");
	cr_assert_str_eq(get("core", "project"), "crlf");
	cr_assert_str_eq(get("compute", "zone"), "z");
}

static void expect_error(int code, const char *section, const char *key,
			 size_t cap, const char *want1, const char *want2)
{
	char out[128];
	struct err e;

	err_init(&e);
	cr_assert_lt(cap, sizeof(out) + 1);
	cr_assert_eq(gcloud_config_get(section, key, out, cap, &e), code,
		     "want %s", want1);
	cr_assert_str_eq(out, "");
	cr_assert(strstr(e.msg, want1), "want \"%s\" in: %s", want1, e.msg);
	if (want2)
		cr_assert(strstr(e.msg, want2), "want \"%s\" in: %s", want2,
			  e.msg);
}

Test(gcloud, malformed_files_are_errors_naming_file_and_line)
{
	char buf[64];
	const char *out = "x";
	struct err e;

	config_file("default", "[core]\nproject p\n");
	/* Not read when a flag or the variable gives the value. */
	cr_assert_str_eq(prop("given", "core", "project"), "given");
	setenv("CLOUDSDK_CORE_PROJECT", "from-env", 1);
	cr_assert_str_eq(prop(NULL, "core", "project"), "from-env");
	unsetenv("CLOUDSDK_CORE_PROJECT");
	err_init(&e);
	cr_assert_eq(gcloud_default(NULL, "core", "project", buf, sizeof(buf),
				    &out, &e), CLOUD_EINVAL);
	cr_assert_null(out);
	cr_assert(strstr(e.msg, "config_default line 2"), "%s", e.msg);
	expect_error(CLOUD_EINVAL, "core", "project", 128,
		     "configurations/config_default line 2",
		     "not \"[section]\", \"name = value\"");
	config_file("default", "project = p\n[core]\n");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "line 1",
		     "before any \"[section]\"");
	config_file("default", "[core\nproject = p\n");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "line 1",
		     "\"[name]\"");
	config_file("default", "[core]\nproject = a\n[compute]\n[core]\n");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "line 4",
		     "section [core] appears twice");
	config_file("default", "[core]\nproject = a\nPROJECT = b\n");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "line 3",
		     "is set twice");
	config_file("default", "[core]\nproject = a\n  b\n");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "line 3",
		     "spans lines");
	config_file("default", "[core]\nproject = a-long-project-name\n");
	expect_error(CLOUD_EINVAL, "core", "project", 8, "line 2",
		     "longer than 7 bytes");
	/* A file gcloud cannot read either. */
	config_file("default", "");
	write_at(gdir, "active_config", "missing");
	{
		char p[400];

		snprintf(p, sizeof(p), "%s/configurations/config_missing",
			 gdir);
		cr_assert_eq(mkdir(p, 0700), 0);
	}
	expect_error(CLOUD_EIO, "core", "project", 128, "config_missing",
		     "not a regular file");
}

Test(gcloud, configuration_names_are_gclouds)
{
	setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "../../etc", 1);
	expect_error(CLOUD_EINVAL, "core", "project", 128,
		     "CLOUDSDK_ACTIVE_CONFIG_NAME names the gcloud "
		     "configuration \"../../etc\"",
		     "gcloud config configurations activate");
	unsetenv("CLOUDSDK_ACTIVE_CONFIG_NAME");
	write_at(gdir, "active_config", "Work");
	expect_error(CLOUD_EINVAL, "core", "project", 128, "active_config",
		     "\"Work\"");
}
