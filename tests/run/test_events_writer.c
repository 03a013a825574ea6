/*
 * tests/run/test_events_writer.c: the run's events writer is a handle
 * (run/run.h), not a process's: two writers in one process keep their
 * own queue, spool and objects, stopping one leaves the other writing,
 * and what is recorded without a writer is written at once however many
 * writers are open. Against a file:// store.
 */
#include "run/run.h"
#include "cloud/cloud.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char root[1024], url[1100];

static void setup(void)
{
	cr_assert_eq(make_temp_dir(root, sizeof(root), "events-writer"), 0);
	snprintf(url, sizeof(url), "file://%s/run", root);
	cr_assert_eq(sh("mkdir -p '%s/a' '%s/b'", root, root), 0);
	log_setup("test_events_writer", LOG_ERROR);
}

static void teardown(void)
{
	if (root[0])
		rm_rf(root);
}

TestSuite(events_writer, .init = setup, .fini = teardown, .timeout = 60);

static struct events_writer *start(const char *name, const char *spool)
{
	struct events_writer *w;
	char dir[1200];
	struct err e;

	snprintf(dir, sizeof(dir), "%s/%s", root, spool);
	cr_assert_eq(events_writer_start(&w, url, name, dir, &e), 0, "%s",
		     e.msg);
	cr_assert_not_null(w);
	return w;
}

static void record(struct events_writer *w, const char *who,
		   const char *kind, int64_t step)
{
	struct event ev;
	struct err e;

	event_init(&ev, kind, 1, who);
	ev.step = step;
	cr_assert_eq(event_record(w, NULL, &ev, &e), 0, "%s", e.msg);
}

static int by_text(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The kinds of the events in the objects written under writer's name,
 * sorted ("kind,kind,..."; a batch's name orders by its first event's
 * generation, not by time); every one of those objects must say it is
 * writer's. */
static void kinds_of(const char *writer, char *out, size_t cap)
{
	char dir[1200], path[1500], tail[96], *kinds[64];
	size_t nk = 0, tl;
	struct dirent *d;
	DIR *dp;

	out[0] = '\0';
	snprintf(dir, sizeof(dir), "%s/run/events", root);
	snprintf(tail, sizeof(tail), "-%s.json", writer);
	tl = strlen(tail);
	dp = opendir(dir);
	while (dp && (d = readdir(dp))) {
		size_t len = strlen(d->d_name), k;
		json_t *doc, *it;
		char *text;

		if (len <= tl || strcmp(d->d_name + len - tl, tail))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		text = read_file(path, NULL);
		cr_assert_not_null(text, "%s", path);
		doc = json_loads(text, 0, NULL);
		free(text);
		cr_assert_not_null(doc, "%s", path);
		cr_expect_str_eq(json_string_value(json_object_get(doc,
								   "writer")),
				 writer, "%s", d->d_name);
		json_array_foreach(json_object_get(doc, "events"), k, it) {
			const char *kind = json_string_value(
				json_object_get(it, "kind"));

			cr_assert_lt(nk, 64);
			kinds[nk] = strdup(kind ? kind : "?");
			cr_assert_not_null(kinds[nk]);
			nk++;
		}
		json_decref(doc);
	}
	if (dp)
		closedir(dp);
	qsort(kinds, nk, sizeof(*kinds), by_text);
	for (size_t i = 0; i < nk; i++) {
		snprintf(out + strlen(out), cap - strlen(out), "%s%s",
			 i ? "," : "", kinds[i]);
		free(kinds[i]);
	}
}

static unsigned spool_lines(const char *spool)
{
	char path[1200];
	char *text;
	unsigned k;

	snprintf(path, sizeof(path), "%s/%s/events.spool", root, spool);
	text = read_file(path, NULL);
	k = text ? (unsigned)count_substr(text, "\n") : 0;
	free(text);
	return k;
}

Test(events_writer, two_writers_in_one_process_share_nothing)
{
	struct events_writer *a = start("slice-0-worker-0", "a");
	struct events_writer *b = start("slice-0-worker-1", "b");
	struct control seen, out;
	char got[512];
	struct store *s;
	struct err e;

	record(a, "slice-0-worker-0", "boot", -1);
	record(b, "slice-0-worker-1", "boot", -1);
	record(a, "slice-0-worker-0", "progress", 5);

	/* A change to control.json goes through the writer it is given. */
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	cr_assert_eq(control_load(s, &seen, &e), 0, "%s", e.msg);
	cr_assert_eq(control_bump(s, b, &seen, 10, "a crash",
				  "slice-0-worker-1", -1, &out, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(out.generation, 2);

	/* Stopping a writes all of a's and none of b's; b goes on. */
	events_writer_stop(a, mono_ms() + 20000);
	cr_expect_eq(spool_lines("a"), 0);
	kinds_of("slice-0-worker-0", got, sizeof(got));
	cr_expect_str_eq(got, "boot,progress");
	record(b, "slice-0-worker-1", "exit", 7);
	events_writer_stop(b, mono_ms() + 20000);
	cr_expect_eq(spool_lines("b"), 0);
	kinds_of("slice-0-worker-1", got, sizeof(got));
	cr_expect_str_eq(got, "boot,bump,exit");
	store_close(s);
}

Test(events_writer, without_a_writer_an_event_is_written_at_once)
{
	struct events_writer *a = start("slice-0-worker-0", "a");
	struct control seen, out;
	char got[512];
	struct store *s;
	struct err e;

	/* An open writer does not take what is recorded without it. */
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	cr_assert_eq(control_load(s, &seen, &e), 0, "%s", e.msg);
	cr_assert_eq(event_record_as(s, "slicectl", "recreated", 1, "why",
				     NULL, &e), 0, "%s", e.msg);
	kinds_of("slicectl", got, sizeof(got));
	cr_expect_str_eq(got, "recreated");
	cr_assert_eq(control_set_state(s, NULL, "stopping", "by hand",
				       "slicectl", &out, &e), 0, "%s", e.msg);
	kinds_of("slicectl", got, sizeof(got));
	cr_expect_str_eq(got, "recreated,stopping");
	events_writer_stop(a, mono_ms() + 20000);
	kinds_of("slice-0-worker-0", got, sizeof(got));
	cr_expect_str_eq(got, "");
	store_close(s);
}
