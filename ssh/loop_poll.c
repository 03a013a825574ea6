/* loop_poll.c: the portable backend; O(watched fds) per wake-up. */
#include "ssh/loop.h"
#include "ssh/fanout.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>

struct poll_state {
	struct pollfd *fds;
	int cap;
};

int loop_backend_init(struct loop *l, struct err *e)
{
	struct poll_state *s = calloc(1, sizeof(*s));

	if (!s)
		return err_set(e, SSH_ENOMEM, "out of memory");
	l->backend = s;
	return 0;
}

void loop_backend_release(struct loop *l)
{
	struct poll_state *s = l->backend;

	if (!s)
		return;
	free(s->fds);
	free(s);
	l->backend = NULL;
}

int loop_backend_resize(struct loop *l, int nfiles, struct err *e)
{
	struct poll_state *s = l->backend;
	struct pollfd *fds = realloc(s->fds, (size_t)nfiles * sizeof(*fds));

	if (!fds)
		return err_set(e, SSH_ENOMEM, "out of memory");
	s->fds = fds;
	s->cap = nfiles;
	return 0;
}

int loop_backend_set(struct loop *l, int fd, int old_mask, int new_mask,
		     struct err *e)
{
	(void)l;
	(void)fd;
	(void)old_mask;
	(void)new_mask;
	(void)e;
	return 0;
}

int loop_backend_wait(struct loop *l, int timeout_ms, struct err *e)
{
	struct poll_state *s = l->backend;
	nfds_t n = 0;
	int rc, fired = 0;

	for (int fd = 0; fd < l->nfiles; fd++) {
		short ev = 0;

		if (!l->files[fd].mask)
			continue;
		if (l->files[fd].mask & LOOP_READ)
			ev |= POLLIN;
		if (l->files[fd].mask & LOOP_WRITE)
			ev |= POLLOUT;
		s->fds[n].fd = fd;
		s->fds[n].events = ev;
		n++;
	}
	rc = poll(s->fds, n, timeout_ms);
	if (rc < 0) {
		if (errno == EINTR)
			return 0;
		err_errno(e, SSH_ESYS, errno, "poll");
		return -1;
	}
	for (nfds_t i = 0; i < n && fired < rc; i++) {
		short re = s->fds[i].revents;
		int mask = 0;

		if (!re)
			continue;
		if (re & (POLLIN | POLLERR | POLLHUP))
			mask |= LOOP_READ;
		if (re & (POLLOUT | POLLERR | POLLHUP))
			mask |= LOOP_WRITE;
		l->fired[fired].fd = s->fds[i].fd;
		l->fired[fired].mask = mask;
		fired++;
	}
	return fired;
}
