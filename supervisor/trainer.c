/*
 * trainer.c: see trainer.h. The child becomes the leader of a new process
 * group before exec, so signals reach every process the trainer starts
 * (python workers, shell pipelines); output goes through a pipe rather
 * than straight to the log file so the supervisor sees the trainer is
 * alive (hang detection) as each chunk arrives.
 */
#include "supervisor/trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void trainer_init(struct trainer *t)
{
	memset(t, 0, sizeof(*t));
	t->out_fd = -1;
	t->log_fd = -1;
}

uint64_t proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields are
	 * counted from the last ')'. starttime is field 22. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &start) != 1)
		return 0;
	return start;
}

int trainer_start(struct trainer *t, const char *command, const char *dir,
		  char *const *env, const char *log_path, struct err *e)
{
	sigset_t all, old;
	int pipefd[2];
	pid_t pid;

	trainer_init(t);
	t->log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			 0644);
	if (t->log_fd < 0)
		return err_errno(e, COMMON_EIO, errno, "cannot open log %s",
				 log_path);
	if (pipe(pipefd)) {
		int err = errno;

		close(t->log_fd);
		t->log_fd = -1;
		return err_errno(e, COMMON_EIO, err, "pipe");
	}
	/* Until the child has the default dispositions, a signal sent to
	 * its group waits: the supervisor's handlers, which it inherits,
	 * would take it for the supervisor and the trainer would not die. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid > 0)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		int err = errno;

		pthread_sigmask(SIG_SETMASK, &old, NULL);
		close(pipefd[0]);
		close(pipefd[1]);
		close(t->log_fd);
		t->log_fd = -1;
		return err_errno(e, COMMON_EIO, err, "fork");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		sigset_t none;

		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (null >= 0)
			dup2(null, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		if (dir && chdir(dir)) {
			dprintf(2, "slice-supervisor: cannot enter %s: %s\n",
				dir, strerror(errno));
			_exit(126);
		}
		execle("/bin/sh", "sh", "-c", command, (char *)NULL, env);
		dprintf(2, "slice-supervisor: cannot run /bin/sh: %s\n",
			strerror(errno));
		_exit(127);
	}
	/* Also here, so the group exists before any signal we send. */
	setpgid(pid, pid);
	close(pipefd[1]);
	fcntl(pipefd[0], F_SETFL, fcntl(pipefd[0], F_GETFL) | O_NONBLOCK);
	fcntl(pipefd[0], F_SETFD, FD_CLOEXEC);
	t->pid = pid;
	t->out_fd = pipefd[0];
	t->started_ms = t->last_output_ms = mono_ms();
	t->start_time = proc_start_time(pid);
	return 0;
}

bool trainer_drain(struct trainer *t)
{
	char chunk[65536];

	while (t->out_fd >= 0) {
		ssize_t n = read(t->out_fd, chunk, sizeof(chunk));

		if (n > 0) {
			t->last_output_ms = mono_ms();
			/* A full disk must not stop the trainer: its output
			 * is then lost, the training is not. */
			if (t->log_fd >= 0 && write(t->log_fd, chunk, (size_t)n) < 0)
				log_debug("log write: %s", strerror(errno));
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		close(t->out_fd);
		t->out_fd = -1;
	}
	return false;
}

bool trainer_reap(struct trainer *t)
{
	int status;
	pid_t r;

	if (!t->pid || t->exited)
		return t->exited;
	do
		r = waitpid(t->pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == t->pid) {
		t->exited = true;
		t->status = status;
	} else if (r < 0 && errno == ECHILD) {
		t->exited = true;
		t->status = 0;
	}
	return t->exited;
}

void trainer_signal(struct trainer *t, int sig)
{
	if (t->pid > 0)
		kill(-t->pid, sig);
}

void trainer_release(struct trainer *t)
{
	if (t->pid > 0) {
		/* Children the trainer left behind die with the group. */
		kill(-t->pid, SIGKILL);
		if (!t->exited) {
			int status;

			while (waitpid(t->pid, &status, 0) < 0 && errno == EINTR)
				;
			t->exited = true;
			t->status = status;
		}
	}
	if (t->out_fd >= 0) {
		trainer_drain(t);
		if (t->out_fd >= 0)
			close(t->out_fd);
	}
	if (t->log_fd >= 0)
		close(t->log_fd);
	t->out_fd = t->log_fd = -1;
	t->pid = 0;
}

void trainer_kill_orphan(pid_t pgid, uint64_t start_time)
{
	uint64_t now;

	if (pgid <= 1)
		return;
	now = proc_start_time(pgid);
	if (now && now == start_time) {
		log_warn("ending process group %ld left by an earlier "
			 "supervisor", (long)pgid);
		kill(-pgid, SIGKILL);
	} else if (kill(-pgid, 0) == 0 && !now) {
		/* The leader is gone but members of its group remain. */
		log_warn("ending what is left of process group %ld",
			 (long)pgid);
		kill(-pgid, SIGKILL);
	}
}

void trainer_describe_status(int status, char *out, size_t len)
{
	if (WIFEXITED(status))
		snprintf(out, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, len, "signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "status %d", status);
}
