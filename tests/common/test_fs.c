/* fs.c: atomic writes, mkdir -p and write-all, against a real file system. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/slicectl-test-fs-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	umask(022);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *in_dir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", dir, name);
	return out;
}

static void slurp(const char *path, char *out, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	n = read(fd, out, cap - 1);
	cr_assert(n >= 0);
	out[n] = '\0';
	close(fd);
}

/* The names in dir, sorted by nothing, joined by ' '. */
static void listing(char *out, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	cr_assert_not_null(d);
	out[0] = '\0';
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			snprintf(out + strlen(out), cap - strlen(out), "%s%s",
				 *out ? " " : "", de->d_name);
	closedir(d);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "stat %s", path);
	return st.st_mode;
}

TestSuite(fs, .init = setup, .fini = teardown);

Test(fs, mkdir_p_makes_every_level_and_takes_what_exists)
{
	char p[256], q[256];
	struct err e;

	err_init(&e);
	in_dir(p, sizeof(p), "a/b//c/");
	cr_assert_eq(fs_mkdir_p(p, 0750, &e), 0, "%s", e.msg);
	cr_assert(S_ISDIR(mode_of(p)));
	cr_assert_eq(mode_of(in_dir(q, sizeof(q), "a")) & 07777, 0750);
	cr_assert_eq(mode_of(in_dir(q, sizeof(q), "a/b/c")) & 07777, 0750);
	/* Again: every level exists, which is fine. */
	cr_assert_eq(fs_mkdir_p(p, 0750, &e), 0, "%s", e.msg);
	cr_assert_eq(fs_mkdir_p(dir, 0700, &e), 0, "%s", e.msg);
	cr_assert_eq(fs_mkdir_p("/", 0700, &e), 0, "%s", e.msg);
}

Test(fs, mkdir_p_names_a_file_in_the_way)
{
	char p[256], f[256], want[300];
	struct err e;
	int fd;

	err_init(&e);
	fd = open(in_dir(f, sizeof(f), "a"), O_CREAT | O_WRONLY, 0644);
	cr_assert(fd >= 0);
	close(fd);
	in_dir(p, sizeof(p), "a/b/c");
	cr_assert_eq(fs_mkdir_p(p, 0755, &e), ENOTDIR);
	cr_assert_eq(e.code, COMMON_EIO);
	snprintf(want, sizeof(want), "cannot create %s: it is not a directory",
		 f);
	cr_assert_str_eq(e.msg, want);
	/* The last level too, and with no err to fill. */
	cr_assert_eq(fs_mkdir_p(f, 0755, NULL), ENOTDIR);
}

Test(fs, mkdir_p_says_why_it_cannot)
{
	char p[600], want[700];
	struct err e;
	size_t n;

	err_init(&e);
	/* A name longer than NAME_MAX fails for root too. */
	n = (size_t)snprintf(p, sizeof(p), "%s/", dir);
	memset(p + n, 'n', 300);
	p[n + 300] = '\0';
	snprintf(want, sizeof(want), "cannot create %s: %s", p,
		 strerror(ENAMETOOLONG));
	strcat(p, "/below");
	cr_assert_eq(fs_mkdir_p(p, 0755, &e), ENAMETOOLONG);
	cr_assert_eq(e.code, COMMON_EIO);
	cr_assert_str_eq(e.msg, want);
}

Test(fs, mkdir_parents_stops_above_the_last_name)
{
	char p[256], q[256];

	in_dir(p, sizeof(p), "a/b/key");
	cr_assert_eq(fs_mkdir_parents(p, 0700, NULL), 0);
	cr_assert(S_ISDIR(mode_of(in_dir(q, sizeof(q), "a/b"))));
	cr_assert_eq(access(p, F_OK), -1);
	cr_assert_eq(fs_mkdir_parents("key", 0700, NULL), 0);
	cr_assert_eq(fs_mkdir_parents("/key", 0700, NULL), 0);
}

Test(fs, atomic_write_replaces_whole_with_mode_and_leaves_nothing)
{
	char p[256], got[64], names[256];
	struct err e;

	err_init(&e);
	in_dir(p, sizeof(p), "status");
	cr_assert_eq(fs_write_atomic(p, "old\n", 4, 0640, true, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(fs_write_atomic(p, "new\n", 4, 0640, true, &e), 0, "%s",
		     e.msg);
	slurp(p, got, sizeof(got));
	cr_assert_str_eq(got, "new\n");
	cr_assert_eq(mode_of(p) & 07777, 0640);
	listing(names, sizeof(names));
	cr_assert_str_eq(names, "status");
	/* The umask applies, as with open(2). */
	umask(077);
	cr_assert_eq(fs_write_atomic(p, "", 0, 0644, true, &e), 0, "%s", e.msg);
	cr_assert_eq(mode_of(p) & 07777, 0600);
	slurp(p, got, sizeof(got));
	cr_assert_str_eq(got, "");
}

Test(fs, atomic_create_never_replaces)
{
	char p[256], got[64], names[256], want[300];
	struct err e;

	err_init(&e);
	in_dir(p, sizeof(p), "id_ed25519");
	cr_assert_eq(fs_write_atomic(p, "first", 5, 0600, false, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(mode_of(p) & 07777, 0600);
	cr_assert_eq(fs_write_atomic(p, "second", 6, 0600, false, &e), EEXIST);
	snprintf(want, sizeof(want), "%s already exists", p);
	cr_assert_str_eq(e.msg, want);
	slurp(p, got, sizeof(got));
	cr_assert_str_eq(got, "first");
	listing(names, sizeof(names));
	cr_assert_str_eq(names, "id_ed25519");
}

Test(fs, atomic_create_race_has_one_whole_winner)
{
	char p[256], got[8192], names[256];
	enum { N = 8, LEN = 4096 };
	int wins = 0;

	in_dir(p, sizeof(p), "key");
	for (int i = 0; i < N; i++) {
		pid_t pid = fork();

		cr_assert(pid >= 0);
		if (pid == 0) {
			char data[LEN];

			memset(data, 'a' + i, sizeof(data));
			_exit(fs_write_atomic(p, data, sizeof(data), 0600,
					      false, NULL) == 0 ? 0 : 1);
		}
	}
	for (int i = 0; i < N; i++) {
		int st;

		cr_assert(wait(&st) > 0);
		cr_assert(WIFEXITED(st));
		wins += WEXITSTATUS(st) == 0;
	}
	cr_assert_eq(wins, 1);
	slurp(p, got, sizeof(got));
	cr_assert_eq(strlen(got), LEN);
	cr_assert_eq(strspn(got, (char[]){ got[0], 0 }), LEN);
	listing(names, sizeof(names));
	cr_assert_str_eq(names, "key");
}

Test(fs, atomic_write_into_a_missing_folder_fails_naming_it)
{
	char p[256], want[300];
	struct err e;

	err_init(&e);
	in_dir(p, sizeof(p), "none/file");
	cr_assert_eq(fs_write_atomic(p, "x", 1, 0644, true, &e), ENOENT);
	cr_assert_eq(e.code, COMMON_EIO);
	snprintf(want, sizeof(want), "cannot create a file next to %s: %s", p,
		 strerror(ENOENT));
	cr_assert_str_eq(e.msg, want);
}

/* A relative path writes in the current folder. */
Test(fs, atomic_write_relative)
{
	char cwd[512], got[16];

	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(fs_write_atomic("rel", "r", 1, 0644, true, NULL), 0);
	slurp("rel", got, sizeof(got));
	cr_assert_str_eq(got, "r");
	cr_assert_eq(chdir(cwd), 0);
}

/* Deeper than PATH_MAX and than the 256 levels the spool's old remover
 * took; a read-only directory and a symlink out of the tree on the way. */
Test(fs, remove_tree_takes_any_depth_and_follows_no_link)
{
	char top[256], outside[256], got[8];
	int fd, next;

	in_dir(top, sizeof(top), "tree");
	in_dir(outside, sizeof(outside), "outside");
	cr_assert_eq(fs_write_atomic(outside, "o", 1, 0644, true, NULL), 0);
	cr_assert_eq(mkdir(top, 0755), 0);
	fd = open(top, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 300; i++) {
		const char *name = "level-of-a-deep-tree";

		cr_assert_eq(mkdirat(fd, name, 0755), 0, "level %d", i);
		if (i == 10) {
			cr_assert_eq(symlinkat(outside, fd, "link"), 0);
			cr_assert_eq(mkdirat(fd, "ro", 0755), 0);
			next = openat(fd, "ro", O_RDONLY | O_DIRECTORY);
			cr_assert_geq(next, 0);
			close(openat(next, "f", O_CREAT | O_WRONLY, 0644));
			close(next);
			cr_assert_eq(fchmodat(fd, "ro", 0500, 0), 0);
		}
		next = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(next, 0);
		close(fd);
		fd = next;
	}
	close(openat(fd, "leaf", O_CREAT | O_WRONLY, 0644));
	close(fd);
	cr_assert_eq(fs_remove_tree(top), 0);
	cr_assert_eq(access(top, F_OK), -1);
	slurp(outside, got, sizeof(got));
	cr_assert_str_eq(got, "o");
}

Test(fs, remove_tree_takes_a_file_and_nothing)
{
	char path[256];

	in_dir(path, sizeof(path), "file");
	cr_assert_eq(fs_write_atomic(path, "f", 1, 0644, true, NULL), 0);
	cr_assert_eq(fs_remove_tree(path), 0);
	cr_assert_eq(access(path, F_OK), -1);
	cr_assert_eq(fs_remove_tree(path), 0, "a missing path is removed");
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void *read_slowly(void *arg)
{
	int fd = *(int *)arg;
	size_t total = 0;
	unsigned char c, want = 0;
	char block[4096];
	ssize_t n;

	while ((n = read(fd, block, sizeof(block))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return (void *)-1;
		for (ssize_t i = 0; i < n; i++) {
			c = (unsigned char)block[i];
			if (c != want)
				return (void *)-1;
			want = (unsigned char)(want + 1);
		}
		total += (size_t)n;
		usleep(50);
	}
	return (void *)total;
}

/* A pipe smaller than the data, a reader slower than the writer, and a
 * signal every millisecond without SA_RESTART: writes come back short or
 * with EINTR, and every byte still arrives once, in order. */
Test(fs, write_all_survives_short_writes_and_eintr)
{
	enum { LEN = 4 << 20 };
	unsigned char *data = malloc(LEN);
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } }, off = { 0 };
	pthread_t reader;
	sigset_t alarm_only;
	void *got;
	int fd[2];

	cr_assert_not_null(data);
	for (size_t i = 0; i < LEN; i++)
		data[i] = (unsigned char)i;
	cr_assert_eq(pipe(fd), 0);
	/* The alarm goes to the writer (this thread) only. */
	sigemptyset(&alarm_only);
	sigaddset(&alarm_only, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alarm_only, NULL);
	cr_assert_eq(pthread_create(&reader, NULL, read_slowly, &fd[0]), 0);
	pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	cr_assert_eq(fs_write_all(fd[1], data, LEN), 0);
	setitimer(ITIMER_REAL, &off, NULL);
	close(fd[1]);
	pthread_join(reader, &got);
	cr_assert_eq((size_t)got, (size_t)LEN);
	close(fd[0]);
	/* A closed reader is an errno value, not a crash. */
	cr_assert_eq(pipe(fd), 0);
	close(fd[0]);
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(fs_write_all(fd[1], "x", 1), EPIPE);
	close(fd[1]);
	free(data);
}
