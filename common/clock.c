/* clock.c: monotonic time; wall-clock jumps must never fire a timeout. */
#include "common.h"

#include <time.h>

uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t mono_ms(void)
{
	return mono_us() / 1000u;
}
