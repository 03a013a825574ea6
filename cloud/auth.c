/*
 * auth.c: where access tokens come from, in the order Google's own tools
 * use (see auth.h), and their cache. A token is held only in memory, sent
 * only in Authorization headers, and left out of every message and log.
 */
#include "cloud/auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

/* Key files are a few KiB; the cap stops a wrong path from being read. */
#define CREDS_FILE_MAX (1024 * 1024)
#define TOKEN_MARGIN_MS (60 * 1000)
#define METADATA_DEFAULT "metadata.google.internal"
#define METADATA_PATH \
	"/computeMetadata/v1/instance/service-accounts/default/token"
#define KEY_FIX "download a new key file, or run `gcloud auth " \
	"application-default login`"

static void clear(struct auth *a)
{
	memset(a, 0, sizeof(*a));
	strlist_init(&a->subject_headers);
}

void auth_free_secret(char *s)
{
	if (s)
		memset(s, 0, strlen(s));
	free(s);
}

int auth_do(struct http_client *h, const struct http_request *req,
	    struct http_response *resp, struct err *e)
{
	int rc = http_do(h, req, resp, e);

	if (rc == 0 && resp->status != 200)
		rc = err_set(e, CLOUD_EAUTH, "HTTP %ld", resp->status);
	return rc;
}

void auth_wipe_exchange(struct buf *form, struct http_response *resp)
{
	if (form) {
		if (form->data)
			memset(form->data, 0, form->len);
		buf_release(form);
	}
	if (resp->body.data)
		memset(resp->body.data, 0, resp->body.len);
	http_response_release(resp);
}

void auth_init_none(struct auth *a)
{
	clear(a);
	a->kind = AUTH_NONE;
}

void auth_release(struct auth *a)
{
	free(a->source);
	free(a->client_email);
	free(a->private_key_id);
	free(a->client_id);
	auth_free_secret(a->client_secret);
	auth_free_secret(a->refresh_token);
	free(a->token_uri);
	free(a->metadata_host);
	auth_free_secret(a->token);
	EVP_PKEY_free(a->key);
	if (a->inner) {
		auth_release(a->inner);
		free(a->inner);
	}
	free(a->impersonation_url);
	free(a->delegates);
	free(a->audience);
	free(a->subject_token_type);
	free(a->sts_url);
	free(a->subject_file);
	free(a->subject_url);
	for (size_t i = 0; i < a->subject_headers.n; i++)
		auth_free_secret(a->subject_headers.v[i]);
	a->subject_headers.n = 0;
	strlist_release(&a->subject_headers);
	free(a->subject_field);
	free(a->user_project);
	clear(a);
}

int auth_dup_field(json_t *root, const char *field, bool required,
		   char **out, const char *path, const char *fix,
		   struct err *e)
{
	json_t *v = json_object_get(root, field);
	const char *s = json_string_value(v);

	*out = NULL;
	if (!s || !*s) {
		if (!required && !v)
			return 0;
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"%s\" is %s; %s",
			       path, field,
			       v ? "not a non-empty string" : "missing", fix);
	}
	*out = strdup(s);
	if (!*out)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

static int token_uri(struct auth *a, json_t *root, struct err *e)
{
	const char *env = getenv("SLICECTL_TOKEN_URI");
	const char *file = json_string_value(json_object_get(root,
							     "token_uri"));
	const char *uri = env && *env ? env : file && *file ? file
							   : AUTH_TOKEN_URI;

	a->token_uri = strdup(uri);
	return a->token_uri ? 0 : err_set(e, CLOUD_ENOMEM, "out of memory");
}

int auth_load_key_json(struct auth *a, json_t *root, const char *path,
		       const char *fix, struct err *e)
{
	const char *type = json_string_value(json_object_get(root, "type"));
	int rc;

	if (type && strcmp(type, "service_account") == 0) {
		char *pem = NULL;

		a->kind = AUTH_SERVICE_ACCOUNT;
		rc = auth_dup_field(root, "client_email", true,
				    &a->client_email, path, fix, e);
		if (!rc)
			rc = auth_dup_field(root, "private_key", true, &pem,
					    path, fix, e);
		if (!rc)
			rc = auth_dup_field(root, "private_key_id", false,
					    &a->private_key_id, path, fix,
					    e);
		if (!rc) {
			rc = jwt_load_key(pem, &a->key, e);
			if (rc)
				err_prefix(e, "credentials file %s", path);
		}
		auth_free_secret(pem);
	} else if (type && strcmp(type, "authorized_user") == 0) {
		a->kind = AUTH_AUTHORIZED_USER;
		rc = auth_dup_field(root, "client_id", true, &a->client_id,
				    path, fix, e);
		if (!rc)
			rc = auth_dup_field(root, "client_secret", true,
					    &a->client_secret, path, fix,
					    e);
		if (!rc)
			rc = auth_dup_field(root, "refresh_token", true,
					    &a->refresh_token, path, fix,
					    e);
	} else {
		rc = err_set(e, CLOUD_EAUTH,
			     "credentials file %s: type %s%s%s is not "
			     "supported; use a service-account key file, an "
			     "impersonated_service_account or "
			     "external_account file, or `gcloud auth "
			     "application-default login`", path,
			     type ? "\"" : "", type ? type : "(missing)",
			     type ? "\"" : "");
	}
	if (!rc)
		rc = token_uri(a, root, e);
	return rc;
}

static int load_file(struct auth *a, const char *path, struct err *e)
{
	json_error_t je;
	json_t *root;
	const char *type;
	struct stat st;
	int rc;

	if (stat(path, &st) == -1)
		return err_errno(e, CLOUD_EAUTH, errno,
				 "credentials file %s", path);
	if (!S_ISREG(st.st_mode) || st.st_size > CREDS_FILE_MAX)
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: not a key file (not a "
			       "regular file of at most 1 MiB)", path);
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s is not JSON (line %d: "
			       "%s); point GOOGLE_APPLICATION_CREDENTIALS at "
			       "a service-account key file", path, je.line,
			       je.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s is not a JSON object",
			       path);
	}
	a->source = strdup(path);
	if (!a->source) {
		json_decref(root);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	type = json_string_value(json_object_get(root, "type"));
	if (type && strcmp(type, "impersonated_service_account") == 0) {
		a->kind = AUTH_IMPERSONATED;
		rc = auth_load_impersonated(a, root, path, e);
	} else if (type && strcmp(type, "external_account") == 0) {
		a->kind = AUTH_EXTERNAL;
		rc = auth_load_external(a, root, path, e);
	} else {
		rc = auth_load_key_json(a, root, path, KEY_FIX, e);
	}
	json_decref(root);
	return rc;
}

int auth_init(struct auth *a, struct err *e)
{
	const char *v = getenv("SLICECTL_ACCESS_TOKEN");
	const char *home, *cfg;
	struct buf adc;
	int rc;

	clear(a);
	if (v && *v) {
		a->kind = AUTH_STATIC;
		a->source = strdup("SLICECTL_ACCESS_TOKEN");
		a->token = strdup(v);
		if (!a->source || !a->token) {
			auth_release(a);
			return err_set(e, CLOUD_ENOMEM, "out of memory");
		}
		a->refresh_at_ms = UINT64_MAX;
		return 0;
	}
	v = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	if (v && *v) {
		rc = load_file(a, v, e);
		if (rc) {
			err_prefix(e, "GOOGLE_APPLICATION_CREDENTIALS");
			auth_release(a);
		}
		return rc;
	}
	buf_init(&adc);
	cfg = getenv("CLOUDSDK_CONFIG");
	home = getenv("HOME");
	if (cfg && *cfg)
		rc = buf_appendf(&adc, "%s/%s", cfg,
				 "application_default_credentials.json");
	else if (home && *home)
		rc = buf_appendf(&adc, "%s/.config/gcloud/"
				 "application_default_credentials.json", home);
	else
		rc = 0;
	if (rc) {
		buf_release(&adc);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	if (adc.data && access(adc.data, F_OK) == 0) {
		rc = load_file(a, adc.data, e);
		buf_release(&adc);
		if (rc)
			auth_release(a);
		return rc;
	}
	buf_release(&adc);
	a->kind = AUTH_METADATA;
	v = getenv("GCE_METADATA_HOST");
	a->metadata_host = strdup(v && *v ? v : METADATA_DEFAULT);
	a->source = strdup("the metadata server");
	if (!a->metadata_host || !a->source) {
		auth_release(a);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	return 0;
}

void auth_invalidate(struct auth *a)
{
	if (!auth_renewable(a))
		return;
	auth_free_secret(a->token);
	a->token = NULL;
}

bool auth_renewable(const struct auth *a)
{
	return a->kind != AUTH_NONE && a->kind != AUTH_STATIC;
}

int auth_form_field(struct buf *b, const char *name, const char *value)
{
	if ((b->len && buf_appends(b, "&")) || buf_appends(b, name) ||
	    buf_appends(b, "="))
		return CLOUD_ENOMEM;
	return http_escape_append(b, value);
}

int auth_keep_token(struct auth *a, const char *tok, int64_t life_s,
		    struct err *e)
{
	uint64_t life_ms, margin;

	if (life_s <= 0)
		life_s = 1;
	auth_free_secret(a->token);
	a->token = strdup(tok);
	if (!a->token)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	life_ms = (uint64_t)life_s * 1000;
	margin = life_ms / 2 < TOKEN_MARGIN_MS ? life_ms / 2
					       : TOKEN_MARGIN_MS;
	a->refresh_at_ms = mono_ms() + life_ms - margin;
	return 0;
}

int auth_parse_token(struct auth *a, const struct http_response *resp,
		     const char *from, struct err *e)
{
	json_t *root = json_loadb(resp->body.data ? resp->body.data : "",
				  resp->body.len, 0, NULL);
	const char *tok = json_string_value(json_object_get(root,
							    "access_token"));
	json_t *exp = json_object_get(root, "expires_in");
	int64_t secs = 3600;
	int rc;

	if (!tok || !*tok) {
		json_decref(root);
		return err_set(e, CLOUD_ECORRUPT,
			       "%s answered without an access_token (%s); "
			       "is the token endpoint right?", from,
			       root ? "JSON without the field" : "not JSON");
	}
	if (json_is_integer(exp))
		secs = json_integer_value(exp);
	else if (json_is_real(exp))
		secs = (int64_t)json_real_value(exp);
	rc = auth_keep_token(a, tok, secs, e);
	json_decref(root);
	return rc;
}

static int fetch(struct auth *a, struct http_client *h, struct err *e)
{
	struct http_request req = { .method = "POST", .max_body = 1 << 20 };
	struct http_response resp;
	struct buf form, url;
	const char *headers[2] = { NULL, NULL };
	char *jwt = NULL;
	int rc;

	if (a->kind == AUTH_IMPERSONATED || a->kind == AUTH_EXTERNAL)
		return auth_fetch_federated(a, h, e);
	buf_init(&form);
	buf_init(&url);
	http_response_init(&resp);
	if (a->kind == AUTH_SERVICE_ACCOUNT) {
		rc = jwt_service_account(a->key, a->private_key_id,
					 a->client_email, AUTH_SCOPE,
					 a->token_uri, (int64_t)time(NULL),
					 &jwt, e);
		if (rc)
			goto out;
		rc = auth_form_field(&form, "grant_type",
				"urn:ietf:params:oauth:grant-type:jwt-bearer");
		if (!rc)
			rc = auth_form_field(&form, "assertion", jwt);
	} else if (a->kind == AUTH_AUTHORIZED_USER) {
		rc = auth_form_field(&form, "grant_type", "refresh_token");
		if (!rc)
			rc = auth_form_field(&form, "client_id", a->client_id);
		if (!rc)
			rc = auth_form_field(&form, "client_secret",
					a->client_secret);
		if (!rc)
			rc = auth_form_field(&form, "refresh_token",
					a->refresh_token);
	} else {
		const char *host = a->metadata_host;

		req.method = "GET";
		/* Off GCE the name does not resolve: say so quickly. */
		req.max_attempts = 3;
		headers[0] = "Metadata-Flavor: Google";
		rc = buf_appendf(&url, "%s%s%s",
				 strstr(host, "://") ? "" : "http://", host,
				 METADATA_PATH) ? CLOUD_ENOMEM : 0;
	}
	if (rc) {
		if (rc == CLOUD_ENOMEM)
			err_set(e, rc, "out of memory");
		goto out;
	}
	if (a->kind == AUTH_METADATA) {
		req.url = url.data;
		req.headers = headers;
	} else {
		headers[0] = "Content-Type: application/x-www-form-urlencoded";
		req.headers = headers;
		req.url = a->token_uri;
		req.body = form.data;
		req.body_len = form.len;
	}
	rc = auth_do(h, &req, &resp, e);
	if (rc) {
		if (a->kind == AUTH_METADATA)
			err_prefix(e, "no credentials: SLICECTL_ACCESS_TOKEN "
				   "and GOOGLE_APPLICATION_CREDENTIALS are "
				   "unset, there is no gcloud application "
				   "default credentials file, and the metadata "
				   "server (%s) gave no token; run `gcloud "
				   "auth application-default login`, or set "
				   "GOOGLE_APPLICATION_CREDENTIALS to a "
				   "service-account key file",
				   a->metadata_host);
		else
			err_prefix(e, "cannot get an access token with the "
				   "credentials in %s", a->source);
		if (rc == CLOUD_EHTTP || rc == CLOUD_ENOTFOUND ||
		    (rc == CLOUD_ENETWORK && a->kind == AUTH_METADATA)) {
			rc = CLOUD_EAUTH;
			if (e)
				e->code = rc;
		}
		goto out;
	}
	rc = auth_parse_token(a, &resp, a->kind == AUTH_METADATA
					   ? "the metadata server"
					   : a->token_uri, e);
out:
	auth_free_secret(jwt);
	auth_wipe_exchange(&form, &resp);
	buf_release(&url);
	return rc;
}

int auth_token(struct auth *a, struct http_client *h, const char **token,
	       struct err *e)
{
	int rc;

	if (a->kind == AUTH_NONE) {
		*token = "";
		return 0;
	}
	if (!a->token || mono_ms() >= a->refresh_at_ms) {
		rc = fetch(a, h, e);
		if (rc)
			return rc;
	}
	*token = a->token;
	return 0;
}

int auth_send(struct auth *a, struct http_client *h, struct http_request *req,
	      const char *const *headers, struct http_response *resp,
	      struct err *e)
{
	const char *hdr[8];
	struct buf line;
	size_t n = 0;
	int rc;

	for (; headers && headers[n] && n < 6; n++)
		hdr[n] = headers[n];
	buf_init(&line);
	for (int round = 0;; round++) {
		const char *token;
		size_t k = n;

		rc = auth_token(a, h, &token, e);
		if (rc)
			break;
		buf_reset(&line);
		if (*token) {
			if (buf_appendf(&line, "Authorization: Bearer %s",
					token)) {
				rc = err_set(e, CLOUD_ENOMEM, "out of memory");
				break;
			}
			hdr[k++] = line.data;
		}
		hdr[k] = NULL;
		req->headers = hdr;
		rc = http_do(h, req, resp, e);
		if (rc == CLOUD_EAUTH && resp->status == 401 && round == 0 &&
		    auth_renewable(a)) {
			auth_invalidate(a);
			continue;
		}
		break;
	}
	if (line.data)
		memset(line.data, 0, line.len);
	buf_release(&line);
	req->headers = NULL;
	return rc;
}

int auth_http_init(struct auth *a, struct http_client *h,
		   const struct http_policy *p, struct err *e)
{
	int rc = auth_init(a, e);

	if (rc)
		return rc;
	rc = http_client_init(h, p, e);
	if (rc)
		auth_release(a);
	return rc;
}
