/*
 * host.h (private to ssh/): one host's connection as a state machine, in the
 * manner of curl's libssh2 backend: one enum of states, one small function
 * per state returning "again", "next" or "error", one driver loop, and every
 * state change through one setter that can log it by name.
 */
#ifndef SLICECTL_SSH_HOST_H
#define SLICECTL_SSH_HOST_H

#include "common/common.h"
#include "ssh/fanout.h"

#include <libssh2.h>
#include <stdbool.h>
#include <sys/socket.h>

struct fanout;
struct ssh_key;

enum host_state {
	HS_STOP,         /* not started yet */
	HS_QUEUED,       /* waiting for a handshake slot */
	HS_RETRY_WAIT,   /* backing off before the next connection attempt */
	HS_CONNECT,      /* non-blocking TCP connect */
	HS_HANDSHAKE,    /* banner and key exchange */
	HS_HOSTKEY,      /* the host key against known_hosts */
	HS_AUTH,         /* public key authentication, key after key */
	HS_CHANNEL_OPEN,
	HS_EXEC,
	HS_SEND,         /* the command's stdin */
	HS_SEND_EOF,
	HS_RUNNING,      /* output until the remote end's EOF */
	HS_SIGNAL,       /* telling the wrapper to signal the command's group */
	HS_CLOSE,
	HS_WAIT_CLOSED,  /* the exit status arrives before the remote close */
	HS_CHANNEL_FREE,
	HS_DISCONNECT,
	HS_SESSION_FREE,
	HS_DONE,
	HS_LAST
};

enum step { STEP_AGAIN, STEP_NEXT, STEP_ERROR };

struct host {
	size_t index;
	struct fanout *fanout;
	const struct fanout_target *target;
	struct fanout_result *result;
	enum host_state state;
	int fd;
	int watched;            /* the loop mask last armed for fd */
	LIBSSH2_SESSION *session;
	LIBSSH2_CHANNEL *channel;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	bool resolved;
	bool in_slot;           /* counts against connect_concurrency */
	bool started;           /* the remote command was started */
	bool signalled;
	bool retryable;         /* the last failure may go away */
	bool overload;          /* ...and looks like servers overloaded */
	enum fanout_outcome ending; /* timeout or cancel decided locally */
	const char *signal_name;    /* for HS_SIGNAL */
	size_t key_index;
	void *sign_abstract;    /* the struct ssh_key * libssh2 passes back */
	char *command;          /* exports and command, freed after exec */
	size_t sent;
	uint64_t deadline_ms;   /* of the current phase; 0: none */
	uint64_t attempt_ms;    /* when this connection attempt began */
	uint64_t retry_at_ms;
	uint64_t last_rx_ms;
	uint64_t next_keepalive_ms;
	struct backoff backoff;
};

/* Runs the state machine until it must wait; arms the loop for what it
 * waits on. Called on events, on timers and when a slot frees up. */
void host_drive(struct fanout *f, struct host *h);

/* Ends a host from outside the machine: for a timeout or a cancel, the
 * remote command is signalled first; for an abort the connection is
 * dropped on the spot. */
void host_end(struct fanout *f, struct host *h, enum fanout_outcome why,
	      bool hard);

/* Sends keepalives and applies deadlines; called by the sweep timer. */
void host_tick(struct fanout *f, struct host *h, uint64_t now);

const char *host_state_name(enum host_state s);

/* command.c: exports and the command for one host; when endable, wrapped
 * so that a signal name written to its stdin ends it (see command.c). */
int command_build(struct buf *out, const char *command, char *const *env,
		  size_t nenv, bool endable);

/* fanout.c services the hosts use. */
void fanout_slot_release(struct fanout *f, struct host *h);
/* Handshake pacing (fanout.c): h logged in, or h's attempt failed in a way
 * that says the servers are overloaded (dropped or timed out). */
void fanout_handshake_ok(struct fanout *f, struct host *h);
void fanout_overloaded(struct fanout *f, struct host *h, const char *why);
void fanout_host_done(struct fanout *f, struct host *h);
void fanout_output(struct fanout *f, struct host *h, int stream,
		   const char *data, size_t len);
int fanout_arm(struct fanout *f, struct host *h, int mask);
const struct fanout_config *fanout_config(struct fanout *f);
struct knownhosts *fanout_knownhosts(struct fanout *f);
struct ssh_key *fanout_key(struct fanout *f, size_t i);
char *fanout_readbuf(struct fanout *f, size_t *len);

#endif
