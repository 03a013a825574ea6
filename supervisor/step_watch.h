/*
 * step_watch.h (private to supervisor/): the trainer's progress on disk,
 * through inotify, so the run phase sleeps until there is some: a step's
 * .done marker in the checkpoint directory, and SLICE_STEP_FILE written
 * or renamed into place in its directory. Without inotify (none in the
 * kernel, or the watches ran out) the loop looks on a slow timer instead.
 */
#ifndef SLICECTL_SUPERVISOR_STEP_WATCH_H
#define SLICECTL_SUPERVISOR_STEP_WATCH_H

#include <stdbool.h>

struct step_watch {
	int fd;    /* readable when news waits; -1: look on a timer */
	int ckpt;  /* the checkpoint directory's watch */
	bool said; /* the fallback was logged */
};

enum step_news {
	STEP_NEWS_DONE = 1, /* a step-N.done appeared in the checkpoints */
	STEP_NEWS_STEP = 2, /* the step file may say a newer step */
};

/* Watches ckpt_dir and step_dir; without inotify, w->fd is -1 and the
 * log says so once. */
void step_watch_open(struct step_watch *w, const char *ckpt_dir,
		     const char *step_dir);
/* The news waiting, a mask of step_news. Events lost (the queue
 * overflowed) count as both; a watched directory gone, too, and the
 * watch falls back to the timer. */
unsigned step_watch_read(struct step_watch *w);
void step_watch_close(struct step_watch *w);

#endif
