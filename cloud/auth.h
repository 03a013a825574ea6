/*
 * auth.h (private to cloud/): OAuth access tokens for Google APIs, from the
 * first source that is configured: SLICECTL_ACCESS_TOKEN, the key file in
 * GOOGLE_APPLICATION_CREDENTIALS or gcloud's application default
 * credentials, else the GCE metadata server. A credentials file holds a
 * service account's key (signed into an RS256 JWT), an authorized user's
 * refresh token, an impersonated service account (a source credential of
 * either kind whose token buys the account's token from the IAM
 * Credentials API's generateAccessToken) or an external account (Workload
 * Identity Federation: a subject token read from a file or a URL,
 * exchanged at the STS endpoint, then optionally impersonation). Tokens
 * are cached until shortly before they expire and never printed.
 *
 * Endpoints come from the file; SLICECTL_TOKEN_URI replaces the OAuth
 * token URI, SLICECTL_STS_ENDPOINT and SLICECTL_IAM_CREDENTIALS_ENDPOINT
 * (a base URL, "http://127.0.0.1:PORT") replace https://sts.googleapis.com
 * and https://iamcredentials.googleapis.com wherever the file names them,
 * and the STS default when the file names none.
 */
#ifndef SLICECTL_CLOUD_AUTH_H
#define SLICECTL_CLOUD_AUTH_H

#include "cloud/cloud.h"

#include <jansson.h>
#include <openssl/evp.h>

/* userinfo.email too, so GKE's RBAC sees a service account by its email
 * (as gke-gcloud-auth-plugin asks for it), not its numeric id. */
#define AUTH_SCOPE_CLOUD "https://www.googleapis.com/auth/cloud-platform"
#define AUTH_SCOPE_EMAIL "https://www.googleapis.com/auth/userinfo.email"
#define AUTH_SCOPE AUTH_SCOPE_CLOUD " " AUTH_SCOPE_EMAIL
#define AUTH_TOKEN_URI "https://oauth2.googleapis.com/token"
#define AUTH_STS_BASE "https://sts.googleapis.com"
#define AUTH_STS_PATH "/v1/token"
#define AUTH_IAM_BASE "https://iamcredentials.googleapis.com"

enum auth_kind {
	AUTH_NONE,            /* an emulator: no Authorization header */
	AUTH_STATIC,          /* SLICECTL_ACCESS_TOKEN */
	AUTH_SERVICE_ACCOUNT,
	AUTH_AUTHORIZED_USER,
	AUTH_METADATA,
	AUTH_IMPERSONATED,    /* impersonated_service_account */
	AUTH_EXTERNAL,        /* external_account */
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
	/* impersonated_service_account: the credential whose token buys
	 * ours; external_account leaves it NULL (its STS token is used). */
	struct auth *inner;
	char *impersonation_url; /* NULL: an external account's STS token is
				  * the token */
	char *delegates;         /* a JSON array of projects/-/serviceAccounts/X */
	/* external_account: */
	char *audience;
	char *subject_token_type;
	char *sts_url;
	char *subject_file;      /* credential_source.file, or .url: */
	char *subject_url;
	struct strlist subject_headers; /* "Name: value" for subject_url */
	char *subject_field;     /* format json: the member; NULL: text */
	char *user_project;      /* workforce_pool_user_project */
	char *token;
	uint64_t refresh_at_ms; /* mono_ms() after which token is renewed */
};

/* Chooses the source from the environment and loads its key file, if any
 * (CLOUD_EAUTH naming the file and the fault when it is unusable). No
 * request is sent until the first auth_token. */
int auth_init(struct auth *a, struct err *e);
/* auth_init, then http_client_init(h, p): the pair every Google API
 * client starts with; on failure neither is left to release. */
int auth_http_init(struct auth *a, struct http_client *h,
		   const struct http_policy *p, struct err *e);
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

/* What auth.c shares with auth_federated.c. */
/* Appends "&name=value" (no "&" when b is empty), value percent-encoded. */
int auth_form_field(struct buf *b, const char *name, const char *value);
/* Takes the token and its lifetime (secs) from an OAuth token answer
 * ({"access_token", "expires_in"}); from names the endpoint for messages. */
int auth_parse_token(struct auth *a, const struct http_response *resp,
		     const char *from, struct err *e);
/* Keeps tok (copied) as a's token for life_s seconds, renewed a minute
 * (at most half its life) before it ends. */
int auth_keep_token(struct auth *a, const char *tok, int64_t life_s,
		    struct err *e);
/* http_do for a token request: any answer but 200 is CLOUD_EAUTH (a 2xx
 * other than 200 is no token either). */
int auth_do(struct http_client *h, const struct http_request *req,
	    struct http_response *resp, struct err *e);
/* Frees a secret after overwriting it, so no copy lingers in the heap. */
void auth_free_secret(char *s);
/* Overwrites and releases a token request's form (may be NULL) and its
 * answer, which both hold secrets. */
void auth_wipe_exchange(struct buf *form, struct http_response *resp);
/* root's string member field into *out (NULL when absent and not
 * required); a message naming path, the field and fix otherwise. */
int auth_dup_field(json_t *root, const char *field, bool required,
		   char **out, const char *path, const char *fix,
		   struct err *e);

/* auth_federated.c */
/* Reads an impersonated_service_account or external_account file's
 * members into a (a->kind set by the caller); path for messages. */
int auth_load_impersonated(struct auth *a, json_t *root, const char *path,
			   struct err *e);
int auth_load_external(struct auth *a, json_t *root, const char *path,
		       struct err *e);
/* Fetches a's token for either kind. */
int auth_fetch_federated(struct auth *a, struct http_client *h,
			 struct err *e);
/* Loads a service_account or authorized_user object (auth.c); fix is the
 * advice for a missing or malformed member. */
int auth_load_key_json(struct auth *a, json_t *root, const char *path,
		       const char *fix, struct err *e);

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
