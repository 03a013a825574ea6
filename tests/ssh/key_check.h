/*
 * tests/ssh/key_check.h: what the key and agent tests share: a short
 * temporary directory, programs run with an agent's socket, keys made by
 * ssh-keygen, files and public blobs, and signatures checked with OpenSSL
 * on the tests' own reading of the SSH wire format (not key.c's). Each
 * fails the current Criterion test.
 */
#ifndef SLICECTL_TESTS_KEY_CHECK_H
#define SLICECTL_TESTS_KEY_CHECK_H

#include "ssh/key.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

/* snprintf into an array, failing the test rather than truncating. */
#define FMT(arr, ...) \
	cr_assert((size_t)snprintf(arr, sizeof(arr), __VA_ARGS__) < \
		  sizeof(arr), "path too long")

/* A new directory in memory where it can be, with a path short enough
 * for an agent's socket; 0 or -1. */
int tk_tmpdir(char *out, size_t len);
/* Runs argv with SSH_AUTH_SOCK=sock when sock is set and stdout into
 * out_path (or /dev/null), stderr into /dev/null (ssh-add and openssl
 * report progress there); returns its exit status, or -1. */
int tk_run(const char *const argv[], const char *sock, const char *out_path);
/* ssh-keygen -t type [-b bits] [-m format] -N pass -C tk-name -f dir/name;
 * the path goes into out. */
void tk_keygen(char *out, size_t len, const char *dir, const char *name,
	       const char *type, const char *bits, const char *format,
	       const char *pass);
/* A whole file (to free), NUL-terminated. */
char *tk_read(const char *path, size_t *len);
void tk_write(const char *path, const void *data, size_t len);
/* Base64 without line breaks; NULL when it is not valid. */
unsigned char *tk_unbase64(const char *in, size_t in_len, size_t *len);
/* The blob of "TYPE BASE64 COMMENT" in path.pub. */
unsigned char *tk_pub_blob(const char *path, size_t *len);
/* Userauth request data as libssh2 hands it to the sign callback. */
unsigned char *tk_userauth(const char *alg, const unsigned char *pub,
			   size_t pub_len, size_t *len);
/* Does sig (as the sign callback returns it) verify for the key of blob
 * pub over data, hashed with md (NULL for ed25519)? */
bool tk_verify(const unsigned char *pub, size_t pub_len, const EVP_MD *md,
	       const unsigned char *data, size_t len, const unsigned char *sig,
	       size_t sig_len);
/* Signs a fabricated userauth request for alg with k and checks the
 * signature verifies with md and with no other hash. */
void tk_check_sign(const struct ssh_key *k, const char *alg,
		   const EVP_MD *md);

#endif
