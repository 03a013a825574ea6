/*
 * slicectl report: the page of a real local chaos run (crash, hang,
 * preemption, reset) as Debian's chromium renders it (its DOM: one lane
 * per worker, one mark per generation with its cause, the commits the
 * bucket holds, the goodput bar and where the time went along the lanes;
 * and a PNG to look at), and the page of a week-long run of
 * 1024 synthetic workers within a bounded size.
 */
#include "checkpoint/checkpoint.h"
#include "cloud/cloud.h"
#include "run/run.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[HARNESS_PATH];

static void setup(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "report"), 0);
	log_setup("test_report", LOG_ERROR);
}

static void teardown(void)
{
	if (dir[0])
		rm_rf(dir);
	cr_expect_eq(processes_mentioning(dir), 0);
}

TestSuite(report, .init = setup, .fini = teardown, .timeout = 900);

static struct store *open_store(const char *url)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

static void put(struct store *s, const char *name, const char *text)
{
	struct err e;

	cr_assert_eq(store_put(s, name, text, strlen(text),
			       STORE_ANY_GENERATION, NULL, &e), 0, "%s",
		     e.msg);
}

/* ---- 1024 synthetic workers, a week ---- */

#define SLICES 128
#define WPS 8
#define WEEK (7 * 86400)
#define BUMPS 12

/* Run `name` in dir's bucket with a job.json of slices x wps workers:
 * its store (to store_close), bucket into bucket and page into out. */
static struct store *new_run(const char *name, unsigned slices, unsigned wps,
			     char *bucket, size_t bcap, char *out, size_t ocap)
{
	char url[HARNESS_PATH + 128], *text;
	struct store *s;
	struct job j;
	struct err e;

	snprintf(bucket, bcap, "file://%s/bucket", dir);
	snprintf(url, sizeof(url), "%s/%s", bucket, name);
	snprintf(out, ocap, "%s/%s.html", dir, name);
	s = open_store(url);
	job_init(&j);
	j.name = strdup(name);
	j.command = strdup("true");
	j.num_slices = slices;
	j.workers_per_slice = wps;
	j.max_restarts = 100;
	cr_assert_eq(job_to_json(&j, &text, &e), 0);
	put(s, RUN_JOB, text);
	free(text);
	job_release(&j);
	return s;
}

static void iso(time_t t0, double at, char *out, size_t cap)
{
	time_t s = t0 + (time_t)at;
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)((at - (double)(long)at) * 1000));
}

static void add(json_t *a, time_t t0, double at, const char *kind,
		int64_t gen, const char *worker, const char *cause,
		int64_t step)
{
	char t[96];

	iso(t0, at, t, sizeof(t));
	json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, "
					   "s:s, s:{}}", "time", t, "kind",
					   kind, "generation",
					   (json_int_t)gen, "worker", worker,
					   "cause", cause, "step",
					   (json_int_t)step, "by", worker,
					   "details"));
}

/* One batch object per writer: what a week of a healthy writer costs in
 * content, if not in objects. */
static void put_batch(struct store *s, const char *writer, int seq,
		      json_t *a)
{
	char name[200];
	char *text;
	json_t *o = json_pack("{s:s, s:o}", "writer", writer, "events", a);

	snprintf(name, sizeof(name), "events/000001-%010d-%s.json", seq,
		 writer);
	text = json_dumps(o, JSON_COMPACT);
	cr_assert(text);
	put(s, name, text);
	free(text);
	json_decref(o);
}

static double bump_at(int k)
{
	return (double)WEEK * (k + 1) / (BUMPS + 1);
}

Test(report, a_week_of_1024_workers_stays_small)
{
	char out[HARNESS_PATH + 32], bucket[HARNESS_PATH + 32];
	struct store *s = new_run("week", SLICES, WPS, bucket, sizeof(bucket),
				  out, sizeof(out));
	char *page;
	size_t len;
	time_t t0 = 1790000000;
	struct run_result r;

	for (unsigned p = 0; p < SLICES * WPS; p++) {
		char w[64];
		json_t *a = json_array();

		run_worker_name(p / WPS, p % WPS, w, sizeof(w));
		add(a, t0, 0.1 + p * 0.001, "boot", 0, w, "started", -1);
		add(a, t0, 2, "start", 1, w, "fresh", 0);
		for (int k = 0; k < BUMPS; k++) {
			double b = bump_at(k);

			/* Slice k's worker 3 fails first; slice k + 1 is
			 * preempted: only their lanes stand apart. */
			if (p / WPS == (unsigned)k && p % WPS == 3)
				add(a, t0, b - 40, "exit", k + 1, w, "exit 1",
				    -1);
			if (p / WPS == (unsigned)k + 1)
				add(a, t0, b - 300, "notice", k + 1, w,
				    "preempted", -1);
			add(a, t0, b + 30 + p % 7, "restore", k + 2, w, "",
			    (int64_t)(b / 10));
			add(a, t0, b + 60 + p % 7, "start", k + 2, w,
			    "restored", (int64_t)(b / 10));
			if (p == 0) {
				char cause[80];

				snprintf(cause, sizeof(cause),
					 "slice-%d-worker-3: its trainer ended",
					 k);
				add(a, t0, b, "bump", k + 2, w, cause, -1);
			}
		}
		put_batch(s, w, 1, a);
		/* Worker 0's progress, every minute for a week. */
		for (int day = 0; p == 0 && day < 7; day++) {
			a = json_array();
			for (double at = day * 86400 + 60;
			     at < (day + 1) * 86400; at += 60)
				add(a, t0, at, "progress", 1, w,
				    "SLICE_STEP_FILE", (int64_t)(at / 9));
			put_batch(s, w, 2 + day, a);
		}
	}
	store_close(s);
	{
		const char *argv[] = { "report", "week", "--bucket", bucket,
				       "--output", out, NULL };
		uint64_t t = mono_ms();

		cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
		cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
		fprintf(stderr, "report of 1024 workers, a week, %u events: "
			"%.1f s\n", (unsigned)(SLICES * WPS * (BUMPS * 2 + 2) +
					       WEEK / 60),
			(double)(mono_ms() - t) / 1000);
		run_result_release(&r);
	}
	page = read_file(out, &len);
	cr_assert(page);
	fprintf(stderr, "report of 1024 workers, a week: %zu bytes\n", len);
	/* Bounded: every slice that agrees is one lane. */
	cr_expect_lt(len, 1u << 20, "%zu bytes", len);
	if (getenv("REPORT_TEST_KEEP"))
		sh("cp '%s' '%s'", out, getenv("REPORT_TEST_KEEP"));
	cr_expect_eq(count_substr(page, "class=\"gen\""), BUMPS + 1);
	{
		/* Every worker is drawn, once: singles plus the workers
		 * of collapsed lanes. */
		size_t singles = count_substr(page, "data-worker=\"");
		size_t workers = singles;
		const char *at = page;

		while ((at = strstr(at, "data-workers=\""))) {
			at += strlen("data-workers=\"");
			workers += strtoul(at, NULL, 10);
		}
		cr_expect_eq(workers, SLICES * WPS);
		cr_expect_lt(count_substr(page, "<g class=\"lane"), 400);
	}
	free(page);
}

/* A quarantined host (issue 26) has its section, its name and why
 * escaped. */
Test(report, names_a_quarantined_host)
{
	char out[HARNESS_PATH + 32], bucket[HARNESS_PATH + 32];
	const char *argv[] = { "report", "q", "--bucket", bucket, "--output",
			       out, NULL };
	struct store *s = new_run("q", 1, 1, bucket, sizeof(bucket), out,
				  sizeof(out));
	struct run_result r;
	char *page;

	put(s, RUN_CONTROL,
	    "{\"generation\": 3, \"state\": \"running\", \"quarantined\": "
	    "[{\"generation\": 2, \"host\": \"node<7>\", \"why\": "
	    "\"log: Xid 79 & ECC\", \"worker\": \"slice-0-worker-1\"}]}");
	store_close(s);
	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.err);
	run_result_release(&r);
	page = read_file(out, NULL);
	cr_assert(page);
	cr_expect(strstr(page, "<h2>Quarantined hosts</h2>"));
	cr_expect(strstr(page, "data-host=\"node&lt;7&gt;\">node&lt;7&gt; "
			       "(worker slice-0-worker-1, generation 2): "
			       "log: Xid 79 &amp; ECC</li>"), "%s", page);
	cr_expect_not(strstr(page, "node<7>"));
	free(page);
}

/* ---- a local chaos run, in chromium ---- */

static const char *chromium(void)
{
	static const char *const names[] = { "/usr/bin/chromium",
					     "/usr/bin/chromium-browser" };

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (access(names[i], X_OK) == 0)
			return names[i];
	return NULL;
}

/* Values of attr="..." in order, in one string separated by '\n'. */
static size_t attrs(const char *page, const char *attr, char *out,
		    size_t cap)
{
	size_t n = 0, used = 0;
	const char *at = page;

	out[0] = 0;
	while ((at = strstr(at, attr))) {
		const char *end;

		at += strlen(attr);
		end = strchr(at, '"');
		if (!end)
			break;
		used += (size_t)snprintf(out + used, cap > used ? cap - used : 0,
					 "%.*s\n", (int)(end - at), at);
		n++;
	}
	return n;
}

Test(report, a_local_chaos_run_in_chromium)
{
	char bucket[HARNESS_PATH + 32], url[HARNESS_PATH + 64];
	char html[HARNESS_PATH + 32], png[HARNESS_PATH + 32];
	char profile[HARNESS_PATH + 32], home[HARNESS_PATH + 32];
	char sync[HARNESS_PATH + 32], env_home[HARNESS_PATH + 64];
	char page_url[HARNESS_PATH + 64], sync_env[HARNESS_PATH + 64];
	char src[HARNESS_PATH], list[8192];
	const char *browser = chromium();
	struct run_result r;
	struct control c;
	struct ckpt_list l;
	struct store *s;
	struct err e;
	size_t committed = 0;
	char *dom;

	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(url, sizeof(url), "%s/chaos", bucket);
	snprintf(html, sizeof(html), "%s/chaos.html", dir);
	snprintf(png, sizeof(png), "%s/chaos.png", dir);
	snprintf(profile, sizeof(profile), "%s/chromium", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(sync, sizeof(sync), "%s/sync", dir);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s", home);
	snprintf(sync_env, sizeof(sync_env), "SGD_SYNC_DIR=%s", sync);
	snprintf(page_url, sizeof(page_url), "file://%s", html);
	snprintf(src, sizeof(src), "%s/examples/sgd",
		 getenv("SLICECTL_SRCDIR") ? getenv("SLICECTL_SRCDIR") : ".");
	cr_assert_eq(mkdir(sync, 0777), 0);
	{
		const char *argv[] = {
			"job", "--local", "--name", "chaos", "--bucket",
			bucket, "--num-slices", "2", "--workers-per-slice",
			"2", "--script-dir", src, "--command",
			"exec python3 train.py", "--env", "SGD_STEPS=800",
			"--env", "SGD_STEP_S=0.02", "--env",
			"SGD_CKPT_EVERY=100", "--env", sync_env, "--env",
			"PYTHONUNBUFFERED=1", "--hang-timeout", "8s",
			"--grace", "5s", "--max-restarts", "20", "--chaos",
			"crash:worker=1@3s,hang:worker=2@6s,"
			"preempt:slice=1@9s,reset@12s", NULL
		};
		const char *env[] = { env_home, NULL };

		cr_assert_eq(run_slicectl(&r, argv, env), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		run_result_release(&r);
	}
	{
		const char *argv[] = { "report", "chaos", "--bucket", bucket,
				       "--output", html, NULL };

		cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		run_result_release(&r);
	}
	s = open_store(url);
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	store_close(s);
	cr_assert_geq(c.generation, 5, "crash, hang, preemption, reset: "
		      "%lld generations", (long long)c.generation);
	if (!browser) {
		ckpt_list_release(&l);
		cr_skip("chromium is not installed (scripts/deps installs "
			"it): the page was written but not rendered");
	}
	{
		char shot[HARNESS_PATH + 80], data[HARNESS_PATH + 80];
		const char *argv[] = {
			browser, "--headless", "--no-sandbox", "--disable-gpu",
			"--disable-background-networking",
			"--disable-component-update", "--disable-sync",
			"--no-first-run", data, "--window-size=1240,900",
			shot, "--dump-dom", page_url, NULL
		};

		snprintf(shot, sizeof(shot), "--screenshot=%s", png);
		snprintf(data, sizeof(data), "--user-data-dir=%s", profile);
		cr_assert_eq(run_program(&r, argv, NULL), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
	}
	dom = r.out;
	cr_assert(strstr(dom, "</svg>"), "no SVG in the DOM: %.300s", dom);
	/* One lane per worker, in order. */
	cr_expect_eq(attrs(dom, "data-worker=\"", list, sizeof(list)), 4);
	cr_expect_str_eq(list, "slice-0-worker-0\nslice-0-worker-1\n"
			 "slice-1-worker-0\nslice-1-worker-1\n");
	/* One mark per generation, each with its cause. */
	cr_expect_eq(attrs(dom, "data-generation=\"", list, sizeof(list)),
		     2 * (size_t)c.generation - 1, "marks and failure rows");
	cr_expect_eq(count_substr(dom, "class=\"gen\""), (size_t)c.generation);
	cr_expect_eq(count_substr(dom, "data-cause=\"\""), 0);
	cr_expect(strstr(dom, "its trainer ended"), "the crash's cause");
	cr_expect(strstr(dom, "hung"), "the hang's cause");
	/* The commits the bucket holds. */
	for (size_t i = 0; i < l.n; i++) {
		char mark[64];

		if (!l.v[i].committed)
			continue;
		committed++;
		snprintf(mark, sizeof(mark), "data-step=\"%llu\"",
			 (unsigned long long)l.v[i].step);
		cr_expect(strstr(dom, mark), "no mark for %s", mark);
	}
	cr_expect_gt(committed, 0);
	cr_expect_eq(count_substr(dom, "class=\"commit\""), committed);
	/* Where the time went: the bar (trained, and what the hang's
	 * timeout cost) and the strip along the top and every lane. */
	cr_expect(strstr(dom, "class=\"gp-trained\""), "no trained time");
	cr_expect(strstr(dom, "class=\"gp-hang_timeout\""), "no hang time");
	cr_expect(strstr(dom, "time went to"));
	cr_expect_geq(count_substr(dom, "class=\"went\""), 5,
		      "a strip along the top and each of the 4 lanes");
	ckpt_list_release(&l);
	run_result_release(&r);
	{
		struct stat st;

		cr_expect_eq(stat(png, &st), 0, "no screenshot");
		cr_expect_gt(st.st_size, 10000);
		/* Kept for a person to look at when asked. */
		if (getenv("REPORT_TEST_KEEP"))
			sh("cp '%s' '%s' '%s'", png, html,
			   getenv("REPORT_TEST_KEEP"));
	}
}
