/*
 * run/notify.c: a run's notifications, as data (run.h, "Notifications"):
 * which URLs may receive them, which events of the history make one and
 * under which id, and the body posted for each. Pure: the sending, its
 * record in the bucket and its retries are the supervisor's notifier.
 *
 * An id is stable whoever computes it and whenever: a restart, a run's
 * end and a quarantine are named by their kind, generation and a hash of
 * the event (its time, writer, cause and details, which every reader
 * reads alike); a budget's notices by the budget and how far it went
 * ("low", "spent"), so each budget warns once at each.
 */
#include "run/run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const notice_kind_names[NOTICE_NKINDS] = {
	"restart", "done", "failed", "budget_low", "quarantine",
};

/* Where the authority's host[:port] begins after any user:password@,
 * and how long it is (to the path, query or fragment). */
static const char *host_port(const char *authority, size_t *n)
{
	const char *at;

	*n = strcspn(authority, "/?#");
	while ((at = memchr(authority, '@', *n))) {
		*n -= (size_t)(at + 1 - authority);
		authority = at + 1;
	}
	return authority;
}

/* The host's length in an authority (0: none, as in "http://:80/"). */
static size_t n_host(const char *authority)
{
	size_t n;
	const char *h = host_port(authority, &n);
	size_t k = strcspn(h, ":");

	return *h == '[' || k > n ? n : k;
}

/* The port, when there is one, is 1 to 65535 (after any [IPv6] host). */
static int port_check(const char *url, const char *authority, struct err *e)
{
	size_t n;
	const char *from = host_port(authority, &n), *end = from + n;
	const char *close = memchr(from, ']', n), *colon, *p;
	unsigned long port = 0;

	colon = memchr(close ? close : from, ':',
		       (size_t)(end - (close ? close : from)));
	if (!colon)
		return 0;
	for (p = colon + 1; p < end && *p >= '0' && *p <= '9' &&
			    p - colon <= 5; p++)
		port = port * 10 + (unsigned long)(*p - '0');
	if (p != end || !port || port > 65535)
		return err_set(e, COMMON_EINVAL,
			       "notification URL \"%.80s\" has a bad port",
			       url);
	return 0;
}

int notify_url_check(const char *url, struct err *e)
{
	const char *host;
	size_t len = url ? strlen(url) : 0;

	if (!len)
		return err_set(e, COMMON_EINVAL,
			       "a notification URL must not be empty");
	if (len > NOTIFY_URL_MAX)
		return err_set(e, COMMON_EINVAL,
			       "a notification URL has at most %d bytes, not "
			       "%zu", NOTIFY_URL_MAX, len);
	if (!strncasecmp(url, "https://", 8))
		host = url + 8;
	else if (!strncasecmp(url, "http://", 7))
		host = url + 7;
	else
		return err_set(e, COMMON_EINVAL,
			       "notification URL \"%.80s\" is not http:// or "
			       "https://", url);
	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return err_set(e, COMMON_EINVAL,
				       "notification URL \"%.80s\" has a "
				       "space or control character", url);
	if (!n_host(host))
		return err_set(e, COMMON_EINVAL,
			       "notification URL \"%.80s\" names no host",
			       url);
	return port_check(url, host, e);
}

void notify_url_shown(const char *url, char *out, size_t cap)
{
	const char *sep = strstr(url, "://");
	size_t n;
	/* user:password@ is a secret as much as the path is. */
	const char *host = host_port(sep ? sep + 3 : url, &n);

	snprintf(out, cap, "%.*s%.*s%s", sep ? (int)(sep + 3 - url) : 0, url,
		 (int)n, host, host[n] ? "/..." : "");
}

/* FNV-1a: a short, stable name for an event's contents. */
static uint32_t fnv(uint32_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return (h ^ '|') * 16777619u;
}

static void event_id(const struct event *ev, const char *kind, char *out,
		     size_t cap)
{
	uint32_t h = 2166136261u;

	h = fnv(h, ev->time);
	h = fnv(h, ev->worker);
	h = fnv(h, ev->cause);
	h = fnv(h, ev->details);
	snprintf(out, cap, "%s-%06lld-%08x", kind,
		 (long long)(ev->generation % 1000000), (unsigned)h);
}

struct notices {
	struct notice *v;
	size_t n, cap;
};

static struct notice *notice_add(struct notices *l, int kind,
				 const struct event *ev)
{
	struct notice *nv;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;

		nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return NULL;
		l->v = nv;
		l->cap = cap;
	}
	nv = &l->v[l->n++];
	memset(nv, 0, sizeof(*nv));
	nv->kind = kind;
	nv->ev = *ev;
	nv->budget = -1;
	event_id(ev, notice_kind_names[kind], nv->id, sizeof(nv->id));
	return nv;
}

/* The budget a bump spent: the trainer's (hangs and preflights too, and
 * a bump that names no class, as control.json counts it), the
 * infrastructure's, or none (an operator's). */
static int budget_of(const struct event *ev)
{
	char kind[24];
	int cls = cause_class_in(ev->details, kind, sizeof(kind));

	if (cls == CAUSE_OPERATOR)
		return -1;
	return cls == CAUSE_INFRA ? CAUSE_INFRA : CAUSE_TRAINER;
}

static bool budget_low(int64_t spent, int64_t limit)
{
	int64_t left = limit - spent;

	return limit >= 0 && left >= 0 &&
	       (left <= NOTIFY_LOW_LEFT || left * 100 <= limit *
					       NOTIFY_LOW_PERCENT);
}

/* What a history's bumps spent of one budget so far. */
struct budget_seen {
	int64_t spent;
	bool warned;             /* its "low" notice made */
};

/* After bump ev spent one restart of its budget: a notice the first time
 * the budget is left low, and when it runs out. */
static int note_budget(struct notices *l, const struct job *j,
		       const struct event *ev,
		       struct budget_seen seen[CAUSE_NCLASSES])
{
	int b = budget_of(ev);
	int64_t limit;
	struct notice *nv;
	struct budget_seen *s;

	if (b < 0)
		return 0;
	s = &seen[b];
	limit = b == CAUSE_INFRA ? j->max_infra_restarts
				 : (int64_t)j->max_restarts;
	s->spent++;
	if (!budget_low(s->spent, limit) || (s->spent < limit && s->warned))
		return 0;
	s->warned = true;
	nv = notice_add(l, NOTICE_BUDGET_LOW, ev);
	if (!nv)
		return -1;
	nv->budget = b;
	nv->spent = s->spent;
	nv->limit = limit;
	snprintf(nv->id, sizeof(nv->id), "budget-%s-%s", cause_class_names[b],
		 s->spent < limit ? "low" : "spent");
	return 0;
}

int notices_of(const struct job *j, const struct event *v, size_t n,
	       struct notice **out, size_t *nout, struct err *e)
{
	struct notices l = { 0 };
	struct budget_seen seen[CAUSE_NCLASSES] = { { 0, false } };

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = v[i].kind;
		int kind = !strcmp(k, "bump")		  ? NOTICE_RESTART
			   : !strcmp(k, "done")		  ? NOTICE_DONE
			   : !strcmp(k, "failed")	  ? NOTICE_FAILED
			   : !strcmp(k, EVENT_QUARANTINE) ? NOTICE_QUARANTINE
							  : -1;

		if (kind < 0)
			continue;
		if (!notice_add(&l, kind, &v[i]) ||
		    (kind == NOTICE_RESTART &&
		     note_budget(&l, j, &v[i], seen))) {
			free(l.v);
			return err_set(e, COMMON_ENOMEM, "out of memory");
		}
	}
	*out = l.v;
	*nout = l.n;
	return 0;
}

/* ---- the body ---- */

static const char *budget_words(int b)
{
	return b == CAUSE_INFRA ? "infrastructure" : "trainer";
}

/* The human line after "slicectl run NAME: ". */
static void headline(const struct notice *n, json_t *details, char *out,
		     size_t cap)
{
	const struct event *ev = &n->ev;
	const char *host = json_string_value(json_object_get(details, "host"));
	const char *cls = json_string_value(json_object_get(details, "class"));
	const char *kind = json_string_value(json_object_get(details, "kind"));
	const char *who = json_string_value(json_object_get(details,
							    "worker"));

	switch (n->kind) {
	case NOTICE_RESTART:
		snprintf(out, cap, "restarted as generation %lld (%s/%s on "
			 "%s): %s", (long long)ev->generation,
			 cls ? cls : "trainer", kind ? kind : "unknown",
			 who ? who : ev->worker, ev->cause);
		break;
	case NOTICE_DONE:
		snprintf(out, cap, "done at generation %lld",
			 (long long)ev->generation);
		break;
	case NOTICE_FAILED:
		snprintf(out, cap, "failed at generation %lld: %s",
			 (long long)ev->generation, ev->cause);
		break;
	case NOTICE_BUDGET_LOW:
		if (n->spent < n->limit)
			snprintf(out, cap, "the %s restart budget is running "
				 "low: %lld of %lld left",
				 budget_words(n->budget),
				 (long long)(n->limit - n->spent),
				 (long long)n->limit);
		else
			snprintf(out, cap, "the %s restart budget is spent "
				 "(%lld of %lld): the next such failure fails "
				 "the run", budget_words(n->budget),
				 (long long)n->spent, (long long)n->limit);
		break;
	default:
		snprintf(out, cap, "host %s quarantined: %s",
			 host ? host : ev->worker, ev->cause);
	}
}

/* The structured notice: its id, kind, the event's facts, and what the
 * kind adds (a cause, a budget, a quarantine's details). */
static json_t *event_object(const char *run, const struct notice *n,
			    json_t *details)
{
	const struct event *ev = &n->ev;
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "id", n->id,
			      "kind", notice_kind_names[n->kind], "run", run,
			      "time", ev->time, "generation",
			      (json_int_t)ev->generation, "worker",
			      ev->worker);
	int bad = !o;

	if (!bad && n->kind == NOTICE_BUDGET_LOW)
		bad |= json_object_set_new(
			o, "budget",
			json_pack("{s:s, s:I, s:I, s:I}", "class",
				  budget_words(n->budget), "spent",
				  (json_int_t)n->spent, "limit",
				  (json_int_t)n->limit, "left",
				  (json_int_t)(n->limit - n->spent)));
	if (!bad && (n->kind == NOTICE_RESTART || n->kind == NOTICE_FAILED)) {
		json_t *c = json_is_object(details) ? json_deep_copy(details)
						    : json_object();

		bad |= !c || json_object_set_new(c, "why",
						 json_string(ev->cause));
		bad |= json_object_set_new(o, "cause", c);
	}
	if (!bad && n->kind == NOTICE_QUARANTINE) {
		bad |= json_object_set_new(o, "why", json_string(ev->cause));
		if (json_is_object(details))
			bad |= json_object_set(o, "details", details);
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int notice_render(const char *run, const struct notice *n, char **out,
		  struct err *e)
{
	json_t *details = n->ev.details[0] ? json_loads(n->ev.details, 0, NULL)
					   : NULL;
	char line[768], text[900];
	json_t *body, *ev;

	*out = NULL;
	headline(n, details, line, sizeof(line));
	snprintf(text, sizeof(text), "slicectl run %s: %s", run, line);
	ev = event_object(run, n, details);
	body = ev ? json_pack("{s:s, s:o}", "text", text, "event", ev) : NULL;
	json_decref(details);
	if (body)
		*out = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(body);
	if (!*out)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}
