/*
 * loop.h (private to ssh/): a small event loop in the manner of redis's ae:
 * file events keyed by fd, dispatched from one poll backend (epoll on Linux,
 * poll elsewhere) behind the same few functions. Time is the caller's: the
 * caller passes how long it may sleep, computed from its own deadlines on
 * the monotonic clock. EINTR counts as "no events".
 */
#ifndef SLICECTL_SSH_LOOP_H
#define SLICECTL_SSH_LOOP_H

#include "common/common.h"

enum { LOOP_NONE = 0, LOOP_READ = 1, LOOP_WRITE = 2 };

struct loop;
typedef void loop_fn(struct loop *l, int fd, void *ud, int fired);

struct loop_file {
	int mask;
	loop_fn *fn;
	void *ud;
};

struct loop_fired {
	int fd;
	int mask;
};

struct loop {
	struct loop_file *files; /* indexed by fd, grown on demand */
	int nfiles;
	struct loop_fired *fired;
	int nfired_cap;
	int watched;             /* fds with a non-empty mask */
	void *backend;
};

int loop_init(struct loop *l, struct err *e);
void loop_release(struct loop *l);

/* Sets exactly which events fd is watched for (LOOP_NONE stops watching). */
int loop_watch(struct loop *l, int fd, int mask, loop_fn *fn, void *ud,
	       struct err *e);

/* Waits up to timeout_ms (-1: forever) and calls the handlers of the fds
 * that fired. Returns the number handled, or -1 after filling e. */
int loop_once(struct loop *l, int timeout_ms, struct err *e);

/* The backend: one of loop_epoll.c or loop_poll.c is built. */
int loop_backend_init(struct loop *l, struct err *e);
void loop_backend_release(struct loop *l);
int loop_backend_set(struct loop *l, int fd, int old_mask, int new_mask,
		     struct err *e);
/* Fills l->fired (capacity l->nfired_cap) and returns how many fired. */
int loop_backend_wait(struct loop *l, int timeout_ms, struct err *e);
/* Lets the backend grow with the fd table. */
int loop_backend_resize(struct loop *l, int nfiles, struct err *e);

#endif
