/*
 * tests/checkpoint/test_restore_safety.c: hostile parts, crafted here with
 * libarchive and committed with matching size, CRC32C and generation,
 * through file:// and through the GCS fake. Each is refused naming the
 * entry, restore falls back to the step before, and nothing is written
 * outside the destination: no device node, fifo, socket or setuid file,
 * no oversized file, no temporary directory left next to it.
 */
#include "checkpoint/checkpoint.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#define PATHLEN 4096
#define PART "checkpoints/step-%010llu/slice-0-worker-0.tar.zst"

static char root[1024];
static char file_url[1200];
static struct fake_gcs fake;

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/slicectl-safety-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(root));
	snprintf(file_url, sizeof(file_url), "file://%s/store/run-1", root);
	log_setup("test_restore_safety", LOG_ERROR);
}

static void teardown(void)
{
	if (fake.proc.pid > 0)
		fake_gcs_stop(&fake);
	if (root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", root, root);
}

TestSuite(safety, .init = setup, .fini = teardown, .timeout = 300);

/* ---- the store: file:// or the GCS fake ---- */

static struct store *open_backend(bool gcs)
{
	struct store *s;
	struct err e;
	const char *url = file_url;

	if (gcs) {
		cr_assert_eq(fake_gcs_start(&fake, NULL), 0,
			     "GCS fake did not start");
		setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
		url = "gs://bkt/runs/safety";
	}
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

/* The same test through file:// and through the GCS fake. */
#define ON_BOTH_STORES(name, fn)                                         \
	Test(safety, name##_file) { fn(false); }                          \
	Test(safety, name##_gcs_fake) { fn(true); }

/* ---- crafted parts ---- */

struct mem {
	unsigned char *p;
	size_t len, cap;
};

static la_ssize_t mem_write(struct archive *a, void *ud, const void *data,
			    size_t len)
{
	struct mem *m = ud;

	(void)a;
	if (m->len + len > m->cap) {
		size_t nc = (m->len + len) * 2;

		m->p = realloc(m->p, nc);
		if (!m->p)
			return -1;
		m->cap = nc;
	}
	memcpy(m->p + m->len, data, len);
	m->len += len;
	return (la_ssize_t)len;
}

static struct archive *part_begin(struct mem *m)
{
	struct archive *a = archive_write_new();

	memset(m, 0, sizeof(*m));
	cr_assert(a);
	cr_assert_eq(archive_write_set_format_pax(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	/* No zeros after the zstd frame: restore reads exactly one. */
	cr_assert_eq(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
	cr_assert_eq(archive_write_open2(a, m, NULL, mem_write, NULL, NULL),
		     ARCHIVE_OK, "%s", archive_error_string(a));
	return a;
}

static void part_end(struct archive *a)
{
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK, "%s",
		     archive_error_string(a));
	archive_write_free(a);
}

/* One entry, owned by uid and gid 4242: type AE_IF*, perm, data (len
 * bytes) or a symlink or hard link target, rdev for devices. */
static void add(struct archive *a, const char *name, mode_t type,
		mode_t perm, const char *data, size_t len, const char *symlink,
		const char *hardlink, dev_t rdev)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	if (type)
		archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, perm);
	/* Someone else's: restore must not hand files to them. */
	archive_entry_set_uid(e, 4242);
	archive_entry_set_gid(e, 4242);
	archive_entry_set_mtime(e, 1700000000, 0);
	if (symlink)
		archive_entry_set_symlink(e, symlink);
	if (hardlink)
		archive_entry_set_hardlink(e, hardlink);
	if (rdev)
		archive_entry_set_rdev(e, rdev);
	archive_entry_set_size(e, (la_int64_t)len);
	cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s: %s", name,
		     archive_error_string(a));
	if (len)
		cr_assert_eq(archive_write_data(a, data, len), (la_ssize_t)len);
	archive_entry_free(e);
}

static void add_file(struct archive *a, const char *name, const char *text)
{
	add(a, name, AE_IFREG, 0644, text, strlen(text), NULL, NULL, 0);
}

/* A file of size zeros, compressed to almost nothing. */
static void add_zeros(struct archive *a, const char *name, uint64_t size)
{
	static const char zeros[1 << 16];
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK);
	for (uint64_t done = 0; done < size; done += sizeof(zeros))
		cr_assert_gt(archive_write_data(a, zeros, sizeof(zeros)), 0);
	archive_entry_free(e);
}

/* A GNU sparse entry claiming size bytes, with 512 bytes of data at its
 * end. */
static void add_sparse(struct archive *a, const char *name, int64_t size)
{
	char data[512];
	struct archive_entry *e = archive_entry_new();

	memset(data, 'x', sizeof(data));
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, size);
	archive_entry_sparse_add_entry(e, size - 512, 512);
	cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s",
		     archive_error_string(a));
	cr_assert_eq(archive_write_data(a, data, sizeof(data)), 512);
	archive_entry_free(e);
}

/* Stores m as step's part and commits it with the part's own size,
 * CRC32C and generation; "unpacked" only when given. */
static void commit_part(struct store *s, uint64_t step, struct mem *m,
			uint64_t unpacked)
{
	char name[256], commit[256], json[1024], extra[64] = "";
	struct store_object o;
	struct err e;

	snprintf(name, sizeof(name), PART, (unsigned long long)step);
	cr_assert_eq(store_put(s, name, m->p, m->len, STORE_ANY_GENERATION,
			       &o, &e), 0, "%s", e.msg);
	if (unpacked)
		snprintf(extra, sizeof(extra), ", \"unpacked\": %llu",
			 (unsigned long long)unpacked);
	snprintf(json, sizeof(json),
		 "{\"step\": %llu, \"time\": \"2026-01-01T00:00:00Z\", "
		 "\"parts\": [{\"name\": \"slice-0-worker-0.tar.zst\", "
		 "\"size\": %llu, \"crc32c\": %u, \"generation\": %lld%s}]}",
		 (unsigned long long)step, (unsigned long long)o.size,
		 o.crc32c, (long long)o.generation, extra);
	snprintf(commit, sizeof(commit), "checkpoints/step-%010llu/COMMIT",
		 (unsigned long long)step);
	cr_assert_eq(store_put(s, commit, json, strlen(json),
			       STORE_CREATE_ONLY, NULL, &e), 0, "%s", e.msg);
	store_object_release(&o);
	free(m->p);
}

/* ---- what restore did ---- */

static void path_of(char *out, const char *name)
{
	snprintf(out, PATHLEN, "%s/%s", root, name);
}

/* Step 1, saved the ordinary way: its COMMIT records "unpacked". */
static void save_good_step(struct store *s)
{
	char src[PATHLEN];
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct ckpt_list l;
	struct err e;

	path_of(src, "src");
	cr_assert_eq(sh("mkdir -p '%s/sub' && printf one > '%s/tag' && "
			"printf inner > '%s/sub/inner'", src, src, src), 0);
	ckpt_save_options_init(&o);
	cr_assert_eq(ckpt_save(s, src, 1, &o, &r, &e), 0, "%s", e.msg);
	cr_assert(r.committed);
	cr_assert_gt(r.stats.bytes_unpacked, r.stats.bytes_in);
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 1);
	cr_expect_eq(l.v[0].parts[0].unpacked, r.stats.bytes_unpacked,
		     "COMMIT records %llu, pack made %llu",
		     (unsigned long long)l.v[0].parts[0].unpacked,
		     (unsigned long long)r.stats.bytes_unpacked);
	ckpt_list_release(&l);
}

/* Nothing but the expected names in root, no leftover temporary
 * directory, and nothing special anywhere under it. */
static void nothing_outside(void)
{
	cr_expect_eq(sh("cd '%s' && test -z \"$(ls -A | grep -v -x -e src "
			"-e store -e dest -e outside -e status)\" && "
			"test -z \"$(ls -A outside)\" && "
			"test -z \"$(find . \\( -type b -o -type c -o -type p "
			"-o -type s -o -perm /7000 \\) -print)\"", root), 0,
		     "something was left in %s", root);
}

/* Step 2 is refused with code, its message naming entry; the newest
 * restorable step is then step 1, whose tag is "one". */
static void refused_then_fell_back(struct store *s, int code,
				   const char *entry)
{
	char dest[PATHLEN], tag[PATHLEN + 8];
	struct ckpt_restore_options o = { .step = 2, .part = NULL };
	uint64_t restored = 0;
	struct err e;
	FILE *f;
	char got[16] = "";
	int r;

	path_of(dest, "dest");
	r = ckpt_restore(s, dest, &o, &restored, &e);
	cr_expect_eq(r, code, "step 2 gave %d: %s", r, e.msg);
	cr_expect(strstr(e.msg, entry), "no \"%s\" in: %s", entry, e.msg);
	o.step = 0;
	r = ckpt_restore(s, dest, &o, &restored, &e);
	cr_assert_eq(r, 0, "no fallback: %d %s", r, e.msg);
	cr_expect_eq(restored, 1);
	snprintf(tag, sizeof(tag), "%s/tag", dest);
	f = fopen(tag, "r");
	cr_assert(f, "%s", tag);
	cr_assert(fgets(got, sizeof(got), f));
	fclose(f);
	cr_expect_str_eq(got, "one");
	nothing_outside();
}

/* Commits m as step 2, which restore must refuse (see above). */
static void commit_refused_step(struct store *s, struct mem *m,
				uint64_t unpacked, int code, const char *entry)
{
	commit_part(s, 2, m, unpacked);
	refused_then_fell_back(s, code, entry);
}

static void make_outside(void)
{
	char p[PATHLEN];

	path_of(p, "outside");
	cr_assert_eq(mkdir(p, 0755), 0);
}

/* ---- item 1: devices, fifos, sockets, modes ---- */

/*
 * In a child set up by prepare (another user, a file size limit), through
 * file://: step 2 is refused with code, naming entry and advising nothing
 * about limits, and restore then falls back to step 1.
 */
static void in_child(bool (*prepare)(void), int code, const char *entry)
{
	pid_t pid = fork();
	int st;

	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ckpt_restore_options o = { .step = 2, .part = NULL };
		char dest[PATHLEN];
		uint64_t restored = 0;
		struct store *s;
		struct err e;
		int r;

		if (!prepare() || store_open(&s, file_url, &e))
			_exit(90);
		path_of(dest, "dest");
		r = ckpt_restore(s, dest, &o, &restored, &e);
		if (r != code || !strstr(e.msg, entry) ||
		    strstr(e.msg, "raise")) {
			fprintf(stderr, "step 2 gave %d: %s\n", r, e.msg);
			_exit(91);
		}
		o.step = 0;
		r = ckpt_restore(s, dest, &o, &restored, &e);
		if (r || restored != 1) {
			fprintf(stderr, "fallback gave %d: %s\n", r, e.msg);
			_exit(92);
		}
		store_close(s);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	cr_expect_eq(WEXITSTATUS(st), 0);
	nothing_outside();
}

static bool become_nobody(void)
{
	return !setgid(65534) && !setuid(65534);
}

static bool limit_file_size(void)
{
	struct rlimit rl = { 1 << 20, 1 << 20 };

	signal(SIGXFSZ, SIG_IGN);
	return !setrlimit(RLIMIT_FSIZE, &rl);
}


static void crafted_special(struct store *s, uint64_t step, mode_t type,
			    const char *name)
{
	struct mem m;
	struct archive *a = part_begin(&m);

	add_file(a, "tag", "two");
	add(a, name, type, 0666, NULL, 0, NULL, NULL,
	    type == AE_IFBLK || type == AE_IFCHR ? makedev(8, 0) : 0);
	part_end(a);
	commit_part(s, step, &m, 0);
}

static void specials(bool gcs)
{
	static const struct {
		mode_t type;
		const char *name;
	} cases[] = {
		{ AE_IFBLK, "disk" },
		{ AE_IFCHR, "sub-tty" },
		{ AE_IFIFO, "a-fifo" },
	};
	struct store *s = open_backend(gcs);

	make_outside();
	save_good_step(s);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char name[256];
		struct err e;

		crafted_special(s, 2, cases[i].type, cases[i].name);
		refused_then_fell_back(s, CKPT_EUNSAFE, cases[i].name);
		/* Step 2 goes, for the next case. */
		snprintf(name, sizeof(name), "checkpoints/step-%010llu/COMMIT",
			 2ULL);
		cr_assert_eq(store_delete(s, name, STORE_ANY_GENERATION, &e),
			     0, "%s", e.msg);
		snprintf(name, sizeof(name), PART, 2ULL);
		cr_assert_eq(store_delete(s, name, STORE_ANY_GENERATION, &e),
			     0, "%s", e.msg);
	}
	store_close(s);
}

ON_BOTH_STORES(devices_fifos_sockets_refused, specials)

/* As a non-root restorer (nobody), a device node is refused the same way
 * (before mknod could fail with "Can't create"), and restore falls back.
 * Runs only where the test is root, which can become nobody. */
Test(safety, device_node_as_non_root_falls_back)
{
	struct store *s;

	if (geteuid() != 0) {
		cr_skip_test("needs root to become another user");
		return;
	}
	s = open_backend(false);
	make_outside();
	save_good_step(s);
	crafted_special(s, 2, AE_IFBLK, "disk");
	store_close(s);
	cr_assert_eq(sh("chown -R 65534:65534 '%s'", root), 0);
	in_child(become_nobody, CKPT_EUNSAFE, "disk");
}

/* Setuid, setgid and sticky bits and owners do not come back, even for
 * root: the files are restored with their permission bits only, owned
 * by the restorer. */
Test(safety, modes_masked_owners_not_restored)
{
	struct store *s = open_backend(false);
	struct ckpt_restore_options o = { .step = 0, .part = NULL };
	char dest[PATHLEN], p[PATHLEN + 32];
	struct archive *a;
	struct stat st;
	struct mem m;
	struct err e;

	make_outside();
	a = part_begin(&m);
	add(a, "suid", AE_IFREG, 04755, "#!/bin/sh\n", 10, NULL, NULL, 0);
	add(a, "sgid-dir", AE_IFDIR, 02775, NULL, 0, NULL, NULL, 0);
	add(a, "sticky", AE_IFDIR, 01777, NULL, 0, NULL, NULL, 0);
	add(a, "tag", AE_IFREG, 06644, "two", 3, NULL, NULL, 0);
	part_end(a);
	commit_part(s, 1, &m, 0);
	path_of(dest, "dest");
	cr_assert_eq(ckpt_restore(s, dest, &o, NULL, &e), 0, "%s", e.msg);
	snprintf(p, sizeof(p), "%s/suid", dest);
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0755, "%o", st.st_mode & 07777);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_eq(st.st_gid, getegid());
	snprintf(p, sizeof(p), "%s/sgid-dir", dest);
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0775, "%o", st.st_mode & 07777);
	snprintf(p, sizeof(p), "%s/sticky", dest);
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0777, "%o", st.st_mode & 07777);
	snprintf(p, sizeof(p), "%s/tag", dest);
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0644, "%o", st.st_mode & 07777);
	nothing_outside();
	store_close(s);
}

/* ---- items 2 and 3: what a part expands to ---- */

static void sparse_part(struct store *s, uint64_t unpacked)
{
	struct mem m;
	struct archive *a = part_begin(&m);

	add_file(a, "tag", "two");
	add_sparse(a, "huge", (int64_t)1 << 62);
	part_end(a);
	commit_part(s, 2, &m, unpacked);
}

static void sparse_and_bombs(bool gcs)
{
	struct store *s = open_backend(gcs);
	struct archive *a;
	struct mem m;

	make_outside();
	save_good_step(s);
	/* A sparse entry of 2^62 bytes, COMMIT without "unpacked". */
	sparse_part(s, 0);
	refused_then_fell_back(s, CLOUD_ECORRUPT, "huge");
	store_close(s);
	if (gcs) {
		fake_gcs_stop(&fake);
		memset(&fake, 0, sizeof(fake));
	}
	sh("rm -rf '%s/store'", root);

	/* 1.5 GiB of zeros in a small part, COMMIT without "unpacked":
	 * beyond 64 times its size plus 1 GiB. */
	s = open_backend(gcs);
	save_good_step(s);
	a = part_begin(&m);
	add_file(a, "tag", "two");
	add_zeros(a, "zeros", (uint64_t)3 << 29);
	part_end(a);
	cr_assert_lt(m.len, 1 << 20, "%zu", m.len);
	commit_refused_step(s, &m, 0, CLOUD_ECORRUPT, "zeros");
	store_close(s);
}

ON_BOTH_STORES(sparse_and_ratio_bombs_fall_back, sparse_and_bombs)

/* A part that expands beyond the "unpacked" its COMMIT records is
 * refused, by what an entry claims and by the tar bytes it reads. */
Test(safety, part_beyond_recorded_size_falls_back)
{
	struct store *s = open_backend(false);
	struct archive *a;
	struct mem m;
	char big[8192];

	make_outside();
	save_good_step(s);
	memset(big, 'b', sizeof(big));
	a = part_begin(&m);
	add_file(a, "tag", "two");
	add(a, "big", AE_IFREG, 0644, big, sizeof(big), NULL, NULL, 0);
	part_end(a);
	commit_refused_step(s, &m, 4096, CLOUD_ECORRUPT, "big");
	store_close(s);
	sh("rm -rf '%s/store'", root);

	/* Many empty files: nothing claimed, but headers read. */
	s = open_backend(false);
	save_good_step(s);
	a = part_begin(&m);
	add_file(a, "tag", "two");
	for (int i = 0; i < 64; i++) {
		char name[32];

		snprintf(name, sizeof(name), "empty-%02d", i);
		add(a, name, AE_IFREG, 0644, NULL, 0, NULL, NULL, 0);
	}
	part_end(a);
	commit_refused_step(s, &m, 8192, CLOUD_ECORRUPT, "empty-");
	store_close(s);
}

/* Under a file size limit, a part lying about its size (the sparse entry)
 * is a bad part: no advice to raise the limit, and restore falls back;
 * an honest file over the limit still says to raise it. */
Test(safety, file_size_limit_and_lying_parts)
{
	struct store *s = open_backend(false);

	make_outside();
	save_good_step(s);
	sparse_part(s, 0);
	store_close(s);
	in_child(limit_file_size, CLOUD_ECORRUPT, "huge");
}

/* ---- item 6: a hard link carrying data onto an in-tree symlink ---- */

/* A ustar header written by hand: libarchive's writers drop the data of
 * hard links, which a hostile part need not. */
static void raw_header(struct mem *t, const char *name, char type,
		       size_t size, const char *link)
{
	unsigned char h[512];
	unsigned sum = 0;

	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", type == '2' ? 0777 : 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011zo", size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	cr_assert_eq(mem_write(NULL, t, h, sizeof(h)), 512);
}

static void raw_data(struct mem *t, const char *data, size_t len)
{
	static const char zeros[512];

	cr_assert_eq(mem_write(NULL, t, data, len), (la_ssize_t)len);
	if (len % 512)
		mem_write(NULL, t, zeros, 512 - len % 512);
}

/* A pax extended header naming the next entry: a pax archive, whose hard
 * links may carry data. */
static void raw_pax_path(struct mem *t, const char *path)
{
	char rec[256];
	size_t n = strlen(" path=\n") + strlen(path), len = n + 1;

	while (len != n + (size_t)snprintf(NULL, 0, "%zu", len))
		len = n + (size_t)snprintf(NULL, 0, "%zu", len);
	snprintf(rec, sizeof(rec), "%zu path=%s\n", len, path);
	raw_header(t, "PaxHeader", 'x', strlen(rec), NULL);
	raw_data(t, rec, strlen(rec));
}

static void raw_compress(struct mem *t, struct mem *m)
{
	static const char zeros[1024];
	size_t r;

	mem_write(NULL, t, zeros, sizeof(zeros));
	memset(m, 0, sizeof(*m));
	m->cap = ZSTD_compressBound(t->len);
	m->p = malloc(m->cap);
	cr_assert(m->p);
	r = ZSTD_compress(m->p, m->cap, t->p, t->len, 3);
	cr_assert(!ZSTD_isError(r));
	m->len = r;
	free(t->p);
}

static void hardlink_on_symlink(bool gcs)
{
	struct store *s = open_backend(gcs);
	struct mem t = { 0 }, m;

	make_outside();
	save_good_step(s);
	raw_header(&t, "tag", '0', 3, NULL);
	raw_data(&t, "two", 3);
	raw_header(&t, "target.txt", '0', 7, NULL);
	raw_data(&t, "target\n", 7);
	raw_header(&t, "link", '2', 0, "target.txt");
	raw_pax_path(&t, "carrier");
	raw_header(&t, "carrier", '1', 5, "link");
	raw_data(&t, "hello", 5);
	raw_compress(&t, &m);
	commit_refused_step(s, &m, 0, CLOUD_ECORRUPT, "carrier");
	store_close(s);
}

ON_BOTH_STORES(hardlink_with_data_onto_symlink, hardlink_on_symlink)

/* A hard link (with data or without) through an in-tree symlink to a
 * file outside is refused, and the file outside keeps its one name and
 * its contents. */
Test(safety, hardlink_through_a_symlink_to_outside)
{
	struct store *s = open_backend(false);
	char outside[PATHLEN], victim[PATHLEN + 16];
	struct stat st;

	make_outside();
	path_of(outside, "outside");
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	save_good_step(s);
	for (size_t data = 0; data <= 5; data += 5) {
		struct mem t = { 0 }, m;
		char name[256];
		struct err e;

		cr_assert_eq(sh("printf precious > '%s'", victim), 0);
		raw_header(&t, "tag", '0', 3, NULL);
		raw_data(&t, "two", 3);
		raw_header(&t, "out", '2', 0, outside);
		raw_pax_path(&t, "h");
		raw_header(&t, "h", '1', data, "out/victim");
		raw_data(&t, "hello", data);
		raw_compress(&t, &m);
		commit_part(s, 2, &m, 0);
		{
			char dest[PATHLEN];
			struct ckpt_restore_options o = { .step = 2, .part = NULL };
			int r;

			path_of(dest, "dest");
			r = ckpt_restore(s, dest, &o, NULL, &e);
			cr_expect_eq(r, CKPT_EUNSAFE, "%d: %s", r, e.msg);
			cr_expect(strstr(e.msg, " h "), "%s", e.msg);
		}
		cr_assert_eq(stat(victim, &st), 0);
		cr_expect_eq(st.st_nlink, 1);
		cr_expect_eq(st.st_size, 8);
		cr_assert_eq(unlink(victim), 0);
		snprintf(name, sizeof(name), "checkpoints/step-%010llu/COMMIT",
			 2ULL);
		cr_assert_eq(store_delete(s, name, STORE_ANY_GENERATION, &e),
			     0, "%s", e.msg);
	}
	nothing_outside();
	store_close(s);
}

/* ---- item 5: leftovers ---- */

/* Replacing a tree deeper than PATH_MAX leaves no hidden
 * ".dest.restore-*" directory behind. */
Test(safety, restore_over_a_tree_deeper_than_path_max)
{
	struct store *s = open_backend(false);
	struct ckpt_restore_options o = { .step = 0, .part = NULL };
	char dest[PATHLEN], name[201];
	uint64_t restored = 0;
	struct err e;
	int fd;

	make_outside();
	save_good_step(s);
	path_of(dest, "dest");
	cr_assert_eq(mkdir(dest, 0755), 0);
	memset(name, 'd', 200);
	name[200] = '\0';
	fd = open(dest, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 30; i++) {
		int next;

		cr_assert_eq(mkdirat(fd, name, 0755), 0);
		next = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert(next >= 0);
		close(fd);
		fd = next;
	}
	cr_assert_eq(close(openat(fd, "deep-file", O_CREAT | O_WRONLY, 0644)),
		     0);
	/* Read-only on the way down, as restored trees may be. */
	cr_assert_eq(fchmod(fd, 0500), 0);
	close(fd);
	cr_assert_eq(ckpt_restore(s, dest, &o, &restored, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(restored, 1);
	nothing_outside();
	store_close(s);
}

/* "/" is refused before the store is read, as "." is. */
Test(safety, restore_into_root_refused_up_front)
{
	struct store *s = open_backend(true);
	struct ckpt_restore_options o = { .step = 0, .part = NULL };
	char *before = NULL, *after = NULL;
	struct err e;

	save_good_step(s);
	cr_assert_eq(fake_gcs_call(&fake, "GET", "/_fake/requests", NULL,
				   &before), 200);
	cr_expect_eq(ckpt_restore(s, "/", &o, NULL, &e), CKPT_EINVAL);
	cr_expect(strstr(e.msg, "must name a directory"), "%s", e.msg);
	cr_expect_eq(ckpt_restore(s, "//", &o, NULL, &e), CKPT_EINVAL);
	cr_expect_eq(ckpt_restore(s, ".", &o, NULL, &e), CKPT_EINVAL);
	cr_expect_eq(ckpt_unpack_object(s, "x", "/", NULL, &e), CKPT_EINVAL);
	cr_assert_eq(fake_gcs_call(&fake, "GET", "/_fake/requests", NULL,
				   &after), 200);
	cr_expect_str_eq(before, after, "the store was asked something");
	cr_expect_eq(sh("ls -a / | grep -q '^\\.\\.*restore-'"), 1);
	free(before);
	free(after);
	store_close(s);
}

/* `ckpt ls`, `verify` and `restore` of a mistyped file:// URL create
 * nothing there. */
Test(safety, read_only_commands_create_nothing)
{
	char url[PATHLEN + 64], missing[PATHLEN], dest[PATHLEN];
	struct stat st;

	path_of(missing, "typo/run-1");
	path_of(dest, "dest");
	snprintf(url, sizeof(url), "file://%s", missing);
	{
		char *ls[] = { "ckpt", "ls", url, NULL };
		char *verify[] = { "ckpt", "verify", url, NULL };
		char *restore[] = { "ckpt", "restore", url, dest, NULL };

		cr_expect_eq(ckpt_cli("slicectl", 3, ls), 0);
		cr_expect_neq(ckpt_cli("slicectl", 3, verify), 0);
		cr_expect_neq(ckpt_cli("slicectl", 4, restore), 0);
	}
	path_of(missing, "typo");
	cr_expect_neq(stat(missing, &st), 0, "%s was created", missing);
	cr_expect_neq(stat(dest, &st), 0, "%s was created", dest);
}
