/* thread.c: a thread started with thread_start has every signal blocked,
 * and its caller's mask is as it was; a monotonic condition variable's
 * wait lasts until its deadline. */
#include "common/common.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>

/* The signals a mask can hold: not SIGKILL or SIGSTOP, nor the ones libc
 * keeps for itself between the classic and the real-time signals. */
static bool blockable(int sig)
{
	return sig != SIGKILL && sig != SIGSTOP &&
	       (sig < 32 || sig >= SIGRTMIN);
}

static void *read_mask(void *arg)
{
	pthread_sigmask(SIG_SETMASK, NULL, arg);
	return NULL;
}

Test(thread, blocks_every_signal_and_keeps_the_callers_mask)
{
	sigset_t mine, before, after, theirs;
	pthread_t t;

	sigemptyset(&mine);
	sigaddset(&mine, SIGUSR1);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, &mine, &before), 0);
	cr_assert_eq(thread_start(&t, read_mask, &theirs), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	for (int sig = 1; sig < SIGRTMAX + 1; sig++) {
		if (!blockable(sig))
			continue;
		cr_assert(sigismember(&theirs, sig), "signal %d reaches the "
			  "thread", sig);
		cr_assert_eq(sigismember(&after, sig), sig == SIGUSR1,
			     "the caller's mask changed for signal %d", sig);
	}
	pthread_sigmask(SIG_SETMASK, &before, NULL);
}

Test(thread, mono_cond_waits_until_the_deadline)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	uint64_t t0 = mono_ms();
	int rc = 0;

	cr_assert_eq(mono_cond_init(&cv), 0);
	pthread_mutex_lock(&mu);
	/* A spurious wake-up may end a wait early: the caller's loop. */
	while (rc != ETIMEDOUT)
		rc = mono_cond_wait_until(&cv, &mu, t0 + 50);
	pthread_mutex_unlock(&mu);
	cr_assert_geq(mono_ms() - t0, 50);
	cr_assert_lt(mono_ms() - t0, 5000);
	pthread_cond_destroy(&cv);
}
