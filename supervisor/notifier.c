/*
 * notifier.c: see notifier.h. The thread keeps its own store handle,
 * history follower and HTTP client, and sleeps on a condition variable
 * between passes so that stopping it never waits a period.
 *
 * Why claim before sending, not mark after: two senders (a supervisor
 * restarted while its old self still runs, a replaced pod) must not both
 * post, and only a create-only record decides between them before either
 * has. The price is the sender that dies between claim and answer: its
 * record says "sending" for good, so a claim older than the lease is
 * taken over (compare-and-swap on the record's generation) and the
 * notice sent again. Only then can a receiver see a notice twice, and a
 * duplicate beats a "failed" that never arrives.
 */
#include "supervisor/notifier.h"
#include "cloud/cloud.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLAIM_MAX 4096

struct notifier {
	const struct job *job;
	char who[64];
	struct store *store;
	struct events_follower *follow;
	struct http_client http;
	bool http_ok;
	unsigned period_ms, try_ms, lease_s;
	struct strlist finished;  /* ids sent, given up, or sent by others */
	bool ended_seen;          /* the history holds "done" or "failed" */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	uint64_t deadline_ms;     /* while stopping: sends end by then */
	bool cv_ok, started;
};

static bool finished(const struct notifier *x, const char *id)
{
	for (size_t i = 0; i < x->finished.n; i++)
		if (!strcmp(x->finished.v[i], id))
			return true;
	return false;
}

static void mark_finished(struct notifier *x, const char *id)
{
	if (strlist_push(&x->finished, id))
		log_warn("notification %s: out of memory (it may be looked "
			 "at again)", id);
}

static bool cancelled(void *ud)
{
	struct notifier *x = ud;
	bool c;

	pthread_mutex_lock(&x->mu);
	c = x->stop && mono_ms() >= x->deadline_ms;
	pthread_mutex_unlock(&x->mu);
	return c;
}

/* The record's text: its state, who, when, and each URL's outcome. */
static char *record_text(const struct notifier *x, const char *state,
			 json_t *urls)
{
	char now[40];
	json_t *o;
	char *text;

	rfc3339_now(now, sizeof(now));
	o = json_pack("{s:s, s:s, s:s}", "state", state, "by", x->who,
		      "time", now);
	if (o && urls)
		json_object_set(o, "urls", urls);
	text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return text;
}

static int record_put(struct notifier *x, const char *name, const char *state,
		      json_t *urls, int64_t if_gen, int64_t *gen,
		      struct err *e)
{
	char *text = record_text(x, state, urls);
	struct store_object o = { 0 };
	int rc;

	if (!text)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = store_put(x->store, name, text, strlen(text), if_gen, &o, e);
	free(text);
	if (!rc && gen)
		*gen = o.generation;
	store_object_release(&o);
	return rc;
}

enum claim { CLAIM_MINE, CLAIM_DONE, CLAIM_LATER };

/* An existing record: sent or given up (done), another's live claim
 * (later), or a dead sender's, taken over (mine). */
static enum claim claim_existing(struct notifier *x, const char *name,
				 int64_t *gen)
{
	struct store_object o = { 0 };
	char *data = NULL;
	size_t len;
	json_t *r;
	const char *state, *by;
	struct err e;
	enum claim c = CLAIM_LATER;

	err_init(&e);
	if (store_read(x->store, name, CLAIM_MAX, &data, &len, &o, &e)) {
		store_object_release(&o);
		return CLAIM_LATER;
	}
	r = json_loadb(data, len, 0, NULL);
	free(data);
	state = json_string_value(json_object_get(r, "state"));
	by = json_string_value(json_object_get(r, "by"));
	/* Sent, given up, or not a record we could read: never posted
	 * again on a guess. */
	if (!state || strcmp(state, "sending")) {
		c = CLAIM_DONE;
	} else {
		time_t at = rfc3339_parse(json_string_value(
			json_object_get(r, "time")));

		if (at != (time_t)-1 &&
		    time(NULL) - at >= (time_t)x->lease_s &&
		    !record_put(x, name, "sending", NULL, o.generation, gen,
				&e)) {
			log_warn("notification %s: taking over %s's claim of "
				 "%lld s ago (its sender died mid-send?)",
				 name, by ? by : "another sender",
				 (long long)(time(NULL) - at));
			c = CLAIM_MINE;
		}
	}
	json_decref(r);
	store_object_release(&o);
	return c;
}

/* Claims name: create-only, else as claim_existing says. */
static enum claim claim(struct notifier *x, const char *name, int64_t *gen)
{
	struct err e;
	int rc;

	err_init(&e);
	rc = record_put(x, name, "sending", NULL, STORE_CREATE_ONLY, gen, &e);
	if (!rc)
		return CLAIM_MINE;
	if (rc == CLOUD_EPRECONDITION)
		return claim_existing(x, name, gen);
	log_warn("notification %s not claimed (it is tried again): %s", name,
		 e.msg);
	return CLAIM_LATER;
}

/* One URL, with the tries the client's policy allows; the outcome goes
 * into urls. The URL's path never reaches a log (a webhook's secret). */
static bool post(struct notifier *x, const char *id, const char *url,
		 const char *body, json_t *urls)
{
	static const char *const headers[] = {
		"Content-Type: application/json", NULL
	};
	struct http_request req = {
		.method = "POST", .url = url, .headers = headers,
		.body = body, .body_len = strlen(body),
		/* The claim is the precondition: a try that reached the
		 * receiver and lost its answer is the only duplicate. */
		.not_idempotent = true, .precondition = true,
		.timeout_ms = x->try_ms, .max_body = 64 << 10,
	};
	struct http_response resp;
	char shown[128];
	struct err e;
	int rc;

	notify_url_shown(url, shown, sizeof(shown));
	http_response_init(&resp);
	err_init(&e);
	rc = http_do(&x->http, &req, &resp, &e);
	if (rc)
		log_warn("notification %s to %s not delivered after %u tr%s: "
			 "%s%ld (curl %d)", id, shown, resp.attempts,
			 resp.attempts == 1 ? "y" : "ies",
			 resp.status ? "status " : "no answer, ",
			 resp.status, (int)resp.curl_code);
	else
		log_info("notification %s sent to %s", id, shown);
	json_array_append_new(urls, json_pack("{s:s, s:I, s:b}", "url", shown,
					      "status",
					      (json_int_t)resp.status,
					      "delivered", rc == 0));
	http_response_release(&resp);
	return rc == 0;
}

static void deliver(struct notifier *x, const struct notice *n)
{
	char name[sizeof(NOTIFY_PREFIX) + sizeof(n->id)], *body = NULL;
	int64_t gen = 0;
	json_t *urls;
	bool all = true;
	struct err e;

	snprintf(name, sizeof(name), NOTIFY_PREFIX "%s", n->id);
	switch (claim(x, name, &gen)) {
	case CLAIM_DONE:
		mark_finished(x, n->id);
		return;
	case CLAIM_LATER:
		return;
	case CLAIM_MINE:
		break;
	}
	err_init(&e);
	urls = json_array();
	if (!urls || notice_render(x->job->name, n, &body, &e)) {
		log_warn("notification %s not rendered: %s", n->id,
			 urls ? e.msg : "out of memory");
		json_decref(urls);
		return;
	}
	for (size_t i = 0; i < x->job->notify.n && !cancelled(x); i++)
		all &= post(x, n->id, x->job->notify.v[i], body, urls);
	free(body);
	/* Cut short by the stop: the claim stays, for a later sender. */
	if (json_array_size(urls) < x->job->notify.n || cancelled(x)) {
		json_decref(urls);
		return;
	}
	err_init(&e);
	if (record_put(x, name, all ? "sent" : "gave-up", urls, gen, NULL, &e))
		log_warn("notification %s: its record not updated: %s",
			 n->id, e.msg);
	json_decref(urls);
	mark_finished(x, n->id);
}

/* One pass: the history's new objects, and every notice not finished. */
static void pass(struct notifier *x)
{
	const struct event *v;
	struct notice *nv = NULL;
	size_t n, nn = 0;
	struct err e;

	err_init(&e);
	if (events_follow(x->follow, x->store, &v, &n, &e))
		log_warn("notifications: the history not read (tried again "
			 "in %u ms): %s", x->period_ms, e.msg);
	err_init(&e);
	if (notices_of(x->job, v, n, &nv, &nn, &e)) {
		log_warn("notifications: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < nn && !cancelled(x); i++) {
		if (nv[i].kind == NOTICE_DONE || nv[i].kind == NOTICE_FAILED)
			x->ended_seen = true;
		if (!finished(x, nv[i].id))
			deliver(x, &nv[i]);
	}
	free(nv);
}

/* Whether control.json says the run ended (its end event may still be
 * in a peer's events writer). */
static bool run_ended(struct notifier *x)
{
	char *data = NULL;
	size_t len;
	json_t *c;
	const char *st;
	bool ended;
	struct err e;

	err_init(&e);
	if (store_read(x->store, RUN_CONTROL, CLAIM_MAX * 4, &data, &len, NULL,
		       &e))
		return false;
	c = json_loadb(data, len, 0, NULL);
	free(data);
	st = json_string_value(json_object_get(c, "state"));
	ended = st && (!strcmp(st, "done") || !strcmp(st, "failed"));
	json_decref(c);
	return ended;
}

/* The last pass, and more while the run ended but its end event has not
 * reached the history yet. */
static void final_passes(struct notifier *x)
{
	bool ended = run_ended(x);

	/* Leaving a run that goes on (a notice, a stop): the host may be
	 * going away, and the next process 0 sends what is left. */
	pthread_mutex_lock(&x->mu);
	if (!ended && x->deadline_ms > mono_ms() + NOTIFIER_LEAVE_MS)
		x->deadline_ms = mono_ms() + NOTIFIER_LEAVE_MS;
	pthread_mutex_unlock(&x->mu);
	for (;;) {
		pass(x);
		if (x->ended_seen || !ended || cancelled(x))
			return;
		proc_sleep_ms(500, true);
	}
}

static void *notifier_main(void *arg)
{
	struct notifier *x = arg;
	uint64_t next = mono_ms();

	pthread_mutex_lock(&x->mu);
	while (mono_cond_tick(&x->cv, &x->mu, &x->stop, &next, x->period_ms)) {
		pthread_mutex_unlock(&x->mu);
		pass(x);
		pthread_mutex_lock(&x->mu);
	}
	pthread_mutex_unlock(&x->mu);
	final_passes(x);
	return NULL;
}

int notifier_start(struct notifier **out, const char *run_url,
		   const struct job *j, const char *who, struct err *e)
{
	struct notifier *x = calloc(1, sizeof(*x));
	struct http_policy p;
	int rc;

	*out = NULL;
	if (!x)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	x->job = j;
	snprintf(x->who, sizeof(x->who), "%s", who);
	strlist_init(&x->finished);
	x->period_ms = env_number("SLICE_NOTIFY_PERIOD_MS", 100, 3600000,
				  NOTIFIER_PERIOD_MS);
	x->try_ms = env_number("SLICE_NOTIFY_TRY_MS", 100, 600000,
			       NOTIFIER_TRY_MS);
	x->lease_s = env_number("SLICE_NOTIFY_LEASE_S", 1, 86400,
				NOTIFIER_LEASE_S);
	http_policy_default(&p);
	/* Full jitter from 2 s: five tries spread over about a minute at
	 * most, so a receiver that restarts meanwhile still gets it. */
	p.backoff_base_ms = http_retry_base_ms() ? http_retry_base_ms()
						 : NOTIFIER_SEND_MS / 30;
	p.backoff_max_ms = p.backoff_base_ms * 8;
	p.max_attempts = NOTIFIER_TRIES;
	p.max_total_ms = NOTIFIER_SEND_MS;
	p.connect_timeout_ms = x->try_ms;
	p.retry_after_max_ms = NOTIFIER_SEND_MS / 4;
	pthread_mutex_init(&x->mu, NULL);
	rc = store_open(&x->store, run_url, e);
	if (!rc)
		rc = events_follower_new(&x->follow, e);
	if (!rc) {
		rc = http_client_init(&x->http, &p, e);
		x->http_ok = !rc;
	}
	x->http.cancelled = cancelled;
	x->http.cancel_ud = x;
	x->cv_ok = !rc && !mono_cond_init(&x->cv);
	x->started = x->cv_ok && !thread_start(&x->thread, notifier_main, x);
	if (!x->started) {
		notifier_stop(x, 0);
		return rc ? rc : err_set(e, COMMON_EIO,
					 "cannot start a thread");
	}
	*out = x;
	log_info("posting the run's notifications to %zu URL%s",
		 j->notify.n, j->notify.n == 1 ? "" : "s");
	return 0;
}

void notifier_stop(struct notifier *x, uint64_t deadline_ms)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	x->stop = true;
	x->deadline_ms = deadline_ms;
	pthread_cond_signal(&x->cv);
	pthread_mutex_unlock(&x->mu);
	if (x->started)
		pthread_join(x->thread, NULL);
	if (x->cv_ok)
		pthread_cond_destroy(&x->cv);
	pthread_mutex_destroy(&x->mu);
	if (x->http_ok)
		http_client_release(&x->http);
	events_follower_free(x->follow);
	if (x->store)
		store_close(x->store);
	strlist_release(&x->finished);
	free(x);
}
