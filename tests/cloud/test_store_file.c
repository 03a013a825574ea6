/*
 * tests/cloud/test_store_file.c: the store facade over file:// URLs, held
 * to the semantics cloud.h promises for gs:// too: atomic writes,
 * create-only and compare-and-swap across processes, generations,
 * CRC32C checked on read, GCS-style listing, full disks, and URL and
 * name checks.
 */
#include "cloud/cloud.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATHLEN 4096

static char root[PATHLEN];
static char url[PATHLEN + 16];

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/slicectl-store-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(root));
	snprintf(url, sizeof(url), "file://%s/bucket", root);
}

static void teardown(void)
{
	char cmd[PATHLEN + 32];

	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		cr_expect_eq(system(cmd), 0);
	}
}

TestSuite(store_file, .init = setup, .fini = teardown, .timeout = 120);

static struct store *open_ok(void)
{
	struct store *s;
	struct err e;
	int r = store_open(&s, url, &e);

	cr_assert_eq(r, 0, "store_open(%s): %s", url, e.msg);
	return s;
}

static void put_ok(struct store *s, const char *name, const char *text,
		   int64_t if_gen, struct store_object *o)
{
	struct err e;
	int r = store_put(s, name, text, strlen(text), if_gen, o, &e);

	cr_assert_eq(r, 0, "put %s: %d %s", name, r, e.msg);
}

static char *read_ok(struct store *s, const char *name)
{
	char *data;
	size_t len;
	struct err e;
	int r = store_read(s, name, 1 << 20, &data, &len, NULL, &e);

	cr_assert_eq(r, 0, "read %s: %d %s", name, r, e.msg);
	cr_assert_eq(strlen(data), len);
	return data;
}

static size_t count_tmp_files(void)
{
	char path[PATHLEN + 32];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/bucket/.slicectl-tmp", root);
	d = opendir(path);
	cr_assert(d, "%s", path);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "up-", 3))
			n++;
	closedir(d);
	return n;
}

Test(store_file, bad_urls)
{
	static const char *const bad[] = {
		"", "gs://", "gs:///prefix", "gs://UPPER/x", "gs://ab",
		"gs://bucket/a//b", "gs://bucket/../x", "http://host/x",
		"https://storage.googleapis.com/b", "s3://b/x", "file:rel",
		"file:/abs", "file://relative/dir", "relative/dir", "/abs/dir",
	};
	struct store *s;
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = store_open(&s, bad[i], &e);

		cr_expect_eq(r, CLOUD_EURL, "\"%s\" gave %d", bad[i], r);
		cr_expect(s == NULL);
		cr_expect(e.msg[0], "\"%s\": no message", bad[i]);
	}
	cr_assert_eq(store_open(&s, "gs://", &e), CLOUD_EURL);
	cr_expect(strstr(e.msg, "bucket"), "%s", e.msg);
	cr_assert_eq(store_open(&s, "file://relative/dir", &e), CLOUD_EURL);
	cr_expect(strstr(e.msg, "absolute"), "%s", e.msg);
	cr_assert_eq(store_open(&s, "http://host/x", &e), CLOUD_EURL);
	cr_expect(strstr(e.msg, "gs://"), "%s", e.msg);
}

Test(store_file, url_forms_and_names)
{
	char u2[PATHLEN + 32];
	struct store *s = open_ok();
	struct store *s2;
	struct err e;
	char *text;

	{
		char want[PATHLEN + 64];

		snprintf(want, sizeof(want), "%s/a/b.json", url);
		cr_expect_str_eq(store_url(s, "a/b.json"), want);
	}
	put_ok(s, "a/b.json", "{}", STORE_ANY_GENERATION, NULL);
	/* Trailing slashes and "localhost" name the same folder. */
	snprintf(u2, sizeof(u2), "file://localhost%s/bucket//", root);
	cr_assert_eq(store_open(&s2, u2, &e), 0, "%s", e.msg);
	text = read_ok(s2, "a/b.json");
	cr_expect_str_eq(text, "{}");
	free(text);
	store_close(s2);

	static const char *const bad_names[] = {
		"", "/abs", "a//b", "../x", "a/../b", "./x", "a/", "a/.",
		"line\nbreak", ".slicectl-tmp/lock", ".slicectl-tmp",
	};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]);
	     i++) {
		int r = store_put(s, bad_names[i], "x", 1, STORE_ANY_GENERATION,
				  NULL, &e);

		cr_expect_eq(r, CLOUD_EINVAL, "name \"%s\" gave %d",
			     bad_names[i], r);
	}
	/* A name cannot be an object and a folder at once on a disk. */
	put_ok(s, "obj", "1", STORE_ANY_GENERATION, NULL);
	cr_expect_eq(store_put(s, "obj/child", "2", 1, STORE_ANY_GENERATION,
			       NULL, &e), CLOUD_EINVAL);
	cr_expect_eq(store_put(s, "a", "2", 1, STORE_ANY_GENERATION, NULL,
			       &e), CLOUD_EINVAL);
	cr_expect(strstr(e.msg, "folder"), "%s", e.msg);
	store_close(s);
}

Test(store_file, put_read_stat_generations)
{
	struct store *s = open_ok();
	struct store_object a, b, st;
	struct err e;
	char *text;
	bool yes;

	put_ok(s, "dir/obj.txt", "hello world", STORE_CREATE_ONLY, &a);
	cr_expect_str_eq(a.name, "dir/obj.txt");
	cr_expect_eq(a.size, 11);
	cr_expect_eq(a.crc32c, 0xc99465aa);
	cr_expect_gt(a.generation, 0);
	cr_expect_eq(strlen(a.updated), 24, "%s", a.updated);
	cr_expect_eq(a.updated[10], 'T');
	cr_expect_eq(a.updated[23], 'Z');

	cr_assert_eq(store_stat(s, "dir/obj.txt", &st, &e), 0, "%s", e.msg);
	cr_expect_eq(st.generation, a.generation);
	cr_expect_eq(st.crc32c, a.crc32c);
	cr_expect_eq(st.size, 11);
	store_object_release(&st);

	/* Every write changes the generation, even of the same bytes. */
	put_ok(s, "dir/obj.txt", "hello world", STORE_ANY_GENERATION, &b);
	cr_expect_gt(b.generation, a.generation);
	text = read_ok(s, "dir/obj.txt");
	cr_expect_str_eq(text, "hello world");
	free(text);

	cr_expect_eq(store_stat(s, "dir/none", &st, &e), CLOUD_ENOTFOUND);
	cr_expect_eq(store_stat(s, "dir", &st, &e), CLOUD_ENOTFOUND);
	cr_assert_eq(store_exists(s, "dir/none", &yes, &e), 0, "%s", e.msg);
	cr_expect(!yes);
	cr_expect_str_eq(e.msg, "");
	cr_assert_eq(store_exists(s, "dir/obj.txt", &yes, &e), 0, "%s", e.msg);
	cr_expect(yes);

	/* Empty objects exist. */
	put_ok(s, "empty", "", STORE_CREATE_ONLY, NULL);
	cr_assert_eq(store_exists(s, "empty", &yes, &e), 0, "%s", e.msg);
	cr_expect(yes);
	text = read_ok(s, "empty");
	cr_expect_str_eq(text, "");
	free(text);

	store_object_release(&a);
	store_object_release(&b);
	store_close(s);
}

Test(store_file, preconditions)
{
	struct store *s = open_ok();
	struct store_object a, b;
	struct err e;

	put_ok(s, "control.json", "{\"generation\":1}", STORE_CREATE_ONLY,
	       &a);
	cr_expect_eq(store_put(s, "control.json", "x", 1, STORE_CREATE_ONLY,
			       NULL, &e), CLOUD_EPRECONDITION);
	cr_expect(strstr(e.msg, "already exists"), "%s", e.msg);
	cr_expect_eq(store_put(s, "control.json", "x", 1, a.generation + 1,
			       NULL, &e), CLOUD_EPRECONDITION);
	put_ok(s, "control.json", "{\"generation\":2}", a.generation, &b);
	/* The old generation no longer matches. */
	cr_expect_eq(store_put(s, "control.json", "x", 1, a.generation, NULL,
			       &e), CLOUD_EPRECONDITION);
	cr_expect_eq(store_put(s, "missing", "x", 1, 12345, NULL, &e),
		     CLOUD_EPRECONDITION);
	cr_expect_eq(store_delete(s, "control.json", a.generation, &e),
		     CLOUD_EPRECONDITION);
	cr_expect_eq(store_delete(s, "control.json", b.generation, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(store_delete(s, "control.json", STORE_ANY_GENERATION,
				  &e), CLOUD_ENOTFOUND);
	cr_expect_eq(store_put(s, "x", "x", 1, -7, NULL, &e), CLOUD_EINVAL);
	store_object_release(&a);
	store_object_release(&b);
	store_close(s);
}

static int collect(void *ud, const void *data, size_t len, struct err *e)
{
	(void)e;
	return buf_append(ud, data, len) ? CLOUD_ENOMEM : 0;
}

Test(store_file, uploads_are_invisible_until_finished)
{
	struct store *s = open_ok();
	struct store_upload *u;
	struct store_object o, st;
	struct buf got;
	struct err e;
	char block[4096];
	uint32_t crc = 0;

	cr_assert_eq(store_upload_begin(s, "big/part.bin", STORE_CREATE_ONLY,
					&u, &e), 0, "%s", e.msg);
	for (int i = 0; i < 1000; i++) {
		memset(block, 'a' + i % 26, sizeof(block));
		crc = crc32c_update(crc, block, sizeof(block));
		cr_assert_eq(store_upload_write(u, block, sizeof(block), &e),
			     0, "%s", e.msg);
		if (i == 500)
			cr_expect_eq(store_stat(s, "big/part.bin", &st, &e),
				     CLOUD_ENOTFOUND);
	}
	cr_assert_eq(store_upload_finish(u, &o, &e), 0, "%s", e.msg);
	cr_expect_eq(o.size, 1000 * sizeof(block));
	cr_expect_eq(o.crc32c, crc);
	cr_expect_eq(count_tmp_files(), 0);

	buf_init(&got);
	cr_assert_eq(store_get(s, "big/part.bin", o.generation, collect, &got,
			       NULL, &e), 0, "%s", e.msg);
	cr_expect_eq(got.len, o.size);
	cr_expect_eq(crc32c_update(0, got.data, got.len), crc);
	buf_release(&got);

	/* Aborted: nothing anywhere. */
	cr_assert_eq(store_upload_begin(s, "aborted", STORE_ANY_GENERATION,
					&u, &e), 0);
	cr_assert_eq(store_upload_write(u, "xyz", 3, &e), 0);
	cr_expect_eq(count_tmp_files(), 1);
	store_upload_abort(u);
	cr_expect_eq(count_tmp_files(), 0);
	cr_expect_eq(store_stat(s, "aborted", &st, &e), CLOUD_ENOTFOUND);

	/* A failed precondition at finish stores nothing either. */
	cr_assert_eq(store_upload_begin(s, "big/part.bin", STORE_CREATE_ONLY,
					&u, &e), 0);
	cr_assert_eq(store_upload_write(u, "new", 3, &e), 0);
	cr_expect_eq(store_upload_finish(u, NULL, &e), CLOUD_EPRECONDITION);
	cr_expect_eq(count_tmp_files(), 0);
	cr_assert_eq(store_stat(s, "big/part.bin", &st, &e), 0);
	cr_expect_eq(st.generation, o.generation);
	store_object_release(&st);
	store_object_release(&o);
	store_close(s);
}

Test(store_file, get_is_pinned_and_checked)
{
	struct store *s = open_ok();
	struct store_object a, b;
	struct buf got;
	struct err e;
	char path[PATHLEN + 64];
	int fd;

	put_ok(s, "obj", "version one", STORE_ANY_GENERATION, &a);
	put_ok(s, "obj", "version two", STORE_ANY_GENERATION, &b);
	buf_init(&got);
	cr_expect_eq(store_get(s, "obj", a.generation, collect, &got, NULL,
			       &e), CLOUD_ENOTFOUND);
	cr_expect_eq(store_get(s, "obj", 0, collect, &got, NULL, &e), 0);
	cr_expect_str_eq(got.data, "version two");
	buf_reset(&got);

	/* A flipped byte on disk is caught by the CRC32C. */
	snprintf(path, sizeof(path), "%s/bucket/obj", root);
	fd = open(path, O_WRONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, "V", 1, 0), 1);
	close(fd);
	cr_expect_eq(store_get(s, "obj", b.generation, collect, &got, NULL,
			       &e), CLOUD_ECORRUPT);
	cr_expect(strstr(e.msg, "corrupt"), "%s", e.msg);
	/* So is a truncated one. */
	cr_assert_eq(truncate(path, 3), 0);
	cr_expect_eq(store_get(s, "obj", 0, collect, &got, NULL, &e),
		     CLOUD_ECORRUPT);
	buf_release(&got);
	store_object_release(&a);
	store_object_release(&b);
	store_close(s);
}

static int failing_sink(void *ud, const void *data, size_t len,
			struct err *e)
{
	int *code = ud;

	(void)data;
	(void)len;
	return err_set(e, *code, "the sink says no");
}

Test(store_file, sink_errors_and_read_limits)
{
	struct store *s = open_ok();
	struct err e;
	char *data;
	size_t len;
	int code = 42;

	put_ok(s, "obj", "0123456789", STORE_ANY_GENERATION, NULL);
	cr_expect_eq(store_get(s, "obj", 0, failing_sink, &code, NULL, &e),
		     CLOUD_EABORTED);
	cr_expect_str_eq(e.msg, "the sink says no");
	code = CLOUD_ENOSPACE;
	cr_expect_eq(store_get(s, "obj", 0, failing_sink, &code, NULL, &e),
		     CLOUD_ENOSPACE);
	cr_expect_eq(store_read(s, "obj", 5, &data, &len, NULL, &e),
		     CLOUD_EINVAL);
	cr_expect(data == NULL);
	cr_expect(strstr(e.msg, "larger"), "%s", e.msg);
	cr_expect_eq(store_read(s, "nope", 5, &data, &len, NULL, &e),
		     CLOUD_ENOTFOUND);
	store_close(s);
}

/* Files put into the folder by other means are objects too. */
Test(store_file, foreign_files)
{
	struct store *s = open_ok();
	struct store_object st;
	struct err e;
	char path[PATHLEN + 64];
	FILE *f;
	char *text;

	/* Opened before its folder exists: the store sees it once made. */
	snprintf(path, sizeof(path), "%s/bucket", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/bucket/copied.txt", root);
	f = fopen(path, "w");
	cr_assert(f);
	fputs("hello world", f);
	fclose(f);
	cr_assert_eq(store_stat(s, "copied.txt", &st, &e), 0, "%s", e.msg);
	cr_expect_eq(st.crc32c, 0xc99465aa);
	cr_expect_gt(st.generation, 0);
	text = read_ok(s, "copied.txt");
	cr_expect_str_eq(text, "hello world");
	free(text);
	cr_expect_eq(store_put(s, "copied.txt", "x", 1, st.generation, NULL,
			       &e), 0, "%s", e.msg);
	store_object_release(&st);
	store_close(s);
}

struct listing {
	struct buf text;
	int stop_after;
	int seen;
};

static int list_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	struct listing *l = ud;

	buf_appendf(&l->text, "%s%s;", is_prefix ? "P:" : "", o->name);
	if (!is_prefix)
		cr_expect_gt(o->generation, 0);
	if (l->stop_after && ++l->seen == l->stop_after)
		return 77;
	return 0;
}

static void expect_list(struct store *s, const char *prefix,
			const char *delim, const char *want)
{
	struct listing l = { .stop_after = 0 };
	struct err e;

	buf_init(&l.text);
	cr_assert_eq(store_list(s, prefix, delim, list_cb, &l, &e), 0, "%s",
		     e.msg);
	cr_expect_str_eq(l.text.data ? l.text.data : "", want,
			 "list(\"%s\", \"%s\")", prefix, delim ? delim : "");
	buf_release(&l.text);
}

Test(store_file, listing_as_gcs_does)
{
	struct store *s = open_ok();
	struct store_upload *u;
	struct listing l = { .stop_after = 2 };
	struct err e;

	put_ok(s, "a.txt", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "a/b", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "a/c/d", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "a-b", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "b", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "ckpt/step-01/COMMIT", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "ckpt/step-01/p.tar.zst", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "ckpt/step-02/p.tar.zst", "1", STORE_ANY_GENERATION, NULL);
	put_ok(s, "gone/x", "1", STORE_ANY_GENERATION, NULL);
	cr_assert_eq(store_delete(s, "gone/x", STORE_ANY_GENERATION, &e), 0);
	/* An upload in progress is never listed. */
	cr_assert_eq(store_upload_begin(s, "c", STORE_ANY_GENERATION, &u, &e),
		     0);
	cr_assert_eq(store_upload_write(u, "x", 1, &e), 0);

	expect_list(s, "", NULL,
		    "a-b;a.txt;a/b;a/c/d;b;ckpt/step-01/COMMIT;"
		    "ckpt/step-01/p.tar.zst;ckpt/step-02/p.tar.zst;");
	expect_list(s, "", "/", "a-b;a.txt;P:a/;b;P:ckpt/;");
	expect_list(s, "a", "/", "a-b;a.txt;P:a/;");
	expect_list(s, "a/", "/", "a/b;P:a/c/;");
	expect_list(s, "ckpt/", "/", "P:ckpt/step-01/;P:ckpt/step-02/;");
	expect_list(s, "ckpt/step-0", NULL,
		    "ckpt/step-01/COMMIT;ckpt/step-01/p.tar.zst;"
		    "ckpt/step-02/p.tar.zst;");
	expect_list(s, "ckpt/step-01/", NULL,
		    "ckpt/step-01/COMMIT;ckpt/step-01/p.tar.zst;");
	/* Delimiters other than "/" roll up too. */
	expect_list(s, "ckpt/", "-", "P:ckpt/step-;");
	expect_list(s, "a", "-", "P:a-;a.txt;a/b;a/c/d;");
	expect_list(s, "zzz", "/", "");
	expect_list(s, "gone/", NULL, "");

	buf_init(&l.text);
	cr_expect_eq(store_list(s, "", NULL, list_cb, &l, &e), 77);
	cr_expect_str_eq(l.text.data, "a-b;a.txt;");
	buf_release(&l.text);
	cr_expect_eq(store_list(s, "../", NULL, list_cb, &l, &e),
		     CLOUD_EINVAL);

	store_upload_abort(u);
	store_close(s);
}

/* Of several processes creating one name, exactly one succeeds; and
 * read-modify-write with compare-and-swap loses no update. */
Test(store_file, atomic_across_processes)
{
	enum { PROCS = 4, ROUNDS = 25 };
	pid_t pids[PROCS];
	int wins = 0;
	char *text;
	struct store *s = open_ok();

	put_ok(s, "counter", "0", STORE_CREATE_ONLY, NULL);
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		cr_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			struct store *c;
			struct err e;
			int won = 0;

			if (store_open(&c, url, &e))
				_exit(100);
			if (store_put(c, "once", "me", 2, STORE_CREATE_ONLY,
				      NULL, &e) == 0)
				won = 1;
			for (int k = 0; k < ROUNDS;) {
				struct store_object o;
				char *data, next[32];
				size_t len;

				if (store_read(c, "counter", 64, &data, &len,
					       &o, &e))
					_exit(101);
				snprintf(next, sizeof(next), "%ld",
					 atol(data) + 1);
				free(data);
				int r = store_put(c, "counter", next,
						  strlen(next), o.generation,
						  NULL, &e);
				store_object_release(&o);
				if (r == 0)
					k++;
				else if (r != CLOUD_EPRECONDITION)
					_exit(102);
			}
			store_close(c);
			_exit(won);
		}
	}
	for (int i = 0; i < PROCS; i++) {
		int st;

		cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) <= 1,
			  "child failed: %d", WEXITSTATUS(st));
		wins += WEXITSTATUS(st);
	}
	cr_expect_eq(wins, 1);
	text = read_ok(s, "counter");
	cr_expect_eq(atol(text), PROCS * ROUNDS, "counter %s", text);
	free(text);
	store_close(s);
}

/* A write past the file size limit fails as a full disk does, and leaves
 * nothing visible and no temporary file. */
Test(store_file, file_size_limit)
{
	struct store *s = open_ok();
	struct store_object st;
	struct err e;
	pid_t pid;
	int status;

	store_close(s);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 1 << 20, 1 << 20 };
		struct store_upload *u;
		static char block[65536];
		int r = 0;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) || store_open(&s, url, &e) ||
		    store_upload_begin(s, "big", STORE_ANY_GENERATION, &u, &e))
			_exit(90);
		for (int i = 0; i < 64 && !r; i++)
			r = store_upload_write(u, block, sizeof(block), &e);
		if (r != CLOUD_ENOSPACE || !strstr(e.msg, "limit")) {
			fprintf(stderr, "got %d: %s\n", r, e.msg);
			_exit(91);
		}
		store_upload_abort(u);
		char *many = calloc(20, sizeof(block));

		if (!many)
			_exit(93);
		r = store_put(s, "big2", many, sizeof(block) * 20,
			      STORE_ANY_GENERATION, NULL, &e);
		_exit(r == CLOUD_ENOSPACE ? 0 : 92);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died of signal %d",
		  WTERMSIG(status));
	cr_expect_eq(WEXITSTATUS(status), 0);
	s = open_ok();
	cr_expect_eq(store_stat(s, "big", &st, &e), CLOUD_ENOTFOUND);
	cr_expect_eq(store_stat(s, "big2", &st, &e), CLOUD_ENOTFOUND);
	cr_expect_eq(count_tmp_files(), 0);
	store_close(s);
}

static int count_cb(void *ud, const struct store_object *o, bool is_prefix)
{
	(void)o;
	(void)is_prefix;
	(*(size_t *)ud)++;
	return 0;
}

/* A store that does not exist (a mistyped URL) is read, listed and
 * deleted from without a trace; its first write makes it. */
Test(store_file, reads_of_a_missing_store_create_nothing)
{
	char path[PATHLEN + 64];
	struct store *s = open_ok();
	struct store_object st;
	struct store_upload *u;
	struct stat sb;
	struct err e;
	size_t n = 0;
	char *data;
	size_t len;

	snprintf(path, sizeof(path), "%s/bucket", root);
	cr_expect_eq(store_stat(s, "a/b", &st, &e), CLOUD_ENOTFOUND);
	cr_expect_eq(store_read(s, "x", 100, &data, &len, NULL, &e),
		     CLOUD_ENOTFOUND);
	cr_expect_eq(store_list(s, "", NULL, count_cb, &n, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(store_list(s, "checkpoints/", "/", count_cb, &n, &e), 0);
	cr_expect_eq(n, 0);
	cr_expect_eq(store_delete(s, "x", STORE_ANY_GENERATION, &e),
		     CLOUD_ENOTFOUND);
	cr_expect_neq(stat(path, &sb), 0, "%s was created", path);
	cr_expect_neq(stat(root, &sb) == 0 && sb.st_nlink > 2, true,
		      "something was created in %s", root);
	/* An upload begun and abandoned leaves the folder, and no file. */
	cr_assert_eq(store_upload_begin(s, "x", STORE_CREATE_ONLY, &u, &e), 0,
		     "%s", e.msg);
	store_upload_abort(u);
	cr_expect_eq(count_tmp_files(), 0);
	put_ok(s, "a/b", "1", STORE_CREATE_ONLY, NULL);
	data = read_ok(s, "a/b");
	cr_expect_str_eq(data, "1");
	free(data);
	store_close(s);
}
