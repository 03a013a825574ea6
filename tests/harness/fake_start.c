/* tests/harness/fake_start.c: see harness.h (fake_start). */
#include "tests/harness/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef HARNESS_SRCDIR
#error "tests/harness/meson.build defines HARNESS_SRCDIR"
#endif

#define MAX_ARGS 64
/* What a failure shows of the fake's log: enough for a traceback. */
#define LOG_TAIL 4096

/* The ports the fake wrote, one a line, once it has (it renames the file
 * into place, so it is never half written): 1 when there are n of them. */
static int read_ports(const char *port_file, unsigned *ports, unsigned n)
{
	FILE *fp = fopen(port_file, "r");
	unsigned i = 0;

	if (!fp)
		return 0;
	while (i < n && fscanf(fp, "%u", &ports[i]) == 1)
		i++;
	fclose(fp);
	return i == n;
}

static void path_in(const struct test_fake *f, const char *name, char *out,
		    size_t len)
{
	snprintf(out, len, "%.*s/%s", HARNESS_PATH, f->dir, name);
}

/* Prints the end of the fake's log, if it wrote anything. */
static void print_log_tail(const struct test_fake *f)
{
	char path[HARNESS_PATH + 8];
	size_t len;
	char *text;

	path_in(f, "log", path, sizeof(path));
	text = read_file(path, &len);
	if (text && len > 0)
		fprintf(stderr, "%s: its log%s:\n%s%s", f->script,
			len > LOG_TAIL ? " (end)" : "",
			len > LOG_TAIL ? text + len - LOG_TAIL : text,
			text[len - 1] == '\n' ? "" : "\n");
	free(text);
}

static pid_t spawn(const char *const *argv, const char *log_path)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (null < 0 || log < 0 || dup2(null, 0) < 0 ||
		    dup2(log, 1) < 0 || dup2(log, 2) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* A start that failed: what the fake said, then nothing left behind. */
static int fail_start(struct test_fake *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail_start(struct test_fake *f, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fake_start: %s ", f->script);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
	print_log_tail(f);
	fake_stop(f);
	return -1;
}

int fake_start(struct test_fake *f, const char *script,
	       const char *const *args, unsigned nports, unsigned bound_ms)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	char path[HARNESS_PATH * 2], port_file[HARNESS_PATH + 8];
	char log_path[HARNESS_PATH + 8];
	const char *argv[MAX_ARGS];
	size_t n = 0;
	int st;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	snprintf(f->script, sizeof(f->script), "%s",
		 strrchr(script, '/') ? strrchr(script, '/') + 1 : script);
	if (nports == 0 || nports > FAKE_MAX_PORTS)
		return fail_start(f, "asked for %u ports", nports);
	if (make_temp_dir(f->dir, sizeof(f->dir), "fake") < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s",
		 src && *src ? src : HARNESS_SRCDIR, script);
	path_in(f, "port", port_file, sizeof(port_file));
	path_in(f, "log", log_path, sizeof(log_path));
	argv[n++] = "python3";
	argv[n++] = path;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	for (; args && *args; args++) {
		if (n >= MAX_ARGS - 1)
			return fail_start(f, "has too many arguments");
		argv[n++] = *args;
	}
	argv[n] = NULL;
	f->pid = spawn(argv, log_path);
	if (f->pid < 0)
		return fail_start(f, "could not start: %s", strerror(errno));
	for (long long until = monotonic_ms() + bound_ms;;) {
		if (read_ports(port_file, f->ports, nports))
			return 0;
		if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
			f->pid = -1;
			return fail_start(f, "exited at start (%s %d)",
					  WIFEXITED(st) ? "status" : "signal",
					  WIFEXITED(st) ? WEXITSTATUS(st)
							: WTERMSIG(st));
		}
		if (monotonic_ms() >= until)
			return fail_start(f, "did not listen within %u s",
					  bound_ms / 1000);
		sleep_ms(50);
	}
}

void fake_stop(struct test_fake *f)
{
	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
	if (!f->dir[0])
		return;
	/* Quiet fakes say something only when it went wrong (a traceback
	 * of a request they could not serve): the test's log shows it. */
	print_log_tail(f);
	rm_rf(f->dir);
	f->dir[0] = '\0';
}
