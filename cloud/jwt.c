/*
 * jwt.c: the signed assertion a service account exchanges for an access
 * token (RFC 7523): an RS256 JWT over {iss, scope, aud, iat, exp}, signed
 * with the key file's PEM private key through libcrypto.
 */
#include "cloud/auth.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/pem.h>

int jwt_base64url_append(struct buf *b, const void *data, size_t len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789-_";
	const unsigned char *p = data;
	size_t i;

	if (buf_reserve(b, (len + 2) / 3 * 4 + 1))
		return CLOUD_ENOMEM;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 |
			     p[i + 2];
		char out[4] = { tab[v >> 18], tab[(v >> 12) & 63],
				tab[(v >> 6) & 63], tab[v & 63] };

		buf_append(b, out, 4);
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		char out[2] = { tab[v >> 18], tab[(v >> 12) & 63] };

		buf_append(b, out, 2);
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		char out[3] = { tab[v >> 18], tab[(v >> 12) & 63],
				tab[(v >> 6) & 63] };

		buf_append(b, out, 3);
	}
	return 0;
}

int jwt_load_key(const char *pem, EVP_PKEY **out, struct err *e)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key;

	*out = NULL;
	if (!bio)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (!key)
		return err_set(e, CLOUD_EAUTH,
			       "private_key is not a PEM private key");
	if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
		EVP_PKEY_free(key);
		return err_set(e, CLOUD_EAUTH,
			       "private_key is not an RSA key (RS256 needs "
			       "one)");
	}
	*out = key;
	return 0;
}

static int sign(EVP_PKEY *key, const char *data, size_t len,
		unsigned char **sig, size_t *sig_len)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL,
					  key) == 1 &&
		 EVP_DigestSign(md, NULL, sig_len, (const unsigned char *)data,
				len) == 1;

	*sig = ok ? malloc(*sig_len) : NULL;
	ok = *sig && EVP_DigestSign(md, *sig, sig_len,
				    (const unsigned char *)data, len) == 1;
	EVP_MD_CTX_free(md);
	if (!ok) {
		free(*sig);
		*sig = NULL;
	}
	return ok ? 0 : -1;
}

int jwt_service_account(EVP_PKEY *key, const char *key_id,
			const char *client_email, const char *scope,
			const char *audience, int64_t now, char **out,
			struct err *e)
{
	struct buf header, claims, jwt;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	int rc = CLOUD_ENOMEM;

	*out = NULL;
	buf_init(&header);
	buf_init(&claims);
	buf_init(&jwt);
	if (buf_appends(&header, "{\"alg\":\"RS256\",\"typ\":\"JWT\"") ||
	    (key_id && *key_id &&
	     (buf_appends(&header, ",\"kid\":") ||
	      json_append_string(&header, key_id, strlen(key_id)))) ||
	    buf_appends(&header, "}"))
		goto out;
	if (buf_appends(&claims, "{\"iss\":") ||
	    json_append_string(&claims, client_email, strlen(client_email)) ||
	    buf_appends(&claims, ",\"scope\":") ||
	    json_append_string(&claims, scope, strlen(scope)) ||
	    buf_appends(&claims, ",\"aud\":") ||
	    json_append_string(&claims, audience, strlen(audience)) ||
	    buf_appendf(&claims, ",\"iat\":%lld,\"exp\":%lld}",
			(long long)now, (long long)now + 3600))
		goto out;
	if (jwt_base64url_append(&jwt, header.data, header.len) ||
	    buf_appends(&jwt, ".") ||
	    jwt_base64url_append(&jwt, claims.data, claims.len))
		goto out;
	if (sign(key, jwt.data, jwt.len, &sig, &sig_len)) {
		rc = err_set(e, CLOUD_EAUTH,
			     "cannot sign the token request with the "
			     "service account's key");
		goto out;
	}
	if (buf_appends(&jwt, ".") ||
	    jwt_base64url_append(&jwt, sig, sig_len))
		goto out;
	*out = buf_detach(&jwt);
	rc = 0;
out:
	if (rc == CLOUD_ENOMEM)
		err_set(e, rc, "out of memory building a JWT");
	free(sig);
	buf_release(&header);
	buf_release(&claims);
	buf_release(&jwt);
	return rc;
}
