/*
 * tests/harness/run.c: runs programs for tests (slicectl, ssh, sh) with
 * their output collected in full, and the file helpers tests share. Every
 * child gets stdin from /dev/null and is sent SIGTERM (SIGKILL, one
 * started as a group) if the test process dies, so a crashed test leaves
 * nothing running.
 */
#include "tests/harness/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HARNESS_SLICECTL_BIN
#error "tests/harness/meson.build defines HARNESS_SLICECTL_BIN"
#endif

extern char **environ;

struct growbuf {
	char *p;
	size_t len;
	size_t cap;
};

static int growbuf_reserve(struct growbuf *g, size_t extra)
{
	size_t cap = g->cap ? g->cap : 4096;
	char *p;

	while (cap - g->len < extra + 1) {
		if (cap > (size_t)-1 / 2)
			return -1;
		cap *= 2;
	}
	if (cap == g->cap)
		return 0;
	p = realloc(g->p, cap);
	if (!p)
		return -1;
	g->p = p;
	g->cap = cap;
	return 0;
}

static void set_cloexec(int fd)
{
	fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static int cloexec_pipe(int fds[2])
{
	if (pipe(fds) < 0)
		return -1;
	set_cloexec(fds[0]);
	set_cloexec(fds[1]);
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static size_t env_name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* environ with each "K=V" of extra replacing any K already there. Built
 * before fork because a child of a threaded process may not allocate. */
static char **env_build(const char *const *extra)
{
	size_t n = 0, m = 0, i, j, k = 0;
	char **env;

	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	env = calloc(n + m + 1, sizeof *env);
	if (!env)
		return NULL;
	for (i = 0; i < n; i++) {
		size_t len = env_name_len(environ[i]);
		int replaced = 0;

		for (j = 0; j < m && !replaced; j++)
			replaced = env_name_len(extra[j]) == len &&
				   !strncmp(extra[j], environ[i], len);
		if (!replaced)
			env[k++] = environ[i];
	}
	for (j = 0; j < m; j++)
		env[k++] = (char *)extra[j];
	env[k] = NULL;
	return env;
}

/* Finds prog in PATH unless it names a path already. */
static int resolve_program(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH");
	const char *p, *end;

	if (strchr(prog, '/')) {
		if ((size_t)snprintf(out, len, "%s", prog) >= len)
			return -1;
		return 0;
	}
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		if ((size_t)snprintf(out, len, "%.*s/%s", (int)(end - p),
				     end == p ? "." : p, prog) >= len)
			continue;
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/*
 * Forks and execs path with fds in/out/err as stdin/stdout/stderr (-1
 * keeps the test's own). A group child leads a process group of its own
 * and is killed outright if the test process dies, as a machine vanishes.
 * Returns the pid, or -1 after saying why when the fork or the exec
 * failed: the exec's errno comes back over a close-on-exec pipe, so a
 * missing binary is an error here, not a mysterious exit 127.
 */
static pid_t spawn(const char *path, const char *const *argv,
		   char *const *envp, int in, int out, int err, bool group)
{
	pid_t parent = getpid();
	int status_pipe[2];
	int child_errno = 0;
	ssize_t n;
	pid_t pid;

	if (cloexec_pipe(status_pipe) < 0) {
		fprintf(stderr, "harness: pipe: %s\n", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "harness: fork for %s: %s\n", path,
			strerror(errno));
		close(status_pipe[0]);
		close(status_pipe[1]);
		return -1;
	}
	if (pid == 0) {
		if (group)
			setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, group ? SIGKILL : SIGTERM);
		if (getppid() != parent)
			_exit(127);
		if ((in >= 0 && dup2(in, 0) < 0) ||
		    (out >= 0 && dup2(out, 1) < 0) ||
		    (err >= 0 && dup2(err, 2) < 0)) {
			child_errno = errno;
		} else {
			execve(path, (char *const *)argv, envp);
			child_errno = errno;
		}
		n = write(status_pipe[1], &child_errno, sizeof child_errno);
		(void)n;
		_exit(127);
	}
	if (group)
		setpgid(pid, pid); /* also here: no race with a kill */
	close(status_pipe[1]);
	do {
		n = read(status_pipe[0], &child_errno, sizeof child_errno);
	} while (n < 0 && errno == EINTR);
	close(status_pipe[0]);
	if (n == (ssize_t)sizeof child_errno) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		fprintf(stderr, "harness: cannot run %s: %s\n", path,
			strerror(child_errno));
		return -1;
	}
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "harness: waitpid(%d): %s\n", (int)pid,
				strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

static int open_null(void)
{
	return open("/dev/null", O_RDWR | O_CLOEXEC);
}

/* Drains both pipes together so that a child filling one of them while we
 * wait on the other can never deadlock. */
static int collect(int out_fd, int err_fd, struct growbuf *out,
		   struct growbuf *err)
{
	struct pollfd p[2] = {
		{ .fd = out_fd, .events = POLLIN },
		{ .fd = err_fd, .events = POLLIN },
	};
	struct growbuf *dst[2] = { out, err };
	int open_fds = 2;
	int i;

	while (open_fds > 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "harness: poll: %s\n", strerror(errno));
			return -1;
		}
		for (i = 0; i < 2; i++) {
			ssize_t n;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			if (growbuf_reserve(dst[i], 65536) < 0) {
				fprintf(stderr, "harness: out of memory "
					"collecting output\n");
				return -1;
			}
			n = read(p[i].fd, dst[i]->p + dst[i]->len,
				 dst[i]->cap - dst[i]->len - 1);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				p[i].fd = -1;
				open_fds--;
				continue;
			}
			dst[i]->len += (size_t)n;
			dst[i]->p[dst[i]->len] = '\0';
		}
	}
	return 0;
}

int run_program(struct run_result *r, const char *const *argv,
		const char *const *extra_env)
{
	struct growbuf out = { 0 }, err = { 0 };
	int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
	char path[HARNESS_PATH];
	int null_fd = -1;
	char **envp = NULL;
	int rc = -1;
	pid_t pid;

	memset(r, 0, sizeof *r);
	r->status = -1;
	if (resolve_program(argv[0], path, sizeof path) < 0) {
		fprintf(stderr, "harness: %s not found in PATH\n", argv[0]);
		return -1;
	}
	envp = env_build(extra_env);
	if (!envp || growbuf_reserve(&out, 0) < 0 ||
	    growbuf_reserve(&err, 0) < 0) {
		fprintf(stderr, "harness: out of memory running %s\n", path);
		goto out;
	}
	out.p[0] = err.p[0] = '\0';
	null_fd = open_null();
	if (null_fd < 0 || cloexec_pipe(out_pipe) < 0 ||
	    cloexec_pipe(err_pipe) < 0) {
		fprintf(stderr, "harness: cannot set up pipes for %s: %s\n",
			path, strerror(errno));
		goto out;
	}
	pid = spawn(path, argv, envp, null_fd, out_pipe[1], err_pipe[1],
		    false);
	if (pid < 0)
		goto out;
	close_fd(&out_pipe[1]);
	close_fd(&err_pipe[1]);
	rc = collect(out_pipe[0], err_pipe[0], &out, &err);
	r->status = wait_status(pid);
	if (rc < 0 || r->status < 0) {
		rc = -1;
		goto out;
	}
	r->out = out.p;
	r->out_len = out.len;
	r->err = err.p;
	r->err_len = err.len;
	out.p = err.p = NULL;
	rc = 0;
out:
	free(out.p);
	free(err.p);
	free(envp);
	close_fd(&null_fd);
	close_fd(&out_pipe[0]);
	close_fd(&out_pipe[1]);
	close_fd(&err_pipe[0]);
	close_fd(&err_pipe[1]);
	return rc;
}

const char *slicectl_bin(void)
{
	const char *bin = getenv("SLICECTL_BIN");

	return bin && *bin ? bin : HARNESS_SLICECTL_BIN;
}

/* argv with the slicectl binary put in front; freed by the caller. */
static const char **slicectl_argv(const char *const *argv)
{
	size_t n = 0;
	const char **v;

	while (argv && argv[n])
		n++;
	v = calloc(n + 2, sizeof *v);
	if (!v) {
		fprintf(stderr, "harness: out of memory\n");
		return NULL;
	}
	v[0] = slicectl_bin();
	if (n)
		memcpy(v + 1, argv, n * sizeof *v);
	return v;
}

int run_slicectl(struct run_result *r, const char *const *argv,
		 const char *const *extra_env)
{
	const char **v = slicectl_argv(argv);
	int rc;

	if (!v) {
		memset(r, 0, sizeof *r);
		r->status = -1;
		return -1;
	}
	rc = run_program(r, v, extra_env);
	free(v);
	return rc;
}

static int open_output(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		fprintf(stderr, "harness: cannot create %s: %s\n", path,
			strerror(errno));
	return fd;
}

pid_t spawn_slicectl(const char *const *argv, const char *out_path,
		     const char *err_path)
{
	const char **v = slicectl_argv(argv);
	int null_fd = -1, out_fd = -1, err_fd = -1;
	pid_t pid = -1;

	if (!v)
		return -1;
	null_fd = open_null();
	if (null_fd < 0) {
		fprintf(stderr, "harness: /dev/null: %s\n", strerror(errno));
		goto out;
	}
	out_fd = open_output(out_path);
	err_fd = out_fd < 0 ? -1 : open_output(err_path);
	if (err_fd >= 0)
		pid = spawn(v[0], v, environ, null_fd, out_fd, err_fd, false);
out:
	close_fd(&null_fd);
	close_fd(&out_fd);
	close_fd(&err_fd);
	free(v);
	return pid;
}

pid_t spawn_group(const char *const *argv, const char *const *extra_env,
		  const char *log_path)
{
	char path[HARNESS_PATH];
	char **envp = NULL;
	int null_fd = -1, log_fd = -1;
	pid_t pid = -1;

	if (resolve_program(argv[0], path, sizeof path) < 0) {
		fprintf(stderr, "harness: %s not found in PATH\n", argv[0]);
		return -1;
	}
	envp = env_build(extra_env);
	if (!envp) {
		fprintf(stderr, "harness: out of memory running %s\n", path);
		return -1;
	}
	null_fd = open_null();
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		      0644);
	if (null_fd < 0 || log_fd < 0)
		fprintf(stderr, "harness: cannot open %s: %s\n",
			null_fd < 0 ? "/dev/null" : log_path, strerror(errno));
	else
		pid = spawn(path, argv, envp, null_fd, log_fd, log_fd, true);
	close_fd(&null_fd);
	close_fd(&log_fd);
	free(envp);
	return pid;
}

void run_result_release(struct run_result *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof *r);
}

int sh(const char *fmt, ...)
{
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	va_list ap;
	char *cmd;
	pid_t pid;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	cmd = malloc((size_t)n + 1);
	if (!cmd) {
		fprintf(stderr, "harness: out of memory\n");
		return -1;
	}
	va_start(ap, fmt);
	vsnprintf(cmd, (size_t)n + 1, fmt, ap);
	va_end(ap);
	argv[2] = cmd;
	pid = spawn(argv[0], argv, environ, -1, -1, -1, false);
	free(cmd);
	return pid < 0 ? -1 : wait_status(pid);
}

int make_temp_dir(char *out, size_t len, const char *tag)
{
	const char *base = getenv("TMPDIR");

	if (!base || !*base)
		base = "/tmp";
	if ((size_t)snprintf(out, len, "%s/slicectl-%s-XXXXXX", base,
			     tag ? tag : "test") >= len) {
		fprintf(stderr, "harness: TMPDIR %s is too long\n", base);
		return -1;
	}
	if (!mkdtemp(out)) {
		fprintf(stderr, "harness: cannot create a directory like %s: "
			"%s\n", out, strerror(errno));
		out[0] = '\0';
		return -1;
	}
	/* As root the login user must be able to write here. */
	if (chmod(out, 0777) < 0) {
		fprintf(stderr, "harness: chmod %s: %s\n", out,
			strerror(errno));
		rmdir(out);
		out[0] = '\0';
		return -1;
	}
	return 0;
}

/* Removes the entry name of directory dirfd, recursing into directories
 * without following symbolic links; top is named in messages. */
static int remove_at(int dirfd, const char *name, const char *top)
{
	struct dirent *de;
	struct stat st;
	int rc = 0;
	DIR *d;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
			fprintf(stderr, "harness: rm -rf %s: unlink %s: %s\n",
				top, name, strerror(errno));
			return -1;
		}
		return 0;
	}
	fd = openat(dirfd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		fprintf(stderr, "harness: rm -rf %s: open %s: %s\n", top,
			name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (remove_at(fd, de->d_name, top) < 0)
			rc = -1;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		fprintf(stderr, "harness: rm -rf %s: rmdir %s: %s\n", top,
			name, strerror(errno));
		rc = -1;
	}
	return rc;
}

int rm_rf(const char *path)
{
	if (!path || !*path)
		return 0;
	return remove_at(AT_FDCWD, path, path);
}

char *read_file(const char *path, size_t *len)
{
	struct growbuf g = { 0 };
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		if (growbuf_reserve(&g, 65536) < 0)
			goto fail;
		n = read(fd, g.p + g.len, g.cap - g.len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		g.len += (size_t)n;
	}
	close(fd);
	g.p[g.len] = '\0';
	if (len)
		*len = g.len;
	return g.p;
fail:
	close(fd);
	free(g.p);
	return NULL;
}

/* memchr and memcmp over known lengths: a strstr loop would rescan the
 * rest of the haystack per match under ASan, quadratic on large outputs. */
size_t count_substr(const char *haystack, const char *needle)
{
	size_t n = 0, step, left;
	const char *p = haystack, *hit;

	if (!haystack || !needle || !*needle)
		return 0;
	step = strlen(needle);
	left = strlen(haystack);
	while (left >= step && (hit = memchr(p, needle[0], left - step + 1))) {
		left -= (size_t)(hit - p);
		p = hit;
		if (!memcmp(p, needle, step)) {
			n++;
			p += step;
			left -= step;
		} else {
			p++;
			left--;
		}
	}
	return n;
}

unsigned processes_mentioning(const char *text)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	unsigned n = 0;

	if (!d) {
		perror("harness: /proc");
		return (unsigned)-1;
	}
	while ((de = readdir(d))) {
		char path[300], buf[65536];
		ssize_t len;
		int fd;

		if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
		    atoi(de->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (!buf[i])
				buf[i] = '\n';
		buf[len] = '\0';
		if (strstr(buf, text)) {
			fprintf(stderr, "left behind: pid %s\n", de->d_name);
			n++;
		}
	}
	closedir(d);
	return n;
}

void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

long long monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wait_exit(pid_t pid, unsigned s)
{
	int st;

	for (unsigned i = 0; i < s * 50; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
		sleep_ms(20);
	}
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return -1;
}
