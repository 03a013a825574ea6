/*
 * tests/harness/test_harness.c: the harness keeps its promises. sshd takes
 * key logins on several loopback addresses through the fast /bin/sh path,
 * checks host keys against the files the harness writes, survives a burst
 * of simultaneous logins, and is gone after sshd_stop; the process helpers
 * collect large outputs and report statuses exactly.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs cmd on addr over OpenSSH's client with the harness's key and known
 * hosts, checked strictly. */
static int ssh_run(const struct test_sshd *s, const char *addr,
		   const char *cmd, struct run_result *r)
{
	char port[16], kh[HARNESS_PATH + 32];
	const char *argv[] = {
		"ssh", "-F", "/dev/null", "-i", s->key,
		"-o", kh, "-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "LogLevel=ERROR", "-p", port, "-l", s->user,
		addr, cmd, NULL,
	};

	snprintf(port, sizeof port, "%u", s->port);
	snprintf(kh, sizeof kh, "UserKnownHostsFile=%s", s->known_hosts);
	return run_program(r, argv, NULL);
}

static void assert_ssh_output(const struct test_sshd *s, const char *addr,
			      const char *cmd, const char *want)
{
	struct run_result r;

	cr_assert_eq(ssh_run(s, addr, cmd, &r), 0);
	cr_assert_eq(r.status, 0, "ssh %s '%s' exited %d: %s", addr, cmd,
		     r.status, r.err);
	cr_assert_str_eq(r.out, want, "ssh %s '%s' printed '%s'", addr, cmd,
			 r.out);
	run_result_release(&r);
}

static bool pid_gone(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

Test(sshd, logs_in_on_two_addresses_and_stops)
{
	struct test_sshd s;
	struct run_result r;
	struct stat st;
	char dir[HARNESS_PATH];
	pid_t pid;

	cr_assert_eq(sshd_start(&s, NULL), 0);
	cr_assert_gt(s.pid, 0);
	cr_assert_eq(sshd_write_known_hosts(&s, s.known_hosts, 1, 77), 0);

	assert_ssh_output(&s, "127.0.0.1", "echo ok", "ok\n");
	assert_ssh_output(&s, "127.0.0.77", "echo ok", "ok\n");

	/* Root's logins go to slicectltest, whose shell is dash: no rc
	 * files, and a fast start for fan-outs to many addresses. */
	if (geteuid() == 0) {
		char sh_path[PATH_MAX], want[PATH_MAX + 1];

		cr_assert_str_eq(s.user, "slicectltest");
		cr_assert_not_null(realpath("/bin/sh", sh_path));
		snprintf(want, sizeof want, "%s\n", sh_path);
		assert_ssh_output(&s, "127.0.0.77", "readlink /proc/$$/exe",
				  want);
		assert_ssh_output(&s, "127.0.0.1", "echo $0", "sh\n");
	}

	/* An address outside the known_hosts file is refused. */
	cr_assert_eq(ssh_run(&s, "127.0.0.78", "echo ok", &r), 0);
	cr_assert_neq(r.status, 0);
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);

	pid = s.pid;
	snprintf(dir, sizeof dir, "%s", s.dir);
	sshd_stop(&s);
	cr_assert(pid_gone(pid), "sshd pid %d still exists", (int)pid);
	cr_assert_eq(stat(dir, &st), -1, "%s still exists", dir);
	cr_assert_eq(s.pid, 0);
}

Test(sshd, takes_a_burst_of_simultaneous_logins)
{
	enum { LOGINS = 48 };
	struct test_sshd s;
	struct run_result r;
	char script[4096];
	const char *argv[] = { "/bin/sh", "-c", script, NULL };

	cr_assert_eq(sshd_start(&s, NULL), 0);
	cr_assert_eq(sshd_write_known_hosts(&s, s.known_hosts, 1, LOGINS),
		     0);
	/* More logins in flight than OpenSSH's default MaxStartups (10)
	 * lets through unharmed. */
	snprintf(script, sizeof script,
		 "i=1; while [ $i -le %d ]; do "
		 "ssh -F /dev/null -i '%s' -o UserKnownHostsFile='%s' "
		 "-o StrictHostKeyChecking=yes -o BatchMode=yes "
		 "-o LogLevel=ERROR -p %u -l %s 127.0.0.$i 'echo ok' & "
		 "i=$((i + 1)); done; wait",
		 LOGINS, s.key, s.known_hosts, s.port, s.user);
	cr_assert_eq(run_program(&r, argv, NULL), 0);
	cr_assert_eq(count_substr(r.out, "ok\n"), LOGINS,
		     "only %zu logins answered: %s",
		     count_substr(r.out, "ok\n"), r.err);
	run_result_release(&r);
	sshd_stop(&s);
}

Test(sshd, honours_options_and_shares_a_directory)
{
	const struct sshd_options o = {
		.extra_config = "ClientAliveInterval 7",
		.user_key_type = "ecdsa",
	};
	struct test_sshd s;
	char path[HARNESS_PATH + 32], cmd[HARNESS_PATH + 64];
	char *text;

	cr_assert_eq(sshd_start(&s, &o), 0);
	snprintf(path, sizeof path, "%s/sshd_config", s.dir);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	cr_assert_eq(count_substr(text, "\nClientAliveInterval 7\n"), 1);
	free(text);
	snprintf(path, sizeof path, "%s.pub", s.key);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	cr_assert_eq(strncmp(text, "ecdsa-sha2-", 11), 0, "%s", text);
	free(text);

	cr_assert_eq(sshd_write_known_hosts(&s, s.known_hosts, 5, 1), 0);
	snprintf(cmd, sizeof cmd, "echo hi > %s/from-login && echo ok",
		 s.shared);
	assert_ssh_output(&s, "127.0.0.5", cmd, "ok\n");
	snprintf(path, sizeof path, "%s/from-login", s.shared);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	cr_assert_str_eq(text, "hi\n");
	free(text);
	sshd_stop(&s);
}

Test(harness, loopback_addr_skips_network_and_broadcast)
{
	static const struct {
		unsigned n;
		const char *addr;
	} cases[] = {
		{ 1, "127.0.0.1" },     { 77, "127.0.0.77" },
		{ 254, "127.0.0.254" }, { 255, "127.0.1.1" },
		{ 508, "127.0.1.254" }, { 509, "127.0.2.1" },
		{ 254 * 256 + 1, "127.1.0.1" }, { 0, "" },
	};
	char out[32];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		loopback_addr(cases[i].n, out, sizeof out);
		cr_assert_str_eq(out, cases[i].addr, "n=%u", cases[i].n);
	}
}

Test(harness, writes_hosts_and_known_hosts)
{
	struct test_sshd s = { .port = 2022, .user = "tester" };
	char dir[HARNESS_PATH - 16], path[HARNESS_PATH + 32];
	char *text;

	cr_assert_eq(make_temp_dir(dir, sizeof dir, "harness"), 0);
	snprintf(s.host_pub, sizeof s.host_pub, "%s/host.pub", dir);
	cr_assert_eq(sh("echo 'ssh-ed25519 AAAAkey comment' > '%s'",
			s.host_pub), 0);

	snprintf(path, sizeof path, "%s/hosts", dir);
	cr_assert_eq(sshd_write_hosts(&s, path, 254, 2), 0);
	text = read_file(path, NULL);
	cr_assert_str_eq(text, "tester@127.0.0.254:2022\n"
			       "tester@127.0.1.1:2022\n");
	free(text);

	snprintf(path, sizeof path, "%s/known_hosts", dir);
	cr_assert_eq(sshd_write_known_hosts(&s, path, 1, 2), 0);
	text = read_file(path, NULL);
	cr_assert_str_eq(text, "[127.0.0.1]:2022 ssh-ed25519 AAAAkey\n"
			       "[127.0.0.2]:2022 ssh-ed25519 AAAAkey\n");
	free(text);
	cr_assert_eq(rm_rf(dir), 0);
}

Test(harness, run_program_collects_large_outputs_of_both_streams)
{
	/* stderr is filled first: a reader that drained stdout to its end
	 * before looking at stderr would hang here. */
	const char *argv[] = {
		"/bin/sh", "-c",
		"head -c 3000000 /dev/zero | tr '\\0' e >&2; "
		"head -c 20000000 /dev/zero | tr '\\0' o; echo \"$X\"; exit 3",
		NULL,
	};
	const char *env[] = { "X=extra", NULL };
	struct run_result r;

	cr_assert_eq(run_program(&r, argv, env), 0);
	cr_assert_eq(r.status, 3);
	cr_assert_eq(r.out_len, 20000000 + strlen("extra\n"));
	cr_assert_eq(r.err_len, 3000000);
	cr_assert_eq(strlen(r.out), r.out_len);
	cr_assert_str_eq(r.out + 20000000, "extra\n");
	cr_assert_eq(count_substr(r.err, "e"), 3000000);
	run_result_release(&r);
}

Test(harness, statuses_and_failures_to_start)
{
	const char *killed[] = { "/bin/sh", "-c", "kill -9 $$", NULL };
	const char *missing[] = { "/nonexistent/program", NULL };
	struct run_result r;

	cr_assert_eq(run_program(&r, killed, NULL), 0);
	cr_assert_eq(r.status, 128 + SIGKILL);
	run_result_release(&r);
	cr_assert_eq(run_program(&r, missing, NULL), -1);
	cr_assert_eq(sh("exit 5"), 5);
	cr_assert_eq(sh("test -d /"), 0);
}

Test(harness, runs_and_spawns_the_slicectl_binary)
{
	const char *argv[] = { "-c", "echo \"out $X\"; echo err >&2", NULL };
	const char *env[] = { "X=1", NULL };
	char dir[HARNESS_PATH], out[HARNESS_PATH + 8], err[HARNESS_PATH + 8];
	struct run_result r;
	char *text;
	pid_t pid;
	int st;

	/* Any program stands in for slicectl, which this test does not
	 * need to exist. */
	cr_assert_eq(setenv("SLICECTL_BIN", "/bin/sh", 1), 0);
	cr_assert_eq(run_slicectl(&r, argv, env), 0);
	cr_assert_eq(r.status, 0);
	cr_assert_str_eq(r.out, "out 1\n");
	cr_assert_str_eq(r.err, "err\n");
	run_result_release(&r);

	cr_assert_eq(make_temp_dir(dir, sizeof dir, "harness"), 0);
	snprintf(out, sizeof out, "%s/out", dir);
	snprintf(err, sizeof err, "%s/err", dir);
	pid = spawn_slicectl(argv, out, err);
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	text = read_file(out, NULL);
	cr_assert_str_eq(text, "out \n");
	free(text);
	text = read_file(err, NULL);
	cr_assert_str_eq(text, "err\n");
	free(text);
	cr_assert_eq(rm_rf(dir), 0);
}

Test(harness, files_and_directories)
{
	char dir[HARNESS_PATH], outside[HARNESS_PATH], f[HARNESS_PATH + 8];
	struct stat st;
	size_t len;
	char *text;

	cr_assert_eq(make_temp_dir(dir, sizeof dir, "harness"), 0);
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0777);
	cr_assert_eq(make_temp_dir(outside, sizeof outside, "harness"), 0);

	cr_assert_eq(sh("mkdir -p '%s/a/b' && printf 'x\\0y' > '%s/a/b/f' &&"
			" touch '%s/keep' && ln -s '%s' '%s/a/link'",
			dir, dir, outside, outside, dir), 0);
	snprintf(outside + strlen(outside), sizeof outside - strlen(outside),
		 "/keep");
	text = read_file(outside, &len);
	cr_assert_not_null(text);
	cr_assert_eq(len, 0);
	free(text);
	snprintf(f, sizeof f, "%s/a/b/f", dir);
	text = read_file(f, &len);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(text, "x\0y", 4), 0);
	free(text);
	cr_assert_null(read_file("/nonexistent/file", NULL));

	/* Links are removed, not followed. */
	cr_assert_eq(rm_rf(dir), 0);
	cr_assert_eq(stat(dir, &st), -1);
	cr_assert_eq(stat(outside, &st), 0);
	*strrchr(outside, '/') = '\0';
	cr_assert_eq(rm_rf(outside), 0);
	cr_assert_eq(rm_rf(outside), 0, "a missing path is not an error");

	cr_assert_eq(count_substr("aaaa", "aa"), 2);
	cr_assert_eq(count_substr("ok\nok\nno\n", "ok\n"), 2);
	cr_assert_eq(count_substr("aaa", "aa"), 1);
	cr_assert_eq(count_substr("xaxbab", "ab"), 1);
	cr_assert_eq(count_substr("ab", "abc"), 0);
	cr_assert_eq(count_substr("abc", ""), 0);
}
