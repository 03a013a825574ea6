/* proc.c: sleeping through signals or not, the signal self-pipe, and the
 * default remote user. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_alarm(int sig)
{
	(void)sig;
}

/* SIGALRM after 50 ms, from a handler that does nothing and no SA_RESTART:
 * nanosleep sees EINTR. */
static void alarm_in_50ms(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval once = { { 0, 0 }, { 0, 50000 } };

	sigaction(SIGALRM, &sa, NULL);
	cr_assert_eq(setitimer(ITIMER_REAL, &once, NULL), 0);
}

Test(sleep, sleeps_the_time)
{
	uint64_t t0 = mono_ms();

	cr_assert_eq(proc_sleep_ms(30, false), 0);
	cr_assert_geq(mono_ms() - t0, 30);
	cr_assert_eq(proc_sleep_ms(0, false), 0);
}

Test(sleep, restart_sleeps_through_a_signal)
{
	uint64_t t0 = mono_ms();

	alarm_in_50ms();
	cr_assert_eq(proc_sleep_ms(200, true), 0);
	cr_assert_geq(mono_ms() - t0, 200);
}

Test(sleep, without_restart_a_signal_ends_it)
{
	uint64_t t0 = mono_ms(), took;

	alarm_in_50ms();
	cr_assert_eq(proc_sleep_ms(5000, false), EINTR);
	took = mono_ms() - t0;
	cr_assert_geq(took, 40);
	cr_assert_lt(took, 4000, "slept %llu ms", (unsigned long long)took);
}

static const int sigs[] = { SIGUSR1, SIGUSR2 };

Test(self_pipe, flags_bytes_errno_and_release)
{
	int fd[2], fl;
	unsigned char got[4];
	struct sigaction now;
	struct err e;

	err_init(&e);
	cr_assert_eq(self_pipe_open(fd, &e), 0, "%s", e.msg);
	for (int i = 0; i < 2; i++) {
		fl = fcntl(fd[i], F_GETFL);
		cr_assert(fl & O_NONBLOCK);
		cr_assert(fcntl(fd[i], F_GETFD) & FD_CLOEXEC);
	}
	cr_assert_eq(self_pipe_catch(fd[1], sigs, 2, true, &e), 0, "%s",
		     e.msg);
	sigaction(SIGUSR1, NULL, &now);
	cr_assert(now.sa_flags & SA_RESTART);
	/* The handler leaves errno as it found it. */
	errno = 1234;
	raise(SIGUSR1);
	cr_assert_eq(errno, 1234);
	raise(SIGUSR2);
	cr_assert_eq(read(fd[0], got, sizeof(got)), 2);
	cr_assert_eq(got[0], SIGUSR1);
	cr_assert_eq(got[1], SIGUSR2);
	/* Nothing more: the read end does not block. */
	cr_assert_eq(read(fd[0], got, sizeof(got)), -1);
	cr_assert_eq(errno, EAGAIN);
	self_pipe_release(fd, sigs, 2);
	cr_assert_eq(fd[0], -1);
	cr_assert_eq(fd[1], -1);
	sigaction(SIGUSR1, NULL, &now);
	cr_assert_eq(now.sa_handler, SIG_DFL);
}

/* A pipe nobody drains fills up; the handler must not block on it. */
Test(self_pipe, a_full_pipe_drops_bytes)
{
	int fd[2];
	unsigned char block[4096];
	ssize_t n, total = 0;

	cr_assert_eq(self_pipe_open(fd, NULL), 0);
	cr_assert_eq(self_pipe_catch(fd[1], sigs, 1, false, NULL), 0);
	memset(block, 'x', sizeof(block));
	while (write(fd[1], block, sizeof(block)) > 0)
		;
	cr_assert_eq(errno, EAGAIN);
	raise(SIGUSR1);
	while ((n = read(fd[0], block, sizeof(block))) > 0)
		total += n;
	cr_assert_eq(total % 4096, 0, "no signal byte fits a full pipe");
	raise(SIGUSR1);
	cr_assert_eq(read(fd[0], block, sizeof(block)), 1);
	cr_assert_eq(block[0], SIGUSR1);
	self_pipe_release(fd, sigs, 1);
}

Test(self_pipe, without_restart_a_blocking_read_sees_eintr)
{
	int fd[2], other[2];
	char c;

	cr_assert_eq(self_pipe_open(fd, NULL), 0);
	cr_assert_eq(pipe(other), 0);
	cr_assert_eq(self_pipe_catch(fd[1], (int[]){ SIGALRM }, 1, false,
				     NULL), 0);
	alarm(1);
	cr_assert_eq(read(other[0], &c, 1), -1);
	cr_assert_eq(errno, EINTR);
	cr_assert_eq(read(fd[0], &c, 1), 1);
	cr_assert_eq(c, SIGALRM);
	self_pipe_release(fd, (int[]){ SIGALRM }, 1);
	close(other[0]);
	close(other[1]);
}

Test(user, the_effective_uid_name_first)
{
	const struct passwd *pw = getpwuid(geteuid());
	char u[USER_NAME_MAX];

	cr_assert_not_null(pw);
	setenv("USER", "somebody-else", 1);
	default_remote_user(u, sizeof(u));
	cr_assert_str_eq(u, pw->pw_name);
}

/* A uid with no passwd entry (a container's): $USER, else root. Needs root
 * to take such a uid; in a child, so the test process keeps its own. */
Test(user, no_passwd_entry_falls_back)
{
	pid_t pid;
	int st;

	if (geteuid() != 0)
		cr_skip_test("needs root to become a uid with no name");
	cr_assert_null(getpwuid(54321));
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char u[USER_NAME_MAX];
		int bad = 0;

		if (setuid(54321))
			_exit(10);
		setenv("USER", "alice", 1);
		default_remote_user(u, sizeof(u));
		bad |= strcmp(u, "alice") ? 1 : 0;
		setenv("USER", "", 1);
		default_remote_user(u, sizeof(u));
		bad |= strcmp(u, "root") ? 2 : 0;
		unsetenv("USER");
		default_remote_user(u, sizeof(u));
		bad |= strcmp(u, "root") ? 4 : 0;
		/* Nor a home, unless $HOME names one. */
		unsetenv("HOME");
		bad |= home_dir() ? 8 : 0;
		setenv("HOME", "/h", 1);
		bad |= strcmp(home_dir(), "/h") ? 16 : 0;
		_exit(bad);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "failed checks %d", WEXITSTATUS(st));
}

Test(user, home_from_env_else_passwd)
{
	const struct passwd *pw = getpwuid(geteuid());
	char want[512];

	cr_assert_not_null(pw);
	snprintf(want, sizeof(want), "%s", pw->pw_dir);
	setenv("HOME", "/somewhere", 1);
	cr_assert_str_eq(home_dir(), "/somewhere");
	setenv("HOME", "", 1);
	cr_assert_str_eq(home_dir(), want);
	unsetenv("HOME");
	cr_assert_str_eq(home_dir(), want);
}
