/*
 * The event loop (ssh/loop.h) at its API, built once per backend
 * (tests/ssh/meson.build links loop.c with loop_epoll.c, and again with
 * loop_poll.c): events by fd and direction, masks changed and cleared, the
 * fd table grown, a handler that unwatches a fd fired in the same round,
 * timeouts on the monotonic clock, and EINTR counted as "no events".
 */
#include "ssh/loop.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct calls {
	int n;
	int fd[8];
	int fired[8];
	void *ud[8];
	struct loop *unwatch_loop; /* set: the handler unwatches unwatch_fd */
	int unwatch_fd;
};

static void record(struct loop *l, int fd, void *ud, int fired)
{
	struct calls *c = ud;

	if (c->n < 8) {
		c->fd[c->n] = fd;
		c->fired[c->n] = fired;
		c->ud[c->n] = ud;
	}
	c->n++;
	if (c->unwatch_loop) {
		struct err e;

		err_init(&e);
		cr_assert_eq(loop_watch(l, c->unwatch_fd, LOOP_NONE, NULL,
					NULL, &e), 0, "%s", e.msg);
	}
}

static struct loop loop;

static void up(void)
{
	struct err e;

	err_init(&e);
	cr_assert_eq(loop_init(&loop, &e), 0, "%s", e.msg);
}

static void down(void)
{
	loop_release(&loop);
}

static void watch(int fd, int mask, struct calls *c)
{
	struct err e;

	err_init(&e);
	cr_assert_eq(loop_watch(&loop, fd, mask, record, c, &e), 0, "%s",
		     e.msg);
}

static int once(int timeout_ms)
{
	struct err e;
	int n;

	err_init(&e);
	n = loop_once(&loop, timeout_ms, &e);
	cr_assert_geq(n, 0, "loop_once: %s", e.msg);
	return n;
}

TestSuite(loop, .init = up, .fini = down, .timeout = 30);

Test(loop, read_fires_only_when_data_is_there)
{
	struct calls c = { 0 };
	int p[2];

	cr_assert_eq(pipe(p), 0);
	watch(p[0], LOOP_READ, &c);
	cr_assert_eq(once(0), 0);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert_eq(once(1000), 1);
	cr_assert_eq(c.n, 1);
	cr_assert_eq(c.fd[0], p[0]);
	cr_assert_eq(c.fired[0], LOOP_READ);
	cr_assert_eq(c.ud[0], &c);
	close(p[0]);
	close(p[1]);
}

Test(loop, write_and_read_are_told_apart)
{
	struct calls c = { 0 };
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Nothing to read, room to write: only the write direction. */
	watch(sv[0], LOOP_READ | LOOP_WRITE, &c);
	cr_assert_eq(once(1000), 1);
	cr_assert_eq(c.fired[0], LOOP_WRITE);
	/* Changing the mask to read only silences the writable socket. */
	watch(sv[0], LOOP_READ, &c);
	c.n = 0;
	cr_assert_eq(once(50), 0);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(write(sv[1], "x", 1), 1);
	cr_assert_eq(once(1000), 1);
	cr_assert_eq(c.fired[0], LOOP_READ);
	close(sv[0]);
	close(sv[1]);
}

Test(loop, none_stops_watching)
{
	struct calls c = { 0 };
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(write(p[1], "x", 1), 1);
	watch(p[0], LOOP_READ, &c);
	cr_assert_eq(loop.watched, 1);
	watch(p[0], LOOP_NONE, &c);
	cr_assert_eq(loop.watched, 0);
	cr_assert_eq(once(50), 0);
	cr_assert_eq(c.n, 0);
	close(p[0]);
	close(p[1]);
}

Test(loop, hangup_wakes_the_reader)
{
	struct calls c = { 0 };
	int p[2];

	cr_assert_eq(pipe(p), 0);
	watch(p[0], LOOP_READ, &c);
	close(p[1]);
	cr_assert_eq(once(1000), 1);
	cr_assert(c.fired[0] & LOOP_READ);
	close(p[0]);
}

Test(loop, the_fd_table_grows)
{
	struct calls c = { 0 };
	int p[2], high;

	cr_assert_eq(pipe(p), 0);
	high = dup2(p[0], 700);
	cr_assert_eq(high, 700);
	watch(high, LOOP_READ, &c);
	cr_assert_gt(loop.nfiles, 700);
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert_eq(once(1000), 1);
	cr_assert_eq(c.fd[0], 700);
	close(high);
	close(p[0]);
	close(p[1]);
}

/* A handler may stop watching (or close) a fd that fired in the same
 * round: that fd's handler must not run on a stale event. */
Test(loop, a_fd_unwatched_in_the_round_is_not_called)
{
	struct calls a = { 0 }, b = { 0 };
	int p[2], q[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(pipe(q), 0);
	a.unwatch_loop = &loop;
	a.unwatch_fd = q[0];
	b.unwatch_loop = &loop;
	b.unwatch_fd = p[0];
	watch(p[0], LOOP_READ, &a);
	watch(q[0], LOOP_READ, &b);
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert_eq(write(q[1], "x", 1), 1);
	cr_assert_eq(once(1000), 2, "both fired");
	cr_assert_eq(a.n + b.n, 1, "only the first handler ran");
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
}

Test(loop, timeouts_are_kept_in_order)
{
	const int waits[] = { 60, 10, 30, 0 };
	uint64_t t0 = mono_ms(), prev = t0;

	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		uint64_t now;

		cr_assert_eq(once(waits[i]), 0);
		now = mono_ms();
		cr_assert_geq(now - prev, (uint64_t)waits[i],
			      "a %d ms wait returned after %llu ms", waits[i],
			      (unsigned long long)(now - prev));
		prev = now;
	}
	cr_assert_geq(prev - t0, 100u);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* A signal during the wait is "no events", not an error: the caller
 * recomputes its deadlines and waits again. */
Test(loop, eintr_counts_as_no_events)
{
	struct sigaction sa;
	struct itimerval it = { .it_value = { .tv_usec = 50000 } };
	struct calls c = { 0 };
	uint64_t t0;
	int p[2];

	cr_assert_eq(pipe(p), 0);
	watch(p[0], LOOP_READ, &c);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: the wait must see EINTR */
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	t0 = mono_ms();
	cr_assert_eq(once(10000), 0);
	cr_assert_eq(alarms, 1);
	cr_assert_lt(mono_ms() - t0, 5000u, "the wait ran on past the signal");
	cr_assert_eq(c.n, 0);
	/* And the loop works on afterwards. */
	cr_assert_eq(write(p[1], "x", 1), 1);
	cr_assert_eq(once(1000), 1);
	cr_assert_eq(c.n, 1);
	close(p[0]);
	close(p[1]);
}

Test(loop, a_negative_fd_is_refused)
{
	struct err e;

	err_init(&e);
	cr_assert_neq(loop_watch(&loop, -1, LOOP_READ, record, NULL, &e), 0);
	cr_assert(strstr(e.msg, "negative") != NULL, "%s", e.msg);
}
