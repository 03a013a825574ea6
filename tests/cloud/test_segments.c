/*
 * tests/cloud/test_segments.c: an append-only log as immutable segments
 * (store_segment_put, store_segments_read) through file://: read whole,
 * from any offset, followed as it grows, a restarted writer's repeat, a
 * gap left by the writer, and other objects beside the segments ignored;
 * and SLICECTL_STORE_TRACE, which bench/cost counts requests by.
 */
#include "cloud/cloud.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/slicectl-segments-XXXXXX";
static struct store *s;

static void setup(void)
{
	char url[sizeof(dir) + 8];
	struct err e;

	cr_assert(mkdtemp(dir));
	snprintf(url, sizeof(url), "file://%s", dir);
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
	char cmd[sizeof(dir) + 16];

	store_close(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(segments, .init = setup, .fini = teardown);

static int to_buf(void *ud, const void *data, size_t len, struct err *e)
{
	(void)e;
	return buf_append(ud, data, len) ? CLOUD_ENOMEM : 0;
}

/* The log from byte from, as a string; *end gets where it stopped. */
static char *read_from(uint64_t from, uint64_t *end)
{
	struct buf b;
	struct err e;

	buf_init(&b);
	cr_assert_eq(store_segments_read(s, "logs/w/gen-1/", from, to_buf, &b,
					 end, &e), 0, "%s", e.msg);
	if (buf_append(&b, "", 1))
		cr_assert_fail("out of memory");
	return buf_detach(&b);
}

/* Returns the size stored at off. */
static uint64_t put(uint64_t off, const char *text)
{
	uint64_t stored = 0;
	struct err e;

	cr_assert_eq(store_segment_put(s, "logs/w/gen-1/", off, text,
				       strlen(text), &stored, &e), 0, "%s",
		     e.msg);
	return stored;
}

Test(segments, read_whole_from_an_offset_and_followed)
{
	uint64_t end;
	char *got;
	struct err e;

	got = read_from(0, &end);
	cr_assert_str_eq(got, "");
	cr_assert_eq(end, 0);
	free(got);
	put(0, "line 1\n");
	put(7, "line 2\nline");
	got = read_from(0, &end);
	cr_assert_str_eq(got, "line 1\nline 2\nline");
	cr_assert_eq(end, 18);
	free(got);
	/* Following: only what came since. */
	put(18, " 3\n");
	got = read_from(end, &end);
	cr_assert_str_eq(got, " 3\n");
	cr_assert_eq(end, 21);
	free(got);
	got = read_from(3, NULL);
	cr_assert_str_eq(got, "e 1\nline 2\nline 3\n");
	free(got);
	/* A restarted writer sending a segment again changes nothing, and
	 * learns where to go on. */
	cr_assert_eq(put(7, "line 2\nline 3\n"), 11);
	/* Not a segment: ignored. */
	cr_assert_eq(store_put(s, "logs/w/gen-1/notes.txt", "x", 1,
			       STORE_ANY_GENERATION, NULL, &e), 0);
	/* The writer skipped bytes 21-99: the reader goes on after them. */
	put(100, "after the gap\n");
	got = read_from(0, &end);
	cr_assert_str_eq(got, "line 1\nline 2\nline 3\nafter the gap\n");
	cr_assert_eq(end, 114);
	free(got);
}

/* SLICECTL_STORE_TRACE (bench/cost counts requests by it): a line a
 * call, with its result and bytes. */
Test(segments, every_call_traced_when_asked)
{
	char path[sizeof(dir) + 16], url[sizeof(dir) + 8], want[64], *text;
	struct store *t;
	struct buf b;
	struct err e;

	snprintf(path, sizeof(path), "%s/trace", dir);
	snprintf(url, sizeof(url), "file://%s", dir);
	cr_assert_eq(setenv("SLICECTL_STORE_TRACE", path, 1), 0);
	cr_assert_eq(store_open(&t, url, &e), 0, "%s", e.msg);
	cr_assert_eq(unsetenv("SLICECTL_STORE_TRACE"), 0);
	cr_assert_eq(store_segment_put(t, "logs/w/gen-1/", 0, "hello\n", 6,
				       NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(store_segment_put(t, "logs/w/gen-1/", 0, "hello\n", 6,
				       NULL, &e), 0, "%s", e.msg);
	buf_init(&b);
	cr_assert_eq(store_segments_read(t, "logs/w/gen-1/", 0, to_buf, &b,
					 NULL, &e), 0, "%s", e.msg);
	buf_release(&b);
	store_close(t);
	/* Through the suite's store, which traces nothing. */
	cr_assert_eq(store_read(s, "trace", 1 << 16, &text, NULL, NULL, &e), 0,
		     "%s", e.msg);
	/* put, put refused (412), stat of what is there, list, get. */
	cr_assert(strstr(text, " put 0 6 file://"), "%s", text);
	snprintf(want, sizeof(want), " put %d 6 file://", CLOUD_EPRECONDITION);
	cr_assert(strstr(text, want), "%s", text);
	cr_assert(strstr(text, " stat 0 0 file://"), "%s", text);
	cr_assert(strstr(text, " list 0 0 file://"), "%s", text);
	cr_assert(strstr(text, " get 0 6 file://"), "%s", text);
	cr_assert(strstr(text, "/logs/w/gen-1/0000000000000000.seg\n"), "%s",
		  text);
	free(text);
}
