/*
 * ssh/fanout.h: run one command on many hosts at once over SSH, in one thread
 * and one poll loop, every host its own non-blocking libssh2 state machine.
 *
 * Only handshakes in flight are bounded (connect_concurrency): once a host's
 * command runs it never waits for another host, so a command that blocks
 * until every host has started (a barrier) finishes at any host count.
 * Within that bound, handshakes are paced like TCP segments: fewer while
 * servers drop, time out or slow down handshakes, more again as logins
 * succeed; a handshake dropped or timed out before a channel is opened is
 * retried within `retries`, so overload costs time, not hosts.
 */
#ifndef SLICECTL_SSH_FANOUT_H
#define SLICECTL_SSH_FANOUT_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ssh_error {
	SSH_OK = 0,
	SSH_ENOMEM = COMMON_ENOMEM,
	SSH_EINVAL = COMMON_EINVAL,
	SSH_EIO = COMMON_EIO,
	SSH_EKEY = 10,   /* a private key could not be loaded or used */
	SSH_EAGENT,      /* ssh-agent could not be reached or refused */
	SSH_EHOSTKEY,    /* a host key is unknown or changed, or known_hosts bad */
	SSH_ELIMIT,      /* a process limit (open files) is too low */
	SSH_ESYS,        /* the event loop itself failed */
	SSH_EINTR,       /* cancel_fd fired before any host was contacted */
};

enum fanout_stream { FANOUT_STDOUT = 0, FANOUT_STDERR = 1 };

enum fanout_hostkey_policy {
	FANOUT_HOSTKEY_YES,        /* unknown and changed keys refused */
	FANOUT_HOSTKEY_ACCEPT_NEW, /* unknown keys added; changed refused */
	FANOUT_HOSTKEY_NO,         /* as accept-new: a changed key is never
				      accepted, whatever the policy */
};

enum fanout_outcome {
	FANOUT_PENDING = 0, /* never finished (only seen after a hard abort) */
	FANOUT_EXITED,      /* exit_status is valid */
	FANOUT_SIGNALED,    /* the remote command died of signal `signal` */
	FANOUT_TIMEOUT,     /* --timeout elapsed; the remote command was ended */
	FANOUT_CANCELLED,   /* fail-fast or an interrupt ended it */
	FANOUT_UNREACHABLE, /* connect, handshake, host key or auth failed */
	FANOUT_LOST,        /* the connection died after the command started */
};

struct fanout_target {
	const char *user;
	const char *host;  /* name or address, as the user gave it */
	unsigned port;
	const char *label; /* how output names this host */
	char **env;        /* "NAME=value", exported before the command */
	size_t nenv;
};

struct fanout_result {
	enum fanout_outcome outcome;
	int exit_status;
	char signal[16];   /* "TERM", without "SIG" */
	char error[1024];  /* why, for every outcome but EXITED */
	uint64_t start_ms; /* first connect attempt, monotonic */
	uint64_t end_ms;
	uint64_t bytes_out;
	uint64_t bytes_err;
	uint64_t bytes_in; /* sent to the command's stdin */
	unsigned attempts; /* connection attempts */
};

struct fanout_callbacks {
	void *ud;
	/* Raw data as it arrives; line assembly is the caller's business. */
	void (*output)(void *ud, size_t host, enum fanout_stream stream,
		       const char *data, size_t len);
	void (*done)(void *ud, size_t host, const struct fanout_result *r);
	/* Called every loop iteration that had events, to flush buffers. */
	void (*flush)(void *ud);
};

struct fanout_config {
	const char *command;    /* the remote command, as the shell reads it */
	/* stdin of every host. NULL: the command gets /dev/null, and stdin
	 * carries the signal that ends it on a timeout, fail-fast or interrupt
	 * (see command.c); with input, ending a command closes its channel. */
	const unsigned char *input;
	size_t input_len;
	const char *identity;   /* private key file; NULL: agent, then defaults */
	const char *known_hosts;
	enum fanout_hostkey_policy policy;
	unsigned connect_concurrency; /* handshakes in flight, at most */
	unsigned connect_timeout_ms;  /* TCP connect through authentication */
	unsigned command_timeout_ms;  /* 0: none */
	unsigned keepalive_ms;        /* 0: none */
	unsigned keepalive_count_max; /* unanswered keepalives before lost */
	unsigned retries;             /* extra connection attempts */
	bool fail_fast;
	int cancel_fd; /* readable: end every command; twice: abort. -1: none */
};

void fanout_config_init(struct fanout_config *c);

/*
 * Runs cfg->command on every target and fills results[i] for targets[i].
 * Returns SSH_OK when every host got an outcome (whatever it was), or an
 * error when the fan-out could not run at all (bad key, known_hosts
 * unreadable, open-file limit, out of memory).
 */
int fanout_run(const struct fanout_config *cfg,
	       const struct fanout_target *targets, size_t n,
	       struct fanout_result *results, const struct fanout_callbacks *cb,
	       struct err *e);

const char *fanout_outcome_name(enum fanout_outcome o);

/* Host keys learnt from a trusted source (the TPU API's guest attributes):
 * keys are "TYPE BASE64" lines, as in known_hosts after the names. */
struct fanout_known_host {
	const char *host;
	unsigned port;        /* 0 or 22: recorded as the bare host */
	char *const *keys;
	size_t nkeys;
};

/*
 * Makes path (created with its directories when missing) hold exactly the
 * given keys for each of these hosts: their older entries, plain or
 * hashed, are removed, other lines are kept as they were. The file is
 * replaced atomically (temporary file, fsync, rename) under a lock on
 * path.lock, so concurrent updates never lose each other's hosts.
 */
int fanout_known_hosts_update(const char *path,
			      const struct fanout_known_host *hosts, size_t n,
			      struct err *e);

/*
 * Makes sure a private key exists at path: when missing, an ed25519 key is
 * created (OpenSSH format, 0600, with path.pub; directories 0700). *pub
 * gets the public key as an authorized_keys line "TYPE BASE64 COMMENT"
 * (malloc'd), whatever the key's type.
 */
int fanout_key_ensure(const char *path, const char *comment, char **pub,
		      struct err *e);

#endif
