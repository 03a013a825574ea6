/*
 * tpu_quarantine.c: a quarantined host taken out of a run on Cloud TPU
 * (tpu.h; docs/DESIGN.md "Causes"). A queued resource cannot give back
 * one of its VMs, so the watcher recreates it whole: a new VM set is
 * other machines. Which quarantines were answered is counted in
 * watch.json (quarantines_acted), so that a restarted watcher, or one
 * taking over the lease, recreates once per host.
 */
#include "launcher/target/tpu/tpu.h"

#include <stdio.h>
#include <string.h>

unsigned tpu_quarantines_answered(const struct control *c, int64_t from)
{
	unsigned n = 0;

	/* The list only grows, each host at the bump after the generation
	 * that failed: those before from were there when it began. */
	while (n < c->nquarantined && c->quarantined[n].generation < from)
		n++;
	return n;
}

bool tpu_quarantine_due(struct tpu_watch *w, const struct control *c,
			const struct tpu_qr *q, char *why, size_t cap)
{
	const struct host_blame *h;

	/* Until ACTIVE the machines are not there to replace; a stopping
	 * run needs none. */
	if (strcmp(c->state, "running") || strcmp(q->state, "ACTIVE") ||
	    c->nquarantined <= w->quarantines_acted)
		return false;
	/* Another watcher may have answered it since this one last read. */
	tpu_watch_catch_up(w);
	if (c->nquarantined <= w->quarantines_acted)
		return false;
	h = &c->quarantined[c->nquarantined - 1];
	snprintf(why, cap, "host %s quarantined: %s", h->host, h->why);
	return true;
}
