/*
 * key.h (private to ssh/): user keys, parsed once and used to sign every
 * host's authentication through libssh2's sign callback, so a fan-out to a
 * thousand hosts parses its key once instead of a thousand times.
 *
 * Keys come from a private key file (OpenSSH "openssh-key-v1" format or PEM:
 * ed25519, ecdsa nistp256/384/521, rsa) or from ssh-agent (agent.h).
 *
 * Errors are enum ssh_error codes (ssh/fanout.h): SSH_EKEY for a key that
 * cannot be loaded or used, SSH_EAGENT for the agent, SSH_ENOMEM, SSH_EINVAL.
 */
#ifndef SLICECTL_SSH_KEY_H
#define SLICECTL_SSH_KEY_H

#include "common/common.h"
#include "ssh/fanout.h"

#include <libssh2.h>
#include <stddef.h>
#include <stdint.h>

struct agent;

enum key_type {
	KEY_ED25519,
	KEY_ECDSA_P256,
	KEY_ECDSA_P384,
	KEY_ECDSA_P521,
	KEY_RSA,
};

struct ssh_key {
	enum key_type type;
	unsigned char *pub;   /* public key blob in SSH wire format */
	size_t pub_len;
	char *comment;        /* may be NULL */
	void *pkey;           /* EVP_PKEY *, NULL when the agent holds it */
	struct agent *agent;  /* signs through the agent when set */
	struct err sign_err;  /* why key_sign_callback last failed, if it did */
};

/* Loads an unencrypted private key. An encrypted one is refused with a
 * message telling the user to load it into ssh-agent. On failure k is left
 * released (all zero), so the same struct can be tried with another file.
 * The key is checked by a test signature before it is accepted. */
int key_load_file(struct ssh_key *k, const char *path, struct err *e);
void key_release(struct ssh_key *k);

/* A key known only by its public blob (as ssh-agent lists it); pkey and
 * agent stay NULL for the caller to fill. SSH_EKEY when the blob is
 * malformed or of a type key.h does not know (k is then left zero). */
int key_from_blob(struct ssh_key *k, const unsigned char *blob, size_t len,
		  struct err *e);

/* The name of the key type as OpenSSH prints it ("ssh-ed25519", ...). */
const char *key_type_name(enum key_type t);

/* "SHA256:..." as ssh-keygen -l prints it, for messages naming a key. */
#define KEY_FINGERPRINT_SIZE 64
void key_fingerprint(const unsigned char *pub, size_t pub_len,
		     char out[KEY_FINGERPRINT_SIZE]);

/*
 * Signs the data libssh2 hands to a sign callback (the userauth request).
 * The signature algorithm is read from that data (so an RSA key signs with
 * SHA-256 or SHA-512 when libssh2 asks for rsa-sha2-*, SHA-1 for ssh-rsa).
 * Data that is not a userauth request is signed with the key's own
 * algorithm (the first string of its blob).
 * *sig gets the raw signature blob without the leading algorithm string
 * (libssh2 adds it), allocated with malloc.
 */
int key_sign(const struct ssh_key *k, const unsigned char *data, size_t len,
	     unsigned char **sig, size_t *sig_len, struct err *e);

/* libssh2's sign callback; *abstract must point to a struct ssh_key *.
 * Returns 0, or -1 with the reason in that key's sign_err. */
int key_sign_callback(LIBSSH2_SESSION *session, unsigned char **sig,
		      size_t *sig_len, const unsigned char *data,
		      size_t data_len, void **abstract);

/*
 * SSH wire encoding (RFC 4251), shared with agent.c. Reads check bounds and
 * return -1 on short data without moving the reader; writes return 0 or
 * SSH_ENOMEM.
 */
struct key_reader {
	const unsigned char *p;
	size_t left;
};

int key_get_u8(struct key_reader *r, uint8_t *v);
int key_get_u32(struct key_reader *r, uint32_t *v);
int key_get_string(struct key_reader *r, const unsigned char **s,
		   size_t *len);
int key_put_u8(struct buf *b, uint8_t v);
int key_put_u32(struct buf *b, uint32_t v);
int key_put_string(struct buf *b, const void *s, size_t len);

#endif
