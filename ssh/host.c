/*
 * host.c: one host's connection, from TCP connect to session free, as a
 * non-blocking state machine. Each state's function is called whenever its
 * socket is ready (or a timer fires) and returns STEP_AGAIN when libssh2
 * answered EAGAIN: the driver then re-arms exactly the directions libssh2
 * reports. Teardown is states too; only an abort drops a connection on
 * the spot.
 */
#include "ssh/host.h"
#include "ssh/key.h"
#include "ssh/knownhosts.h"
#include "ssh/loop.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A window of 512 KiB keeps loopback and same-zone links at full speed
 * while bounding what a host whose output we cannot print yet can queue. */
#define CHANNEL_WINDOW (512u * 1024u)
#define SEND_CHUNK (64u * 1024u)
#define SIGNAL_GRACE_MS 5000u
#define KILL_GRACE_MS 3000u
#define CLOSE_TIMEOUT_MS 10000u

typedef enum step state_fn(struct fanout *f, struct host *h);

/* libssh2 keeps time for keepalives in whole seconds, and turns an
 * interval of 1 into 2: whole seconds from 2 up are what it can do. */
static unsigned keepalive_ms(const struct fanout_config *c)
{
	unsigned s = (c->keepalive_ms + 500) / 1000;

	return (s < 2 ? 2 : s) * 1000;
}

static const char *const state_names[] = {
	"STOP",        "QUEUED",        "RETRY_WAIT",   "CONNECT",
	"HANDSHAKE",   "HOSTKEY",       "AUTH",         "CHANNEL_OPEN",
	"EXEC",        "SEND",          "SEND_EOF",     "RUNNING",
	"SIGNAL",      "CLOSE",         "WAIT_CLOSED",  "CHANNEL_FREE",
	"DISCONNECT",  "SESSION_FREE",  "DONE",
};
_Static_assert(sizeof(state_names) / sizeof(state_names[0]) == HS_LAST,
	       "state_names must name every host state");

const char *host_state_name(enum host_state s)
{
	return s < HS_LAST ? state_names[s] : "?";
}

static void set_state(struct host *h, enum host_state s)
{
	if (h->state != s)
		log_debug("%s: %s -> %s", h->target->label,
			  state_names[h->state], state_names[s]);
	h->state = s;
}

/* Records why the host failed; the driver decides what follows. */
static enum step fail(struct host *h, bool retryable, const char *fmt, ...)
	ATTR_PRINTF(3, 4);

static enum step fail(struct host *h, bool retryable, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->result->error, sizeof(h->result->error), fmt, ap);
	va_end(ap);
	h->retryable = retryable;
	return STEP_ERROR;
}

static const char *ssh_error_text(struct host *h)
{
	char *msg = NULL;

	if (!h->session)
		return "no session";
	libssh2_session_last_error(h->session, &msg, NULL, 0);
	return msg && *msg ? msg : "unknown libssh2 error";
}

/* Errors that mean the connection went away: worth another attempt before
 * authentication (sshd's MaxStartups drops look exactly like this). */
static bool socket_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_TIMEOUT:
		return true;
	default:
		return false;
	}
}

static void drop_connection(struct fanout *f, struct host *h)
{
	if (h->fd >= 0) {
		fanout_arm(f, h, LOOP_NONE);
		/* libssh2 may still try to send a close or disconnect while
		 * freeing; a shut-down socket makes that fail at once. */
		shutdown(h->fd, SHUT_RDWR);
	}
	if (h->channel) {
		libssh2_channel_free(h->channel);
		h->channel = NULL;
	}
	if (h->session) {
		for (int i = 0; i < 8; i++)
			if (libssh2_session_free(h->session) !=
			    LIBSSH2_ERROR_EAGAIN)
				break;
		h->session = NULL;
	}
	if (h->fd >= 0) {
		close(h->fd);
		h->fd = -1;
	}
	h->watched = LOOP_NONE;
}

static void finish(struct fanout *f, struct host *h, enum fanout_outcome o)
{
	if (h->result->outcome == FANOUT_PENDING)
		h->result->outcome = o;
	h->result->end_ms = mono_ms();
	free(h->command);
	h->command = NULL;
	fanout_slot_release(f, h);
	set_state(h, HS_DONE);
	fanout_host_done(f, h);
}

static int resolve(struct host *h)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char port[16];
	int rc;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%u", h->target->port);
	rc = getaddrinfo(h->target->host, port, &hints, &res);
	if (rc == EAI_NONAME) {
		/* A name, not an address: this lookup blocks the loop, so
		 * host files with addresses (as --tpu produces) are faster. */
		hints.ai_flags = AI_NUMERICSERV;
		rc = getaddrinfo(h->target->host, port, &hints, &res);
	}
	if (rc) {
		fail(h, false, "cannot resolve %s: %s", h->target->host,
		     gai_strerror(rc));
		return -1;
	}
	memcpy(&h->addr, res->ai_addr, res->ai_addrlen);
	h->addr_len = res->ai_addrlen;
	h->resolved = true;
	freeaddrinfo(res);
	return 0;
}

static enum step connect_failed(struct host *h, int err)
{
	bool again = err == ECONNREFUSED || err == ECONNRESET ||
		     err == ETIMEDOUT || err == EAGAIN || err == ENETUNREACH ||
		     err == EHOSTUNREACH || err == EADDRNOTAVAIL;

	return fail(h, again, "connect to %s port %u: %s", h->target->host,
		    h->target->port, strerror(err));
}

static enum step st_connect(struct fanout *f, struct host *h)
{
	int one = 1, soerr = 0;
	socklen_t len = sizeof(soerr);

	(void)f;
	if (h->fd < 0) {
		if (!h->resolved && resolve(h))
			return STEP_ERROR;
		h->result->attempts++;
		h->attempt_ms = mono_ms();
		h->overload = false;
		h->fd = socket(h->addr.ss_family,
			       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (h->fd < 0)
			return fail(h, errno == EMFILE || errno == ENFILE,
				    "socket: %s", strerror(errno));
		setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(h->fd, (struct sockaddr *)&h->addr, h->addr_len) == 0) {
			set_state(h, HS_HANDSHAKE);
			return STEP_NEXT;
		}
		if (errno != EINPROGRESS)
			return connect_failed(h, errno);
		return STEP_AGAIN;
	}
	if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (soerr == EINPROGRESS || soerr == EALREADY)
		return STEP_AGAIN;
	if (soerr)
		return connect_failed(h, soerr);
	set_state(h, HS_HANDSHAKE);
	return STEP_NEXT;
}

/* libssh2 reads the socket for us, sometimes within a call made for
 * another reason; counting bytes here is the one sure sign of life. */
static ssize_t recv_counted(libssh2_socket_t fd, void *buf, size_t len,
			    int flags, void **abstract)
{
	struct host *h = *abstract;
	ssize_t n = recv(fd, buf, len, flags);

	if (n > 0)
		h->last_rx_ms = mono_ms();
	else if (n < 0)
		n = -errno;
	return n;
}

static enum step st_handshake(struct fanout *f, struct host *h)
{
	int rc;

	if (!h->session) {
		h->session = libssh2_session_init_ex(NULL, NULL, NULL, h);
		if (!h->session)
			return fail(h, false, "out of memory for an SSH session");
		libssh2_session_set_blocking(h->session, 0);
		libssh2_session_callback_set(h->session, LIBSSH2_CALLBACK_RECV,
					     (void *)recv_counted);
		libssh2_session_method_pref(h->session, LIBSSH2_METHOD_HOSTKEY,
			knownhosts_methods(fanout_knownhosts(f),
					   h->target->host, h->target->port));
		/* AES-CTR runs on AES-NI; the MAC is the cheap part. */
		libssh2_session_method_pref(h->session, LIBSSH2_METHOD_CRYPT_CS,
					    "aes128-ctr,aes256-ctr,aes192-ctr");
		libssh2_session_method_pref(h->session, LIBSSH2_METHOD_CRYPT_SC,
					    "aes128-ctr,aes256-ctr,aes192-ctr");
	}
	rc = libssh2_session_handshake(h->session, h->fd);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	if (rc) {
		/* sshd's MaxStartups drops connections it has no room for. */
		h->overload = socket_error(rc);
		return fail(h, h->overload, "SSH handshake with %s: %s",
			    h->target->label, ssh_error_text(h));
	}
	set_state(h, HS_HOSTKEY);
	return STEP_NEXT;
}

static enum step st_hostkey(struct fanout *f, struct host *h)
{
	struct err e;
	size_t len = 0;
	int type = 0;
	const char *key = libssh2_session_hostkey(h->session, &len, &type);

	if (!key)
		return fail(h, false, "%s sent no host key", h->target->label);
	err_init(&e);
	if (knownhosts_check(fanout_knownhosts(f), h->target->host,
			     h->target->port, key, len, type, &e))
		return fail(h, false, "%s", e.msg);
	set_state(h, HS_AUTH);
	return STEP_NEXT;
}

static enum step auth_refused(struct fanout *f, struct host *h)
{
	const char *why = "";
	bool rsa = false;
	char keys[160] = "";

	for (size_t i = 0; fanout_key(f, i); i++) {
		struct ssh_key *k = fanout_key(f, i);
		const char *name = k->comment && *k->comment ? k->comment
							     : key_type_name(k->type);

		if (k->type == KEY_RSA)
			rsa = true;
		/* A key the agent dropped fails to sign, not to match. */
		if (k->sign_err.code)
			why = k->sign_err.msg;
		if (strlen(keys) + strlen(name) + 3 < sizeof(keys)) {
			if (i)
				strcat(keys, ", ");
			strcat(keys, name);
		}
	}
	return fail(h, false,
		    "%s@%s refused every key offered (%s): check the user "
		    "(--user) and that the public key is in its "
		    "~/.ssh/authorized_keys%s%s%s",
		    h->target->user, h->target->label, keys,
		    rsa && LIBSSH2_VERSION_NUM < 0x010b00
			    ? "; the RSA key can only be used with SHA-1 "
			      "signatures (ssh-rsa) by libssh2 " LIBSSH2_VERSION
			      ", which OpenSSH 8.8 and later refuse: use an "
			      "ed25519 key (ssh-keygen -t ed25519)"
			    : "",
		    *why ? "; signing failed: " : "", why);
}

static enum step st_auth(struct fanout *f, struct host *h)
{
	struct ssh_key *k = fanout_key(f, h->key_index);
	int rc;

	if (!k)
		return auth_refused(f, h);
	h->sign_abstract = k;
	rc = libssh2_userauth_publickey(h->session, h->target->user, k->pub,
					k->pub_len, key_sign_callback,
					&h->sign_abstract);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	if (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED ||
	    rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) {
		h->key_index++;
		return STEP_NEXT;
	}
	if (rc)
		return fail(h, false, "authentication with %s: %s",
			    h->target->label, ssh_error_text(h));
	fanout_handshake_ok(f, h);
	set_state(h, HS_CHANNEL_OPEN);
	return STEP_NEXT;
}

static enum step st_channel_open(struct fanout *f, struct host *h)
{
	(void)f;
	h->channel = libssh2_channel_open_ex(h->session, "session",
					     sizeof("session") - 1,
					     CHANNEL_WINDOW,
					     LIBSSH2_CHANNEL_PACKET_DEFAULT,
					     NULL, 0);
	if (!h->channel) {
		if (libssh2_session_last_errno(h->session) ==
		    LIBSSH2_ERROR_EAGAIN)
			return STEP_AGAIN;
		return fail(h, false, "opening a session channel on %s: %s",
			    h->target->label, ssh_error_text(h));
	}
	set_state(h, HS_EXEC);
	return STEP_NEXT;
}

static enum step st_exec(struct fanout *f, struct host *h)
{
	const struct fanout_config *c = fanout_config(f);
	uint64_t now;
	int rc;

	if (!h->command) {
		struct buf b;

		buf_init(&b);
		if (command_build(&b, c->command, h->target->env,
				  h->target->nenv, !c->input)) {
			buf_release(&b);
			return fail(h, false, "cannot build the command");
		}
		h->command = buf_detach(&b);
	}
	rc = libssh2_channel_process_startup(h->channel, "exec",
					     sizeof("exec") - 1, h->command,
					     (unsigned)strlen(h->command));
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	if (rc)
		return fail(h, false, "%s refused to run the command: %s",
			    h->target->label, ssh_error_text(h));
	free(h->command);
	h->command = NULL;
	h->started = true;
	fanout_slot_release(f, h);
	now = mono_ms();
	h->deadline_ms = c->command_timeout_ms ? now + c->command_timeout_ms : 0;
	h->last_rx_ms = now;
	h->next_keepalive_ms = c->keepalive_ms ? now + keepalive_ms(c) : 0;
	if (c->keepalive_ms)
		libssh2_keepalive_config(h->session, 1,
					 keepalive_ms(c) / 1000);
	if (h->ending != FANOUT_PENDING) {
		h->signal_name = "TERM";
		set_state(h, HS_SIGNAL);
	} else {
		/* Without input, stdin stays open: it is how a command
		 * is ended (command.c). */
		set_state(h, c->input ? HS_SEND : HS_RUNNING);
	}
	return STEP_NEXT;
}

/* Reads both streams until libssh2 has nothing left: data can sit inside
 * libssh2 where poll will not report it, and an unread stream stalls the
 * channel window. */
static int drain(struct fanout *f, struct host *h)
{
	bool progress;

	do {
		progress = false;
		for (int stream = 0; stream < 2; stream++) {
			for (;;) {
				size_t cap;
				char *buf = fanout_readbuf(f, &cap);
				ssize_t n = libssh2_channel_read_ex(
					h->channel, stream, buf, cap);

				if (n > 0) {
					fanout_output(f, h, stream, buf,
						      (size_t)n);
					progress = true;
					continue;
				}
				if (n == 0 || n == LIBSSH2_ERROR_EAGAIN)
					break;
				return (int)n;
			}
		}
	} while (progress);
	return 0;
}

static enum step lost(struct host *h)
{
	return fail(h, false, "connection to %s lost: %s", h->target->label,
		    ssh_error_text(h));
}

/* After the remote side ended or closed, stop sending and collect the
 * output that is left and the exit status. */
static bool remote_ended(struct host *h)
{
	return libssh2_channel_eof(h->channel) == 1;
}

/* A write waiting for window: libssh2 read what had come meanwhile
 * (output, or the end of the command) and poll will never report it. */
static enum step write_blocked(struct fanout *f, struct host *h)
{
	if (drain(f, h))
		return lost(h);
	if (!remote_ended(h))
		return STEP_AGAIN;
	set_state(h, HS_RUNNING);
	return STEP_NEXT;
}

static enum step st_send(struct fanout *f, struct host *h)
{
	const struct fanout_config *c = fanout_config(f);

	if (drain(f, h))
		return lost(h);
	while (h->sent < c->input_len) {
		/* The command may end without reading all of its input. */
		if (remote_ended(h)) {
			set_state(h, HS_RUNNING);
			return STEP_NEXT;
		}
		size_t n = c->input_len - h->sent;
		ssize_t w;

		if (n > SEND_CHUNK)
			n = SEND_CHUNK;
		w = libssh2_channel_write_ex(h->channel, 0,
					     (const char *)c->input + h->sent, n);
		if (w == LIBSSH2_ERROR_EAGAIN)
			return write_blocked(f, h);
		if (w < 0) {
			if (remote_ended(h) || w == LIBSSH2_ERROR_CHANNEL_CLOSED ||
			    w == LIBSSH2_ERROR_CHANNEL_EOF_SENT) {
				set_state(h, HS_RUNNING);
				return STEP_NEXT;
			}
			return lost(h);
		}
		h->sent += (size_t)w;
		h->result->bytes_in += (uint64_t)w;
	}
	set_state(h, HS_SEND_EOF);
	return STEP_NEXT;
}

static enum step st_send_eof(struct fanout *f, struct host *h)
{
	int rc;

	if (drain(f, h))
		return lost(h);
	rc = libssh2_channel_send_eof(h->channel);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	if (rc && !remote_ended(h) && rc != LIBSSH2_ERROR_CHANNEL_CLOSED)
		return lost(h);
	set_state(h, HS_RUNNING);
	return STEP_NEXT;
}

static enum step st_running(struct fanout *f, struct host *h)
{
	if (drain(f, h))
		return lost(h);
	if (!remote_ended(h))
		return STEP_AGAIN;
	h->deadline_ms = mono_ms() + CLOSE_TIMEOUT_MS;
	set_state(h, HS_CLOSE);
	return STEP_NEXT;
}

static enum step st_signal(struct fanout *f, struct host *h)
{
	char line[16];
	size_t len;
	ssize_t w;

	if (drain(f, h))
		return lost(h);
	/* A command fed with input has no wrapper listening: closing the
	 * channel ends its input, and with it the command. */
	if (fanout_config(f)->input) {
		h->signalled = true;
		h->deadline_ms = mono_ms() + CLOSE_TIMEOUT_MS;
		set_state(h, HS_CLOSE);
		return STEP_NEXT;
	}
	len = (size_t)snprintf(line, sizeof(line), "%s\n", h->signal_name);
	w = libssh2_channel_write_ex(h->channel, 0, line, len);
	if (w == LIBSSH2_ERROR_EAGAIN)
		return write_blocked(f, h);
	h->signalled = true;
	if (w < 0) {
		if (!remote_ended(h))
			log_warn("%s: cannot tell the command to stop (%s); "
				 "closing the channel instead",
				 h->target->label, ssh_error_text(h));
		h->deadline_ms = mono_ms() + CLOSE_TIMEOUT_MS;
		set_state(h, HS_CLOSE);
		return STEP_NEXT;
	}
	h->deadline_ms = mono_ms() + (strcmp(h->signal_name, "KILL")
					      ? SIGNAL_GRACE_MS
					      : KILL_GRACE_MS);
	set_state(h, HS_RUNNING);
	return STEP_NEXT;
}

static enum step st_close(struct fanout *f, struct host *h)
{
	int rc;

	if (drain(f, h))
		return lost(h);
	rc = libssh2_channel_close(h->channel);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	set_state(h, remote_ended(h) ? HS_WAIT_CLOSED : HS_CHANNEL_FREE);
	return STEP_NEXT;
}

static enum step st_wait_closed(struct fanout *f, struct host *h)
{
	int rc;

	if (drain(f, h))
		return lost(h);
	rc = libssh2_channel_wait_closed(h->channel);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	set_state(h, HS_CHANNEL_FREE);
	return STEP_NEXT;
}

static void collect_exit(struct host *h)
{
	struct fanout_result *r = h->result;
	char *sig = NULL;
	size_t len = 0;

	libssh2_channel_get_exit_signal(h->channel, &sig, &len, NULL, NULL,
					NULL, NULL);
	if (sig) {
		snprintf(r->signal, sizeof(r->signal), "%.*s", (int)len, sig);
		libssh2_free(h->session, sig);
		if (h->ending == FANOUT_PENDING) {
			r->outcome = FANOUT_SIGNALED;
			snprintf(r->error, sizeof(r->error),
				 "killed by signal %s", r->signal);
		}
		return;
	}
	r->exit_status = libssh2_channel_get_exit_status(h->channel);
	if (h->ending == FANOUT_PENDING)
		r->outcome = FANOUT_EXITED;
}

static enum step st_channel_free(struct fanout *f, struct host *h)
{
	int rc;

	(void)f;
	if (h->result->outcome == FANOUT_PENDING && !h->result->signal[0])
		collect_exit(h);
	rc = libssh2_channel_free(h->channel);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	h->channel = NULL;
	set_state(h, HS_DISCONNECT);
	return STEP_NEXT;
}

static enum step st_disconnect(struct fanout *f, struct host *h)
{
	int rc;

	(void)f;
	rc = libssh2_session_disconnect_ex(h->session,
					   SSH_DISCONNECT_BY_APPLICATION,
					   "done", "");
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	set_state(h, HS_SESSION_FREE);
	return STEP_NEXT;
}

static enum step st_session_free(struct fanout *f, struct host *h)
{
	if (libssh2_session_free(h->session) == LIBSSH2_ERROR_EAGAIN)
		return STEP_AGAIN;
	h->session = NULL;
	drop_connection(f, h);
	finish(f, h, h->ending != FANOUT_PENDING ? h->ending : FANOUT_LOST);
	return STEP_NEXT;
}

static state_fn *const handlers[HS_LAST] = {
	[HS_CONNECT] = st_connect,
	[HS_HANDSHAKE] = st_handshake,
	[HS_HOSTKEY] = st_hostkey,
	[HS_AUTH] = st_auth,
	[HS_CHANNEL_OPEN] = st_channel_open,
	[HS_EXEC] = st_exec,
	[HS_SEND] = st_send,
	[HS_SEND_EOF] = st_send_eof,
	[HS_RUNNING] = st_running,
	[HS_SIGNAL] = st_signal,
	[HS_CLOSE] = st_close,
	[HS_WAIT_CLOSED] = st_wait_closed,
	[HS_CHANNEL_FREE] = st_channel_free,
	[HS_DISCONNECT] = st_disconnect,
	[HS_SESSION_FREE] = st_session_free,
};

static void on_error(struct fanout *f, struct host *h)
{
	const struct fanout_config *c = fanout_config(f);

	if (h->overload && !h->started)
		fanout_overloaded(f, h, h->result->error);
	drop_connection(f, h);
	if (h->started) {
		finish(f, h, h->ending != FANOUT_PENDING ? h->ending
							 : FANOUT_LOST);
		return;
	}
	if (h->retryable && h->ending == FANOUT_PENDING &&
	    h->result->attempts <= c->retries) {
		unsigned wait = backoff_next_ms(&h->backoff);

		log_debug("%s: %s; retrying in %u ms", h->target->label,
			  h->result->error, wait);
		fanout_slot_release(f, h);
		h->retry_at_ms = mono_ms() + wait;
		h->key_index = 0;
		set_state(h, HS_RETRY_WAIT);
		return;
	}
	finish(f, h, h->ending != FANOUT_PENDING ? h->ending
						 : FANOUT_UNREACHABLE);
}

static int wanted_mask(struct host *h)
{
	int mask = 0;

	if (h->state == HS_CONNECT)
		return LOOP_WRITE;
	if (h->session) {
		int dir = libssh2_session_block_directions(h->session);

		if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
			mask |= LOOP_READ;
		if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
			mask |= LOOP_WRITE;
	}
	/* A running command can speak at any time. */
	if (h->started || !mask)
		mask |= LOOP_READ;
	return mask;
}

void host_drive(struct fanout *f, struct host *h)
{
	for (;;) {
		state_fn *fn = h->state < HS_LAST ? handlers[h->state] : NULL;
		enum step r;

		if (!fn)
			return;
		r = fn(f, h);
		if (r == STEP_AGAIN) {
			if (fanout_arm(f, h, wanted_mask(h))) {
				fail(h, false, "cannot watch the socket");
				on_error(f, h);
			}
			return;
		}
		if (r == STEP_ERROR)
			on_error(f, h);
	}
}

void host_end(struct fanout *f, struct host *h, enum fanout_outcome why,
	      bool hard)
{
	if (h->state == HS_DONE)
		return;
	if (h->ending == FANOUT_PENDING)
		h->ending = why;
	if (!h->result->error[0])
		snprintf(h->result->error, sizeof(h->result->error), "%s",
			 why == FANOUT_TIMEOUT ? "command timed out"
			 : why == FANOUT_LOST  ? "connection lost"
					       : "cancelled");
	if (hard || h->state < HS_CHANNEL_OPEN ||
	    h->state == HS_CHANNEL_OPEN) {
		drop_connection(f, h);
		finish(f, h, h->ending);
		return;
	}
	switch (h->state) {
	case HS_SEND:
	case HS_SEND_EOF:
	case HS_RUNNING:
		if (!h->signalled) {
			h->signal_name = "TERM";
			set_state(h, HS_SIGNAL);
			host_drive(f, h);
		}
		break;
	default:
		/* EXEC signals once it completes; later states are already
		 * on their way out. */
		break;
	}
}

void host_tick(struct fanout *f, struct host *h, uint64_t now)
{
	const struct fanout_config *c = fanout_config(f);

	if (h->state <= HS_RETRY_WAIT || h->state == HS_DONE)
		return;
	if (h->deadline_ms && now >= h->deadline_ms) {
		h->deadline_ms = 0;
		if (!h->started) {
			/* A server that took the connection but not the
			 * handshake is busy, most likely overloaded, and
			 * before login nothing runs remotely: another attempt
			 * is as safe as after a refusal. One that never
			 * answered TCP is most likely down: trying again
			 * would cost another timeout, and would slow the
			 * others for nothing. */
			h->overload = h->state >= HS_HANDSHAKE &&
				      h->state <= HS_AUTH;
			fail(h, h->overload,
			     "%s: connection timed out after %.1f s (in %s)",
			     h->target->label, c->connect_timeout_ms / 1000.0,
			     host_state_name(h->state));
			on_error(f, h);
		} else if (h->state >= HS_CLOSE) {
			/* The command ended but the close stalled: keep the
			 * exit status if it came, and let the rest go. */
			if (h->channel && h->ending == FANOUT_PENDING &&
			    h->result->outcome == FANOUT_PENDING)
				collect_exit(h);
			host_end(f, h, FANOUT_LOST, true);
		} else if (h->ending == FANOUT_PENDING) {
			snprintf(h->result->error, sizeof(h->result->error),
				 "command timed out after %.1f s",
				 c->command_timeout_ms / 1000.0);
			host_end(f, h, FANOUT_TIMEOUT, false);
		} else if (h->signalled && strcmp(h->signal_name, "KILL")) {
			h->signal_name = "KILL";
			set_state(h, HS_SIGNAL);
			host_drive(f, h);
		} else {
			host_end(f, h, h->ending, true);
		}
		return;
	}
	if (!h->started || !c->keepalive_ms || !h->session)
		return;
	if (now - h->last_rx_ms >
	    (uint64_t)keepalive_ms(c) * (c->keepalive_count_max + 1)) {
		fail(h, false, "connection to %s lost: no answer for %.0f s",
		     h->target->label, (double)(now - h->last_rx_ms) / 1000.0);
		on_error(f, h);
		return;
	}
	if (now >= h->next_keepalive_ms) {
		int next = 0;

		libssh2_keepalive_send(h->session, &next);
		h->next_keepalive_ms = now + keepalive_ms(c);
		/* The keepalive may have queued data behind EAGAIN. */
		host_drive(f, h);
	}
}
