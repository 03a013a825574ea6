/*
 * deadline.c: see deadline.h. The reader keeps one TPU client and one
 * store handle of its own, and sleeps on a condition variable between
 * reads so that stopping it never waits a whole period.
 */
#include "supervisor/deadline.h"
#include "run/run.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t deadline_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t deadline_lead_ms(unsigned grace_s, uint64_t upload_ms)
{
	return (uint64_t)grace_s * 1000 + upload_ms + DEADLINE_MARGIN_MS;
}

int64_t deadline_left_ms(const struct control_deadline *d, uint64_t now_ms)
{
	time_t t;

	if (!d->kind[0] || d->checkpointed)
		return INT64_MAX;
	t = rfc3339_parse(d->time);
	if (t == (time_t)-1)
		return INT64_MAX;
	return (int64_t)t * 1000 - (int64_t)now_ms;
}

/* Keeps the earlier of out and (kind, when), described by about. */
static void nearer(struct control_deadline *out, const char *kind,
		   const char *when, const char *about)
{
	time_t t = rfc3339_parse(when);

	if (t == (time_t)-1 ||
	    (out->kind[0] && rfc3339_parse(out->time) <= t))
		return;
	snprintf(out->kind, sizeof(out->kind), "%s", kind);
	snprintf(out->time, sizeof(out->time), "%s", when);
	snprintf(out->about, sizeof(out->about), "%s", about);
	out->checkpointed = false;
}

void deadline_of(const struct tpu_qr *q, const struct tpu_node *nodes,
		 size_t nnodes, struct control_deadline *out)
{
	char about[sizeof(out->about)];

	memset(out, 0, sizeof(*out));
	/* A suspended queued resource keeps its old termination time: only
	 * an ACTIVE one's is ahead. */
	if (!strcmp(q->state, "ACTIVE") && *q->termination_time) {
		snprintf(about, sizeof(about),
			 "the %s run of queued resource %.64s ends",
			 q->capacity, q->id);
		nearer(out, "run-end", q->termination_time, about);
	}
	for (size_t i = 0; i < nnodes && i < q->nnodes; i++) {
		const struct tpu_maintenance *m = &nodes[i].maintenance;

		if (!m->announced || !*m->window_start)
			continue;
		snprintf(about, sizeof(about),
			 "%.16s maintenance of node %.40s (window %.32s to "
			 "%.32s)", *m->type ? m->type : "announced",
			 q->node_ids[i], m->window_start,
			 *m->window_end ? m->window_end : "-");
		nearer(out, "maintenance", m->window_start, about);
	}
}

struct deadline_poller {
	const struct job *job;
	struct store *store;
	struct tpu_client *tpu;
	unsigned poll_ms;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool started;
	char last_error[1024]; /* said once until it changes */
};

/* One read of the queued resource and its nodes, and the deadline
 * published. */
static int poll_once(struct deadline_poller *p, struct err *e)
{
	struct tpu_qr q;
	struct tpu_node *nodes;
	struct control_deadline d;
	struct control c;
	int rc;

	memset(&q, 0, sizeof(q));
	rc = tpu_qr_get(p->tpu, p->job->tpu_name, &q, e);
	if (rc)
		return rc;
	nodes = calloc(q.nnodes ? q.nnodes : 1, sizeof(*nodes));
	if (!nodes) {
		tpu_qr_release(&q);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < q.nnodes; i++) {
		struct err ne;

		err_init(&ne);
		/* A node not there yet (or gone) announces nothing. */
		if (tpu_node_get(p->tpu, q.node_ids[i], &nodes[i], &ne))
			memset(&nodes[i], 0, sizeof(nodes[i]));
	}
	deadline_of(&q, nodes, q.nnodes, &d);
	for (size_t i = 0; i < q.nnodes; i++)
		tpu_node_release(&nodes[i]);
	free(nodes);
	tpu_qr_release(&q);
	rc = control_set_deadline(p->store, &d, &c, e);
	if (!rc && d.kind[0])
		log_debug("deadline: %s at %s (%s)", d.kind, d.time, d.about);
	return rc;
}

static void *poller_main(void *arg)
{
	struct deadline_poller *p = arg;

	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		uint64_t until;
		struct err e;
		int rc;

		pthread_mutex_unlock(&p->mu);
		err_init(&e);
		rc = poll_once(p, &e);
		if (rc && strcmp(e.msg, p->last_error))
			log_warn("reading the queued resource's deadlines: %s "
				 "(trying again in %u s)", e.msg,
				 p->poll_ms / 1000);
		snprintf(p->last_error, sizeof(p->last_error), "%s",
			 rc ? e.msg : "");
		pthread_mutex_lock(&p->mu);
		until = mono_ms() + p->poll_ms;
		while (!p->stop &&
		       mono_cond_wait_until(&p->cv, &p->mu, until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static unsigned poll_period_ms(void)
{
	return env_number("SLICE_DEADLINE_POLL_MS", 10, 86400000UL,
			  DEADLINE_POLL_MS);
}

int deadline_poller_start(struct deadline_poller **out, const char *run_url,
			  const struct job *j, struct err *e)
{
	struct deadline_poller *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	p->job = j;
	p->poll_ms = poll_period_ms();
	rc = store_open(&p->store, run_url, e);
	if (!rc)
		rc = tpu_open(&p->tpu, j->tpu_project, j->tpu_zone, e);
	if (rc) {
		if (p->store)
			store_close(p->store);
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->mu, NULL);
	p->started = !mono_cond_init(&p->cv) &&
		     !thread_start(&p->thread, poller_main, p);
	if (!p->started) {
		deadline_poller_stop(p);
		return err_set(e, COMMON_EIO, "cannot start a thread");
	}
	*out = p;
	log_info("reading queued resource %s's deadlines every %u ms",
		 j->tpu_name, p->poll_ms);
	return 0;
}

void deadline_poller_stop(struct deadline_poller *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (p->started)
		pthread_join(p->thread, NULL);
	tpu_close(p->tpu);
	store_close(p->store);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}
