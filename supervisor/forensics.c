/*
 * forensics.c: see forensics.h. The order matters: /proc and py-spy look
 * at the processes as they hang; the hang signal comes after them, since
 * a process that does not catch it may die of it (only those whose
 * SigCgt says they catch it get it); the output's tail comes last, with
 * what the signal made them print. Each part has a share of the size
 * bound, the tail the rest, so the stacks the trainer printed always fit.
 */
#include "supervisor/forensics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PROCS 256
#define PROC_SHARE ((size_t)64 << 10)   /* /proc's part of the bound */
#define PYSPY_SHARE ((size_t)64 << 10)  /* py-spy's */
#define PYSPY_EACH_MS 2000              /* one dump, at most */
/* Kept for the signal: its wait and the tail. */
#define SIGNAL_RESERVE_MS 1500
/* After the signal, output is awaited this long, and counts as over
 * once it has been quiet for SIGNAL_QUIET_MS. */
#define SIGNAL_WAIT_MS 1000
#define SIGNAL_QUIET_MS 300

struct collector {
	struct buf *out;
	size_t start;        /* out->len when it began */
	size_t max;
	uint64_t deadline;   /* mono_ms */
	int nomem;
};

static void put(struct collector *c, const char *fmt, ...) ATTR_PRINTF(2, 3);

static void put(struct collector *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!c->nomem)
		c->nomem = buf_appends(c->out, line);
}

static size_t used(const struct collector *c)
{
	return c->out->len - c->start;
}

/* The first line of a small /proc file, without its newline; "" when it
 * cannot be read (errno then says why). */
static void read_line(const char *path, char *out, size_t cap)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	out[0] = '\0';
	if (fd < 0)
		return;
	n = read(fd, out, cap - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* /proc/.../stat's command, state, parent and process group. */
static bool read_stat(const char *path, char *comm, size_t cap, char *state,
		      long *ppid, long *pgrp)
{
	char text[1024];
	const char *open_paren, *close_paren;

	read_line(path, text, sizeof(text));
	open_paren = strchr(text, '(');
	close_paren = strrchr(text, ')');
	if (!open_paren || !close_paren || close_paren < open_paren ||
	    sscanf(close_paren + 1, " %c %ld %ld", state, ppid, pgrp) != 3)
		return false;
	snprintf(comm, cap, "%.*s", (int)(close_paren - open_paren - 1),
		 open_paren + 1);
	return true;
}

/* The processes of group pgid, the leader first. */
static size_t group_pids(pid_t pgid, pid_t *v, size_t cap)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	if (cap)
		v[n++] = pgid;
	while (n < cap && (de = readdir(d))) {
		char path[300], comm[64], state;
		long ppid, pgrp, pid = strtol(de->d_name, NULL, 10);

		if (pid <= 0 || pid == pgid)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		if (read_stat(path, comm, sizeof(comm), &state, &ppid, &pgrp) &&
		    pgrp == pgid)
			v[n++] = (pid_t)pid;
	}
	closedir(d);
	return n;
}

/* One task: its state and wchan, then its kernel stack. */
static void put_task(struct collector *c, pid_t pid, const char *tid)
{
	char path[300], comm[64], wchan[128], line[512], state = '?';
	long ppid, pgrp;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/task/%s/stat", (long)pid, tid);
	if (!read_stat(path, comm, sizeof(comm), &state, &ppid, &pgrp))
		snprintf(comm, sizeof(comm), "?");
	snprintf(path, sizeof(path), "/proc/%ld/task/%s/wchan", (long)pid, tid);
	read_line(path, wchan, sizeof(wchan));
	put(c, "  task %s (%s) state %c, wchan: %s\n", tid, comm, state,
	    !*wchan ? "(not readable)" : strcmp(wchan, "0") ? wchan
							   : "0 (running)");
	snprintf(path, sizeof(path), "/proc/%ld/task/%s/stack", (long)pid, tid);
	f = fopen(path, "re");
	if (!f) {
		put(c, "    kernel stack: not readable (%s)\n", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f) && used(c) < PROC_SHARE)
		put(c, "    %s", line);
	fclose(f);
}

static void put_process(struct collector *c, pid_t pid)
{
	char path[300], comm[64], cmd[512], state = '?';
	long ppid = 0, pgrp = 0;
	ssize_t n;
	DIR *d;
	struct dirent *de;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!read_stat(path, comm, sizeof(comm), &state, &ppid, &pgrp)) {
		put(c, "process %ld: gone\n", (long)pid);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : 0;
	if (fd >= 0)
		close(fd);
	cmd[n > 0 ? n : 0] = '\0';
	for (ssize_t i = 0; i + 1 < n; i++)
		if (!cmd[i])
			cmd[i] = ' ';
	put(c, "process %ld (%s), parent %ld, state %c: %s\n", (long)pid, comm,
	    ppid, state, cmd);
	snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
	d = opendir(path);
	while (d && (de = readdir(d)) && used(c) < PROC_SHARE)
		if (de->d_name[0] != '.')
			put_task(c, pid, de->d_name);
	if (d)
		closedir(d);
}

/* ---- py-spy ---- */

static bool on_path(const char *name, char *out, size_t cap)
{
	const char *p = getenv("PATH");

	while (p && *p) {
		size_t n = strcspn(p, ":");

		snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", name);
		if (!access(out, X_OK))
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

/* Runs argv (argv[0] a path) with its output into out, up to cap bytes,
 * killed at deadline; how says how it ended. */
static void run_bounded(char *const *argv, uint64_t deadline,
			struct collector *c, size_t cap, char *how,
			size_t how_cap)
{
	char chunk[4096];
	int fds[2], status = 0;
	size_t took = 0;
	bool killed = false;
	pid_t pid;

	if (pipe(fds)) {
		snprintf(how, how_cap, "not run: pipe: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null >= 0)
			dup2(null, 0);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		snprintf(how, how_cap, "not run: fork: %s", strerror(errno));
		close(fds[0]);
		return;
	}
	for (;;) {
		struct pollfd p = { fds[0], POLLIN, 0 };
		uint64_t now = mono_ms();
		ssize_t n;

		if (now >= deadline) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		if (poll(&p, 1, (int)(deadline - now)) <= 0)
			continue;
		n = read(fds[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (took < cap && !c->nomem)
			c->nomem = buf_append(c->out, chunk,
					      (size_t)n < cap - took
						      ? (size_t)n
						      : cap - took);
		took += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (took > cap)
		put(c, "\n[cut: %zu bytes more]\n", took - cap);
	if (killed)
		snprintf(how, how_cap, "killed: still running after its time");
	else
		trainer_describe_status(status, how, how_cap);
}

static void put_pyspy(struct collector *c, const pid_t *pids, size_t n)
{
	char prog[1024], pid_text[24], how[64];
	size_t from = used(c);

	put(c, "\n== py-spy dump, every process ==\n");
	if (!on_path("py-spy", prog, sizeof(prog))) {
		put(c, "skipped: py-spy is not on PATH\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char *argv[] = { prog, "dump", "--pid", pid_text, NULL };
		uint64_t now = mono_ms(), until = now + PYSPY_EACH_MS;
		size_t room = PYSPY_SHARE > used(c) - from
				      ? PYSPY_SHARE - (used(c) - from)
				      : 0;

		if (now + SIGNAL_RESERVE_MS >= c->deadline || !room) {
			put(c, "process %ld and %zu more: skipped, the %s "
			    "bound is spent\n", (long)pids[i], n - i - 1,
			    room ? "time" : "size");
			return;
		}
		if (until > c->deadline - SIGNAL_RESERVE_MS)
			until = c->deadline - SIGNAL_RESERVE_MS;
		snprintf(pid_text, sizeof(pid_text), "%ld", (long)pids[i]);
		put(c, "$ py-spy dump --pid %s\n", pid_text);
		run_bounded(argv, until, c, room, how, sizeof(how));
		put(c, "[py-spy %s]\n", how);
	}
}

/* ---- the hang signal ---- */

/* Whether process pid has a handler for sig (/proc/PID/status SigCgt). */
static bool catches(pid_t pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	f = fopen(path, "re");
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "SigCgt: %llx", &mask) == 1;
	if (f)
		fclose(f);
	return found && sig > 0 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

static void put_signal(struct collector *c, int sig, struct trainer *t)
{
	pid_t pids[MAX_PROCS];
	size_t n = group_pids(t->pid, pids, MAX_PROCS), sent = 0;
	uint64_t until = mono_ms() + SIGNAL_WAIT_MS, last;

	put(c, "\n== hang signal %d (%s) ==\n", sig, strsignal(sig));
	for (size_t i = 0; i < n; i++) {
		bool yes = catches(pids[i], sig) && !kill(pids[i], sig);

		put(c, "process %ld: %s\n", (long)pids[i],
		    yes ? "sent" : "not sent: it does not catch it");
		sent += yes;
	}
	if (!sent)
		return;
	if (until > c->deadline)
		until = c->deadline;
	last = t->last_output_ms;
	/* What it prints goes into the log, through the trainer's pipe. */
	for (uint64_t now = mono_ms(); now < until; now = mono_ms()) {
		struct pollfd p = { t->out_fd, POLLIN, 0 };

		if (t->last_output_ms > last &&
		    now >= t->last_output_ms + SIGNAL_QUIET_MS)
			break;
		poll(&p, 1, SIGNAL_QUIET_MS / 3);
		trainer_drain(t);
	}
	put(c, "(what they printed is in the output below)\n");
}

/* ---- the output ---- */

static void put_tail(struct collector *c, const struct forensics_request *r)
{
	size_t room = c->max > used(c) + 200 ? c->max - used(c) - 200 : 0;
	size_t len = 0;
	char *text = room ? fs_read_tail(r->log_path, r->log_from, room, &len)
			  : NULL;
	const char *from = text;

	put(c, "\n== the trainer's output, its last %zu bytes ==\n", len);
	if (!text) {
		put(c, "(none: %s)\n", room ? "the log cannot be read"
					    : "no room left");
		return;
	}
	/* A tail cut at the bound starts at a whole line, unless the
	 * first one is long. */
	if (len == room && memchr(text, '\n', len < 4096 ? len : 4096))
		from = strchr(text, '\n') + 1;
	if (!c->nomem)
		c->nomem = buf_append(c->out, from, len - (size_t)(from - text));
	free(text);
	if (c->out->len && c->out->data[c->out->len - 1] != '\n')
		put(c, "\n");
}

int forensics_collect(const struct forensics_request *r, struct trainer *t,
		      struct buf *out, struct err *e)
{
	uint64_t began = mono_ms();
	struct collector c = {
		.out = out, .start = out->len,
		.max = r->max_bytes ? r->max_bytes : FORENSICS_MAX_BYTES,
		.deadline = began + (r->budget_ms ? r->budget_ms
						  : FORENSICS_BUDGET_MS),
	};
	pid_t pids[MAX_PROCS];
	size_t n = t->pid > 0 ? group_pids(t->pid, pids, MAX_PROCS) : 0;

	err_init(e);
	put(&c, "%s", r->header);
	put(&c, "\n== processes of the trainer's group %ld: /proc ==\n",
	    (long)t->pid);
	for (size_t i = 0; i < n && used(&c) < PROC_SHARE; i++)
		put_process(&c, pids[i]);
	if (used(&c) >= PROC_SHARE)
		put(&c, "[cut: /proc's share of the size bound is spent]\n");
	put_pyspy(&c, pids, n);
	if (r->signal && t->pid > 0)
		put_signal(&c, r->signal, t);
	put_tail(&c, r);
	put(&c, "\n== collected in %llu ms ==\n",
	    (unsigned long long)(mono_ms() - began));
	if (c.nomem)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	if (used(&c) > c.max)
		out->len = c.start + c.max;
	return 0;
}
