/* loop_epoll.c: the Linux backend; O(events) per wake-up at any host count. */
#include "ssh/loop.h"
#include "ssh/fanout.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct epoll_state {
	int fd;
	struct epoll_event *events;
	int cap;
};

int loop_backend_init(struct loop *l, struct err *e)
{
	struct epoll_state *s = calloc(1, sizeof(*s));

	if (!s)
		return err_set(e, SSH_ENOMEM, "out of memory");
	s->fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->fd < 0) {
		int saved = errno;
		free(s);
		return err_errno(e, SSH_ESYS, saved, "epoll_create1");
	}
	l->backend = s;
	return 0;
}

void loop_backend_release(struct loop *l)
{
	struct epoll_state *s = l->backend;

	if (!s)
		return;
	close(s->fd);
	free(s->events);
	free(s);
	l->backend = NULL;
}

int loop_backend_resize(struct loop *l, int nfiles, struct err *e)
{
	struct epoll_state *s = l->backend;
	struct epoll_event *ev = realloc(s->events, (size_t)nfiles * sizeof(*ev));

	if (!ev)
		return err_set(e, SSH_ENOMEM, "out of memory");
	s->events = ev;
	s->cap = nfiles;
	return 0;
}

int loop_backend_set(struct loop *l, int fd, int old_mask, int new_mask,
		     struct err *e)
{
	struct epoll_state *s = l->backend;
	struct epoll_event ev = { 0 };
	int op;

	ev.data.fd = fd;
	if (new_mask & LOOP_READ)
		ev.events |= EPOLLIN;
	if (new_mask & LOOP_WRITE)
		ev.events |= EPOLLOUT;
	if (!new_mask)
		op = EPOLL_CTL_DEL;
	else
		op = old_mask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(s->fd, op, fd, &ev) < 0) {
		/* A socket closed while watched has already left the set. */
		if (op == EPOLL_CTL_DEL && (errno == EBADF || errno == ENOENT))
			return 0;
		return err_errno(e, SSH_ESYS, errno, "epoll_ctl fd %d", fd);
	}
	return 0;
}

int loop_backend_wait(struct loop *l, int timeout_ms, struct err *e)
{
	struct epoll_state *s = l->backend;
	int n;

	if (s->cap == 0 && loop_backend_resize(l, 64, e))
		return -1;
	n = epoll_wait(s->fd, s->events, s->cap, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		err_errno(e, SSH_ESYS, errno, "epoll_wait");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		uint32_t ev = s->events[i].events;
		int mask = 0;

		/* Errors and hang-ups wake both directions: the state
		 * machine learns what happened from the next call. */
		if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
			mask |= LOOP_READ;
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			mask |= LOOP_WRITE;
		l->fired[i].fd = s->events[i].data.fd;
		l->fired[i].mask = mask;
	}
	return n;
}
