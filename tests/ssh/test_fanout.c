/*
 * The fan-out engine at its API (ssh/fanout.h), against the harness's real
 * OpenSSH sshd on loopback: outcomes and exit codes on many hosts, what is
 * retried and what is not (refused, a dead address, a silent server, host
 * key and login failures), deadlines in order, keepalive, cancellation,
 * EINTR. Every run's debug log is read back, and each state change a host
 * logged must be one of the transitions in the table below (ssh/host.h's
 * states); one test walks the table.
 */
#define _GNU_SOURCE /* pipe2() */

#include "ssh/fanout.h"
#include "ssh/host.h"
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAXH 40

/* The transitions a host may make: what host.c and fanout.c do, read from
 * the code. `walked`: the walk test below makes it happen against a real
 * sshd; the others need a server that fails at one precise moment (a login
 * timing out, an exec refused, a close stalling) and are only checked not
 * to happen outside this table. */
static const struct edge {
	enum host_state from, to;
	bool walked;
} edges[] = {
	{ HS_STOP, HS_QUEUED, true },
	{ HS_QUEUED, HS_CONNECT, true },
	{ HS_QUEUED, HS_DONE, true },        /* cancelled waiting for a slot */
	{ HS_RETRY_WAIT, HS_QUEUED, true },
	{ HS_RETRY_WAIT, HS_DONE, false },   /* cancelled backing off */
	{ HS_CONNECT, HS_HANDSHAKE, true },
	{ HS_CONNECT, HS_RETRY_WAIT, true }, /* refused */
	{ HS_CONNECT, HS_DONE, true },
	{ HS_HANDSHAKE, HS_HOSTKEY, true },
	{ HS_HANDSHAKE, HS_RETRY_WAIT, true }, /* no banner in time */
	{ HS_HANDSHAKE, HS_DONE, true },
	{ HS_HOSTKEY, HS_AUTH, true },
	{ HS_HOSTKEY, HS_DONE, true },
	{ HS_AUTH, HS_CHANNEL_OPEN, true },
	{ HS_AUTH, HS_RETRY_WAIT, false },   /* a login timed out */
	{ HS_AUTH, HS_DONE, true },
	{ HS_CHANNEL_OPEN, HS_EXEC, true },
	{ HS_CHANNEL_OPEN, HS_DONE, false },
	{ HS_EXEC, HS_SEND, true },
	{ HS_EXEC, HS_RUNNING, true },
	{ HS_EXEC, HS_SIGNAL, false },       /* ended while exec was pending */
	{ HS_EXEC, HS_DONE, false },
	{ HS_SEND, HS_SEND_EOF, true },
	{ HS_SEND, HS_RUNNING, false },      /* ended before reading it all */
	{ HS_SEND, HS_SIGNAL, true },
	{ HS_SEND, HS_DONE, false },
	{ HS_SEND_EOF, HS_RUNNING, true },
	{ HS_SEND_EOF, HS_SIGNAL, false },
	{ HS_SEND_EOF, HS_DONE, false },
	{ HS_RUNNING, HS_SIGNAL, true },
	{ HS_RUNNING, HS_CLOSE, true },
	{ HS_RUNNING, HS_DONE, true },       /* lost, or an abort */
	{ HS_SIGNAL, HS_RUNNING, true },
	{ HS_SIGNAL, HS_CLOSE, true },       /* with input: the channel closes */
	{ HS_SIGNAL, HS_DONE, false },
	{ HS_CLOSE, HS_WAIT_CLOSED, true },
	{ HS_CLOSE, HS_CHANNEL_FREE, false },
	{ HS_CLOSE, HS_DONE, false },
	{ HS_WAIT_CLOSED, HS_CHANNEL_FREE, true },
	{ HS_WAIT_CLOSED, HS_DONE, false },
	{ HS_CHANNEL_FREE, HS_DISCONNECT, true },
	{ HS_CHANNEL_FREE, HS_DONE, false },
	{ HS_DISCONNECT, HS_SESSION_FREE, true },
	{ HS_DISCONNECT, HS_DONE, false },
	{ HS_SESSION_FREE, HS_DONE, true },
};

static struct test_sshd sshd;
static char tmp[HARNESS_PATH];
static char kh[HARNESS_PATH + 32];
static char log_path[HARNESS_PATH + 32];
static char tag[HARNESS_PATH + 32];

/* The hosts of one run and everything the callbacks saw. */
static struct fleet {
	size_t n;
	struct fanout_target t[MAXH];
	char addr[MAXH][32];
	char label[MAXH][16];
	char env_n[MAXH][32];
	char *env[MAXH][2];
	struct fanout_result r[MAXH];
	struct buf out[MAXH][2];
	unsigned done_calls[MAXH];
	size_t order[MAXH];
	size_t ndone;
	/* Once cancel_when hosts have printed, cancels bytes go to
	 * cancel_w, as slicectl's signal handler writes them. */
	int cancel_w;
	unsigned cancel_when, cancels, printed;
	bool seen[HS_LAST][HS_LAST]; /* transitions logged in this test */
} fl;

/* Hosts 0..n-1 at 127.0.0.1..n, all served by sshd, each with N=its index
 * and the test's tag (to find its remote processes) in its environment. */
static void fleet(size_t n)
{
	cr_assert_leq(n, MAXH);
	memset(fl.r, 0, sizeof(fl.r));
	fl.cancel_w = -1;
	fl.cancel_when = fl.cancels = 0;
	fl.n = n;
	for (size_t i = 0; i < n; i++) {
		loopback_addr((unsigned)i + 1, fl.addr[i], sizeof(fl.addr[i]));
		snprintf(fl.label[i], sizeof(fl.label[i]), "h%zu", i);
		snprintf(fl.env_n[i], sizeof(fl.env_n[i]), "N=%zu", i);
		fl.env[i][0] = fl.env_n[i];
		fl.env[i][1] = tag;
		fl.t[i] = (struct fanout_target){
			.user = sshd.user, .host = fl.addr[i],
			.port = sshd.port, .label = fl.label[i],
			.env = fl.env[i], .nenv = 2,
		};
	}
	cr_assert_eq(sshd_write_known_hosts(&sshd, kh, 1, (unsigned)n), 0);
}

static void config(struct fanout_config *c, const char *command)
{
	fanout_config_init(c);
	c->command = command;
	c->identity = sshd.key;
	c->known_hosts = kh;
	/* Generous: the machine running the tests may be busy. */
	c->connect_timeout_ms = 15000;
}

/* Configures a run refused for good: an empty known_hosts, or a key the
 * server does not know. */
static void unknown_host_key(struct fanout_config *c)
{
	static char path[HARNESS_PATH + 32];

	snprintf(path, sizeof(path), "%s/empty_known_hosts", tmp);
	cr_assert_eq(sh(": > '%s'", path), 0);
	config(c, "true");
	c->known_hosts = path;
}

static void unknown_user_key(struct fanout_config *c)
{
	static char path[HARNESS_PATH + 32];
	char *pub = NULL;
	struct err e;

	snprintf(path, sizeof(path), "%s/other_key", tmp);
	err_init(&e);
	cr_assert_eq(fanout_key_ensure(path, "other", &pub, &e), 0, "%s",
		     e.msg);
	free(pub);
	config(c, "true");
	c->identity = path;
}

static void on_output(void *ud, size_t host, enum fanout_stream stream,
		      const char *data, size_t len)
{
	(void)ud;
	cr_assert_lt(host, fl.n);
	if (!fl.out[host][0].len && !fl.out[host][1].len &&
	    ++fl.printed == fl.cancel_when && fl.cancel_w >= 0)
		cr_assert_eq(write(fl.cancel_w, "xx", fl.cancels),
			     (ssize_t)fl.cancels);
	cr_assert_eq(buf_append(&fl.out[host][stream], data, len), 0);
}

static void on_done(void *ud, size_t host, const struct fanout_result *r)
{
	(void)ud;
	cr_assert_lt(host, fl.n);
	cr_assert_eq(r, &fl.r[host]);
	cr_assert_neq(r->outcome, FANOUT_PENDING);
	fl.done_calls[host]++;
	fl.order[fl.ndone++] = host;
}

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int state_named(const char *name)
{
	for (int s = 0; s < HS_LAST; s++)
		if (!strcmp(host_state_name((enum host_state)s), name))
			return s;
	return -1;
}

static bool allowed(int from, int to)
{
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		if ((int)edges[i].from == from && (int)edges[i].to == to)
			return true;
	return false;
}

/* Reads back "test: debug: LABEL: FROM -> TO" lines (host_set_state). */
static void read_transitions(void)
{
	char *log = read_file(log_path, NULL), *save = NULL;

	cr_assert_not_null(log);
	for (char *line = strtok_r(log, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char label[16], from[32], to[32];
		int end = 0, a, b;

		if (sscanf(line, "test: debug: %15[^:]: %31[A-Z_] -> %31[A-Z_]%n",
			   label, from, to, &end) != 3 || line[end])
			continue;
		a = state_named(from);
		b = state_named(to);
		cr_assert(a >= 0 && b >= 0, "unknown state in: %s", line);
		cr_assert(allowed(a, b), "%s: %s -> %s is not a transition "
			  "of the table", label, from, to);
		fl.seen[a][b] = true;
	}
	free(log);
}

/* One fanout_run with the debug log captured and read back; no file
 * descriptor may be left open, and every host is done exactly once. */
static int run(const struct fanout_config *c, struct err *e)
{
	struct fanout_callbacks cb = { .output = on_output, .done = on_done };
	unsigned fds = open_fds();
	int saved, fd, rc;

	for (size_t i = 0; i < MAXH; i++)
		for (int s = 0; s < 2; s++)
			buf_reset(&fl.out[i][s]);
	memset(fl.done_calls, 0, sizeof(fl.done_calls));
	fl.ndone = 0;
	fl.printed = 0;
	err_init(e);
	fflush(stderr);
	saved = dup(2);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert(saved >= 0 && fd >= 0);
	cr_assert_eq(dup2(fd, 2), 2);
	close(fd);
	rc = fanout_run(c, fl.t, fl.n, fl.r, &cb, e);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	read_transitions();
	cr_assert_eq(open_fds(), fds, "the fan-out left file descriptors open");
	if (!rc)
		for (size_t i = 0; i < fl.n; i++)
			cr_assert_eq(fl.done_calls[i], 1, "host %zu", i);
	return rc;
}

static void run_ok(const struct fanout_config *c)
{
	struct err e;

	cr_assert_eq(run(c, &e), SSH_OK, "%s", e.msg);
}

static const char *out_of(size_t host, enum fanout_stream s)
{
	return fl.out[host][s].data ? fl.out[host][s].data : "";
}

/* Points host at a port on 127.0.0.1 where nothing listens: its
 * connections are refused. */
static void refused(size_t host)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
		  !getsockname(fd, (struct sockaddr *)&sa, &len));
	close(fd);
	fl.t[host].host = "127.0.0.1";
	fl.t[host].port = ntohs(sa.sin_port);
}

/* A listener on addr that never accepts. With fill, its accept queue is
 * full, so the kernel drops new SYNs: an address that never answers (a
 * dead host) without leaving 127.0.0.0/8. Without, connections complete
 * and then hear nothing: a server too busy to speak. */
struct listener {
	int fd, filler;
	unsigned port;
};

static void listener_start(struct listener *l, size_t host, const char *addr,
			   bool fill)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);

	cr_assert_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(l->fd >= 0 &&
		  !bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) &&
		  !listen(l->fd, fill ? 0 : 16) &&
		  !getsockname(l->fd, (struct sockaddr *)&sa, &len));
	l->port = ntohs(sa.sin_port);
	l->filler = -1;
	fl.t[host].host = addr;
	fl.t[host].port = l->port;
	if (!fill)
		return;
	l->filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(l->filler >= 0 &&
		  !connect(l->filler, (struct sockaddr *)&sa, sizeof(sa)));
}

static void listener_stop(struct listener *l)
{
	if (l->filler >= 0)
		close(l->filler);
	close(l->fd);
}

/* Waits up to 5 s for the remote commands of this test to end. */
static void remote_commands_gone(void)
{
	unsigned left = 0;

	for (int i = 0; i < 100; i++) {
		left = processes_mentioning(tag);
		if (!left)
			break;
		sleep_ms(50);
	}
	cr_assert_eq(left, 0, "remote commands outlived the fan-out");
}

static void up(void)
{
	cr_assert_eq(sshd_start(&sshd, NULL), 0, "sshd did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "fanout"), 0);
	snprintf(kh, sizeof(kh), "%s/known_hosts", tmp);
	snprintf(log_path, sizeof(log_path), "%s/log", tmp);
	snprintf(tag, sizeof(tag), "FANOUT_TEST=%s", tmp);
	log_setup("test", LOG_DEBUG);
	for (size_t i = 0; i < MAXH; i++)
		for (int s = 0; s < 2; s++)
			buf_init(&fl.out[i][s]);
}

static void down(void)
{
	for (size_t i = 0; i < MAXH; i++)
		for (int s = 0; s < 2; s++)
			buf_release(&fl.out[i][s]);
	sshd_stop(&sshd);
	rm_rf(tmp);
}

TestSuite(fanout, .init = up, .fini = down, .timeout = 90);

Test(fanout, state_names_match_the_enum)
{
	for (int s = 0; s < HS_LAST; s++) {
		const char *name = host_state_name((enum host_state)s);

		cr_assert_str_neq(name, "?", "state %d has no name", s);
		cr_assert_eq(state_named(name), s, "%s is named twice", name);
	}
	cr_assert_str_eq(host_state_name(HS_LAST), "?");
}

Test(fanout, many_hosts_with_mixed_exit_codes)
{
	struct fanout_config c;

	fleet(MAXH);
	config(&c, "echo out$N; echo err$N >&2; exit $((N % 4))");
	run_ok(&c);
	for (size_t i = 0; i < fl.n; i++) {
		char want[32];

		cr_assert_eq(fl.r[i].outcome, FANOUT_EXITED, "h%zu: %s", i,
			     fl.r[i].error);
		cr_assert_eq(fl.r[i].exit_status, (int)(i % 4));
		snprintf(want, sizeof(want), "out%zu\n", i);
		cr_assert_str_eq(out_of(i, FANOUT_STDOUT), want);
		snprintf(want, sizeof(want), "err%zu\n", i);
		cr_assert_str_eq(out_of(i, FANOUT_STDERR), want);
		cr_assert_eq(fl.r[i].bytes_out, strlen(want));
		cr_assert_geq(fl.r[i].attempts, 1);
		cr_assert_geq(fl.r[i].end_ms, fl.r[i].start_ms);
	}
}

Test(fanout, input_reaches_every_host)
{
	static const char input[] = "line one\nline two\n";
	struct fanout_config c;

	fleet(3);
	config(&c, "cat; exit 5");
	c.input = (const unsigned char *)input;
	c.input_len = sizeof(input) - 1;
	run_ok(&c);
	for (size_t i = 0; i < fl.n; i++) {
		cr_assert_eq(fl.r[i].outcome, FANOUT_EXITED);
		cr_assert_eq(fl.r[i].exit_status, 5);
		cr_assert_str_eq(out_of(i, FANOUT_STDOUT), input);
		cr_assert_eq(fl.r[i].bytes_in, sizeof(input) - 1);
	}
}

/* Refused is retried with a growing pause (250 ms, then 500 ms, each
 * with half of it random), `retries` times and no more. */
Test(fanout, refused_is_retried_with_backoff)
{
	struct fanout_config c;
	uint64_t t0;

	fleet(2);
	refused(0);
	refused(1);
	config(&c, "true");
	c.retries = 2;
	t0 = mono_ms();
	run_ok(&c);
	for (size_t i = 0; i < fl.n; i++) {
		cr_assert_eq(fl.r[i].outcome, FANOUT_UNREACHABLE);
		cr_assert_eq(fl.r[i].attempts, 3);
		cr_assert(strstr(fl.r[i].error, "refused"), "%s",
			  fl.r[i].error);
	}
	cr_assert_geq(mono_ms() - t0, 125u + 250u);
	cr_assert(fl.seen[HS_RETRY_WAIT][HS_QUEUED]);
	cr_assert(fl.seen[HS_QUEUED][HS_CONNECT]);

	fleet(1);
	refused(0);
	c.retries = 0;
	run_ok(&c);
	cr_assert_eq(fl.r[0].attempts, 1);
}

/* No answer to the SYN: most likely a host that is down, where another
 * attempt would cost another timeout. */
Test(fanout, a_dead_address_times_out_once)
{
	struct fanout_config c;
	struct listener dead;
	uint64_t t0;

	fleet(2);
	listener_start(&dead, 1, "127.0.0.77", true);
	config(&c, "exit 0");
	c.connect_timeout_ms = 2000;
	t0 = mono_ms();
	run_ok(&c);
	listener_stop(&dead);
	cr_assert_eq(fl.r[0].outcome, FANOUT_EXITED, "%s", fl.r[0].error);
	cr_assert_eq(fl.r[1].outcome, FANOUT_UNREACHABLE);
	cr_assert_eq(fl.r[1].attempts, 1);
	cr_assert(strstr(fl.r[1].error, "timed out after 2.0 s (in CONNECT)"),
		  "%s", fl.r[1].error);
	cr_assert_geq(fl.r[1].end_ms - fl.r[1].start_ms, 2000u);
	cr_assert_lt(mono_ms() - t0, 15000u);
}

/* A server that takes the connection but says nothing is busy: the
 * handshake is tried again, within `retries`. */
Test(fanout, a_silent_server_is_retried)
{
	struct fanout_config c;
	struct listener busy;

	fleet(1);
	listener_start(&busy, 0, "127.0.0.78", false);
	config(&c, "exit 0");
	c.connect_timeout_ms = 500;
	c.retries = 1;
	run_ok(&c);
	listener_stop(&busy);
	cr_assert_eq(fl.r[0].outcome, FANOUT_UNREACHABLE);
	cr_assert_eq(fl.r[0].attempts, 2);
	cr_assert(strstr(fl.r[0].error, "(in HANDSHAKE)"), "%s",
		  fl.r[0].error);
}

/* Failures that another attempt would only repeat. */
Test(fanout, host_key_and_login_failures_are_not_retried)
{
	struct fanout_config c;

	fleet(1);
	unknown_host_key(&c);
	run_ok(&c);
	cr_assert_eq(fl.r[0].outcome, FANOUT_UNREACHABLE);
	cr_assert_eq(fl.r[0].attempts, 1);
	cr_assert(fl.seen[HS_HOSTKEY][HS_DONE], "%s", fl.r[0].error);

	fleet(1);
	unknown_user_key(&c);
	run_ok(&c);
	cr_assert_eq(fl.r[0].outcome, FANOUT_UNREACHABLE);
	cr_assert_eq(fl.r[0].attempts, 1);
	cr_assert(strstr(fl.r[0].error, "refused every key"), "%s",
		  fl.r[0].error);
}

/* Deadlines fire in the order they fall, whatever kind they are: a
 * command that ends by itself, a connect timeout, a command timeout. */
Test(fanout, deadlines_in_order)
{
	struct fanout_config c;
	struct listener dead;

	fleet(3);
	listener_start(&dead, 0, "127.0.0.79", true);
	config(&c, "if [ $N = 2 ]; then sleep 0.2; exit 3; fi; sleep 30");
	c.connect_timeout_ms = 2000;
	c.command_timeout_ms = 4000;
	run_ok(&c);
	listener_stop(&dead);
	cr_assert_eq(fl.r[2].outcome, FANOUT_EXITED, "%s", fl.r[2].error);
	cr_assert_eq(fl.r[2].exit_status, 3);
	cr_assert_eq(fl.r[0].outcome, FANOUT_UNREACHABLE);
	cr_assert_eq(fl.r[1].outcome, FANOUT_TIMEOUT, "%s", fl.r[1].error);
	cr_assert_str_eq(fl.r[1].error, "command timed out after 4.0 s");
	cr_assert_eq(fl.ndone, 3);
	cr_assert_eq(fl.order[0], 2);
	cr_assert_eq(fl.order[1], 0);
	cr_assert_eq(fl.order[2], 1);
	cr_assert_geq(fl.r[1].end_ms - fl.r[1].start_ms, 4000u);
	remote_commands_gone();
}

/* Host 0 is silent for longer than keepalive_ms * (count_max + 1): only
 * answered keepalives keep it. Host 1 stops the sshd serving it, which
 * then answers nothing: lost, and dropped on the spot. */
Test(fanout, keepalive)
{
	struct fanout_config c;
	char cmd[HARNESS_PATH * 2 + 128], path[HARNESS_PATH + 32];
	char *pid;

	fleet(2);
	snprintf(path, sizeof(path), "%s/sshd.pid", sshd.shared);
	snprintf(cmd, sizeof(cmd),
		 "if [ $N = 0 ]; then sleep 5; exit 0; fi; "
		 "echo $PPID > '%s'; sleep 0.5; kill -STOP $PPID; sleep 30",
		 path);
	config(&c, cmd);
	c.keepalive_ms = 2000;
	c.keepalive_count_max = 1;
	run_ok(&c);
	pid = read_file(path, NULL);
	cr_assert_not_null(pid);
	cr_assert_gt(atoi(pid), 1);
	kill(atoi(pid), SIGKILL);
	free(pid);
	cr_assert_eq(fl.r[0].outcome, FANOUT_EXITED, "%s", fl.r[0].error);
	cr_assert_eq(fl.r[0].exit_status, 0);
	cr_assert_eq(fl.r[1].outcome, FANOUT_LOST, "%s", fl.r[1].error);
	cr_assert(strstr(fl.r[1].error, "no answer for 4 s"), "%s",
		  fl.r[1].error);
	cr_assert(fl.seen[HS_RUNNING][HS_DONE]);
	remote_commands_gone();
}

/* An error after the command started drops the connection at once: the
 * session is gone, and closing it through the teardown states would only
 * wait for their timeout. */
Test(fanout, a_lost_connection_ends_the_host_at_once)
{
	struct fanout_config c;

	fleet(2);
	config(&c, "if [ $N = 1 ]; then echo bye; kill -KILL $PPID; fi; "
		   "exit 0");
	run_ok(&c);
	cr_assert_eq(fl.r[0].outcome, FANOUT_EXITED, "%s", fl.r[0].error);
	cr_assert_eq(fl.r[1].outcome, FANOUT_LOST, "%s", fl.r[1].error);
	cr_assert(strstr(fl.r[1].error, "lost"), "%s", fl.r[1].error);
	cr_assert_lt(fl.r[1].end_ms - fl.r[1].start_ms, 5000u);
	cr_assert(fl.seen[HS_RUNNING][HS_DONE]);
}

/* Gives the run a cancel pipe p; once `when` hosts printed (0: never),
 * `bytes` interrupts are written to it. */
static void cancel_pipe(struct fanout_config *c, int p[2], unsigned when,
			unsigned bytes)
{
	cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	c->cancel_fd = p[0];
	fl.cancel_w = p[1];
	fl.cancel_when = when;
	fl.cancels = bytes;
}

/* One interrupt ends the remote commands; they are gone when the
 * fan-out returns. */
Test(fanout, cancel_ends_the_remote_commands)
{
	struct fanout_config c;
	uint64_t t0;
	int p[2];

	fleet(4);
	config(&c, "echo started; sleep 30");
	cancel_pipe(&c, p, 4, 1);
	t0 = mono_ms();
	run_ok(&c);
	cr_assert_lt(mono_ms() - t0, 15000u);
	for (size_t i = 0; i < fl.n; i++) {
		cr_assert_eq(fl.r[i].outcome, FANOUT_CANCELLED);
		cr_assert_str_eq(fl.r[i].error, "cancelled");
	}
	/* TERM was written to the commands, not the connections dropped. */
	cr_assert(fl.seen[HS_SIGNAL][HS_RUNNING]);
	cr_assert(!fl.seen[HS_RUNNING][HS_DONE]);
	close(p[0]);
	close(p[1]);
	remote_commands_gone();
}

/* Two interrupts drop the connections; the watcher on each host ends the
 * command when its channel goes away. */
Test(fanout, a_second_interrupt_aborts)
{
	struct fanout_config c;
	int p[2];

	fleet(3);
	config(&c, "echo started; sleep 30");
	cancel_pipe(&c, p, 3, 2);
	run_ok(&c);
	for (size_t i = 0; i < fl.n; i++)
		cr_assert_eq(fl.r[i].outcome, FANOUT_CANCELLED);
	cr_assert(fl.seen[HS_RUNNING][HS_DONE]);
	cr_assert(!fl.seen[HS_RUNNING][HS_SIGNAL]);
	close(p[0]);
	close(p[1]);
	remote_commands_gone();
}

Test(fanout, an_interrupt_before_the_start_contacts_nobody)
{
	struct fanout_config c;
	struct err e;
	int p[2];

	fleet(2);
	config(&c, "true");
	cancel_pipe(&c, p, 0, 0);
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert_eq(run(&c, &e), SSH_EINTR);
	cr_assert_eq(fl.ndone, 0);
	cr_assert_eq(fl.r[0].attempts, 0);
	close(p[0]);
	close(p[1]);
}

/* One slot: the first host fails while the others wait for it, and
 * fail-fast ends them where they are. */
Test(fanout, fail_fast_ends_hosts_still_queued)
{
	struct fanout_config c;

	fleet(4);
	config(&c, "if [ $N = 0 ]; then exit 1; fi; sleep 30");
	c.connect_concurrency = 1;
	c.fail_fast = true;
	run_ok(&c);
	cr_assert_eq(fl.r[0].outcome, FANOUT_EXITED);
	cr_assert_eq(fl.r[0].exit_status, 1);
	for (size_t i = 1; i < fl.n; i++)
		cr_assert_eq(fl.r[i].outcome, FANOUT_CANCELLED, "h%zu", i);
	cr_assert(fl.seen[HS_QUEUED][HS_DONE]);
	cr_assert_eq(fl.order[0], 0);
	remote_commands_gone();
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* Signals arriving all through a run (without SA_RESTART, as slicectl
 * installs its handlers) change nothing. */
Test(fanout, signals_during_the_run_are_harmless)
{
	struct itimerval it = { .it_value = { .tv_usec = 5000 },
				.it_interval = { .tv_usec = 5000 } };
	struct itimerval off = { 0 };
	struct sigaction sa;
	struct fanout_config c;

	fleet(4);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	config(&c, "sleep 0.5; echo done");
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	run_ok(&c);
	cr_assert_eq(setitimer(ITIMER_REAL, &off, NULL), 0);
	cr_assert_gt(alarms, 10);
	for (size_t i = 0; i < fl.n; i++) {
		cr_assert_eq(fl.r[i].outcome, FANOUT_EXITED, "%s",
			     fl.r[i].error);
		cr_assert_str_eq(out_of(i, FANOUT_STDOUT), "done\n");
	}
}

/* Every transition marked `walked` happens in one of these runs. */
Test(fanout, the_transitions_table_is_walked)
{
	static const char small[] = "x\n";
	struct fanout_config c;
	struct listener busy;
	char *big;
	int p[2];

	/* Input, then a command that ends by itself. */
	fleet(1);
	config(&c, "cat >/dev/null; exit 2");
	c.input = (const unsigned char *)small;
	c.input_len = sizeof(small) - 1;
	run_ok(&c);
	/* A timeout without input: TERM through the wrapper. */
	config(&c, "sleep 30");
	c.command_timeout_ms = 1000;
	run_ok(&c);
	cr_assert_eq(fl.r[0].outcome, FANOUT_TIMEOUT);
	/* A timeout while input waits for window: the channel is closed. */
	big = malloc(8u << 20);
	cr_assert_not_null(big);
	memset(big, 'y', 8u << 20);
	config(&c, "sleep 1; cat >/dev/null");
	c.input = (const unsigned char *)big;
	c.input_len = 8u << 20;
	c.command_timeout_ms = 500;
	run_ok(&c);
	free(big);
	cr_assert_eq(fl.r[0].outcome, FANOUT_TIMEOUT);
	/* Refused, once retried. */
	fleet(1);
	refused(0);
	config(&c, "true");
	c.retries = 1;
	run_ok(&c);
	/* Silent, once retried. */
	listener_start(&busy, 0, "127.0.0.80", false);
	c.connect_timeout_ms = 300;
	run_ok(&c);
	listener_stop(&busy);
	/* Unknown host key; keys refused. */
	fleet(1);
	unknown_host_key(&c);
	run_ok(&c);
	unknown_user_key(&c);
	run_ok(&c);
	/* Cancelled in the queue, and aborted while running. */
	fleet(4);
	config(&c, "if [ $N = 0 ]; then exit 1; fi; sleep 30");
	c.connect_concurrency = 1;
	c.fail_fast = true;
	run_ok(&c);
	fleet(1);
	config(&c, "echo started; sleep 30");
	cancel_pipe(&c, p, 1, 2);
	run_ok(&c);
	close(p[0]);
	close(p[1]);

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		if (edges[i].walked)
			cr_expect(fl.seen[edges[i].from][edges[i].to],
				  "%s -> %s was not walked",
				  host_state_name(edges[i].from),
				  host_state_name(edges[i].to));
	remote_commands_gone();
}
