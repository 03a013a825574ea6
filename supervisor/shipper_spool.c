/*
 * shipper_spool.c: the checkpoint shipper's waiting steps (see
 * shipper_spool.h): arrivals, drops to the trash, the spool's bound,
 * and publishing each change to the supervisor.
 */
#include "supervisor/shipper_spool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool spool_parse_step(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 19 || (p[0] == '0' && n > 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10u + (uint64_t)(p[i] - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return false;
	*out = v;
	return true;
}

bool spool_step_path(char *out, const char *dir, uint64_t step,
		      const char *suffix)
{
	int n = snprintf(out, SPOOL_PATH, "%s/step-%llu%s", dir,
			 (unsigned long long)step, suffix);

	return n > 0 && n < SPOOL_PATH;
}

static bool same_state(const struct shipper_state *a,
		       const struct shipper_state *b)
{
	return a->newest_done == b->newest_done &&
	       a->newest_uploaded == b->newest_uploaded &&
	       a->newest_committed == b->newest_committed &&
	       a->waiting == b->waiting && a->dropped == b->dropped &&
	       a->failures == b->failures &&
	       a->upload_bps == b->upload_bps &&
	       !strcmp(a->last_error, b->last_error);
}

void spool_publish(struct shipper *s)
{
	unsigned waiting = 0;

	for (size_t i = 0; i < s->nw; i++)
		if (!s->w[i].doomed)
			waiting++;
	s->st.waiting = waiting;
	pthread_cond_broadcast(&s->cv);
	if (same_state(&s->st, &s->published))
		return;
	s->published = s->st;
	/* Non-blocking: when full, the reader has enough to wake for. */
	if (s->notify_fd >= 0)
		(void)fs_write_all(s->notify_fd, "s", 1);
}

void spool_set_error(struct shipper *s, const char *msg)
{
	size_t n = strnlen(msg, sizeof(s->st.last_error) - 1);

	memcpy(s->st.last_error, msg, n);
	s->st.last_error[n] = '\0';
}

ssize_t spool_find(const struct shipper *s, uint64_t step)
{
	for (size_t i = 0; i < s->nw; i++)
		if (s->w[i].step == step)
			return (ssize_t)i;
	return -1;
}

bool spool_same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

bool spool_flush_waits(const struct shipper *s, const struct spool_entry *t)
{
	for (size_t i = 0; i < s->nw; i++)
		if (s->w[i].seq == t->seq ||
		    (s->w[i].seq < t->seq &&
		     spool_same_time(&s->w[i].made, &t->made)))
			return true;
	return false;
}

bool spool_was_sent(const struct shipper *s, uint64_t step)
{
	uint64_t n = s->nsent < SPOOL_SENT ? s->nsent : SPOOL_SENT;

	for (uint64_t i = 0; i < n; i++)
		if (s->sent[i] == step)
			return true;
	return false;
}

void spool_sent(struct shipper *s, uint64_t step)
{
	if (!spool_was_sent(s, step))
		s->sent[s->nsent++ % SPOOL_SENT] = step;
}

int spool_insert(struct shipper *s, uint64_t step,
			const struct timespec *made, uint64_t bytes)
{
	if (s->nw == s->capw) {
		size_t nc = s->capw ? 2 * s->capw : 8;
		struct spool_entry *nv = realloc(s->w, nc * sizeof(*nv));

		if (!nv)
			return ENOMEM;
		s->w = nv;
		s->capw = nc;
	}
	s->w[s->nw++] = (struct spool_entry){ .step = step,
					      .seq = ++s->last_seq,
					      .made = *made,
					      .bytes = bytes };
	return 0;
}

void spool_trash(struct shipper *s, const char *path)
{
	char to[SPOOL_PATH];

	for (int tries = 0; tries < 100; tries++) {
		int n = snprintf(to, sizeof(to), "%s/" TRASH_PREFIX "%llu-%llu",
				 s->spool_dir, (unsigned long long)getpid(),
				 s->trash_seq++);

		if (n <= 0 || n >= (int)sizeof(to))
			break;
		if (rename(path, to) == 0) {
			if (strlist_push(&s->trash, to))
				log_warn("out of memory: %s stays", to);
			return;
		}
		if (errno == ENOENT)
			return;
		if (errno != EEXIST && errno != ENOTEMPTY)
			break;
	}
	log_warn("could not move %s aside for deletion: %s", path,
		 strerror(errno));
}

void spool_drop(struct shipper *s, size_t i)
{
	char path[SPOOL_PATH];

	if (spool_step_path(path, s->spool_dir, s->w[i].step, ""))
		spool_trash(s, path);
	memmove(&s->w[i], &s->w[i + 1], (s->nw - i - 1) * sizeof(*s->w));
	s->nw--;
}

void spool_enforce_bound(struct shipper *s)
{
	uint64_t total = 0;
	size_t i;

	if (!s->spool_bytes || !s->nw)
		return;
	for (i = 0; i < s->nw; i++)
		total += s->w[i].bytes;
	i = 0;
	while (total > s->spool_bytes && i + 1 < s->nw) {
		if (s->w[i].in_flight || s->w[i].doomed) {
			i++;
			continue;
		}
		log_warn("spool over its bound (%llu of %llu bytes): "
			 "dropping step %llu, older than step %llu",
			 (unsigned long long)total,
			 (unsigned long long)s->spool_bytes,
			 (unsigned long long)s->w[i].step,
			 (unsigned long long)s->w[s->nw - 1].step);
		total -= s->w[i].bytes;
		spool_drop(s, i);
		s->st.dropped++;
	}
	if (s->w[s->nw - 1].bytes > s->spool_bytes &&
	    s->warned_step != (int64_t)s->w[s->nw - 1].step) {
		s->warned_step = (int64_t)s->w[s->nw - 1].step;
		log_warn("step %llu alone is %llu bytes, more than the spool's "
			 "bound of %llu; keeping it anyway (raise spool_mb)",
			 (unsigned long long)s->w[s->nw - 1].step,
			 (unsigned long long)s->w[s->nw - 1].bytes,
			 (unsigned long long)s->spool_bytes);
	}
}

void shipper_free(struct shipper *s)
{
	pthread_mutex_destroy(&s->scan_mu);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	strlist_release(&s->trash);
	free(s->w);
	free(s->run_url);
	free(s->ckpt_dir);
	free(s->spool_dir);
	free(s->part);
	free(s->local_dir);
	free(s);
}

void shipper_thread_done(struct shipper *s, bool *done)
{
	bool last;

	*done = true;
	last = s->abandoned && s->scanner_done && s->uploader_done;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (last) {
		log_info("checkpoint shipper: the last upload has ended");
		shipper_free(s);
	}
}
