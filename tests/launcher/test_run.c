/*
 * slicectl run, end to end, against a real OpenSSH sshd on loopback that
 * serves every worker address.
 */
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct test_sshd sshd;
static char tmp[HARNESS_PATH];
static char hosts[HARNESS_PATH + 32];
static char kh[HARNESS_PATH + 32];

static void up(void)
{
	cr_assert_eq(sshd_start(&sshd, NULL), 0, "sshd did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "run"), 0);
	snprintf(hosts, sizeof(hosts), "%s/hosts", tmp);
	snprintf(kh, sizeof(kh), "%s/known_hosts", tmp);
}

static void down(void)
{
	sshd_stop(&sshd);
	rm_rf(tmp);
}

/* Runs slicectl with the login options every test needs, then argv. */
static int run(struct run_result *r, const char *const *args)
{
	const char *argv[64];
	size_t n = 0;

	argv[n++] = args[0];
	argv[n++] = "--identity";
	argv[n++] = sshd.key;
	argv[n++] = "--known-hosts";
	argv[n++] = kh;
	for (size_t i = 1; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, NULL), 0);
	return r->status;
}

static void hosts_and_keys(unsigned count)
{
	cr_assert_eq(sshd_write_hosts(&sshd, hosts, 1, count), 0);
	cr_assert_eq(sshd_write_known_hosts(&sshd, kh, 1, count), 0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sends SIGTERM to child after ms and waits up to 10 s for it: its exit
 * status, and in *took how long it took to end after the signal. */
static int terminate_after(pid_t child, unsigned ms, uint64_t *took)
{
	uint64_t start;
	int status;

	cr_assert_gt(child, 0);
	sleep_ms(ms);
	start = now_ms();
	kill(child, SIGTERM);
	status = wait_exit(child, 10);
	*took = now_ms() - start;
	return status;
}

static bool pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Three suites, each its own meson test (tests/launcher/meson.build):
 * run's cases share the machine with other tests; load's are load tests
 * of their own (hundreds of logins at once) and run alone; thousand runs
 * alone too, and only in the plain build (suite plain-only). */
TestSuite(run, .init = up, .fini = down, .timeout = 240);
TestSuite(load, .init = up, .fini = down, .timeout = 300);
TestSuite(thousand, .init = up, .fini = down, .timeout = 300);

Test(run, sixty_four_hosts_output_and_env)
{
	struct run_result r;
	char line[256], addr[32];
	FILE *f;

	/* Per-host variables in the hosts file, one with quotes in it. */
	f = fopen(hosts, "w");
	cr_assert_not_null(f);
	for (unsigned i = 1; i <= 64; i++) {
		loopback_addr(i, addr, sizeof(addr));
		fprintf(f, "%s@%s:%u WHO=\"worker %u\" Q='it'\"'\"'s'\n",
			sshd.user, addr, sshd.port, i);
	}
	fclose(f);
	cr_assert_eq(sshd_write_known_hosts(&sshd, kh, 1, 64), 0);
	const char *args[] = { "run", "--hosts", hosts, "--env", "GLOBAL=a b",
			       "--", "echo \"$WHO|$SLICE_PROCESS_ID|"
			       "$SLICE_NUM_PROCESSES|$GLOBAL|$Q\"; echo err >&2",
			       NULL };

	cr_assert_eq(run(&r, args), 0, "stderr: %s", r.err);
	for (unsigned i = 1; i <= 64; i++) {
		loopback_addr(i, addr, sizeof(addr));
		snprintf(line, sizeof(line), "%s: worker %u|%u|64|a b|it's\n",
			 addr, i, i - 1);
		cr_assert_eq(count_substr(r.out, line), 1, "missing %s", line);
		snprintf(line, sizeof(line), "%s! err\n", addr);
		cr_assert_eq(count_substr(r.err, line), 1, "missing %s", line);
	}
	cr_assert(strstr(r.err, "64 hosts in"), "%s", r.err);
	cr_assert(strstr(r.err, ": 64 ok"), "%s", r.err);
	run_result_release(&r);
}

Test(run, json_results_and_log_dir)
{
	struct run_result r;
	char logdir[HARNESS_PATH + 16], path[HARNESS_PATH + 64];
	char *log;

	hosts_and_keys(4);
	snprintf(logdir, sizeof(logdir), "%s/logs", tmp);
	const char *args[] = { "run", "--hosts", hosts, "--format", "json",
			       "--log-dir", logdir, "--",
			       "printf 'a\\tb\\n\"q\"\\n'; printf partial >&2; "
			       "exit $SLICE_PROCESS_ID", NULL };

	cr_assert_eq(run(&r, args), 3, "stderr: %s", r.err);
	cr_assert_eq(count_substr(r.out, "{\"type\":\"line\""), 4 * 3);
	cr_assert(strstr(r.out, "\"host\":\"127.0.0.2\",\"stream\":\"stdout\","
				"\"text\":\"a\\tb\"}"), "%s", r.out);
	cr_assert(strstr(r.out, "\"text\":\"\\\"q\\\"\""), "%s", r.out);
	cr_assert(strstr(r.out, "\"stream\":\"stderr\",\"text\":\"partial\""));
	cr_assert(strstr(r.out, "\"host\":\"127.0.0.4\",\"address\":"
				"\"127.0.0.4\""), "%s", r.out);
	cr_assert(strstr(r.out, "\"outcome\":\"exited\",\"exit_status\":3"));
	cr_assert(strstr(r.out, "{\"type\":\"summary\",\"hosts\":4,\"ok\":1,"
				"\"failed\":3"), "%s", r.out);
	cr_assert(strstr(r.out, "\"exit_status\":3}\n"), "%s", r.out);
	snprintf(path, sizeof(path), "%s/127.0.0.3.log", logdir);
	log = read_file(path, NULL);
	cr_assert_not_null(log, "no %s", path);
	cr_assert(strstr(log, "out: a\tb\nout: \"q\"\nerr: partial\n"), "%s",
		  log);
	cr_assert(strstr(log, "# exit 2 after "), "%s", log);
	free(log);
	run_result_release(&r);
}

/* A command that waits for every other host to start must finish however
 * few handshakes may be in flight: no batch deadlock. */
Test(load, barrier_across_256_hosts)
{
	struct run_result r;
	char barrier[HARNESS_PATH + 16], cmd[4096];

	hosts_and_keys(256);
	snprintf(barrier, sizeof(barrier), "%s/barrier", sshd.shared);
	cr_assert_eq(sh("mkdir -m 1777 %s", barrier), 0);
	snprintf(cmd, sizeof(cmd),
		 ": > %s/$SLICE_PROCESS_ID; "
		 "while :; do set -- %s/*; [ $# -ge 256 ] && break; "
		 "sleep 1; done; echo passed",
		 barrier, barrier);
	const char *args[] = { "run", "--hosts", hosts,
			       "--connect-concurrency", "8", "--timeout",
			       "200", "--", cmd, NULL };

	cr_assert_eq(run(&r, args), 0, "stderr: %s", r.err);
	cr_assert_eq(count_substr(r.out, ": passed\n"), 256);
	cr_assert(strstr(r.err, "256 hosts in"), "%s", r.err);
	run_result_release(&r);
}

Test(run, closed_port_is_retried_then_unreachable)
{
	struct run_result r;
	char spec[128];

	hosts_and_keys(1);
	/* Port 1 on loopback: nothing listens, connect is refused. */
	snprintf(spec, sizeof(spec), "%s@127.0.0.9:1", sshd.user);
	const char *args[] = { "run", "--hosts", hosts, "--host", spec,
			       "--retries", "2", "--format", "json", "--",
			       "echo ok", NULL };

	cr_assert_eq(run(&r, args), 255, "stderr: %s", r.err);
	cr_assert(strstr(r.out, "\"outcome\":\"unreachable\""), "%s", r.out);
	cr_assert(strstr(r.out, "Connection refused"), "%s", r.out);
	cr_assert(strstr(r.out, "\"attempts\":3}"), "%s", r.out);
	cr_assert(strstr(r.out, "127.0.0.1: ok") == NULL);
	cr_assert(strstr(r.out, "\"text\":\"ok\""), "the good host ran");
	run_result_release(&r);
}

Test(run, listener_without_banner_times_out)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct run_result r;
	char spec[128];
	int fd;

	hosts_and_keys(1);
	/* The kernel completes the TCP handshake; nobody ever speaks. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = inet_addr("127.0.0.20");
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(spec, sizeof(spec), "%s@127.0.0.20:%u", sshd.user,
		 ntohs(sa.sin_port));
	const char *args[] = { "run", "--hosts", hosts, "--host", spec,
			       "--connect-timeout", "1.5", "--retries", "1",
			       "--format", "json", "--", "echo ok", NULL };

	cr_assert_eq(run(&r, args), 255, "stderr: %s", r.err);
	/* Nothing ran: the timed-out handshake was tried again. */
	cr_assert(strstr(r.out, "\"error\":\"127.0.0.20: connection timed "
				"out after 1.5 s (in HANDSHAKE)\""), "%s", r.out);
	cr_assert(strstr(r.out, "\"attempts\":2}"), "%s", r.out);
	cr_assert(strstr(r.err, "slicectl: servers are dropping or delaying "
				"SSH handshakes (127.0.0.20:"), "%s", r.err);
	cr_assert(strstr(r.out, "\"host\":\"127.0.0.1\",\"stream\":"
				"\"stdout\",\"text\":\"ok\""), "%s", r.out);
	close(fd);
	run_result_release(&r);
}

Test(run, exit_codes_and_signals)
{
	struct run_result r;

	hosts_and_keys(5);
	const char *args[] = { "run", "--hosts", hosts, "--",
			       "case $SLICE_PROCESS_ID in "
			       "1) exit 7;; 2) exec sh -c 'kill -TERM $$';; "
			       "3) sleep 0.2; exec sh -c 'kill -KILL $$';; "
			       "esac; echo ok",
			       NULL };

	/* The highest wins: SIGTERM's 128 + 15. */
	cr_assert_eq(run(&r, args), 143, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "127.0.0.2  exit 7"), "%s", r.err);
	cr_assert(strstr(r.err, "127.0.0.3  signal TERM"), "%s", r.err);
	cr_assert(strstr(r.err, "127.0.0.4  signal KILL"), "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok\n"), 2);
	cr_assert(strstr(r.err, "2 ok, 3 failed"), "%s", r.err);
	run_result_release(&r);
}

/* Reads the pids the remote commands wrote, waiting until all are there. */
static void read_pids(const char *dir, unsigned first, unsigned count,
		      pid_t *pids)
{
	for (unsigned i = first; i < first + count; i++) {
		char path[HARNESS_PATH + 64];
		char *s = NULL;

		snprintf(path, sizeof(path), "%s/pid.%u", dir, i);
		for (int tries = 0; tries < 300; tries++) {
			s = read_file(path, NULL);
			if (s && strchr(s, '\n'))
				break;
			free(s);
			s = NULL;
			usleep(100 * 1000);
		}
		cr_assert_not_null(s, "no pid from host %u", i);
		pids[i - first] = (pid_t)atoi(s);
		free(s);
	}
}

static void assert_all_gone(const pid_t *pids, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		bool alive = true;

		for (int tries = 0; tries < 50 && alive; tries++) {
			alive = pid_alive(pids[i]);
			if (alive)
				usleep(100 * 1000);
		}
		cr_assert_not(alive, "remote process %d still runs", pids[i]);
	}
}

Test(run, fail_fast_ends_remote_commands)
{
	struct run_result r;
	char cmd[4096];
	pid_t pids[7];
	time_t start = time(NULL);

	hosts_and_keys(8);
	/* Host 0 fails once the seven others run their long command. */
	snprintf(cmd, sizeof(cmd),
		 "if [ $SLICE_PROCESS_ID = 0 ]; then "
		 "while [ $(ls %s | wc -l) -lt 7 ]; do sleep 0.1; done; exit 9; "
		 "fi; sleep 300 & echo $! > %s/pid.$SLICE_PROCESS_ID; wait",
		 sshd.shared, sshd.shared);
	const char *args[] = { "run", "--hosts", hosts, "--fail-fast", "--",
			       cmd, NULL };

	cr_assert_eq(run(&r, args), 9, "stderr: %s", r.err);
	cr_assert_lt(time(NULL) - start, 60);
	cr_assert(strstr(r.err, "7 cancelled"), "%s", r.err);
	read_pids(sshd.shared, 1, 7, pids);
	assert_all_gone(pids, 7);
	run_result_release(&r);
}

Test(run, interrupt_ends_remote_commands)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], cmd[4096];
	pid_t pids[4], child;
	int status;

	hosts_and_keys(4);
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	snprintf(cmd, sizeof(cmd),
		 "sleep 300 & echo $! > %s/pid.$SLICE_PROCESS_ID; wait",
		 sshd.shared);
	const char *args[] = { "run", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, "--", cmd, NULL };

	child = spawn_slicectl(args, out, err);
	cr_assert_gt(child, 0);
	read_pids(sshd.shared, 0, 4, pids);
	kill(child, SIGINT);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 130);
	assert_all_gone(pids, 4);
	char *e = read_file(err, NULL);
	cr_assert(strstr(e, "4 cancelled"), "%s", e);
	free(e);
}

Test(run, command_timeout_ends_remote_command)
{
	struct run_result r;
	char cmd[4096];
	pid_t pid;

	hosts_and_keys(2);
	snprintf(cmd, sizeof(cmd),
		 "[ $SLICE_PROCESS_ID = 1 ] || exit 0; "
		 "sleep 300 & echo $! > %s/pid.1; wait", sshd.shared);
	const char *args[] = { "run", "--hosts", hosts, "--timeout", "2", "--",
			       cmd, NULL };

	cr_assert_eq(run(&r, args), 124, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "127.0.0.2  timeout"), "%s", r.err);
	cr_assert(strstr(r.err, "command timed out after 2.0 s"), "%s", r.err);
	read_pids(sshd.shared, 1, 1, &pid);
	assert_all_gone(&pid, 1);
	run_result_release(&r);
}

Test(run, unknown_host_key_per_policy)
{
	struct run_result r;
	char *k;

	cr_assert_eq(sshd_write_hosts(&sshd, hosts, 1, 3), 0);
	const char *yes[] = { "run", "--hosts", hosts, "--", "echo ok", NULL };
	cr_assert_eq(run(&r, yes), 255);
	cr_assert_eq(count_substr(r.err, "is not known"), 3, "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok"), 0);
	run_result_release(&r);

	const char *acc[] = { "run", "--hosts", hosts,
			      "--strict-host-key-checking", "accept-new", "--",
			      "echo ok", NULL };
	cr_assert_eq(run(&r, acc), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok"), 3);
	run_result_release(&r);
	k = read_file(kh, NULL);
	cr_assert_eq(count_substr(k, "\n"), 3, "%s", k);
	free(k);
	/* Now known: the strict policy lets them in. */
	cr_assert_eq(run(&r, yes), 0, "%s", r.err);
	run_result_release(&r);

	cr_assert_eq(sshd_write_hosts(&sshd, hosts, 4, 1), 0);
	const char *no[] = { "run", "--hosts", hosts,
			     "--strict-host-key-checking", "no", "--",
			     "echo ok", NULL };
	cr_assert_eq(run(&r, no), 0, "%s", r.err);
	run_result_release(&r);
}

Test(run, changed_host_key_refused_under_every_policy)
{
	static const char *const policies[] = { "yes", "accept-new", "no" };
	struct run_result r;
	char other[HARNESS_PATH + 16];

	cr_assert_eq(sshd_write_hosts(&sshd, hosts, 1, 2), 0);
	/* Known_hosts names another ed25519 key for both hosts. */
	snprintf(other, sizeof(other), "%s/other", tmp);
	cr_assert_eq(sh("ssh-keygen -q -t ed25519 -N '' -f %s && "
			"for a in 127.0.0.1 127.0.0.2; do "
			"echo \"[$a]:%u $(cut -d' ' -f1,2 %s.pub)\"; done > %s",
			other, sshd.port, other, kh), 0);
	for (size_t i = 0; i < 3; i++) {
		const char *args[] = { "run", "--hosts", hosts,
				       "--strict-host-key-checking",
				       policies[i], "--", "echo ok", NULL };

		cr_assert_eq(run(&r, args), 255, "%s", policies[i]);
		cr_assert_eq(count_substr(r.out, ": ok"), 0);
		cr_assert(strstr(r.err, "127.0.0.2"), "%s", r.err);
		cr_assert(strstr(r.err, kh), "names the file: %s", r.err);
		cr_assert(strstr(r.err, "CHANGED") || strstr(r.err, "changed"),
			  "%s", r.err);
		run_result_release(&r);
	}
}

Test(run, wrong_user_key_is_refused_once)
{
	struct run_result r;
	char other[HARNESS_PATH + 16];

	hosts_and_keys(2);
	snprintf(other, sizeof(other), "%s/not_authorized", tmp);
	cr_assert_eq(sh("ssh-keygen -q -t ed25519 -N '' -f %s", other), 0);
	const char *args[] = { "run", "--hosts", hosts, "--identity", other,
			       "--format", "json", "--", "echo ok", NULL };

	cr_assert_eq(run(&r, args), 255);
	cr_assert_eq(count_substr(r.out, "refused every key offered"), 2,
		     "%s", r.out);
	/* Authentication failures are never retried. */
	cr_assert_eq(count_substr(r.out, "\"attempts\":1}"), 2, "%s", r.out);
	run_result_release(&r);
}

/* 10 MB on each stream of 16 hosts at once, lines kept whole. */
Test(run, ten_megabytes_each_stream_from_16_hosts, .timeout = 300)
{
	char logdir[HARNESS_PATH + 16], res[HARNESS_PATH + 16];
	char *json;
	int rc;

	hosts_and_keys(16);
	snprintf(logdir, sizeof(logdir), "%s/logs", tmp);
	snprintf(res, sizeof(res), "%s/results", tmp);
	rc = sh("'%s' run --identity %s --known-hosts %s "
		"--hosts %s --log-dir %s --format json -- "
		"'gen() { head -c 10000000 /dev/zero | tr \"\\\\0\" x | "
		"fold -w 999; }; gen & gen >&2; wait' "
		"| grep -v '\"type\":\"line\"' > %s",
		slicectl_bin(), sshd.key, kh, hosts, logdir, res);
	cr_assert_eq(rc, 0);
	json = read_file(res, NULL);
	cr_assert_not_null(json);
	/* 10,000,000 bytes in lines of 999, plus their 10,010 newlines. */
	cr_assert_eq(count_substr(json, "\"bytes_out\":10010010,"
					"\"bytes_err\":10010010"), 16, "%s",
		     json);
	cr_assert(strstr(json, "\"ok\":16"), "%s", json);
	free(json);
	for (unsigned i = 1; i <= 16; i++) {
		char addr[32];

		loopback_addr(i, addr, sizeof(addr));
		cr_assert_eq(sh("test $(grep -c '^out: x\\{999\\}$' %s/%s.log) "
				"-eq 10010 && "
				"test $(grep -c '^err: x\\{999\\}$' %s/%s.log) "
				"-eq 10010 && "
				"test $(grep -c '^out: x\\{10\\}$' %s/%s.log) "
				"-eq 1",
				logdir, addr, logdir, addr, logdir, addr), 0,
			     "log of %s", addr);
	}
}

Test(run, bad_arguments_exit_2)
{
	static const char *const cases[][8] = {
		{ "run", "--", "true", NULL },
		{ "run", "--host", "127.0.0.1:99999", "--", "true", NULL },
		{ "run", "--host", "127.0.0.1", NULL },
		{ "run", "--env", "1BAD=x", "--host", "127.0.0.1", "--", "true" },
		{ "run", "--bogus", NULL },
		{ "run", "--hosts", "/nonexistent/hosts", "--", "true", NULL },
		{ "run", "--keepalive", "1", "--host", "127.0.0.1", "--",
		  "true", NULL },
		{ "run", "--hosts", "/tmp", "--", "true", NULL },
		{ "run", "--log-dir", "/dev/null", "--host", "127.0.0.1", "--",
		  "true", NULL },
	};
	static const char *const messages[] = {
		"no hosts", "port must be 1 to 65535", "no command given",
		"is not NAME=VALUE", "unknown option '--bogus'",
		"cannot read hosts file /nonexistent/hosts",
		"slicectl: error: --keepalive must be 2 seconds or more (or 0 for "
		"none)\n",
		"slicectl: error: hosts file /tmp is a directory: name a file of "
		"hosts, one a line\n",
		"slicectl: error: --log-dir /dev/null is not a directory: name a "
		"directory (it is created when missing)\n",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run_result r;

		cr_assert_eq(run_slicectl(&r, cases[i], NULL), 0);
		cr_assert_eq(r.status, 2, "case %zu: %s", i, r.err);
		cr_assert(strstr(r.err, messages[i]), "case %zu: %s", i, r.err);
		run_result_release(&r);
	}
}

/* An accelerator type is GENERATION-SIZE: anything else is refused
 * before the API (here: nothing listening) is asked. */
Test(run, create_refuses_a_malformed_accelerator_type)
{
	static const char *const bad[] = { "v4-32;rm", "v4-32 ", "V4-32",
					   "v4-", "-32", "v4-032", "v4" };
	const char *env[] = { "SLICECTL_TPU_ENDPOINT=http://127.0.0.1:1/",
			      "SLICECTL_ACCESS_TOKEN=t", NULL };
	char want[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = { "create", "q1", "--accelerator-type",
				       bad[i], "--runtime-version", "rt",
				       "--project", "p", "--zone", "z",
				       "--no-ssh-key", NULL };
		struct run_result r;

		cr_assert_eq(run_slicectl(&r, args, env), 0);
		snprintf(want, sizeof(want),
			 "slicectl: error: --accelerator-type '%s' is not an "
			 "accelerator type: GENERATION-SIZE, such as v4-32, "
			 "v5litepod-16, v5p-8 or v6e-8\n", bad[i]);
		cr_assert_eq(r.status, 2, "%s: %s", bad[i], r.err);
		cr_assert_str_eq(r.err, want);
		run_result_release(&r);
	}
}

/* An API that does not answer: describe, list and wait say they are still
 * trying after a few attempts instead of staying silent for a minute. */
Test(run, api_commands_say_they_are_still_trying)
{
	static const char *const cmds[][3] = {
		{ "describe", "q1", NULL }, { "list", NULL }, { "wait", "q1", NULL },
	};
	const char *env[] = { "SLICECTL_TPU_ENDPOINT=http://127.0.0.1:1/",
			      "SLICECTL_ACCESS_TOKEN=t",
			      "SLICECTL_HTTP_RETRY_BASE_MS=10", NULL };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *args[8] = { 0 };
		struct run_result r;
		size_t n = 0;

		for (size_t j = 0; cmds[i][j]; j++)
			args[n++] = cmds[i][j];
		args[n++] = "--project";
		args[n++] = "p";
		args[n++] = "--zone";
		args[n++] = "z";
		cr_assert_eq(run_slicectl(&r, args, env), 0);
		cr_assert_eq(r.status, 1, "%s: %s", cmds[i][0], r.err);
		cr_assert(strstr(r.err, "slicectl: still trying: Failed to "
					"connect to 127.0.0.1 port 1 "),
			  "%s: %s", cmds[i][0], r.err);
		cr_assert(strstr(r.err, "(attempt 3 of 8)\n"), "%s", r.err);
		cr_assert_eq(count_substr(r.err, "still trying"), 6, "%s",
			     r.err);
		run_result_release(&r);
	}
}

/* SIGTERM ends a command waiting between attempts at once. */
Test(run, api_command_ends_on_sigterm_while_retrying, .timeout = 60)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	const char *args[] = { "describe", "q1", "--project", "p", "--zone",
			       "z", NULL };
	uint64_t took;
	pid_t child;
	int status;

	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	setenv("SLICECTL_TPU_ENDPOINT", "http://127.0.0.1:1/", 1);
	setenv("SLICECTL_ACCESS_TOKEN", "t", 1);
	child = spawn_slicectl(args, out, err);
	unsetenv("SLICECTL_TPU_ENDPOINT");
	unsetenv("SLICECTL_ACCESS_TOKEN");
	status = terminate_after(child, 1500, &took);
	cr_assert_eq(status, 128 + SIGTERM, "exit %d", status);
	cr_assert_lt(took, 2000);
}

/* Files that would block open() or never end are refused at once. */
Test(run, fifo_key_and_endless_known_hosts_refused_at_once, .timeout = 30)
{
	char fifo[HARNESS_PATH + 16], spec[128];
	struct run_result r;
	uint64_t start;

	snprintf(fifo, sizeof(fifo), "%s/fifo", tmp);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	snprintf(spec, sizeof(spec), "%s@127.0.0.1:%u", sshd.user, sshd.port);
	const char *fifo_key[] = { "run", "-i", fifo, "--known-hosts", kh,
				   "--host", spec, "--", "true", NULL };
	const char *urandom[] = { "run", "-i", sshd.key, "--known-hosts",
				  "/dev/urandom", "--host", spec, "--", "true",
				  NULL };

	start = now_ms();
	cr_assert_eq(run_slicectl(&r, fifo_key, NULL), 0);
	cr_assert_eq(r.status, 255, "%s", r.err);
	cr_assert(strstr(r.err, "is a FIFO (pipe), not a key file: name a "
				"regular file"), "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, urandom, NULL), 0);
	cr_assert_eq(r.status, 255, "%s", r.err);
	cr_assert(strstr(r.err, "known_hosts file /dev/urandom is a character "
				"device, not a known_hosts file"), "%s", r.err);
	run_result_release(&r);
	cr_assert_lt(now_ms() - start, 10000);
}

/* An ssh-agent that accepts the connection and never answers holds
 * slicectl while it starts; SIGTERM ends it there, not 30 s later. */
Test(run, interrupt_while_starting_ends_at_once, .timeout = 60)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	pid_t child;
	uint64_t took;
	int fd, status;

	hosts_and_keys(1);
	cr_assert_lt((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path),
				      "%s/agent", tmp), sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	const char *args[] = { "run", "--known-hosts", kh, "--hosts", hosts,
			       "--", "echo ok", NULL };

	setenv("SSH_AUTH_SOCK", sa.sun_path, 1);
	child = spawn_slicectl(args, out, err);
	unsetenv("SSH_AUTH_SOCK");
	status = terminate_after(child, 1000, &took);
	close(fd);
	cr_assert_eq(status, 130, "exit %d", status);
	cr_assert_lt(took, 3000);
	char *e = read_file(err, NULL);
	cr_assert(strstr(e, "slicectl: error: interrupted while starting: no host "
			    "was contacted\n"), "%s", e);
	free(e);
}

Test(run, keepalive_holds_silent_commands_and_finds_frozen_hosts)
{
	struct run_result r = { 0 };
	char cmd[4096];
	pid_t frozen, sleeper;

	hosts_and_keys(2);
	/* Host 2's sshd session process stops answering: SIGSTOP. */
	snprintf(cmd, sizeof(cmd),
		 "if [ $SLICE_PROCESS_ID = 1 ]; then sleep 30 & "
		 "echo $! > %s/pid.2; echo $PPID > %s/pid.1; wait; fi; "
		 "sleep 10; echo done", sshd.shared, sshd.shared);
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	const char *spawn_args[] = { "run", "--identity", sshd.key,
				     "--known-hosts", kh, "--hosts", hosts,
				     "--keepalive", "2", "--format", "json",
				     "--", cmd, NULL };
	int status;
	pid_t child;

	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	child = spawn_slicectl(spawn_args, out, err);
	read_pids(sshd.shared, 1, 1, &frozen);
	read_pids(sshd.shared, 2, 1, &sleeper);
	cr_assert_eq(kill(frozen, SIGSTOP), 0);
	cr_assert_eq(waitpid(child, &status, 0), child);
	kill(frozen, SIGCONT);
	kill(frozen, SIGTERM);
	kill(sleeper, SIGTERM);
	cr_assert_eq(WEXITSTATUS(status), 255);
	r.out = read_file(out, NULL);
	cr_assert(strstr(r.out, "\"host\":\"127.0.0.1\",\"stream\":\"stdout\","
				"\"text\":\"done\""), "%s", r.out);
	cr_assert(strstr(r.out, "\"outcome\":\"lost\""), "%s", r.out);
	cr_assert(strstr(r.out, "no answer for "), "%s", r.out);
	free(r.out);
}

/* Listens on a free loopback port and returns it, or 0. */
static unsigned free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	unsigned port = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &len))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Whether port answers with an SSH banner within a second. */
static bool banner_on(unsigned port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[64] = "";
	ssize_t n = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 1 };

	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && !strncmp(buf, "SSH-2.0-", 8);
}

/*
 * Overload: one sshd serving 256 addresses lets only 2 handshakes in at a
 * time and drops every other connection at once (MaxStartups 2:100:2),
 * while slicectl may start 256. Handshakes are paced down to what it
 * answers, the dropped ones retried: every host answers.
 */
Test(load, overloaded_sshd_loses_no_host, .timeout = 240)
{
	struct test_sshd slow = sshd;
	char config[HARNESS_PATH + 32];
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	const char *sshd_argv[] = { "/usr/sbin/sshd", "-D", "-e", "-f", config,
				    NULL };
	uint64_t start, took;
	pid_t pid, child;
	int status, tries = 0;
	char *text, *line, *save = NULL;
	FILE *f;

	/* The harness's configuration with another port, pid file and
	 * MaxStartups (sshd keeps the first value it reads, even over -o). */
	slow.port = free_port();
	cr_assert_gt(slow.port, 0);
	snprintf(config, sizeof(config), "%s/sshd_config", sshd.dir);
	text = read_file(config, NULL);
	cr_assert_not_null(text);
	snprintf(config, sizeof(config), "%s/slow_config", tmp);
	f = fopen(config, "w");
	cr_assert_not_null(f);
	fprintf(f, "Port %u\nPidFile %s/slow.pid\nMaxStartups 2:100:2\n",
		slow.port, tmp);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, "Port ", 5) && strncmp(line, "PidFile ", 8) &&
		    strncmp(line, "MaxStartups ", 12))
			fprintf(f, "%s\n", line);
	cr_assert_eq(fclose(f), 0);
	free(text);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execv(sshd_argv[0], (char *const *)sshd_argv);
		_exit(127);
	}
	while (!banner_on(slow.port) && ++tries < 100)
		sleep_ms(100);
	cr_assert_eq(sshd_write_hosts(&slow, hosts, 1, 256), 0);
	cr_assert_eq(sshd_write_known_hosts(&slow, kh, 1, 256), 0);
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	const char *args[] = { "run", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, "--connect-concurrency",
			       "256", "--format", "json", "--",
			       "echo $SLICE_PROCESS_ID", NULL };

	start = now_ms();
	child = spawn_slicectl(args, out, err);
	cr_assert_gt(child, 0);
	status = wait_exit(child, 200);
	took = now_ms() - start;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	char *o = read_file(out, NULL), *e = read_file(err, NULL);
	const char *summary = strstr(o, "\"type\":\"summary\"");

	fprintf(stderr, "256 hosts against MaxStartups 2:100:2 in %.1f s; "
		"attempts 1: %zu, 2: %zu, 3: %zu, 4: %zu\n", took / 1000.0,
		count_substr(o, "\"attempts\":1}"),
		count_substr(o, "\"attempts\":2}"),
		count_substr(o, "\"attempts\":3}"),
		count_substr(o, "\"attempts\":4}"));
	cr_assert_eq(status, 0, "exit %d\n%s\n%s", status, summary, e);
	cr_assert(strstr(o, "\"hosts\":256,\"ok\":256,"), "%s", summary);
	cr_assert(strstr(o, "\"text\":\"255\""), "%s", summary);
	/* The server did drop handshakes, and slicectl said it slowed down. */
	cr_assert(strstr(o, "\"attempts\":2}"), "no host was retried: %s", e);
	cr_assert(strstr(e, "slicectl: servers are dropping or delaying SSH "
			    "handshakes ("), "%s", e);
	free(o);
	free(e);
}

/* A thousand hosts from one process, with a soft open-file limit far
 * below that: slicectl raises its own. */
Test(thousand, thousand_hosts_one_process)
{
	char res[HARNESS_PATH + 16];
	char *json;

	hosts_and_keys(1024);
	snprintf(res, sizeof(res), "%s/results", tmp);
	cr_assert_eq(sh("ulimit -Sn 256 && '%s' run --identity %s "
			"--known-hosts %s --hosts %s --format json -- "
			"'echo $SLICE_PROCESS_ID' > %s", slicectl_bin(), sshd.key,
			kh, hosts, res), 0);
	json = read_file(res, NULL);
	cr_assert(strstr(json, "\"hosts\":1024,\"ok\":1024"), "%s",
		  strstr(json, "\"type\":\"summary\""));
	cr_assert(strstr(json, "\"text\":\"1023\""));
	free(json);
}
