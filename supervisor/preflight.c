/*
 * preflight.c: job.json's "preflight", run on this host before each
 * generation's trainer (docs/DESIGN.md, "Preflights"). It is a trainer
 * in all but name: the same /bin/sh -c in a process group of its own,
 * the same environment and working directory, its output in the same
 * log, so it goes in the trainer's slot and the loop drains and reaps it
 * as it would the trainer. What a failure leads to is the table's
 * (supervise_table.c); this file starts it, judges it and records the
 * verdict.
 */
#include "supervisor/sup.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Of the preflight's output, the event keeps at most this much of its
 * end: an event's details are 256 bytes in all. */
#define TAIL_BYTES 160
#define TAIL_LINES 3
/* The wait before a failed preflight asks the group to restart, unless
 * SLICE_PREFLIGHT_BACKOFF_MS says otherwise. */
#define BACKOFF_MS 10000

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_size;
}

enum sup_phase sup_start_preflight(struct sup *s, const char *dir)
{
	s->preflight_from = file_size(s->log_path);
	if (!sup_spawn(s, "preflight", s->job.preflight, dir))
		return s->phase;
	/* A supervisor restarted now finds it as an orphan and ends it. */
	sup_save_state(s);
	sup_set_phase(s, P_PREFLIGHT, NULL);
	s->deadline_ms = mono_ms() + (uint64_t)s->job.preflight_timeout_s * 1000;
	snprintf(s->message, sizeof(s->message),
		 "preflight for generation %lld", (long long)s->generation);
	log_info("preflight started (pid %ld, generation %lld, at most %u s)",
		 (long)s->trainer.pid, (long long)s->generation,
		 s->job.preflight_timeout_s);
	sup_publish(s);
	return P_PREFLIGHT;
}

/* The last TAIL_LINES lines of what the preflight wrote to the log, at
 * most max bytes, cut at a character's start. */
static void output_tail(const struct sup *s, char *out, size_t max)
{
	char buf[TAIL_BYTES * 4];
	off_t size = file_size(s->log_path), from = s->preflight_from;
	ssize_t n = 0;
	size_t len, start;
	int fd, lines = 0;

	out[0] = 0;
	if (size - from > (off_t)sizeof(buf) - 1)
		from = size - (off_t)sizeof(buf) + 1;
	fd = open(s->log_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = pread(fd, buf, sizeof(buf) - 1, from);
		close(fd);
	}
	if (n <= 0)
		return;
	len = (size_t)n;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ' ||
		       buf[len - 1] == '\r'))
		len--;
	start = len;
	while (start && !(buf[start - 1] == '\n' && ++lines == TAIL_LINES))
		start--;
	if (len - start > max)
		start = len - max;
	while (start < len && ((unsigned char)buf[start] & 0xc0) == 0x80)
		start++;
	memcpy(out, buf + start, len - start);
	out[len - start] = 0;
}

/* {"host": H, "output": TAIL} within an event's details, the output
 * shortened from its start until it fits. */
static void failure_details(const char *host, const char *tail, char *out,
			    size_t len)
{
	size_t skip = 0, n = strlen(tail);

	out[0] = 0;
	for (;;) {
		json_t *o;
		char *text;

		while (skip < n && ((unsigned char)tail[skip] & 0xc0) == 0x80)
			skip++;
		o = json_pack("{s:s, s:s}", "host", host, "output",
			      tail + skip);
		text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!text)
			return;
		if (strlen(text) < len || skip >= n) {
			if (strlen(text) < len)
				snprintf(out, len, "%s", text);
			free(text);
			return;
		}
		free(text);
		skip += 16;
	}
}

bool sup_preflight_verdict(struct sup *s, bool timed_out, char *why,
			   size_t len)
{
	char how[64], host[64] = "", tail[TAIL_BYTES + 1], details[256];
	int status;

	if (timed_out)
		snprintf(how, sizeof(how), "timed out after %u s",
			 s->job.preflight_timeout_s);
	/* Its whole group goes, passed or not: nothing of it may linger
	 * beside the trainer. */
	trainer_release(&s->trainer);
	status = s->trainer.status;
	trainer_init(&s->trainer);
	sup_save_state(s);
	if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		s->preflight_passed = s->generation;
		log_info("preflight passed");
		sup_note(s, "preflight", -1, "passed", NULL);
		return true;
	}
	if (!timed_out)
		trainer_describe_status(status, how, sizeof(how));
	snprintf(host, sizeof(host), "%s", s->id.host);
	output_tail(s, tail, TAIL_BYTES);
	failure_details(host, tail, details, sizeof(details));
	sup_note(s, "preflight_fail", -1, how, details[0] ? details : NULL);
	snprintf(why, len, "preflight failed on %.64s (%.64s)%s%.100s", host,
		 how, tail[0] ? ": " : "",
		 tail[0] ? strrchr(tail, '\n') ? strrchr(tail, '\n') + 1 : tail
			 : "");
	log_error("%s", why);
	return false;
}

unsigned sup_preflight_backoff_ms(void)
{
	return env_number("SLICE_PREFLIGHT_BACKOFF_MS", 0, 3600000UL,
			  BACKOFF_MS);
}
