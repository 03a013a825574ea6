/*
 * The queued resource's spec builder (launcher/qr_spec.c) that `slicectl
 * create` and `slicectl job` share: the bodies each command sent before
 * they shared it, ssh-keys merged after a value the user gave, the RSA
 * warning, and the capacity refusals.
 */
#include "cloud/cloud.h"
#include "launcher/qr_spec.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PARENT "projects/proj/locations/us-central2-b"
#define OTHER_KEY "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBERERERERERERERERERERERERERERERERERERERERER bob"

static char tmp[HARNESS_PATH];
static char pub[1024];

/* A one-slice v4-8 spec named id, as the commands start one. */
static void spec_init(struct tpu_qr_spec *s, const char *id)
{
	tpu_qr_spec_init(s);
	s->id = id;
	s->accelerator_type = "v4-8";
	s->runtime_version = "rt";
	s->node_count = 1;
}

static void up(void)
{
	char path[HARNESS_PATH + 32], *text;
	struct tpu_qr_spec s;
	struct qr_flags f = { .user = "u" };
	struct err e;

	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "qrspec"), 0);
	cr_assert_eq(setenv("SLICECTL_HOME", tmp, 1), 0);
	/* slicectl's own key, made by a first build. */
	spec_init(&s, "k0");
	err_init(&e);
	cr_assert_eq(qr_spec_build(&s, &f, &e), 0, "%s", e.msg);
	tpu_qr_spec_release(&s);
	snprintf(path, sizeof(path), "%s/id_ed25519.pub", tmp);
	text = read_file(path, NULL);
	cr_assert_not_null(text, "no key made in %s", tmp);
	text[strcspn(text, "\n")] = '\0';
	snprintf(pub, sizeof(pub), "%s", text);
	free(text);
}

static void down(void)
{
	rm_rf(tmp);
}

TestSuite(qr_spec, .init = up, .fini = down, .timeout = 60);

/* s's request body equals want (a printf format given the values). */
static void assert_body(const struct tpu_qr_spec *s, const char *want)
{
	struct err e;
	char *out = NULL;
	json_t *got, *exp;

	err_init(&e);
	cr_assert_eq(tpu_qr_body(s, PARENT, &out, &e), 0, "%s", e.msg);
	got = json_loads(out, 0, NULL);
	exp = json_loads(want, 0, NULL);
	cr_assert_not_null(exp, "bad expected JSON: %s", want);
	cr_assert(json_equal(got, exp), "got %s\nwant %s", out, want);
	json_decref(got);
	json_decref(exp);
	free(out);
}

/* The body of `slicectl create c1 --accelerator-type v4-8
 * --runtime-version rt --spot --metadata foo=a=b --startup-script FILE
 * --user alice`, as cmd_create.c built it before. */
Test(qr_spec, gives_the_body_create_sent)
{
	struct tpu_qr_spec s;
	struct qr_flags f = { .spot = true, .reservation_flag = true,
			      .user = "alice",
			      .startup_script = "#!/bin/sh\necho hi\n" };
	struct err e;
	char want[4096];

	spec_init(&s, "c1");
	cr_assert_eq(strlist_push(&s.metadata, "foo=a=b"), 0);
	err_init(&e);
	cr_assert_eq(qr_spec_build(&s, &f, &e), 0, "%s", e.msg);
	snprintf(want, sizeof(want),
		 "{\"spot\": {}, \"tpu\": {\"nodeSpec\": [{\"parent\": \""
		 PARENT "\", \"nodeId\": \"c1\", \"node\": "
		 "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": \"rt\", "
		 "\"metadata\": {\"foo\": \"a=b\", "
		 "\"startup-script\": \"#!/bin/sh\\necho hi\\n\", "
		 "\"ssh-keys\": \"alice:%s\"}}}]}}", pub);
	assert_body(&s, want);
	tpu_qr_spec_release(&s);
}

/* The body of `slicectl job --name r1 --accelerator-type v4-16
 * --num-slices 2 --provisioning-model flex-start --max-run-duration 72h`
 * on the Cloud TPU path, as cmd_job.c built it before: the rendered
 * startup script, the run's label, slicectl's key for the default
 * remote user. */
Test(qr_spec, gives_the_body_job_sent)
{
	struct tpu_qr_spec s;
	struct qr_flags f = { .provisioning_model = "flex-start",
			      .max_run_ms = 72 * 3600 * 1000u,
			      .startup_script = "#!/bin/sh\nboot\n" };
	char user[USER_NAME_MAX], want[4096];
	struct err e;

	default_remote_user(user, sizeof(user));
	tpu_qr_spec_init(&s);
	s.id = "r1";
	s.accelerator_type = "v4-16";
	s.runtime_version = "tpu-ubuntu2204-base";
	s.node_count = 2;
	cr_assert_eq(strlist_push(&s.labels, "slicectl_run=r1"), 0);
	err_init(&e);
	cr_assert_eq(qr_spec_build(&s, &f, &e), 0, "%s", e.msg);
	snprintf(want, sizeof(want),
		 "{\"provisioningModel\": \"FLEX_START\", \"runDuration\": "
		 "{\"maxRunDuration\": \"259200s\"}, \"tpu\": {\"nodeSpec\": "
		 "[{\"parent\": \"" PARENT "\", \"multiNodeParams\": "
		 "{\"nodeCount\": 2, \"nodeIdPrefix\": \"r1\"}, \"node\": "
		 "{\"acceleratorType\": \"v4-16\", \"runtimeVersion\": "
		 "\"tpu-ubuntu2204-base\", \"labels\": {\"slicectl_run\": "
		 "\"r1\"}, \"metadata\": {\"startup-script\": "
		 "\"#!/bin/sh\\nboot\\n\", \"ssh-keys\": \"%s:%s\"}}}]}}",
		 user, pub);
	assert_body(&s, want);
	tpu_qr_spec_release(&s);
}

/* The value of metadata ssh-keys in s's body (free it). */
static char *ssh_keys(const struct tpu_qr_spec *s)
{
	struct err e;
	char *out = NULL, *keys;
	json_t *b;

	err_init(&e);
	cr_assert_eq(tpu_qr_body(s, PARENT, &out, &e), 0, "%s", e.msg);
	b = json_loads(out, 0, NULL);
	free(out);
	cr_assert_not_null(b);
	keys = strdup(json_string_value(json_object_get(json_object_get(
		json_object_get(json_array_get(json_object_get(
			json_object_get(b, "tpu"), "nodeSpec"), 0), "node"),
		"metadata"), "ssh-keys")));
	json_decref(b);
	cr_assert_not_null(keys);
	return keys;
}

Test(qr_spec, merges_the_users_ssh_keys_after_the_last_given)
{
	static const char *const given[] = {
		"ssh-keys=carol:" OTHER_KEY, "ssh-keys=bob:" OTHER_KEY,
	};
	struct tpu_qr_spec s;
	struct qr_flags f = { .user = "alice" };
	char want[2048], *keys;
	struct err e;

	spec_init(&s, "m1");
	for (size_t i = 0; i < 2; i++)
		cr_assert_eq(strlist_push(&s.metadata, given[i]), 0);
	err_init(&e);
	cr_assert_eq(qr_spec_build(&s, &f, &e), 0, "%s", e.msg);
	keys = ssh_keys(&s);
	snprintf(want, sizeof(want), "bob:" OTHER_KEY "\nalice:%s", pub);
	cr_assert_str_eq(keys, want);
	free(keys);
	tpu_qr_spec_release(&s);

	/* An empty value given: no empty line before ours. */
	spec_init(&s, "m2");
	cr_assert_eq(strlist_push(&s.metadata, "ssh-keys="), 0);
	cr_assert_eq(qr_spec_build(&s, &f, &e), 0, "%s", e.msg);
	keys = ssh_keys(&s);
	snprintf(want, sizeof(want), "alice:%s", pub);
	cr_assert_str_eq(keys, want);
	free(keys);
	tpu_qr_spec_release(&s);
}

/* qr_spec_build's stderr for identity (NULL: slicectl's own key), in a
 * malloc'd string. */
static char *build_says(const char *identity, int *rc)
{
	char path[HARNESS_PATH + 32], *said;
	struct tpu_qr_spec s;
	struct qr_flags f = { .user = "alice", .identity = identity };
	struct err e;
	int fd, saved;

	snprintf(path, sizeof(path), "%s/stderr", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	cr_assert(saved >= 0);
	dup2(fd, 2);
	close(fd);
	spec_init(&s, "k1");
	err_init(&e);
	*rc = qr_spec_build(&s, &f, &e);
	tpu_qr_spec_release(&s);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	said = read_file(path, NULL);
	cr_assert_not_null(said);
	return said;
}

Test(qr_spec, warns_about_an_rsa_key)
{
	char key[HARNESS_PATH + 32], *said;
	int rc;

	snprintf(key, sizeof(key), "%s/id_rsa", tmp);
	cr_assert_eq(sh("ssh-keygen -q -t rsa -b 2048 -m PEM -N '' -f '%s'",
			key), 0);
	said = build_says(key, &rc);
	cr_assert_eq(rc, 0, "%s", said);
	ASSERT_HAS(said, "is an RSA key");
	free(said);
	said = build_says(NULL, &rc);
	cr_assert_eq(rc, 0, "%s", said);
	cr_assert_null(strstr(said, "RSA"), "warned of an ed25519 key: %s",
		       said);
	free(said);
}

Test(qr_spec, refuses_an_unreadable_identity)
{
	struct tpu_qr_spec s;
	struct qr_flags f = { .identity = "/nonexistent/key" };
	struct err e;

	spec_init(&s, "i1");
	err_init(&e);
	cr_assert_eq(qr_spec_build(&s, &f, &e), COMMON_EUSAGE);
	ASSERT_HAS(e.msg, "--identity /nonexistent/key");
	tpu_qr_spec_release(&s);
}

struct capacity_case {
	struct qr_flags f;
	const char *reservation;
	int rc;
	enum tpu_capacity capacity;
	const char *msg; /* part of the refusal */
};

Test(qr_spec, chooses_or_refuses_the_capacity)
{
	const struct capacity_case cases[] = {
		{ { 0 }, NULL, 0, TPU_CAPACITY_ON_DEMAND, NULL },
		{ { .spot = true }, NULL, 0, TPU_CAPACITY_SPOT, NULL },
		{ { .reserved = true }, NULL, 0, TPU_CAPACITY_RESERVED, NULL },
		{ { .reserved = true }, "r1", 0, TPU_CAPACITY_RESERVED, NULL },
		{ { 0 }, "r1", 0, TPU_CAPACITY_RESERVED, NULL },
		{ { .best_effort = true }, NULL, 0, TPU_CAPACITY_BEST_EFFORT,
		  NULL },
		{ { .provisioning_model = "spot", .spot = true }, NULL, 0,
		  TPU_CAPACITY_SPOT, NULL },
		{ { .provisioning_model = "flex-start", .max_run_ms = 3600000 },
		  NULL, 0, TPU_CAPACITY_FLEX_START, NULL },
		{ { .spot = true, .reserved = true }, NULL, COMMON_EUSAGE, 0,
		  "choose one of --spot, --reserved and --best-effort" },
		{ { .spot = true, .reservation_flag = true }, "r1",
		  COMMON_EUSAGE, 0, "choose one of --spot, --reserved (or "
		  "--reservation) and --best-effort" },
		{ { .provisioning_model = "spot", .reserved = true }, NULL,
		  COMMON_EUSAGE, 0, "--reserved" },
		{ { .provisioning_model = "flex-start" }, NULL, COMMON_EUSAGE,
		  0, NULL },
		{ { .provisioning_model = "flex-start", .max_run_ms = 1500 },
		  NULL, COMMON_EUSAGE, 0,
		  "--max-run-duration 1.500s: durations take whole "
		  "seconds" },
		{ { .valid_until_ms = 500 }, NULL, COMMON_EUSAGE, 0,
		  "--valid-until-duration 0.500s: durations take "
		  "whole seconds" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct capacity_case *c = &cases[i];
		struct tpu_qr_spec s;
		struct err e;
		int rc;

		spec_init(&s, "c");
		s.reservation = c->reservation;
		err_init(&e);
		rc = qr_spec_capacity(&s, &c->f, &e);
		cr_assert_eq(rc, c->rc, "case %zu: %d: %s", i, rc, e.msg);
		if (!rc)
			cr_assert_eq(s.capacity, c->capacity, "case %zu", i);
		if (c->msg)
			cr_assert(strstr(e.msg, c->msg), "case %zu: %s", i,
				  e.msg);
		tpu_qr_spec_release(&s);
	}
}
