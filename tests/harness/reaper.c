/*
 * tests/harness/reaper.c: `reaper TEST [ARG...]` runs a test in a PID
 * namespace of its own, with its own /proc, so that nothing the test
 * started outlives it. Daemons that leave the test's process group
 * (slurmd, slurmctld, sshd, a supervisor) stay in the namespace, and the
 * kernel kills everything in it when its init, the reaper's child, ends:
 * when the test ends, or at once when the reaper is killed (meson's
 * timeout kills the test's process group, SIGTERM then SIGKILL; the init
 * dies with the reaper through PR_SET_PDEATHSIG).
 *
 * The init also reaps the orphans that daemonizing leaves, so a daemon
 * that exited is gone (kill -0 fails) as it would be on the host; it
 * passes SIGTERM, SIGINT and SIGHUP sent to the reaper on to the test;
 * and the reaper ends as the test did, by its exit code or its signal.
 * The init's mount namespace (the new /proc needs one) is private, so no
 * mount leaks to the host, and has a /tmp and a /dev/shm of the test's
 * own: Criterion names its socket (/tmp/criterion_PID.sock) and its
 * shared memory after the runner's pid, which is 2 in every namespace.
 * The test's /tmp is a directory /tmp/slicectl-test-XXXXXX of the host's,
 * removed when the test passes or skips, kept (and named) when it fails.
 * Without the privilege for the namespaces (not root, and no user
 * namespaces) the reaper says so and runs the test as it is.
 */
#define _GNU_SOURCE /* unshare() and CLONE_* are Linux-only */

#include "tests/harness/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP };

/* Whom a forwarded signal goes to: the init (in the reaper) or the test
 * (in the init). */
static volatile pid_t forward_to;

static void forward(int sig)
{
	if (forward_to > 0)
		kill(forward_to, sig);
}

static void set_forwarding(void (*handler)(int))
{
	struct sigaction sa = { .sa_handler = handler };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(*forwarded); i++)
		sigaction(forwarded[i], &sa, NULL);
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A user namespace where this process keeps its uid and gid, for
 * CAP_SYS_ADMIN over the PID and mount namespaces made with it. */
static int map_ids(uid_t uid, gid_t gid)
{
	char map[64];

	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_text("/proc/self/uid_map", map) < 0)
		return -1;
	if (write_text("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	return write_text("/proc/self/gid_map", map);
}

/* A new PID namespace for the children (as root, or in a new user
 * namespace); -1 with errno when neither can be had. */
static int enter_pid_namespace(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int first;

	if (unshare(CLONE_NEWPID) == 0)
		return 0;
	first = errno;
	if (unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0)
		return map_ids(uid, gid);
	errno = first;
	return -1;
}

/* The init's own mounts: private, tmp on /tmp, a new /dev/shm and the
 * namespace's /proc. */
static int mount_private(const char *tmp)
{
	const struct {
		const char *source, *target, *type;
		unsigned long flags;
		const char *data;
	} m[] = {
		{ NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL },
		{ tmp, "/tmp", NULL, MS_BIND, NULL },
		{ "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=1777" },
		{ "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL },
	};

	if (unshare(CLONE_NEWNS) < 0) {
		fprintf(stderr, "reaper: unshare(CLONE_NEWNS): %s\n",
			strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(m) / sizeof(*m); i++)
		if (mount(m[i].source, m[i].target, m[i].type, m[i].flags,
			  m[i].data) < 0) {
			fprintf(stderr, "reaper: cannot mount %s for the "
				"test: %s%s\n", m[i].target, strerror(errno),
				i == 0 && errno == EINVAL
					? " (/ is not a mount point: in a "
					  "chroot, bind-mount its root onto "
					  "itself first, or run meson test "
					  "--setup bare)"
					: "");
			return -1;
		}
	return 0;
}

/* The test: default signal dispositions, only its own descriptors. */
static void exec_test(char **argv, int status_fd)
{
	set_forwarding(SIG_DFL);
	close(status_fd);
	execvp(argv[0], argv);
	fprintf(stderr, "reaper: cannot run %s: %s\n", argv[0],
		strerror(errno));
	_exit(127);
}

/* The namespace's init (pid 1): dies with the reaper, mounts the
 * namespace's /proc, starts the test, reaps every orphan until the test
 * ends, and sends the test's wait status to the reaper. Returns the exit
 * code for the init. */
static int run_init(char **argv, const char *tmp, int status_fd,
		    int alive_fd)
{
	struct pollfd p = { .fd = alive_fd, .events = POLLIN };
	pid_t test, pid;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* The reaper died before the line above: its end of the pipe is
	 * closed. */
	if (poll(&p, 1, 0) != 0)
		return 1;
	close(alive_fd);
	if (mount_private(tmp) < 0)
		return 125;
	set_forwarding(forward);
	test = fork();
	if (test < 0) {
		fprintf(stderr, "reaper: fork: %s\n", strerror(errno));
		return 125;
	}
	if (test == 0)
		exec_test(argv, status_fd);
	forward_to = test;
	for (;;) {
		pid = waitpid(-1, &st, 0);
		if (pid == test)
			break;
		if (pid < 0 && errno != EINTR) {
			fprintf(stderr, "reaper: waitpid: %s\n",
				strerror(errno));
			return 125;
		}
	}
	if (write(status_fd, &st, sizeof(st)) != (ssize_t)sizeof(st))
		return 125;
	return 0;
}

/* Ends this process as the wait status st says the test ended. */
static int end_as(int st)
{
	struct rlimit no_core = { 0, 0 };
	int sig;

	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	sig = WTERMSIG(st);
	setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	raise(sig);
	return 128 + sig;
}

/* Waits for the init; the test's wait status, or the init's own when
 * the init sent none. */
static int wait_init(pid_t init, int status_fd)
{
	int st, test_st;
	ssize_t n;

	while (waitpid(init, &st, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "reaper: waitpid: %s\n",
				strerror(errno));
			return 125 << 8;
		}
	do
		n = read(status_fd, &test_st, sizeof(test_st));
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(test_st) ? test_st : st;
}

/* The test's /tmp: kept when the test failed, for what it left there. */
static void end_tmp(const char *tmp, int st)
{
	if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77))
		rm_rf(tmp);
	else
		fprintf(stderr, "reaper: the test's /tmp was %s\n", tmp);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/slicectl-test-XXXXXX";
	int status[2], alive[2], st;
	pid_t init;

	if (argc < 2) {
		fprintf(stderr, "usage: reaper TEST [ARG...]\n");
		return 2;
	}
	if (enter_pid_namespace() < 0) {
		fprintf(stderr, "reaper: no PID namespace (%s); %s runs "
			"without it, and what it leaves running stays\n",
			strerror(errno), argv[1]);
		execvp(argv[1], argv + 1);
		fprintf(stderr, "reaper: cannot run %s: %s\n", argv[1],
			strerror(errno));
		return 127;
	}
	if (!mkdtemp(tmp) || chmod(tmp, 01777) < 0) {
		fprintf(stderr, "reaper: %s: %s\n", tmp, strerror(errno));
		return 125;
	}
	if (pipe2(status, O_CLOEXEC) < 0 || pipe2(alive, O_CLOEXEC) < 0) {
		fprintf(stderr, "reaper: pipe: %s\n", strerror(errno));
		rm_rf(tmp);
		return 125;
	}
	set_forwarding(forward);
	init = fork();
	if (init < 0) {
		fprintf(stderr, "reaper: fork: %s\n", strerror(errno));
		rm_rf(tmp);
		return 125;
	}
	if (init == 0) {
		close(status[0]);
		close(alive[1]);
		_exit(run_init(argv + 1, tmp, status[1], alive[0]));
	}
	forward_to = init;
	close(status[1]);
	close(alive[0]);
	st = wait_init(init, status[0]);
	end_tmp(tmp, st);
	/* No exit handlers: with the namespace's init gone, this process
	 * can no longer fork (ENOMEM), and LeakSanitizer's check at exit
	 * clones a tracer, so a sanitizer build would fail every test. */
	_exit(end_as(st));
}
