/* thread.c: starting a helper thread that takes no signals, so every
 * signal goes to the thread whose loop handles it (a self-pipe's handler
 * run on a helper would wake nothing, and a blocking call there would see
 * EINTR it never asked for); and condition variables that time out on the
 * monotonic clock, the one mono_ms reads, so a wall-clock step neither
 * fires a wait early nor stretches it. */
#include "common.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	/* A new thread inherits its creator's mask: block everything for
	 * the moment of the create, then put the caller's mask back. */
	sigfillset(&all);
	rc = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (rc)
		return rc;
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int mono_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);

	if (rc)
		return rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

int mono_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
			 uint64_t deadline_ms)
{
	struct timespec ts;

	if (deadline_ms == UINT64_MAX)
		return pthread_cond_wait(cv, mu);
	ts.tv_sec = (time_t)(deadline_ms / 1000u);
	ts.tv_nsec = (long)(deadline_ms % 1000u) * 1000000L;
	return pthread_cond_timedwait(cv, mu, &ts);
}

bool mono_cond_tick(pthread_cond_t *cv, pthread_mutex_t *mu,
		    const bool *stop, uint64_t *next, unsigned period_ms)
{
	while (!*stop && mono_cond_wait_until(cv, mu, *next) != ETIMEDOUT)
		;
	if (*stop)
		return false;
	*next = mono_ms() + period_ms;
	return true;
}
