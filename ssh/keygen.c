/*
 * keygen.c: slicectl's own user key. libssh2 1.10 cannot sign with RSA
 * SHA-2, which current sshd requires of RSA keys, so when a user names no
 * key slicectl keeps an ed25519 key of its own and puts its public half
 * into the workers' ssh-keys metadata. The file is written in OpenSSH's
 * format, unencrypted, so that ssh(1) can use it too.
 */
#include "ssh/key.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#define ED25519_LEN 32
#define PEM_LINE 70

static int b64_append(struct buf *b, const unsigned char *data, size_t len,
		      bool wrap)
{
	size_t enc_len = 4 * ((len + 2) / 3);
	char *enc;
	int rc = 0;

	if (len > INT_MAX / 2 || !(enc = malloc(enc_len + 1)))
		return SSH_ENOMEM;
	EVP_EncodeBlock((unsigned char *)enc, data, (int)len);
	for (size_t at = 0; at < enc_len && !rc; at += wrap ? PEM_LINE : enc_len) {
		size_t n = enc_len - at;

		if (wrap && n > PEM_LINE)
			n = PEM_LINE;
		rc = buf_append(b, enc + at, n);
		if (!rc && wrap)
			rc = buf_append(b, "\n", 1);
	}
	free(enc);
	return rc ? SSH_ENOMEM : 0;
}

/* The openssh-key-v1 encoding of an unencrypted ed25519 key. */
static int encode_private(const unsigned char seed[ED25519_LEN],
			  const unsigned char pub[ED25519_LEN],
			  const char *comment, struct buf *pem)
{
	static const char magic[] = "openssh-key-v1";
	static const char type[] = "ssh-ed25519";
	unsigned char both[2 * ED25519_LEN];
	struct buf bin, blob, priv;
	uint32_t check;
	int rc;

	if (RAND_bytes((unsigned char *)&check, sizeof(check)) != 1)
		return SSH_EKEY;
	memcpy(both, seed, ED25519_LEN);
	memcpy(both + ED25519_LEN, pub, ED25519_LEN);
	buf_init(&bin);
	buf_init(&blob);
	buf_init(&priv);
	rc = key_put_string(&blob, type, strlen(type)) ||
	     key_put_string(&blob, pub, ED25519_LEN) ||
	     key_put_u32(&priv, check) || key_put_u32(&priv, check) ||
	     key_put_string(&priv, type, strlen(type)) ||
	     key_put_string(&priv, pub, ED25519_LEN) ||
	     key_put_string(&priv, both, sizeof(both)) ||
	     key_put_string(&priv, comment, strlen(comment));
	/* Padding 1, 2, 3... to the cipher's block size (8 for "none"). */
	for (uint8_t pad = 1; !rc && priv.len % 8; pad++)
		rc = key_put_u8(&priv, pad);
	if (!rc)
		rc = buf_append(&bin, magic, sizeof(magic)) ||
		     key_put_string(&bin, "none", 4) ||
		     key_put_string(&bin, "none", 4) ||
		     key_put_string(&bin, "", 0) || key_put_u32(&bin, 1) ||
		     key_put_string(&bin, blob.data, blob.len) ||
		     key_put_string(&bin, priv.data, priv.len);
	if (!rc)
		rc = buf_appends(pem, "-----BEGIN OPENSSH PRIVATE KEY-----\n") ||
		     b64_append(pem, (unsigned char *)bin.data, bin.len, true) ||
		     buf_appends(pem, "-----END OPENSSH PRIVATE KEY-----\n");
	OPENSSL_cleanse(both, sizeof(both));
	if (priv.data)
		OPENSSL_cleanse(priv.data, priv.len);
	if (bin.data)
		OPENSSL_cleanse(bin.data, bin.len);
	buf_release(&bin);
	buf_release(&blob);
	buf_release(&priv);
	return rc ? SSH_ENOMEM : 0;
}

/* A failure common's file helpers described, as a key error (out of memory
 * stays that). */
static int key_error(struct err *e)
{
	if (e->code != SSH_ENOMEM)
		e->code = SSH_EKEY;
	return e->code;
}

/* Creates path whole with mode, or returns 1 if it exists (two slicectl
 * runs racing to make the key: one wins, the other uses its key). */
static int write_exclusive(const char *path, const struct buf *data,
			   mode_t mode, struct err *e)
{
	int rc = fs_write_atomic(path, data->data, data->len, mode, false, e);

	if (rc == EEXIST)
		return 1;
	return rc ? key_error(e) : 0;
}

static int generate(const char *path, const char *comment, struct err *e)
{
	unsigned char seed[ED25519_LEN], pub[ED25519_LEN];
	size_t seed_len = sizeof(seed), pub_len = sizeof(pub);
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	struct buf pem, line, pub_path;
	int rc = 0;

	if (!pkey ||
	    EVP_PKEY_get_raw_private_key(pkey, seed, &seed_len) != 1 ||
	    EVP_PKEY_get_raw_public_key(pkey, pub, &pub_len) != 1) {
		EVP_PKEY_free(pkey);
		return err_set(e, SSH_EKEY,
			       "OpenSSL could not generate an ed25519 key");
	}
	EVP_PKEY_free(pkey);
	buf_init(&pem);
	buf_init(&line);
	buf_init(&pub_path);
	rc = encode_private(seed, pub, comment, &pem);
	OPENSSL_cleanse(seed, sizeof(seed));
	if (rc)
		rc = err_set(e, rc, "cannot encode the new key");
	if (!rc && (buf_appendf(&pub_path, "%s.pub", path) ||
		    buf_appends(&line, "ssh-ed25519 ")))
		rc = err_set(e, SSH_ENOMEM, "out of memory");
	if (!rc) {
		struct buf blob;

		buf_init(&blob);
		if (key_put_string(&blob, "ssh-ed25519", 11) ||
		    key_put_string(&blob, pub, sizeof(pub)) ||
		    b64_append(&line, (unsigned char *)blob.data, blob.len,
			       false) ||
		    buf_appendf(&line, " %s\n", comment))
			rc = err_set(e, SSH_ENOMEM, "out of memory");
		buf_release(&blob);
	}
	if (!rc && fs_mkdir_parents(path, 0700, e))
		rc = key_error(e);
	if (!rc)
		rc = write_exclusive(path, &pem, 0600, e);
	if (rc == 0) {
		if (!fs_write_atomic(pub_path.data, line.data, line.len, 0644,
				     true, e))
			log_info("created ssh key %s", path);
		else
			log_warn("%s; the key in %s is still usable", e->msg,
				 path);
	}
	if (pem.data)
		OPENSSL_cleanse(pem.data, pem.len);
	buf_release(&pem);
	buf_release(&line);
	buf_release(&pub_path);
	return rc == 1 ? 0 : rc;
}

int fanout_key_ensure(const char *path, const char *comment, char **pub,
		      struct err *e)
{
	struct ssh_key k = { 0 };
	struct buf line;
	int rc;

	*pub = NULL;
	if (access(path, F_OK) && errno == ENOENT &&
	    (rc = generate(path, comment ? comment : "slicectl", e)))
		return rc;
	rc = key_load_file(&k, path, e);
	if (rc)
		return rc;
	buf_init(&line);
	if (buf_appendf(&line, "%s ", key_type_name(k.type)) ||
	    b64_append(&line, k.pub, k.pub_len, false) ||
	    buf_appendf(&line, " %s", k.comment && *k.comment ? k.comment
				  : comment ? comment : "slicectl"))
		rc = err_set(e, SSH_ENOMEM, "out of memory");
	else
		*pub = buf_detach(&line);
	buf_release(&line);
	key_release(&k);
	return rc;
}
