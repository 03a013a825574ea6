/*
 * shipper_spool.h (private to the checkpoint shipper): the state its two
 * threads share under one mutex, and the spool operations both use.
 *
 * shipper.c holds the API (shipper.h), shipper_scanner.c the thread that
 * takes finished steps out of the trainer's directory into the spool,
 * shipper_uploader.c the thread that uploads them, and shipper_spool.c
 * the waiting steps, the trash and the spool's bound they work on.
 *
 * A step that is dropped is first renamed to a ".trash-*" name in the
 * spool (so its step-N name is free again at once) and deleted later by
 * the scanner. Nothing slow runs under the mutex: only renames and
 * unlinks, never an upload, a walk over a step or a recursive delete.
 */
#ifndef SLICECTL_SUPERVISOR_SHIPPER_SPOOL_H
#define SLICECTL_SUPERVISOR_SHIPPER_SPOOL_H

#include "supervisor/shipper.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

#define SPOOL_PATH 4096
#define DONE_SUFFIX ".done"
#define TRASH_PREFIX ".trash-"
/* Trainers write again their newest steps only: a few suffice. */
#define SPOOL_SENT 16

/* Steps are ordered by when their .done marker appeared (seq), not by
 * number: a trainer told to stop may save a step older than one it
 * wrote before (the step its whole group completed), and that one is
 * the step that matters. */
struct spool_entry {
	uint64_t step;
	uint64_t seq;    /* arrival order: later is newer */
	struct timespec made; /* its .done marker's mtime */
	uint64_t bytes;
	bool in_flight;  /* the uploader is saving it */
	bool doomed;     /* reset while in flight: trash it when back */
};

struct shipper {
	/* The configuration, owned copies. */
	char *run_url, *ckpt_dir, *spool_dir, *part;
	char *local_dir;         /* NULL: no local tier */
	unsigned local_keep;
	void (*kept)(void *ud, uint64_t step);
	void *kept_ud;
	unsigned persist_every;
	size_t (*hold)(void *ud, struct store *s, uint64_t step,
		       struct ckpt_holder *h);
	void *hold_ud;
	unsigned parts_expected;
	unsigned rank, takeover_ms;
	bool prune;
	unsigned keep, keep_every;
	uint64_t spool_bytes;
	int notify_fd;
	unsigned poll_ms;

	pthread_mutex_t scan_mu; /* one pass over ckpt_dir at a time;
				    taken before mu, never after */
	pthread_mutex_t mu;      /* everything below */
	pthread_cond_t cv;       /* broadcast on every change */

	struct shipper_state st;
	struct shipper_state published;
	struct spool_entry *w;   /* the spool's steps, by arrival */
	size_t nw, capw;
	uint64_t last_seq;       /* of the newest arrival */
	uint64_t uploaded_seq;   /* of the newest arrival uploaded */
	uint64_t error_seq;      /* of the last step dropped for an error
				    (error_step, error_code); 0 none */
	/* The last SPOOL_SENT steps uploaded in this generation, a ring:
	 * one written again is not uploaded again (spool_was_sent). */
	uint64_t sent[SPOOL_SENT];
	uint64_t nsent;          /* uploads recorded since the reset */
	struct strlist trash;    /* spool paths to delete */
	unsigned long long trash_seq;

	unsigned epoch;          /* bumped by shipper_reset */
	bool stop, kick;
	int64_t pending_commit;  /* uploaded, not seen committed */
	/* The newest step uploaded to the bucket (not a fast-tier step)
	 * and not seen committed, -1 none: a newer fast-tier step's commit
	 * must not leave the bucket without a step to fall back on. */
	int64_t pending_bucket;
	uint64_t next_pass_ms;   /* of a commit pass over pending_commit */
	uint64_t pass_wait_ms;   /* the committer's backoff between passes */
	bool pass_now;           /* a flush wants a commit pass at once */
	unsigned passes;         /* commit passes made */
	uint64_t retry_at_ms;    /* no upload attempt before this */
	struct backoff backoff;
	bool preempted;          /* a flush cancelled the upload in flight */
	bool draining;           /* a flush came: steps whose markers were
				    made in the same tick all go out */
	int64_t error_step;      /* last step dropped for an error... */
	int error_code;          /* ...and that error */
	int64_t warned_step;     /* "larger than the spool" said for it */
	int scan_errno;          /* last scan error logged, to say it once
				    (under scan_mu) */
	atomic_int cancel;       /* read by ckpt_save */

	/* Threads. */
	pthread_t scanner, uploader;
	bool scanner_started, uploader_started;
	bool scanner_done, uploader_done;
	bool abandoned;          /* stop gave up waiting: the last thread
				    out frees the shipper */
	unsigned flushers;
	bool opened;             /* the uploader's store_open is done */
	int open_rc;
	struct err open_err;
};

/* shipper_spool.c: names and files. */

/* "step-N" with N decimal, no sign, no leading zero, within int64. */
bool spool_parse_step(const char *p, size_t n, uint64_t *out);
/* DIR/step-N followed by suffix into out (SPOOL_PATH bytes); false when
 * it does not fit. */
bool spool_step_path(char *out, const char *dir, uint64_t step,
		     const char *suffix);

/* shipper_spool.c: the waiting steps; every function here runs under mu. */

/* After any change: wakes every waiter, and tells notify_fd when
 * shipper_state changed. */
void spool_publish(struct shipper *s);
void spool_set_error(struct shipper *s, const char *msg);
/* The index of step among the waiting ones; -1 none. */
ssize_t spool_find(const struct shipper *s, uint64_t step);
/* Two markers made in the same clock tick: which came last is a guess
 * (file times are coarse). */
bool spool_same_time(const struct timespec *a, const struct timespec *b);
/* Whether a flush for the newest arrival t must wait still: t, or a step
 * whose marker was made in the same tick before it, is not uploaded. */
bool spool_flush_waits(const struct shipper *s, const struct spool_entry *t);
/* Whether step was uploaded in this generation: a trainer that saves
 * its current step again when told to stop writes a step it wrote
 * before, and a second upload would replace a part that a COMMIT written
 * meanwhile names (the next generation would then find the step bad).
 * The step's state is the same either way, so the upload made stands. */
bool spool_was_sent(const struct shipper *s, uint64_t step);
void spool_sent(struct shipper *s, uint64_t step);
/* Appends step as the newest arrival. Returns 0 or ENOMEM. */
int spool_insert(struct shipper *s, uint64_t step,
		 const struct timespec *made, uint64_t bytes);
/* Renames path out of the way to a trash name and queues it for deletion
 * by the scanner. */
void spool_trash(struct shipper *s, const char *path);
/* Drops entry i (its spool directory goes to the trash). */
void spool_drop(struct shipper *s, size_t i);
/* The spool bound, after a step was added. The oldest waiting steps go
 * first; never the newest, nor the one being uploaded. */
void spool_enforce_bound(struct shipper *s);

/* shipper_spool.c: life. */
void shipper_free(struct shipper *s);
/* A thread's last act (mu held on entry, released here): done is its
 * *_done flag; the last thread out of an abandoned shipper frees it. */
void shipper_thread_done(struct shipper *s, bool *done);

/* shipper_scanner.c */

struct spool_marker {
	uint64_t step;
	struct timespec made;
};

/* The steps with a .done marker in ckpt_dir, in the order the markers
 * were made (then by number) (*out malloc'd). Returns 0 or an errno
 * (ENOENT: no directory yet, no steps). */
int shipper_list_done(struct shipper *s, struct spool_marker **out,
		      size_t *n);
/* One pass over ckpt_dir (scan_mu held): every step-N with its .done
 * marker is renamed into the spool and its marker removed; then they
 * join the waiting steps all at once, so the uploader picks the newest
 * of them. Returns 0, or the error of the newest step that could not be
 * taken (its step in *failed_step), with e filled. */
int shipper_scan(struct shipper *s, int64_t *failed_step, struct err *e);
/* Leftovers of an earlier supervisor in the spool go to the trash. */
void shipper_clear_spool(struct shipper *s);
void *shipper_scanner_main(void *arg);

/* shipper_uploader.c */
void *shipper_uploader_main(void *arg);

#endif
