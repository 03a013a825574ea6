/* tests/supervisor/shipper_check.c: see shipper_check.h. */
#include "tests/supervisor/shipper_check.h"

#include "supervisor/shipper.h"
#include "checkpoint/checkpoint.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char root[1024];
char ckpt_dir[PATHLEN], spool_dir[PATHLEN];
char file_url[PATHLEN];
struct fake_gcs fake;
bool fake_up;

void setup(void)
{
	cr_assert_eq(make_temp_dir(root, sizeof(root), "ship"), 0);
	snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/ckpt", root);
	snprintf(spool_dir, sizeof(spool_dir), "%s/spool", root);
	snprintf(file_url, sizeof(file_url), "file://%s/bucket/run-1", root);
	cr_assert_eq(mkdir(ckpt_dir, 0755), 0);
	unsetenv("SLICECTL_ACCESS_TOKEN");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
	setenv("HOME", "/nonexistent", 1);
	/* Retries in milliseconds, not seconds: http.c's and the
	 * shipper's backoff alike. */
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "10", 1);
	log_setup("test_shipper", getenv("SHIPPER_TEST_LOG") ? LOG_DEBUG
							    : LOG_ERROR);
}

void teardown(void)
{
	if (fake_up)
		fake_gcs_stop(&fake);
	fake_up = false;
	if (root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", root,
		   root);
}


/* ---------------------------------------------------------------- helpers */

void start_fake(void)
{
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	fake_up = true;
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
}

void faults(const char *rules)
{
	cr_assert_eq(fake_gcs_faults(&fake, rules), 0, "%s", rules);
}


void clear_faults(void)
{
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
}

/* Bytes that do not compress, the same for the same seed, so a test can
 * write a step again to compare it with what was restored. */
void write_random(const char *path, size_t len, uint64_t seed)
{
	unsigned short x[3] = { (unsigned short)seed,
				(unsigned short)(seed >> 16),
				(unsigned short)(seed >> 32) };
	unsigned char *p = malloc(len ? len : 1);
	FILE *f = fopen(path, "w");

	cr_assert(p && f, "create %s", path);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(nrand48(x) >> 23);
	cr_assert_eq(fwrite(p, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	free(p);
}

void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	close(fd);
}

/* The trainer's side: dir/step-N/ with bytes of data, not yet done. */
void write_step_dir(const char *dir, uint64_t step, size_t bytes)
{
	char path[PATHLEN * 2];

	snprintf(path, sizeof(path), "%s/step-%llu", dir,
		 (unsigned long long)step);
	cr_assert_eq(mkdir(path, 0755), 0, "%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/step-%llu/state.bin", dir,
		 (unsigned long long)step);
	write_random(path, bytes, step + 1);
	snprintf(path, sizeof(path), "%s/step-%llu/meta.json", dir,
		 (unsigned long long)step);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "{\"step\": %llu}\n", (unsigned long long)step);
	cr_assert_eq(fclose(f), 0);
}

void mark_done(const char *dir, uint64_t step)
{
	char path[PATHLEN * 2];

	snprintf(path, sizeof(path), "%s/step-%llu.done", dir,
		 (unsigned long long)step);
	touch(path);
}

void make_step(const char *dir, uint64_t step, size_t bytes)
{
	write_step_dir(dir, step, bytes);
	mark_done(dir, step);
}

bool exists(const char *fmt, ...)
{
	char path[PATHLEN * 2];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return lstat(path, &st) == 0;
}

/* Entries of a directory other than . and .. */
unsigned count_entries(const char *dir)
{
	unsigned n = 0;
	struct dirent *d;
	DIR *dh = opendir(dir);

	if (!dh)
		return 0;
	while ((d = readdir(dh)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			n++;
	closedir(dh);
	return n;
}

void config_init(struct shipper_config *c, const char *url)
{
	memset(c, 0, sizeof(*c));
	c->run_url = url;
	c->ckpt_dir = ckpt_dir;
	c->spool_dir = spool_dir;
	c->part = "slice-0-worker-0";
	c->parts_expected = 1;
	c->keep = 1;
	c->spool_bytes = 1ull << 30;
	c->notify_fd = -1;
	c->poll_ms = 50;
}

struct shipper *start(const struct shipper_config *c)
{
	struct shipper *s = NULL;
	struct err e;

	cr_assert_eq(shipper_start(&s, c, &e), 0, "%s", e.msg);
	cr_assert(s);
	return s;
}


/* Polls until pred holds, or fails the test after ms. */
struct shipper_state wait_state(struct shipper *s, state_pred pred,
				int64_t arg, unsigned ms,
				const char *what)
{
	uint64_t until = mono_ms() + ms;
	struct shipper_state st;

	for (;;) {
		shipper_get(s, &st);
		if (pred(&st, arg))
			return st;
		if (mono_ms() > until)
			cr_assert_fail("%s (%lld) not reached in %u ms: done "
				       "%lld, uploaded %lld, committed %lld, "
				       "waiting %u, dropped %u, failures %u, "
				       "last error \"%s\"", what,
				       (long long)arg, ms,
				       (long long)st.newest_done,
				       (long long)st.newest_uploaded,
				       (long long)st.newest_committed,
				       st.waiting, st.dropped, st.failures,
				       st.last_error);
		sleep_ms(10);
	}
}

bool committed_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_committed == n;
}

bool uploaded_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_uploaded == n;
}

bool done_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_done == n;
}

bool waiting_is(const struct shipper_state *st, int64_t n)
{
	return st->waiting == (unsigned)n;
}

bool failures_at_least(const struct shipper_state *st, int64_t n)
{
	return st->failures >= (unsigned)n;
}

void wait_spool_entries(unsigned n, unsigned ms)
{
	uint64_t until = mono_ms() + ms;

	while (count_entries(spool_dir) != n) {
		cr_assert(mono_ms() < until, "the spool holds %u entries, "
			  "not %u", count_entries(spool_dir), n);
		sleep_ms(10);
	}
}

struct store *open_store(const char *url)
{
	struct store *st;
	struct err e;

	cr_assert_eq(store_open(&st, url, &e), 0, "%s", e.msg);
	return st;
}

/* The steps in the store as "N:committed:parts N:...". */
void describe_steps(struct store *st, char *out, size_t len)
{
	struct ckpt_list l;
	struct err e;
	size_t used = 0;

	cr_assert_eq(ckpt_list(st, &l, &e), 0, "%s", e.msg);
	out[0] = '\0';
	for (size_t i = 0; i < l.n && used < len; i++)
		used += (size_t)snprintf(out + used, len - used,
					 "%s%llu:%c:%zu", i ? " " : "",
					 (unsigned long long)l.v[i].step,
					 l.v[i].committed ? 'c' : 'u',
					 l.v[i].nparts);
	ckpt_list_release(&l);
}

void expect_steps(const char *url, const char *want)
{
	struct store *st = open_store(url);
	char got[1024];

	describe_steps(st, got, sizeof(got));
	store_close(st);
	cr_assert_str_eq(got, want);
}

unsigned drain(int fd)
{
	char buf[256];
	unsigned n = 0;
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0)
		n += (unsigned)r;
	return n;
}

/* The GCS fake, holding back the start of the first upload session for
 * stall seconds, and a shipper at url that has taken step (bytes of data)
 * and has been on its upload for 300 ms. */
struct shipper *start_stalled(const char *url, double stall,
			      uint64_t step, size_t bytes)
{
	struct shipper_config c;
	struct shipper *s;
	char rule[256];

	start_fake();
	snprintf(rule, sizeof(rule), "{\"action\": \"stall\", \"seconds\": "
		 "%g, \"method\": \"POST\", \"path\": "
		 "\"uploadType=resumable\", \"times\": 1}", stall);
	faults(rule);
	config_init(&c, url);
	s = start(&c);
	make_step(ckpt_dir, step, bytes);
	wait_state(s, done_is, (int64_t)step, 5000, "taken");
	sleep_ms(300);
	return s;
}

/* The GCS fake failing every request, and a shipper at url that has
 * step 1 to upload. */
struct shipper *start_in_outage(const char *url)
{
	struct shipper_config c;
	struct shipper *s;

	start_fake();
	faults(OUTAGE);
	config_init(&c, url);
	s = start(&c);
	make_step(ckpt_dir, 1, 10 * KiB);
	return s;
}

/* Steps 1 to n, each committed before the next is written. */
void commit_each(struct shipper *s, uint64_t n)
{
	for (uint64_t i = 1; i <= n; i++) {
		make_step(ckpt_dir, i, 10 * KiB);
		wait_state(s, committed_is, (int64_t)i, 10000, "committed");
	}
}

void stop_within(struct shipper *s, unsigned ms)
{
	uint64_t t0 = mono_ms(), took;

	shipper_stop(s);
	took = mono_ms() - t0;
	cr_assert_lt(took, ms, "stop took %llu ms", (unsigned long long)took);
}
