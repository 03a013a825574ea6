/*
 * exporter.c: see exporter.h. The thread keeps its own store handle,
 * history follower and Monitoring client, and sleeps on a condition
 * variable between exports so that stopping it never waits a period.
 */
#include "supervisor/exporter.h"
#include "cloud/cloud.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define METRIC "custom.googleapis.com/slicectl/"
/* goodput, productive, elapsed, ideal step, and a badput per category. */
#define EXPORTER_POINTS (4 + GP_NCATS)

struct exporter {
	const struct job *job;
	struct store *store;
	struct events_follower *follow;
	struct monitoring_client *mon;
	unsigned period_ms;
	int64_t last_end_ms;     /* of the last point written, 0 none */
	bool failing;            /* the last export failed (said once) */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool cv_ok, started;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The 13 points of g: pts must hold EXPORTER_POINTS. */
static size_t points_of(const struct goodput *g, struct monitoring_point *pts)
{
	size_t n = 0;

	pts[n++] = (struct monitoring_point){ METRIC "goodput", NULL, NULL,
					      goodput_ratio(g) };
	pts[n++] = (struct monitoring_point){ METRIC "productive_time", NULL,
					      NULL, g->productive_s };
	pts[n++] = (struct monitoring_point){ METRIC "elapsed_time", NULL,
					      NULL, g->elapsed_s };
	pts[n++] = (struct monitoring_point){ METRIC "ideal_step_time", NULL,
					      NULL, g->ideal_step_s };
	for (int k = 0; k < GP_NCATS; k++)
		pts[n++] = (struct monitoring_point){
			METRIC "badput_time", "category", goodput_cat_names[k],
			g->badput_s[k] };
	return n;
}

/* One export: the history's new objects, goodput, the points. */
static int export_once(struct exporter *x, struct err *e)
{
	struct goodput_input in = { .hang_timeout_s = x->job->hang_timeout_s };
	struct monitoring_point pts[EXPORTER_POINTS];
	struct goodput g;
	int rc = events_follow(x->follow, x->store, &in.ev, &in.nev, e);

	if (rc)
		return rc;
	in.now_ms = wall_ms();
	/* One point per series per 10 s, whatever the clocks did. */
	if (x->last_end_ms &&
	    in.now_ms - x->last_end_ms < EXPORTER_MIN_PERIOD_S * 1000)
		return 0;
	rc = goodput_compute(&in, &g, e);
	if (rc == COMMON_EINVAL && !in.nev) /* nothing recorded yet */
		return 0;
	if (rc)
		return rc;
	rc = monitoring_write(x->mon, pts, points_of(&g, pts), in.now_ms, e);
	goodput_release(&g);
	if (!rc)
		x->last_end_ms = in.now_ms;
	return rc;
}

static void *exporter_main(void *arg)
{
	struct exporter *x = arg;
	uint64_t next = mono_ms() + x->period_ms;

	pthread_mutex_lock(&x->mu);
	while (mono_cond_tick(&x->cv, &x->mu, &x->stop, &next, x->period_ms)) {
		struct err e;
		int rc;

		pthread_mutex_unlock(&x->mu);
		err_init(&e);
		rc = export_once(x, &e);
		pthread_mutex_lock(&x->mu);
		if (x->stop) /* the write was cancelled: no outage */
			break;
		if (rc && !x->failing)
			log_warn("goodput not exported to Cloud Monitoring: %s "
				 "(trying every %u s, said once)", e.msg,
				 x->period_ms / 1000);
		else if (!rc && x->failing)
			log_info("goodput exported to Cloud Monitoring again");
		x->failing = rc != 0;
	}
	pthread_mutex_unlock(&x->mu);
	return NULL;
}

static unsigned period_ms(void)
{
	const char *v = getenv("SLICE_MONITORING_PERIOD_S");
	char *end;
	unsigned long s;

	if (!v || !*v)
		return EXPORTER_PERIOD_S * 1000;
	errno = 0;
	s = strtoul(v, &end, 10);
	if (errno || *end || s < EXPORTER_MIN_PERIOD_S || s > 86400) {
		log_warn("SLICE_MONITORING_PERIOD_S=%s is not %u to 86400: "
			 "exporting every %u s", v, EXPORTER_MIN_PERIOD_S,
			 EXPORTER_PERIOD_S);
		return EXPORTER_PERIOD_S * 1000;
	}
	return (unsigned)s * 1000;
}

/* Where the run is, for the series' resource: its zone or region. */
static const char *location_of(const struct job *j)
{
	return j->tpu_zone ? j->tpu_zone : j->target.location;
}

int exporter_start(struct exporter **out, const char *run_url,
		   const struct job *j, struct err *e)
{
	struct exporter *x = calloc(1, sizeof(*x));
	struct monitoring_target t = { .project = j->monitoring_project,
				       .location = location_of(j),
				       .run = j->name };
	int rc;

	*out = NULL;
	if (!x)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	x->job = j;
	x->period_ms = period_ms();
	/* A write ends within its period: the next point follows it. */
	t.write_ms = x->period_ms / 2;
	rc = store_open(&x->store, run_url, e);
	if (!rc)
		rc = events_follower_new(&x->follow, e);
	if (!rc)
		rc = monitoring_open(&x->mon, &t, e);
	pthread_mutex_init(&x->mu, NULL);
	x->cv_ok = !rc && !mono_cond_init(&x->cv);
	x->started = x->cv_ok && !thread_start(&x->thread, exporter_main, x);
	if (!x->started) {
		exporter_stop(x);
		return rc ? rc : err_set(e, COMMON_EIO,
					 "cannot start a thread");
	}
	*out = x;
	log_info("exporting goodput to Cloud Monitoring (project %s) every "
		 "%u s", j->monitoring_project, x->period_ms / 1000);
	return 0;
}

void exporter_stop(struct exporter *x)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	x->stop = true;
	pthread_cond_signal(&x->cv);
	pthread_mutex_unlock(&x->mu);
	if (x->mon)
		monitoring_cancel(x->mon);
	if (x->started)
		pthread_join(x->thread, NULL);
	if (x->cv_ok)
		pthread_cond_destroy(&x->cv);
	pthread_mutex_destroy(&x->mu);
	monitoring_close(x->mon);
	events_follower_free(x->follow);
	if (x->store)
		store_close(x->store);
	free(x);
}
