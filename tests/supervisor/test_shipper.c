/*
 * tests/supervisor/test_shipper.c: the checkpoint shipper end to end, with
 * a trainer simulated by the test (step-N/ then step-N.done): taking,
 * uploading and committing steps into file:// stores and the GCS fake;
 * two workers' parts; coalescing; a 20 s outage; the spool bound; flush,
 * reset and stop; pruning on worker 0; malformed names.
 */
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

#define PATHLEN 2048
#define KiB 1024u
#define MiB (1024u * 1024u)

static char root[1024];
static char ckpt_dir[PATHLEN], spool_dir[PATHLEN];
static char file_url[PATHLEN];
static struct fake_gcs fake;
static bool fake_up;

static void setup(void)
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

static void teardown(void)
{
	if (fake_up)
		fake_gcs_stop(&fake);
	fake_up = false;
	if (root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", root,
		   root);
}

TestSuite(shipper, .init = setup, .fini = teardown, .timeout = 120);

/* ---------------------------------------------------------------- helpers */

static void start_fake(void)
{
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	fake_up = true;
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
}

static void faults(const char *rules)
{
	cr_assert_eq(fake_gcs_faults(&fake, rules), 0, "%s", rules);
}

/* A fault rule: every request fails with 503 until clear_faults. */
#define OUTAGE "{\"action\": \"status\", \"status\": 503, \"times\": -1}"

static void clear_faults(void)
{
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
}

/* Bytes that do not compress, the same for the same seed, so a test can
 * write a step again to compare it with what was restored. */
static void write_random(const char *path, size_t len, uint64_t seed)
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

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	close(fd);
}

/* The trainer's side: dir/step-N/ with bytes of data, not yet done. */
static void write_step_dir(const char *dir, uint64_t step, size_t bytes)
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

static void mark_done(const char *dir, uint64_t step)
{
	char path[PATHLEN * 2];

	snprintf(path, sizeof(path), "%s/step-%llu.done", dir,
		 (unsigned long long)step);
	touch(path);
}

static void make_step(const char *dir, uint64_t step, size_t bytes)
{
	write_step_dir(dir, step, bytes);
	mark_done(dir, step);
}

static bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool exists(const char *fmt, ...)
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
static unsigned count_entries(const char *dir)
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

static void config_init(struct shipper_config *c, const char *url)
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

static struct shipper *start(const struct shipper_config *c)
{
	struct shipper *s = NULL;
	struct err e;

	cr_assert_eq(shipper_start(&s, c, &e), 0, "%s", e.msg);
	cr_assert(s);
	return s;
}

typedef bool (*state_pred)(const struct shipper_state *st, int64_t arg);

/* Polls until pred holds, or fails the test after ms. */
static struct shipper_state wait_state(struct shipper *s, state_pred pred,
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

static bool committed_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_committed == n;
}

static bool uploaded_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_uploaded == n;
}

static bool done_is(const struct shipper_state *st, int64_t n)
{
	return st->newest_done == n;
}

static bool waiting_is(const struct shipper_state *st, int64_t n)
{
	return st->waiting == (unsigned)n;
}

static bool failures_at_least(const struct shipper_state *st, int64_t n)
{
	return st->failures >= (unsigned)n;
}

static void wait_spool_entries(unsigned n, unsigned ms)
{
	uint64_t until = mono_ms() + ms;

	while (count_entries(spool_dir) != n) {
		cr_assert(mono_ms() < until, "the spool holds %u entries, "
			  "not %u", count_entries(spool_dir), n);
		sleep_ms(10);
	}
}

static struct store *open_store(const char *url)
{
	struct store *st;
	struct err e;

	cr_assert_eq(store_open(&st, url, &e), 0, "%s", e.msg);
	return st;
}

/* The steps in the store as "N:committed:parts N:...". */
static void describe_steps(struct store *st, char *out, size_t len)
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

static void expect_steps(const char *url, const char *want)
{
	struct store *st = open_store(url);
	char got[1024];

	describe_steps(st, got, sizeof(got));
	store_close(st);
	cr_assert_str_eq(got, want);
}

static unsigned drain(int fd)
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
static struct shipper *start_stalled(const char *url, double stall,
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
static struct shipper *start_in_outage(const char *url)
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
static void commit_each(struct shipper *s, uint64_t n)
{
	for (uint64_t i = 1; i <= n; i++) {
		make_step(ckpt_dir, i, 10 * KiB);
		wait_state(s, committed_is, (int64_t)i, 10000, "committed");
	}
}

static void stop_within(struct shipper *s, unsigned ms)
{
	uint64_t t0 = mono_ms(), took;

	shipper_stop(s);
	took = mono_ms() - t0;
	cr_assert_lt(took, ms, "stop took %llu ms", (unsigned long long)took);
}

/* ---------------------------------------------------------------- tests */

Test(shipper, a_step_is_taken_uploaded_and_committed)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	struct store *store;
	struct ckpt_verify_result vr;
	uint64_t restored;
	char dest[PATHLEN];
	struct err e;
	int fds[2];

	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	config_init(&c, file_url);
	c.notify_fd = fds[1];
	make_step(ckpt_dir, 7, 300 * KiB);
	s = start(&c);
	st = wait_state(s, committed_is, 7, 10000, "committed");
	cr_assert_eq(st.newest_done, 7);
	cr_assert_eq(st.newest_uploaded, 7);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.failures, 0);
	cr_assert_gt(st.upload_bps, 0);
	/* Moved out of the trainer's directory, marker gone, spool empty. */
	cr_assert(!exists("%s/step-7", ckpt_dir));
	cr_assert(!exists("%s/step-7.done", ckpt_dir));
	wait_spool_entries(0, 5000);
	cr_assert_gt(drain(fds[0]), 0, "no notification");

	/* What was uploaded is what the trainer wrote. */
	expect_steps(file_url, "7:c:1");
	store = open_store(file_url);
	cr_assert_eq(ckpt_verify(store, 7, &vr, &e), 0, "%s", e.msg);
	cr_assert_eq(vr.parts_ok, 1);
	cr_assert_eq(vr.parts_bad, 0);
	snprintf(dest, sizeof(dest), "%s/restored", root);
	cr_assert_eq(ckpt_restore(store, dest, NULL, &restored, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(restored, 7);
	store_close(store);
	write_step_dir(root, 7, 300 * KiB); /* the same bytes again */
	cr_assert_eq(sh("cmp -s '%s/step-7/state.bin' '%s/state.bin' && "
			"cmp -s '%s/step-7/meta.json' '%s/meta.json'", root,
			dest, root, dest), 0);

	/* Nothing changes: no more notifications. */
	sleep_ms(300);
	drain(fds[0]);
	sleep_ms(300);
	cr_assert_eq(drain(fds[0]), 0);

	/* A step older than the newest uploaded one, written after it,
	 * goes out too: a trainer that went back to it means it. */
	make_step(ckpt_dir, 5, 10 * KiB);
	shipper_kick(s);
	st = wait_state(s, uploaded_is, 5, 5000, "step 5 uploaded");
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.newest_committed, 7);
	cr_assert(!exists("%s/step-5.done", ckpt_dir));
	wait_spool_entries(0, 5000);
	expect_steps(file_url, "5:c:1 7:c:1");
	cr_assert_gt(drain(fds[0]), 0, "no notification for the upload");
	shipper_stop(s);
	close(fds[0]);
	close(fds[1]);
}

Test(shipper, two_workers_commit_once_both_parts_are_up)
{
	char dir0[PATHLEN], dir1[PATHLEN], sp0[PATHLEN], sp1[PATHLEN];
	struct shipper_config c0, c1;
	struct shipper *s0, *s1;
	struct shipper_state st;

	snprintf(dir0, sizeof(dir0), "%s/w0", root);
	snprintf(dir1, sizeof(dir1), "%s/w1", root);
	snprintf(sp0, sizeof(sp0), "%s/spool0", root);
	snprintf(sp1, sizeof(sp1), "%s/spool1", root);
	cr_assert_eq(mkdir(dir0, 0755), 0);
	cr_assert_eq(mkdir(dir1, 0755), 0);
	config_init(&c0, file_url);
	c0.ckpt_dir = dir0;
	c0.spool_dir = sp0;
	c0.parts_expected = 2;
	c0.prune = true;
	c1 = c0;
	c1.ckpt_dir = dir1;
	c1.spool_dir = sp1;
	c1.part = "slice-0-worker-1";
	c1.prune = false;
	s0 = start(&c0);
	s1 = start(&c1);

	make_step(dir0, 10, 100 * KiB);
	st = wait_state(s0, uploaded_is, 10, 10000, "worker 0 uploaded");
	sleep_ms(200);
	shipper_get(s0, &st);
	cr_assert_eq(st.newest_committed, -1);
	expect_steps(file_url, "10:u:1");

	make_step(dir1, 10, 120 * KiB);
	wait_state(s1, committed_is, 10, 10000, "worker 1 committed");
	/* Worker 0 sees it on its next pass. */
	wait_state(s0, committed_is, 10, 10000, "worker 0 saw the commit");
	expect_steps(file_url, "10:c:2");
	shipper_stop(s1);
	shipper_stop(s0);
}

Test(shipper, worker_0_commits_for_a_writer_that_died)
{
	struct shipper_config c;
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct shipper *s;
	struct store *store;
	char other[PATHLEN];
	struct err e;

	config_init(&c, file_url);
	c.parts_expected = 2;
	c.prune = true;
	s = start(&c);
	make_step(ckpt_dir, 3, 50 * KiB);
	wait_state(s, uploaded_is, 3, 10000, "uploaded");
	expect_steps(file_url, "3:u:1");

	/* The other worker's part arrives, but its writer dies before it
	 * can commit (it believes more parts are needed). */
	snprintf(other, sizeof(other), "%s/other", root);
	cr_assert_eq(mkdir(other, 0755), 0);
	write_step_dir(other, 3, 10 * KiB);
	snprintf(other, sizeof(other), "%s/other/step-3", root);
	store = open_store(file_url);
	ckpt_save_options_init(&o);
	o.part = "slice-0-worker-1";
	o.parts_expected = 99;
	cr_assert_eq(ckpt_save(store, other, 3, &o, &r, &e), 0, "%s", e.msg);
	cr_assert(!r.committed);
	store_close(store);

	wait_state(s, committed_is, 3, 10000, "worker 0 committed");
	expect_steps(file_url, "3:c:2");
	shipper_stop(s);
}

Test(shipper, newest_first_coalesces_older_waiting_steps)
{
	const char *url = "gs://bkt/runs/r1";
	struct shipper_state st;
	/* Step 1's upload session takes 3 s to start. */
	struct shipper *s = start_stalled(url, 3, 1, 20 * KiB);

	/* Five more at once while step 1 is in upload. */
	for (uint64_t i = 2; i <= 6; i++)
		write_step_dir(ckpt_dir, i, 20 * KiB);
	for (uint64_t i = 2; i <= 6; i++)
		mark_done(ckpt_dir, i);
	st = wait_state(s, done_is, 6, 2000, "steps 2-6 taken");
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, -1, "step 1 was not slowed");

	st = wait_state(s, committed_is, 6, 20000, "step 6 committed");
	cr_assert_eq(st.newest_uploaded, 6);
	cr_assert_eq(st.dropped, 4);
	cr_assert_eq(st.waiting, 0);
	/* Step 1 was in upload: it finished. 2 to 5 never went. */
	expect_steps(url, "1:c:1 6:c:1");
	wait_spool_entries(0, 5000);
	shipper_stop(s);
}

Test(shipper, a_20_s_outage_loses_nothing_that_fits, .timeout = 120)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/outage";
	const unsigned steps = 8;

	start_fake();
	config_init(&c, url);
	s = start(&c);
	faults(OUTAGE);
	uint64_t t0 = mono_ms();
	for (uint64_t i = 1; i <= steps; i++) {
		make_step(ckpt_dir, i, 64 * KiB);
		wait_state(s, done_is, (int64_t)i, 3000, "taken");
		cr_assert(!exists("%s/step-%llu", ckpt_dir,
				  (unsigned long long)i));
		shipper_get(s, &st);
		cr_assert_eq(st.waiting, i);
		cr_assert_eq(st.dropped, 0);
		cr_assert_eq(st.newest_uploaded, -1);
		while (mono_ms() < t0 + i * 20000 / steps)
			sleep_ms(20);
	}
	cr_assert_geq(mono_ms() - t0, 20000);
	shipper_get(s, &st);
	cr_assert_gt(st.failures, 3);
	cr_assert(strstr(st.last_error, "503"), "%s", st.last_error);
	cr_assert_eq(count_entries(spool_dir), steps);
	cr_assert_eq(count_entries(ckpt_dir), 0);

	clear_faults();
	st = wait_state(s, committed_is, steps, 30000, "committed after");
	cr_assert_eq(st.newest_uploaded, steps);
	cr_assert_eq(st.failures, 0);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.dropped, steps - 1);
	expect_steps(url, "8:c:1");
	wait_spool_entries(0, 5000);
	shipper_stop(s);
}

Test(shipper, the_spool_bound_drops_the_oldest_and_keeps_the_newest)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/spool";

	start_fake();
	faults(OUTAGE);
	/* Five steps of about 100 KiB wait; 250 KiB fit. */
	for (uint64_t i = 1; i <= 5; i++)
		make_step(ckpt_dir, i, 100 * KiB);
	config_init(&c, url);
	c.spool_bytes = 250 * KiB;
	s = start(&c);
	st = wait_state(s, done_is, 5, 5000, "taken");
	cr_assert_eq(st.dropped, 3);
	cr_assert_eq(st.waiting, 2);
	wait_spool_entries(2, 5000);
	cr_assert(exists("%s/step-4", spool_dir));
	cr_assert(exists("%s/step-5", spool_dir));

	/* One more: the oldest goes. */
	make_step(ckpt_dir, 6, 100 * KiB);
	st = wait_state(s, done_is, 6, 5000, "taken");
	cr_assert_eq(st.dropped, 4);
	wait_spool_entries(2, 5000);
	cr_assert(exists("%s/step-5", spool_dir));
	cr_assert(exists("%s/step-6", spool_dir));

	/* A step larger than the whole spool is kept, alone. */
	make_step(ckpt_dir, 7, 400 * KiB);
	wait_state(s, done_is, 7, 5000, "taken");
	st = wait_state(s, waiting_is, 1, 5000, "only the newest left");
	cr_assert_eq(st.dropped, 6);
	wait_spool_entries(1, 5000);
	cr_assert(exists("%s/step-7", spool_dir));

	clear_faults();
	wait_state(s, committed_is, 7, 20000, "committed");
	expect_steps(url, "7:c:1");
	shipper_stop(s);
}

static void *clear_faults_later(void *arg)
{
	(void)arg;
	sleep_ms(300);
	clear_faults();
	return NULL;
}

Test(shipper, flush_uploads_the_newest_first_within_the_deadline)
{
	pthread_t clearer;
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/flush";
	struct err e;
	uint64_t t0;

	start_fake();
	config_init(&c, url);
	c.poll_ms = 60000; /* only kicks and flushes scan */
	s = start(&c);
	/* Nothing to flush: at once. */
	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 5000, &e), 0, "%s", e.msg);
	cr_assert_lt(mono_ms() - t0, 1000);

	faults(OUTAGE);
	make_step(ckpt_dir, 1, 30 * KiB);
	make_step(ckpt_dir, 2, 30 * KiB);
	shipper_kick(s);
	wait_state(s, failures_at_least, 2, 10000, "failing");
	/* The trainer's final step, not yet scanned: flush finds it, and
	 * the bucket comes back while flush waits. */
	make_step(ckpt_dir, 3, 30 * KiB);
	cr_assert_eq(pthread_create(&clearer, NULL, clear_faults_later,
				    NULL), 0);
	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 15000, &e), 0, "%s", e.msg);
	cr_assert_lt(mono_ms() - t0, 15000);
	pthread_join(clearer, NULL);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, 3);
	cr_assert_eq(st.newest_committed, 3);
	cr_assert_eq(st.dropped, 2);
	expect_steps(url, "3:c:1");
	shipper_stop(s);
}

/* A trainer told to stop saved step 15 (its peers never finished it),
 * then the step the group agreed on, 14: 14 is the one to upload. */
Test(shipper, flush_uploads_a_final_step_older_than_the_one_before)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	struct err e;

	config_init(&c, file_url);
	make_step(ckpt_dir, 15, 20 * KiB);
	sleep_ms(50); /* a later clock tick for the second marker */
	make_step(ckpt_dir, 14, 20 * KiB);
	/* The first scan takes both at once. */
	s = start(&c);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s", e.msg);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, 14);
	cr_assert_eq(st.newest_committed, 14);
	cr_assert_eq(st.dropped, 1);
	expect_steps(file_url, "14:c:1");
	shipper_stop(s);
}

/* The same two markers made in one clock tick: which is the final step
 * cannot be told, so the flush uploads both. */
Test(shipper, flush_uploads_both_steps_whose_order_is_a_guess)
{
	const struct timespec t[2] = { { 1700000000, 0 }, { 1700000000, 0 } };
	char path[PATHLEN * 2];
	struct shipper_config c;
	struct shipper *s;
	struct err e;

	config_init(&c, file_url);
	write_step_dir(ckpt_dir, 15, 20 * KiB);
	write_step_dir(ckpt_dir, 14, 20 * KiB);
	for (uint64_t step = 14; step <= 15; step++) {
		mark_done(ckpt_dir, step);
		snprintf(path, sizeof(path), "%s/step-%llu.done", ckpt_dir,
			 (unsigned long long)step);
		cr_assert_eq(utimensat(AT_FDCWD, path, t, 0), 0, "%s",
			     strerror(errno));
	}
	s = start(&c);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s", e.msg);
	expect_steps(file_url, "14:c:1 15:c:1");
	shipper_stop(s);
}

Test(shipper, flush_preempts_an_older_upload_in_flight)
{
	const char *url = "gs://bkt/runs/preempt";
	struct shipper *s = start_stalled(url, 2, 1, 30 * KiB);
	struct err e;

	make_step(ckpt_dir, 2, 30 * KiB);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s",
		     e.msg);
	/* Step 1 gave way and was never stored. */
	expect_steps(url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, flush_times_out_during_an_outage)
{
	struct shipper *s = start_in_outage("gs://bkt/runs/timeout");
	struct err e;
	uint64_t t0, took;

	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 1500, &e), CLOUD_ETIMEDOUT, "%s",
		     e.msg);
	took = mono_ms() - t0;
	cr_assert(took >= 1490 && took < 2500, "took %llu ms",
		  (unsigned long long)took);
	cr_assert(strstr(e.msg, "step 1"), "%s", e.msg);
	cr_assert(strstr(e.msg, "503"), "%s", e.msg);
	stop_within(s, 1000);
}

Test(shipper, reset_drops_waiting_steps)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/reset";

	start_fake();
	faults(OUTAGE);
	config_init(&c, url);
	c.poll_ms = 60000;
	s = start(&c);
	for (uint64_t i = 1; i <= 3; i++)
		make_step(ckpt_dir, i, 20 * KiB);
	shipper_kick(s);
	wait_state(s, done_is, 3, 5000, "taken");
	wait_state(s, failures_at_least, 1, 5000, "failing");
	make_step(ckpt_dir, 4, 20 * KiB); /* done, not yet taken */
	write_step_dir(ckpt_dir, 5, 1 * KiB); /* in progress */

	shipper_reset(s);
	shipper_get(s, &st);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.newest_done, -1);
	cr_assert_eq(st.newest_uploaded, -1);
	cr_assert_eq(st.failures, 0);
	cr_assert(!exists("%s/step-4", ckpt_dir));
	cr_assert(!exists("%s/step-4.done", ckpt_dir));
	cr_assert(exists("%s/step-5", ckpt_dir));
	wait_spool_entries(0, 5000);

	/* The new generation starts lower; nothing old goes up. */
	clear_faults();
	cr_assert_eq(sh("rm -rf '%s/step-5'", ckpt_dir), 0);
	make_step(ckpt_dir, 2, 20 * KiB);
	shipper_kick(s);
	wait_state(s, committed_is, 2, 10000, "committed");
	sleep_ms(200);
	expect_steps(url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, reset_aborts_the_upload_in_flight)
{
	const char *url = "gs://bkt/runs/reset2";
	struct shipper *s = start_stalled(url, 1.5, 4, 20 * KiB);
	struct shipper_state st;

	shipper_reset(s);
	shipper_get(s, &st);
	cr_assert_eq(st.waiting, 0);
	sleep_ms(2500); /* the stalled request is over */
	wait_spool_entries(0, 5000);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, -1);
	expect_steps(url, "");
	shipper_stop(s);
}

Test(shipper, stop_is_prompt_mid_upload)
{
	struct shipper_config c;
	struct shipper *s;
	struct store *store;
	struct store_object o;
	const char *url = "gs://bkt/runs/stop";
	struct err e;
	char *log = NULL;
	uint64_t t0;

	start_fake();
	/* Every piece of the parallel upload (8 MiB) takes 0.4 s to be
	 * answered. */
	faults("{\"action\": \"stall\", \"seconds\": 0.4, \"method\": \"POST\", "
	       "\"path\": \"uploadType=media\", \"times\": -1}");
	config_init(&c, url);
	s = start(&c);
	make_step(ckpt_dir, 1, 40 * MiB);
	wait_state(s, done_is, 1, 10000, "taken");
	/* Wait for the first piece to be on its way. */
	for (t0 = mono_ms();; sleep_ms(20)) {
		cr_assert_eq(fake_gcs_call(&fake, "GET", "/_fake/requests",
					   NULL, &log), 200);
		bool put = strstr(log, "\"media\"") != NULL;
		free(log);
		if (put)
			break;
		cr_assert_lt(mono_ms() - t0, 10000, "no piece sent");
	}
	stop_within(s, 1000);
	/* The part never appeared. */
	sleep_ms(700);
	store = open_store(url);
	cr_assert_eq(store_stat(store,
				"checkpoints/step-0000000001/"
				"slice-0-worker-0.tar.zst", &o, &e),
		     CLOUD_ENOTFOUND, "%s", e.msg);
	store_close(store);
}

Test(shipper, stop_is_prompt_inside_a_stalled_request)
{
	stop_within(start_stalled("gs://bkt/runs/stall", 3, 1, 10 * KiB),
		    1200);
	/* The abandoned upload ends with the stall, cancelled. */
	sleep_ms(3500);
	expect_steps("gs://bkt/runs/stall", "");
}

Test(shipper, stop_is_prompt_during_an_outage)
{
	struct shipper *s = start_in_outage("gs://bkt/runs/outage-stop");

	wait_state(s, failures_at_least, 3, 10000, "failing");
	stop_within(s, 1000);
}

Test(shipper, worker_0_prunes_to_keep)
{
	struct shipper_config c;
	struct shipper *s;

	config_init(&c, file_url);
	c.prune = true;
	c.keep = 2;
	c.keep_every = 3;
	s = start(&c);
	commit_each(s, 7);
	/* Pruning follows each commit; give the last one a moment. */
	for (uint64_t until = mono_ms() + 5000;; sleep_ms(20)) {
		struct store *st = open_store(file_url);
		char got[256];

		describe_steps(st, got, sizeof(got));
		store_close(st);
		if (!strcmp(got, "3:c:1 6:c:1 7:c:1"))
			break;
		cr_assert_lt(mono_ms(), until, "after pruning: %s", got);
	}
	shipper_stop(s);
}

Test(shipper, other_workers_do_not_prune)
{
	struct shipper_config c;
	struct shipper *s;

	config_init(&c, file_url);
	c.keep = 1;
	s = start(&c);
	commit_each(s, 3);
	sleep_ms(200);
	expect_steps(file_url, "1:c:1 2:c:1 3:c:1");
	shipper_stop(s);
}

Test(shipper, odd_names_and_markers_without_steps)
{
	static const char *const garbage[] = {
		"step-x.done", "step-.done", "step-01.done", "step--1.done",
		"step-1.done.tmp", "stepx-1.done", ".done", "step-1done",
		"step-99999999999999999999.done", "step-1 .done",
	};
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	char path[PATHLEN * 2];

	for (size_t i = 0; i < sizeof(garbage) / sizeof(*garbage); i++) {
		snprintf(path, sizeof(path), "%s/%s", ckpt_dir, garbage[i]);
		touch(path);
	}
	write_step_dir(ckpt_dir, 1, 1 * KiB);
	snprintf(path, sizeof(path), "%s/step-01", ckpt_dir);
	cr_assert_eq(mkdir(path, 0755), 0);
	mark_done(ckpt_dir, 9);          /* a marker without its step */
	write_step_dir(ckpt_dir, 4, 1 * KiB); /* in progress */
	snprintf(path, sizeof(path), "%s/step-6", ckpt_dir);
	touch(path);                     /* not a directory */
	mark_done(ckpt_dir, 6);
	/* Leftovers of an earlier supervisor in the spool. */
	cr_assert_eq(sh("mkdir -p '%s/step-8/sub' '%s/.trash-1-1' && "
			"echo x > '%s/step-8/sub/f' && chmod 500 "
			"'%s/step-8/sub'", spool_dir, spool_dir, spool_dir,
			spool_dir), 0);
	cr_assert_eq(sh("touch '%s/keep-me'", spool_dir), 0);

	config_init(&c, file_url);
	s = start(&c);
	make_step(ckpt_dir, 2, 10 * KiB);
	st = wait_state(s, committed_is, 2, 10000, "committed");
	sleep_ms(300);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_done, 2);
	cr_assert_eq(st.dropped, 0);
	cr_assert(!exists("%s/step-9.done", ckpt_dir));
	cr_assert(!exists("%s/step-6.done", ckpt_dir));
	cr_assert(exists("%s/step-6", ckpt_dir));
	cr_assert(exists("%s/step-4", ckpt_dir));
	cr_assert(exists("%s/step-1", ckpt_dir));
	cr_assert(exists("%s/step-01", ckpt_dir));
	for (size_t i = 0; i < sizeof(garbage) / sizeof(*garbage); i++)
		cr_assert(exists("%s/%s", ckpt_dir, garbage[i]), "%s",
			  garbage[i]);
	/* Only what the shipper owns is cleared from the spool. */
	cr_assert(!exists("%s/step-8", spool_dir));
	cr_assert(!exists("%s/.trash-1-1", spool_dir));
	cr_assert(exists("%s/keep-me", spool_dir));
	expect_steps(file_url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, start_refuses_a_bad_url)
{
	struct shipper_config c;
	struct shipper *s = (struct shipper *)&c;
	struct err e;

	config_init(&c, "s3://nope/run");
	cr_assert_eq(shipper_start(&s, &c, &e), CLOUD_EURL, "%s", e.msg);
	cr_assert_null(s);
	cr_assert(strstr(e.msg, "s3://nope/run"), "%s", e.msg);
}
