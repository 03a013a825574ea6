/*
 * backoff.c: exponential backoff with full jitter, so that hundreds of hosts
 * refused at once do not all come back in the same instant.
 */
#include "common.h"

void backoff_init(struct backoff *b, unsigned base_ms, unsigned max_ms,
		  uint64_t seed)
{
	b->base_ms = base_ms ? base_ms : 1;
	b->max_ms = max_ms < b->base_ms ? b->base_ms : max_ms;
	b->attempt = 0;
	b->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* xorshift64*: enough randomness for spreading retries, no global state. */
static uint64_t next_random(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

unsigned backoff_next_ms(struct backoff *b)
{
	uint64_t cap = b->base_ms;

	for (unsigned i = 0; i < b->attempt && cap < b->max_ms; i++)
		cap *= 2;
	if (cap > b->max_ms)
		cap = b->max_ms;
	b->attempt++;
	/* Never zero: half the cap is fixed, the other half random. */
	return (unsigned)(cap / 2 + next_random(&b->rng) % (cap / 2 + 1));
}
