/*
 * loop.c: the backend-independent half of the event loop: the fd table and
 * the dispatch of fired events.
 */
#include "ssh/loop.h"
#include "ssh/fanout.h"

#include <stdlib.h>
#include <string.h>

int loop_init(struct loop *l, struct err *e)
{
	memset(l, 0, sizeof(*l));
	return loop_backend_init(l, e);
}

void loop_release(struct loop *l)
{
	loop_backend_release(l);
	free(l->files);
	free(l->fired);
	memset(l, 0, sizeof(*l));
}

static int grow(struct loop *l, int fd, struct err *e)
{
	int n = l->nfiles ? l->nfiles : 64;
	struct loop_file *files;
	struct loop_fired *fired;

	while (n <= fd)
		n *= 2;
	files = realloc(l->files, (size_t)n * sizeof(*files));
	if (!files)
		return err_set(e, SSH_ENOMEM, "out of memory");
	memset(files + l->nfiles, 0,
	       (size_t)(n - l->nfiles) * sizeof(*files));
	l->files = files;
	l->nfiles = n;
	fired = realloc(l->fired, (size_t)n * sizeof(*fired));
	if (!fired)
		return err_set(e, SSH_ENOMEM, "out of memory");
	l->fired = fired;
	l->nfired_cap = n;
	return loop_backend_resize(l, n, e);
}

int loop_watch(struct loop *l, int fd, int mask, loop_fn *fn, void *ud,
	       struct err *e)
{
	struct loop_file *f;
	int rc;

	if (fd < 0)
		return err_set(e, SSH_EINVAL, "watch of a negative fd");
	if (fd >= l->nfiles && (rc = grow(l, fd, e)))
		return rc;
	f = &l->files[fd];
	if (f->mask != mask) {
		rc = loop_backend_set(l, fd, f->mask, mask, e);
		if (rc)
			return rc;
		if (!f->mask && mask)
			l->watched++;
		else if (f->mask && !mask)
			l->watched--;
	}
	f->mask = mask;
	f->fn = fn;
	f->ud = ud;
	return 0;
}

int loop_once(struct loop *l, int timeout_ms, struct err *e)
{
	int n = loop_backend_wait(l, timeout_ms, e);

	for (int i = 0; i < n; i++) {
		int fd = l->fired[i].fd;
		struct loop_file *f = &l->files[fd];
		/* An earlier handler in this round may have stopped watching
		 * fd, or closed it and let another host reuse the number. */
		int mask = l->fired[i].mask & f->mask;

		if (mask && f->fn)
			f->fn(l, fd, f->ud, mask);
	}
	return n;
}
