/*
 * tests/checkpoint/test_pack_errors.c: pack_tree's failures: a writer
 * that fails, a missing source, bad options, what the packer cannot read,
 * and files that change under it (entries that vanish are left out). The
 * helpers are pack_check.c's.
 */
#include "tests/checkpoint/pack_check.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/pack_test.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(pack, .init = setup_tmp, .fini = teardown_tmp, .timeout = 240);

Test(pack, writer_failure_propagates)
{
	char src[PATHLEN], file[PATHLEN];
	struct pack_options o;
	struct file_sink s = { .fd = -1, .fail_after = 3u << 20 };
	struct err e;
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 8u << 20, 5);
	pack_options_init(&o);
	o.threads = 1;
	err_init(&e);
	r = pack_tree(src, &o, file_write, &s, NULL, &e);
	cr_assert_eq(r, CKPT_EWRITE, "got %d: %s", r, e.msg);
	cr_expect(strstr(e.msg, "upload to host-7 failed: disk on fire"),
		  "writer's message lost: %s", e.msg);
	cr_expect_eq(s.calls_after_failure, 0,
		     "the writer was called again after it failed");
}

Test(pack, missing_source)
{
	char src[PATHLEN];
	struct err e;
	int r;

	tmp_path(src, "no-such-dir");
	r = pack_to(src, NULL, 1, NULL, &e);
	cr_assert_eq(r, CKPT_ESOURCE);
	cr_expect(strstr(e.msg, src), "message does not name it: %s", e.msg);
	cr_expect(strstr(e.msg, "does not exist"), "%s", e.msg);
}

Test(pack, bad_options)
{
	char src[PATHLEN];
	struct pack_options o;
	struct file_sink s = { .fd = -1 };
	struct err e;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	pack_options_init(&o);
	cr_expect_eq(o.level, 3);
	cr_expect_eq(o.threads, 0);
	o.level = 0;
	cr_expect_eq(pack_tree(src, &o, file_write, &s, NULL, &e),
		     CKPT_EINVAL);
	o.level = 20;
	cr_expect_eq(pack_tree(src, &o, file_write, &s, NULL, &e),
		     CKPT_EINVAL);
	cr_expect(strstr(e.msg, "20"), "%s", e.msg);
	o.level = 3;
	cr_expect_eq(pack_tree(src, &o, NULL, NULL, NULL, &e), CKPT_EINVAL);
	cr_expect_eq(s.calls, 0);
}

/*
 * Packs src in a child that cannot read what root could: as root, the
 * child drops to nobody (65534), since root reads mode-000 files anyway.
 * Returns pack_tree's code and message.
 */
static int pack_unprivileged(const char *src, char *msg, size_t len)
{
	int fds[2];
	pid_t pid;
	int status, code = -1;
	ssize_t n;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct file_sink s = { .fd = -1 };
		struct err e;
		int r;

		close(fds[0]);
		if (geteuid() == 0 && (setgroups(0, NULL) != 0 ||
				       setgid(65534) != 0 ||
				       setuid(65534) != 0))
			_exit(99);
		err_init(&e);
		r = pack_tree(src, NULL, file_write, &s, NULL, &e);
		if (write(fds[1], &r, sizeof(r)) != sizeof(r) ||
		    write(fds[1], e.msg, sizeof(e.msg)) != sizeof(e.msg))
			_exit(98);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], &code, sizeof(code));
	if (n == sizeof(code))
		n = read(fds[0], msg, len);
	msg[len - 1] = '\0';
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "child failed (status %d)", status);
	return code;
}

Test(pack, unreadable_file_is_named)
{
	char src[PATHLEN], bad[PATHLEN], msg[1024];
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "ok", "fine\n", 0644);
	write_text(src, "secret", "no\n", 0000);
	path_join(bad, src, "secret");
	r = pack_unprivileged(src, msg, sizeof(msg));
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, msg);
	cr_expect(strstr(msg, bad), "does not name the file: %s", msg);
	cr_expect(strstr(msg, "Permission denied"), "%s", msg);
}

Test(pack, unreadable_dir_is_named)
{
	char src[PATHLEN], msg[1024];
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	make_dir(src, "closed", 0755);
	write_text(src, "closed/x", "x\n", 0644);
	{
		char p[PATHLEN];

		path_join(p, src, "closed");
		cr_assert_eq(chmod(p, 0000), 0);
	}
	r = pack_unprivileged(src, msg, sizeof(msg));
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, msg);
	cr_expect(strstr(msg, "closed"), "does not name the dir: %s", msg);
}

/* ---- files that change under the packer ---- */

/* For HOOK_DELETE_MIDDLE: the directory's entries in readdir order, which
 * is the order the tree reader visits them in. */
static char hook_names[50][NAME_MAX + 1];
static int hook_count;
static char hook_dir[PATHLEN];
static int hook_action;

enum { HOOK_SHRINK, HOOK_GROW, HOOK_REWRITE, HOOK_DELETE_MIDDLE };

static void change_file(const char *path)
{
	static const char more[] = "more";
	int fd;

	switch (hook_action) {
	case HOOK_SHRINK:
		cr_assert_eq(truncate(path, 10), 0);
		break;
	case HOOK_GROW:
		fd = open(path, O_WRONLY | O_APPEND);
		cr_assert(fd >= 0);
		cr_assert_eq(write(fd, more, 4), 4);
		close(fd);
		break;
	case HOOK_REWRITE: {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, 0 } };

		/* Same size, new bytes: only the mtime tells. */
		fd = open(path, O_WRONLY);
		cr_assert(fd >= 0);
		cr_assert_eq(pwrite(fd, more, 4, 0), 4);
		clock_gettime(CLOCK_REALTIME, &ts[1]);
		ts[1].tv_sec += 5;
		cr_assert_eq(futimens(fd, ts), 0);
		close(fd);
		break;
	}
	case HOOK_DELETE_MIDDLE:
		/* Called for the first entry; all but the last go. */
		for (int i = 1; i < hook_count - 1; i++) {
			char other[PATHLEN];

			path_join(other, hook_dir, hook_names[i]);
			cr_assert_eq(unlink(other), 0);
		}
		pack_test_before_data = NULL;
		break;
	}
}

static void pack_changing(int action, const char *expect)
{
	char src[PATHLEN], file[PATHLEN];
	struct err e;
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "growing.log");
	write_random(file, (2u << 20) + 5, 9);
	hook_action = action;
	pack_test_before_data = change_file;
	r = pack_to(src, NULL, 1, NULL, &e);
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, e.msg);
	cr_expect(strstr(e.msg, file), "does not name the file: %s", e.msg);
	cr_expect(strstr(e.msg, expect), "%s", e.msg);
}

Test(pack, file_that_shrinks_fails)
{
	pack_changing(HOOK_SHRINK, "changed while");
}

Test(pack, file_that_grows_fails)
{
	pack_changing(HOOK_GROW, "changed while");
}

Test(pack, file_rewritten_in_place_fails)
{
	pack_changing(HOOK_REWRITE, "changed while");
}

Test(pack, entries_that_vanish_are_left_out)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];
	struct pack_stats st;
	struct dirent *de;
	DIR *d;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	for (int i = 0; i < 50; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%02d", i);
		write_text(src, name, "data\n", 0644);
	}
	hook_count = 0;
	d = opendir(src);
	cr_assert(d);
	while ((de = readdir(d)))
		if (de->d_name[0] == 'f')
			snprintf(hook_names[hook_count++], sizeof(hook_names[0]),
				 "%s", de->d_name);
	closedir(d);
	cr_assert_eq(hook_count, 50);
	/*
	 * The tree reader has listed the directory when the first file is
	 * read; the entries after it vanish before it looks at them, but for
	 * the last. (With the last gone too, libarchive 3.6.2 leaks its note
	 * of the vanished names, which AddressSanitizer would report.) The
	 * archive must be the tree as it is afterwards, not a broken one.
	 */
	snprintf(hook_dir, sizeof(hook_dir), "%s", src);
	hook_action = HOOK_DELETE_MIDDLE;
	pack_test_before_data = change_file;
	tmp_path(arc, "a.tar.zst");
	tmp_path(out, "out");
	pack_ok(src, arc, 1, &st);
	cr_expect_eq(st.files, 2, "files %llu", (unsigned long long)st.files);
	free(unpack(arc, out));
	compare_trees(src, out);
}
