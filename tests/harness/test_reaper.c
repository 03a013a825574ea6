/*
 * tests/harness/test_reaper.c: the reaper (reaper.c), which every test
 * runs under, leaves nothing behind. A test killed the way meson's
 * timeout kills one (SIGTERM then SIGKILL to its process group) takes
 * with it a daemon that had left that group (escaper.c), which without
 * the reaper stays; and the reaper ends as the test did.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef HARNESS_REAPER
#error "tests/harness/meson.build defines HARNESS_REAPER and HARNESS_ESCAPER"
#endif

static bool gone(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

/* Milliseconds until pid is gone, or -1 after ms. */
static long long wait_gone(pid_t pid, long long ms)
{
	long long start = monotonic_ms();

	while (!gone(pid)) {
		if (monotonic_ms() - start >= ms)
			return -1;
		sleep_ms(20);
	}
	return monotonic_ms() - start;
}

/* Starts argv (the escaper, with the tag dir) as the leader of a process
 * group, as meson starts a test; returns the escaper's daemon once it
 * runs. (The reaper's /tmp is not the test's, where dir is: the daemon
 * says it runs on its stdout.) */
static pid_t start_escaper(const char *const *argv, const char *dir,
			   pid_t *group)
{
	char log[HARNESS_PATH + 16];
	long long until = monotonic_ms() + 10000;
	pid_t daemon = 0;
	char *text;

	snprintf(log, sizeof(log), "%s/log", dir);
	*group = spawn_group(argv, NULL, log);
	cr_assert_gt(*group, 0);
	while (!(text = read_file(log, NULL)) || !strstr(text, " ready\n")) {
		free(text);
		cr_assert_lt(monotonic_ms(), until,
			     "the escaper's daemon never ran");
		sleep_ms(20);
	}
	free(text);
	cr_assert_eq(processes_with(dir, "--daemon", NULL, NULL, &daemon), 1);
	cr_assert_neq(getpgid(daemon), *group, "the daemon stayed in the "
		      "test's process group");
	return daemon;
}

/* What meson does on a timeout: SIGTERM to the group, SIGKILL 0.5 s
 * later. */
static void kill_like_meson(pid_t group)
{
	kill(-group, SIGTERM);
	sleep_ms(500);
	kill(-group, SIGKILL);
	cr_assert_eq(waitpid(group, NULL, 0), group);
}

Test(reaper, a_daemon_that_left_the_group_dies_with_the_killed_test)
{
	char dir[HARNESS_PATH];
	pid_t group, daemon;
	long long ms;

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "reaper"), 0);
	daemon = start_escaper((const char *const[]){ HARNESS_REAPER,
						       HARNESS_ESCAPER, dir,
						       NULL },
			       dir, &group);
	kill_like_meson(group);
	ms = wait_gone(daemon, 5000);
	if (ms < 0)
		kill(daemon, SIGKILL);
	cr_assert_geq(ms, 0, "the daemon (pid %d) outlived its test",
		      (int)daemon);
	fprintf(stderr, "reaper: the daemon was gone %lld ms after the "
		"test's group was killed\n", ms);
	rm_rf(dir);
}

/* The test above would pass with an escaper that escapes nothing. */
Test(reaper, without_it_the_daemon_outlives_the_killed_test)
{
	char dir[HARNESS_PATH];
	pid_t group, daemon;

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "reaper"), 0);
	daemon = start_escaper((const char *const[]){ HARNESS_ESCAPER, dir,
						       NULL },
			       dir, &group);
	kill_like_meson(group);
	sleep_ms(500);
	cr_expect(!gone(daemon), "the escaper's daemon died with its group");
	kill(daemon, SIGKILL);
	cr_assert_geq(wait_gone(daemon, 5000), 0);
	rm_rf(dir);
}

static struct run_result reap(const char *script)
{
	struct run_result r;

	cr_assert_eq(run_program(&r, (const char *const[]){
					 HARNESS_REAPER, "sh", "-c", script,
					 NULL },
				 NULL),
		     0);
	return r;
}

Test(reaper, ends_as_the_test_did)
{
	struct run_result r;

	r = reap("exit 3");
	cr_assert_eq(r.status, 3, "%s", r.err);
	run_result_release(&r);
	r = reap("exit 77");
	cr_assert_eq(r.status, 77, "%s", r.err);
	run_result_release(&r);
	r = reap("kill -TERM $$");
	cr_assert_eq(r.status, 128 + SIGTERM, "%s", r.err);
	run_result_release(&r);
	r = reap("echo out; echo err >&2");
	cr_assert_str_eq(r.out, "out\n");
	cr_assert_str_eq(r.err, "err\n");
	run_result_release(&r);
}

/* Its own /proc (the test is pid 2, after the reaper's init), /tmp and
 * /dev/shm, and its mounts stay in it. */
Test(reaper, the_test_has_its_own_proc_and_mounts)
{
	char dir[HARNESS_PATH], script[HARNESS_PATH * 2 + 64];
	char mark[HARNESS_PATH + 16];
	struct run_result r;

	if (geteuid() != 0)
		cr_skip_test("not root: a user namespace may be all there is");
	/* Not under /tmp, which the reaper's test does not share. */
	snprintf(dir, sizeof(dir), "%s/reaper-mount-XXXXXX",
		 getenv("SLICECTL_BUILDDIR") ? getenv("SLICECTL_BUILDDIR") :
					       ".");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(mark, sizeof(mark), "%s/mark", dir);
	r = reap("echo $$; cat /proc/1/comm; ls -A /tmp /dev/shm | wc -w");
	cr_assert_str_eq(r.out, "2\nreaper\n2\n", "%s", r.err);
	run_result_release(&r);
	snprintf(script, sizeof(script),
		 "mount -t tmpfs none '%s' && touch '%s'", dir, mark);
	r = reap(script);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(access(mark, F_OK), -1, "a mount leaked to the host");
	rm_rf(dir);
}

/* The test's /tmp goes when it passes, and stays for a look when not. */
Test(reaper, keeps_the_test_s_tmp_when_it_fails)
{
	char *dir;
	struct run_result r;

	r = reap("touch /tmp/passed");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(sh("! ls -d /tmp/slicectl-test-*/passed 2>/dev/null"), 0);
	run_result_release(&r);
	r = reap("touch /tmp/failed; exit 1");
	cr_assert_eq(r.status, 1);
	dir = strstr(r.err, "reaper: the test's /tmp was ");
	cr_assert_not_null(dir, "%s", r.err);
	dir += strlen("reaper: the test's /tmp was ");
	dir[strcspn(dir, "\n")] = '\0';
	cr_assert_eq(sh("test -f '%s/failed'", dir), 0);
	rm_rf(dir);
	run_result_release(&r);
}
