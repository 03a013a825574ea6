/*
 * slicectl logs end to end, against a run's logs written directly in a
 * file:// bucket (run_state.c): a worker's newest generation, JSON lines,
 * --follow as a log grows and the run ends, segments beside old logs.
 */
#define _GNU_SOURCE /* asprintf */

#include "common/common.h"
#include "tests/launcher/run_state.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(logs, .init = up, .fini = down, .timeout = 120);

static void two_by_two_with_logs(void)
{
	put_job(2, 2, 10, 100);
	put("logs/slice-0-worker-0/gen-1.log", "g1 line 1\ng1 line 2\n");
	put("logs/slice-0-worker-0/gen-2.log", "g2 line 1\ng2 partial");
	put("logs/slice-1-worker-1/gen-1.log", "w11 says hi\n");
	put("logs/slice-1-worker-1/gen-10.log", "w11 gen 10\n");
}

Test(logs, newest_generation_of_a_worker)
{
	struct run_result r;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", NULL }), 0,
		     "%s", r.err);
	cr_assert_str_eq(r.out, "g2 line 1\ng2 partial");
	cr_assert_str_eq(r.err, "slicectl: run-1 has 4 workers; showing worker "
				"0/0 (choose another with --worker S/W)\n");
	run_result_release(&r);

	/* Generations order as numbers: 10 after 1. */
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "1/1", NULL }), 0);
	cr_assert_str_eq(r.out, "w11 gen 10\n");
	cr_assert_str_eq(r.err, "");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "-w", "1/1",
					       "--generation", "1", NULL }), 0);
	cr_assert_str_eq(r.out, "w11 says hi\n");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--generation", "1",
					       NULL }), 0);
	cr_assert_str_eq(r.out, "g1 line 1\ng1 line 2\n");
	run_result_release(&r);
}

Test(logs, json_lines)
{
	struct run_result r;
	char *line, *save = NULL;
	const char *const want[] = { "g2 line 1", "g2 partial" };
	size_t n = 0;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--format", "json",
					       NULL }), 0, "%s", r.err);
	for (line = strtok_r(r.out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), n++) {
		json_t *v = parse(line);

		cr_assert_lt(n, 2, "%s", line);
		cr_assert_str_eq(json_string_value(json_object_get(v, "type")),
				 "line");
		cr_assert_eq(json_integer_value(json_object_get(v, "slice")),
			     0);
		cr_assert_eq(json_integer_value(json_object_get(v, "worker")),
			     0);
		cr_assert_eq(json_integer_value(json_object_get(v,
								"generation")),
			     2);
		cr_assert_str_eq(json_string_value(json_object_get(v, "text")),
				 want[n]);
		json_decref(v);
	}
	cr_assert_eq(n, 2);
	run_result_release(&r);
}

Test(logs, missing_worker_generation_or_log_is_exit_4)
{
	struct run_result r;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "2/0", NULL }), 4);
	ASSERT_HAS(r.err, "run-1 has 2 slices of 2 workers: there is no worker "
			  "2/0");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--generation", "5",
					       NULL }), 4);
	ASSERT_HAS(r.err, "no log of generation 5 for slice-0-worker-0 under ");
	ASSERT_HAS(r.err, "(it has generations 1, 2)");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "1/0", NULL }), 4);
	ASSERT_HAS(r.err, "no log of slice-1-worker-0 under ");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
}

/* Waits until path holds want (whole, or within it when part), or fails
 * after 20 s. */
static void wait_for(const char *path, const char *want, bool part)
{
	char *got = NULL;

	for (int i = 0; i < 400; i++) {
		free(got);
		got = read_file(path, NULL);
		if (got && (part ? strstr(got, want) != NULL
				 : !strcmp(got, want))) {
			free(got);
			return;
		}
		usleep(50 * 1000);
	}
	cr_assert_fail("%s holds:\n%s\nnot:\n%s", path, got ? got : "(none)",
		       want);
}

static void wait_for_file(const char *path, const char *want)
{
	wait_for(path, want, false);
}

/* Waits for slicectl to end within 20 s; its exit status. */
static int slicectl_ended(pid_t pid)
{
	int rc = wait_exit(pid, 20);

	cr_assert_neq(rc, -1, "slicectl did not end");
	return rc;
}

/* Numbered lines first..last-1, as a log holds them. */
static char *lines(int first, int last)
{
	struct buf b;

	buf_init(&b);
	for (int i = first; i < last; i++)
		cr_assert_eq(buf_appendf(&b, "step %06d loss 0.%06d\n", i,
					 i * 7 % 1000000), 0);
	return buf_detach(&b);
}

Test(logs, follow_prints_what_comes_and_ends_with_the_run)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], want[256];
	char *big, *slid, *part, *got, *wanted;
	struct control c;
	struct err e;
	pid_t pid;

	put_job(1, 1, 10, 100);
	control_now();
	put("logs/slice-0-worker-0/gen-1.log", "one\n");
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "--follow",
					       "--interval", "0.1", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for_file(out, "one\n");

	/* It grows: re-uploaded whole, only the new bytes are printed. */
	put("logs/slice-0-worker-0/gen-1.log", "one\ntwo\n");
	wait_for_file(out, "one\ntwo\n");

	/* A new generation: the follower moves on to it. */
	put("logs/slice-0-worker-0/gen-2.log", "three\n");
	wait_for_file(out, "one\ntwo\nthree\n");
	put("logs/slice-0-worker-0/gen-2.log", "three\nfour\n");
	wait_for_file(out, "one\ntwo\nthree\nfour\n");

	/* Rewritten shorter: printed again from its start, after a marker
	 * on stderr. */
	put("logs/slice-0-worker-0/gen-2.log", "again\n");
	wait_for_file(out, "one\ntwo\nthree\nfour\nagain\n");

	/* Past the supervisor's cap the object slides: what is new is what
	 * follows the bytes printed last, wherever they are now. */
	big = lines(0, 2000);
	put("logs/slice-0-worker-0/gen-3.log", "%s", big);
	if (asprintf(&wanted, "one\ntwo\nthree\nfour\nagain\n%s", big) < 0)
		cr_assert_fail("asprintf");
	wait_for_file(out, wanted);
	free(wanted);
	slid = lines(500, 2100);
	put("logs/slice-0-worker-0/gen-3.log", "%s", slid);
	part = lines(2000, 2100);
	if (asprintf(&wanted, "one\ntwo\nthree\nfour\nagain\n%s%s", big,
		     part) < 0)
		cr_assert_fail("asprintf");
	wait_for_file(out, wanted);

	/* The run ends: nothing more comes, the follower ends. */
	cr_assert_eq(control_set_state(st, NULL, "done",
				       "every worker finished",
				       "slice-0-worker-0", &c, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(slicectl_ended(pid), 0);
	got = read_file(out, NULL);
	cr_assert_str_eq(got, wanted);
	free(got);
	got = read_file(err, NULL);
	snprintf(want, sizeof(want), "slicectl: ---- generation 2: "
		 "logs/slice-0-worker-0/gen-2.log ----\n");
	ASSERT_HAS(got, want);
	ASSERT_HAS(got, "slicectl: ---- logs/slice-0-worker-0/gen-2.log was "
			"rewritten (6 bytes, was 11): printing it again from "
			"its start ----\n");
	ASSERT_HAS(got, "generation 3: logs/slice-0-worker-0/gen-3.log");
	cr_assert_eq(count_substr(got, "rewritten"), 1, "%s", got);
	free(got);
	free(big);
	free(slid);
	free(part);
	free(wanted);
}

/* A segment of a log as supervisors publish it now. */
static void put_segment(const char *dir, uint64_t off, const char *text)
{
	struct err e;

	cr_assert_eq(store_segment_put(st, dir, off, text, strlen(text), NULL,
				       &e), 0, "%s%" PRIu64 ": %s", dir, off,
		     e.msg);
}

Test(logs, segments_printed_and_followed_beside_old_logs)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	struct run_result r;
	struct control c;
	struct err e;
	char *got;
	pid_t pid;

	put_job(1, 1, 10, 100);
	control_now();
	put("logs/slice-0-worker-0/gen-1.log", "old kind\n");
	put_segment("logs/slice-0-worker-0/gen-2/", 0, "seg one\n");
	put_segment("logs/slice-0-worker-0/gen-2/", 8, "seg two\n");
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", NULL }), 0,
		     "%s", r.err);
	cr_assert_str_eq(r.out, "seg one\nseg two\n");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "-g", "1",
					       NULL }), 0, "%s", r.err);
	cr_assert_str_eq(r.out, "old kind\n");
	run_result_release(&r);

	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "--follow", "-g", "1",
					       "--interval", "0.1", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for_file(out, "old kind\nseg one\nseg two\n");
	/* A new segment: only it is printed. */
	put_segment("logs/slice-0-worker-0/gen-2/", 16, "three\n");
	wait_for_file(out, "old kind\nseg one\nseg two\nthree\n");
	put_segment("logs/slice-0-worker-0/gen-3/", 0, "gen three\n");
	wait_for_file(out, "old kind\nseg one\nseg two\nthree\ngen three\n");
	cr_assert_eq(control_set_state(st, NULL, "done",
				       "every worker finished",
				       "slice-0-worker-0", &c, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(slicectl_ended(pid), 0);
	got = read_file(err, NULL);
	ASSERT_HAS(got, "slicectl: ---- generation 2: "
			"logs/slice-0-worker-0/gen-2/ ----\n");
	ASSERT_HAS(got, "generation 3: logs/slice-0-worker-0/gen-3/");
	cr_assert_eq(count_substr(got, "rewritten"), 0, "%s", got);
	free(got);
}

Test(logs, follow_waits_for_a_log_and_ends_on_ctrl_c)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	char *got, *line, *save = NULL;
	json_t *v;
	pid_t pid;

	put_job(2, 1, 10, 100);
	control_now();
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "-f", "-w", "1/0",
					       "--generation", "2",
					       "--interval", "0.1",
					       "--format", "json", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for(err, "slicectl: waiting for a log of slice-1-worker-0 under ",
		 true);

	/* Generation 2 never had a log here: the first one after it is
	 * where following starts; generation 1 is before it. */
	put("logs/slice-1-worker-0/gen-1.log", "old\n");
	put("logs/slice-1-worker-0/gen-3.log", "hello \xff\n");
	wait_for(out, "hello", true);
	usleep(300 * 1000);
	cr_assert_eq(kill(pid, SIGINT), 0);
	cr_assert_eq(slicectl_ended(pid), 130);

	got = read_file(out, NULL);
	line = strtok_r(got, "\n", &save);
	cr_assert_not_null(line);
	v = parse(line);
	cr_assert_str_eq(json_string_value(json_object_get(v, "type")),
			 "generation");
	cr_assert_eq(json_integer_value(json_object_get(v, "slice")), 1);
	cr_assert_eq(json_integer_value(json_object_get(v, "worker")), 0);
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(v, "object")),
			 "logs/slice-1-worker-0/gen-3.log");
	json_decref(v);
	line = strtok_r(NULL, "\n", &save);
	cr_assert_not_null(line);
	v = parse(line);
	cr_assert_str_eq(json_string_value(json_object_get(v, "type")), "line");
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 3);
	/* Invalid UTF-8 becomes U+FFFD. */
	cr_assert_str_eq(json_string_value(json_object_get(v, "text")),
			 "hello \xef\xbf\xbd");
	json_decref(v);
	cr_assert_null(strtok_r(NULL, "\n", &save));
	free(got);
}
