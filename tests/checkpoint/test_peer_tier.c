/*
 * tests/checkpoint/test_peer_tier.c: the peer tier's wire (ckpt_peer.c)
 * for real, over TCP on 127.0.0.1 only: a server thread per test answers
 * ckpt_peer_serve on an ephemeral port. A pushed part lands in the held
 * directory as the local tier keeps its own and fetches back byte for
 * byte; a wrong secret on either end is refused before anything is sent
 * or written; a peer offering other bytes, of the same size or not,
 * leaves nothing behind; a peer that never answers costs stall_ms and a
 * port with nobody on it less. End to end, ckpt_restore with the fetch
 * hook restores a part that neither the local tier nor the bucket holds,
 * and a lying peer costs only a download from the bucket. peer.secret is
 * made once, whoever races for it.
 */
#include "tests/checkpoint/ckpt_check.h"
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

TestSuite(peer_tier, .init = ckpt_setup, .fini = ckpt_teardown,
	  .timeout = 120);

#define PART "slice-0-worker-1"
#define SECRET "0123456789abcdef0123456789abcdef" \
	       "0123456789abcdef0123456789abcdef"
#define OTHER_SECRET "fedcba9876543210fedcba9876543210" \
		     "fedcba9876543210fedcba9876543210"
/* Long enough never to be what ends a test on a busy machine; the tests
 * of stalling set their own. */
#define STALL_MS 5000

/* Open descriptors of this process: a test ends with as many as it began
 * with, so neither the wire nor the test's server leaks one. */
static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	cr_assert(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A TCP socket bound to 127.0.0.1 on an ephemeral port, listening or not
 * (bound only: the port stays ours, and a connect to it is refused). */
static int loopback_socket(bool listening, unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	cr_assert_eq(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0,
		     "bind: %s", strerror(errno));
	if (listening)
		cr_assert_eq(listen(fd, 8), 0, "listen: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The partner: a thread accepting on 127.0.0.1 and answering each
 * connection with ckpt_peer_serve, one at a time, until told to stop
 * through wake. */
struct peer {
	int listener, wake[2];
	unsigned port;
	pthread_t thread;
	struct ckpt_peer_server sv;
	char held[PATHLEN];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned served;     /* connections answered */
	int last;            /* what the latest ckpt_peer_serve returned */
	struct err last_e;    /* and its message */
};

static void *serve_loop(void *arg)
{
	struct peer *p = arg;
	struct pollfd w[2] = { { .fd = p->listener, .events = POLLIN },
			       { .fd = p->wake[0], .events = POLLIN } };

	for (;;) {
		struct err e;
		int fd, r;

		if (poll(w, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (w[1].revents)
			break;
		if (!(w[0].revents & POLLIN))
			continue;
		fd = accept(p->listener, NULL, NULL);
		if (fd < 0)
			continue;
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		r = ckpt_peer_serve(fd, &p->sv, &e);
		close(fd);
		pthread_mutex_lock(&p->lock);
		p->served++;
		p->last = r;
		p->last_e = e;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

static struct ckpt_peer_client client(unsigned port, const char *secret,
				      unsigned stall_ms)
{
	return (struct ckpt_peer_client){ .host = "127.0.0.1", .port = port,
					  .secret = secret,
					  .stall_ms = stall_ms };
}

/* Starts a partner holding secret, its held_dir ROOT/held: a client of
 * it holding theirs. */
static struct ckpt_peer_client peer_start(struct peer *p, const char *secret,
					  const char *theirs)
{
	memset(p, 0, sizeof(*p));
	path_of(p->held, "held");
	p->sv = (struct ckpt_peer_server){ .secret = secret,
					   .held_dir = p->held,
					   .stall_ms = STALL_MS };
	p->listener = loopback_socket(true, &p->port);
	cr_assert_eq(pipe(p->wake), 0);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	cr_assert_eq(pthread_create(&p->thread, NULL, serve_loop, p), 0);
	return client(p->port, theirs, STALL_MS);
}

/* Waits (5 s at most) until n connections were answered: the client
 * returns once it has the server's last word, a little before
 * ckpt_peer_serve does. */
static void peer_served(struct peer *p, unsigned n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&p->lock);
	while (p->served < n &&
	       pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0)
		;
	pthread_mutex_unlock(&p->lock);
	cr_assert_geq(p->served, n, "the peer answered %u connections, not "
		      "%u", p->served, n);
}

static void peer_stop(struct peer *p)
{
	cr_assert_eq(write(p->wake[1], "x", 1), 1);
	cr_assert_eq(pthread_join(p->thread, NULL), 0);
	close(p->listener);
	close(p->wake[0]);
	close(p->wake[1]);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

static uint32_t crc_of(const char *path, size_t *size)
{
	char *data = read_file(path, size);
	uint32_t crc;

	cr_assert(data, "%s is missing", path);
	crc = crc32c_update(0, data, *size);
	free(data);
	return crc;
}

/* path = ROOT/name, len random bytes from seed: its CRC32C and *size, as
 * COMMIT would give them. */
static uint32_t random_part(char *path, const char *name, size_t len,
			    uint64_t seed, size_t *size)
{
	path_of(path, name);
	write_random(path, len, seed);
	return crc_of(path, size);
}

static void same_bytes(const char *a, const char *b)
{
	size_t na, nb;
	char *x = read_file(a, &na), *y = read_file(b, &nb);

	cr_assert(x && y, "%s or %s is missing", a, b);
	cr_assert_eq(na, nb, "%s has %zu bytes, %s %zu", a, na, b, nb);
	cr_assert_eq(memcmp(x, y, na), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* The held copy of step's part, written by hand (a partner whose disk
 * holds other bytes). */
static void hold(const struct peer *p, uint64_t step, const char *from,
		 char *held)
{
	ckpt_local_path(held, PATHLEN * 2, p->held, step, PART);
	cr_assert_eq(sh("mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", held,
			from, held), 0);
}

/* Flips one byte in the middle of path: the same size, another CRC32C. */
static void corrupt(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDWR);
	char c;

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pread(fd, &c, 1, st.st_size / 2), 1);
	c ^= 0x5a;
	cr_assert_eq(pwrite(fd, &c, 1, st.st_size / 2), 1);
	close(fd);
}

Test(peer_tier, a_pushed_part_is_held_and_fetched_back_byte_for_byte)
{
	unsigned fds = open_fds();
	char src[PATHLEN], got[PATHLEN], held[PATHLEN * 2];
	struct peer p;
	struct ckpt_peer_client c;
	struct err e;
	uint32_t crc;
	size_t size;

	c = peer_start(&p, SECRET, SECRET);
	crc = random_part(src, "part.tar.zst", (3 << 20) + 12345, 7, &size);
	cr_assert_eq(ckpt_peer_push(&c, 7, PART, src, &e), 0, "%s", e.msg);
	/* Where the local tier would keep it, and nothing else: no
	 * temporary file is left beside it. */
	ckpt_local_path(held, sizeof(held), p.held, 7, PART);
	same_bytes(src, held);
	cr_assert_eq(count_entries(p.held, "step-"), 1);
	cr_assert_eq(sh("test $(ls -A \"$(dirname '%s')\" | wc -l) = 1", held),
		     0);
	path_of(got, "fetched.tar.zst");
	cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, size, crc, got, &e), 0,
		     "%s", e.msg);
	same_bytes(src, got);
	/* A step the partner never got: said so, nothing written. */
	path_of(got, "never.tar.zst");
	cr_assert_eq(ckpt_peer_fetch(&c, 8, PART, size, crc, got, &e),
		     CLOUD_ENOTFOUND, "%s", e.msg);
	cr_assert_not(exists(got));
	peer_served(&p, 3);
	cr_assert_eq(p.last, 0, "%s", p.last_e.msg);
	peer_stop(&p);
	cr_assert_eq(open_fds(), fds);
}

/* Either end without the run's secret: the client checks the server's
 * proof before it says what it wants, so nothing is sent or written. */
Test(peer_tier, a_wrong_secret_on_either_end_is_refused)
{
	unsigned fds = open_fds();
	char src[PATHLEN], got[PATHLEN];
	struct peer p;
	struct ckpt_peer_client c;
	struct err e;
	uint32_t crc;
	size_t size;

	crc = random_part(src, "part.tar.zst", 1 << 20, 3, &size);
	path_of(got, "fetched.tar.zst");

	/* A client without it, then a server without it: either way the
	 * client hears a proof it cannot check, trusts the other end with
	 * nothing and hangs up. */
	for (int i = 0; i < 2; i++) {
		c = peer_start(&p, i ? OTHER_SECRET : SECRET,
			       i ? SECRET : OTHER_SECRET);
		cr_assert_eq(ckpt_peer_push(&c, 7, PART, src, &e), CLOUD_EAUTH,
			     "%s", e.msg);
		cr_assert(strstr(e.msg, "does not hold the run's secret"),
			  "%s", e.msg);
		cr_assert_not(exists(p.held), "a refused push made %s",
			      p.held);
		cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, size, crc, got, &e),
			     CLOUD_EAUTH, "%s", e.msg);
		cr_assert_not(exists(got));
		peer_served(&p, 2);
		cr_assert_neq(p.last, 0);
		peer_stop(&p);
	}
	cr_assert_eq(open_fds(), fds);
}

/* A client that skips checking the server and sends a request whose MAC
 * it could not make: the server refuses it (CLOUD_EAUTH) before taking a
 * byte of what follows. */
Test(peer_tier, a_request_without_the_secret_is_refused_by_the_server)
{
	unsigned fds = open_fds();
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char line[512], mac[65];
	struct peer p;
	ssize_t n;
	size_t got = 0;
	int fd;

	/* Its own client is not used: this one speaks by hand. */
	peer_start(&p, SECRET, NULL);
	a.sin_port = htons((uint16_t)p.port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s",
		     strerror(errno));
	snprintf(line, sizeof(line),
		 "SLICEPEER1 00112233445566778899aabbccddeeff\n");
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	/* The server's nonce and proof, one line. */
	while (got < sizeof(line) - 1 &&
	       (n = read(fd, line + got, 1)) == 1 && line[got] != '\n')
		got++;
	cr_assert(got > 0 && line[got] == '\n');
	memset(mac, 'a', 64);
	mac[64] = '\0';
	snprintf(line, sizeof(line), "PUT 7 " PART " 4 00000000 %s\nabcd",
		 mac);
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	/* It hangs up without a word (a reset: "abcd" went unread). */
	cr_assert_leq(read(fd, line, sizeof(line)), 0);
	close(fd);
	peer_served(&p, 1);
	cr_assert_eq(p.last, CLOUD_EAUTH, "%s", p.last_e.msg);
	cr_assert(strstr(p.last_e.msg, "without the run's secret"), "%s",
		  p.last_e.msg);
	cr_assert_not(exists(p.held), "a refused push made %s", p.held);
	peer_stop(&p);
	cr_assert_eq(open_fds(), fds);
}

/* The partner holds other bytes of the part than COMMIT names: of the
 * same size they are read and refused by their CRC32C; of another size
 * they are refused when offered. Either way nothing is left at path. */
Test(peer_tier, a_lying_peer_leaves_nothing_behind)
{
	unsigned fds = open_fds();
	char src[PATHLEN], lie[PATHLEN], got[PATHLEN], held[PATHLEN * 2];
	struct peer p;
	struct ckpt_peer_client c;
	struct err e;
	uint32_t crc;
	size_t size;

	c = peer_start(&p, SECRET, SECRET);
	crc = random_part(src, "part.tar.zst", 2 << 20, 11, &size);
	path_of(lie, "lie.tar.zst");
	write_random(lie, 2 << 20, 12);
	hold(&p, 7, lie, held);
	path_of(got, "fetched.tar.zst");
	cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, size, crc, got, &e),
		     CLOUD_ECORRUPT, "%s", e.msg);
	cr_assert(strstr(e.msg, "CRC32C"), "%s", e.msg);
	cr_assert_not(exists(got));
	cr_assert_eq(count_entries(root, "fetched"), 0);
	/* Another size: refused as offered. */
	write_random(lie, (2 << 20) + 1, 12);
	hold(&p, 7, lie, held);
	cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, size, crc, got, &e),
		     CLOUD_ECORRUPT, "%s", e.msg);
	cr_assert(strstr(e.msg, "offers"), "%s", e.msg);
	cr_assert_not(exists(got));
	cr_assert_eq(count_entries(root, "fetched"), 0);
	peer_stop(&p);
	cr_assert_eq(open_fds(), fds);
}

/* A listener that never accepts: the connection completes through its
 * backlog and then nothing is said, which costs about stall_ms. Nobody
 * on the port at all is refused at once. */
Test(peer_tier, a_peer_that_never_answers_costs_stall_ms)
{
	unsigned fds = open_fds(), port;
	char got[PATHLEN];
	struct ckpt_peer_client c;
	struct err e;
	long long t0, took;
	int fd;

	path_of(got, "fetched.tar.zst");
	fd = loopback_socket(true, &port);
	c = client(port, SECRET, 300);
	t0 = monotonic_ms();
	cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, 1000, 0, got, &e),
		     CLOUD_ETIMEDOUT, "%s", e.msg);
	took = monotonic_ms() - t0;
	cr_assert(took >= 250 && took < 3000, "took %lld ms", took);
	cr_assert_not(exists(got));
	close(fd);

	/* Bound but not listening: the port is ours, and refused. */
	fd = loopback_socket(false, &port);
	c = client(port, SECRET, 300);
	t0 = monotonic_ms();
	cr_assert_eq(ckpt_peer_fetch(&c, 7, PART, 1000, 0, got, &e),
		     CLOUD_ENETWORK, "%s", e.msg);
	took = monotonic_ms() - t0;
	cr_assert(took < 250, "took %lld ms", took);
	cr_assert_not(exists(got));
	close(fd);
	cr_assert_eq(open_fds(), fds);
}

/* ---- with ckpt_restore ---- */

struct fetcher {
	struct ckpt_peer_client c;
	unsigned calls;
	/* Asks for whatever the peer holds (its own size and CRC32C), as
	 * a hook that trusted the peer would: ckpt_restore must catch it. */
	bool careless;
	const char *held;
};

static int fetch(void *ud, uint64_t step, const char *part, uint64_t size,
		 uint32_t crc, const char *path, struct err *e)
{
	struct fetcher *f = ud;

	f->calls++;
	if (f->careless) {
		size_t n;

		crc = crc_of(f->held, &n);
		size = n;
	}
	return ckpt_peer_fetch(&f->c, step, part, size, crc, path, e);
}

/* Restores step 3 into dest with the local tier at local and f as its
 * peer: whether the copy came from the peer (*from_local: from the local
 * tier). The flags start wrong, so that ckpt_restore must set both. */
static bool restore(struct store *s, const char *dest, const char *local,
		    struct fetcher *f, bool *from_local)
{
	bool from_peer = true;
	struct ckpt_restore_options o = { .step = 3, .part = PART,
					  .local_dir = local,
					  .from_local = from_local,
					  .fetch = fetch, .fetch_ud = f,
					  .from_peer = &from_peer };
	uint64_t got = 0;
	struct err e;

	*from_local = true;
	cr_assert_eq(ckpt_restore(s, dest, &o, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(got, 3);
	cr_assert_not(*from_local && from_peer, "both tiers at once");
	return from_peer;
}

/* A host that lost its disk, and a bucket that lost the part: only the
 * partner's copy restores the step. Then a partner whose copy went bad
 * costs only the bucket's download, and its bytes do not stay. */
Test(peer_tier, a_restore_takes_the_partners_copy_and_survives_its_lies)
{
	unsigned fds = open_fds();
	char src[PATHLEN], local[PATHLEN], dest[PATHLEN], stash[PATHLEN];
	char copy[PATHLEN * 2], part[PATHLEN * 2], held[PATHLEN * 2];
	struct ckpt_save_options so;
	struct ckpt_save_result sr;
	struct store *s = open_store();
	struct fetcher f = { 0 };
	struct peer p;
	struct err e;
	bool from_local;

	path_of(src, "src");
	path_of(local, "local");
	make_tree(src, "three");
	write_random(strcat(strcpy(part, src), "/weights.bin"), 2 << 20, 3);
	ckpt_save_options_init(&so);
	so.part = PART;
	so.local_dir = local;
	cr_assert_eq(ckpt_save(s, src, 3, &so, &sr, &e), 0, "%s", e.msg);
	cr_assert(sr.committed);
	ckpt_local_path(copy, sizeof(copy), local, 3, PART);
	cr_assert(exists(copy));

	f.c = peer_start(&p, SECRET, SECRET);
	cr_assert_eq(ckpt_peer_push(&f.c, 3, PART, copy, &e), 0, "%s", e.msg);
	/* The disk gone, and the bucket's part put aside (to come back
	 * below, the same file with its metadata). */
	cr_assert_eq(rm_rf(local), 0);
	snprintf(part, sizeof(part), "%s/checkpoints/step-%010d/" PART
		 ".tar.zst", bucket, 3);
	path_of(stash, "stash.tar.zst");
	cr_assert_eq(rename(part, stash), 0);
	path_of(local, "new-disk");
	cr_assert_eq(mkdir(local, 0700), 0);
	path_of(dest, "dest");
	cr_assert(restore(s, dest, local, &f, &from_local));
	cr_assert_not(from_local);
	compare_trees(src, dest);
	cr_assert_eq(f.calls, 1);
	/* It stays where the local tier keeps its own: the next restore
	 * asks nobody. */
	ckpt_local_path(held, sizeof(held), p.held, 3, PART);
	ckpt_local_path(copy, sizeof(copy), local, 3, PART);
	same_bytes(held, copy);
	cr_assert_not(restore(s, dest, local, &f, &from_local));
	cr_assert(from_local);
	compare_trees(src, dest);
	cr_assert_eq(f.calls, 1);
	/* This host's own copy gone bad: deleted, and the partner's taken
	 * in its place rather than the bucket's (which is away). */
	corrupt(copy);
	cr_assert(restore(s, dest, local, &f, &from_local));
	cr_assert_not(from_local);
	compare_trees(src, dest);
	cr_assert_eq(f.calls, 2);
	same_bytes(held, copy);
	/* Nor is a peer's copy called local by a caller that does not ask
	 * for from_peer. */
	path_of(local, "other-disk");
	cr_assert_eq(mkdir(local, 0700), 0);
	{
		struct ckpt_restore_options o = { .step = 3, .part = PART,
						  .local_dir = local,
						  .from_local = &from_local,
						  .fetch = fetch,
						  .fetch_ud = &f };
		uint64_t got = 0;

		from_local = true;
		cr_assert_eq(ckpt_restore(s, dest, &o, &got, &e), 0, "%s",
			     e.msg);
		cr_assert_not(from_local);
		compare_trees(src, dest);
		cr_assert_eq(f.calls, 3);
	}

	/* The partner's copy goes bad in place; the bucket has its part
	 * again and this host another new disk. */
	cr_assert_eq(rename(stash, part), 0);
	corrupt(held);
	path_of(local, "newer-disk");
	cr_assert_eq(mkdir(local, 0700), 0);
	path_of(dest, "dest-2");
	cr_assert_not(restore(s, dest, local, &f, &from_local));
	cr_assert_not(from_local);
	compare_trees(src, dest);
	cr_assert_eq(f.calls, 4);
	ckpt_local_path(copy, sizeof(copy), local, 3, PART);
	cr_assert_not(exists(copy));
	cr_assert_eq(sh("test -z \"$(find '%s' -type f)\"", local), 0,
		     "a bad fetch left a file in %s", local);

	/* A hook that takes whatever the peer says: ckpt_restore checks the
	 * copy against COMMIT itself, deletes it and reads the bucket's. */
	f.careless = true;
	f.held = held;
	path_of(dest, "dest-3");
	cr_assert_not(restore(s, dest, local, &f, &from_local));
	cr_assert_not(from_local);
	compare_trees(src, dest);
	cr_assert_eq(f.calls, 5);
	cr_assert_not(exists(copy));
	cr_assert_eq(sh("test -z \"$(find '%s' -type f)\"", local), 0,
		     "a bad fetch left a file in %s", local);
	peer_stop(&p);
	store_close(s);
	cr_assert_eq(open_fds(), fds);
}

/* ---- the secret ---- */

static void is_secret(const char *secret)
{
	cr_assert_eq(strlen(secret), 64, "%s", secret);
	cr_assert_eq(strspn(secret, "0123456789abcdef"), 64, "%s", secret);
}

struct racer {
	struct store *s;
	pthread_barrier_t *start;
	int r;
	char secret[128];
	struct err e;
};

static void *race(void *arg)
{
	struct racer *x = arg;

	pthread_barrier_wait(x->start);
	x->r = ckpt_peer_secret(x->s, x->secret, sizeof(x->secret), &x->e);
	return NULL;
}

Test(peer_tier, the_secret_is_made_once_whoever_races_for_it)
{
	char secret[128], again[128], obj[PATHLEN * 2], *data;
	struct store *s = open_store();
	struct err e;
	size_t len;

	snprintf(obj, sizeof(obj), "%s/peer.secret", bucket);
	cr_assert_eq(ckpt_peer_secret(s, secret, sizeof(secret), &e), 0, "%s",
		     e.msg);
	is_secret(secret);
	data = read_file(obj, &len);
	cr_assert(data, "no %s", obj);
	cr_assert_eq(len, 64);
	cr_assert_eq(memcmp(data, secret, 64), 0);
	free(data);
	cr_assert_eq(ckpt_peer_secret(s, again, sizeof(again), &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(again, secret);

	/* Two hosts asking first at once, each with its own store: one
	 * secret, over and over. */
	for (int round = 0; round < 20; round++) {
		pthread_barrier_t start;
		struct racer x[2] = { { .s = open_store(), .start = &start },
				      { .s = open_store(), .start = &start } };
		pthread_t t[2];

		cr_assert_eq(unlink(obj), 0);
		pthread_barrier_init(&start, NULL, 2);
		for (int i = 0; i < 2; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, race, &x[i]),
				     0);
		for (int i = 0; i < 2; i++) {
			cr_assert_eq(pthread_join(t[i], NULL), 0);
			store_close(x[i].s);
			cr_assert_eq(x[i].r, 0, "%s", x[i].e.msg);
			is_secret(x[i].secret);
		}
		pthread_barrier_destroy(&start);
		cr_assert_str_eq(x[0].secret, x[1].secret, "round %d", round);
		data = read_file(obj, &len);
		cr_assert(data && len == 64 && !memcmp(data, x[0].secret, 64));
		free(data);
	}

	/* Something too short to be one is said to be no secret. */
	write_text(bucket, "peer.secret", "short\n", 0644);
	cr_assert_eq(ckpt_peer_secret(s, secret, sizeof(secret), &e),
		     CLOUD_ECORRUPT, "%s", e.msg);
	store_close(s);
}
