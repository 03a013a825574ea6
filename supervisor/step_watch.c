/*
 * step_watch.c: see step_watch.h. Markers are created (or renamed into
 * place) and the step file is rewritten or renamed over: those are the
 * only events asked for, so a trainer writing a checkpoint's files inside
 * step-N/ wakes nobody.
 */
#include "supervisor/step_watch.h"
#include "common/common.h"

#include <errno.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

static void fall_back(struct step_watch *w, const char *why)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (!w->said)
		log_warn("cannot watch for new steps with inotify (%s): "
			 "looking on a timer", why);
	w->said = true;
}

void step_watch_open(struct step_watch *w, const char *ckpt_dir,
		     const char *step_dir)
{
	w->said = false;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		fall_back(w, strerror(errno));
		return;
	}
	w->ckpt = inotify_add_watch(w->fd, ckpt_dir,
				    IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
	if (w->ckpt < 0 ||
	    inotify_add_watch(w->fd, step_dir,
			      IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
		fall_back(w, strerror(errno));
}

static bool is_marker(const struct inotify_event *ev)
{
	size_t n = ev->len ? strlen(ev->name) : 0;

	return n > 5 && !strcmp(ev->name + n - 5, ".done");
}

unsigned step_watch_read(struct step_watch *w)
{
	_Alignas(struct inotify_event) char buf[4096];
	unsigned news = 0;
	ssize_t n;

	while (w->fd >= 0 && (n = read(w->fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED))
				news |= STEP_NEWS_DONE | STEP_NEWS_STEP;
			else if (ev->wd != w->ckpt)
				news |= STEP_NEWS_STEP;
			else if (is_marker(ev))
				news |= STEP_NEWS_DONE;
			if (ev->mask & IN_IGNORED)
				fall_back(w, "a watched directory is gone");
			p += sizeof(*ev) + ev->len;
		}
	return news;
}

void step_watch_close(struct step_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}
