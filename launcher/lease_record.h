/*
 * lease_record.h (private to launcher/): RUN/watch.lease's JSON, written
 * and read back (docs/DESIGN.md "watch.lease"): who holds the watch, until
 * when, and the recreation under way. Nothing here touches the store.
 */
#ifndef SLICECTL_LAUNCHER_LEASE_RECORD_H
#define SLICECTL_LAUNCHER_LEASE_RECORD_H

#include "common/common.h"
#include "launcher/watch_lease.h"

#include <stdint.h>

struct lease_record {
	char holder[320];     /* HOST:PID:RANDOM */
	char acquired[40];    /* RFC 3339: when this holder took it */
	int64_t expires_ms;   /* Unix time in ms, by the holder's clock */
	unsigned lease_ms;
	struct lease_note note;
};

/* The Unix time now, in ms. */
int64_t lease_wall_ms(void);
/* "YYYY-MM-DDTHH:MM:SS.mmmZ" of a Unix time in ms. */
void lease_time_text(int64_t ms, char *out, size_t cap);

/* The record as JSON text (*out malloc'd). */
int lease_record_text(const struct lease_record *r, char **out,
		      struct err *e);
/* Parses text into r (r->note.body malloc'd): COMMON_EINVAL with e
 * saying what is wrong when it is not such a record. */
int lease_record_parse(const char *text, size_t len, struct lease_record *r,
		       struct err *e);

#endif
