/*
 * tests/run/test_job_spec.c: job.json both ways: defaults, every
 * field, round trips, and what parsing refuses (syntax, shape, names,
 * types and ranges).
 */
#include "run/run.h"
#include "tests/run/spec_check.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(job, .init = spec_setup, .fini = spec_teardown, .timeout = 30);

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
		{ "rendezvous_port", "80", "from 1024 to 65520" },
		{ "rendezvous_port", "65521", "from 1024 to 65520" },
		{ "rendezvous_port", "\"29500\"", "must be an integer" },
		{ "preflight", "\"\"", "must be a non-empty command" },
		{ "preflight", "[\"nvidia-smi\"]", "must be a string or null" },
		{ "preflight_timeout_s", "0", "from 1 to 86400" },
		{ "preflight_timeout_s", "86401", "from 1 to 86400" },
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

	parse_ok("{\"name\": \"r\", \"command\": \"c\", "
		 "\"rendezvous_port\": 1024}", &j);
	cr_expect_eq(j.rendezvous_port, 1024);
	job_release(&j);
	parse_ok("{\"name\": \"r\", \"command\": \"c\", "
		 "\"rendezvous_port\": 65520}", &j);
	cr_expect_eq(j.rendezvous_port, 65520);
	job_release(&j);
}

/* A job.json written before the field takes torchrun's default port, and
 * one that has it keeps it through a round trip. */
Test(job, rendezvous_port)
{
	struct job j, k;
	char *text;
	struct err e;

	parse_ok("{\"name\": \"r\", \"command\": \"c\"}", &j);
	cr_expect_eq(j.rendezvous_port, 29500);
	j.rendezvous_port = 31000;
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_not_null(strstr(text, "\"rendezvous_port\": 31000"), "%s",
			   text);
	parse_ok(text, &k);
	cr_expect_eq(k.rendezvous_port, 31000);
	free(text);
	job_release(&j);
	job_release(&k);
}

/* A job.json written before the preflight has none; one that has it
 * keeps it and its bound through a round trip. */
Test(job, preflight)
{
	struct job j, k;
	char *text;
	struct err e;

	parse_ok("{\"name\": \"r\", \"command\": \"c\"}", &j);
	cr_expect_null(j.preflight);
	cr_expect_eq(j.preflight_timeout_s, 300);
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(text, "\"preflight\":"), "%s", text);
	free(text);
	j.preflight = strdup("nvidia-smi -L && test \"$RANK\" != 1");
	cr_assert_not_null(j.preflight);
	j.preflight_timeout_s = 86400;
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	parse_ok(text, &k);
	cr_expect_str_eq(k.preflight, j.preflight);
	cr_expect_eq(k.preflight_timeout_s, 86400);
	free(text);
	job_release(&j);
	job_release(&k);
}

/* A job.json written before the field exports nothing; one that has it
 * keeps its project through a round trip; a malformed one is refused
 * with the field named. */
Test(job, monitoring)
{
	static const char *const bad[][2] = {
		{ "\"on\"", "must be an object {\"project\": P} or null" },
		{ "true", "not a boolean" },
		{ "{}", "one field, \"project\"" },
		{ "{\"project\": \"p\", \"period_s\": 60}",
		  "one field, \"project\"" },
		{ "{\"project\": 7}", "\"project\" must be a string" },
		{ "{\"project\": \"a b\"}", "without spaces" },
		{ "{\"project\": \"\"}", "\"project\" as a non-empty" },
	};
	struct job j, k;
	char *text, json[256];
	struct err e;

	parse_ok("{\"name\": \"r\", \"command\": \"c\"}", &j);
	cr_expect_null(j.monitoring_project);
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(text, "monitoring"), "%s", text);
	free(text);
	j.monitoring_project = strdup("my-project");
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_not_null(strstr(text, "\"monitoring\": {\n    "
				  "\"project\": \"my-project\""), "%s", text);
	parse_ok(text, &k);
	cr_expect_str_eq(k.monitoring_project, "my-project");
	free(text);
	job_release(&j);
	job_release(&k);
	parse_ok("{\"name\": \"r\", \"command\": \"c\", "
		 "\"monitoring\": null}", &j);
	cr_expect_null(j.monitoring_project);
	job_release(&j);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(json, sizeof(json),
			 "{\"name\": \"r\", \"command\": \"c\", "
			 "\"monitoring\": %s}", bad[i][0]);
		parse_fails(json, bad[i][1]);
	}
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

/* max_infra_restarts (issue 26): absent or null is no limit, and is not
 * written, so older supervisors read the job.json of a run without one. */
Test(job, max_infra_restarts)
{
	struct job j;
	char *json = NULL;
	struct err e;

	parse_ok("{\"name\": \"r\", \"command\": \"c\"}", &j);
	cr_expect_eq(j.max_infra_restarts, -1);
	cr_assert_eq(job_to_json(&j, &json, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(json, "max_infra_restarts"), "%s", json);
	free(json);
	job_release(&j);
	parse_ok("{\"name\": \"r\", \"command\": \"c\", "
		 "\"max_infra_restarts\": null}", &j);
	cr_expect_eq(j.max_infra_restarts, -1);
	job_release(&j);
	parse_ok("{\"name\": \"r\", \"command\": \"c\", "
		 "\"max_infra_restarts\": 3}", &j);
	cr_expect_eq(j.max_infra_restarts, 3);
	cr_assert_eq(job_to_json(&j, &json, &e), 0, "%s", e.msg);
	cr_expect(strstr(json, "\"max_infra_restarts\": 3"), "%s", json);
	free(json);
	job_release(&j);
	parse_fails("{\"name\": \"r\", \"command\": \"c\", "
		    "\"max_infra_restarts\": -1}", "\"max_infra_restarts\"");
}

Test(job, hang_signal)
{
	static const char *const bad[] = { "\"USR1\"", "\"SIGKILL\"",
					   "\"SIGSEGV\"", "10", "true", "\"\"" };
	struct job j, k;
	char *text, json[256];
	struct err e;

	parse_ok("{\"name\": \"r\", \"command\": \"c\"}", &j);
	cr_expect_eq(j.hang_signal, 0);
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(text, "hang_signal"), "older supervisors: %s",
		       text);
	free(text);
	j.hang_signal = SIGUSR1;
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_expect_not_null(strstr(text, "\"hang_signal\": \"SIGUSR1\""), "%s",
			   text);
	parse_ok(text, &k);
	cr_expect_eq(k.hang_signal, SIGUSR1);
	free(text);
	job_release(&k);
	j.hang_signal = SIGKILL;
	cr_expect_eq(job_to_json(&j, &text, &e), COMMON_EINVAL);
	job_release(&j);
	parse_ok("{\"name\": \"r\", \"command\": \"c\", \"hang_signal\": null}",
		 &j);
	cr_expect_eq(j.hang_signal, 0);
	job_release(&j);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(json, sizeof(json),
			 "{\"name\": \"r\", \"command\": \"c\", "
			 "\"hang_signal\": %s}", bad[i]);
		parse_fails(json, "\"hang_signal\"|SIGUSR1");
	}
	cr_expect_eq(job_signal_number("USR2"), SIGUSR2);
	cr_expect_eq(job_signal_number("SIGQUIT"), SIGQUIT);
	cr_expect_eq(job_signal_number("SIGTERM"), 0);
	cr_expect_eq(job_signal_number(NULL), 0);
}

/* persist_every (issue 27): absent is every step, written only when it
 * keeps steps off the bucket (older supervisors refuse fields they do not
 * know), and a count. */
Test(job, persist_every)
{
	const char *base = "{\"name\": \"r\", \"command\": \"true\"";
	char json[256], *out = NULL;
	struct job j;
	struct err e;

	snprintf(json, sizeof(json), "%s}", base);
	parse_ok(json, &j);
	cr_expect_eq(j.persist_every, 0);
	cr_assert_eq(job_to_json(&j, &out, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(out, "persist_every"), "%s", out);
	free(out);
	job_release(&j);
	snprintf(json, sizeof(json), "%s, \"persist_every\": 10}", base);
	parse_ok(json, &j);
	cr_expect_eq(j.persist_every, 10);
	cr_assert_eq(job_to_json(&j, &out, &e), 0, "%s", e.msg);
	cr_expect(strstr(out, "\"persist_every\": 10"), "%s", out);
	free(out);
	job_release(&j);
	snprintf(json, sizeof(json), "%s, \"persist_every\": -1}", base);
	parse_fails(json, "persist_every|from 0 (every step) to 4000000000");
	snprintf(json, sizeof(json), "%s, \"persist_every\": \"10\"}", base);
	parse_fails(json, "persist_every|integer");
}
