/* tests/cloud/tiny_http.c: see tiny_http.h. */
#include "tests/cloud/tiny_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char *find_nocase(const char *h, const char *needle)
{
	size_t n = strlen(needle);

	for (; *h; h++)
		if (strncasecmp(h, needle, n) == 0)
			return (char *)h;
	return NULL;
}

static bool read_more(int fd, struct buf *in)
{
	char chunk[65536];
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t n;

	if (poll(&p, 1, 5000) <= 0)
		return false;
	n = read(fd, chunk, sizeof(chunk));
	if (n <= 0)
		return false;
	return buf_append(in, chunk, (size_t)n) == 0;
}

/* Reads one request whole (Content-Length or chunked body). */
static bool read_request(int fd, struct buf *in)
{
	char *end, *cl;
	size_t head, want;

	while (!in->data || !(end = strstr(in->data, "\r\n\r\n")))
		if (!read_more(fd, in))
			return false;
	head = (size_t)(end - in->data) + 4;
	cl = find_nocase(in->data, "\r\ncontent-length:");
	if (cl && cl < end) {
		want = head + strtoul(cl + 17, NULL, 10);
		while (in->len < want)
			if (!read_more(fd, in))
				return false;
		return true;
	}
	cl = find_nocase(in->data, "\r\ntransfer-encoding: chunked");
	if (cl && cl < end)
		while (!strstr(in->data + head - 2, "\r\n0\r\n\r\n"))
			if (!read_more(fd, in))
				return false;
	return true;
}

/* "Content-Length: *" in an answer becomes the length of its body. */
static void fill_length(struct buf *out, const char *raw)
{
	const char *star = strstr(raw, "Content-Length: *\r\n");
	const char *body = strstr(raw, "\r\n\r\n");

	if (!star || !body) {
		buf_appends(out, raw);
		return;
	}
	buf_append(out, raw, (size_t)(star - raw));
	buf_appendf(out, "Content-Length: %zu", strlen(body + 4));
	buf_appends(out, star + 17);
}

/* The answer as sent: the connection closes after it, which an HTTP/1.1
 * answer says ("Connection: close"), or a client reusing the connection
 * races the close (curl, streaming a body it cannot rewind itself, then
 * fails the attempt: cloud-http under the sanitizers). */
static void answer_text(struct buf *out, const char *raw)
{
	const char *eol = strstr(raw, "\r\n");

	if (!strncmp(raw, "HTTP/1.1 ", 9) && eol &&
	    !strstr(raw, "\r\nConnection:")) {
		buf_append(out, raw, (size_t)(eol + 2 - raw));
		buf_appends(out, "Connection: close\r\n");
		raw = eol + 2;
	}
	fill_length(out, raw);
}

/* Answers one request on fd; true when the answer kept the connection
 * open for the next ("Connection: keep-alive"). */
static bool serve(struct tiny_http *t, int fd)
{
	const struct tiny_answer *a;
	struct buf in;
	size_t i;
	bool keep;

	buf_init(&in);
	if (!read_request(fd, &in)) {
		buf_release(&in);
		return false;
	}
	pthread_mutex_lock(&t->mu);
	i = t->requests < t->n ? t->requests : t->n - 1;
	t->requests++;
	buf_append(&t->log, in.data, in.len);
	buf_appends(&t->log, "\n---\n");
	pthread_mutex_unlock(&t->mu);
	buf_release(&in);
	a = &t->answers[i];
	if (a->delay_ms) {
		struct timespec ts = { a->delay_ms / 1000,
				       (long)(a->delay_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	if (a->drop)
		return false;
	keep = strstr(a->raw, "\r\nConnection: keep-alive\r\n") != NULL;
	buf_init(&in);
	answer_text(&in, a->raw);
	for (size_t off = 0; off < in.len;) {
		ssize_t n = write(fd, in.data + off, in.len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	buf_release(&in);
	return keep;
}

static void *run(void *ud)
{
	struct tiny_http *t = ud;

	for (;;) {
		struct pollfd p = { t->fd, POLLIN, 0 };
		bool stop;
		int c;

		pthread_mutex_lock(&t->mu);
		stop = t->stop;
		pthread_mutex_unlock(&t->mu);
		if (stop)
			break;
		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(t->fd, NULL, NULL);
		if (c < 0)
			continue;
		while (serve(t, c))
			;
		/* Lingering would turn a drop into a clean close. */
		shutdown(c, SHUT_RDWR);
		close(c);
	}
	return NULL;
}

int tiny_start(struct tiny_http *t, const struct tiny_answer *answers,
	       size_t n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);

	memset(t, 0, sizeof(*t));
	buf_init(&t->log);
	pthread_mutex_init(&t->mu, NULL);
	t->answers = answers;
	t->n = n;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	t->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (t->fd < 0 || bind(t->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(t->fd, 16) ||
	    getsockname(t->fd, (struct sockaddr *)&sa, &len)) {
		perror("tiny_http");
		return -1;
	}
	t->port = ntohs(sa.sin_port);
	snprintf(t->base, sizeof(t->base), "http://127.0.0.1:%u", t->port);
	if (pthread_create(&t->thread, NULL, run, t)) {
		perror("tiny_http: thread");
		return -1;
	}
	return 0;
}

void tiny_stop(struct tiny_http *t)
{
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	close(t->fd);
	buf_release(&t->log);
	pthread_mutex_destroy(&t->mu);
}

char *tiny_log(struct tiny_http *t)
{
	char *s;

	pthread_mutex_lock(&t->mu);
	s = strdup(t->log.data ? t->log.data : "");
	pthread_mutex_unlock(&t->mu);
	return s;
}

unsigned tiny_requests(struct tiny_http *t)
{
	unsigned n;

	pthread_mutex_lock(&t->mu);
	n = t->requests;
	pthread_mutex_unlock(&t->mu);
	return n;
}

int log_capture_begin(struct log_capture *c)
{
	char path[] = "/tmp/slicectl-log-XXXXXX";

	c->fd = mkstemp(path);
	if (c->fd < 0) {
		perror("mkstemp");
		return -1;
	}
	unlink(path);
	c->saved = dup(2);
	if (c->saved < 0) {
		perror("dup");
		close(c->fd);
		return -1;
	}
	log_setup("test", LOG_DEBUG);
	fflush(stderr);
	dup2(c->fd, 2);
	return 0;
}

char *log_capture_end(struct log_capture *c)
{
	struct buf b;
	char chunk[4096];
	off_t off = 0;
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	log_setup("test", LOG_INFO);
	buf_init(&b);
	while ((n = pread(c->fd, chunk, sizeof(chunk), off)) > 0) {
		if (buf_append(&b, chunk, (size_t)n))
			break;
		off += n;
	}
	close(c->fd);
	if (!b.data && buf_appends(&b, ""))
		return NULL;
	return buf_detach(&b);
}
