/*
 * shipper.c: the checkpoint shipper's API (see shipper.h): starting its
 * two threads, the scanner (shipper_scanner.c) and the uploader
 * (shipper_uploader.c), and what the supervisor asks of them: the state,
 * a scan now, a flush, a reset, a stop.
 */
#include "supervisor/shipper_spool.h"

#include "checkpoint/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKOFF_BASE_MS 1000u
#define BACKOFF_MAX_MS 30000u
#define DEFAULT_POLL_MS 1000u
/* shipper_stop waits this long for the threads; an upload stuck inside
 * one HTTP request (which cannot be interrupted from here) is left to
 * finish on its own and frees the shipper when it does. */
#define STOP_WAIT_MS 600u

static char *dup_or_null(const char *v, bool *ok)
{
	char *d;

	if (!v)
		return NULL;
	d = strdup(v);
	if (!d)
		*ok = false;
	return d;
}

/* A shipper holding copies of c, its threads not started; NULL when out
 * of memory. */
static struct shipper *shipper_new(const struct shipper_config *c)
{
	struct shipper *s = calloc(1, sizeof(*s));
	bool ok = true;

	if (!s)
		return NULL;
	s->run_url = dup_or_null(c->run_url, &ok);
	s->ckpt_dir = dup_or_null(c->ckpt_dir, &ok);
	s->spool_dir = dup_or_null(c->spool_dir, &ok);
	s->part = dup_or_null(c->part ? c->part : CKPT_DEFAULT_PART, &ok);
	s->parts_expected = c->parts_expected ? c->parts_expected : 1;
	s->rank = c->rank;
	s->prune = c->prune;
	s->keep = c->keep;
	s->keep_every = c->keep_every;
	if (c->local_dir && c->local_keep) {
		s->local_dir = dup_or_null(c->local_dir, &ok);
		s->local_keep = c->local_keep;
		s->kept = c->kept;
		s->kept_ud = c->kept_ud;
		s->persist_every = c->persist_every;
		s->hold = c->hold;
		s->hold_ud = c->hold_ud;
	}
	s->spool_bytes = c->spool_bytes;
	s->notify_fd = c->notify_fd;
	s->poll_ms = c->poll_ms ? c->poll_ms : DEFAULT_POLL_MS;
	s->takeover_ms = c->takeover_ms ? c->takeover_ms
					: SHIPPER_TAKEOVER_POLLS * s->poll_ms;
	s->st.newest_done = s->st.newest_uploaded = -1;
	s->st.newest_committed = -1;
	s->published = s->st;
	s->pending_commit = s->pending_bucket = s->error_step =
		s->warned_step = -1;
	strlist_init(&s->trash);
	atomic_init(&s->cancel, 0);
	pthread_mutex_init(&s->scan_mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	if (mono_cond_init(&s->cv))
		ok = false;
	s->scanner_done = s->uploader_done = true;
	if (!ok) {
		shipper_free(s);
		return NULL;
	}
	return s;
}

/* Backoff between attempts: 1 s to 30 s, scaled down the way the HTTP
 * retry policy is by SLICECTL_HTTP_RETRY_BASE_MS. */
static void init_backoff(struct shipper *s)
{
	unsigned base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS;
	unsigned ms = http_retry_base_ms();

	if (ms && ms < BACKOFF_BASE_MS) {
		base = ms;
		max = BACKOFF_MAX_MS / BACKOFF_BASE_MS * ms;
	}
	backoff_init(&s->backoff, base, max,
		     mono_us() ^ ((uint64_t)getpid() << 32) ^
		     (uint64_t)(uintptr_t)s);
}

/* The spool directory, made if need be and cleared of an earlier run's
 * leftovers, and notify_fd made non-blocking. */
static int prepare_spool(struct shipper *s, struct err *e)
{
	struct stat a, b;
	int r = fs_mkdir_p(s->spool_dir, 0755, NULL);

	if (r)
		return err_errno(e, COMMON_EIO, r, "cannot create the spool "
				 "directory %s", s->spool_dir);
	if (stat(s->spool_dir, &a) == 0 && stat(s->ckpt_dir, &b) == 0 &&
	    a.st_dev != b.st_dev)
		log_warn("the spool %s is not on the filesystem of %s: steps "
			 "cannot be moved into it", s->spool_dir, s->ckpt_dir);
	if (s->notify_fd >= 0) {
		int fl = fcntl(s->notify_fd, F_GETFL);

		if (fl >= 0 && !(fl & O_NONBLOCK))
			(void)fcntl(s->notify_fd, F_SETFL, fl | O_NONBLOCK);
	}
	shipper_clear_spool(s);
	return 0;
}

/* Starts the uploader and waits for its store_open: its error is the
 * start's. Returns 0, an error of pthread_create (an errno: *started
 * false), or the open's error with e filled (the thread joined). */
static int start_uploader(struct shipper *s, bool *started, struct err *e)
{
	int r, rc;

	s->uploader_done = false;
	r = thread_start(&s->uploader, shipper_uploader_main, s);
	*started = !r;
	if (r) {
		s->uploader_done = true;
		return r;
	}
	s->uploader_started = true;
	pthread_mutex_lock(&s->mu);
	while (!s->opened)
		pthread_cond_wait(&s->cv, &s->mu);
	rc = s->open_rc;
	if (rc)
		*e = s->open_err;
	pthread_mutex_unlock(&s->mu);
	if (rc)
		pthread_join(s->uploader, NULL);
	return rc;
}

/* Returns 0 or pthread_create's error. */
static int start_scanner(struct shipper *s)
{
	int r;

	pthread_mutex_lock(&s->mu);
	s->scanner_done = false;
	pthread_mutex_unlock(&s->mu);
	r = thread_start(&s->scanner, shipper_scanner_main, s);
	if (!r) {
		s->scanner_started = true;
		return 0;
	}
	pthread_mutex_lock(&s->mu);
	s->scanner_done = true;
	pthread_mutex_unlock(&s->mu);
	return r;
}

int shipper_start(struct shipper **out, const struct shipper_config *c,
		  struct err *e)
{
	struct shipper *s;
	bool started;
	int rc;

	*out = NULL;
	err_init(e);
	if (!c || !c->run_url || !c->ckpt_dir || !c->spool_dir ||
	    !*c->ckpt_dir || !*c->spool_dir)
		return err_set(e, COMMON_EINVAL, "the checkpoint shipper needs "
			       "a run URL, a checkpoint directory and a spool "
			       "directory");
	s = shipper_new(c);
	if (!s)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	init_backoff(s);
	rc = prepare_spool(s, e);
	if (rc) {
		shipper_free(s);
		return rc;
	}
	/* The threads take no signals (thread_start): the supervisor's
	 * loop does. */
	rc = start_uploader(s, &started, e);
	if (started && rc) {
		err_prefix(e, "checkpoint shipper");
		shipper_free(s);
		return rc;
	}
	if (!rc)
		rc = start_scanner(s);
	if (rc) {
		rc = err_errno(e, COMMON_EIO, rc, "cannot start the checkpoint "
			       "shipper's threads");
		shipper_stop(s);
		return rc;
	}
	log_debug("checkpoint shipper: %s -> %s via %s, part %s of %u, "
		  "rank %u", s->ckpt_dir, s->run_url, s->spool_dir, s->part,
		  s->parts_expected, s->rank);
	*out = s;
	return 0;
}

void shipper_get(struct shipper *s, struct shipper_state *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	pthread_mutex_unlock(&s->mu);
}

void shipper_kick(struct shipper *s)
{
	pthread_mutex_lock(&s->mu);
	s->kick = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Under mu: the flush's target, the newest arrival, goes first: an
 * older upload in flight gives way, and the next attempt is now, with
 * the backoff started afresh. */
static void newest_first(struct shipper *s)
{
	for (size_t i = 0; i + 1 < s->nw; i++) {
		if (s->w[i].in_flight) {
			s->preempted = true;
			atomic_store(&s->cancel, 1);
		}
	}
	s->retry_at_ms = 0;
	s->backoff.attempt = 0;
	pthread_cond_broadcast(&s->cv);
}

/* Under mu: whether a flush of target has its answer in *rc (e filled
 * on an error): the target was dropped for an error, went out, or the
 * shipper was stopped or reset, or the deadline passed. */
static bool flush_over(struct shipper *s, const struct spool_entry *target,
		       unsigned epoch, uint64_t deadline_ms, int *rc,
		       struct err *e)
{
	unsigned long long step = (unsigned long long)target->step;

	*rc = 0;
	if (s->error_seq == target->seq)
		*rc = err_set(e, s->error_code, "step %llu could not be "
			      "uploaded: %s", step, s->st.last_error);
	else if (!spool_flush_waits(s, target))
		return true;
	else if (s->stop || s->epoch != epoch)
		*rc = err_set(e, CLOUD_EABORTED, "the checkpoint shipper was "
			      "%s before step %llu was uploaded",
			      s->stop ? "stopped" : "reset", step);
	else if (mono_ms() < deadline_ms)
		return false;
	/* Past the deadline: fine when only older steps are left behind. */
	else if (s->uploaded_seq < target->seq)
		*rc = err_set(e, CLOUD_ETIMEDOUT, "step %llu was not uploaded "
			      "in time%s%s", step,
			      s->st.failures ? "; the last attempt: " : "",
			      s->st.failures ? s->st.last_error : "");
	return true;
}

/* Under mu, after the flush's scan: its answer when the spool is empty
 * (the newest step was uploaded or dropped for an error before). */
static int flush_nothing(struct shipper *s, struct err *e)
{
	if (s->error_seq && s->error_seq == s->last_seq)
		return err_set(e, s->error_code, "step %lld could not be "
			       "uploaded: %s", (long long)s->error_step,
			       s->st.last_error);
	return 0;
}

/* Under mu, after the flush's scan: waits for the newest arrival to go
 * out. */
static int flush_wait(struct shipper *s, uint64_t deadline_ms,
		      struct err *e)
{
	struct spool_entry target;
	unsigned epoch;
	int rc;

	/* From now on no step is dropped for one whose marker was made in
	 * the same tick: which of them is the final one is a guess. */
	s->draining = true;
	if (!s->nw)
		return flush_nothing(s, e);
	target = s->w[s->nw - 1];
	newest_first(s);
	epoch = s->epoch;
	while (!flush_over(s, &target, epoch, deadline_ms, &rc, e))
		mono_cond_wait_until(&s->cv, &s->mu, deadline_ms);
	return rc;
}

/* Under mu, once the flush's step is up: the worker is about to leave
 * and may hold the step's last part, with nobody left to commit it (the
 * committer may be leaving too, or gone), so whoever it is it makes one
 * commit pass over its newest uploaded step, as every worker used to
 * after its upload, unless it saw that step committed. Of the leaving
 * workers the one whose part landed last sees every part. */
static void commit_before_leaving(struct shipper *s, uint64_t deadline_ms)
{
	unsigned epoch = s->epoch, passes = s->passes;

	if (s->pending_commit < 0)
		return;
	s->pass_now = true;
	pthread_cond_broadcast(&s->cv);
	while (s->passes == passes && s->pending_commit >= 0 && !s->stop &&
	       s->epoch == epoch && mono_ms() < deadline_ms)
		mono_cond_wait_until(&s->cv, &s->mu, deadline_ms);
}

int shipper_flush(struct shipper *s, uint64_t deadline_ms, struct err *e)
{
	int64_t failed_step;
	struct err scan_err;
	int scan_rc, rc;

	err_init(e);
	err_init(&scan_err);
	pthread_mutex_lock(&s->mu);
	s->flushers++;
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_lock(&s->scan_mu);
	scan_rc = shipper_scan(s, &failed_step, &scan_err);
	pthread_mutex_unlock(&s->scan_mu);

	pthread_mutex_lock(&s->mu);
	if (scan_rc && failed_step >= 0 &&
	    (!s->nw || (int64_t)s->w[s->nw - 1].step < failed_step)) {
		/* The newest done step could not even be taken. */
		*e = scan_err;
		rc = scan_rc;
	} else {
		rc = flush_wait(s, deadline_ms, e);
	}
	if (!rc)
		commit_before_leaving(s, deadline_ms);
	s->flushers--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Under mu: every waiting step goes; one in flight is doomed and its
 * upload cancelled. Returns how many went. */
static unsigned drop_waiting(struct shipper *s)
{
	unsigned dropped = 0;

	for (size_t i = 0; i < s->nw;) {
		if (s->w[i].in_flight) {
			s->w[i].doomed = true;
			atomic_store(&s->cancel, 1);
			i++;
			continue;
		}
		spool_drop(s, i);
		dropped++;
	}
	return dropped;
}

/* Under mu and scan_mu: finished steps the old trainer left behind in
 * ckpt_dir go to the trash. Returns how many went. */
static unsigned drop_left_behind(struct shipper *s)
{
	char src[SPOOL_PATH], done[SPOOL_PATH];
	unsigned dropped = 0;
	struct spool_marker *steps;
	size_t n;

	if (shipper_list_done(s, &steps, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t step = steps[i].step;

		if (!spool_step_path(src, s->ckpt_dir, step, "") ||
		    !spool_step_path(done, s->ckpt_dir, step, DONE_SUFFIX))
			continue;
		spool_trash(s, src);
		if (unlink(done) != 0 && errno != ENOENT)
			log_warn("cannot remove %s: %s", done,
				 strerror(errno));
		dropped++;
	}
	free(steps);
	return dropped;
}

void shipper_reset(struct shipper *s)
{
	unsigned dropped;

	pthread_mutex_lock(&s->scan_mu);
	pthread_mutex_lock(&s->mu);
	s->epoch++;
	dropped = drop_waiting(s);
	dropped += drop_left_behind(s);
	if (dropped)
		log_info("reset: %u waiting checkpoint steps dropped",
			 dropped);
	s->st.newest_done = -1;
	s->st.newest_uploaded = -1;
	s->nsent = 0;
	s->st.failures = 0;
	s->pending_commit = s->pending_bucket = -1;
	s->pass_now = false;
	s->error_step = -1;
	s->error_seq = 0;
	s->draining = false;
	s->retry_at_ms = 0;
	s->backoff.attempt = 0;
	spool_publish(s);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->scan_mu);
}

/* Joins the threads that are done and detaches the others: a thread
 * still busy then frees the shipper as it leaves. */
static void join_or_detach(pthread_t t, bool started, bool done)
{
	if (started && done)
		pthread_join(t, NULL);
	else if (started)
		pthread_detach(t);
}

void shipper_stop(struct shipper *s)
{
	uint64_t until;
	bool scanner_started, scanner_done, uploader_started, uploader_done;
	pthread_t scanner, uploader;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	atomic_store(&s->cancel, 1);
	pthread_cond_broadcast(&s->cv);
	until = mono_ms() + STOP_WAIT_MS;
	while ((!s->scanner_done || !s->uploader_done || s->flushers) &&
	       mono_ms() < until)
		mono_cond_wait_until(&s->cv, &s->mu, until);
	while (s->flushers) /* they leave at once on stop */
		pthread_cond_wait(&s->cv, &s->mu);
	scanner = s->scanner;
	uploader = s->uploader;
	scanner_started = s->scanner_started;
	scanner_done = s->scanner_done;
	uploader_started = s->uploader_started;
	uploader_done = s->uploader_done;
	if (!scanner_done || !uploader_done) {
		log_warn("checkpoint shipper: still busy after %u ms (an "
			 "upload inside one request); left to end on its own",
			 STOP_WAIT_MS);
		s->abandoned = true;
	}
	pthread_mutex_unlock(&s->mu);
	join_or_detach(scanner, scanner_started, scanner_done);
	join_or_detach(uploader, uploader_started, uploader_done);
	if (scanner_done && uploader_done)
		shipper_free(s);
}
