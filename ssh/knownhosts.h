/*
 * knownhosts.h (private to ssh/): host key verification against an OpenSSH
 * known_hosts file (plain and hashed "|1|" entries, "[host]:port" for ports
 * other than 22), with OpenSSH's meaning of StrictHostKeyChecking. The file
 * is read once per fan-out; new keys are appended as they are accepted.
 */
#ifndef SLICECTL_SSH_KNOWNHOSTS_H
#define SLICECTL_SSH_KNOWNHOSTS_H

#include "common/common.h"
#include "ssh/fanout.h"

#include <stdbool.h>
#include <stddef.h>

struct knownhosts_entry;

struct knownhosts {
	char *path;
	enum fanout_hostkey_policy policy;
	struct knownhosts_entry *entries; /* usable lines, in file order */
	size_t n;
	size_t cap;
	void *scratch;        /* EVP_MD_CTX * for hashed names, made lazily */
	unsigned supported;   /* host key methods this libssh2 offers (bits) */
	bool append_failed;   /* warned once that the file cannot be written */
	char methods[192];    /* knownhosts_methods' answer */
};

/*
 * Reads path, or ~/.ssh/known_hosts when path is NULL or empty. A missing
 * file counts as empty; it and its directory are created (0600, 0700) when
 * a key is first added. Malformed lines are skipped with a warning naming
 * path:line. Fails with SSH_EHOSTKEY when the file exists but cannot be
 * read, or SSH_ENOMEM / SSH_EIO. k is safe to close after a failed open.
 */
int knownhosts_open(struct knownhosts *k, const char *path,
		    enum fanout_hostkey_policy policy, struct err *e);
void knownhosts_close(struct knownhosts *k);

/*
 * Checks the key a host presented (raw blob and LIBSSH2_HOSTKEY_TYPE_* as
 * libssh2_session_hostkey returns them). Returns 0 when the key is known, or
 * unknown and accepted by the policy (then appended to the file); otherwise
 * SSH_EHOSTKEY with a message naming the host, the key's SHA256 fingerprint,
 * the file, and what to do. A changed or @revoked key is refused under every
 * policy. When an accepted key cannot be written to the file it is still
 * accepted (as OpenSSH does), with one warning per knownhosts_open.
 */
int knownhosts_check(struct knownhosts *k, const char *host, unsigned port,
		     const char *key, size_t key_len, int key_type,
		     struct err *e);

/* The libssh2 host key method preference for this host: the types it has
 * in the file first, so a host known by its ecdsa key is not met with an
 * ed25519 key we cannot verify. Falls back to a default order. The string
 * lives in k until the next call. */
const char *knownhosts_methods(struct knownhosts *k, const char *host,
			       unsigned port);

/* The name a host is recorded under: lowercased, "[host]:port" when the
 * port is not 22 (0 means 22). SSH_EINVAL for names the file cannot hold. */
/* "[" + the longest host name getnameinfo returns (1025) + "]:65535" */
#define KNOWNHOSTS_NAME_CAP 1040
int knownhosts_name(const char *host, unsigned port, char *out, size_t cap,
		    struct err *e);

/* For knownhosts_update.c: entry i's file line, whether its names are
 * hashed, and whether name (as knownhosts_name gives it) is one of them
 * (1, 0, or -1 when OpenSSL failed). */
unsigned knownhosts_entry_line(const struct knownhosts *k, size_t i);
bool knownhosts_entry_hashed(const struct knownhosts *k, size_t i);
int knownhosts_entry_is(const struct knownhosts *k, size_t i,
			const char *name);

#endif
