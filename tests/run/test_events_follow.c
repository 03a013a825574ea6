/*
 * Following the history (run.h, events_follow): each call reads only the
 * objects no earlier call read, and hands back the same history
 * events_list gives: new objects between calls (a late batch too), a
 * batch written twice counted once, objects deleted after they were read.
 */
#include "run/run.h"
#include "cloud/cloud.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char root[1024];
static struct store *s;
static struct events_follower *f;

static void setup(void)
{
	char url[1100];
	struct err e;

	cr_assert_eq(make_temp_dir(root, sizeof(root), "follow"), 0);
	log_setup("test_events_follow", LOG_ERROR);
	snprintf(url, sizeof(url), "file://%s/run", root);
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	cr_assert_eq(events_follower_new(&f, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
	events_follower_free(f);
	if (s)
		store_close(s);
	if (root[0])
		rm_rf(root);
}

TestSuite(follow, .init = setup, .fini = teardown, .timeout = 60);

/* events/NAME.json holding one event of writer w at second sec. */
static void put(const char *name, const char *w, const char *kind, int sec)
{
	char obj[200], text[400];
	struct err e;

	snprintf(obj, sizeof(obj), "events/%s.json", name);
	snprintf(text, sizeof(text),
		 "{\"writer\":\"%s\",\"events\":[{\"time\":"
		 "\"2026-11-28T01:00:%02d.000Z\",\"kind\":\"%s\","
		 "\"worker\":\"%s\"}]}", w, sec, kind, w);
	cr_assert_eq(store_put(s, obj, text, strlen(text), STORE_CREATE_ONLY,
			       NULL, &e), 0, "%s", e.msg);
}

/* Follows once and checks the kinds, in order, against want. */
static void expect(const char *const *want, size_t nwant)
{
	const struct event *v;
	size_t n;
	struct err e;

	cr_assert_eq(events_follow(f, s, &v, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, nwant, "%zu events, not %zu", n, nwant);
	for (size_t i = 0; i < n; i++)
		cr_expect_str_eq(v[i].kind, want[i], "event %zu", i);
}

Test(follow, an_empty_history)
{
	expect(NULL, 0);
	cr_expect_eq(events_follower_objects(f), 0);
}

Test(follow, reads_only_the_objects_that_are_new)
{
	static const char *const first[] = { "boot", "start" };
	static const char *const then[] = { "boot", "late", "start",
					    "exit" };
	struct event *all;
	const struct event *v;
	size_t n, nall;
	struct err e;

	put("000001-0000000010-a", "a", "boot", 10);
	put("000001-0000000020-a", "a", "start", 20);
	expect(first, 2);
	cr_expect_eq(events_follower_objects(f), 2);
	expect(first, 2);
	cr_expect_eq(events_follower_objects(f), 2, "nothing new read");
	/* A new batch, and a late one of another writer from before. */
	put("000001-0000000030-a", "a", "exit", 30);
	put("000001-0000000040-b", "b", "late", 15);
	expect(then, 4);
	cr_expect_eq(events_follower_objects(f), 4);
	/* The same history as reading every object. */
	cr_assert_eq(events_list(s, &all, &nall, &e), 0, "%s", e.msg);
	cr_assert_eq(events_follow(f, s, &v, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, nall);
	cr_expect_eq(memcmp(v, all, n * sizeof(*v)), 0);
	free(all);
}

Test(follow, a_batch_written_twice_counts_once)
{
	static const char *const want[] = { "boot", "exit" };

	put("000001-0000000010-a", "a", "boot", 10);
	expect(want, 1);
	/* The retry of a write whose answer was lost, seen a call later. */
	put("000001-0000000011-a", "a", "boot", 10);
	put("000001-0000000030-a", "a", "exit", 30);
	expect(want, 2);
	expect(want, 2);
}

Test(follow, an_object_deleted_after_it_was_read_keeps_its_events)
{
	static const char *const want[] = { "boot", "start", "exit" };
	struct err e;

	put("000001-0000000010-a", "a", "boot", 10);
	put("000001-0000000020-a", "a", "start", 20);
	expect(want, 2);
	cr_assert_eq(store_delete(s, "events/000001-0000000010-a.json",
				  STORE_ANY_GENERATION, &e), 0, "%s", e.msg);
	put("000001-0000000030-a", "a", "exit", 30);
	expect(want, 3);
	cr_expect_eq(events_follower_objects(f), 3);
}
