/*
 * A hung trainer's forensics (supervisor/forensics.h), taken from real
 * trainer processes: a Python trainer's stacks through faulthandler and
 * the hang signal, a shell that does not catch it spared; /proc's tasks
 * (wchan, kernel stack) and the output's tail for a trainer that is no
 * Python at all; py-spy when on PATH (a fake one: the real one is not
 * installed here), a stuck one killed within the time bound; the size
 * bound with a flood of output and many processes.
 */
#include "supervisor/forensics.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[HARNESS_PATH];
static char log_path[HARNESS_PATH + 32];
static struct trainer t;
static char *saved_path;

static void setup(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "forensics"), 0);
	snprintf(log_path, sizeof(log_path), "%s/gen-1.log", dir);
	trainer_init(&t);
	saved_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
}

static void teardown(void)
{
	trainer_release(&t);
	if (saved_path) {
		setenv("PATH", saved_path, 1);
		free(saved_path);
		saved_path = NULL;
	}
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(forensics, .init = setup, .fini = teardown, .timeout = 60);

extern char **environ;

/* Starts command as a trainer and waits (up to 20 s) until its output
 * holds ready. */
static void start(const char *command, const char *ready)
{
	long long until = monotonic_ms() + 20000;
	struct err e;

	cr_assert_eq(trainer_start(&t, command, dir, environ, log_path, &e), 0,
		     "%s", e.msg);
	for (;;) {
		char *text;
		bool found;

		trainer_drain(&t);
		text = read_file(log_path, NULL);
		found = text && strstr(text, ready);
		free(text);
		if (found)
			return;
		cr_assert_lt(monotonic_ms(), until, "the trainer never said '%s'",
			     ready);
		sleep_ms(50);
	}
}

/* The forensics of the trainer with signal sig, in a buffer to free. */
static char *collect(int sig, size_t max, long long *took_ms)
{
	struct forensics_request r = { .header = "test header\n",
				       .signal = sig, .log_path = log_path,
				       .max_bytes = max };
	long long began = monotonic_ms();
	struct buf b;
	struct err e;

	buf_init(&b);
	cr_assert_eq(forensics_collect(&r, &t, &b, &e), 0, "%s", e.msg);
	if (took_ms)
		*took_ms = monotonic_ms() - began;
	cr_assert_eq(buf_append(&b, "", 1), 0);
	return buf_detach(&b);
}

/* PATH without py-spy, or with a fake one whose script is body. */
static void py_spy(const char *body)
{
	char bin[HARNESS_PATH + 16], path[HARNESS_PATH * 2];

	snprintf(bin, sizeof(bin), "%s/bin", dir);
	cr_assert_eq(sh("mkdir -p '%s'", bin), 0);
	if (body)
		cr_assert_eq(sh("printf '#!/bin/sh\\n%%s\\n' '%s' > "
				"'%s/py-spy' && chmod +x '%s/py-spy'", body,
				bin, bin), 0);
	snprintf(path, sizeof(path), "%s:/usr/bin:/bin", bin);
	setenv("PATH", path, 1);
}

static const char python_hang[] =
	"python3 -c '\n"
	"import faulthandler, signal, sys, time\n"
	"faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
	"def wait_for_peer():\n"
	"    print(\"ready\", flush=True)\n"
	"    time.sleep(3600)\n"
	"wait_for_peer()\n'";

Test(forensics, python_stacks_through_the_hang_signal)
{
	char *text;

	char command[sizeof(python_hang) + 32];

	py_spy(NULL);
	/* The shell stays, for the command after: it does not catch
	 * SIGUSR1, and would die of it. */
	snprintf(command, sizeof(command), "%s; echo after", python_hang);
	start(command, "ready");
	text = collect(SIGUSR1, 0, NULL);
	ASSERT_HAS(text, "test header\n");
	ASSERT_HAS(text, "== hang signal 10");
	ASSERT_HAS(text, ": sent\n");
	ASSERT_HAS(text, "not sent: it does not catch it\n");
	/* faulthandler's dump, from the output. */
	ASSERT_HAS(text, "in wait_for_peer");
	ASSERT_HAS(text, "wchan: ");
	ASSERT_HAS(text, "skipped: py-spy is not on PATH");
	fprintf(stderr, "forensics: py-spy is not on PATH here: its path is "
		"tested with a fake py-spy only\n");
	free(text);
}

Test(forensics, a_trainer_that_is_no_python_leaves_proc_and_its_output)
{
	char *text;

	py_spy(NULL);
	start("echo first line; sleep 3600 & sleep 0.3; "
	      "echo last line before the hang; wait", "last line");
	text = collect(SIGUSR1, 0, NULL);
	ASSERT_HAS(text, "(sleep)");
	ASSERT_HAS(text, "wchan: hrtimer_nanosleep");
	/* As root the kernel's stack is there; else it says why not. */
	cr_assert(strstr(text, "nanosleep+0x") ||
		  strstr(text, "kernel stack: not readable"), "%s", text);
	ASSERT_HAS(text, "first line\nlast line before the hang\n");
	/* Nobody catches it: nobody gets it, nobody dies of it. */
	cr_assert_null(strstr(text, ": sent\n"), "%s", text);
	cr_assert_eq(kill(t.pid, 0), 0, "the trainer died of the forensics");
	free(text);
}

Test(forensics, py_spy_on_path_is_asked_and_a_stuck_one_killed)
{
	char *text;
	long long took;

	py_spy("echo \"Thread 1 (idle): MainThread pid $3\"; "
	       "echo \"    wait_for_peer (train.py:5)\"");
	start("echo up; exec sleep 3600", "up");
	text = collect(0, 0, NULL);
	ASSERT_HAS(text, "$ py-spy dump --pid ");
	ASSERT_HAS(text, "wait_for_peer (train.py:5)");
	ASSERT_HAS(text, "[py-spy exit 0]");
	free(text);

	py_spy("echo attaching; exec sleep 60");
	text = collect(0, 0, &took);
	ASSERT_HAS(text, "attaching");
	ASSERT_HAS(text, "[py-spy killed: still running after its time]");
	cr_assert_lt(took, FORENSICS_BUDGET_MS + 1000, "took %lld ms", took);
	free(text);
}

Test(forensics, stays_within_its_size_and_time_bounds)
{
	char *text;
	long long took;

	py_spy("exec sleep 60");
	/* 40 processes, 2 MiB of output ending in a marker line. */
	start("for i in $(seq 40); do sleep 3600 & done; "
	      "head -c 2097152 /dev/zero | tr '\\0' x; echo; "
	      "echo the end of the output; wait", "the end of the output");
	text = collect(SIGUSR1, 0, &took);
	cr_assert_leq(strlen(text), FORENSICS_MAX_BYTES);
	cr_assert_gt(strlen(text), FORENSICS_MAX_BYTES / 2);
	ASSERT_HAS(text, "the end of the output\n");
	ASSERT_HAS(text, "== collected in ");
	cr_assert_lt(took, FORENSICS_BUDGET_MS + 1000, "took %lld ms", took);
	free(text);

	text = collect(0, 4096, NULL);
	cr_assert_leq(strlen(text), 4096);
	free(text);
}
