/*
 * run/control.c: control.json, the run's generation and state,
 * changed only by compare-and-swap on the object's generation (run.h).
 *
 * Every change is read, modify, write-if-unchanged. A writer that loses
 * the race reads again and decides anew from what the winner wrote: a
 * bump whose failure another worker already bumped for stops there, so
 * one failure makes one new generation however many workers see it.
 */
#include "run/run.h"

#include "checkpoint/checkpoint.h"
#include "run/spec_util.h"

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
	return spec_one_of(s, control_states,
			   sizeof(control_states) / sizeof(*control_states));
}

static void pause_before_retry(struct backoff *b)
{
	proc_sleep_ms(backoff_next_ms(b), true);
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
	spec_copy_text(dst, cap, json_string_value(v));
	return 0;
}

static const char *const deadline_kinds[] = { "run-end", "maintenance" };

/* The optional "deadline" object; absent or null leaves d empty. */
static int deadline_parse(struct store *s, json_t *root,
			  struct control_deadline *d, struct err *e)
{
	json_t *v = json_object_get(root, "deadline");
	json_t *kind, *time, *done;
	int r;

	memset(d, 0, sizeof(*d));
	if (!v || json_is_null(v))
		return 0;
	kind = json_object_get(v, "kind");
	time = json_object_get(v, "time");
	done = json_object_get(v, "checkpointed");
	if (!json_is_object(v) || !json_is_string(kind) ||
	    !spec_one_of(json_string_value(kind), deadline_kinds,
			 sizeof(deadline_kinds) / sizeof(*deadline_kinds)) ||
	    !json_is_string(time) ||
	    rfc3339_parse(json_string_value(time)) == (time_t)-1 ||
	    (done && !json_is_boolean(done)))
		return corrupt(s, e, "\"deadline\" is not {\"kind\": "
			       "run-end or maintenance, \"time\": an RFC 3339 "
			       "time, \"checkpointed\": a boolean}");
	spec_copy_text(d->kind, sizeof(d->kind), json_string_value(kind));
	spec_copy_text(d->time, sizeof(d->time), json_string_value(time));
	d->checkpointed = json_is_true(done);
	r = member_text(s, v, "about", d->about, sizeof(d->about), e);
	return r;
}

/* An integer member, or dflt when absent or not a non-negative
 * integer: what a newer writer adds is advice to an older reader, never
 * a reason to refuse the run. */
static int64_t int_member(json_t *v, int64_t dflt)
{
	return json_is_integer(v) && json_integer_value(v) >= 0
		       ? (int64_t)json_integer_value(v) : dflt;
}

/* "restarts"; without it (an older writer) every restart so far was
 * counted against max_restarts, as the generation says. */
static void counts_parse(json_t *root, struct control *c)
{
	json_t *v = json_object_get(root, "restarts");

	if (!json_is_object(v)) {
		c->restarts.trainer = c->generation - 1;
		return;
	}
	c->restarts.trainer = int_member(json_object_get(v, "trainer"), 0);
	c->restarts.infra = int_member(json_object_get(v, "infrastructure"),
				       0);
	c->restarts.operator_ = int_member(json_object_get(v, "operator"),
					   0);
}

static void text_member(json_t *o, const char *key, char *dst, size_t cap)
{
	const char *v = json_string_value(json_object_get(o, key));

	spec_copy_text(dst, cap, v ? v : "");
}

/* "cause" (cause.c's object); absent or of no known class: class -1. */
static void cause_parse(json_t *v, struct gen_cause *c)
{
	json_t *code = json_object_get(v, "exit_code");

	gen_cause_init(c, cause_class_of(json_string_value(
				  json_object_get(v, "class"))), "", "");
	if (c->cls < 0)
		return;
	text_member(v, "kind", c->kind, sizeof(c->kind));
	text_member(v, "worker", c->worker, sizeof(c->worker));
	text_member(v, "signature", c->signature, sizeof(c->signature));
	text_member(v, "tail", c->tail, sizeof(c->tail));
	text_member(v, "host", c->host, sizeof(c->host));
	text_member(v, "blame", c->blame, sizeof(c->blame));
	c->exit_code = json_is_integer(code)
			       ? (int)int_member(code, -1) : -1;
	c->signal = (int)int_member(json_object_get(v, "signal"), 0);
	c->step = int_member(json_object_get(v, "step"), -1);
	c->restored = int_member(json_object_get(v, "restored"), -1);
	c->notice = json_is_true(json_object_get(v, "notice"));
}

/* "failures" or "quarantined": a list of {generation, host, why, worker}
 * into v[cap] (the newest cap when longer); anything else in it is
 * skipped, since only the quarantine reads it. */
static unsigned blames_parse(json_t *root, const char *key,
			     struct host_blame *v, unsigned cap)
{
	json_t *a = json_object_get(root, key), *x;
	size_t n = json_array_size(a), from = n > cap ? n - cap : 0;
	unsigned k = 0;

	for (size_t i = from; i < n; i++) {
		x = json_array_get(a, i);
		if (!json_is_object(x))
			continue;
		memset(&v[k], 0, sizeof(v[k]));
		v[k].generation = int_member(json_object_get(x, "generation"),
					     0);
		text_member(x, "host", v[k].host, sizeof(v[k].host));
		text_member(x, "why", v[k].why, sizeof(v[k].why));
		text_member(x, "worker", v[k].worker, sizeof(v[k].worker));
		k++;
	}
	return k;
}

static int blames_text(struct buf *b, const char *key,
		       const struct host_blame *v, unsigned n)
{
	int r = buf_appendf(b, ",\n  \"%s\": [", key);

	for (unsigned i = 0; !r && i < n; i++) {
		r = buf_appendf(b, "%s{\"generation\": %lld, \"host\": ",
				i ? ", " : "", (long long)v[i].generation);
		if (!r)
			r = json_append_string(b, v[i].host,
					       strlen(v[i].host));
		if (!r)
			r = buf_appends(b, ", \"why\": ");
		if (!r)
			r = json_append_string(b, v[i].why, strlen(v[i].why));
		if (!r)
			r = buf_appends(b, ", \"worker\": ");
		if (!r)
			r = json_append_string(b, v[i].worker,
					       strlen(v[i].worker));
		if (!r)
			r = buf_appends(b, "}");
	}
	return r ? r : buf_appends(b, "]");
}

static int control_parse(struct store *s, const char *data, size_t len,
			 struct control *c, struct err *e)
{
	json_error_t jerr;
	json_t *root = json_loadb(data, len, 0, &jerr);
	json_t *gen, *state, *step, *attempt;
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
	attempt = json_object_get(root, "jobset_restart");
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
	else if (attempt &&
		 (!json_is_integer(attempt) || json_integer_value(attempt) < 0))
		r = corrupt(s, e, "\"jobset_restart\" is not an integer >= 0");
	if (!r) {
		c->generation = (int64_t)json_integer_value(gen);
		spec_copy_text(c->state, sizeof(c->state),
			       json_string_value(state));
		c->restore_step = json_is_integer(step) ?
				  (int64_t)json_integer_value(step) : -1;
		c->jobset_restart = attempt ?
				    (int64_t)json_integer_value(attempt) : 0;
		r = member_text(s, root, "reason", c->reason,
				sizeof(c->reason), e);
	}
	if (!r)
		r = member_text(s, root, "updated_by", c->updated_by,
				sizeof(c->updated_by), e);
	if (!r)
		r = member_text(s, root, "time", c->time, sizeof(c->time), e);
	if (!r)
		r = deadline_parse(s, root, &c->deadline, e);
	if (!r)
		counts_parse(root, c);
	if (!r)
		cause_parse(json_object_get(root, "cause"), &c->cause);
	if (!r)
		c->same_way = (unsigned)int_member(
			json_object_get(root, "same_way"), 0);
	if (!r) {
		c->nfailures = blames_parse(root, "failures", c->failures,
					    QUARANTINE_WINDOW);
		c->nquarantined = blames_parse(root, "quarantined",
					       c->quarantined, QUARANTINE_MAX);
	}
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

static int deadline_text(const struct control_deadline *d, struct buf *b)
{
	int r = buf_appendf(b, ",\n  \"deadline\": {\"kind\": \"%s\", "
			    "\"time\": ", d->kind);

	if (!r)
		r = json_append_string(b, d->time, strlen(d->time));
	if (!r)
		r = buf_appends(b, ", \"about\": ");
	if (!r)
		r = json_append_string(b, d->about, strlen(d->about));
	if (!r)
		r = buf_appendf(b, ", \"checkpointed\": %s}",
				d->checkpointed ? "true" : "false");
	return r;
}

static int cause_text(const struct gen_cause *c, struct buf *b)
{
	char text[1024];

	if (cause_details(c, text, sizeof(text)))
		return -1;
	return buf_appendf(b, ",\n  \"cause\": %s", text);
}

static int control_text(const struct control *c, struct buf *b)
{
	int r = buf_appendf(b, "{\n  \"generation\": %lld",
			    (long long)c->generation);

	if (!r)
		r = spec_append_text(b, "state", c->state);
	if (!r)
		r = spec_append_text(b, "reason", c->reason);
	if (!r)
		r = spec_append_text(b, "updated_by", c->updated_by);
	if (!r && c->restore_step >= 0)
		r = buf_appendf(b, ",\n  \"restore_step\": %lld",
				(long long)c->restore_step);
	else if (!r)
		r = buf_appends(b, ",\n  \"restore_step\": null");
	if (!r)
		r = spec_append_text(b, "time", c->time);
	/* Only GKE runs have one: other runs' control.json stays as it was. */
	if (!r && c->jobset_restart > 0)
		r = buf_appendf(b, ",\n  \"jobset_restart\": %lld",
				(long long)c->jobset_restart);
	/* Only while a deadline is known: older readers never see it. */
	if (!r && c->deadline.kind[0])
		r = deadline_text(&c->deadline, b);
	/* A new run has none: its control.json stays as it was. */
	if (!r && c->restarts.trainer + c->restarts.infra +
			  c->restarts.operator_ > 0)
		r = buf_appendf(b, ",\n  \"restarts\": {\"trainer\": %lld, "
				"\"infrastructure\": %lld, \"operator\": %lld}",
				(long long)c->restarts.trainer,
				(long long)c->restarts.infra,
				(long long)c->restarts.operator_);
	if (!r && c->cause.cls >= 0)
		r = cause_text(&c->cause, b);
	if (!r && c->same_way)
		r = buf_appendf(b, ",\n  \"same_way\": %u", c->same_way);
	/* Only once a failure happened: older readers never see them. */
	if (!r && c->nfailures)
		r = blames_text(b, "failures", c->failures, c->nfailures);
	if (!r && c->nquarantined)
		r = blames_text(b, "quarantined", c->quarantined,
				c->nquarantined);
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
		spec_copy_text(out->state, sizeof(out->state), "running");
		spec_copy_text(out->reason, sizeof(out->reason), "new run");
		out->restore_step = -1;
		out->cause.cls = -1;
		rfc3339_now(out->time, sizeof(out->time));
		r = control_write(s, out, STORE_CREATE_ONLY, e);
		if (r != CLOUD_EPRECONDITION)
			return r;
		/* Another worker created it first: read theirs. */
	}
	return gave_up(s, e, "read or create it");
}

/* What a change makes of the control.json it read: 0 with *next (a copy
 * of *cur) changed, to be written; CHANGE_KEEP to leave *cur as it is;
 * or an error. attempt counts from 0. */
typedef int (*change_fn)(int attempt, const struct control *cur,
			 struct control *next, void *arg);

#define CHANGE_KEEP (-1)

/* One change, read, decide, write-if-unchanged: 0 when *out is what it
 * wrote, CHANGE_KEEP when *out is what decide kept, or an error. */
static int control_change(struct store *s, const char *what,
			  change_fn decide, void *arg, struct control *out,
			  struct err *e)
{
	struct control cur, next;
	struct backoff b;
	int r;

	retry_init(&b);
	for (int t = 0; t < CONTROL_TRIES; t++) {
		if (t)
			pause_before_retry(&b);
		r = control_read(s, &cur, e);
		if (r)
			return r;
		next = cur;
		r = decide(t, &cur, &next, arg);
		if (r == CHANGE_KEEP)
			*out = cur;
		if (r)
			return r;
		rfc3339_now(next.time, sizeof(next.time));
		r = control_write(s, &next, cur.object_generation, e);
		if (!r) {
			*out = next;
			return 0;
		}
		if (r != CLOUD_EPRECONDITION)
			return r;
		err_init(e);
	}
	return gave_up(s, e, what);
}

/* The run's history keeps every change made (events/): what the
 * generation or state became, why and by whom. */
static void note_change(struct store *s, struct events_writer *events,
			const struct control *c)
{
	struct event ev;
	struct err e;

	event_init(&ev, strcmp(c->state, "running") ? c->state : "bump",
		   c->generation, c->updated_by);
	spec_copy_text(ev.cause, sizeof(ev.cause), c->reason);
	spec_copy_text(ev.by, sizeof(ev.by), c->updated_by);
	if (c->restore_step >= 0)
		ev.step = c->restore_step;
	/* A bump, a run failed for a cause, or an operator's stop says why
	 * in its details. */
	if (c->cause.cls >= 0 &&
	    (!strcmp(ev.kind, "bump") || !strcmp(ev.kind, "failed") ||
	     (!strcmp(ev.kind, "stopping") &&
	      c->cause.cls == CAUSE_OPERATOR &&
	      !strcmp(c->cause.kind, "stop"))))
		cause_details(&c->cause, ev.details, sizeof(ev.details));
	if (event_record(events, s, &ev, &e))
		log_warn("event not recorded: %s", e.msg);
}

/* The host the change quarantined, in the history: its cause says which
 * and why, its details {"host", "why", "worker"}. */
static void note_quarantine(struct store *s, struct events_writer *events,
			    const struct control *c)
{
	const struct host_blame *q = &c->quarantined[c->nquarantined - 1];
	struct event ev;
	struct err e;
	json_t *o;
	char *text;

	event_init(&ev, EVENT_QUARANTINE, q->generation, c->updated_by);
	snprintf(ev.cause, sizeof(ev.cause),
		 "%u of the last %u failures blamed it, the last: %s",
		 QUARANTINE_HITS, QUARANTINE_WINDOW, q->why);
	spec_copy_text(ev.by, sizeof(ev.by), c->updated_by);
	o = json_pack("{s:s, s:s, s:s}", "host", q->host, "why", q->why,
		      "worker", q->worker);
	text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (text && strlen(text) < sizeof(ev.details))
		memcpy(ev.details, text, strlen(text) + 1);
	free(text);
	json_decref(o);
	if (event_record(events, s, &ev, &e))
		log_warn("event not recorded: %s", e.msg);
}

struct bump {
	const struct control *seen;
	unsigned max_restarts;
	int64_t max_infra;         /* -1 no limit */
	const struct gen_cause *cause; /* NULL: the trainer's, no evidence */
	const char *reason, *by;
	int64_t restore_step;
};

/* The run fails for why instead of restarting. */
static void fail_run(struct control *next, const char *by, const char *why)
{
	spec_copy_text(next->updated_by, sizeof(next->updated_by), by);
	spec_copy_text(next->state, sizeof(next->state), "failed");
	spec_copy_text(next->reason, sizeof(next->reason), why);
}

/* The budget a's class spends is spent: why says which. */
static bool budget_spent(const struct bump *a, const struct control *cur,
			 char *why, size_t len)
{
	int cls = a->cause ? a->cause->cls : CAUSE_TRAINER;

	if (cls == CAUSE_OPERATOR)
		return false;
	if (cls == CAUSE_INFRA) {
		if (a->max_infra < 0 || cur->restarts.infra < a->max_infra)
			return false;
		snprintf(why, len,
			 "the infrastructure restart budget is spent "
			 "(max_infra_restarts %lld) at generation %lld; last "
			 "interruption: %s", (long long)a->max_infra,
			 (long long)cur->generation, a->reason ? a->reason : "");
		return true;
	}
	if (cur->restarts.trainer < (int64_t)a->max_restarts)
		return false;
	snprintf(why, len,
		 "the restart budget is spent (max_restarts %u) at generation "
		 "%lld; last failure: %s", a->max_restarts,
		 (long long)cur->generation, a->reason ? a->reason : "");
	return true;
}

static int decide_bump(int attempt, const struct control *cur,
		       struct control *next, void *arg)
{
	const struct bump *a = arg;
	char why[sizeof(next->reason)], what[sizeof(next->reason) - 64];
	unsigned same = 0;

	(void)attempt;
	/* Someone bumped for this failure already, or the run is over:
	 * nothing to do but report what is there. */
	if (cur->generation > a->seen->generation ||
	    strcmp(cur->state, "running"))
		return CHANGE_KEEP;
	/* A failure with its evidence extends a run of the same one; any
	 * other cause breaks it. */
	if (a->cause && a->cause->cls == CAUSE_TRAINER)
		same = cause_same_way(&cur->cause, a->cause) ? cur->same_way + 1
							      : 1;
	if (a->cause) {
		next->cause = *a->cause;
		next->same_way = same;
		quarantine_note(next, a->cause);
	} else {
		gen_cause_init(&next->cause, CAUSE_TRAINER, "", a->by);
		next->same_way = 0;
	}
	if (same >= CAUSE_SAME_WAY_RUNS) {
		cause_describe(a->cause, what, sizeof(what));
		snprintf(why, sizeof(why),
			 "deterministic failure: %u generations in a row ended "
			 "the same way: %.170s", same, what);
		fail_run(next, a->by, why);
		return 0;
	}
	if (budget_spent(a, cur, why, sizeof(why))) {
		fail_run(next, a->by, why);
		return 0;
	}
	spec_copy_text(next->updated_by, sizeof(next->updated_by), a->by);
	next->generation = cur->generation + 1;
	spec_copy_text(next->reason, sizeof(next->reason), a->reason);
	next->restore_step = a->restore_step;
	switch (next->cause.cls) {
	case CAUSE_INFRA:
		next->restarts.infra++;
		break;
	case CAUSE_OPERATOR:
		next->restarts.operator_++;
		break;
	default:
		next->restarts.trainer++;
	}
	return 0;
}

static int bump_with(struct store *s, struct events_writer *events,
		     struct bump *a, struct control *out, struct err *e)
{
	int r;

	err_init(e);
	if (!s || !a->seen || !out)
		return err_set(e, CLOUD_EINVAL, "control_bump: missing "
			       "argument");
	if (a->restore_step < -1)
		return err_set(e, CLOUD_EINVAL,
			       "control_bump: restore step %lld is neither a "
			       "step nor -1", (long long)a->restore_step);
	r = control_change(s, "bump the generation", decide_bump, a, out, e);
	if (!r)
		note_change(s, events, out);
	if (!r && out->quarantined_now)
		note_quarantine(s, events, out);
	if (!r)
		log_debug("%s: generation %lld, %s: %s",
			  store_url(s, RUN_CONTROL),
			  (long long)out->generation, out->state,
			  out->reason);
	return r == CHANGE_KEEP ? 0 : r;
}

int control_bump_cause(struct store *s, struct events_writer *events,
		       const struct control *seen, const struct job *j,
		       const struct gen_cause *cause, const char *reason,
		       const char *by, int64_t restore_step,
		       struct control *out, struct err *e)
{
	struct bump a = { seen, j ? j->max_restarts : 0,
			  j ? j->max_infra_restarts : -1, cause, reason, by,
			  restore_step };

	return bump_with(s, events, &a, out, e);
}

int control_bump(struct store *s, struct events_writer *events,
		 const struct control *seen, unsigned max_restarts,
		 const char *reason, const char *by, int64_t restore_step,
		 struct control *out, struct err *e)
{
	struct bump a = { seen, max_restarts, -1, NULL, reason, by,
			  restore_step };

	return bump_with(s, events, &a, out, e);
}

static bool same_deadline(const struct control_deadline *a,
			  const struct control_deadline *b)
{
	return !strcmp(a->kind, b->kind) && !strcmp(a->time, b->time);
}

static int decide_bump_deadline(int attempt, const struct control *cur,
				struct control *next, void *arg)
{
	const struct bump *a = arg;
	int r = decide_bump(attempt, cur, next, arg);

	if (!r && cur->deadline.kind[0] &&
	    same_deadline(&cur->deadline, &a->seen->deadline))
		next->deadline.checkpointed = true;
	return r;
}

int control_bump_deadline(struct store *s, const struct control *seen,
			  const struct job *j, const char *reason,
			  const char *by, struct control *out, struct err *e)
{
	struct gen_cause why;
	struct bump a = { seen, j ? j->max_restarts : 0,
			  j ? j->max_infra_restarts : -1, &why, reason, by,
			  -1 };
	int r;

	gen_cause_init(&why, CAUSE_INFRA, "maintenance", by);
	err_init(e);
	if (!s || !seen || !out)
		return err_set(e, CLOUD_EINVAL, "control_bump_deadline: "
			       "missing argument");
	r = control_change(s, "resume after a deadline's checkpoint",
			   decide_bump_deadline, &a, out, e);
	return r == CHANGE_KEEP ? 0 : r;
}

static int decide_deadline(int attempt, const struct control *cur,
			   struct control *next, void *arg)
{
	const struct control_deadline *d = arg;

	(void)attempt;
	if (strcmp(cur->state, "running") ||
	    (same_deadline(&cur->deadline, d) &&
	     !strcmp(cur->deadline.about, d->about)))
		return CHANGE_KEEP;
	next->deadline = *d;
	/* The same deadline described anew keeps its checkpoint. */
	next->deadline.checkpointed = d->kind[0] &&
				      same_deadline(&cur->deadline, d) &&
				      cur->deadline.checkpointed;
	return 0;
}

int control_set_deadline(struct store *s, const struct control_deadline *d,
			 struct control *out, struct err *e)
{
	int r;

	err_init(e);
	if (!s || !d || !out)
		return err_set(e, CLOUD_EINVAL, "control_set_deadline: "
			       "missing argument");
	if (d->kind[0] &&
	    (!spec_one_of(d->kind, deadline_kinds,
			  sizeof(deadline_kinds) / sizeof(*deadline_kinds)) ||
	     rfc3339_parse(d->time) == (time_t)-1))
		return err_set(e, CLOUD_EINVAL, "control_set_deadline: "
			       "\"%s\" at \"%s\" is not a deadline",
			       d->kind, d->time);
	r = control_change(s, "publish a deadline", decide_deadline,
			   (void *)d, out, e);
	return r == CHANGE_KEEP ? 0 : r;
}

struct join {
	int64_t attempt;
	struct bump b;
};

static int decide_join(int attempt, const struct control *cur,
		       struct control *next, void *arg)
{
	struct join *a = arg;
	int r;

	/* Another pod of this attempt (or a later one) made the bump. */
	if (cur->jobset_restart >= a->attempt)
		return CHANGE_KEEP;
	a->b.seen = cur;
	r = decide_bump(attempt, cur, next, &a->b);
	if (!r)
		next->jobset_restart = a->attempt;
	return r;
}

int control_join_restart(struct store *s, struct events_writer *events,
			 int64_t attempt, const struct job *j, const char *by,
			 struct control *out, struct err *e)
{
	char reason[64];
	struct gen_cause why;
	struct join a = { attempt, { NULL, j ? j->max_restarts : 0,
				     j ? j->max_infra_restarts : -1, &why,
				     reason, by, -1 } };
	int r;

	gen_cause_init(&why, CAUSE_INFRA, "pod-restart", by);
	err_init(e);
	if (!s || !out || attempt < 1)
		return err_set(e, CLOUD_EINVAL, "control_join_restart: bad "
			       "argument");
	snprintf(reason, sizeof(reason), "jobset restart %lld",
		 (long long)attempt);
	r = control_change(s, "join a JobSet restart", decide_join, &a, out,
			   e);
	if (!r)
		note_change(s, events, out);
	return r == CHANGE_KEEP ? 0 : r;
}

struct set_state {
	const char *state, *reason, *by;
	const struct gen_cause *cause; /* NULL: the cause stays */
};

static int decide_state(int attempt, const struct control *cur,
			struct control *next, void *arg)
{
	const struct set_state *a = arg;

	/* A run that ended stays ended (a stop racing the last worker's
	 * "done" must not undo it); and after a lost race to a writer that
	 * stopped the run, that writer's word stands. */
	if (!strcmp(cur->state, "done") || !strcmp(cur->state, "failed") ||
	    (attempt && strcmp(cur->state, "running")))
		return CHANGE_KEEP;
	spec_copy_text(next->state, sizeof(next->state), a->state);
	spec_copy_text(next->reason, sizeof(next->reason), a->reason);
	spec_copy_text(next->updated_by, sizeof(next->updated_by), a->by);
	if (a->cause) {
		next->cause = *a->cause;
		next->same_way = 0;
	}
	return 0;
}

int control_set_state(struct store *s, struct events_writer *events,
		      const char *state, const char *reason, const char *by,
		      struct control *out, struct err *e)
{
	return control_set_state_cause(s, events, state, reason, by, NULL,
				       out, e);
}

int control_set_state_cause(struct store *s, struct events_writer *events,
			    const char *state, const char *reason,
			    const char *by, const struct gen_cause *cause,
			    struct control *out, struct err *e)
{
	struct set_state a = { state, reason, by, cause };
	int r;

	err_init(e);
	if (!s || !state || !out)
		return err_set(e, CLOUD_EINVAL, "control_set_state: missing "
			       "argument");
	if (!state_known(state))
		return err_set(e, CLOUD_EINVAL,
			       "\"%s\" is not a run state; the states are "
			       "running, stopping, done and failed", state);
	r = control_change(s, "set its state", decide_state, &a, out, e);
	if (!r)
		note_change(s, events, out);
	return r == CHANGE_KEEP ? 0 : r;
}

/* The newest restorable step (ckpt_choose_step); 0 when none. */
static int newest_committed(struct store *s, int64_t *step, struct err *e)
{
	uint64_t v;
	int r = ckpt_choose_step(s, 0, &v, NULL, e);

	*step = !r && v <= INT64_MAX ? (int64_t)v : 0;
	return r;
}

struct restore_choice {
	struct store *s;
	struct err *e;
	int64_t generation;
	int64_t chosen; /* -1 until newest_committed has answered */
};

static int decide_restore_step(int attempt, const struct control *cur,
			       struct control *next, void *arg)
{
	struct restore_choice *a = arg;
	int r;

	(void)attempt;
	if (cur->generation != a->generation)
		return err_set(a->e, CLOUD_EPRECONDITION,
			       "%s is at generation %lld, not %lld: the group "
			       "restarted meanwhile",
			       store_url(a->s, RUN_CONTROL),
			       (long long)cur->generation,
			       (long long)a->generation);
	if (cur->restore_step >= 0)
		return CHANGE_KEEP;
	/* A lost race need not list the checkpoints again. */
	if (a->chosen < 0) {
		r = newest_committed(a->s, &a->chosen, a->e);
		if (r)
			return r;
	}
	next->restore_step = a->chosen;
	return 0;
}

int control_restore_step(struct store *s, int64_t generation, int64_t *step,
			 struct err *e)
{
	struct restore_choice a = { s, e, generation, -1 };
	struct control cur;
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
	r = control_change(s, "choose the step to restore",
			   decide_restore_step, &a, &cur, e);
	if (r && r != CHANGE_KEEP)
		return r;
	*step = cur.restore_step;
	return 0;
}
