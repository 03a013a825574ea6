/*
 * watch_lease.c: see watch_lease.h. One mutex keeps the record this
 * watcher writes, its object generation and how long it stays valid; the
 * renewing thread and the watcher's own writes (watch_lease_act) take
 * turns on the one store handle under it.
 */
#include "launcher/watch_lease.h"
#include "launcher/job.h"
#include "launcher/lease_record.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEASE_MAX ((size_t)1 << 20)
/* A holder stops acting this long before its lease expires by its own
 * clock, and a waiter takes the lease over at that expiry by its clock:
 * room for clocks that disagree a little. */
#define SKEW_MS(lease) ((lease) / 6)

struct watch_lease {
	struct store *s;
	unsigned lease_ms;
	uint64_t start_ms;
	char holder[320];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool thread_on;
	/* Under mu. */
	bool stop, held;
	int64_t gen;              /* the record's object generation */
	uint64_t renewed_ms;      /* mono_ms() of the last renewal sent */
	struct lease_record rec;  /* what this watcher writes */
	char lost[1100];          /* why it was lost, until said */
};

const char *watch_lease_bad_ms(unsigned ms)
{
	return ms < WATCH_LEASE_MIN_MS || ms > WATCH_LEASE_MAX_MS
		       ? "--lease takes from 0.3 s to 1 h"
		       : NULL;
}

static void make_holder(char *out, size_t cap)
{
	char host[256] = "";
	uint64_t x = (uint64_t)lease_wall_ms() ^ (mono_us() << 20) ^
		     ((uint64_t)getpid() << 40);

	/* splitmix64: a nonce told apart from a restarted process's with
	 * the same pid. */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	if (gethostname(host, sizeof(host) - 1) || !*host)
		snprintf(host, sizeof(host), "unknown-host");
	snprintf(out, cap, "%s:%ld:%08x", host, (long)getpid(),
		 (unsigned)(x & 0xffffffffu));
}

/* Writes l->rec if the record is still at l->gen (mu held). */
static int write_locked(struct watch_lease *l, struct err *e)
{
	struct store_object o = { 0 };
	uint64_t sent = mono_ms();
	char *text = NULL;
	int rc;

	l->rec.expires_ms = lease_wall_ms() + l->lease_ms;
	rc = lease_record_text(&l->rec, &text, e);
	if (!rc)
		rc = store_put(l->s, RUN_WATCH_LEASE, text, strlen(text), l->gen,
			       &o, e);
	free(text);
	if (!rc) {
		l->gen = o.generation;
		l->renewed_ms = sent;
		l->held = true;
	} else if (l->held) {
		l->held = false;
		snprintf(l->lost, sizeof(l->lost), "%s%s",
			 rc == CLOUD_EPRECONDITION ? "another watcher wrote "
			 "it: " : "renewing it failed: ", e->msg);
	}
	store_object_release(&o);
	return rc;
}

static bool valid_locked(const struct watch_lease *l)
{
	return l->held &&
	       mono_ms() < l->renewed_ms + l->lease_ms - SKEW_MS(l->lease_ms);
}

static void *renewer(void *arg)
{
	struct watch_lease *l = arg;
	struct err e;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		uint64_t next = l->held ? l->renewed_ms + l->lease_ms / 3
					: UINT64_MAX;

		if (mono_ms() < next) {
			mono_cond_wait_until(&l->cv, &l->mu, next);
			continue;
		}
		err_init(&e);
		write_locked(l, &e);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int watch_lease_open(const char *run_url, unsigned lease_ms,
		     uint64_t start_ms, struct watch_lease **out,
		     struct err *e)
{
	struct watch_lease *l = calloc(1, sizeof(*l));
	int rc;

	*out = NULL;
	if (!l)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	l->lease_ms = lease_ms;
	l->start_ms = start_ms;
	l->gen = STORE_CREATE_ONLY;
	make_holder(l->holder, sizeof(l->holder));
	rc = store_open(&l->s, run_url, e);
	if (rc) {
		free(l);
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	if (mono_cond_init(&l->cv)) {
		pthread_mutex_destroy(&l->mu);
		store_close(l->s);
		free(l);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	if (thread_start(&l->thread, renewer, l)) {
		watch_lease_close(l);
		return err_set(e, COMMON_ENOMEM, "cannot start the lease's "
			       "renewing thread");
	}
	l->thread_on = true;
	*out = l;
	return 0;
}

void watch_lease_close(struct watch_lease *l)
{
	struct err e;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (l->thread_on)
		pthread_join(l->thread, NULL);
	/* Gone, a waiting watcher takes it at once rather than at its
	 * expiry; if someone else wrote it, it is theirs to keep. */
	err_init(&e);
	if (l->held && store_delete(l->s, RUN_WATCH_LEASE, l->gen, &e))
		log_warn("releasing the watch lease: %s", e.msg);
	lease_note_release(&l->rec.note);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	store_close(l->s);
	free(l);
}

bool watch_lease_held(struct watch_lease *l)
{
	bool held;

	pthread_mutex_lock(&l->mu);
	held = valid_locked(l);
	pthread_mutex_unlock(&l->mu);
	return held;
}

/* Takes the record at object generation gen (STORE_CREATE_ONLY: none),
 * carrying on the recreation note found in it. */
static int take_over(struct watch_lease *l, int64_t gen,
		     struct lease_note *note, struct err *e)
{
	int rc;

	pthread_mutex_lock(&l->mu);
	lease_note_release(&l->rec.note);
	l->rec.note = *note;
	memset(note, 0, sizeof(*note));
	snprintf(l->rec.holder, sizeof(l->rec.holder), "%s", l->holder);
	lease_time_text(lease_wall_ms(), l->rec.acquired,
			sizeof(l->rec.acquired));
	l->rec.lease_ms = l->lease_ms;
	l->gen = gen;
	l->held = false;
	rc = write_locked(l, e);
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (!rc) {
		job_say(l->start_ms, "holding the watch lease as %s (%.1f s, "
			"renewed every %.1f s)", l->holder, l->lease_ms / 1000.0,
			l->lease_ms / 3000.0);
		if (*l->rec.note.about)
			job_say(l->start_ms, "a recreation of %s (%s) was under "
				"way: finishing it, not starting another",
				l->rec.note.about, l->rec.note.why);
	}
	return rc;
}

/* What waiting says and remembers between looks. */
struct waiting {
	char said[320];           /* the holder said last */
	int64_t bad_gen;          /* a record that is no lease, seen */
	uint64_t bad_since;
};

/* One look at the record: 0 taken, -1 wait *sleep_ms and look again, or
 * a store error. */
static int look(struct watch_lease *l, struct waiting *w, unsigned *sleep_ms,
		struct err *e)
{
	struct store_object o = { 0 };
	struct lease_record r;
	struct err why;
	char *data = NULL, expires[40];
	size_t len = 0;
	int64_t now, gen;
	int rc;

	*sleep_ms = l->lease_ms / 3;
	rc = store_read(l->s, RUN_WATCH_LEASE, LEASE_MAX, &data, &len, &o, e);
	gen = o.generation;
	store_object_release(&o);
	if (rc == CLOUD_ENOTFOUND) {
		memset(&r, 0, sizeof(r));
		err_init(e);
		rc = take_over(l, STORE_CREATE_ONLY, &r.note, e);
		return rc == CLOUD_EPRECONDITION ? (*sleep_ms = 0, -1) : rc;
	}
	if (rc)
		return rc;
	err_init(&why);
	rc = lease_record_parse(data, len, &r, &why);
	free(data);
	if (rc == COMMON_ENOMEM)
		return err_set(e, rc, "%s", why.msg);
	if (rc) {
		if (w->bad_gen != gen) {
			w->bad_gen = gen;
			w->bad_since = mono_ms();
			log_warn("%s is not a watch lease (%s): taking it over "
				 "once it has stayed so for %.1f s",
				 store_url(l->s, RUN_WATCH_LEASE), why.msg,
				 l->lease_ms / 1000.0);
		}
		if (mono_ms() < w->bad_since + l->lease_ms) {
			*sleep_ms = (unsigned)(w->bad_since + l->lease_ms -
					       mono_ms());
			return -1;
		}
		memset(&r, 0, sizeof(r));
	} else {
		now = lease_wall_ms();
		if (strcmp(r.holder, l->holder) && now < r.expires_ms) {
			lease_time_text(r.expires_ms, expires, sizeof(expires));
			if (strcmp(w->said, r.holder))
				job_say(l->start_ms, "the run is watched by %s "
					"(since %s); its lease expires at %s "
					"(in %.1f s) unless renewed: waiting",
					r.holder, r.acquired, expires,
					(r.expires_ms - now) / 1000.0);
			snprintf(w->said, sizeof(w->said), "%s", r.holder);
			if (r.expires_ms - now < *sleep_ms)
				*sleep_ms = (unsigned)(r.expires_ms - now + 20);
			lease_note_release(&r.note);
			return -1;
		}
		if (strcmp(r.holder, l->holder))
			job_say(l->start_ms, "the lease of %s has expired: "
				"taking over", r.holder);
	}
	rc = take_over(l, gen, &r.note, e);
	lease_note_release(&r.note);
	return rc == CLOUD_EPRECONDITION ? (*sleep_ms = 0, -1) : rc;
}

int watch_lease_take(struct watch_lease *l, struct err *e)
{
	struct waiting w = { .bad_gen = -1 };
	unsigned sleep_ms;
	int rc;

	pthread_mutex_lock(&l->mu);
	if (*l->lost) {
		job_say(l->start_ms, "lost the watch lease (%s): acting no "
			"more, waiting to take it again", l->lost);
		l->lost[0] = '\0';
	}
	rc = valid_locked(l) ? 0 : -1;
	pthread_mutex_unlock(&l->mu);
	while (rc < 0) {
		err_init(e);
		rc = look(l, &w, &sleep_ms, e);
		if (rc < 0 && sleep_ms)
			proc_sleep_ms(sleep_ms, true);
	}
	return rc;
}

int watch_lease_act(struct watch_lease *l, const struct lease_note *note,
		    struct err *e)
{
	int rc;

	err_init(e);
	pthread_mutex_lock(&l->mu);
	if (!valid_locked(l)) {
		l->held = false;
		pthread_mutex_unlock(&l->mu);
		return err_set(e, CLOUD_EPRECONDITION, "the watch lease is no "
			       "longer held");
	}
	if (note) {
		char *body = note->body ? strdup(note->body) : NULL;

		if (note->body && !body) {
			pthread_mutex_unlock(&l->mu);
			return err_set(e, COMMON_ENOMEM, "out of memory");
		}
		lease_note_release(&l->rec.note);
		l->rec.note = *note;
		l->rec.note.body = body;
	}
	rc = write_locked(l, e);
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int watch_lease_note(struct watch_lease *l, struct lease_note *out)
{
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	*out = l->rec.note;
	out->body = NULL;
	if (l->rec.note.body && !(out->body = strdup(l->rec.note.body)))
		rc = COMMON_ENOMEM;
	pthread_mutex_unlock(&l->mu);
	return rc;
}
