/*
 * syncer.c: see syncer.h. One thread, one store handle, one loop: a task
 * when one is queued, else the periodic reads and writes when they are
 * due, else a wait on the condition variable until the nearest of them.
 */
#include "supervisor/syncer.h"
#include "checkpoint/checkpoint.h"
#include "run/run.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The trainer's log goes to the bucket as immutable segments
 * logs/PART/gen-G/<offset>.seg, each holding only what the log gained
 * since the one before: every byte is sent once (the bucket's cost of a
 * log is what was logged, not its size times the heartbeats), and no
 * segment is written twice. A burst larger than this between two
 * heartbeats is published as its last LOG_BURST_MAX bytes; readers skip
 * the gap. */
#define LOG_BURST_MAX (8u << 20)

/* What a run's supervisors together ask of the bucket, against GCS's
 * initial ramp of about 1000 writes and 5000 reads a second (and its
 * charge per request): control.json reads by workers whose trainer makes
 * progress (a change is rare then, and a failed peer soon stalls the
 * trainer into the close watch), STEADY_READS_PER_S; reads otherwise
 * (start-up, restarts, a stalled trainer watched closely: bursts),
 * BURST_READS_FACTOR times that; heartbeat and log segment writes,
 * half the ramp, leaving the rest to checkpoints (status_period_ms).
 * Each worker takes 1/n_workers of each, as a longer period than the
 * configured one only when its share asks for it: runs of up to a
 * thousand workers keep 1 s polls. SLICECTL_SHARE_WORKERS=N in the
 * supervisor's environment takes the shares of a run of N workers
 * instead (bench/cost measures a small run behaving as a large one). */
#define STEADY_READS_PER_S 1000
#define BURST_READS_FACTOR 5

/* GCS's limit on writes of one object: about one a second. The
 * heartbeat object is never written more often, even when the loop asks
 * for it at once. */
#define OBJECT_WRITE_GAP_MS 1000

struct syncer {
	struct syncer_config c;
	struct store *store;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;

	/* Guarded by mu. */
	struct worker_status status;
	bool status_dirty;
	char log_path[1024];
	int64_t log_gen;
	struct control control;
	bool have_control;
	struct syncer_request req;
	bool req_pending;
	struct syncer_result res;
	bool res_ready;
	bool closely;
	bool progressing;
	uint64_t next_control_ms;
	char upload_path[1200], upload_name[256];
	bool upload_pending;

	/* Set at the start: the periods for this run's size. */
	unsigned progress_poll_ms; /* control.json while the trainer moves */
	unsigned heartbeat_ms;

	/* The thread's own. */
	uint64_t next_status_ms;
	uint64_t last_status_ms;   /* when the heartbeat was last written */
	off_t log_published;
	char log_published_path[1024];
};

static void notify(struct syncer *s)
{
	char c = 's';

	if (s->c.notify_fd >= 0 && write(s->c.notify_fd, &c, 1) < 0 &&
	    errno != EAGAIN)
		log_debug("syncer: notify: %s", strerror(errno));
}

static void read_control(struct syncer *s)
{
	struct control c;
	struct err e;
	bool changed;

	err_init(&e);
	if (control_load(s->store, &c, &e)) {
		log_warn("reading control.json: %s", e.msg);
		return;
	}
	pthread_mutex_lock(&s->mu);
	changed = !s->have_control ||
		  c.object_generation != s->control.object_generation;
	s->control = c;
	s->have_control = true;
	pthread_mutex_unlock(&s->mu);
	if (changed)
		notify(s);
}

/* Uploads what the log gained since the last time, as one segment. */
static void publish_log(struct syncer *s, const char *path, int64_t gen)
{
	struct stat st;
	char dir[256];
	off_t from;
	char *data;
	size_t len;
	int fd, rc = 0;
	struct err e;

	if (!*path || stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	if (strcmp(path, s->log_published_path)) {
		/* A new generation's log: its segments start at 0. */
		s->log_published = 0;
		snprintf(s->log_published_path, sizeof(s->log_published_path),
			 "%s", path);
	}
	if (st.st_size <= s->log_published)
		return;
	from = s->log_published;
	if (st.st_size - from > (off_t)LOG_BURST_MAX)
		from = st.st_size - (off_t)LOG_BURST_MAX;
	len = (size_t)(st.st_size - from);
	data = malloc(len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!data || fd < 0 || pread(fd, data, len, from) != (ssize_t)len) {
		free(data);
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	snprintf(dir, sizeof(dir), "logs/%s/gen-%lld/", s->c.part,
		 (long long)gen);
	err_init(&e);
	/* After a restart of the supervisor the first segments may be
	 * there already: go on after each one found. */
	while (from < st.st_size) {
		uint64_t stored = 0;
		size_t at = (size_t)(from - (st.st_size - (off_t)len));

		rc = store_segment_put(s->store, dir, (uint64_t)from,
				       data + at, len - at, &stored, &e);
		if (rc)
			break;
		from += (off_t)stored;
	}
	if (rc)
		log_warn("publishing the log: %s", e.msg);
	s->log_published = from;
	free(data);
}

static void publish_status(struct syncer *s)
{
	struct worker_status st;
	char path[1024];
	int64_t log_gen;
	struct err e;

	pthread_mutex_lock(&s->mu);
	st = s->status;
	snprintf(path, sizeof(path), "%s", s->log_path);
	log_gen = s->log_gen;
	s->status_dirty = false;
	pthread_mutex_unlock(&s->mu);
	if (!st.state[0])
		return;
	err_init(&e);
	if (status_put(s->store, &st, &e))
		log_warn("heartbeat: %s", e.msg);
	publish_log(s, path, log_gen);
}

/* The file the loop handed over, if any, as its object. */
static void upload_file(struct syncer *s)
{
	char path[sizeof(s->upload_path)], name[sizeof(s->upload_name)];
	bool pending;
	size_t len = 0;
	char *data;
	struct err e;

	pthread_mutex_lock(&s->mu);
	pending = s->upload_pending;
	memcpy(path, s->upload_path, sizeof(path));
	memcpy(name, s->upload_name, sizeof(name));
	s->upload_pending = false;
	pthread_mutex_unlock(&s->mu);
	if (!pending)
		return;
	err_init(&e);
	data = fs_read_tail(path, 0, SYNCER_UPLOAD_MAX, &len);
	if (!data)
		log_warn("cannot read %s to put it as %s", path, name);
	else if (store_put(s->store, name, data, len, STORE_ANY_GENERATION,
			   NULL, &e))
		log_warn("putting %s: %s", name, e.msg);
	else
		log_info("put %s (%zu bytes)", name, len);
	free(data);
}

/* The restorable step before `step` (ckpt_choose_step), 0 when none. */
static int64_t step_before(struct store *store, int64_t step)
{
	uint64_t best = 0;
	struct err e;

	if (step <= 0 || ckpt_choose_step(store, (uint64_t)step, &best, NULL,
					  &e))
		return 0;
	return (int64_t)best;
}

/* What CODE_DIR.generation records of the unpacked bundle: its
 * generation and URL (generations of different runs' objects may meet). */
static void bundle_record(struct syncer *s, int64_t generation, char *out,
			  size_t len)
{
	snprintf(out, len, "%lld\n%s\n", (long long)generation,
		 store_url(s->store, RUN_BUNDLE));
}

static bool bundle_cached(struct syncer *s, const char *record)
{
	char path[1100], have[1200];
	struct stat st;
	ssize_t n;
	int fd;

	if (stat(s->c.code_dir, &st) || !S_ISDIR(st.st_mode))
		return false;
	snprintf(path, sizeof(path), "%s.generation", s->c.code_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n < 0)
		return false;
	have[n] = '\0';
	return !strcmp(have, record);
}

/* Written after the tree is in place: a crash between the two only costs
 * one more unpacking. */
static int bundle_remember(struct syncer *s, const char *record,
			   struct err *e)
{
	char path[1100];
	int r;

	snprintf(path, sizeof(path), "%s.generation", s->c.code_dir);
	r = fs_write_atomic(path, record, strlen(record), 0644, true, e);
	if (r == ENOSPC)
		e->code = CLOUD_ENOSPACE;
	return r ? e->code : 0;
}

/* Unpacks the run's bundle.tar.zst into code_dir unless the generation
 * there is already the current one. No bundle: out->code stays false. */
static int fetch_bundle(struct syncer *s, struct syncer_result *out,
			struct err *e)
{
	struct store_object o;
	char record[1200];
	int64_t current, got = 0;
	int rc;

	rc = store_stat(s->store, RUN_BUNDLE, &o, e);
	if (rc == CLOUD_ENOTFOUND) {
		err_init(e);
		return 0;
	}
	if (rc)
		return rc;
	current = o.generation;
	store_object_release(&o);
	bundle_record(s, current, record, sizeof(record));
	if (bundle_cached(s, record)) {
		log_info("code bundle %s (generation %lld) is already "
			 "unpacked in %s", store_url(s->store, RUN_BUNDLE),
			 (long long)current, s->c.code_dir);
		out->code = true;
		return 0;
	}
	rc = ckpt_unpack_object(s->store, RUN_BUNDLE, s->c.code_dir, &got, e);
	if (rc)
		return rc;
	/* The object may have been replaced since the stat: record what
	 * was unpacked. */
	bundle_record(s, got, record, sizeof(record));
	rc = bundle_remember(s, record, e);
	if (rc)
		return rc;
	out->code = true;
	return 0;
}

static void task_restore(struct syncer *s, const struct syncer_request *r,
			 struct syncer_result *out, struct err *e)
{
	struct ckpt_restore_options o = { .part = s->c.part,
					  .local_dir = s->c.local_dir,
					  .from_local = &out->from_local,
					  .fetch = s->c.fetch,
					  .fetch_ud = s->c.fetch_ud,
					  .from_peer = &out->from_peer };
	uint64_t restored = 0;
	size_t discarded, dropped;
	int64_t step;

	/* The code first: the trainer of this generation runs in it. */
	if (s->c.code_dir) {
		out->rc = fetch_bundle(s, out, e);
		if (out->rc) {
			out->bundle_failed = true;
			err_prefix(e, "the code bundle");
			return;
		}
	}
	out->rc = control_restore_step(s->store, r->generation, &step, e);
	if (out->rc)
		return;
	out->step = step;
	out->rc = ckpt_discard_newer(s->store, s->c.part,
				     step > 0 ? (uint64_t)step : 0, &discarded,
				     e);
	if (out->rc) {
		err_prefix(e, "discarding parts of an earlier generation");
		return;
	}
	/* Copies above the step are of an earlier generation, never to be
	 * committed, as its parts in the bucket just discarded. */
	if (s->c.local_dir &&
	    ckpt_local_prune(s->c.local_dir, s->c.local_keep,
			     step > 0 ? (uint64_t)step : 0,
			     step > 0 ? (uint64_t)step : 0, &dropped))
		log_warn("local tier %s: %s", s->c.local_dir, strerror(errno));
	if (step <= 0)
		return;
	o.step = (uint64_t)step;
	out->rc = ckpt_restore(s->store, s->c.restore_dir, &o, &restored, e);
	if (out->rc == CLOUD_ECORRUPT || out->rc == CLOUD_ENOTFOUND ||
	    out->rc == CKPT_EUNSAFE)
		out->fallback_step = step_before(s->store, step);
}

static void task_delete_qr(struct syncer *s, struct syncer_result *out,
			   struct err *e)
{
	const struct job *j = s->c.job;
	struct tpu_client *c;

	if (!j->tpu_name || !j->tpu_project || !j->tpu_zone) {
		out->rc = err_set(e, COMMON_EINVAL,
				  "the job names no queued resource to delete");
		return;
	}
	out->rc = tpu_open(&c, j->tpu_project, j->tpu_zone, e);
	if (out->rc)
		return;
	out->rc = tpu_qr_delete(c, j->tpu_name, true, false, 0, NULL, NULL, e);
	tpu_close(c);
}

static void run_task(struct syncer *s, const struct syncer_request *r)
{
	struct syncer_result out = { .task = r->task, .fallback_step = -1 };
	struct control c;
	struct err e;

	err_init(&e);
	switch (r->task) {
	case TASK_RESTORE:
		task_restore(s, r, &out, &e);
		break;
	case TASK_BUMP:
		if (r->jobset_restart > 0) {
			out.rc = control_join_restart(
				s->store, s->c.events, r->jobset_restart,
				s->c.job, s->c.part, &c, &e);
			break;
		}
		pthread_mutex_lock(&s->mu);
		c = s->control;
		pthread_mutex_unlock(&s->mu);
		c.generation = r->generation;
		if (r->deadline)
			out.rc = control_bump_deadline(
				s->store, &c, s->c.job, r->reason, s->c.part,
				&c, &e);
		else
			out.rc = control_bump_cause(
				s->store, s->c.events, &c, s->c.job,
				&r->cause, r->reason, s->c.part, r->restore_step, &c, &e);
		out.quarantined = !out.rc && c.quarantined_now &&
				  !strcmp(c.state, "running") &&
				  !strcmp(c.quarantined[c.nquarantined - 1]
						  .host, r->cause.host);
		break;
	case TASK_SET_STATE:
		out.rc = control_set_state(s->store, s->c.events, r->state,
					   r->reason,
					   s->c.part, &c, &e);
		break;
	case TASK_CHECK_DONE: {
		struct worker_status *v = NULL;
		size_t n = 0;

		out.rc = status_list(s->store, &v, &n, &e);
		if (!out.rc && status_all_finished(v, n, s->c.n_workers,
						   r->generation)) {
			out.done = true;
			out.rc = control_set_state(s->store, s->c.events,
						   "done",
						   "every worker finished",
						   s->c.part, &c, &e);
		}
		free(v);
		break;
	}
	case TASK_DELETE_QR:
		task_delete_qr(s, &out, &e);
		break;
	case TASK_NONE:
		break;
	}
	if (out.rc)
		snprintf(out.error, sizeof(out.error), "%s", e.msg);
	/* Whatever the task changed, the loop should see it soon. */
	if (r->task == TASK_BUMP || r->task == TASK_SET_STATE ||
	    out.done)
		read_control(s);
	pthread_mutex_lock(&s->mu);
	s->res = out;
	s->res_ready = true;
	s->req_pending = false;
	pthread_mutex_unlock(&s->mu);
	notify(s);
}

static void *thread_main(void *arg)
{
	struct syncer *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		uint64_t now = mono_ms(), next;

		/* The heartbeat first: a task may read it (every worker
		 * finished?). */
		if ((s->status_dirty &&
		     now >= s->last_status_ms + OBJECT_WRITE_GAP_MS) ||
		    now >= s->next_status_ms) {
			s->next_status_ms =
				now + s->heartbeat_ms;
			s->last_status_ms = now;
			pthread_mutex_unlock(&s->mu);
			publish_status(s);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		if (s->req_pending && !s->res_ready) {
			struct syncer_request r = s->req;

			pthread_mutex_unlock(&s->mu);
			run_task(s, &r);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		/* After a task: a hang's bump goes before its forensics. */
		if (s->upload_pending) {
			pthread_mutex_unlock(&s->mu);
			upload_file(s);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		if (now >= s->next_control_ms) {
			s->next_control_ms =
				now + (s->closely	 ? s->c.close_poll_ms
				       : s->progressing ? s->progress_poll_ms
							: s->c.control_poll_ms);
			pthread_mutex_unlock(&s->mu);
			read_control(s);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		next = s->next_control_ms < s->next_status_ms
			       ? s->next_control_ms
			       : s->next_status_ms;
		if (s->status_dirty &&
		    s->last_status_ms + OBJECT_WRITE_GAP_MS < next)
			next = s->last_status_ms + OBJECT_WRITE_GAP_MS;
		mono_cond_wait_until(&s->cv, &s->mu, next);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The worker count whose shares to take: SLICECTL_SHARE_WORKERS when
 * set (a positive number), else the run's. */
static unsigned share_workers(unsigned n_workers)
{
	const char *v = getenv("SLICECTL_SHARE_WORKERS");
	char *end;
	unsigned long n;

	if (!v || !*v)
		return n_workers ? n_workers : 1;
	n = strtoul(v, &end, 10);
	return *end || !n || n > 1000000 ? n_workers : (unsigned)n;
}

/* The period of one worker's share when n_workers doing `each` requests
 * a period may together make per_s a second, or at least floor_ms. */
static unsigned share_ms(unsigned n_workers, unsigned each, unsigned per_s,
			 unsigned floor_ms)
{
	uint64_t ms = (uint64_t)n_workers * each * 1000 / per_s;

	return ms > floor_ms ? (unsigned)(ms > 3600000 ? 3600000 : ms)
			     : floor_ms;
}

/* The periods for this run's size. */
static void scale_periods(struct syncer *s)
{
	unsigned n = share_workers(s->c.n_workers);
	unsigned reads = STEADY_READS_PER_S;
	unsigned poll = s->c.control_poll_ms, hb = s->c.job->heartbeat_s * 1000;

	s->c.control_poll_ms =
		share_ms(n, 1, reads * BURST_READS_FACTOR, poll);
	s->c.close_poll_ms =
		share_ms(n, 1, reads * BURST_READS_FACTOR, s->c.close_poll_ms);
	s->progress_poll_ms = share_ms(n, 1, reads, s->c.control_poll_ms);
	s->heartbeat_ms = status_period_ms(s->c.job->heartbeat_s, n);
	if (s->progress_poll_ms > poll || s->heartbeat_ms > hb)
		log_info("%u workers: control.json read every %u ms while the "
			 "trainer makes progress (%u ms otherwise, %u ms when "
			 "it stalls), heartbeat every %u ms, to stay within "
			 "%u reads and half the bucket's writes a second for "
			 "the run", n, s->progress_poll_ms,
			 s->c.control_poll_ms, s->c.close_poll_ms,
			 s->heartbeat_ms, reads);
}

int syncer_start(struct syncer **out, const struct syncer_config *c,
		 struct err *e)
{
	struct syncer *s = calloc(1, sizeof(*s));
	bool cv_ok;
	int rc;

	*out = NULL;
	if (!s)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	s->c = *c;
	scale_periods(s);
	rc = store_open(&s->store, c->run_url, e);
	if (rc) {
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->mu, NULL);
	cv_ok = !mono_cond_init(&s->cv);
	if (!cv_ok || thread_start(&s->thread, thread_main, s)) {
		store_close(s->store);
		pthread_mutex_destroy(&s->mu);
		if (cv_ok)
			pthread_cond_destroy(&s->cv);
		free(s);
		return err_set(e, COMMON_EIO, "cannot start a thread");
	}
	*out = s;
	return 0;
}

void syncer_publish(struct syncer *s, const struct worker_status *st,
		    const char *log_path, int64_t log_gen, bool now)
{
	pthread_mutex_lock(&s->mu);
	s->status = *st;
	snprintf(s->log_path, sizeof(s->log_path), "%s",
		 log_path ? log_path : "");
	s->log_gen = log_gen;
	if (now) {
		s->status_dirty = true;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
}

void syncer_upload(struct syncer *s, const char *path, const char *name)
{
	pthread_mutex_lock(&s->mu);
	snprintf(s->upload_path, sizeof(s->upload_path), "%s", path);
	snprintf(s->upload_name, sizeof(s->upload_name), "%s", name);
	s->upload_pending = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* The next control.json read no later than period_ms from now; mu held. */
static void poll_within(struct syncer *s, unsigned period_ms)
{
	uint64_t soon = mono_ms() + period_ms;

	if (soon < s->next_control_ms) {
		s->next_control_ms = soon;
		pthread_cond_signal(&s->cv);
	}
}

void syncer_watch_closely(struct syncer *s, bool on)
{
	pthread_mutex_lock(&s->mu);
	if (on && !s->closely)
		poll_within(s, s->c.close_poll_ms);
	s->closely = on;
	pthread_mutex_unlock(&s->mu);
}

void syncer_progressing(struct syncer *s, bool on)
{
	pthread_mutex_lock(&s->mu);
	if (!on && s->progressing)
		poll_within(s, s->c.control_poll_ms);
	s->progressing = on;
	pthread_mutex_unlock(&s->mu);
}

bool syncer_control(struct syncer *s, struct control *out)
{
	bool have;

	pthread_mutex_lock(&s->mu);
	have = s->have_control;
	if (have)
		*out = s->control;
	pthread_mutex_unlock(&s->mu);
	return have;
}

bool syncer_request(struct syncer *s, const struct syncer_request *r)
{
	bool ok;

	pthread_mutex_lock(&s->mu);
	ok = !s->req_pending && !s->res_ready;
	if (ok) {
		s->req = *r;
		s->req_pending = true;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

bool syncer_result(struct syncer *s, struct syncer_result *out)
{
	bool ready;

	pthread_mutex_lock(&s->mu);
	ready = s->res_ready;
	if (ready) {
		*out = s->res;
		s->res_ready = false;
	}
	pthread_mutex_unlock(&s->mu);
	return ready;
}

void syncer_stop(struct syncer *s, uint64_t deadline_ms)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	/* The last word: the final state and log, unless the bucket is
	 * down and the deadline near; not sooner after the heartbeat
	 * before it than GCS lets one object be written again, when the
	 * deadline leaves time to wait. */
	if (mono_ms() < deadline_ms) {
		uint64_t now = mono_ms(),
			 ok = s->last_status_ms + OBJECT_WRITE_GAP_MS;

		if (s->last_status_ms && now < ok && ok < deadline_ms)
			proc_sleep_ms(ok - now, true);
		publish_status(s);
		upload_file(s);
	}
	store_close(s->store);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
