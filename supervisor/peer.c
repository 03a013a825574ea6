/*
 * supervisor/peer.c: this host's side of the peer tier (peer.h).
 *
 * Two threads, one connection at a time each: the server (each host
 * holds one partner's part and is asked for it by that partner alone, so
 * a second connection has nothing to wait for but the first) and the
 * pusher, apart because partners are often each other's: two hosts
 * pushing at once must still be served. A push to a partner that is gone
 * costs at most the stall bound, and a newer step replaces one not pushed
 * yet. Nothing here decides what restores: a
 * copy from a partner is checked against COMMIT like any other.
 */
#include "supervisor/peer.h"

#include "checkpoint/checkpoint.h"
#include "cloud/cloud.h"
#include "run/run.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADDR_MAX 4096
#define SECRET_LEN 128

/* The partner's address as last read, port 0 none, and its local tier's
 * id (a fast-tier holder's). Read once, not per checkpoint
 * (a GET per worker per step), and again when a push to it fails (the
 * partner restarted elsewhere). */
struct partner_addr {
	char host[256];
	unsigned port;
	int64_t tier;
};

struct peer {
	struct peer_config c;
	char *run_url, *part, *local_dir, *advertise;
	char held_dir[1500];
	char secret[SECRET_LEN];
	int listener, wake[2];
	unsigned port;
	struct store *store;       /* the thread's */
	pthread_t server, pusher;
	bool serving, pushing;

	pthread_mutex_t mu;
	pthread_cond_t cv;         /* want_push or stop changed */
	bool stop;
	uint64_t want_push, pushed;

	/* The pusher's and the uploader's (peer_hold), each its own. */
	struct partner_addr pushing_to, holding_at;

	int64_t tier;              /* this host's local tier's id */
	bool leaving;              /* under mu: peer_leaving was called */
};

unsigned peer_partner(unsigned p, unsigned n, unsigned workers_per_slice)
{
	if (n <= 1)
		return p;
	if (workers_per_slice && n > workers_per_slice)
		return (p + workers_per_slice) % n;
	return (p + 1) % n;
}

/* Where the worker whose part is `part` listens, as it last said;
 * *tier (may be NULL) gets its local tier's id. */
static int read_addr(struct store *s, const char *part, char *host,
		     size_t cap, unsigned *port, int64_t *tier,
		     struct err *e)
{
	char name[300], *data = NULL;
	size_t len;
	json_t *o;
	const char *h;
	json_int_t pt;
	int r;

	ckpt_peer_addr_name(name, sizeof(name), part);
	r = store_read(s, name, ADDR_MAX, &data, &len, NULL, e);
	if (r)
		return r;
	o = json_loadb(data, len, 0, NULL);
	free(data);
	h = json_string_value(json_object_get(o, "host"));
	pt = json_integer_value(json_object_get(o, "port"));
	if (!h || !*h || strlen(h) >= cap || pt < 1 || pt > 65535 ||
	    json_is_true(json_object_get(o, "leaving"))) {
		json_decref(o);
		return err_set(e, CLOUD_ECORRUPT, "%s is not a peer's address",
			       store_url(s, name));
	}
	snprintf(host, cap, "%s", h);
	*port = (unsigned)pt;
	if (tier)
		*tier = json_integer_value(json_object_get(o, "tier"));
	json_decref(o);
	return 0;
}

/* This host's address record and its local tier's mark; leaving: its
 * machine is going away, and with it every copy it holds, which
 * ckpt_choose_step must no longer count on. */
static int publish(struct peer *p, struct store *s, bool leaving,
		   struct err *e)
{
	char name[300], now[40], *text;
	json_t *o;
	int r;

	ckpt_peer_addr_name(name, sizeof(name), p->part);
	rfc3339_now(now, sizeof(now));
	o = json_pack("{s:s, s:i, s:s, s:b, s:I}", "host", p->advertise,
		      "port", (int)p->port, "time", now, "leaving", leaving,
		      "tier", (json_int_t)p->tier);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	/* Unmarked before it says it is leaving, marked before it says
	 * where it is: never an address whose copies count but are gone. */
	r = leaving ? ckpt_tier_mark(s, p->part, p->tier, false, e) : 0;
	if (!r)
		r = store_put(s, name, text, strlen(text),
			      STORE_ANY_GENERATION, NULL, e);
	free(text);
	return r || leaving ? r : ckpt_tier_mark(s, p->part, p->tier, true, e);
}

static const char *partner_part(const struct peer *p, char *out, size_t cap)
{
	unsigned q = peer_partner(p->c.process, p->c.processes,
				  p->c.workers_per_slice);
	unsigned wps = p->c.workers_per_slice ? p->c.workers_per_slice : 1;

	run_worker_name(q / wps, q % wps, out, cap);
	return out;
}

/* One push to the partner's address as cached in a, read with s first
 * when none. */
static int push_once(struct peer *p, struct store *s, struct partner_addr *a,
		     const char *partner, uint64_t step, const char *path,
		     struct err *e)
{
	struct ckpt_peer_client c = { .host = a->host, .secret = p->secret,
				      .stall_ms = p->c.stall_ms };
	int r = 0;

	if (!a->port)
		r = read_addr(s, partner, a->host, sizeof(a->host), &a->port,
			      &a->tier, e);
	c.port = a->port;
	if (!r)
		r = ckpt_peer_push(&c, step, p->part, path, e);
	if (r)
		a->port = 0;
	return r;
}

/* Pushes this host's copy of step to its partner (named into partner),
 * the address cached in a, read again once if the push to it fails. */
static int push_step(struct peer *p, struct store *s, struct partner_addr *a,
		     uint64_t step, char *partner, size_t cap, struct err *e)
{
	char path[1600];
	bool cached = a->port != 0;
	int r;

	err_init(e);
	partner_part(p, partner, cap);
	ckpt_local_path(path, sizeof(path), p->local_dir, step, p->part);
	r = push_once(p, s, a, partner, step, path, e);
	if (r && cached) {
		err_init(e);
		r = push_once(p, s, a, partner, step, path, e);
	}
	return r;
}

static void push(struct peer *p, uint64_t step)
{
	char partner[64];
	uint64_t t0 = mono_ms();
	struct err e;
	int r;

	r = push_step(p, p->store, &p->pushing_to, step, partner,
		      sizeof(partner), &e);
	if (r) {
		log_warn("peer tier: step %llu not pushed to %s: %s",
			 (unsigned long long)step, partner, e.msg);
		return;
	}
	log_info("peer tier: step %llu pushed to %s (%s:%u) in %llu ms",
		 (unsigned long long)step, partner, p->pushing_to.host,
		 p->pushing_to.port, (unsigned long long)(mono_ms() - t0));
}

static void serve_one(struct peer *p)
{
	struct ckpt_peer_server sv = { .secret = p->secret,
				       .held_dir = p->held_dir,
				       .stall_ms = p->c.stall_ms };
	struct err e;
	size_t dropped;
	int fd = accept(p->listener, NULL, NULL);

	if (fd < 0)
		return;
	/* Not inherited by the trainers this process starts. */
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (ckpt_peer_serve(fd, &sv, &e))
		log_warn("peer tier: %s", e.msg);
	close(fd);
	/* The partner's newest few: which of them it committed is its
	 * business, and a restore checks whatever it gets. */
	ckpt_local_prune(p->held_dir, p->c.keep, UINT64_MAX, UINT64_MAX,
			 &dropped);
}

static void *server_main(void *arg)
{
	struct peer *p = arg;

	for (;;) {
		struct pollfd fds[2] = {
			{ .fd = p->listener, .events = POLLIN },
			{ .fd = p->wake[0], .events = POLLIN },
		};

		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break; /* only peer_stop writes it */
		if (fds[0].revents & POLLIN)
			serve_one(p);
	}
	return NULL;
}

static void *pusher_main(void *arg)
{
	struct peer *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		uint64_t step = 0;

		if (p->want_push > p->pushed)
			step = p->pushed = p->want_push;
		/* Also when stopping: a leaving host's final step (a
		 * notice's) is the one its successor will want. */
		if (step) {
			pthread_mutex_unlock(&p->mu);
			push(p, step);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		if (p->stop)
			break;
		pthread_cond_wait(&p->cv, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static int listen_on(struct peer *p, struct err *e)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)p->c.port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in v4 = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)p->c.port),
				  .sin_addr = { htonl(INADDR_ANY) } };
	socklen_t len = sizeof(a);
	int one = 1, zero = 0;

	/* Both families where the host has IPv6, else IPv4 alone. */
	p->listener = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC |
					       SOCK_NONBLOCK, 0);
	if (p->listener >= 0) {
		setsockopt(p->listener, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
			   sizeof(zero));
		setsockopt(p->listener, SOL_SOCKET, SO_REUSEADDR, &one,
			   sizeof(one));
		if (bind(p->listener, (struct sockaddr *)&a, sizeof(a))) {
			close(p->listener);
			p->listener = -1;
		}
	}
	if (p->listener < 0) {
		p->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC |
						      SOCK_NONBLOCK, 0);
		if (p->listener < 0)
			return err_errno(e, COMMON_EIO, errno, "peer tier: "
					 "socket");
		setsockopt(p->listener, SOL_SOCKET, SO_REUSEADDR, &one,
			   sizeof(one));
		if (bind(p->listener, (struct sockaddr *)&v4, sizeof(v4)))
			return err_errno(e, COMMON_EIO, errno, "peer tier: "
					 "binding port %u", p->c.port);
		len = sizeof(v4);
		if (getsockname(p->listener, (struct sockaddr *)&v4, &len))
			return err_errno(e, COMMON_EIO, errno, "peer tier: "
					 "getsockname");
		p->port = ntohs(v4.sin_port);
	} else {
		if (getsockname(p->listener, (struct sockaddr *)&a, &len))
			return err_errno(e, COMMON_EIO, errno, "peer tier: "
					 "getsockname");
		p->port = ntohs(a.sin6_port);
	}
	if (listen(p->listener, 8))
		return err_errno(e, COMMON_EIO, errno, "peer tier: listen");
	return 0;
}

void peer_advertise(const char *coordinator, char *out, size_t cap)
{
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	const char *env = getenv("SLICE_PEER_HOST");
	int fd = -1;
	bool ok = false;

	if (env && *env) {
		snprintf(out, cap, "%s", env);
		return;
	}
	/* A datagram socket's connect sends nothing: it only picks the
	 * route, and with it the address the coordinator's peers see. */
	if (coordinator && *coordinator &&
	    !getaddrinfo(coordinator, "9", &hints, &ai) &&
	    (fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0 &&
	    !connect(fd, ai->ai_addr, ai->ai_addrlen) &&
	    !getsockname(fd, (struct sockaddr *)&me, &len))
		ok = !getnameinfo((struct sockaddr *)&me, len, out,
				  (socklen_t)cap, NULL, 0, NI_NUMERICHOST);
	if (fd >= 0)
		close(fd);
	if (ai)
		freeaddrinfo(ai);
	if (!ok && (gethostname(out, cap - 1) || !*out))
		snprintf(out, cap, "127.0.0.1");
	out[cap - 1] = '\0';
}

static int wake_pipe(struct peer *p, struct err *e)
{
	if (pipe(p->wake))
		return err_errno(e, COMMON_EIO, errno, "peer tier: pipe");
	for (int i = 0; i < 2; i++) {
		fcntl(p->wake[i], F_SETFD, FD_CLOEXEC);
		fcntl(p->wake[i], F_SETFL, O_NONBLOCK);
	}
	return 0;
}

static void peer_free(struct peer *p)
{
	if (p->listener >= 0)
		close(p->listener);
	for (int i = 0; i < 2; i++)
		if (p->wake[i] >= 0)
			close(p->wake[i]);
	store_close(p->store);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->run_url);
	free(p->part);
	free(p->local_dir);
	free(p->advertise);
	free(p);
}

int peer_start(struct peer **out, const struct peer_config *c,
	       struct err *e)
{
	struct peer *p = calloc(1, sizeof(*p));
	int r;

	*out = NULL;
	if (!p)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	p->c = *c;
	p->listener = p->wake[0] = p->wake[1] = -1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->run_url = strdup(c->run_url);
	p->part = strdup(c->part);
	p->local_dir = strdup(c->local_dir);
	p->advertise = strdup(c->advertise);
	if (!p->run_url || !p->part || !p->local_dir || !p->advertise) {
		peer_free(p);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	snprintf(p->held_dir, sizeof(p->held_dir), "%s/held", c->local_dir);
	if ((r = store_open(&p->store, c->run_url, e)) ||
	    (r = ckpt_peer_secret(p->store, p->secret, sizeof(p->secret), e)) ||
	    (r = fs_mkdir_p(p->held_dir, 0700, e)) ||
	    (r = ckpt_tier_id(c->local_dir, &p->tier, e)) ||
	    (r = listen_on(p, e)) || (r = wake_pipe(p, e)) ||
	    (r = publish(p, p->store, false, e))) {
		peer_free(p);
		return r;
	}
	r = thread_start(&p->server, server_main, p);
	p->serving = !r;
	if (!r)
		r = thread_start(&p->pusher, pusher_main, p);
	p->pushing = p->serving && !r;
	if (r) {
		peer_stop(p);
		return err_errno(e, COMMON_EIO, r, "peer tier: thread");
	}
	log_info("peer tier: %s listens at %s:%u; partner %u of %u",
		 p->part, p->advertise, p->port,
		 peer_partner(c->process, c->processes, c->workers_per_slice),
		 c->processes);
	*out = p;
	return 0;
}

void peer_push(struct peer *p, uint64_t step)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (step > p->want_push)
		p->want_push = step;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

size_t peer_hold(struct peer *p, struct store *s, uint64_t step,
		 struct ckpt_holder *h)
{
	char partner[64];
	uint64_t t0 = mono_ms();
	size_t n = 0;
	struct err e;
	int r;

	/* A leaving host's disk goes with it: only its partner can hold. */
	pthread_mutex_lock(&p->mu);
	if (!p->leaving) {
		snprintf(h[0].host, sizeof(h[0].host), "%s", p->part);
		h[0].tier = p->tier;
		n = 1;
	}
	pthread_mutex_unlock(&p->mu);
	r = push_step(p, s, &p->holding_at, step, partner, sizeof(partner),
		      &e);
	if (r) {
		log_warn("peer tier: fast-tier step %llu not pushed to %s%s: "
			 "%s", (unsigned long long)step, partner,
			 n ? ", held here alone" : "", e.msg);
		return n;
	}
	snprintf(h[n].host, sizeof(h[n].host), "%s", partner);
	h[n].tier = p->holding_at.tier;
	n++;
	log_info("peer tier: fast-tier step %llu pushed to %s in %llu ms",
		 (unsigned long long)step, partner,
		 (unsigned long long)(mono_ms() - t0));
	/* The pusher need not send it again. */
	pthread_mutex_lock(&p->mu);
	if (step > p->pushed)
		p->pushed = step;
	if (step > p->want_push)
		p->want_push = step;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void peer_leaving(struct peer *p)
{
	struct store *s;
	struct err e;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->leaving = true;
	pthread_mutex_unlock(&p->mu);
	err_init(&e);
	/* The main thread's: a store of its own. */
	if (store_open(&s, p->run_url, &e) == 0) {
		if (publish(p, s, true, &e) == 0)
			log_info("peer tier: this host is going away; its "
				 "fast-tier copies are no longer counted on");
		store_close(s);
	}
	if (e.code)
		log_warn("peer tier: saying this host is going away: %s",
			 e.msg);
}

int peer_fetch(void *peer, uint64_t step, const char *part, uint64_t size,
	       uint32_t crc32c, const char *path, struct err *e)
{
	struct peer *p = peer;
	struct ckpt_peer_client c = { .secret = p->secret,
				      .stall_ms = p->c.stall_ms };
	char host[256], partner[64];
	struct store *s;
	int r;

	/* The syncer's thread: a store of its own, and the partner's
	 * address as it is now (it may have restarted elsewhere). */
	partner_part(p, partner, sizeof(partner));
	r = store_open(&s, p->run_url, e);
	if (r)
		return r;
	c.host = host;
	r = read_addr(s, partner, host, sizeof(host), &c.port, NULL, e);
	store_close(s);
	if (!r)
		r = ckpt_peer_fetch(&c, step, part, size, crc32c, path, e);
	if (!r)
		log_info("peer tier: step %llu fetched from %s (%s:%u)",
			 (unsigned long long)step, partner, host, c.port);
	return r;
}

void peer_stop(struct peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (write(p->wake[1], "s", 1) < 0)
		log_debug("peer tier: wake: %s", strerror(errno));
	if (p->serving)
		pthread_join(p->server, NULL);
	if (p->pushing)
		pthread_join(p->pusher, NULL);
	peer_free(p);
}
