/*
 * shipper_uploader.c: the checkpoint shipper's uploader thread. It owns
 * the store: it uploads the newest waiting step (ckpt_save), or keeps
 * it on the fast tiers when it is a fast-tier step, retries failures
 * with backoff, commits as the step's committer or a deputy (shipper.h),
 * and on worker 0 prunes.
 */
#include "supervisor/shipper_spool.h"

#include "checkpoint/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool permanent(int rc)
{
	/* The step itself is unusable (its spool directory is gone or
	 * unreadable) or the request is: retrying cannot help. */
	return rc == CKPT_ESOURCE || rc == CKPT_EINVAL || rc == CKPT_EUNSAFE;
}

/* Under mu: step was seen committed. Returns whether to prune. */
static bool saw_commit(struct shipper *s, uint64_t step)
{
	if (s->pending_commit >= 0 && (uint64_t)s->pending_commit <= step)
		s->pending_commit = -1;
	if ((int64_t)step <= s->st.newest_committed)
		return false;
	s->st.newest_committed = (int64_t)step;
	log_info("step %llu is committed", (unsigned long long)step);
	return s->prune;
}

/* Worker 0 prunes after a commit. Called and returns with mu held,
 * dropped meanwhile. */
static void prune(struct shipper *s, struct store *store)
{
	struct ckpt_prune_options po;
	struct ckpt_prune_result pr;
	struct err e;
	int rc;

	ckpt_prune_options_init(&po);
	po.keep = s->keep ? s->keep : 1;
	po.keep_every = s->keep_every;
	pthread_mutex_unlock(&s->mu);
	rc = ckpt_prune(store, &po, &pr, &e);
	if (rc)
		log_warn("pruning checkpoints: %s", e.msg);
	else if (pr.steps_deleted)
		log_info("pruned %zu checkpoint steps (%zu objects, %llu "
			 "bytes)", pr.steps_deleted, pr.objects_deleted,
			 (unsigned long long)pr.bytes_freed);
	pthread_mutex_lock(&s->mu);
}

/* The local tier after an upload: its newest committed copies, and the
 * newer ones whose COMMIT may still come. A worker other than the
 * committer learns of commits late (a deputy's stat), so what it thinks
 * committed may be old: the newer copies are bounded too. Called and
 * returns with mu held, dropped meanwhile. */
static void prune_local(struct shipper *s, uint64_t step)
{
	int64_t committed = s->st.newest_committed;
	size_t dropped;

	if (!s->local_dir)
		return;
	pthread_mutex_unlock(&s->mu);
	if (s->kept)
		s->kept(s->kept_ud, step);
	if (ckpt_local_prune(s->local_dir, s->local_keep,
			     committed > 0 ? (uint64_t)committed : 0,
			     UINT64_MAX, &dropped))
		log_warn("local tier %s: %s", s->local_dir, strerror(errno));
	else if (dropped)
		log_debug("local tier: %zu older steps dropped", dropped);
	pthread_mutex_lock(&s->mu);
}

/* Under mu: how long until the next commit pass over the newest
 * uploaded step. The committer backs off from poll_ms to its cap, but
 * after a flush (a deadline: the group resumes once the final step is
 * committed) it keeps to poll_ms; a deputy's turns come rank x
 * takeover_ms apart, so that N workers' deputies list an uncommitted
 * step about ln(N) times a takeover_ms, not N times. */
static uint64_t pass_wait(struct shipper *s, bool first)
{
	uint64_t cap = (uint64_t)SHIPPER_COMMIT_POLLS * s->poll_ms;

	if (s->rank)
		return (uint64_t)s->rank * s->takeover_ms;
	s->pass_wait_ms = first || s->draining ? s->poll_ms
					       : 2 * s->pass_wait_ms;
	if (s->pass_wait_ms > cap)
		s->pass_wait_ms = cap;
	return s->pass_wait_ms;
}

/* The unlocked part of a pass over the newest step uploaded to the
 * bucket, when a newer fast-tier step is pending instead: whether it
 * is committed now. */
static bool commit_bucket_step(struct store *store, uint64_t step,
			       unsigned parts_expected)
{
	bool committed = false;
	struct err e;

	if (ckpt_commit(store, step, parts_expected, &committed, &e))
		log_debug("committing step %llu: %s",
			  (unsigned long long)step, e.msg);
	return committed;
}

/* A pass over the newest uploaded step: commits it if every part is
 * there now. The committer's own, or a deputy's takeover (the committer
 * may have died). Called and returns with mu held. */
static void commit_pass(struct shipper *s, struct store *store)
{
	int64_t step_or_none = s->pending_commit, bucket = s->pending_bucket;
	uint64_t step = step_or_none >= 0 ? (uint64_t)step_or_none
					  : (uint64_t)bucket;
	unsigned epoch = s->epoch;
	bool committed = false, do_prune = false, bucket_done = false;
	struct err e;
	int rc;

	pthread_mutex_unlock(&s->mu);
	if (bucket >= 0 && (uint64_t)bucket != step)
		bucket_done = commit_bucket_step(store, (uint64_t)bucket,
						 s->parts_expected);
	/* Not info: in the normal case the deputy's stat finds COMMIT. */
	if (s->rank)
		log_debug("step %llu: not seen committed %llu ms after this "
			  "part went up; committing it if it is complete",
			  (unsigned long long)step,
			  (unsigned long long)s->rank * s->takeover_ms);
	rc = ckpt_commit(store, step, s->parts_expected, &committed, &e);
	pthread_mutex_lock(&s->mu);
	s->next_pass_ms = mono_ms() + pass_wait(s, false);
	s->pass_now = false;
	s->passes++;
	if (epoch != s->epoch)
		return;
	if (s->pending_bucket == bucket &&
	    (bucket_done || ((uint64_t)bucket == step && committed))) {
		s->pending_bucket = -1;
		do_prune = saw_commit(s, (uint64_t)bucket);
	}
	if (rc)
		log_debug("committing step %llu: %s",
			  (unsigned long long)step, e.msg);
	else if (committed && saw_commit(s, step))
		do_prune = true;
	spool_publish(s);
	if (do_prune)
		prune(s, store);
}

/* Under mu: whether step is a fast-tier step (shipper_config). A flush's
 * steps are not: the host may be going away with its disk. */
static bool fast_step(const struct shipper *s, uint64_t step)
{
	return s->hold && s->local_dir && s->persist_every > 1 &&
	       step % s->persist_every && !s->draining && !s->stop;
}

/* The unlocked part of a fast-tier step's attempt: kept in the local
 * tier, pushed to the partner, recorded, and committed by the
 * committer. A local tier that cannot keep it sends it to the bucket
 * instead (*fast false). */
static int save_fast(struct shipper *s, struct store *store,
		     struct ckpt_save_options *o, const char *path,
		     uint64_t step, struct ckpt_save_result *res, bool *fast,
		     struct err *e)
{
	struct ckpt_holder h[CKPT_HOLDERS_MAX];
	size_t n;
	int rc;

	o->fast = true;
	rc = ckpt_save(store, path, step, o, res, e);
	n = rc ? 0 : s->hold(s->hold_ud, store, step, h);
	if (rc == CLOUD_EIO || rc == CKPT_EINVAL || (!rc && !n)) {
		log_warn("step %llu goes to the bucket: %s",
			 (unsigned long long)step,
			 rc ? e->msg : "no host but this leaving one holds it");
		*fast = false;
		o->fast = false;
		return ckpt_save(store, path, step, o, res, e);
	}
	if (rc)
		return rc;
	rc = ckpt_fast_record(store, step, s->part, res, h, n, e);
	if (!rc && o->commit)
		rc = ckpt_commit(store, step, s->parts_expected,
				 &res->committed, e);
	return rc;
}

/* The unlocked part of an attempt: ckpt_save of the spool's step, its
 * time in *us; commit: whether the save commits after its upload;
 * *fast: a fast-tier step's (in: whether to try). */
static int save(struct shipper *s, struct store *store, uint64_t step,
		bool commit, bool *fast, struct ckpt_save_result *res,
		uint64_t *us, struct err *e)
{
	struct ckpt_save_options o;
	char path[SPOOL_PATH];
	int rc;

	ckpt_save_options_init(&o);
	o.part = s->part;
	o.parts_expected = s->parts_expected;
	o.commit = commit;
	o.cancel = &s->cancel;
	o.local_dir = s->local_dir;
	*us = mono_us();
	if (!spool_step_path(path, s->spool_dir, step, ""))
		rc = err_set(e, CKPT_EINVAL, "spool path too long");
	else if (*fast)
		rc = save_fast(s, store, &o, path, step, res, fast, e);
	else
		rc = ckpt_save(store, path, step, &o, res, e);
	*us = mono_us() - *us;
	return rc;
}

/* What an operator needs to know whether a step of this size fits in a
 * preemption notice. */
static void note_speed(struct shipper *s, uint64_t step, uint64_t bytes,
		       uint64_t us)
{
	s->st.upload_bps = bytes * 1000000 / (us ? us : 1);
	log_info("step %llu: %.1f MiB uploaded in %.2f s (%.1f MiB/s)",
		 (unsigned long long)step, bytes / 1048576.0, us / 1e6,
		 s->st.upload_bps / 1048576.0);
}

/* Coalescing, once the arrival seq (step, its marker made at made) is
 * uploaded: the older waiting steps are not needed, but for a flush's
 * those whose order is a guess. */
static void drop_older(struct shipper *s, uint64_t step, uint64_t seq,
		       const struct timespec *made)
{
	for (size_t i = 0; i < s->nw;) {
		const struct spool_entry *o = &s->w[i];

		if (o->seq > seq || o->in_flight ||
		    (s->draining && spool_same_time(&o->made, made))) {
			i++;
			continue;
		}
		log_info("step %llu dropped: step %llu is uploaded",
			 (unsigned long long)o->step, (unsigned long long)step);
		spool_drop(s, i);
		s->st.dropped++;
	}
}

/* Entry at (arrival seq) is uploaded, or was committed already (rc
 * CKPT_ECOMMITTED). Returns whether to prune. */
static bool uploaded(struct shipper *s, size_t at, uint64_t seq, int rc,
		     bool committed, bool fast)
{
	uint64_t step = s->w[at].step;
	struct timespec made = s->w[at].made;

	log_info("step %llu %s %s%s", (unsigned long long)step,
		 fast ? "kept on the fast tiers as" : "uploaded as", s->part,
		 rc == CKPT_ECOMMITTED ? " (it was already committed)"
		 : committed ? "; committed" : "");
	spool_sent(s, step);
	if (seq > s->uploaded_seq) {
		s->uploaded_seq = seq;
		s->st.newest_uploaded = (int64_t)step;
	}
	spool_drop(s, at);
	drop_older(s, step, seq, &made);
	s->st.failures = 0;
	s->backoff.attempt = 0;
	s->retry_at_ms = 0;
	if (!fast && !committed && (int64_t)step > s->pending_bucket)
		s->pending_bucket = (int64_t)step;
	if (committed)
		return saw_commit(s, step);
	if (seq == s->uploaded_seq) {
		s->pending_commit = (int64_t)step;
		s->next_pass_ms = mono_ms() + pass_wait(s, true);
	}
	return false;
}

/* The attempt of entry at (arrival seq) failed with rc: aborted for a
 * stop or a flush, dropped when retrying cannot help, else retried
 * after a backoff. */
static void failed(struct shipper *s, size_t at, uint64_t seq, int rc,
		   const struct err *e)
{
	uint64_t step = s->w[at].step;
	unsigned delay;

	if (rc == CLOUD_EABORTED && (s->stop || s->preempted)) {
		log_info("upload of step %llu aborted%s",
			 (unsigned long long)step,
			 s->stop ? "" : ": a newer step goes first");
		s->retry_at_ms = 0;
		return;
	}
	s->st.failures++;
	spool_set_error(s, e->msg);
	if (permanent(rc)) {
		log_error("step %llu cannot be uploaded, dropped: %s",
			  (unsigned long long)step, e->msg);
		s->error_step = (int64_t)step;
		s->error_seq = seq;
		s->error_code = rc;
		spool_drop(s, at);
		s->st.dropped++;
		return;
	}
	delay = backoff_next_ms(&s->backoff);
	log_warn("uploading step %llu failed (%u in a row), next try in %u "
		 "ms: %s", (unsigned long long)step, s->st.failures, delay,
		 e->msg);
	s->retry_at_ms = mono_ms() + delay;
}

/* One upload attempt of the newest waiting step. Called and returns
 * with mu held. */
static void upload_newest(struct shipper *s, struct store *store)
{
	struct spool_entry *ent = &s->w[s->nw - 1];
	uint64_t step = ent->step, seq = ent->seq, us;
	unsigned epoch = s->epoch;
	struct ckpt_save_result res;
	bool committed, do_prune = false, fast = fast_step(s, step);
	struct err e;
	ssize_t at;
	int rc;

	ent->in_flight = true;
	s->preempted = false;
	atomic_store(&s->cancel, s->stop ? 1 : 0);
	pthread_mutex_unlock(&s->mu);
	rc = save(s, store, step, !s->rank, &fast, &res, &us, &e);
	committed = rc == CKPT_ECOMMITTED || (!rc && res.committed);
	pthread_mutex_lock(&s->mu);
	at = spool_find(s, step);
	if (at < 0) /* cannot happen: in-flight entries stay */
		return;
	s->w[at].in_flight = false;
	if (s->w[at].doomed || epoch != s->epoch) {
		log_info("step %llu belongs to an earlier generation: "
			 "dropped%s", (unsigned long long)step,
			 rc == CLOUD_EABORTED ? " (its upload was aborted)"
					       : "");
		spool_drop(s, (size_t)at);
		spool_publish(s);
		return;
	}
	if (!rc && res.bytes && !fast)
		note_speed(s, step, res.bytes, us);
	if (!rc || rc == CKPT_ECOMMITTED)
		do_prune = uploaded(s, (size_t)at, seq, rc, committed, fast);
	else
		failed(s, (size_t)at, seq, rc, &e);
	/* The step that was in flight may be dropped now if over bound. */
	spool_enforce_bound(s);
	spool_publish(s);
	if (!rc)
		prune_local(s, step);
	if (do_prune)
		prune(s, store);
}

void *shipper_uploader_main(void *arg)
{
	struct shipper *s = arg;
	struct store *store = NULL;
	struct err e;
	int rc;

	rc = store_open(&store, s->run_url, &e);
	pthread_mutex_lock(&s->mu);
	s->open_rc = rc;
	s->open_err = e;
	s->opened = true;
	pthread_cond_broadcast(&s->cv);
	while (!rc && !s->stop) {
		uint64_t now = mono_ms(), until = UINT64_MAX;
		bool pass_due = s->pending_commit >= 0 ||
				s->pending_bucket >= 0;

		if (s->nw && now >= s->retry_at_ms) {
			upload_newest(s, store);
			continue;
		}
		/* A commit pass when a flush asks for one, else when due
		 * unless a flush is in a hurry. */
		if (pass_due && (s->pass_now ||
				 (now >= s->next_pass_ms && !s->flushers))) {
			commit_pass(s, store);
			continue;
		}
		if (s->nw)
			until = s->retry_at_ms;
		if (pass_due && s->next_pass_ms < until)
			until = s->next_pass_ms;
		mono_cond_wait_until(&s->cv, &s->mu, until);
	}
	pthread_mutex_unlock(&s->mu);
	store_close(store);
	pthread_mutex_lock(&s->mu);
	shipper_thread_done(s, &s->uploader_done);
	return NULL;
}
