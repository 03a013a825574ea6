/*
 * run/status.c: the workers' heartbeats, one object per worker at
 * status/slice-S-worker-W.json, each written whole by its own worker
 * only (so no precondition), read by every other worker and by slicectl.
 * A malformed object is one worker's problem: listings skip it, saying
 * so, and go on.
 */
#include "run/run.h"

#include "cloud/cloud.h"
#include "run/spec_util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define STATUS_DIR "status/"
#define STATUS_MAX ((size_t)64 << 10)
#define STATUS_NAME_MAX 96

static const char *const worker_states[] = { "starting", "restoring",
	"running", "stopping", "finished", "failed", "preempted", "waiting",
	"exited" };

static bool state_known(const char *s)
{
	return spec_one_of(s, worker_states,
			   sizeof(worker_states) / sizeof(*worker_states));
}

static void status_name(unsigned slice, unsigned worker, char *out,
			size_t cap)
{
	char w[64];

	run_worker_name(slice, worker, w, sizeof(w));
	snprintf(out, cap, STATUS_DIR "%s.json", w);
}

/* The slice and worker of "status/slice-S-worker-W.json", spelled exactly
 * as status_name spells it; other names are not status objects. */
static bool parse_status_name(const char *name, unsigned *slice,
			      unsigned *worker)
{
	char canon[STATUS_NAME_MAX];
	unsigned s, w;

	if (strncmp(name, STATUS_DIR "slice-", strlen(STATUS_DIR "slice-")) ||
	    sscanf(name, STATUS_DIR "slice-%u-worker-%u.json", &s, &w) != 2)
		return false;
	status_name(s, w, canon, sizeof(canon));
	if (strcmp(canon, name))
		return false;
	*slice = s;
	*worker = w;
	return true;
}

static int status_text(const struct worker_status *st, struct buf *b)
{
	int r = buf_appendf(b, "{\n  \"slice\": %u,\n  \"worker\": %u",
			    st->slice, st->worker);

	if (!r)
		r = spec_append_text(b, "state", st->state);
	if (!r)
		r = buf_appendf(b, ",\n  \"generation\": %lld,\n"
				"  \"step\": %lld,\n"
				"  \"committed_step\": %lld,\n"
				"  \"restarts\": %llu",
				(long long)st->generation, (long long)st->step,
				(long long)st->committed_step,
				(unsigned long long)st->restarts);
	if (!r)
		r = spec_append_text(b, "message", st->message);
	if (!r)
		r = spec_append_text(b, "time", st->time);
	if (!r)
		r = spec_append_text(b, "boot_id", st->boot_id);
	if (!r && st->upload_bps)
		r = buf_appendf(b, ",\n  \"upload_bytes_per_s\": %llu",
				(unsigned long long)st->upload_bps);
	if (!r && st->recent.n)
		r = buf_appendf(b, ",\n  \"recent_steps\": {\"median_ms\": %.3f, "
				"\"n\": %u, \"span_s\": %.3f}",
				st->recent.median_ms, st->recent.n,
				st->recent.span_s);
	if (!r)
		r = buf_appends(b, "\n}\n");
	return r;
}

int status_put(struct store *s, struct worker_status *st, struct err *e)
{
	char name[STATUS_NAME_MAX];
	struct buf b;
	int r;

	err_init(e);
	if (!s || !st)
		return err_set(e, CLOUD_EINVAL, "status_put: missing argument");
	/* The struct's strings may have been filled without a bound. */
	st->state[sizeof(st->state) - 1] = '\0';
	st->message[sizeof(st->message) - 1] = '\0';
	st->boot_id[sizeof(st->boot_id) - 1] = '\0';
	if (!state_known(st->state))
		return err_set(e, CLOUD_EINVAL,
			       "status_put: \"%s\" is not a worker state",
			       st->state);
	if (st->generation < 0 || st->step < -1 || st->committed_step < -1 ||
	    st->restarts > INT64_MAX)
		return err_set(e, CLOUD_EINVAL,
			       "status_put: generation %lld, step %lld, "
			       "committed step %lld or restarts %llu out of "
			       "range", (long long)st->generation,
			       (long long)st->step,
			       (long long)st->committed_step,
			       (unsigned long long)st->restarts);
	rfc3339_now(st->time, sizeof(st->time));
	status_name(st->slice, st->worker, name, sizeof(name));
	buf_init(&b);
	if (status_text(st, &b)) {
		buf_release(&b);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	r = store_put(s, name, b.data, b.len, STORE_ANY_GENERATION, NULL, e);
	buf_release(&b);
	return r;
}

static int bad_status(struct store *s, const char *name, struct err *e,
		      const char *why)
{
	return err_set(e, CLOUD_ECORRUPT, "%s is not a valid status object: "
		       "%s", store_url(s, name), why);
}

/* An integer member within [min, max]; missing gives dflt when
 * optional. */
static int member_int(json_t *root, const char *key, long long min,
		      long long max, bool optional, long long dflt,
		      long long *out)
{
	json_t *v = json_object_get(root, key);

	if (!v && optional) {
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* A string member; missing or null gives "" when optional. */
static int member_text(json_t *root, const char *key, bool optional,
		       char *dst, size_t cap)
{
	json_t *v = json_object_get(root, key);

	dst[0] = '\0';
	if ((!v || json_is_null(v)) && optional)
		return 0;
	if (!json_is_string(v))
		return -1;
	spec_copy_text(dst, cap, json_string_value(v));
	return 0;
}

/* "recent_steps": {"median_ms", "n", "span_s"}, optional. */
static int member_recent(json_t *root, struct step_figure *f)
{
	json_t *v = json_object_get(root, "recent_steps"), *med, *n, *span;

	memset(f, 0, sizeof(*f));
	if (!v || json_is_null(v))
		return 0;
	med = json_object_get(v, "median_ms");
	n = json_object_get(v, "n");
	span = json_object_get(v, "span_s");
	if (!json_is_object(v) || !json_is_number(med) ||
	    !json_is_integer(n) || !json_is_number(span) ||
	    json_number_value(med) < 0 || json_number_value(span) < 0 ||
	    json_integer_value(n) < 0 ||
	    json_integer_value(n) > STEP_RECENT_MAX)
		return -1;
	f->median_ms = json_number_value(med);
	f->n = (unsigned)json_integer_value(n);
	f->span_s = json_number_value(span);
	return 0;
}

static int status_parse(struct store *s, const char *name, const char *data,
			size_t len, unsigned slice, unsigned worker,
			struct worker_status *st, struct err *e)
{
	json_error_t jerr;
	json_t *root = json_loadb(data, len, 0, &jerr);
	long long sl, wk, gen, step, cstep, restarts, bps;
	char why[256];
	const char *bad = NULL;

	memset(st, 0, sizeof(*st));
	if (!root) {
		snprintf(why, sizeof(why), "line %d column %d: %s", jerr.line,
			 jerr.column, jerr.text);
		return bad_status(s, name, e, why);
	}
	if (!json_is_object(root))
		bad = "it is not a JSON object";
	else if (member_int(root, "slice", 0, UINT32_MAX, false, 0, &sl) ||
		 member_int(root, "worker", 0, UINT32_MAX, false, 0, &wk))
		bad = "\"slice\" or \"worker\" is not an integer >= 0";
	else if ((unsigned)sl != slice || (unsigned)wk != worker)
		bad = "its \"slice\" and \"worker\" are not those of its name";
	else if (member_text(root, "state", false, st->state,
			     sizeof(st->state)) || !st->state[0])
		bad = "\"state\" is not a non-empty string";
	else if (member_int(root, "generation", 0, INT64_MAX, false, 0, &gen))
		bad = "\"generation\" is not an integer >= 0";
	else if (member_int(root, "step", -1, INT64_MAX, true, -1, &step) ||
		 member_int(root, "committed_step", -1, INT64_MAX, true, -1,
			    &cstep))
		bad = "\"step\" or \"committed_step\" is not an integer >= -1";
	else if (member_int(root, "restarts", 0, INT64_MAX, true, 0,
			    &restarts))
		bad = "\"restarts\" is not an integer >= 0";
	else if (member_text(root, "message", true, st->message,
			     sizeof(st->message)) ||
		 member_text(root, "time", true, st->time, sizeof(st->time)) ||
		 member_text(root, "boot_id", true, st->boot_id,
			     sizeof(st->boot_id)))
		bad = "\"message\", \"time\" or \"boot_id\" is not a string";
	else if (member_int(root, "upload_bytes_per_s", 0, INT64_MAX, true, 0,
			    &bps))
		bad = "\"upload_bytes_per_s\" is not an integer >= 0";
	else if (member_recent(root, &st->recent))
		bad = "\"recent_steps\" is not {\"median_ms\", \"n\", "
		      "\"span_s\"} of numbers >= 0";
	json_decref(root);
	if (bad)
		return bad_status(s, name, e, bad);
	st->slice = slice;
	st->worker = worker;
	st->generation = gen;
	st->step = step;
	st->committed_step = cstep;
	st->restarts = (uint64_t)restarts;
	st->upload_bps = (uint64_t)bps;
	return 0;
}

struct status_names {
	struct strlist names;
	struct err *e;
};

static int collect_name(void *ud, const struct store_object *o,
			bool is_prefix)
{
	struct status_names *c = ud;
	unsigned slice, worker;

	if (is_prefix || !parse_status_name(o->name, &slice, &worker))
		return 0;
	if (strlist_push(&c->names, o->name))
		return err_set(c->e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

int status_list(struct store *s, struct worker_status **out, size_t *n,
		struct err *e)
{
	struct status_names c;
	struct worker_status *v = NULL;
	size_t count = 0;
	int r;

	err_init(e);
	if (!s || !out || !n)
		return err_set(e, CLOUD_EINVAL, "status_list: missing "
			       "argument");
	*out = NULL;
	*n = 0;
	strlist_init(&c.names);
	c.e = e;
	r = store_list(s, STATUS_DIR, "/", collect_name, &c, e);
	if (!r) {
		v = calloc(c.names.n ? c.names.n : 1, sizeof(*v));
		if (!v)
			r = err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	for (size_t i = 0; !r && i < c.names.n; i++) {
		const char *name = c.names.v[i];
		unsigned slice, worker;
		char *data;
		size_t len;

		parse_status_name(name, &slice, &worker);
		r = store_read(s, name, STATUS_MAX, &data, &len, NULL, e);
		if (!r) {
			r = status_parse(s, name, data, len, slice, worker,
					 &v[count], e);
			free(data);
		} else if (r == CLOUD_EINVAL) {
			r = bad_status(s, name, e, "it is larger than 64 KiB");
		}
		if (!r) {
			count++;
		} else if (r == CLOUD_ECORRUPT) {
			log_warn("%s; skipping it", e->msg);
			err_init(e);
			r = 0;
		} else if (r == CLOUD_ENOTFOUND) {
			/* Removed since it was listed. */
			err_init(e);
			r = 0;
		}
	}
	strlist_release(&c.names);
	if (r) {
		free(v);
		return r;
	}
	*out = v;
	*n = count;
	return 0;
}

/* status/PART.json and a log segment each period, within half the
 * bucket's initial write rate; the other half is the checkpoints'. */
#define HEARTBEAT_WRITES_PER_S 500
#define WRITES_PER_HEARTBEAT 2

unsigned status_period_ms(unsigned heartbeat_s, unsigned n_workers)
{
	uint64_t share = (uint64_t)n_workers * WRITES_PER_HEARTBEAT * 1000 /
			 HEARTBEAT_WRITES_PER_S;
	uint64_t ms = (uint64_t)heartbeat_s * 1000;

	if (share > ms)
		ms = share;
	return ms > 3600000 ? 3600000 : (unsigned)ms;
}

bool status_all_finished(const struct worker_status *v, size_t n,
			 unsigned n_workers, int64_t generation)
{
	size_t done = 0;

	if (!n_workers || (!v && n))
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		if (strcmp(v[i].state, "finished") ||
		    v[i].generation != generation)
			continue;
		/* Count each worker once, however often it is listed. */
		for (size_t k = 0; k < i && !dup; k++)
			dup = v[k].slice == v[i].slice &&
			      v[k].worker == v[i].worker &&
			      !strcmp(v[k].state, "finished") &&
			      v[k].generation == generation;
		if (!dup)
			done++;
	}
	return done >= n_workers;
}
