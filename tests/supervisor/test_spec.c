/*
 * tests/supervisor/test_spec.c: the run state the workers share, against
 * file:// stores in a temporary directory: job.json both ways, control.json
 * (created once, bumped once per failure however many workers race, the
 * restart budget, states, the restore step fixed by the first to ask) and
 * the workers' status objects, with malformed objects of each kind.
 */
#define _XOPEN_SOURCE 700 /* nftw */

#include "supervisor/control.h"
#include "supervisor/supervisor.h"

#include "checkpoint/checkpoint.h"

#include <criterion/criterion.h>

#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[512];
static char url[600];

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/slicectl-spec-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(root), "mkdtemp %s", root);
	snprintf(url, sizeof(url), "file://%s/bucket/run-1", root);
	log_setup("test_spec", LOG_ERROR);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void teardown(void)
{
	if (root[0])
		nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(job, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(control, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(status, .init = setup, .fini = teardown, .timeout = 30);

static struct store *open_store(void)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

static bool is_rfc3339_utc(const char *t)
{
	int y, mo, d, h, mi, s, n = 0;

	return strlen(t) == 20 &&
	       sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi,
		      &s, &n) == 6 && n == 20 && y >= 2020 && mo >= 1 &&
	       mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && s < 61;
}

/* ---------------------------------------------------------------- job */

static void parse_ok(const char *json, struct job *j)
{
	struct err e;
	int rc = job_parse(json, strlen(json), j, &e);

	cr_assert_eq(rc, 0, "parse %s: %d %s", json, rc, e.msg);
}

/* Parsing fails with COMMON_EINVAL, a message holding every word of want
 * ('|'-separated), and leaves j as job_init does. */
static void parse_fails(const char *json, const char *want)
{
	struct job j;
	struct err e;
	char words[512];
	int rc = job_parse(json, strlen(json), &j, &e);

	cr_assert_eq(rc, COMMON_EINVAL, "%s: rc %d (%s)", json, rc, e.msg);
	cr_expect_eq(e.code, COMMON_EINVAL);
	snprintf(words, sizeof(words), "%s", want);
	for (char *w = strtok(words, "|"); w; w = strtok(NULL, "|"))
		cr_expect(strstr(e.msg, w), "%s: message \"%s\" lacks \"%s\"",
			  json, e.msg, w);
	cr_expect_null(j.name);
	cr_expect_null(j.command);
	cr_expect_eq(j.env.n, 0);
	cr_expect_eq(j.max_restarts, 100);
	job_release(&j);
}

/* The unsigned fields, in the order struct job declares them. */
static void expect_numbers(const struct job *j, const unsigned want[9])
{
	static const char *const names[9] = { "num_slices",
		"workers_per_slice", "max_restarts", "hang_timeout_s",
		"grace_s", "keep", "keep_every", "heartbeat_s", "spool_mb" };
	const unsigned got[9] = { j->num_slices, j->workers_per_slice,
		j->max_restarts, j->hang_timeout_s, j->grace_s, j->keep,
		j->keep_every, j->heartbeat_s, j->spool_mb };

	for (int i = 0; i < 9; i++)
		cr_expect_eq(got[i], want[i], "%s is %u, not %u", names[i],
			     got[i], want[i]);
}

static void expect_defaults_but_env(const struct job *j)
{
	static const unsigned defaults[9] = { 1, 1, 100, 1800, 25, 3, 0, 10,
					      10240 };

	cr_expect_null(j->workdir);
	expect_numbers(j, defaults);
	cr_expect_not(j->delete_on_finish);
	cr_expect_null(j->tpu_project);
	cr_expect_null(j->tpu_zone);
	cr_expect_null(j->tpu_name);
}

static void expect_defaults(const struct job *j)
{
	cr_expect_eq(j->env.n, 0);
	expect_defaults_but_env(j);
}

Test(job, defaults)
{
	struct job j;

	job_init(&j);
	cr_expect_null(j.name);
	cr_expect_null(j.command);
	expect_defaults(&j);
	job_release(&j);
	job_release(&j); /* twice is harmless */

	parse_ok("{\"name\": \"r\", \"command\": \"python3 train.py\"}", &j);
	cr_expect_str_eq(j.name, "r");
	cr_expect_str_eq(j.command, "python3 train.py");
	expect_defaults(&j);
	job_release(&j);

	/* null for the optional objects means "left out". */
	parse_ok("{\"name\": \"r\", \"command\": \"c\", \"workdir\": null, "
		 "\"tpu\": null, \"env\": null}", &j);
	expect_defaults(&j);
	job_release(&j);
}

static const char full_job[] =
	"{\n"
	"  \"name\": \"llama-7b-run3\",\n"
	"  \"command\": \"cd src && python3 -m train --steps=1000 'a b'\\n"
	"echo done\",\n"
	"  \"env\": {\"XLA_FLAGS\": \"--xla_dump_to=/tmp/x\", \"_A1\": \"\","
	" \"U\": \"caf\\u00e9 = \\\"quoted\\\"\"},\n"
	"  \"workdir\": \"/home/me/work\",\n"
	"  \"num_slices\": 4,\n"
	"  \"workers_per_slice\": 8,\n"
	"  \"max_restarts\": 0,\n"
	"  \"hang_timeout_s\": 0,\n"
	"  \"grace_s\": 3600,\n"
	"  \"keep\": 1,\n"
	"  \"keep_every\": 5000,\n"
	"  \"heartbeat_s\": 1,\n"
	"  \"spool_mb\": 2048,\n"
	"  \"delete_on_finish\": true,\n"
	"  \"tpu\": {\"project\": \"my-proj\", \"zone\": \"us-central2-b\","
	" \"name\": \"qr-1\"}\n"
	"}\n";

static void expect_full(const struct job *j)
{
	static const unsigned numbers[9] = { 4, 8, 0, 0, 3600, 1, 5000, 1,
					     2048 };

	cr_expect_str_eq(j->name, "llama-7b-run3");
	cr_expect_str_eq(j->command, "cd src && python3 -m train "
			 "--steps=1000 'a b'\necho done");
	cr_assert_eq(j->env.n, 3);
	cr_expect_str_eq(j->env.v[0], "XLA_FLAGS=--xla_dump_to=/tmp/x");
	cr_expect_str_eq(j->env.v[1], "_A1=");
	cr_expect_str_eq(j->env.v[2], "U=caf\xc3\xa9 = \"quoted\"");
	cr_expect_str_eq(j->workdir, "/home/me/work");
	expect_numbers(j, numbers);
	cr_expect(j->delete_on_finish);
	cr_expect_str_eq(j->tpu_project, "my-proj");
	cr_expect_str_eq(j->tpu_zone, "us-central2-b");
	cr_expect_str_eq(j->tpu_name, "qr-1");
}

Test(job, every_field)
{
	struct job j;

	parse_ok(full_job, &j);
	expect_full(&j);
	job_release(&j);
	cr_expect_null(j.name);
	expect_defaults(&j);
}

Test(job, env_as_list)
{
	struct job j;

	parse_ok("{\"name\": \"r\", \"command\": \"c\", \"env\": "
		 "[\"A=1\", \"B=x=y\", \"C=\"]}", &j);
	cr_assert_eq(j.env.n, 3);
	cr_expect_str_eq(j.env.v[0], "A=1");
	cr_expect_str_eq(j.env.v[1], "B=x=y");
	cr_expect_str_eq(j.env.v[2], "C=");
	job_release(&j);
}

Test(job, round_trip)
{
	struct job j, k;
	char *text, *again;
	struct err e;

	parse_ok(full_job, &j);
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_eq(text[strlen(text) - 1], '\n');
	parse_ok(text, &k);
	expect_full(&k);
	cr_assert_eq(job_to_json(&k, &again, &e), 0, "%s", e.msg);
	cr_expect_str_eq(text, again);
	free(text);
	free(again);
	job_release(&j);
	job_release(&k);

	/* Defaults and no optional objects, from a struct built by hand. */
	job_init(&j);
	j.name = strdup("x");
	j.command = strdup("true");
	cr_assert_eq(strlist_push(&j.env, "K=v=w"), 0);
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(text, "\"tpu\""), "%s", text);
	cr_expect_null(strstr(text, "\"workdir\""), "%s", text);
	parse_ok(text, &k);
	cr_expect_str_eq(k.name, "x");
	cr_assert_eq(k.env.n, 1);
	cr_expect_str_eq(k.env.v[0], "K=v=w");
	expect_defaults_but_env(&k);
	free(text);
	job_release(&j);
	job_release(&k);
}

Test(job, to_json_refuses_what_parse_would)
{
	struct job j;
	char *text = (char *)"untouched";
	struct err e;

	job_init(&j);
	j.command = strdup("c");
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect_null(text);
	cr_expect(strstr(e.msg, "\"name\""), "%s", e.msg);
	j.name = strdup("Bad_Name");
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "\"name\""), "%s", e.msg);
	free(j.name);
	j.name = strdup("ok");
	cr_assert_eq(strlist_push(&j.env, "NOEQUALS"), 0);
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "\"env\""), "%s", e.msg);
	strlist_release(&j.env);
	cr_assert_eq(strlist_push(&j.env, "A=1"), 0);
	cr_assert_eq(strlist_push(&j.env, "A=2"), 0);
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "twice"), "%s", e.msg);
	strlist_release(&j.env);
	cr_assert_eq(strlist_push(&j.env, "A=\xff"), 0);
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "UTF-8"), "%s", e.msg);
	strlist_release(&j.env);
	j.grace_s = 0;
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "\"grace_s\""), "%s", e.msg);
	j.grace_s = 25;
	j.tpu_project = strdup("p");
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "\"zone\""), "%s", e.msg);
	job_release(&j);
}

Test(job, syntax_and_shape_errors)
{
	parse_fails("", "not valid JSON");
	parse_fails("{\"name\": \"r\",", "not valid JSON|line 1");
	parse_fails("[1, 2]", "must be a JSON object");
	parse_fails("{\"name\": \"r\", \"command\": \"c\"} extra",
		    "not valid JSON");
	parse_fails("{\"name\": \"r\", \"name\": \"s\", \"command\": \"c\"}",
		    "not valid JSON|duplicate");
	parse_fails("{\"name\": \"r\", \"command\": \"c\", \"nmae\": 1}",
		    "unknown field \"nmae\"|num_slices");
	parse_fails("{\"command\": \"c\"}", "no \"name\"");
	parse_fails("{\"name\": \"r\"}", "no \"command\"");
	parse_fails("{\"name\": \"r\", \"command\": [\"a\"]}",
		    "\"command\" must be a string, not a list");
	parse_fails("{\"name\": \"r\", \"command\": \"\"}",
		    "\"command\" is empty");
	parse_fails("{\"name\": \"r\", \"command\": \"c\", \"workdir\": \"\"}",
		    "\"workdir\"");
	parse_fails("{\"name\": \"r\", \"command\": \"c\", "
		    "\"num_slices\": 256, \"workers_per_slice\": 512}",
		    "\"num_slices\" 256 times \"workers_per_slice\" 512|"
		    "65536 workers");
	{
		struct job j;
		struct err e;

		cr_expect_eq(job_parse(NULL, 0, &j, &e), COMMON_EINVAL);
		job_release(&j);
	}
}

Test(job, names)
{
	static const char *const good[] = { "a", "r1", "a-b", "x9-0z",
		"a23456789012345678901234567890123456789012345678901234567890123" };
	static const char *const bad[] = { "", "1abc", "-a", "a-", "A",
		"run_1", "run.1", "caf\xc3\xa9",
		"a234567890123456789012345678901234567890123456789012345678901234" };
	char json[256];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		struct job j;

		snprintf(json, sizeof(json),
			 "{\"name\": \"%s\", \"command\": \"c\"}", good[i]);
		parse_ok(json, &j);
		cr_expect_str_eq(j.name, good[i]);
		job_release(&j);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(json, sizeof(json),
			 "{\"name\": \"%s\", \"command\": \"c\"}", bad[i]);
		parse_fails(json, "\"name\"|lowercase letters, digits and '-'");
	}
	parse_fails("{\"name\": 7, \"command\": \"c\"}",
		    "\"name\" must be a string");
	parse_fails("{\"name\": null, \"command\": \"c\"}",
		    "\"name\" must be a string");
}

Test(job, types_and_ranges)
{
	static const struct {
		const char *field;
		const char *value;
		const char *want;
	} cases[] = {
		{ "num_slices", "0", "from 1 to" },
		{ "num_slices", "\"2\"", "must be an integer|not a string" },
		{ "num_slices", "2.0", "must be an integer|fraction" },
		{ "num_slices", "-1", "from 1 to" },
		{ "num_slices", "99999999999", "from 1 to" },
		{ "workers_per_slice", "0", "from 1 to" },
		{ "workers_per_slice", "true", "not a boolean" },
		{ "max_restarts", "-1", "from 0 to" },
		{ "max_restarts", "null", "must be an integer" },
		{ "hang_timeout_s", "-5", "from 0 to|turns hang detection off" },
		{ "grace_s", "0", "from 1 to 3600" },
		{ "grace_s", "3601", "from 1 to 3600" },
		{ "keep", "0", "from 1 to" },
		{ "keep_every", "-1", "from 0 to" },
		{ "heartbeat_s", "0", "from 1 to 3600" },
		{ "heartbeat_s", "3601", "from 1 to 3600" },
		{ "spool_mb", "0", "from 1 to" },
		{ "spool_mb", "[]", "not a list" },
		{ "delete_on_finish", "1", "true or false" },
		{ "delete_on_finish", "\"yes\"", "true or false" },
		{ "workdir", "{}", "must be a string or null" },
		{ "env", "\"A=1\"", "object of string values|list" },
		{ "env", "{\"A\": 1}", "value of A must be a string" },
		{ "env", "{\"1A\": \"x\"}", "\"1A\" is not a valid" },
		{ "env", "{\"A=B\": \"x\"}", "is not a valid environment" },
		{ "env", "{\"\": \"x\"}", "is not a valid environment" },
		{ "env", "[\"A\"]", "\"A\" is not NAME=VALUE" },
		{ "env", "[\"=x\"]", "is not a valid environment" },
		{ "env", "[\"A-B=x\"]", "\"A-B\" is not a valid" },
		{ "env", "[3]", "entry 0|NAME=VALUE" },
		{ "env", "[\"A=1\", \"B=2\", \"A=3\"]", "sets A twice" },
		{ "tpu", "\"qr\"", "\"tpu\" must be an object" },
		{ "tpu", "{\"project\": \"p\", \"zone\": \"z\"}",
		  "\"project\", \"zone\" and \"name\"" },
		{ "tpu", "{\"project\": \"p\", \"zone\": \"z\", \"name\": \"n\","
			 " \"region\": \"r\"}", "unknown field \"region\"" },
		{ "tpu", "{\"project\": 1, \"zone\": \"z\", \"name\": \"n\"}",
		  "\"project\" must be a string" },
		{ "tpu", "{\"project\": \"p\", \"zone\": \"a/b\", \"name\": "
			 "\"n\"}", "\"zone\"" },
		{ "tpu", "{\"project\": \"\", \"zone\": \"z\", \"name\": \"n\"}",
		  "\"project\"" },
	};
	char json[512], want[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		snprintf(json, sizeof(json),
			 "{\"name\": \"r\", \"command\": \"c\", \"%s\": %s}",
			 cases[i].field, cases[i].value);
		snprintf(want, sizeof(want), "\"%s\"|%s", cases[i].field,
			 cases[i].want);
		parse_fails(json, want);
	}
}

Test(job, range_edges_accepted)
{
	struct job j;

	parse_ok("{\"name\": \"r\", \"command\": \"c\", \"grace_s\": 1, "
		 "\"heartbeat_s\": 3600, \"max_restarts\": 1000000, "
		 "\"keep_every\": 4000000000, \"num_slices\": 65536, "
		 "\"hang_timeout_s\": 2592000}", &j);
	cr_expect_eq(j.grace_s, 1);
	cr_expect_eq(j.heartbeat_s, 3600);
	cr_expect_eq(j.max_restarts, 1000000);
	cr_expect_eq(j.keep_every, 4000000000u);
	cr_expect_eq(j.num_slices, 65536);
	cr_expect_eq(j.hang_timeout_s, 2592000);
	job_release(&j);
}

Test(job, worker_names)
{
	char name[64];

	run_worker_name(0, 0, name, sizeof(name));
	cr_expect_str_eq(name, "slice-0-worker-0");
	run_worker_name(12, 345, name, sizeof(name));
	cr_expect_str_eq(name, "slice-12-worker-345");
	run_worker_name(12, 345, name, 8);
	cr_expect_str_eq(name, "slice-1");
}

/* ------------------------------------------------------------ control */

static struct control load_ok(struct store *s)
{
	struct control c;
	struct err e;

	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	return c;
}

static struct control bump_ok(struct store *s, const struct control *seen,
			      unsigned max_restarts, const char *reason,
			      const char *by, int64_t restore_step)
{
	struct control out;
	struct err e;

	cr_assert_eq(control_bump(s, seen, max_restarts, reason, by,
				  restore_step, &out, &e), 0, "%s", e.msg);
	return out;
}

static struct control set_state_ok(struct store *s, const char *state,
				   const char *reason, const char *by)
{
	struct control out;
	struct err e;

	cr_assert_eq(control_set_state(s, state, reason, by, &out, &e), 0,
		     "%s", e.msg);
	return out;
}

static int64_t restore_ok(struct store *s, int64_t generation)
{
	int64_t step = -7;
	struct err e;

	cr_assert_eq(control_restore_step(s, generation, &step, &e), 0, "%s",
		     e.msg);
	return step;
}

static json_t *read_json(struct store *s, const char *name)
{
	char *data;
	size_t len;
	struct err e;
	json_error_t jerr;
	json_t *root;

	cr_assert_eq(store_read(s, name, 1 << 20, &data, &len, NULL, &e), 0,
		     "%s", e.msg);
	root = json_loadb(data, len, 0, &jerr);
	cr_assert(root, "%s: %s\n%s", name, jerr.text, data);
	free(data);
	return root;
}

Test(control, load_creates_generation_one)
{
	struct store *s = open_store();
	struct control c = load_ok(s), again;
	struct store_object o;
	struct err e;
	json_t *root;

	cr_expect_eq(c.generation, 1);
	cr_expect_str_eq(c.state, "running");
	cr_expect_eq(c.restore_step, -1);
	cr_expect(is_rfc3339_utc(c.time), "%s", c.time);
	cr_expect_gt(c.object_generation, 0);
	cr_assert_eq(store_stat(s, RUN_CONTROL, &o, &e), 0, "%s", e.msg);
	cr_expect_eq(o.generation, c.object_generation);
	store_object_release(&o);

	/* The object as control.h describes it. */
	root = read_json(s, RUN_CONTROL);
	cr_expect_eq(json_integer_value(json_object_get(root, "generation")),
		     1);
	cr_expect_str_eq(json_string_value(json_object_get(root, "state")),
			 "running");
	cr_expect(json_is_string(json_object_get(root, "reason")));
	cr_expect(json_is_string(json_object_get(root, "updated_by")));
	cr_expect(json_is_null(json_object_get(root, "restore_step")));
	cr_expect(is_rfc3339_utc(json_string_value(
		json_object_get(root, "time"))));
	cr_expect_eq(json_object_size(root), 6);
	json_decref(root);

	/* A second load reads it, creating nothing. */
	again = load_ok(s);
	cr_expect_eq(again.object_generation, c.object_generation);
	cr_expect_eq(again.generation, 1);
	store_close(s);
}

Test(control, bump)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	struct err e;
	json_t *root;

	out = bump_ok(s, &c, 100, "trainer exited with status 3",
		      "slice-1-worker-2", -1);
	cr_expect_eq(out.generation, 2);
	cr_expect_str_eq(out.state, "running");
	cr_expect_str_eq(out.reason, "trainer exited with status 3");
	cr_expect_str_eq(out.updated_by, "slice-1-worker-2");
	cr_expect_eq(out.restore_step, -1);
	cr_expect(is_rfc3339_utc(out.time));
	cr_expect_neq(out.object_generation, c.object_generation);
	now = load_ok(s);
	cr_expect_eq(now.generation, 2);
	cr_expect_eq(now.object_generation, out.object_generation);
	cr_expect_str_eq(now.reason, out.reason);
	cr_expect_str_eq(now.updated_by, out.updated_by);

	/* A bump from a generation that has moved on is not another bump. */
	out = bump_ok(s, &c, 100, "late", "slice-0-worker-0", -1);
	cr_expect_eq(out.generation, 2);
	cr_expect_eq(out.object_generation, now.object_generation);
	cr_expect_str_eq(out.reason, "trainer exited with status 3");

	/* The restore step travels into the new generation only. */
	out = bump_ok(s, &now, 100, "corrupt part", "slicectl", 41);
	cr_expect_eq(out.generation, 3);
	cr_expect_eq(out.restore_step, 41);
	root = read_json(s, RUN_CONTROL);
	cr_expect_eq(json_integer_value(json_object_get(root,
							"restore_step")), 41);
	json_decref(root);
	cr_expect_eq(restore_ok(s, 3), 41);
	now = out;
	out = bump_ok(s, &now, 100, "again", "slicectl", -1);
	cr_expect_eq(out.generation, 4);
	cr_expect_eq(out.restore_step, -1);

	cr_expect_eq(control_bump(s, &now, 100, "x", "y", -2, &out, &e),
		     CLOUD_EINVAL);
	store_close(s);
}

Test(control, long_and_odd_text_is_cut_and_kept_valid)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	char reason[600];

	/* 2-byte characters across the 255-byte limit, and a quote. */
	strcpy(reason, "\"q\"\n");
	for (size_t i = 4; i + 2 < sizeof(reason); i += 2)
		memcpy(reason + i, "\xc3\xa9", 2);
	reason[sizeof(reason) - 2] = '\0';
	out = bump_ok(s, &c, 100, reason, "a-very-long-updater-name"
		      "-that-goes-on-and-on-past-sixty-four-bytes", -1);
	now = load_ok(s);
	cr_expect_str_eq(now.reason, out.reason);
	cr_expect_lt(strlen(now.reason), sizeof(now.reason));
	cr_expect_eq(strncmp(now.reason, "\"q\"\n\xc3\xa9", 6), 0);
	/* Cut between characters, never inside one. */
	cr_expect_eq(strlen(now.reason) % 2, 0, "%zu", strlen(now.reason));
	cr_expect_eq(strlen(now.updated_by), sizeof(now.updated_by) - 1);
	store_close(s);
}

/* A thread with a store of its own, acting when all of them are ready,
 * so that they race. */
struct racer {
	int (*act)(struct store *s, struct racer *a, struct err *e);
	const struct control *seen; /* what a bump starts from */
	struct control out;         /* what a bump left */
	int64_t step;               /* the step a restore got */
	pthread_barrier_t *bar;
	int rc;
	char msg[1024];
};

static void *race(void *p)
{
	struct racer *a = p;
	struct store *s = NULL;
	struct err e;

	a->rc = store_open(&s, url, &e);
	pthread_barrier_wait(a->bar);
	if (!a->rc)
		a->rc = a->act(s, a, &e);
	snprintf(a->msg, sizeof(a->msg), "%s", e.msg);
	store_close(s);
	return NULL;
}

/* Runs v[0..n) at once and waits for them all. */
static void race_all(struct racer *v, int n)
{
	pthread_t th[16];
	pthread_barrier_t bar;

	cr_assert_leq(n, 16);
	cr_assert_eq(pthread_barrier_init(&bar, NULL, (unsigned)n), 0);
	for (int i = 0; i < n; i++) {
		v[i].bar = &bar;
		cr_assert_eq(pthread_create(&th[i], NULL, race, &v[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
}

static int bump_for_hang(struct store *s, struct racer *a, struct err *e)
{
	char by[64];

	snprintf(by, sizeof(by), "thread-%p", (void *)a);
	return control_bump(s, a->seen, 100, "hang", by, -1, &a->out, e);
}

Test(control, racing_bumps_from_the_same_seen_collapse_into_one)
{
	enum { N = 8 };
	struct store *s = open_store();
	struct control seen = load_ok(s), now;
	struct racer args[N];

	for (int round = 0; round < 3; round++) {
		memset(args, 0, sizeof(args));
		for (int i = 0; i < N; i++) {
			args[i].act = bump_for_hang;
			args[i].seen = &seen;
		}
		race_all(args, N);
		now = load_ok(s);
		cr_expect_eq(now.generation, seen.generation + 1,
			     "round %d: generation %lld after %d bumps from "
			     "%lld", round, (long long)now.generation, N,
			     (long long)seen.generation);
		for (int i = 0; i < N; i++) {
			cr_expect_eq(args[i].rc, 0, "%s", args[i].msg);
			cr_expect_eq(args[i].out.generation, now.generation);
			cr_expect_eq(args[i].out.object_generation,
				     now.object_generation);
			cr_expect_str_eq(args[i].out.updated_by,
					 now.updated_by);
		}
		seen = now;
	}
	store_close(s);
}

Test(control, racing_bumps_across_processes)
{
	enum { N = 6 };
	struct store *s = open_store();
	struct control seen = load_ok(s), now;
	pid_t pids[N];
	int go[2];

	cr_assert_eq(pipe(go), 0);
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		cr_assert_geq(pids[i], 0);
		if (pids[i] == 0) {
			struct store *cs;
			struct control out;
			struct err e;
			char c;
			int rc;

			close(go[1]);
			if (store_open(&cs, url, &e))
				_exit(10);
			/* Everyone starts when the parent closes the pipe. */
			while (read(go[0], &c, 1) < 0)
				;
			rc = control_bump(cs, &seen, 100, "preempted",
					  "child", -1, &out, &e);
			store_close(cs);
			_exit(rc ? 11 : out.generation == 2 ? 0 : 12);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int i = 0; i < N; i++) {
		int st;

		cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "child %d: status %d", i, st);
	}
	now = load_ok(s);
	cr_expect_eq(now.generation, 2);
	store_close(s);
}

Test(control, budget_spent_fails_the_run)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, failed;

	/* max_restarts 2: generations 2 and 3 are restarts; a third fails. */
	out = bump_ok(s, &c, 2, "one", "w", -1);
	cr_expect_eq(out.generation, 2);
	c = out;
	out = bump_ok(s, &c, 2, "two", "w", -1);
	cr_expect_eq(out.generation, 3);
	cr_expect_str_eq(out.state, "running");
	c = out;
	out = bump_ok(s, &c, 2, "three", "slice-0-worker-1", -1);
	cr_expect_eq(out.generation, 3);
	cr_expect_str_eq(out.state, "failed");
	cr_expect(strstr(out.reason, "restart budget"), "%s", out.reason);
	cr_expect(strstr(out.reason, "max_restarts 2"), "%s", out.reason);
	cr_expect(strstr(out.reason, "three"), "%s", out.reason);
	cr_expect_str_eq(out.updated_by, "slice-0-worker-1");
	failed = load_ok(s);
	cr_expect_str_eq(failed.state, "failed");
	cr_expect_eq(failed.generation, 3);
	cr_expect_eq(failed.object_generation, out.object_generation);

	/* Another worker's bump for the same failure changes nothing. */
	out = bump_ok(s, &c, 2, "three", "slice-0-worker-0", -1);
	cr_expect_str_eq(out.state, "failed");
	cr_expect_eq(out.object_generation, failed.object_generation);
	store_close(s);
}

Test(control, no_restarts_allowed)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out;

	out = bump_ok(s, &c, 0, "crash", "w", -1);
	cr_expect_eq(out.generation, 1);
	cr_expect_str_eq(out.state, "failed");
	cr_expect(strstr(out.reason, "max_restarts 0"), "%s", out.reason);
	store_close(s);
}

Test(control, runs_not_running_are_not_bumped)
{
	static const char *const states[] = { "stopping", "done", "failed" };
	struct store *s = open_store();

	for (size_t i = 0; i < 3; i++) {
		struct control c = load_ok(s), set, out, now;

		set = set_state_ok(s, states[i], "by hand", "slicectl");
		cr_expect_str_eq(set.state, states[i]);
		out = bump_ok(s, &c, 100, "crash", "w", -1);
		cr_expect_str_eq(out.state, states[i]);
		cr_expect_eq(out.generation, c.generation);
		cr_expect_eq(out.object_generation, set.object_generation);
		now = load_ok(s);
		cr_expect_eq(now.object_generation, set.object_generation);
		cr_expect_str_eq(now.reason, "by hand");
		/* An ended run stays ended: start afresh for the next. */
		{
			struct err e;

			cr_assert_eq(store_delete(s, "control.json",
						  STORE_ANY_GENERATION, &e),
				     0, "%s", e.msg);
		}
	}
	store_close(s);
}

Test(control, an_ended_run_stays_ended)
{
	static const char *const ends[] = { "done", "failed" };

	for (size_t i = 0; i < 2; i++) {
		struct store *s = open_store();
		struct control out;
		struct err e;

		load_ok(s);
		set_state_ok(s, ends[i], "ended", "w");
		cr_assert_eq(control_set_state(s, "stopping", "too late",
					       "slicectl", &out, &e),
			     0, "%s", e.msg);
		cr_expect_str_eq(out.state, ends[i]);
		cr_expect_str_eq(out.reason, "ended");
		cr_assert_eq(store_delete(s, "control.json",
					  STORE_ANY_GENERATION, &e),
			     0, "%s", e.msg);
		store_close(s);
	}
}

Test(control, set_state)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	struct err e;

	out = set_state_ok(s, "stopping", "slicectl stop", "slicectl");
	cr_expect_str_eq(out.state, "stopping");
	cr_expect_str_eq(out.reason, "slicectl stop");
	cr_expect_str_eq(out.updated_by, "slicectl");
	cr_expect_eq(out.generation, c.generation);
	cr_expect_eq(out.restore_step, c.restore_step);
	now = load_ok(s);
	cr_expect_str_eq(now.state, "stopping");
	cr_expect_eq(now.object_generation, out.object_generation);

	out = set_state_ok(s, "done", NULL, NULL);
	cr_expect_str_eq(out.state, "done");
	cr_expect_str_eq(out.reason, "");
	cr_expect_str_eq(out.updated_by, "");

	cr_expect_eq(control_set_state(s, "paused", "x", "y", &out, &e),
		     CLOUD_EINVAL);
	cr_expect(strstr(e.msg, "paused"), "%s", e.msg);
	now = load_ok(s);
	cr_expect_str_eq(now.state, "done");
	store_close(s);
}

/* A trainer's checkpoint directory: dir/weights holding text. */
static void make_source(const char *dir, const char *text)
{
	char file[800];
	FILE *f;

	snprintf(file, sizeof(file), "%s/weights", dir);
	cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s", dir);
	f = fopen(file, "w");
	cr_assert(f && fputs(text, f) >= 0 && !fclose(f), "write %s", file);
}

/* A committed step made the way workers make them. */
static void save_step(struct store *s, uint64_t step, unsigned expected)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	char dir[700], text[64];
	struct err e;

	snprintf(dir, sizeof(dir), "%s/src-%llu", root,
		 (unsigned long long)step);
	snprintf(text, sizeof(text), "step %llu\n", (unsigned long long)step);
	make_source(dir, text);
	ckpt_save_options_init(&o);
	o.pack.threads = 1;
	o.parts_expected = expected;
	cr_assert_eq(ckpt_save(s, dir, step, &o, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.committed, expected == 1);
}

Test(control, restore_step_is_zero_when_nothing_is_committed)
{
	struct store *s = open_store();
	struct control c = load_ok(s), now;

	save_step(s, 5, 2); /* a part, never committed */
	cr_expect_eq(restore_ok(s, 1), 0);
	now = load_ok(s);
	cr_expect_eq(now.restore_step, 0);
	cr_expect_eq(now.generation, c.generation);
	/* Chosen once: a step committed later does not change it. */
	save_step(s, 9, 1);
	cr_expect_eq(restore_ok(s, 1), 0);
	store_close(s);
}

Test(control, restore_step_is_the_newest_committed_sound_step)
{
	struct store *s = open_store();
	struct control c = load_ok(s), now;
	struct err e;

	save_step(s, 3, 1);
	save_step(s, 7, 1);
	save_step(s, 9, 2); /* uncommitted */
	/* A malformed COMMIT: the step cannot be restored. */
	cr_assert_eq(store_put(s, "checkpoints/step-0000000008/COMMIT",
			       "{garbage", 8, STORE_CREATE_ONLY, NULL, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(restore_ok(s, 1), 7);
	now = load_ok(s);
	cr_expect_eq(now.restore_step, 7);
	cr_expect_str_eq(now.state, c.state);
	cr_expect_str_eq(now.reason, c.reason);

	save_step(s, 12, 1);
	cr_expect_eq(restore_ok(s, 1), 7, "chosen once per generation");

	/* The next generation chooses again. */
	bump_ok(s, &now, 100, "crash", "w", -1);
	cr_expect_eq(restore_ok(s, 2), 12);
	store_close(s);
}

Test(control, restore_step_of_a_generation_that_moved)
{
	struct store *s = open_store();
	struct control c = load_ok(s), before;
	int64_t step = -7;
	struct err e;

	bump_ok(s, &c, 100, "crash", "w", -1);
	before = load_ok(s);
	cr_expect_eq(control_restore_step(s, 1, &step, &e),
		     CLOUD_EPRECONDITION);
	cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
	cr_expect(strstr(e.msg, "generation 2"), "%s", e.msg);
	cr_expect_eq(load_ok(s).object_generation, before.object_generation);
	cr_expect_eq(control_restore_step(s, 3, &step, &e),
		     CLOUD_EPRECONDITION);
	cr_expect_eq(control_restore_step(s, 0, &step, &e), CLOUD_EINVAL);
	store_close(s);
}

static int restore_gen_1(struct store *s, struct racer *a, struct err *e)
{
	return control_restore_step(s, 1, &a->step, e);
}

static int commit_late(struct store *s, struct racer *a, struct err *e)
{
	struct ckpt_save_options o;
	char dir[700];

	(void)a;
	snprintf(dir, sizeof(dir), "%s/src-late", root);
	ckpt_save_options_init(&o);
	o.pack.threads = 1;
	return ckpt_save(s, dir, 11, &o, NULL, e);
}

Test(control, racing_callers_restore_the_same_step)
{
	enum { N = 8 };
	struct store *s = open_store();
	struct racer args[N + 1];
	struct control now;
	char dir[700];

	load_ok(s);
	save_step(s, 7, 1);
	/* Step 11 is committed while they choose: whichever they get, they
	 * all get the same. */
	snprintf(dir, sizeof(dir), "%s/src-late", root);
	make_source(dir, "late\n");
	memset(args, 0, sizeof(args));
	for (int i = 0; i <= N; i++) {
		args[i].act = i < N ? restore_gen_1 : commit_late;
		args[i].step = -7;
	}
	race_all(args, N + 1);
	cr_expect_eq(args[N].rc, 0, "commit: %s", args[N].msg);
	now = load_ok(s);
	cr_expect(now.restore_step == 7 || now.restore_step == 11, "%lld",
		  (long long)now.restore_step);
	for (int i = 0; i < N; i++) {
		cr_expect_eq(args[i].rc, 0, "%s", args[i].msg);
		cr_expect_eq(args[i].step, now.restore_step, "caller %d: %lld "
			     "vs %lld", i, (long long)args[i].step,
			     (long long)now.restore_step);
	}
	store_close(s);
}

static void put_raw(struct store *s, const char *name, const char *text)
{
	struct err e;

	cr_assert_eq(store_put(s, name, text, strlen(text),
			       STORE_ANY_GENERATION, NULL, &e), 0, "%s",
		     e.msg);
}

/* Bump, set_state and restore_step all fail with code, naming
 * control.json. */
static void changes_fail(struct store *s, int code)
{
	struct control c, out;
	int64_t step;
	struct err e;

	memset(&c, 0, sizeof(c));
	c.generation = 1;
	cr_expect_eq(control_bump(s, &c, 100, "x", "y", -1, &out, &e), code);
	cr_expect_eq(control_set_state(s, "done", "x", "y", &out, &e), code);
	cr_expect_eq(control_restore_step(s, 1, &step, &e), code);
	cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
}

Test(control, malformed_control_is_corrupt)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[1]",
		"{\"state\": \"running\"}",
		"{\"generation\": 0, \"state\": \"running\"}",
		"{\"generation\": \"2\", \"state\": \"running\"}",
		"{\"generation\": 2.5, \"state\": \"running\"}",
		"{\"generation\": 2}",
		"{\"generation\": 2, \"state\": \"sleeping\"}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"restore_step\": -3}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"restore_step\": \"7\"}",
		"{\"generation\": 2, \"state\": \"running\", \"reason\": 5}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"updated_by\": []}",
		"{\"generation\": 2, \"state\": \"running\", \"time\": {}}",
		"{\"generation\": 99999999999999999999999, "
		"\"state\": \"running\"}",
	};
	struct store *s = open_store();
	struct control c;
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		put_raw(s, RUN_CONTROL, bad[i]);
		cr_expect_eq(control_load(s, &c, &e), CLOUD_ECORRUPT,
			     "\"%s\" loaded", bad[i]);
		cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
		cr_expect(strstr(e.msg, "file://"), "%s", e.msg);
	}
	/* Every function says so, none repairs it. */
	changes_fail(s, CLOUD_ECORRUPT);
	{
		char *data;
		size_t len;

		cr_assert_eq(store_read(s, RUN_CONTROL, 1 << 20, &data, &len,
					NULL, &e), 0);
		cr_expect_str_eq(data, bad[sizeof(bad) / sizeof(*bad) - 1]);
		free(data);
	}

	/* Too large to be ours. */
	{
		size_t n = 100 << 10;
		char *big = malloc(n + 1);
		const char *head = "{\"generation\": 1, \"state\": \"running\"}";

		cr_assert(big);
		memset(big, ' ', n);
		memcpy(big, head, strlen(head));
		big[n] = '\0';
		put_raw(s, RUN_CONTROL, big);
		free(big);
		cr_expect_eq(control_load(s, &c, &e), CLOUD_ECORRUPT, "%s",
			     e.msg);
		cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
	}

	/* Minimal but sound: the optional fields default. */
	put_raw(s, RUN_CONTROL, "{\"generation\": 4, \"state\": \"stopping\", "
		    "\"extra\": true}");
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(c.generation, 4);
	cr_expect_str_eq(c.state, "stopping");
	cr_expect_eq(c.restore_step, -1);
	cr_expect_str_eq(c.reason, "");
	store_close(s);
}

Test(control, missing_control_is_not_found_except_for_load)
{
	struct store *s = open_store();
	struct control c;
	struct err e;

	changes_fail(s, CLOUD_ENOTFOUND);
	cr_expect_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	store_close(s);
}

/* ------------------------------------------------------------- status */

static struct worker_status make_status(unsigned slice, unsigned worker,
					const char *state, int64_t gen)
{
	struct worker_status st;

	memset(&st, 0, sizeof(st));
	st.slice = slice;
	st.worker = worker;
	snprintf(st.state, sizeof(st.state), "%s", state);
	st.generation = gen;
	st.step = -1;
	st.committed_step = -1;
	return st;
}

static void put_ok(struct store *s, struct worker_status *st)
{
	struct err e;

	cr_assert_eq(status_put(s, st, &e), 0, "%s", e.msg);
}

static struct worker_status *list_ok(struct store *s, size_t *n)
{
	struct worker_status *v;
	struct err e;

	cr_assert_eq(status_list(s, &v, n, &e), 0, "%s", e.msg);
	return v;
}

Test(status, put_and_list)
{
	struct store *s = open_store();
	struct worker_status a = make_status(0, 1, "running", 3);
	struct worker_status b = make_status(1, 0, "restoring", 3);
	struct worker_status c = make_status(0, 0, "starting", 2);
	struct worker_status d = make_status(10, 2, "finished", 3);
	struct worker_status *v;
	size_t n;
	json_t *root;

	a.step = 1200;
	a.committed_step = 1000;
	a.restarts = 4;
	a.upload_bps = 123456789;
	snprintf(a.message, sizeof(a.message), "training \"fine\"\n\xc3\xa9");
	snprintf(a.boot_id, sizeof(a.boot_id),
		 "0e1c7f0a-4f27-4bb2-9d51-0f3b8ab8a7c1");
	put_ok(s, &a);
	cr_expect(is_rfc3339_utc(a.time), "%s", a.time);
	put_ok(s, &b);
	put_ok(s, &c);
	put_ok(s, &d);

	root = read_json(s, "status/slice-0-worker-1.json");
	cr_expect_eq(json_integer_value(json_object_get(root, "slice")), 0);
	cr_expect_eq(json_integer_value(json_object_get(root, "worker")), 1);
	cr_expect_str_eq(json_string_value(json_object_get(root, "state")),
			 "running");
	cr_expect_eq(json_integer_value(json_object_get(root, "generation")),
		     3);
	cr_expect_eq(json_integer_value(json_object_get(root, "step")), 1200);
	cr_expect_eq(json_integer_value(json_object_get(root,
							"committed_step")),
		     1000);
	cr_expect_eq(json_integer_value(json_object_get(root, "restarts")),
		     4);
	cr_expect_str_eq(json_string_value(json_object_get(root, "time")),
			 a.time);
	cr_expect_str_eq(json_string_value(json_object_get(root, "boot_id")),
			 a.boot_id);
	cr_expect_str_eq(json_string_value(json_object_get(root, "message")),
			 a.message);
	cr_expect_eq(json_integer_value(json_object_get(
			     root, "upload_bytes_per_s")), 123456789);
	json_decref(root);
	/* No upload measured yet: the member is left out, as before. */
	root = read_json(s, "status/slice-1-worker-0.json");
	cr_expect_null(json_object_get(root, "upload_bytes_per_s"));
	json_decref(root);

	v = list_ok(s, &n);
	cr_assert_eq(n, 4);
	/* Name order. */
	cr_expect(v[0].slice == 0 && v[0].worker == 0);
	cr_expect(v[1].slice == 0 && v[1].worker == 1);
	cr_expect(v[2].slice == 1 && v[2].worker == 0);
	cr_expect(v[3].slice == 10 && v[3].worker == 2);
	cr_expect_str_eq(v[1].state, "running");
	cr_expect_eq(v[1].generation, 3);
	cr_expect_eq(v[1].step, 1200);
	cr_expect_eq(v[1].committed_step, 1000);
	cr_expect_eq(v[1].restarts, 4);
	cr_expect_str_eq(v[1].message, a.message);
	cr_expect_str_eq(v[1].time, a.time);
	cr_expect_str_eq(v[1].boot_id, a.boot_id);
	cr_expect_eq(v[1].upload_bps, 123456789);
	cr_expect_eq(v[2].upload_bps, 0);
	cr_expect_eq(v[0].step, -1);
	cr_expect_eq(v[0].committed_step, -1);
	cr_expect_str_eq(v[0].state, "starting");
	free(v);

	/* A new heartbeat replaces the old one. */
	a = make_status(0, 1, "finished", 3);
	put_ok(s, &a);
	v = list_ok(s, &n);
	cr_assert_eq(n, 4);
	cr_expect_str_eq(v[1].state, "finished");
	cr_expect_eq(v[1].step, -1);
	free(v);
	store_close(s);
}

Test(status, empty_listing)
{
	struct store *s = open_store();
	struct worker_status *v = NULL;
	size_t n = 99;

	v = list_ok(s, &n);
	cr_expect_eq(n, 0);
	cr_expect_not_null(v);
	free(v);
	store_close(s);
}

Test(status, put_refuses_bad_values)
{
	struct store *s = open_store();
	struct worker_status st = make_status(0, 0, "napping", 1);
	struct worker_status *v;
	size_t n;
	struct err e;

	cr_expect_eq(status_put(s, &st, &e), CLOUD_EINVAL);
	cr_expect(strstr(e.msg, "napping"), "%s", e.msg);
	st = make_status(0, 0, "running", 1);
	st.step = -2;
	cr_expect_eq(status_put(s, &st, &e), CLOUD_EINVAL);
	v = list_ok(s, &n);
	cr_expect_eq(n, 0);
	free(v);
	store_close(s);
}

Test(status, all_finished)
{
	struct worker_status v[4] = {
		make_status(0, 0, "finished", 2),
		make_status(0, 1, "finished", 2),
		make_status(1, 0, "finished", 2),
		make_status(1, 1, "running", 2),
	};

	cr_expect_not(status_all_finished(v, 4, 4, 2));
	cr_expect(status_all_finished(v, 3, 3, 2));
	cr_expect_not(status_all_finished(v, 3, 3, 1), "another generation");
	cr_expect_not(status_all_finished(v, 3, 4, 2), "a worker missing");
	cr_expect_not(status_all_finished(v, 0, 1, 2));
	cr_expect_not(status_all_finished(NULL, 0, 0, 2), "no workers");
	snprintf(v[3].state, sizeof(v[3].state), "finished");
	cr_expect(status_all_finished(v, 4, 4, 2));
	v[3].generation = 1;
	cr_expect_not(status_all_finished(v, 4, 4, 2));
	/* The same worker twice counts once. */
	v[3] = v[0];
	cr_expect_not(status_all_finished(v, 4, 4, 2));
	cr_expect(status_all_finished(v, 4, 3, 2));
}

Test(status, malformed_objects_are_skipped)
{
	struct store *s = open_store();
	struct worker_status good = make_status(0, 3, "running", 1);
	struct worker_status *v;
	size_t n;

	put_ok(s, &good);
	put_raw(s, "status/slice-0-worker-0.json", "{not json");
	put_raw(s, "status/slice-0-worker-1.json", "[]");
	put_raw(s, "status/slice-0-worker-2.json",
		"{\"slice\": 0, \"worker\": 2, \"state\": 7, "
		"\"generation\": 1}");
	put_raw(s, "status/slice-0-worker-4.json",
		"{\"slice\": 1, \"worker\": 4, \"state\": \"running\", "
		"\"generation\": 1}");
	put_raw(s, "status/slice-0-worker-5.json",
		"{\"slice\": 0, \"worker\": 5, \"state\": \"running\", "
		"\"generation\": -1}");
	put_raw(s, "status/slice-0-worker-6.json",
		"{\"slice\": 0, \"worker\": 6, \"state\": \"running\", "
		"\"generation\": 1, \"step\": \"12\"}");
	put_raw(s, "status/slice-0-worker-7.json", "");
	/* Not status objects at all: ignored. */
	put_raw(s, "status/notes.txt", "hello");
	put_raw(s, "status/slice-01-worker-0.json", "{}");
	put_raw(s, "status/slice-0-worker-8.json.tmp", "{}");
	put_raw(s, "status/sub/slice-0-worker-9.json", "{}");
	/* Sound, with the optional fields left out, and a state from a
	 * newer supervisor. */
	put_raw(s, "status/slice-2-worker-0.json",
		"{\"slice\": 2, \"worker\": 0, \"state\": \"draining\", "
		"\"generation\": 1}");

	v = list_ok(s, &n);
	cr_assert_eq(n, 2);
	cr_expect(v[0].slice == 0 && v[0].worker == 3);
	cr_expect_str_eq(v[0].state, "running");
	cr_expect(v[1].slice == 2 && v[1].worker == 0);
	cr_expect_str_eq(v[1].state, "draining");
	cr_expect_eq(v[1].step, -1);
	cr_expect_eq(v[1].committed_step, -1);
	cr_expect_eq(v[1].restarts, 0);
	cr_expect_str_eq(v[1].message, "");
	free(v);
	store_close(s);
}

/* Heartbeats of a large run share half the bucket's initial write rate
 * (two writes each: status and a log segment). */
Test(status, period_grows_with_the_run_beyond_its_share)
{
	cr_expect_eq(status_period_ms(10, 8), 10000);
	cr_expect_eq(status_period_ms(10, 1000), 10000);
	cr_expect_eq(status_period_ms(1, 1000), 4000);
	cr_expect_eq(status_period_ms(10, 4096), 16384);
	cr_expect_eq(status_period_ms(10, 10000000), 3600000);
}
