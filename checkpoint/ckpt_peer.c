/*
 * checkpoint/ckpt_peer.c: the peer tier's wire (docs/DESIGN.md, "The peer
 * tier"): a host pushes its packed part to its partner, and fetches it
 * back after losing its disk, over one TCP connection per transfer.
 *
 * Both ends prove they hold the run's secret (peer.secret in the bucket,
 * so only holders of the bucket can) before anything else is said: each
 * sends a fresh nonce and answers the other's with an HMAC-SHA256 of both
 * nonces, and the request line carries one too, so a listener on the port
 * serves nobody else and a client talks to no impostor. The bytes are not
 * trusted for all that: a part restores only once its size and CRC32C
 * match COMMIT, so a partner with the wrong bytes costs a download from
 * the bucket, never a wrong restore. Every wait is bounded by stall_ms
 * without progress: a peer that stops answering costs that, not a hang.
 *
 *   C: SLICEPEER1 CNONCE
 *   S: SNONCE HMAC("S" CNONCE SNONCE)
 *   C: GET|PUT STEP PART SIZE CRC32C HMAC("C" SNONCE CNONCE LINE)
 *   GET  S: OK SIZE, then the bytes | NO WHY
 *   PUT  C: the bytes; S: OK | NO WHY
 */
#include "checkpoint/ckpt_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "SLICEPEER1"
#define NONCE_BYTES 16
#define MAC_HEX 64
#define LINE_MAX_LEN 512
#define REQ_MAX 400      /* a request line, before its MAC */
#define CHUNK (1 << 20)
#define SECRET_OBJECT "peer.secret"
#define SECRET_MAX 256

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* HMAC-SHA256 of tag, a, b and c (may be NULL) under secret, as hex. */
static void mac(const char *secret, const char *tag, const char *a,
		const char *b, const char *c, char out[MAC_HEX + 1])
{
	unsigned char md[32];
	unsigned len = sizeof(md);
	struct buf m;

	buf_init(&m);
	if (buf_appendf(&m, "%s\n%s\n%s\n%s", tag, a, b, c ? c : "") ||
	    !HMAC(EVP_sha256(), secret, (int)strlen(secret),
		  (const unsigned char *)m.data, m.len, md, &len))
		memset(md, 0, sizeof(md));
	buf_release(&m);
	hex(md, 32, out);
}

static bool mac_ok(const char *want, const char *got)
{
	return strlen(got) == MAC_HEX && !CRYPTO_memcmp(want, got, MAC_HEX);
}

static int nonce(char out[2 * NONCE_BYTES + 1], struct err *e)
{
	unsigned char n[NONCE_BYTES];

	if (RAND_bytes(n, sizeof(n)) != 1)
		return err_set(e, CKPT_EIO, "no random bytes for a nonce");
	hex(n, sizeof(n), out);
	return 0;
}

/* ---- bounded I/O ---- */

/* Lines go out as they are written: the exchange is a few short lines
 * each way, which Nagle's algorithm would hold for the peer's delayed
 * ACK (40 ms a turn). Large buffers let a part stream with a few wakeups
 * a megabyte rather than dozens. */
static void tune_socket(int fd)
{
	int one = 1, size = 4 << 20;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

/* Waits for fd to be ready for events, at most stall_ms. */
static int wait_fd(int fd, short events, unsigned stall_ms, const char *who,
		   struct err *e)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&p, 1, (int)stall_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return err_errno(e, CKPT_EIO, errno, "%s: poll", who);
	if (!n)
		return err_set(e, CLOUD_ETIMEDOUT, "%s: no progress in %u ms",
			       who, stall_ms);
	return 0;
}

static int send_all(int fd, const void *data, size_t len, unsigned stall_ms,
		    const char *who, struct err *e)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (n < 0 && errno == EAGAIN) {
			r = wait_fd(fd, POLLOUT, stall_ms, who, e);
			if (r)
				return r;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_errno(e, CKPT_EIO, errno, "%s: send", who);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_some(int fd, void *data, size_t cap, size_t *got,
		     unsigned stall_ms, const char *who, struct err *e)
{
	for (;;) {
		ssize_t n = recv(fd, data, cap, MSG_DONTWAIT);
		int r;

		if (n < 0 && errno == EAGAIN) {
			r = wait_fd(fd, POLLIN, stall_ms, who, e);
			if (r)
				return r;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_errno(e, CKPT_EIO, errno, "%s: recv", who);
		if (!n)
			return err_set(e, CKPT_EIO, "%s: the connection closed",
				       who);
		*got = (size_t)n;
		return 0;
	}
}

/* One line (without its newline), byte by byte: lines are short, and
 * what follows them is the stream's. */
static int recv_line(int fd, char *out, size_t cap, unsigned stall_ms,
		     const char *who, struct err *e)
{
	size_t n = 0;

	for (;;) {
		char c;
		size_t got;
		int r = recv_some(fd, &c, 1, &got, stall_ms, who, e);

		if (r)
			return r;
		if (c == '\n')
			break;
		if (n + 1 >= cap)
			return err_set(e, CLOUD_ECORRUPT, "%s: a line longer "
				       "than %zu bytes", who, cap);
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

static int send_line(int fd, const char *line, unsigned stall_ms,
		     const char *who, struct err *e)
{
	int r = send_all(fd, line, strlen(line), stall_ms, who, e);

	return r ? r : send_all(fd, "\n", 1, stall_ms, who, e);
}

/* ---- requests ---- */

/* A part name as the bucket has them: no '/', no leading '.'. */
static bool part_ok(const char *p)
{
	size_t n = strlen(p);

	return n && n < 200 && p[0] != '.' &&
	       strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789._-") == n;
}

struct request {
	char op[4];
	uint64_t step, size;
	uint32_t crc;
	char part[200];
};

static int request_line(const struct request *q, char *out, size_t cap)
{
	return snprintf(out, cap, "%s %" PRIu64 " %s %" PRIu64 " %08x", q->op,
			q->step, q->part, q->size, q->crc) >= (int)cap ? -1 : 0;
}

static bool request_parse(const char *line, struct request *q, char *mac_hex)
{
	char op[8], part[256], m[MAC_HEX + 8];
	unsigned long long step, size;
	unsigned crc;

	if (sscanf(line, "%7s %llu %255s %llu %8x %70s", op, &step, part,
		   &size, &crc, m) != 6 ||
	    (strcmp(op, "GET") && strcmp(op, "PUT")) || !part_ok(part) ||
	    !step || strlen(m) != MAC_HEX)
		return false;
	memset(q, 0, sizeof(*q));
	memcpy(q->op, op, sizeof(q->op));
	snprintf(q->part, sizeof(q->part), "%s", part);
	q->step = step;
	q->size = size;
	q->crc = crc;
	memcpy(mac_hex, m, MAC_HEX + 1);
	return true;
}

/* ---- the server side ---- */

/* Sends path's bytes after "OK SIZE". */
static int serve_get(int fd, const char *path, unsigned stall_ms,
		     struct err *e)
{
	static const char who[] = "serving a part";
	char line[64], *chunk;
	struct stat st;
	int in = open(path, O_RDONLY | O_CLOEXEC), r = 0;
	ssize_t n;

	if (in < 0 || fstat(in, &st)) {
		if (in >= 0)
			close(in);
		return send_line(fd, "NO not held here", stall_ms, who, e);
	}
	chunk = malloc(CHUNK);
	snprintf(line, sizeof(line), "OK %lld", (long long)st.st_size);
	r = chunk ? send_line(fd, line, stall_ms, who, e)
		  : err_set(e, CKPT_ENOMEM, "out of memory");
	while (!r && (n = read(in, chunk, CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_errno(e, CKPT_EIO, errno, "reading %s", path);
		else
			r = send_all(fd, chunk, (size_t)n, stall_ms, who, e);
	}
	free(chunk);
	close(in);
	return r;
}

/* Receives exactly q->size bytes into tmp (CRC32C checked), then names it
 * path. */
static int recv_into(int fd, const char *tmp, const char *path,
		     uint64_t size, uint32_t want_crc, unsigned stall_ms,
		     const char *who, struct err *e)
{
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *chunk = malloc(CHUNK);
	uint64_t left = size;
	uint32_t crc = 0;
	int r = 0;

	if (out < 0 || !chunk)
		r = out < 0 ? err_errno(e, errno == ENOSPC ? CLOUD_ENOSPACE
							   : CKPT_EIO,
					errno, "creating %s", tmp)
			    : err_set(e, CKPT_ENOMEM, "out of memory");
	while (!r && left) {
		size_t got;

		r = recv_some(fd, chunk, left < CHUNK ? (size_t)left : CHUNK,
			      &got, stall_ms, who, e);
		if (!r && fs_write_all(out, chunk, got))
			r = err_errno(e, errno == ENOSPC ? CLOUD_ENOSPACE
							 : CKPT_EIO,
				      errno, "writing %s", tmp);
		if (!r) {
			crc = crc32c_update(crc, chunk, got);
			left -= got;
		}
	}
	free(chunk);
	if (!r && crc != want_crc)
		r = err_set(e, CLOUD_ECORRUPT, "%s: %" PRIu64 " bytes with "
			    "CRC32C %08x, %08x expected", who, size, crc,
			    want_crc);
	/* No fsync: whoever uses the copy checks it against COMMIT first,
	 * and a gigabyte forced to disk cost a restore seconds. */
	if (out >= 0 && close(out) && !r)
		r = err_errno(e, CKPT_EIO, errno, "writing %s", tmp);
	if (!r && rename(tmp, path))
		r = err_errno(e, CKPT_EIO, errno, "naming %s", path);
	if (r)
		unlink(tmp);
	return r;
}

static int serve_put(int fd, const struct ckpt_peer_server *sv,
		     const struct request *q, struct err *e)
{
	static const char who[] = "receiving a part";
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	int r;

	ckpt_local_path(path, sizeof(path), sv->held_dir, q->step, q->part);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path, (long)getpid());
	r = ckpt_local_mkdir(sv->held_dir, q->step, e);
	if (!r)
		r = recv_into(fd, tmp, path, q->size, q->crc, sv->stall_ms,
			      who, e);
	if (r) {
		char no[300];

		snprintf(no, sizeof(no), "NO %.250s", e->msg);
		send_line(fd, no, sv->stall_ms, who, &(struct err){ 0 });
		return r;
	}
	return send_line(fd, "OK", sv->stall_ms, who, e);
}

int ckpt_peer_serve(int fd, const struct ckpt_peer_server *sv, struct err *e)
{
	static const char who[] = "a peer";
	char line[LINE_MAX_LEN], cnonce[64], snonce[2 * NONCE_BYTES + 1];
	char m[MAC_HEX + 1], got[MAC_HEX + 8], rline[REQ_MAX];
	char path[PATH_MAX];
	struct request q;
	int r;

	err_init(e);
	tune_socket(fd);
	r = recv_line(fd, line, sizeof(line), sv->stall_ms, who, e);
	if (r)
		return r;
	if (sscanf(line, MAGIC " %32s", cnonce) != 1 ||
	    strlen(cnonce) != 2 * NONCE_BYTES)
		return err_set(e, CLOUD_ECORRUPT, "a peer spoke no "
			       MAGIC ": refused");
	r = nonce(snonce, e);
	if (r)
		return r;
	mac(sv->secret, "S", cnonce, snonce, NULL, m);
	snprintf(line, sizeof(line), "%s %s", snonce, m);
	r = send_line(fd, line, sv->stall_ms, who, e);
	if (!r)
		r = recv_line(fd, line, sizeof(line), sv->stall_ms, who, e);
	if (r)
		return r;
	if (!request_parse(line, &q, got) || request_line(&q, rline,
							   sizeof(rline)))
		return err_set(e, CLOUD_ECORRUPT, "a peer's request is "
			       "malformed: refused");
	mac(sv->secret, "C", snonce, cnonce, rline, m);
	if (!mac_ok(m, got))
		return err_set(e, CLOUD_EAUTH, "a peer without the run's "
			       "secret asked to %s step %" PRIu64 " of %s: "
			       "refused", q.op, q.step, q.part);
	if (!strcmp(q.op, "PUT"))
		return serve_put(fd, sv, &q, e);
	ckpt_local_path(path, sizeof(path), sv->held_dir, q.step, q.part);
	return serve_get(fd, path, sv->stall_ms, e);
}

/* ---- the client side ---- */

/* A TCP connection to host:port within stall_ms. */
static int dial(const char *host, unsigned port, unsigned stall_ms,
		int *out, struct err *e)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char service[16], who[300];
	int fd = -1, r, soerr = 0;
	socklen_t len = sizeof(soerr);

	snprintf(service, sizeof(service), "%u", port);
	snprintf(who, sizeof(who), "peer %.250s:%u", host, port);
	r = getaddrinfo(host, service, &hints, &ai);
	if (r)
		return err_set(e, CLOUD_ENETWORK, "%s: %s", who,
			       gai_strerror(r));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return err_errno(e, CKPT_EIO, errno, "%s: socket", who);
	}
	tune_socket(fd);
	r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r && errno != EINPROGRESS)
		r = err_errno(e, CLOUD_ENETWORK, errno, "%s: connect", who);
	else if (r && !(r = wait_fd(fd, POLLOUT, stall_ms, who, e)) &&
		 (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) || soerr))
		r = err_errno(e, CLOUD_ENETWORK, soerr ? soerr : errno,
			      "%s: connect", who);
	if (r) {
		close(fd);
		return r;
	}
	*out = fd;
	return 0;
}

/* Connects, checks the peer holds the secret and sends q: the
 * connection, ready for what the request says next. */
static int open_request(const struct ckpt_peer_client *c,
			const struct request *q, int *out, struct err *e)
{
	char who[300], cnonce[2 * NONCE_BYTES + 1], line[LINE_MAX_LEN];
	char snonce[64], got[MAC_HEX + 8], m[MAC_HEX + 1], rline[REQ_MAX];
	int fd = -1, r;

	snprintf(who, sizeof(who), "peer %.250s:%u", c->host, c->port);
	if (request_line(q, rline, sizeof(rline)))
		return err_set(e, CKPT_EINVAL, "%s: request too long", who);
	r = nonce(cnonce, e);
	if (r)
		return r;
	r = dial(c->host, c->port, c->stall_ms, &fd, e);
	if (r)
		return r;
	snprintf(line, sizeof(line), MAGIC " %s", cnonce);
	r = send_line(fd, line, c->stall_ms, who, e);
	if (!r)
		r = recv_line(fd, line, sizeof(line), c->stall_ms, who, e);
	if (!r && sscanf(line, "%32s %70s", snonce, got) != 2)
		r = err_set(e, CLOUD_ECORRUPT, "%s: not a slicectl peer", who);
	if (!r) {
		mac(c->secret, "S", cnonce, snonce, NULL, m);
		if (!mac_ok(m, got))
			r = err_set(e, CLOUD_EAUTH, "%s does not hold the "
				    "run's secret: not trusted", who);
	}
	if (!r) {
		mac(c->secret, "C", snonce, cnonce, rline, m);
		snprintf(line, sizeof(line), "%s %s", rline, m);
		r = send_line(fd, line, c->stall_ms, who, e);
	}
	if (r) {
		close(fd);
		return r;
	}
	*out = fd;
	return 0;
}

int ckpt_peer_push(const struct ckpt_peer_client *c, uint64_t step,
		   const char *part, const char *path, struct err *e)
{
	struct request q = { .op = "PUT", .step = step };
	char who[300], line[LINE_MAX_LEN], *chunk = NULL;
	struct stat st;
	uint32_t crc = 0;
	int in, fd = -1, r;
	ssize_t n;

	err_init(e);
	snprintf(who, sizeof(who), "pushing to peer %.250s:%u", c->host,
		 c->port);
	snprintf(q.part, sizeof(q.part), "%s", part);
	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st)) {
		r = err_errno(e, CKPT_EIO, errno, "opening %s", path);
		if (in >= 0)
			close(in);
		return r;
	}
	chunk = malloc(CHUNK);
	r = chunk ? 0 : err_set(e, CKPT_ENOMEM, "out of memory");
	/* The CRC32C goes in the request, ahead of the bytes. */
	while (!r && (n = read(in, chunk, CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_errno(e, CKPT_EIO, errno, "reading %s", path);
		else
			crc = crc32c_update(crc, chunk, (size_t)n);
	}
	q.size = (uint64_t)st.st_size;
	q.crc = crc;
	if (!r && lseek(in, 0, SEEK_SET))
		r = err_errno(e, CKPT_EIO, errno, "rewinding %s", path);
	if (!r)
		r = open_request(c, &q, &fd, e);
	while (!r && (n = read(in, chunk, CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_errno(e, CKPT_EIO, errno, "reading %s", path);
		else
			r = send_all(fd, chunk, (size_t)n, c->stall_ms, who, e);
	}
	if (!r)
		r = recv_line(fd, line, sizeof(line), c->stall_ms, who, e);
	if (!r && strcmp(line, "OK"))
		r = err_set(e, CKPT_EIO, "%s: %.200s", who, line);
	free(chunk);
	close(in);
	if (fd >= 0)
		close(fd);
	return r;
}

int ckpt_peer_fetch(const struct ckpt_peer_client *c, uint64_t step,
		    const char *part, uint64_t size, uint32_t crc,
		    const char *path, struct err *e)
{
	struct request q = { .op = "GET", .step = step };
	char who[300], line[LINE_MAX_LEN], tmp[PATH_MAX + 32];
	long long offered = 0;
	int fd = -1, r;

	err_init(e);
	snprintf(who, sizeof(who), "fetching from peer %.250s:%u", c->host,
		 c->port);
	snprintf(q.part, sizeof(q.part), "%s", part);
	r = open_request(c, &q, &fd, e);
	if (r)
		return r;
	r = recv_line(fd, line, sizeof(line), c->stall_ms, who, e);
	if (!r && (sscanf(line, "OK %lld", &offered) != 1 || offered < 0))
		r = err_set(e, CLOUD_ENOTFOUND, "%s: %.200s", who, line);
	/* What COMMIT says is what must come: a partner offering other
	 * bytes is not read at all. */
	if (!r && (uint64_t)offered != size)
		r = err_set(e, CLOUD_ECORRUPT, "%s: it offers %lld bytes of "
			    "step %" PRIu64 "'s %s, COMMIT says %" PRIu64, who,
			    offered, step, part, size);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path, (long)getpid());
	if (!r)
		r = recv_into(fd, tmp, path, size, crc, c->stall_ms, who, e);
	close(fd);
	return r;
}

int ckpt_peer_secret(struct store *s, char *out, size_t cap, struct err *e)
{
	char fresh[65], *data = NULL;
	unsigned char raw[32];
	size_t len = 0;
	int r;

	err_init(e);
	for (int attempt = 0; attempt < 2; attempt++) {
		r = store_read(s, SECRET_OBJECT, SECRET_MAX, &data, &len, NULL,
			       e);
		if (!r) {
			while (len && (data[len - 1] == '\n'))
				len--;
			if (len < 32 || len >= cap) {
				free(data);
				return err_set(e, CLOUD_ECORRUPT, "%s is not a "
					       "peer secret", store_url(s,
							SECRET_OBJECT));
			}
			memcpy(out, data, len);
			out[len] = '\0';
			free(data);
			return 0;
		}
		if (r != CLOUD_ENOTFOUND)
			return r;
		/* The first to look makes it; create-only, so a race keeps
		 * one secret and the loser reads the winner's. */
		if (RAND_bytes(raw, sizeof(raw)) != 1)
			return err_set(e, CKPT_EIO, "no random bytes for the "
				       "peer secret");
		hex(raw, sizeof(raw), fresh);
		err_init(e);
		r = store_put(s, SECRET_OBJECT, fresh, strlen(fresh),
			      STORE_CREATE_ONLY, NULL, e);
		if (r && r != CLOUD_EPRECONDITION)
			return r;
		err_init(e);
	}
	return err_set(e, CLOUD_ENOTFOUND, "%s vanished as it was made",
		       store_url(s, SECRET_OBJECT));
}
