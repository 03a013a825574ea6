/*
 * supervisor/control.c: control.json, the run's generation and state,
 * changed only by compare-and-swap on the object's generation (control.h).
 *
 * Every change is read, modify, write-if-unchanged. A writer that loses
 * the race reads again and decides anew from what the winner wrote: a
 * bump whose failure another worker already bumped for stops there, so
 * one failure makes one new generation however many workers see it.
 */
#include "supervisor/control.h"

#include "checkpoint/checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONTROL_MAX ((size_t)64 << 10)
/* Attempts of one change before giving up, and the pause between them. */
#define CONTROL_TRIES 20
#define RETRY_BASE_MS 2
#define RETRY_MAX_MS 64

static const char *const control_states[] = { "running", "stopping", "done",
					      "failed" };

static bool state_known(const char *s)
{
	for (size_t i = 0; i < sizeof(control_states) / sizeof(*control_states);
	     i++)
		if (!strcmp(s, control_states[i]))
			return true;
	return false;
}

static void now_rfc3339(char *out, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;

	if (!gmtime_r(&now, &tm) ||
	    !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, cap, "1970-01-01T00:00:00Z");
}

/* Copies src into dst[cap], cut at a character boundary when too long. */
static void copy_text(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

static void pause_before_retry(struct backoff *b)
{
	unsigned ms = backoff_next_ms(b);
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void retry_init(struct backoff *b)
{
	uint64_t seed = mono_us() ^ ((uint64_t)getpid() << 32) ^
			(uint64_t)(uintptr_t)b;

	backoff_init(b, RETRY_BASE_MS, RETRY_MAX_MS, seed);
}

static int corrupt(struct store *s, struct err *e, const char *why)
{
	return err_set(e, CLOUD_ECORRUPT,
		       "%s is not a valid control object: %s; fix or remove "
		       "it by hand", store_url(s, RUN_CONTROL), why);
}

/* A string member into dst[cap]; missing (or null) leaves "". */
static int member_text(struct store *s, json_t *root, const char *key,
		       char *dst, size_t cap, struct err *e)
{
	json_t *v = json_object_get(root, key);
	char why[128];

	dst[0] = '\0';
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v)) {
		snprintf(why, sizeof(why), "\"%s\" is not a string", key);
		return corrupt(s, e, why);
	}
	copy_text(dst, cap, json_string_value(v));
	return 0;
}

static int control_parse(struct store *s, const char *data, size_t len,
			 struct control *c, struct err *e)
{
	json_error_t jerr;
	json_t *root = json_loadb(data, len, 0, &jerr);
	json_t *gen, *state, *step;
	char why[256];
	int r = 0;

	if (!root) {
		snprintf(why, sizeof(why), "line %d column %d: %s", jerr.line,
			 jerr.column, jerr.text);
		return corrupt(s, e, why);
	}
	gen = json_object_get(root, "generation");
	state = json_object_get(root, "state");
	step = json_object_get(root, "restore_step");
	if (!json_is_object(root))
		r = corrupt(s, e, "it is not a JSON object");
	else if (!json_is_integer(gen) || json_integer_value(gen) < 1)
		r = corrupt(s, e, "\"generation\" is not an integer >= 1");
	else if (!json_is_string(state) ||
		 !state_known(json_string_value(state)))
		r = corrupt(s, e, "\"state\" is not one of running, "
			    "stopping, done, failed");
	else if (step && !json_is_null(step) &&
		 (!json_is_integer(step) || json_integer_value(step) < 0))
		r = corrupt(s, e, "\"restore_step\" is neither null nor an "
			    "integer >= 0");
	if (!r) {
		c->generation = (int64_t)json_integer_value(gen);
		copy_text(c->state, sizeof(c->state),
			  json_string_value(state));
		c->restore_step = json_is_integer(step) ?
				  (int64_t)json_integer_value(step) : -1;
		r = member_text(s, root, "reason", c->reason,
				sizeof(c->reason), e);
	}
	if (!r)
		r = member_text(s, root, "updated_by", c->updated_by,
				sizeof(c->updated_by), e);
	if (!r)
		r = member_text(s, root, "time", c->time, sizeof(c->time), e);
	json_decref(root);
	return r;
}

/* The current control.json; CLOUD_ENOTFOUND when there is none. */
static int control_read(struct store *s, struct control *out, struct err *e)
{
	struct store_object o;
	char *data;
	size_t len;
	int r;

	memset(out, 0, sizeof(*out));
	out->restore_step = -1;
	r = store_read(s, RUN_CONTROL, CONTROL_MAX, &data, &len, &o, e);
	if (r == CLOUD_EINVAL)
		return corrupt(s, e, "it is larger than 64 KiB");
	if (r)
		return r;
	r = control_parse(s, data, len, out, e);
	free(data);
	if (!r)
		out->object_generation = o.generation;
	store_object_release(&o);
	return r;
}

static int control_text(const struct control *c, struct buf *b)
{
	int r = buf_appendf(b, "{\n  \"generation\": %lld,\n  \"state\": ",
			    (long long)c->generation);

	if (!r)
		r = json_append_string(b, c->state, strlen(c->state));
	if (!r)
		r = buf_appends(b, ",\n  \"reason\": ");
	if (!r)
		r = json_append_string(b, c->reason, strlen(c->reason));
	if (!r)
		r = buf_appends(b, ",\n  \"updated_by\": ");
	if (!r)
		r = json_append_string(b, c->updated_by,
				       strlen(c->updated_by));
	if (!r && c->restore_step >= 0)
		r = buf_appendf(b, ",\n  \"restore_step\": %lld",
				(long long)c->restore_step);
	else if (!r)
		r = buf_appends(b, ",\n  \"restore_step\": null");
	if (!r)
		r = buf_appends(b, ",\n  \"time\": ");
	if (!r)
		r = json_append_string(b, c->time, strlen(c->time));
	if (!r)
		r = buf_appends(b, "\n}\n");
	return r;
}

/* Writes c if control.json is still at if_gen (or create-only); sets
 * c->object_generation to the new object's. */
static int control_write(struct store *s, struct control *c, int64_t if_gen,
			 struct err *e)
{
	struct store_object o;
	struct buf b;
	int r;

	buf_init(&b);
	if (control_text(c, &b)) {
		buf_release(&b);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	r = store_put(s, RUN_CONTROL, b.data, b.len, if_gen, &o, e);
	buf_release(&b);
	if (r)
		return r;
	c->object_generation = o.generation;
	store_object_release(&o);
	return 0;
}

static int gave_up(struct store *s, struct err *e, const char *what)
{
	return err_set(e, CLOUD_EPRECONDITION,
		       "%s changed under every one of %d attempts to %s; "
		       "giving up", store_url(s, RUN_CONTROL), CONTROL_TRIES,
		       what);
}

int control_load(struct store *s, struct control *out, struct err *e)
{
	int r = 0;

	err_init(e);
	if (!s || !out)
		return err_set(e, CLOUD_EINVAL, "control_load: no %s",
			       s ? "result" : "store");
	for (int t = 0; t < CONTROL_TRIES; t++) {
		r = control_read(s, out, e);
		if (r != CLOUD_ENOTFOUND)
			return r;
		err_init(e);
		memset(out, 0, sizeof(*out));
		out->generation = 1;
		copy_text(out->state, sizeof(out->state), "running");
		copy_text(out->reason, sizeof(out->reason), "new run");
		out->restore_step = -1;
		now_rfc3339(out->time, sizeof(out->time));
		r = control_write(s, out, STORE_CREATE_ONLY, e);
		if (r != CLOUD_EPRECONDITION)
			return r;
		/* Another worker created it first: read theirs. */
	}
	return gave_up(s, e, "read or create it");
}

int control_bump(struct store *s, const struct control *seen,
		 unsigned max_restarts, const char *reason, const char *by,
		 int64_t restore_step, struct control *out, struct err *e)
{
	struct control cur, next;
	struct backoff b;
	int r;

	err_init(e);
	if (!s || !seen || !out)
		return err_set(e, CLOUD_EINVAL, "control_bump: missing "
			       "argument");
	if (restore_step < -1)
		return err_set(e, CLOUD_EINVAL,
			       "control_bump: restore step %lld is neither a "
			       "step nor -1", (long long)restore_step);
	retry_init(&b);
	for (int t = 0; t < CONTROL_TRIES; t++) {
		if (t)
			pause_before_retry(&b);
		r = control_read(s, &cur, e);
		if (r)
			return r;
		/* Someone bumped for this failure already, or the run is
		 * over: nothing to do but report what is there. */
		if (cur.generation > seen->generation ||
		    strcmp(cur.state, "running")) {
			*out = cur;
			return 0;
		}
		next = cur;
		copy_text(next.updated_by, sizeof(next.updated_by), by);
		now_rfc3339(next.time, sizeof(next.time));
		if (cur.generation > (int64_t)max_restarts) {
			char why[sizeof(next.reason)];

			snprintf(why, sizeof(why),
				 "the restart budget is spent (max_restarts "
				 "%u) at generation %lld; last failure: %s",
				 max_restarts, (long long)cur.generation,
				 reason ? reason : "");
			copy_text(next.state, sizeof(next.state), "failed");
			copy_text(next.reason, sizeof(next.reason), why);
		} else {
			next.generation = cur.generation + 1;
			copy_text(next.reason, sizeof(next.reason), reason);
			next.restore_step = restore_step;
		}
		r = control_write(s, &next, cur.object_generation, e);
		if (!r) {
			log_debug("%s: generation %lld, %s: %s",
				  store_url(s, RUN_CONTROL),
				  (long long)next.generation, next.state,
				  next.reason);
			*out = next;
			return 0;
		}
		if (r != CLOUD_EPRECONDITION)
			return r;
		err_init(e);
	}
	return gave_up(s, e, "bump the generation");
}

int control_set_state(struct store *s, const char *state, const char *reason,
		      const char *by, struct control *out, struct err *e)
{
	struct control cur, next;
	struct backoff b;
	int r;

	err_init(e);
	if (!s || !state || !out)
		return err_set(e, CLOUD_EINVAL, "control_set_state: missing "
			       "argument");
	if (!state_known(state))
		return err_set(e, CLOUD_EINVAL,
			       "\"%s\" is not a run state; the states are "
			       "running, stopping, done and failed", state);
	retry_init(&b);
	for (int t = 0; t < CONTROL_TRIES; t++) {
		if (t)
			pause_before_retry(&b);
		r = control_read(s, &cur, e);
		if (r)
			return r;
		/* Lost a race to a writer that ended the run: its word
		 * stands. */
		if (t && strcmp(cur.state, "running")) {
			*out = cur;
			return 0;
		}
		next = cur;
		copy_text(next.state, sizeof(next.state), state);
		copy_text(next.reason, sizeof(next.reason), reason);
		copy_text(next.updated_by, sizeof(next.updated_by), by);
		now_rfc3339(next.time, sizeof(next.time));
		r = control_write(s, &next, cur.object_generation, e);
		if (!r) {
			*out = next;
			return 0;
		}
		if (r != CLOUD_EPRECONDITION)
			return r;
		err_init(e);
	}
	return gave_up(s, e, "set its state");
}

/* The newest committed step whose COMMIT is sound; 0 when none. */
static int newest_committed(struct store *s, int64_t *step, struct err *e)
{
	struct ckpt_list l;
	int r = ckpt_list(s, &l, e);

	*step = 0;
	if (r)
		return r;
	for (size_t i = l.n; i-- > 0;) {
		const struct ckpt_step *st = &l.v[i];

		if (st->committed && !st->corrupt && st->step <= INT64_MAX) {
			*step = (int64_t)st->step;
			break;
		}
	}
	ckpt_list_release(&l);
	return 0;
}

int control_restore_step(struct store *s, int64_t generation, int64_t *step,
			 struct err *e)
{
	struct control cur;
	struct backoff b;
	int64_t chosen = -1;
	int r;

	err_init(e);
	if (!s || !step)
		return err_set(e, CLOUD_EINVAL, "control_restore_step: "
			       "missing argument");
	*step = -1;
	if (generation < 1)
		return err_set(e, CLOUD_EINVAL,
			       "control_restore_step: generation %lld is not "
			       ">= 1", (long long)generation);
	retry_init(&b);
	for (int t = 0; t < CONTROL_TRIES; t++) {
		if (t)
			pause_before_retry(&b);
		r = control_read(s, &cur, e);
		if (r)
			return r;
		if (cur.generation != generation)
			return err_set(e, CLOUD_EPRECONDITION,
				       "%s is at generation %lld, not %lld: "
				       "the group restarted meanwhile",
				       store_url(s, RUN_CONTROL),
				       (long long)cur.generation,
				       (long long)generation);
		if (cur.restore_step >= 0) {
			*step = cur.restore_step;
			return 0;
		}
		if (chosen < 0) {
			r = newest_committed(s, &chosen, e);
			if (r)
				return r;
		}
		cur.restore_step = chosen;
		now_rfc3339(cur.time, sizeof(cur.time));
		r = control_write(s, &cur, cur.object_generation, e);
		if (!r) {
			*step = chosen;
			return 0;
		}
		if (r != CLOUD_EPRECONDITION)
			return r;
		err_init(e);
	}
	return gave_up(s, e, "choose the step to restore");
}
