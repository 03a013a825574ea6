/*
 * watch.c: see watch.h. A watcher that cannot reach the metadata server
 * keeps trying with backoff and says so once: a supervisor outside a VM
 * (or one whose metadata server is restarting) must go on supervising.
 */
#include "supervisor/watch.h"
#include "cloud/cloud.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_S 60

struct watcher {
	struct watch *w;
	const char *path;
	enum watch_event event;
	struct metadata_client *m;
	pthread_t thread;
	bool started;
};

struct watch {
	int notify_fd;
	atomic_uint events;
	atomic_bool stop;
	pthread_mutex_t mu;
	char what[256];
	struct watcher v[2];
};

static bool is_notice(enum watch_event ev, const char *value)
{
	if (ev == WATCH_PREEMPTED)
		return !strncmp(value, "TRUE", 4);
	return *value && strncmp(value, "NONE", 4);
}

static void notice(struct watcher *wr, const char *value)
{
	struct watch *w = wr->w;
	/* A letter: the supervisor's pipe carries signal numbers too. */
	const char c = 'm';

	pthread_mutex_lock(&w->mu);
	snprintf(w->what, sizeof(w->what), "%s is %.64s", wr->path, value);
	pthread_mutex_unlock(&w->mu);
	if (!(atomic_fetch_or(&w->events, wr->event) & wr->event)) {
		log_warn("metadata: %s is %.64s", wr->path, value);
		if (write(w->notify_fd, &c, 1) < 0 && errno != EAGAIN)
			log_warn("cannot wake the supervisor: %s",
				 strerror(errno));
	}
}

/* Sleeps ms, or less when the watch is being stopped. */
static void pause_ms(struct watch *w, unsigned ms)
{
	for (unsigned slept = 0; slept < ms && !atomic_load(&w->stop);
	     slept += 100)
		proc_sleep_ms(100, true);
}

static void *run(void *arg)
{
	struct watcher *wr = arg;
	struct backoff b;
	char *etag = strdup("");
	bool complained = false;

	backoff_init(&b, 1000, 30000, (uint64_t)(uintptr_t)wr ^ mono_ms());
	while (etag && !atomic_load(&wr->w->stop)) {
		char *value = NULL, *next = NULL;
		bool changed = false;
		struct err e;
		int rc;

		err_init(&e);
		rc = metadata_watch(wr->m, wr->path, etag, POLL_S, &value,
				    &next, &changed, &e);
		if (rc == CLOUD_EABORTED)
			break;
		if (rc) {
			if (!complained)
				log_warn("metadata: watching %s: %s (retrying)",
					 wr->path, e.msg);
			complained = true;
			pause_ms(wr->w, backoff_next_ms(&b));
			continue;
		}
		complained = false;
		backoff_init(&b, 1000, 30000, mono_ms());
		if (is_notice(wr->event, value))
			notice(wr, value);
		free(etag);
		etag = next;
		free(value);
	}
	free(etag);
	return NULL;
}

int watch_start(struct watch **out, int notify_fd, struct err *e)
{
	static const char *const paths[2] = { "instance/preempted",
					      "instance/maintenance-event" };
	struct watch *w = calloc(1, sizeof(*w));
	int rc = 0;

	*out = NULL;
	if (!w)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	w->notify_fd = notify_fd;
	pthread_mutex_init(&w->mu, NULL);
	for (int i = 0; i < 2 && !rc; i++) {
		struct watcher *wr = &w->v[i];

		wr->w = w;
		wr->path = paths[i];
		wr->event = i ? WATCH_MAINTENANCE : WATCH_PREEMPTED;
		rc = metadata_open(&wr->m, e);
		if (!rc && thread_start(&wr->thread, run, wr))
			rc = err_set(e, COMMON_EIO, "cannot start a thread");
		wr->started = !rc;
	}
	if (rc) {
		watch_stop(w);
		return rc;
	}
	*out = w;
	return 0;
}

unsigned watch_events(struct watch *w, char *what, size_t len)
{
	unsigned ev = atomic_load(&w->events);

	pthread_mutex_lock(&w->mu);
	snprintf(what, len, "%s", w->what);
	pthread_mutex_unlock(&w->mu);
	return ev;
}

void watch_stop(struct watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	for (int i = 0; i < 2; i++)
		if (w->v[i].m)
			metadata_cancel(w->v[i].m);
	for (int i = 0; i < 2; i++) {
		if (w->v[i].started)
			pthread_join(w->v[i].thread, NULL);
		if (w->v[i].m)
			metadata_close(w->v[i].m);
	}
	pthread_mutex_destroy(&w->mu);
	free(w);
}
