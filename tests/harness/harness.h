/*
 * tests/harness: real parts for tests. An OpenSSH sshd on loopback serving
 * any number of worker addresses (127.0.0.x), and helpers to run the
 * slicectl binary and collect what it printed.
 *
 * As root, the first sshd_start() moves the calling test process into a
 * private network namespace (only loopback inside), where sshd listens on
 * every address of that namespace, and logins use a dedicated user
 * "slicectltest" whose shell is /bin/sh. Otherwise sshd runs as the current
 * user and accepts logins only from 127.0.0.0/8.
 */
#ifndef SLICECTL_TESTS_HARNESS_H
#define SLICECTL_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HARNESS_PATH 512

struct sshd_options {
	const char *extra_config; /* appended to sshd_config, may be NULL */
	const char *user_key_type; /* ssh-keygen -t value; default "ed25519" */
};

struct test_sshd {
	pid_t pid;
	unsigned port;
	char user[64];
	char dir[HARNESS_PATH];         /* private temp dir, removed by stop */
	char key[HARNESS_PATH];         /* authorized private user key */
	char known_hosts[HARNESS_PATH]; /* empty file, for tests to fill */
	char host_pub[HARNESS_PATH];    /* sshd's ed25519 host public key */
	char shared[HARNESS_PATH];      /* dir writable by the login user */
};

/* Starts sshd (options may be NULL) and returns once it sends its banner;
 * returns 0 or -1 after printing why (with sshd's log) to stderr. */
int sshd_start(struct test_sshd *s, const struct sshd_options *o);
/* Kills sshd by pid, waits for it, removes the directory. */
void sshd_stop(struct test_sshd *s);

/* Writes (replacing path) known_hosts lines "[127.0.0.N]:port KEY" for N in
 * first..first+count-1 (N may exceed 255: addresses continue into
 * 127.0.1.x and so on). */
int sshd_write_known_hosts(const struct test_sshd *s, const char *path,
			   unsigned first, unsigned count);
/* Writes a --hosts file with count lines "USER@127.0.0.N:PORT". */
int sshd_write_hosts(const struct test_sshd *s, const char *path,
		     unsigned first, unsigned count);
/* The Nth loopback address as text, matching the two functions above:
 * 1 is 127.0.0.1, 254 is 127.0.0.254, 255 is 127.0.1.1 (.0 and .255 are
 * skipped). n == 0 gives "". */
void loopback_addr(unsigned n, char *out, size_t len);

struct run_result {
	int status;     /* exit code, or 128 + signal */
	char *out;      /* NUL-terminated stdout */
	size_t out_len;
	char *err;      /* NUL-terminated stderr */
	size_t err_len;
};

/* Runs $SLICECTL_BIN with argv (NULL-terminated, without argv[0]) and an
 * optional environment addition list ("K=V", NULL-terminated). Fails the
 * test run (returns -1) only if it cannot be started. */
int run_slicectl(struct run_result *r, const char *const *argv,
		 const char *const *extra_env);
/* Like run_slicectl for any program: argv[0] is a path, or a name looked
 * up in PATH. Both outputs are collected in full, however large. */
int run_program(struct run_result *r, const char *const *argv,
		const char *const *extra_env);
/* $SLICECTL_BIN, or BUILDDIR/launcher/slicectl of the build that compiled
 * the harness when the test runs outside `meson test`. */
const char *slicectl_bin(void);
/* Starts it in the background; returns the pid (or -1 after printing
 * why), with its stdout and stderr going to files out_path and err_path.
 * The caller waits for it; it gets SIGTERM if the test process dies. */
pid_t spawn_slicectl(const char *const *argv, const char *out_path,
		     const char *err_path);
/* Starts argv (argv[0] a path, or a name looked up in PATH) as a machine
 * of its own would run it: the leader of a new process group, stdin from
 * /dev/null, stdout and stderr appended to log_path, extra_env ("K=V",
 * NULL-terminated, may be NULL) added to the test's environment, and
 * SIGKILL if the test process dies. Returns the pid, or -1 after printing
 * why; the caller kills the group by its pid and waits. */
pid_t spawn_group(const char *const *argv, const char *const *extra_env,
		  const char *log_path);
void run_result_release(struct run_result *r);

/* A directory $TMPDIR/slicectl-TAG-XXXXXX (/tmp without TMPDIR), mode
 * 0777 so that the login user can write into it; the test removes it with
 * rm_rf. Returns 0 or -1 after printing why. */
int make_temp_dir(char *out, size_t len, const char *tag);
/* Removes path and everything below it without following symbolic links;
 * a missing path is success. Returns 0 or -1 after printing why. */
int rm_rf(const char *path);
/* Runs "/bin/sh -c cmd" with the test's stdio; returns its exit status,
 * 128 + signal, or -1 if it could not run. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reads a whole file (NUL-terminated); NULL if it cannot. */
char *read_file(const char *path, size_t *len);
/* Processes (other than this one) whose environment mentions text, each
 * named on stderr as "left behind"; (unsigned)-1 when /proc cannot be
 * read. For tests that must leave nothing running. */
unsigned processes_mentioning(const char *text);
/* procs.c: whether /proc/PID/FILE (cmdline, environ: NUL-separated
 * entries read as lines) holds a, and b when not NULL. */
bool process_has(pid_t pid, const char *file, const char *a, const char *b);
/* Processes whose command line holds cmd_a (and cmd_b) and, when env_a
 * is not NULL, whose environment holds env_a (and env_b); *first (may be
 * NULL) gets one of them, 0 none. */
unsigned processes_with(const char *cmd_a, const char *cmd_b,
			const char *env_a, const char *env_b, pid_t *first);
/* toy_events.c: events of tests/supervisor/toy_trainer.py in the file its
 * TOY_EVENTS names, matching process (or -1), generation (or -1) and
 * event; *last_step (may be NULL) gets the last match's step. */
unsigned toy_events(const char *path, int process, long long generation,
		    const char *what, long long *last_step);
/* fake_start.c: the one way tests start a Python fake (tests/fakes/, or
 * another script that takes --port-file and writes its ports there, one
 * a line, once it listens). */
#define FAKE_MAX_PORTS 4
struct test_fake {
	pid_t pid;
	unsigned ports[FAKE_MAX_PORTS]; /* as the fake wrote them */
	char script[64];                /* its file name, for messages */
	char dir[HARNESS_PATH];         /* port file and log; removed by stop */
};
/* Runs "python3 SRC/script --port-file DIR/port args..." (script relative
 * to the source tree: $SLICECTL_SRCDIR, else the tree the harness was
 * built from; args NULL-terminated, may be NULL) with stdout and stderr
 * going to DIR/log and SIGTERM if the test process dies, and returns once
 * it wrote nports ports: 0, or -1 after printing why and the end of its
 * log, with nothing left running. bound_ms bounds the start on a loaded
 * machine; a fake that exits is seen at once. */
int fake_start(struct test_fake *f, const char *script,
	       const char *const *args, unsigned nports, unsigned bound_ms);
/* SIGTERM by pid, waits for it, prints the end of its log if it wrote
 * anything, removes the directory. Safe to call twice. */
void fake_stop(struct test_fake *f);

/* Sleeps ms milliseconds, through signals. */
void sleep_ms(unsigned ms);
/* Milliseconds on the monotonic clock, for deadlines. */
long long monotonic_ms(void);
/* For Criterion tests: text holds needle, or the test fails showing both. */
#define ASSERT_HAS(text, needle)                                               \
	cr_assert(strstr((text), (needle)), "expected '%s' in:\n%s", (needle), \
		  (text))
/* Waits up to s seconds for the child pid; its exit status (128 + N for
 * signal N), or -1 when it was still running (it is then sent SIGTERM
 * and reaped). */
int wait_exit(pid_t pid, unsigned s);
/* Counts non-overlapping occurrences of needle in haystack. */
size_t count_substr(const char *haystack, const char *needle);

#endif
