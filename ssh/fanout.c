/*
 * fanout.c: the driver. It loads the user's keys and known_hosts once,
 * starts hosts while fewer than connect_concurrency handshakes are in
 * flight, runs the one poll loop, applies deadlines from a 100 ms sweep,
 * and turns fail-fast and interrupts into remote signals.
 */
#include "ssh/fanout.h"
#include "ssh/agent.h"
#include "ssh/host.h"
#include "ssh/key.h"
#include "ssh/knownhosts.h"
#include "ssh/loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define SWEEP_MS 100u
#define READ_CHUNK 32768u
/* Handshakes in flight at first: the window doubles from there each round
 * of logins, so a healthy fleet reaches connect_concurrency in a few
 * round trips while an overloaded server sees few to drop. */
#define INITIAL_WINDOW 16u
/* Logins to wait below the level servers last failed at before trying it
 * again: doubled by each failure there. */
#define HOLD_MIN 8u
#define HOLD_MAX 1024u

struct fanout {
	const struct fanout_config *cfg;
	const struct fanout_callbacks *cb;
	struct loop loop;
	struct host *hosts;
	size_t n;
	size_t *queue;     /* ring of hosts waiting for a handshake slot */
	size_t qhead, qlen;
	unsigned in_flight;
	/* Handshakes allowed in flight, at most connect_concurrency, paced
	 * as TCP paces segments (see fanout_handshake_ok). */
	double window;
	double threshold;  /* slow start below, one more a round above */
	unsigned ceiling;  /* in flight when servers last failed; 0: none */
	unsigned hold;     /* logins to wait just below it before trying */
	unsigned held;
	uint64_t cut_ms;   /* when the window was last cut */
	bool cut_told;
	size_t remaining;
	struct ssh_key file_keys[3];
	size_t nfile_keys;
	struct agent agent;
	bool have_agent;
	struct ssh_key **keys;
	size_t nkeys;
	struct knownhosts kh;
	bool have_kh;
	bool cancelling;
	unsigned cancels;
	char readbuf[READ_CHUNK];
};

void fanout_config_init(struct fanout_config *c)
{
	memset(c, 0, sizeof(*c));
	c->policy = FANOUT_HOSTKEY_YES;
	c->connect_concurrency = 64;
	c->connect_timeout_ms = 30000;
	c->keepalive_ms = 15000;
	c->keepalive_count_max = 3;
	c->retries = 3;
	c->cancel_fd = -1;
}

const char *fanout_outcome_name(enum fanout_outcome o)
{
	static const char *const names[] = {
		"pending", "exited", "signaled", "timeout",
		"cancelled", "unreachable", "lost",
	};

	return (size_t)o < sizeof(names) / sizeof(names[0]) ? names[o] : "?";
}

const struct fanout_config *fanout_config(struct fanout *f)
{
	return f->cfg;
}

struct knownhosts *fanout_knownhosts(struct fanout *f)
{
	return &f->kh;
}

struct ssh_key *fanout_key(struct fanout *f, size_t i)
{
	return i < f->nkeys ? f->keys[i] : NULL;
}

char *fanout_readbuf(struct fanout *f, size_t *len)
{
	*len = sizeof(f->readbuf);
	return f->readbuf;
}

void fanout_output(struct fanout *f, struct host *h, int stream,
		   const char *data, size_t len)
{
	if (stream == FANOUT_STDOUT)
		h->result->bytes_out += len;
	else
		h->result->bytes_err += len;
	if (f->cb && f->cb->output)
		f->cb->output(f->cb->ud, h->index, (enum fanout_stream)stream,
			      data, len);
}

void fanout_slot_release(struct fanout *f, struct host *h)
{
	if (h->in_slot) {
		h->in_slot = false;
		f->in_flight--;
	}
}

/*
 * The window doubles each round of logins up to the threshold, then grows
 * by one a round. Just below the level at which servers last failed it
 * waits `hold` logins before trying that level again, and each failure
 * there doubles the wait: a server that takes two handshakes at a time is
 * asked for a third ever more rarely, so few hosts lose an attempt to it.
 */
void fanout_handshake_ok(struct fanout *f, struct host *h)
{
	const struct fanout_config *c = f->cfg;
	double next;

	/* Logins that take a third of the time allowed: the servers are
	 * queueing them, and timeouts come next. */
	if (c->connect_timeout_ms &&
	    mono_ms() - h->attempt_ms > c->connect_timeout_ms / 3) {
		fanout_overloaded(f, h, "logins take over a third of the "
					"connect timeout");
		return;
	}
	next = f->window < f->threshold ? f->window + 1
					: f->window + 1 / f->window;
	if (f->ceiling && (unsigned)next >= f->ceiling &&
	    (unsigned)f->window < f->ceiling && ++f->held < f->hold)
		return;
	f->held = 0;
	f->window = next > c->connect_concurrency ? c->connect_concurrency
						  : next;
	/* A whole level above it without a failure: the servers grew. */
	if (f->ceiling && (unsigned)f->window > f->ceiling)
		f->ceiling = 0;
}

void fanout_overloaded(struct fanout *f, struct host *h, const char *why)
{
	unsigned flight = f->in_flight < (unsigned)f->window
				  ? f->in_flight
				  : (unsigned)f->window;

	/* An attempt begun before the last cut was paced by the window
	 * that cut already answered. */
	if (h->attempt_ms < f->cut_ms)
		return;
	if (f->ceiling && flight >= f->ceiling)
		f->hold = f->hold < HOLD_MAX / 2 ? f->hold * 2 : HOLD_MAX;
	else
		f->hold = HOLD_MIN;
	f->ceiling = flight > 1 ? flight : 2;
	f->held = 0;
	f->threshold = flight / 2.0 < 1 ? 1 : flight / 2.0;
	f->window = f->threshold;
	f->cut_ms = mono_ms();
	if (!f->cut_told)
		log_info("servers are dropping or delaying SSH handshakes "
			 "(%s): fewer at once, %u now, more as logins "
			 "succeed", why, (unsigned)f->window);
	else
		log_debug("handshakes in flight: at most %u, trying %u after "
			  "%u logins", (unsigned)f->window, f->ceiling,
			  f->hold);
	f->cut_told = true;
}

static void cancel_all(struct fanout *f, enum fanout_outcome why, bool hard)
{
	f->cancelling = true;
	f->qlen = 0;
	for (size_t i = 0; i < f->n; i++)
		host_end(f, &f->hosts[i], why, hard);
}

void fanout_host_done(struct fanout *f, struct host *h)
{
	const struct fanout_result *r = h->result;

	f->remaining--;
	if (f->cb && f->cb->done)
		f->cb->done(f->cb->ud, h->index, r);
	if (f->cfg->fail_fast && !f->cancelling &&
	    !(r->outcome == FANOUT_EXITED && r->exit_status == 0)) {
		log_info("%s failed; --fail-fast ends the other hosts",
			 h->target->label);
		cancel_all(f, FANOUT_CANCELLED, false);
	}
}

static void on_socket(struct loop *l, int fd, void *ud, int fired)
{
	struct host *h = ud;

	(void)l;
	(void)fd;
	if (fired & LOOP_READ)
		h->last_rx_ms = mono_ms();
	host_drive(h->fanout, h);
}

int fanout_arm(struct fanout *f, struct host *h, int mask)
{
	struct err e;

	if (h->fd < 0 || h->watched == mask)
		return 0;
	err_init(&e);
	if (loop_watch(&f->loop, h->fd, mask, on_socket, h, &e)) {
		log_error("%s: %s", h->target->label, e.msg);
		return -1;
	}
	h->watched = mask;
	return 0;
}

static void on_cancel(struct loop *l, int fd, void *ud, int fired)
{
	struct fanout *f = ud;
	char buf[64];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)l;
	(void)fired;
	if (n <= 0) {
		struct err e;

		/* A closed pipe must not wake the loop forever. */
		err_init(&e);
		loop_watch(&f->loop, fd, LOOP_NONE, NULL, NULL, &e);
		if (n < 0 && errno == EAGAIN)
			loop_watch(&f->loop, fd, LOOP_READ, on_cancel, f, &e);
		return;
	}
	f->cancels += (unsigned)n;
	if (f->cancels == 1) {
		log_info("interrupted: ending the remote commands (interrupt "
			 "again to drop the connections at once)");
		cancel_all(f, FANOUT_CANCELLED, false);
	} else {
		cancel_all(f, FANOUT_CANCELLED, true);
	}
}

/* Whether an interrupt is waiting on cancel_fd (it stays there for the
 * loop to read). */
static bool cancel_pending(const struct fanout *f)
{
	struct pollfd p = { .fd = f->cfg->cancel_fd, .events = POLLIN };

	return p.fd >= 0 && poll(&p, 1, 0) == 1;
}

static void schedule(struct fanout *f)
{
	uint64_t now = 0;

	while (f->qlen && f->in_flight < (unsigned)f->window) {
		struct host *h = &f->hosts[f->queue[f->qhead]];

		f->qhead = (f->qhead + 1) % f->n;
		f->qlen--;
		if (h->state != HS_QUEUED && h->state != HS_RETRY_WAIT)
			continue;
		if (!now)
			now = mono_ms();
		if (!h->result->start_ms)
			h->result->start_ms = now;
		h->in_slot = true;
		f->in_flight++;
		h->deadline_ms = f->cfg->connect_timeout_ms
					 ? now + f->cfg->connect_timeout_ms
					 : 0;
		h->state = HS_CONNECT;
		host_drive(f, h);
	}
}

static void enqueue(struct fanout *f, struct host *h)
{
	f->queue[(f->qhead + f->qlen) % f->n] = h->index;
	f->qlen++;
}

static void sweep(struct fanout *f, uint64_t now)
{
	for (size_t i = 0; i < f->n; i++) {
		struct host *h = &f->hosts[i];

		if (h->state == HS_RETRY_WAIT) {
			if (now >= h->retry_at_ms && !f->cancelling) {
				h->state = HS_QUEUED;
				enqueue(f, h);
			}
			continue;
		}
		host_tick(f, h, now);
	}
}

static int default_keys(struct fanout *f, struct err *e)
{
	static const char *const names[] = { "id_ed25519", "id_ecdsa",
					     "id_rsa" };
	const char *home = getenv("HOME");
	char path[4096];

	for (size_t i = 0; home && i < 3; i++) {
		struct err ke;

		snprintf(path, sizeof(path), "%s/.ssh/%s", home, names[i]);
		if (access(path, R_OK))
			continue;
		err_init(&ke);
		if (key_load_file(&f->file_keys[f->nfile_keys], path, &ke)) {
			log_warn("skipping %s", ke.msg);
			continue;
		}
		f->nfile_keys++;
	}
	if (!f->nfile_keys && !f->have_agent)
		return err_set(e, SSH_EKEY,
			       "no SSH key to log in with: pass --identity KEY, "
			       "or start ssh-agent and add a key (ssh-add), "
			       "or create one (ssh-keygen -t ed25519)");
	return 0;
}

static int load_keys(struct fanout *f, struct err *e)
{
	const char *sock = getenv("SSH_AUTH_SOCK");
	size_t k = 0;
	int rc;

	if (f->cfg->identity) {
		rc = key_load_file(&f->file_keys[0], f->cfg->identity, e);
		if (rc)
			return rc;
		f->nfile_keys = 1;
	} else {
		if (sock && *sock) {
			struct err ae;

			err_init(&ae);
			if (agent_open(&f->agent, sock, &ae))
				log_warn("ignoring ssh-agent: %s", ae.msg);
			else
				f->have_agent = f->agent.nkeys > 0;
		}
		rc = default_keys(f, e);
		if (rc)
			return rc;
	}
	f->nkeys = f->nfile_keys + (f->have_agent ? f->agent.nkeys : 0);
	f->keys = calloc(f->nkeys, sizeof(*f->keys));
	if (!f->keys)
		return err_set(e, SSH_ENOMEM, "out of memory");
	if (f->have_agent)
		for (size_t i = 0; i < f->agent.nkeys; i++)
			f->keys[k++] = &f->agent.keys[i];
	for (size_t i = 0; i < f->nfile_keys; i++)
		f->keys[k++] = &f->file_keys[i];
	for (size_t i = 0; i < f->nkeys; i++)
		if (f->keys[i]->type == KEY_RSA &&
		    LIBSSH2_VERSION_NUM < 0x010b00)
			log_warn("an RSA key is offered; libssh2 " LIBSSH2_VERSION
				 " signs RSA only with SHA-1 (ssh-rsa), which "
				 "OpenSSH 8.8 and later refuse by default: "
				 "prefer an ed25519 key");
	return 0;
}

/* Every host holds a socket, plus a log file when the caller keeps logs:
 * raise the soft limit rather than fail at host 1000. */
static int raise_nofile(size_t n, struct err *e)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)n * 2 + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return err_errno(e, SSH_ELIMIT, errno, "getrlimit");
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)n + 64)
		return err_set(e, SSH_ELIMIT,
			       "%zu hosts need %llu open files, but the hard "
			       "limit is %llu: raise it (ulimit -Hn, or "
			       "LimitNOFILE= under systemd)",
			       n, (unsigned long long)need,
			       (unsigned long long)rl.rlim_max);
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need
			      ? need
			      : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return err_errno(e, SSH_ELIMIT, errno,
				 "raising the open-file limit to %llu",
				 (unsigned long long)rl.rlim_cur);
	return 0;
}

static void fanout_release(struct fanout *f)
{
	for (size_t i = 0; i < f->n && f->hosts; i++)
		free(f->hosts[i].command);
	free(f->hosts);
	free(f->queue);
	free(f->keys);
	for (size_t i = 0; i < f->nfile_keys; i++)
		key_release(&f->file_keys[i]);
	if (f->agent.fd >= 0)
		agent_close(&f->agent);
	if (f->have_kh)
		knownhosts_close(&f->kh);
	loop_release(&f->loop);
}

static int setup(struct fanout *f, const struct fanout_target *targets,
		 size_t n, struct fanout_result *results, struct err *e)
{
	int rc;

	if ((rc = raise_nofile(n, e)) || (rc = loop_init(&f->loop, e)))
		return rc;
	if ((rc = knownhosts_open(&f->kh, f->cfg->known_hosts, f->cfg->policy,
				  e)))
		return rc;
	f->have_kh = true;
	rc = load_keys(f, e);
	/* Keys may come from an agent that kept slicectl waiting until the
	 * interrupt: the interrupt is the answer, whatever the keys did. */
	if (cancel_pending(f))
		return err_set(e, SSH_EINTR,
			       "interrupted while starting: no host was "
			       "contacted");
	if (rc)
		return rc;
	f->hosts = calloc(n, sizeof(*f->hosts));
	f->queue = calloc(n, sizeof(*f->queue));
	if (!f->hosts || !f->queue)
		return err_set(e, SSH_ENOMEM, "out of memory for %zu hosts", n);
	f->n = n;
	f->remaining = n;
	f->threshold = f->cfg->connect_concurrency;
	f->window = f->threshold < INITIAL_WINDOW ? f->threshold
						  : INITIAL_WINDOW;
	for (size_t i = 0; i < n; i++) {
		struct host *h = &f->hosts[i];

		memset(&results[i], 0, sizeof(results[i]));
		h->index = i;
		h->fanout = f;
		h->target = &targets[i];
		h->result = &results[i];
		h->fd = -1;
		h->state = HS_QUEUED;
		backoff_init(&h->backoff, 250, 4000,
			     (uint64_t)getpid() * 2654435761u + i + 1);
		enqueue(f, h);
	}
	if (f->cfg->cancel_fd >= 0)
		return loop_watch(&f->loop, f->cfg->cancel_fd, LOOP_READ,
				  on_cancel, f, e);
	return 0;
}

int fanout_run(const struct fanout_config *cfg,
	       const struct fanout_target *targets, size_t n,
	       struct fanout_result *results, const struct fanout_callbacks *cb,
	       struct err *e)
{
	struct fanout *f;
	uint64_t next_sweep;
	int rc;

	if (!n)
		return 0;
	if (!cfg->command || !cfg->connect_concurrency)
		return err_set(e, SSH_EINVAL,
			       "a command and a concurrency of 1 or more");
	f = calloc(1, sizeof(*f));
	if (!f)
		return err_set(e, SSH_ENOMEM, "out of memory");
	f->agent.fd = -1;
	f->cfg = cfg;
	f->cb = cb;
	if (libssh2_init(0)) {
		free(f);
		return err_set(e, SSH_ESYS, "libssh2 failed to initialise");
	}
	rc = setup(f, targets, n, results, e);
	next_sweep = mono_ms() + SWEEP_MS;
	while (!rc && f->remaining) {
		uint64_t now;

		schedule(f);
		if (!f->remaining)
			break;
		now = mono_ms();
		if (loop_once(&f->loop,
			      now >= next_sweep ? 0 : (int)(next_sweep - now),
			      e) < 0)
			rc = e->code ? e->code : SSH_ESYS;
		if (f->cb && f->cb->flush)
			f->cb->flush(f->cb->ud);
		now = mono_ms();
		if (now >= next_sweep) {
			sweep(f, now);
			next_sweep = now + SWEEP_MS;
		}
	}
	if (rc && f->hosts)
		cancel_all(f, FANOUT_CANCELLED, true);
	fanout_release(f);
	free(f);
	libssh2_exit();
	return rc;
}
