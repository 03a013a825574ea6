/*
 * auth.h (private to cloud/): OAuth access tokens for Google APIs, from the
 * first source that is configured: SLICECTL_ACCESS_TOKEN, the key file in
 * GOOGLE_APPLICATION_CREDENTIALS or gcloud's application default
 * credentials (a service account's key, signed into an RS256 JWT, or an
 * authorized user's refresh token), else the GCE metadata server. Tokens
 * are cached until shortly before they expire and never printed.
 */
#ifndef SLICECTL_CLOUD_AUTH_H
#define SLICECTL_CLOUD_AUTH_H

#include "cloud/http.h"

#include <openssl/evp.h>

/* userinfo.email too, so GKE's RBAC sees a service account by its email
 * (as gke-gcloud-auth-plugin asks for it), not its numeric id. */
#define AUTH_SCOPE "https://www.googleapis.com/auth/cloud-platform " \
	"https://www.googleapis.com/auth/userinfo.email"
#define AUTH_TOKEN_URI "https://oauth2.googleapis.com/token"

enum auth_kind {
	AUTH_NONE,            /* an emulator: no Authorization header */
	AUTH_STATIC,          /* SLICECTL_ACCESS_TOKEN */
	AUTH_SERVICE_ACCOUNT,
	AUTH_AUTHORIZED_USER,
	AUTH_METADATA,
};

struct auth {
	enum auth_kind kind;
	char *source;         /* for messages: the file, or the variable */
	char *client_email;
	char *private_key_id;
	char *client_id;
	char *client_secret;
	char *refresh_token;
	char *token_uri;
	char *metadata_host;
	EVP_PKEY *key;
	char *token;
	uint64_t refresh_at_ms; /* mono_ms() after which token is renewed */
};

/* Chooses the source from the environment and loads its key file, if any
 * (CLOUD_EAUTH naming the file and the fault when it is unusable). No
 * request is sent until the first auth_token. */
int auth_init(struct auth *a, struct err *e);
/* No credentials at all (an emulator). */
void auth_init_none(struct auth *a);
void auth_release(struct auth *a);

/* The current token ("" for AUTH_NONE), fetched when none is cached or it
 * expires within a minute. Valid until the next call on a. */
int auth_token(struct auth *a, struct http_client *h, const char **token,
	       struct err *e);
/* Forgets the cached token (after a 401), so the next call fetches one. */
void auth_invalidate(struct auth *a);
/* Whether auth_invalidate can lead to a different token. */
bool auth_renewable(const struct auth *a);

/* Sends req through h with the caller's headers (up to 6) and the
 * Authorization header of a's token; a 401 with a token that can be
 * renewed is tried once more with a fresh one (it may have been revoked or
 * expired early). req->headers is set only during the call. */
int auth_send(struct auth *a, struct http_client *h, struct http_request *req,
	      const char *const *headers, struct http_response *resp,
	      struct err *e);

/* jwt.c */
/* Parses a PEM private key (PKCS#8 or PKCS#1 RSA). */
int jwt_load_key(const char *pem, EVP_PKEY **out, struct err *e);
/* An RS256-signed JWT ("header.claims.signature", base64url) for the
 * service account's token request, issued at now (seconds since the
 * epoch), valid for an hour. *out is malloc'd. */
int jwt_service_account(EVP_PKEY *key, const char *key_id,
			const char *client_email, const char *scope,
			const char *audience, int64_t now, char **out,
			struct err *e);
/* base64url without padding, appended to b. */
int jwt_base64url_append(struct buf *b, const void *data, size_t len);

#endif
