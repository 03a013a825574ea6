/*
 * RUN/watch.lease's record (launcher/lease_record.c): what it writes
 * reads back the same, and every shape that is no lease is refused with
 * what is wrong, never a crash.
 */
#include "launcher/lease_record.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

Test(lease_record, what_is_written_reads_back)
{
	struct lease_record r = { .expires_ms = 1764320000123,
				  .lease_ms = 30000 }, back;
	char *text = NULL;
	struct err e;

	snprintf(r.holder, sizeof(r.holder), "host:42:cafe0001");
	snprintf(r.acquired, sizeof(r.acquired), "2025-11-28T09:00:00.000Z");
	snprintf(r.note.about, sizeof(r.note.about), "qr-1");
	snprintf(r.note.why, sizeof(r.note.why), "SUSPENDED");
	r.note.from_generation = 7;
	r.note.body = strdup("{\"tpu\": {}}");
	cr_assert_eq(lease_record_text(&r, &text, &e), 0, "%s", e.msg);
	cr_assert_eq(lease_record_parse(text, strlen(text), &back, &e), 0,
		     "%s\n%s", e.msg, text);
	cr_assert_str_eq(back.holder, r.holder);
	cr_assert_str_eq(back.acquired, r.acquired);
	cr_assert_eq(back.expires_ms, r.expires_ms);
	cr_assert_eq(back.lease_ms, r.lease_ms);
	cr_assert_str_eq(back.note.about, "qr-1");
	cr_assert_str_eq(back.note.why, "SUSPENDED");
	cr_assert_eq(back.note.from_generation, 7);
	cr_assert_str_eq(back.note.body, "{\"tpu\": {}}");
	cr_assert_not_null(strstr(text, "\"expires\": \"2025-11-28T"));
	lease_note_release(&back.note);
	lease_note_release(&r.note);
	free(text);

	/* No recreation under way: null, read back as none. */
	cr_assert_eq(lease_record_text(&r, &text, &e), 0, "%s", e.msg);
	cr_assert_not_null(strstr(text, "\"recreating\": null"), "%s", text);
	cr_assert_eq(lease_record_parse(text, strlen(text), &back, &e), 0);
	cr_assert_str_eq(back.note.about, "");
	cr_assert_null(back.note.body);
	free(text);
}

Test(lease_record, what_is_no_lease_is_refused_saying_why)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "", "not JSON" },
		{ "{\"holder\": tru", "not JSON" },
		{ "[1, 2]", "lacks a \"holder\"" },
		{ "{}", "lacks a \"holder\"" },
		{ "{\"holder\": \"\", \"expires_ms\": 1, \"lease_ms\": 1}",
		  "lacks a \"holder\"" },
		{ "{\"holder\": 3, \"expires_ms\": 1, \"lease_ms\": 1}",
		  "lacks a \"holder\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": \"soon\", "
		  "\"lease_ms\": 1}", "\"expires_ms\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": 1, \"lease_ms\": 0}",
		  "\"lease_ms\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": 1, "
		  "\"lease_ms\": 99999999999}", "\"lease_ms\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": 1, \"lease_ms\": 1, "
		  "\"recreating\": \"qr\"}", "\"recreating\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": 1, \"lease_ms\": 1, "
		  "\"recreating\": {\"about\": \"qr\"}}", "\"recreating\"" },
		{ "{\"holder\": \"h\", \"expires_ms\": 1, \"lease_ms\": 1, "
		  "\"recreating\": {\"about\": \"qr\", \"from_generation\": 1, "
		  "\"body\": 5}}", "\"recreating\"" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct lease_record r;
		struct err e;

		err_init(&e);
		cr_assert_eq(lease_record_parse(bad[i].text,
						strlen(bad[i].text), &r, &e),
			     COMMON_EINVAL, "%s", bad[i].text);
		cr_assert_not_null(strstr(e.msg, bad[i].says), "%s: %s",
				   bad[i].text, e.msg);
		cr_assert_null(r.note.body);
	}
}
