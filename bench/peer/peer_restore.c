/*
 * bench/peer/peer_restore.c: the peer tier's row of bench/local-tier (not
 * a test: bench/local-tier builds it with `ninja peer_restore` and times
 * what it prints).
 *
 *   peer_restore URL STEP PART LOCAL_TIER_DIR WORK
 *
 * Plays a partner on 127.0.0.1: a thread serving the wire
 * (ckpt_peer_serve) from WORK/held, to which the part LOCAL_TIER_DIR
 * holds for STEP is pushed first (not timed). Then a host that lost its
 * disk restores STEP into WORK/dest with an empty local tier and the
 * partner as its peer, as the supervisor does, and prints
 * {"seconds": S, "source": "peer"|"local"|"store"}.
 */
#include "checkpoint/checkpoint.h"
#include "cloud/cloud.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct partner {
	int listener, stop[2];
	struct ckpt_peer_server sv;
};

static void *serve(void *arg)
{
	struct partner *p = arg;
	struct pollfd fds[2] = { { .fd = p->listener, .events = POLLIN },
				 { .fd = p->stop[0], .events = POLLIN } };
	struct err e;

	while (poll(fds, 2, -1) > 0 && !fds[1].revents) {
		int fd = accept(p->listener, NULL, NULL);

		if (fd < 0)
			continue;
		if (ckpt_peer_serve(fd, &p->sv, &e))
			fprintf(stderr, "peer_restore: %s\n", e.msg);
		close(fd);
	}
	return NULL;
}

struct fetcher {
	struct ckpt_peer_client c;
};

static int fetch(void *ud, uint64_t step, const char *part, uint64_t size,
		 uint32_t crc, const char *path, struct err *e)
{
	struct fetcher *f = ud;

	return ckpt_peer_fetch(&f->c, step, part, size, crc, path, e);
}

static int fail(const char *what, const struct err *e)
{
	fprintf(stderr, "peer_restore: %s: %s\n", what, e->msg);
	return 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr = { htonl(INADDR_LOOPBACK) } };
	socklen_t len = sizeof(a);
	char secret[128], held[4096], dest[4096], empty[4096], copy[4096];
	struct partner p = { .listener = -1 };
	struct fetcher f = { .c = { .host = "127.0.0.1", .stall_ms = 10000 } };
	bool local = false, peer = false;
	struct ckpt_restore_options o = { .local_dir = empty,
					  .from_local = &local,
					  .fetch = fetch, .fetch_ud = &f,
					  .from_peer = &peer };
	struct store *s;
	pthread_t t;
	struct err e;
	uint64_t t0, got = 0;
	int rc;

	if (argc != 6) {
		fprintf(stderr, "usage: peer_restore URL STEP PART "
			"LOCAL_TIER_DIR WORK\n");
		return 2;
	}
	o.step = strtoull(argv[2], NULL, 10);
	o.part = argv[3];
	snprintf(held, sizeof(held), "%s/held", argv[5]);
	snprintf(dest, sizeof(dest), "%s/dest", argv[5]);
	snprintf(empty, sizeof(empty), "%s/new-disk", argv[5]);
	ckpt_local_path(copy, sizeof(copy), argv[4], o.step, argv[3]);
	err_init(&e);
	if (store_open(&s, argv[1], &e) ||
	    ckpt_peer_secret(s, secret, sizeof(secret), &e))
		return fail("the run's secret", &e);
	p.sv = (struct ckpt_peer_server){ .secret = secret, .held_dir = held,
					  .stall_ms = 10000 };
	f.c.secret = secret;
	p.listener = socket(AF_INET, SOCK_STREAM, 0);
	if (p.listener < 0 || bind(p.listener, (struct sockaddr *)&a,
				   sizeof(a)) ||
	    listen(p.listener, 4) ||
	    getsockname(p.listener, (struct sockaddr *)&a, &len) ||
	    pipe(p.stop) || fs_mkdir_p(held, 0700, &e) ||
	    fs_mkdir_p(empty, 0700, &e) ||
	    pthread_create(&t, NULL, serve, &p)) {
		perror("peer_restore: the partner");
		return 1;
	}
	f.c.port = ntohs(a.sin_port);
	rc = ckpt_peer_push(&f.c, o.step, argv[3], copy, &e);
	if (rc)
		fail("the push", &e);
	t0 = mono_us();
	if (!rc && (rc = ckpt_restore(s, dest, &o, &got, &e)))
		fail("the restore", &e);
	if (!rc)
		printf("{\"seconds\": %.3f, \"source\": \"%s\"}\n",
		       (double)(mono_us() - t0) / 1e6,
		       peer ? "peer" : local ? "local" : "store");
	if (write(p.stop[1], "x", 1) != 1)
		perror("peer_restore: stopping the partner");
	pthread_join(t, NULL);
	close(p.listener);
	close(p.stop[0]);
	close(p.stop[1]);
	store_close(s);
	return rc ? 1 : 0;
}
