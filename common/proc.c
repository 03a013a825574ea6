/* proc.c: the process's chores: sleeping, waking a poll loop from a signal
 * handler, and who the user is. */
#define _GNU_SOURCE /* pipe2 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_sleep_ms(uint64_t ms, bool restart)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		if (errno != EINTR || !restart)
			return errno;
	return 0;
}

int self_pipe_open(int fd[2], struct err *e)
{
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0) {
		fd[0] = fd[1] = -1;
		return err_errno(e, COMMON_EIO, errno, "cannot make a pipe");
	}
	return 0;
}

/* The write end the handler uses; one per process, as signal dispositions
 * are. */
static volatile sig_atomic_t self_pipe_fd = -1;

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;

	if (write(self_pipe_fd, &c, 1) < 0) {
		/* Full: the reader has enough to wake for. */
	}
	errno = saved;
}

int self_pipe_catch(int write_fd, const int *sigs, size_t n, bool restart,
		    struct err *e)
{
	struct sigaction sa;

	self_pipe_fd = write_fd;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	for (size_t i = 0; i < n; i++)
		if (sigaction(sigs[i], &sa, NULL) != 0)
			return err_errno(e, COMMON_EINVAL, errno,
					 "cannot catch signal %d", sigs[i]);
	return 0;
}

void self_pipe_release(int fd[2], const int *sigs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		signal(sigs[i], SIG_DFL);
	self_pipe_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (fd[i] >= 0)
			close(fd[i]);
		fd[i] = -1;
	}
}

void default_remote_user(char *out, size_t cap)
{
	const struct passwd *pw = getpwuid(geteuid());
	const char *env = getenv("USER");

	if (pw && pw->pw_name && *pw->pw_name &&
	    strlen(pw->pw_name) < cap)
		memcpy(out, pw->pw_name, strlen(pw->pw_name) + 1);
	else if (env && *env && strlen(env) < cap)
		memcpy(out, env, strlen(env) + 1);
	else
		snprintf(out, cap, "root");
}

const char *home_dir(void)
{
	const char *home = getenv("HOME");
	const struct passwd *pw;

	if (home && *home)
		return home;
	pw = getpwuid(geteuid());
	return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : NULL;
}
