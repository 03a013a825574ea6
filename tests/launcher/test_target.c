/*
 * slicectl's targets (launcher/target/target.h): --target's choices, the
 * local provider chosen by --target local and by its synonym --local, and
 * a run's target read from job.json in each shape it has.
 */
#include "launcher/target/target.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

static char tmp[HARNESS_PATH];
static char bucket[HARNESS_PATH + 16];

static void up(void)
{
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "target"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	cr_assert_eq(sh("mkdir -p '%s/bucket'", tmp), 0);
}

static void down(void)
{
	rm_rf(tmp);
}

TestSuite(target, .init = up, .fini = down, .timeout = 120);

/* The target a job.json's text stands for. */
static const char *target_of_json(const char *text)
{
	const struct target_ops *t;
	struct job j;
	struct err e;

	job_init(&j);
	err_init(&e);
	cr_assert_eq(job_parse(text, strlen(text), &j, &e), 0, "%s", e.msg);
	t = target_of(&j);
	job_release(&j);
	cr_assert_not_null(t);
	return t->name;
}

Test(target, the_kind_of_every_shape_of_job_json)
{
	/* Cloud TPU and local runs, as slicectl has always written them: a
	 * "tpu" object, or neither it nor "target". */
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\", \"tpu\": {\"project\": "
					"\"p\", \"zone\": \"z\", \"name\": "
					"\"a\"}}"),
			 "tpu-vm");
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\"}"),
			 "local");
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\", \"target\": {\"kind\": "
					"\"gke\", \"namespace\": \"ns\", "
					"\"jobset\": \"a\"}}"),
			 "gke");
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\", \"target\": {\"kind\": "
					"\"slurm\", \"partition\": \"debug\", "
					"\"job_id\": \"7\"}}"),
			 "slurm");
}

/* job_parse's error for a job.json, or "" when it parses. */
static const char *refusal_of_json(const char *text)
{
	static struct err e;
	struct job j;

	err_init(&e);
	if (!job_parse(text, strlen(text), &j, &e)) {
		job_release(&j);
		return "";
	}
	return e.msg;
}

Test(target, the_kind_written_one_way_for_every_target)
{
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\", \"tpu\": {\"project\": "
					"\"p\", \"zone\": \"z\", \"name\": "
					"\"a\"}, \"target\": {\"kind\": "
					"\"tpu-vm\"}}"),
			 "tpu-vm");
	cr_assert_str_eq(target_of_json("{\"name\": \"a\", \"command\": "
					"\"true\", \"target\": {\"kind\": "
					"\"local\"}}"),
			 "local");
	cr_assert(strstr(refusal_of_json("{\"name\": \"a\", \"command\": "
					 "\"true\", \"target\": {\"kind\": "
					 "\"tpu-vm\"}}"),
			 "a \"tpu-vm\" \"target\" needs a \"tpu\" object"));
	cr_assert(strstr(refusal_of_json("{\"name\": \"a\", \"command\": "
					 "\"true\", \"target\": {\"kind\": "
					 "\"local\", \"jobset\": \"a\"}}"),
			 "has only \"kind\""));
	cr_assert(strstr(refusal_of_json("{\"name\": \"a\", \"command\": "
					 "\"true\", \"target\": {\"kind\": "
					 "\"sagemaker\"}}"),
			 "one of tpu-vm, gke, slurm, local, vertex, not "
			 "\"sagemaker\""));
}

Test(target, the_table_names_each_row_once)
{
	const char *const *names = target_choices();
	size_t n = 0;

	for (; names[n]; n++) {
		cr_assert_eq(target_find(names[n]), targets[n], "%s", names[n]);
		cr_assert_not_null(targets[n]->submit, "%s", names[n]);
		/* A view has words, and words belong to a view. */
		cr_assert_eq(!targets[n]->status, !targets[n]->words, "%s",
			     names[n]);
	}
	cr_assert_eq(n, TARGET_LAST);
	cr_assert_null(target_find("sagemaker"));
}

Test(target, an_unknown_target_is_named_with_the_valid_ones)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "job", "r", "--target", "sagemaker", "--bucket",
				  bucket, "--command", "true", NULL }, NULL),
		     0);
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "'sagemaker'"), "%s", r.err);
	cr_assert(strstr(r.err, "tpu-vm, gke, slurm, local"), "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(sh("[ -z \"$(ls -A '%s/bucket')\" ]", tmp), 0,
		     "the bucket is not empty");
}

/* slicectl job for run on this machine, one worker whose trainer ends at
 * once, with how (--target local or --local). */
static void local_job(const char *run, const char *const *how)
{
	char dir[HARNESS_PATH + 16], home[HARNESS_PATH + 32];
	const char *env[] = { home, NULL };
	const char *argv[24] = { "job", run, "--bucket", bucket,
				 "--workers-per-slice", "1", "--command",
				 "true", "--quiet", "--local-dir", dir };
	struct run_result r;
	size_t n = 11;

	snprintf(dir, sizeof(dir), "%s/%s", tmp, run);
	snprintf(home, sizeof(home), "SLICECTL_HOME=%s/home", tmp);
	for (; *how; how++)
		argv[n++] = *how;
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(&r, argv, env), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
	/* A local run's job.json: no queued resource, its kind recorded. */
	cr_assert_eq(sh("! grep -q '\"tpu\"' '%s/bucket/%s/job.json'", tmp,
			run), 0);
	cr_assert_eq(sh("tr -d ' \\n' < '%s/bucket/%s/job.json' | "
			"grep -q '\"target\":{\"kind\":\"local\"}'", tmp, run),
		     0);
	cr_assert_eq(sh("grep -q '\"done\"' '%s/bucket/%s/control.json'", tmp,
			run), 0);
}

Test(target, local_by_its_name_and_by_the_older_flag)
{
	struct run_result r;

	local_job("by-name", (const char *const[]){ "--target", "local",
						    NULL });
	local_job("by-flag", (const char *const[]){ "--local", NULL });
	local_job("by-both", (const char *const[]){ "--local", "--target",
						    "local", NULL });
	/* An existing local run has nothing to delete or reset. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "delete", "by-name", "--bucket", bucket,
				  NULL }, NULL), 0);
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, "on the local target"), "%s", r.err);
	run_result_release(&r);
}

/* slicectl job r --local with another --target: refused, saying says. */
static void refused_with(const char *target, const char *says)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "job", "r", "--local", "--target", target,
				  "--bucket", bucket, "--command", "true",
				  NULL }, NULL), 0);
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_assert(strstr(r.err, says), "%s", r.err);
	run_result_release(&r);
}

Test(target, local_with_another_target_is_refused)
{
	refused_with("tpu-vm", "--local is --target local");
	refused_with("slurm", "not for --target slurm");
	refused_with("gke", "not for --target gke");
}

/* slicectl watch: each row watches, or says why it has nothing to. */
Test(target, every_row_watches_or_says_why_not)
{
	for (size_t i = 0; i < TARGET_LAST; i++) {
		const struct target_ops *t = targets[i];

		cr_assert(!t->watch != !t->no_watch, "%s: watch %s, no_watch %s",
			  t->name, t->watch ? "set" : "NULL",
			  t->no_watch ? t->no_watch : "NULL");
	}
	cr_assert_not_null(target_find("tpu-vm")->watch);
	cr_assert_not_null(target_find("vertex")->watch);
}
