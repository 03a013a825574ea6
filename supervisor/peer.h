/*
 * peer.h (private to supervisor/): this host's side of the peer tier
 * (docs/DESIGN.md, "The peer tier"). One thread listens for its partner's
 * pushes and fetches (ckpt_peer_serve), and pushes this host's newest
 * part to its own partner once the shipper kept it in the local tier.
 * Addresses go through the bucket: peers/slice-S-worker-W.json.
 */
#ifndef SLICECTL_SUPERVISOR_PEER_H
#define SLICECTL_SUPERVISOR_PEER_H

#include "checkpoint/checkpoint.h"
#include "common/common.h"

#include <stdint.h>

struct peer;

struct peer_config {
	const char *run_url;
	const char *part;          /* "slice-S-worker-W" */
	unsigned process, processes, workers_per_slice;
	const char *local_dir;     /* this host's local tier */
	const char *advertise;     /* the address peers reach it at */
	unsigned port;             /* 0: any free one */
	unsigned keep;             /* held copies kept beyond the newest */
	unsigned stall_ms;         /* every wait's bound without progress */
};

/* The partner holding process p's part, of n: the same worker of the next
 * slice, or where there is one slice the next worker; p itself when
 * n == 1 (no partner). */
unsigned peer_partner(unsigned p, unsigned n, unsigned workers_per_slice);

/* The address peers reach this host at: SLICE_PEER_HOST when set, else
 * the local address of the route to coordinator (the trainers' rendezvous
 * host, reachable from every worker), else the machine's name. */
void peer_advertise(const char *coordinator, char *out, size_t cap);

/* Starts listening and publishes the address. */
int peer_start(struct peer **out, const struct peer_config *c,
	       struct err *e);
/* The local tier holds step now: push it to the partner (the newest
 * asked wins; never blocks). */
void peer_push(struct peer *p, uint64_t step);
/* A fast-tier step's part, in the local tier now: pushes it to the
 * partner at once, waiting (the caller is the shipper's uploader, with
 * its own store s), and fills h[0..CKPT_HOLDERS_MAX) with who holds it
 * now: this host unless it is leaving, and the partner when it took it.
 * Returns how many: 0 says the step must go to the bucket. */
size_t peer_hold(struct peer *p, struct store *s, uint64_t step,
		 struct ckpt_holder *h);
/* This host's machine is going away (a notice): republishes its address
 * record as leaving, so that no restore counts on the copies it holds. */
void peer_leaving(struct peer *p);
/* ckpt_restore_options' fetch: this host's part from its partner. */
int peer_fetch(void *peer, uint64_t step, const char *part, uint64_t size,
	       uint32_t crc32c, const char *path, struct err *e);
void peer_stop(struct peer *p);

#endif
