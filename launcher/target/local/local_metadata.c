/*
 * local_metadata.c: the local provider's metadata server (see local.h).
 * One listening socket on 127.0.0.1 per worker, all served by one thread
 * with one poll loop over the listeners, the open connections and a wake
 * pipe. It serves exactly what slice-supervisor reads from a TPU VM's
 * metadata server, with that server's rules: "Metadata-Flavor: Google" is
 * required (403 without it, and with an X-Forwarded-For header), every
 * answer carries it back, values come as text/plain with an ETag, and
 * "?wait_for_change=true[&last_etag=E][&timeout_sec=N]" holds the request
 * until the value's ETag differs from E (or from the current one without
 * E) or the time runs out. One request per connection.
 */
#include "launcher/target/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define ROOT "/computeMetadata/v1/"
#define REQ_MAX 8192
#define WAIT_MAX_S 3600
#define CONN_MAX 1024

enum md_value {
	MD_WORKER_NUMBER,
	MD_TPU_ENV,
	MD_ENDPOINTS,
	MD_PREEMPTED,
	MD_MAINTENANCE,
	MD_NVALUES
};

static const char *const md_paths[MD_NVALUES] = {
	"instance/attributes/agent-worker-number",
	"instance/attributes/tpu-env",
	"instance/attributes/worker-network-endpoints",
	"instance/preempted",
	"instance/maintenance-event",
};

struct md_worker {
	int listen_fd;
	unsigned port;
	char *values[MD_NVALUES];
};

struct md_conn {
	int fd;
	unsigned worker;
	char req[REQ_MAX];
	size_t len;
	bool parked;          /* a long poll waiting for a change */
	int value;            /* what it waits on */
	char base_etag[20];   /* the ETag it waits to change from */
	uint64_t deadline_ms;
};

struct local_metadata {
	pthread_mutex_t mu;
	pthread_t thread;
	bool started;
	bool stop;            /* under mu */
	int wake[2];
	unsigned n;
	struct md_worker *w;
	struct md_conn *conns[CONN_MAX];
	size_t nconns;
};

/* FNV-1a of the value, as hex: an equal value has an equal ETag. */
static void etag_of(const char *v, char out[20])
{
	uint64_t h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		h ^= *p;
		h *= 1099511628211ull;
	}
	snprintf(out, 20, "%016llx", (unsigned long long)h);
}

static void wake(struct local_metadata *m)
{
	char c = 1;

	if (write(m->wake[1], &c, 1) < 0 && errno != EAGAIN)
		log_warn("local metadata: cannot wake its thread: %s",
			 strerror(errno));
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Writes all of data (small answers), waiting briefly when the socket
 * buffer is full; a client that reads nothing for a second loses it. */
static void send_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

		if (n > 0) {
			data += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (poll(&p, 1, 1000) <= 0)
				return;
		} else {
			return;
		}
	}
}

static void respond(struct md_conn *c, bool head, int status,
		    const char *ctype, const char *body, const char *etag)
{
	static const struct {
		int status;
		const char *text;
	} reasons[] = { { 200, "OK" },	       { 400, "Bad Request" },
			{ 403, "Forbidden" },  { 404, "Not Found" },
			{ 405, "Method Not Allowed" } };
	const char *reason = "Error";
	struct buf b;

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			reason = reasons[i].text;
	buf_init(&b);
	if (!buf_appendf(&b,
			 "HTTP/1.1 %d %s\r\nMetadata-Flavor: Google\r\n"
			 "Content-Type: %s\r\nContent-Length: %zu\r\n"
			 "%s%s%sServer: Metadata Server for VM\r\n"
			 "Connection: close\r\n\r\n%s",
			 status, reason, ctype, strlen(body),
			 etag ? "ETag: " : "", etag ? etag : "",
			 etag ? "\r\n" : "", head ? "" : body))
		send_all(c->fd, b.data, b.len);
	buf_release(&b);
}

static void respond_error(struct md_conn *c, bool head, int status,
			  const char *text)
{
	char body[512];

	snprintf(body, sizeof(body),
		 "<!DOCTYPE html>\n<html lang=en>\n<title>Error %d</title>\n"
		 "<p><b>%d.</b> %s\n",
		 status, status, text);
	respond(c, head, status, "text/html; charset=UTF-8", body, NULL);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes s in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (*s == '%' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
			*o++ = (char)(hexval(s[1]) * 16 + hexval(s[2]));
			s += 2;
		} else {
			*o++ = *s == '+' ? ' ' : *s;
		}
	}
	*o = '\0';
}

/* Whether header name (with its colon) appears among the request's lines,
 * and its value in v. */
static bool header(const char *req, const char *name, char *v, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(req, "\r\n"); p && p[2]; ) {
		const char *line = p + 2, *end = strstr(line, "\r\n");

		if (!end || end == line)
			break;
		if (!strncasecmp(line, name, nl) && line[nl] == ':') {
			const char *s = line + nl + 1;

			while (*s == ' ' || *s == '\t')
				s++;
			snprintf(v, len, "%.*s", (int)(end - s), s);
			return true;
		}
		p = end;
	}
	return false;
}

/* The answer to a value whose wait is over (or that never waited). */
static void answer_value(struct local_metadata *m, struct md_conn *c,
			 bool head)
{
	char etag[20];
	const char *v = m->w[c->worker].values[c->value];

	etag_of(v, etag);
	respond(c, head, 200, "text/plain", v, etag);
}

/* Handles one whole request (mu held). Returns true when c is answered
 * (and can be closed), false when it is parked. */
static bool handle(struct local_metadata *m, struct md_conn *c)
{
	char method[16], target[2048], *query, *save = NULL, v[256];
	bool head, wait = false, have_etag = false;
	unsigned timeout = WAIT_MAX_S;
	int value = -1;

	if (sscanf(c->req, "%15s %2047s", method, target) != 2) {
		respond_error(c, false, 400, "Malformed request.");
		return true;
	}
	head = !strcmp(method, "HEAD");
	if (header(c->req, "X-Forwarded-For", v, sizeof(v))) {
		respond_error(c, head, 403, "Request had an X-Forwarded-For "
					    "header and was rejected.");
		return true;
	}
	if (!header(c->req, "Metadata-Flavor", v, sizeof(v)) ||
	    strcmp(v, "Google")) {
		respond_error(c, head, 403,
			      "Missing Metadata-Flavor:Google header.");
		return true;
	}
	if (strcmp(method, "GET") && !head) {
		respond_error(c, head, 405, "The request method is "
					    "inappropriate for the URL.");
		return true;
	}
	query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	unescape(target);
	if (!strncmp(target, ROOT, strlen(ROOT)))
		for (int i = 0; i < MD_NVALUES; i++)
			if (!strcmp(target + strlen(ROOT), md_paths[i]))
				value = i;
	c->base_etag[0] = '\0';
	for (char *kv = query ? strtok_r(query, "&", &save) : NULL; kv;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		const char *val = eq ? eq + 1 : "";

		if (eq)
			*eq = '\0';
		unescape(kv);
		if (eq)
			unescape(eq + 1);
		if (!strcmp(kv, "wait_for_change")) {
			if (strcasecmp(val, "true") && strcasecmp(val, "false")) {
				respond_error(c, head, 400, "wait_for_change "
							    "must be true or "
							    "false.");
				return true;
			}
			wait = !strcasecmp(val, "true");
		} else if (!strcmp(kv, "last_etag")) {
			snprintf(c->base_etag, sizeof(c->base_etag), "%s", val);
			have_etag = true;
		} else if (!strcmp(kv, "timeout_sec")) {
			char *end;
			unsigned long t = strtoul(val, &end, 10);

			if (!*val || *end || t < 1 || strlen(val) > 9) {
				respond_error(c, head, 400, "timeout_sec must "
							    "be a positive "
							    "integer.");
				return true;
			}
			timeout = t < WAIT_MAX_S ? (unsigned)t : WAIT_MAX_S;
		}
	}
	if (value < 0) {
		respond_error(c, head, 404, "The requested URL was not found "
					    "on this server.");
		return true;
	}
	c->value = value;
	if (wait) {
		char now[20];

		etag_of(m->w[c->worker].values[value], now);
		if (!have_etag)
			snprintf(c->base_etag, sizeof(c->base_etag), "%s", now);
		if (!strcmp(now, c->base_etag)) {
			c->parked = true;
			c->deadline_ms = mono_ms() + (uint64_t)timeout * 1000;
			return false;
		}
	}
	answer_value(m, c, head);
	return true;
}

static void conn_close(struct local_metadata *m, size_t i)
{
	close(m->conns[i]->fd);
	free(m->conns[i]);
	m->conns[i] = m->conns[--m->nconns];
}

/* Answers parked long polls whose value changed or whose time is up. */
static void check_parked(struct local_metadata *m)
{
	uint64_t now = mono_ms();

	for (size_t i = 0; i < m->nconns;) {
		struct md_conn *c = m->conns[i];
		char etag[20];

		if (c->parked) {
			etag_of(m->w[c->worker].values[c->value], etag);
			if (strcmp(etag, c->base_etag) || now >= c->deadline_ms) {
				answer_value(m, c, false);
				conn_close(m, i);
				continue;
			}
		}
		i++;
	}
}

static void accept_on(struct local_metadata *m, unsigned w)
{
	for (;;) {
		int fd = accept(m->w[w].listen_fd, NULL, NULL);
		struct md_conn *c;

		if (fd < 0)
			return;
		if (set_nonblock(fd) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
			close(fd);
			continue;
		}
		c = m->nconns < CONN_MAX ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->worker = w;
		m->conns[m->nconns++] = c;
	}
}

/* Reads what c sent; returns false when c is to be closed. */
static bool read_conn(struct local_metadata *m, struct md_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->req + c->len,
				 sizeof(c->req) - 1 - c->len, 0);

		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (c->parked)
			continue; /* a pipelined extra: ignored */
		c->len += (size_t)n;
		c->req[c->len] = '\0';
		if (strstr(c->req, "\r\n\r\n")) {
			bool done;

			pthread_mutex_lock(&m->mu);
			done = handle(m, c);
			pthread_mutex_unlock(&m->mu);
			return !done;
		}
		if (c->len >= sizeof(c->req) - 1) {
			respond_error(c, false, 400, "Request too large.");
			return false;
		}
	}
}

static void *serve(void *arg)
{
	struct local_metadata *m = arg;
	struct pollfd *p = calloc(1 + m->n + CONN_MAX, sizeof(*p));

	if (!p)
		return NULL;
	for (;;) {
		size_t np = 0, nconns;
		int timeout = 1000;

		pthread_mutex_lock(&m->mu);
		if (m->stop) {
			pthread_mutex_unlock(&m->mu);
			break;
		}
		check_parked(m);
		pthread_mutex_unlock(&m->mu);
		p[np++] = (struct pollfd){ .fd = m->wake[0], .events = POLLIN };
		for (unsigned w = 0; w < m->n; w++)
			p[np++] = (struct pollfd){ .fd = m->w[w].listen_fd,
						   .events = POLLIN };
		nconns = m->nconns;
		for (size_t i = 0; i < nconns; i++)
			p[np++] = (struct pollfd){ .fd = m->conns[i]->fd,
						   .events = POLLIN };
		if (poll(p, np, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			char drain[64];

			while (read(m->wake[0], drain, sizeof(drain)) > 0)
				;
		}
		/* Connections first (indices shift as they close), from the
		 * end so closing one leaves the others' slots in place. */
		for (size_t i = nconns; i-- > 0;) {
			if (!p[1 + m->n + i].revents)
				continue;
			if (!read_conn(m, m->conns[i]))
				conn_close(m, i);
		}
		for (unsigned w = 0; w < m->n; w++)
			if (p[1 + w].revents)
				accept_on(m, w);
	}
	free(p);
	return NULL;
}

static int listen_one(struct md_worker *w, struct err *e)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	w->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (w->listen_fd < 0)
		return err_errno(e, COMMON_EIO, errno, "socket");
	if (bind(w->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(w->listen_fd, 128) ||
	    getsockname(w->listen_fd, (struct sockaddr *)&a, &len) ||
	    set_nonblock(w->listen_fd))
		return err_errno(e, COMMON_EIO, errno,
				 "cannot listen on 127.0.0.1 for the local "
				 "metadata server");
	w->port = ntohs(a.sin_port);
	return 0;
}

/* A worker's values, as a TPU VM of a multislice run sees them. */
static int fill_values(struct local_metadata *m, unsigned process,
		       unsigned num_slices, unsigned wps)
{
	struct md_worker *w = &m->w[process];
	unsigned slice = process / wps, worker = process % wps;
	struct buf eps, env;
	char num[16];

	buf_init(&eps);
	buf_init(&env);
	for (unsigned i = 0; i < wps; i++)
		if (buf_appendf(&eps, "%slocal-%u:%u:127.0.0.1", i ? "," : "",
				slice, i))
			goto fail;
	if (buf_appendf(&env,
			"ACCELERATOR_TYPE: 'local'\nNODE_ID: 'local-%u'\n"
			"WORKER_ID: '%u'\nZONE: 'local'\n",
			slice, worker))
		goto fail;
	if (num_slices > 1 &&
	    buf_appendf(&env,
			"MEGASCALE_COORDINATOR_ADDRESS: '127.0.0.1'\n"
			"MEGASCALE_NUM_SLICES: '%u'\nMEGASCALE_SLICE_ID: '%u'\n",
			num_slices, slice))
		goto fail;
	snprintf(num, sizeof(num), "%u", worker);
	w->values[MD_WORKER_NUMBER] = strdup(num);
	w->values[MD_TPU_ENV] = buf_detach(&env);
	w->values[MD_ENDPOINTS] = buf_detach(&eps);
	w->values[MD_PREEMPTED] = strdup("FALSE");
	w->values[MD_MAINTENANCE] = strdup("NONE");
	for (int i = 0; i < MD_NVALUES; i++)
		if (!w->values[i])
			return -1;
	return 0;
fail:
	buf_release(&eps);
	buf_release(&env);
	return -1;
}

int local_metadata_start(struct local_metadata **out, unsigned num_slices,
			 unsigned workers_per_slice, struct err *e)
{
	struct local_metadata *m = calloc(1, sizeof(*m));
	unsigned n = num_slices * workers_per_slice;
	int rc = 0;

	*out = NULL;
	if (!m)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	m->wake[0] = m->wake[1] = -1;
	m->n = n;
	m->w = calloc(n ? n : 1, sizeof(*m->w));
	if (!m->w) {
		local_metadata_stop(m);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < n; i++)
		m->w[i].listen_fd = -1;
	if (pipe(m->wake) || set_nonblock(m->wake[0]) ||
	    set_nonblock(m->wake[1]) || fcntl(m->wake[0], F_SETFD, FD_CLOEXEC) ||
	    fcntl(m->wake[1], F_SETFD, FD_CLOEXEC))
		rc = err_errno(e, COMMON_EIO, errno, "pipe");
	for (unsigned i = 0; i < n && !rc; i++) {
		rc = listen_one(&m->w[i], e);
		if (!rc && fill_values(m, i, num_slices, workers_per_slice))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
	}
	if (!rc && thread_start(&m->thread, serve, m))
		rc = err_set(e, COMMON_EIO, "cannot start a thread");
	if (rc) {
		local_metadata_stop(m);
		return rc;
	}
	m->started = true;
	*out = m;
	return 0;
}

unsigned local_metadata_port(const struct local_metadata *m,
			     unsigned process)
{
	return process < m->n ? m->w[process].port : 0;
}

int local_metadata_set(struct local_metadata *m, unsigned process,
		       const char *path, const char *value)
{
	char *copy;
	int rc = COMMON_EINVAL;

	if (process >= m->n)
		return COMMON_EINVAL;
	copy = strdup(value);
	if (!copy)
		return COMMON_ENOMEM;
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < MD_NVALUES; i++) {
		if (strcmp(path, md_paths[i]))
			continue;
		free(m->w[process].values[i]);
		m->w[process].values[i] = copy;
		copy = NULL;
		rc = 0;
	}
	pthread_mutex_unlock(&m->mu);
	free(copy);
	if (!rc)
		wake(m);
	return rc;
}

void local_metadata_stop(struct local_metadata *m)
{
	if (!m)
		return;
	if (m->started) {
		pthread_mutex_lock(&m->mu);
		m->stop = true;
		pthread_mutex_unlock(&m->mu);
		wake(m);
		pthread_join(m->thread, NULL);
	}
	while (m->nconns)
		conn_close(m, m->nconns - 1);
	for (unsigned i = 0; m->w && i < m->n; i++) {
		if (m->w[i].listen_fd >= 0)
			close(m->w[i].listen_fd);
		for (int v = 0; v < MD_NVALUES; v++)
			free(m->w[i].values[v]);
	}
	free(m->w);
	for (int i = 0; i < 2; i++)
		if (m->wake[i] >= 0)
			close(m->wake[i]);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
