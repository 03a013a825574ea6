/*
 * slurm_exec.c: runs one of Slurm's commands and keeps what it says. Its
 * standard input, output and error are pipes served by one poll loop, so
 * neither side can block the other; a command that outlives the timeout
 * (a controller that does not answer: Slurm's own retries take minutes)
 * is killed.
 */
#include "launcher/job.h"
#include "launcher/target/slurm/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLURM_EXEC_TIMEOUT_MS 60000u

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
}

static pid_t start(const char *const *argv, int in[2], int out[2],
		   int err_fd[2])
{
	pid_t pid = fork();

	if (pid)
		return pid;
	dup2(in[0], 0);
	dup2(out[1], 1);
	dup2(err_fd[1], 2);
	close_pair(in);
	close_pair(out);
	close_pair(err_fd);
	execvp(argv[0], (char *const *)argv);
	_exit(errno == ENOENT ? 127 : 126);
}

/* Feeds input and drains both outputs until the command closes them or
 * the deadline passes (false). Closes all three. */
static bool pump(int in_fd, const char *input, int out_fd, int err_fd,
		 struct buf *out, struct buf *errs, uint64_t deadline)
{
	size_t off = 0, left = input ? strlen(input) : 0;
	struct pollfd p[3] = { { out_fd, POLLIN, 0 }, { err_fd, POLLIN, 0 },
			       { in_fd, POLLOUT, 0 } };
	char chunk[4096];
	bool ok = false;

	if (!left) {
		close(in_fd);
		p[2].fd = -1;
	}
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		uint64_t now = mono_ms();
		int ready;

		if (now >= deadline)
			break;
		ready = poll(p, 3, (int)(deadline - now));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0)
			break;
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			n = read(p[i].fd, chunk, sizeof(chunk));
			if (n > 0 && buf_append(i ? errs : out, chunk,
						(size_t)n))
				goto out;
			if (n == 0 || (n < 0 && errno != EINTR)) {
				close(p[i].fd);
				p[i].fd = -1;
			}
		}
		if (p[2].fd >= 0 && p[2].revents) {
			ssize_t n = write(in_fd, input + off, left);

			if (n > 0) {
				off += (size_t)n;
				left -= (size_t)n;
			}
			if (!left || (n < 0 && errno != EINTR)) {
				close(in_fd);
				p[2].fd = -1;
			}
		}
	}
	ok = true;
out:
	for (int i = 0; i < 3; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	return ok && p[0].fd < 0 && p[1].fd < 0;
}

/* The first line of what the command said on standard error. */
static const char *first_line(struct buf *errs)
{
	char *nl;

	if (!errs->data || !*errs->data)
		return "(nothing on standard error)";
	nl = strchr(errs->data, '\n');
	if (nl)
		*nl = '\0';
	return errs->data;
}

/* Slurm's commands name themselves ("sbatch: error: ..."). */
static int failed(const char *cmd, const char *line, struct err *e)
{
	bool named = !strncmp(line, cmd, strlen(cmd));

	return err_set(e, COMMON_EIO, "%s%s%s", named ? "" : cmd,
		       named ? "" : ": ", line);
}

int slurm_exec(const char *cluster, const char *const *args, const char *input,
	       struct buf *out, struct err *e)
{
	const char *argv[SLURM_EXEC_MAX_ARGS + 3];
	unsigned timeout_ms = job_env_ms("SLICECTL_SLURM_TIMEOUT_MS",
					 SLURM_EXEC_TIMEOUT_MS);
	int in[2] = { -1, -1 }, o[2] = { -1, -1 }, r[2] = { -1, -1 };
	struct buf errs;
	bool ended;
	int status = 0, rc = 0;
	size_t n = 0;
	pid_t pid;

	argv[n++] = args[0];
	if (cluster) {
		argv[n++] = "-M";
		argv[n++] = cluster;
	}
	for (size_t i = 1; args[i] && i < SLURM_EXEC_MAX_ARGS; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (pipe(in) || pipe(o) || pipe(r)) {
		rc = err_errno(e, COMMON_EIO, errno, "pipe");
		close_pair(in);
		close_pair(o);
		close_pair(r);
		return rc;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(in[i], F_SETFD, FD_CLOEXEC);
		fcntl(o[i], F_SETFD, FD_CLOEXEC);
		fcntl(r[i], F_SETFD, FD_CLOEXEC);
	}
	pid = start(argv, in, o, r);
	close(in[0]);
	close(o[1]);
	close(r[1]);
	if (pid < 0) {
		rc = err_errno(e, COMMON_EIO, errno, "starting %s", argv[0]);
		close(in[1]);
		close(o[0]);
		close(r[0]);
		return rc;
	}
	buf_init(&errs);
	ended = pump(in[1], input, o[0], r[0], out, &errs,
		     mono_ms() + timeout_ms);
	if (!ended)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!ended)
		rc = err_set(e, COMMON_EIO,
			     "%s did not answer within %.0f s: is the Slurm "
			     "controller up and reachable (scontrol ping)?",
			     argv[0], timeout_ms / 1000.0);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
		 !errs.len)
		rc = err_set(e, COMMON_EUSAGE,
			     "%s is not installed here (or not on PATH): "
			     "slicectl talks to Slurm through its commands",
			     argv[0]);
	else if (!WIFEXITED(status) || WEXITSTATUS(status))
		rc = failed(argv[0], first_line(&errs), e);
	buf_release(&errs);
	return rc;
}

int slurm_job_command(const char *cluster, const char *tool, const char *verb,
		      const char *job_id, struct err *e)
{
	const char *argv[] = { tool, verb ? verb : job_id,
			       verb ? job_id : NULL, NULL };
	struct buf out;
	int rc;

	buf_init(&out);
	rc = slurm_exec(cluster, argv, NULL, &out, e);
	buf_release(&out);
	return rc;
}
