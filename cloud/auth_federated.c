/*
 * auth_federated.c: the credentials that hold no key of their own, as
 * google-auth reads them. An impersonated_service_account file (what
 * `gcloud auth application-default login --impersonate-service-account`
 * writes) names a source credential whose token buys the service
 * account's from the IAM Credentials API (generateAccessToken). An
 * external_account file (Workload Identity Federation) names where a
 * subject token lies (a file, or a URL with headers; as text or a JSON
 * member), which the STS endpoint exchanges for a Google token, which may
 * then impersonate a service account the same way. Organisations that
 * forbid service-account keys use exactly these.
 */
#include "cloud/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A subject token is a JWT or SAML assertion of a few KiB; the cap stops
 * a wrong path or URL from being read whole. */
#define SUBJECT_MAX (1024 * 1024)
#define IMPERSONATED_FIX \
	"run `gcloud auth application-default login " \
	"--impersonate-service-account=EMAIL` again"
#define EXTERNAL_FIX \
	"make the file again with `gcloud iam workload-identity-pools " \
	"create-cred-config` (or `gcloud iam workforce-pools " \
	"create-cred-config`)"
#define DELEGATE_PREFIX "projects/-/serviceAccounts/"
#define TOKEN_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"
#define ACCESS_TOKEN_TYPE "urn:ietf:params:oauth:token-type:access_token"

/* url with Google's base replaced by the base in the environment variable
 * env, when it is set and url is on Google's host. */
static int rebase(const char *url, const char *google, const char *env,
		  char **out, struct err *e)
{
	const char *over = getenv(env);
	size_t n = strlen(google);
	struct buf b;

	buf_init(&b);
	if (over && *over && strncmp(url, google, n) == 0 &&
	    (url[n] == '/' || url[n] == '\0')) {
		if (buf_appendf(&b, "%s%s", over, url + n))
			return err_set(e, CLOUD_ENOMEM, "out of memory");
		*out = buf_detach(&b);
	} else {
		*out = strdup(url);
	}
	return *out ? 0 : err_set(e, CLOUD_ENOMEM, "out of memory");
}

/* The file's service_account_impersonation_url, rebased, which must name
 * generateAccessToken (the only call this client makes). */
static int impersonation_url(struct auth *a, json_t *root, bool required,
			     const char *path, const char *fix, struct err *e)
{
	const char *field = "service_account_impersonation_url";
	const char *suffix = ":generateAccessToken";
	char *url = NULL;
	size_t n, k = strlen(suffix);
	int rc = auth_dup_field(root, field, required, &url, path, fix, e);

	if (rc || !url)
		return rc;
	n = strlen(url);
	if (n <= k || strcmp(url + n - k, suffix) != 0 ||
	    !strstr(url, "/serviceAccounts/")) {
		free(url);
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"%s\" is not an IAM "
			       "Credentials URL ending in /serviceAccounts/"
			       "EMAIL:generateAccessToken; %s", path, field,
			       fix);
	}
	rc = rebase(url, AUTH_IAM_BASE, "SLICECTL_IAM_CREDENTIALS_ENDPOINT",
		    &a->impersonation_url, e);
	free(url);
	return rc;
}

/* delegates as the JSON array the API takes: full resource names (a bare
 * email is given the projects/-/serviceAccounts/ prefix). */
static int delegates(struct auth *a, json_t *root, const char *path,
		     struct err *e)
{
	json_t *arr = json_object_get(root, "delegates"), *v;
	json_t *out = json_array();
	size_t i;
	int rc = 0;

	if (!out)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	if (arr && !json_is_array(arr) && !json_is_null(arr))
		rc = err_set(e, CLOUD_EAUTH,
			     "credentials file %s: \"delegates\" is not a "
			     "list of service accounts; %s", path,
			     IMPERSONATED_FIX);
	json_array_foreach(arr, i, v) {
		const char *d = json_string_value(v);
		struct buf name;

		if (rc)
			break;
		if (!d || !*d) {
			rc = err_set(e, CLOUD_EAUTH,
				     "credentials file %s: \"delegates\" "
				     "item %zu is not a service account "
				     "name; %s", path, i, IMPERSONATED_FIX);
			break;
		}
		buf_init(&name);
		if (buf_appendf(&name, "%s%s", strchr(d, '/') ? ""
					       : DELEGATE_PREFIX, d) ||
		    json_array_append_new(out, json_string(name.data)))
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		buf_release(&name);
	}
	if (!rc) {
		a->delegates = json_dumps(out, JSON_COMPACT);
		if (!a->delegates)
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	json_decref(out);
	return rc;
}

int auth_load_impersonated(struct auth *a, json_t *root, const char *path,
			   struct err *e)
{
	json_t *src = json_object_get(root, "source_credentials");
	const char *type = json_string_value(json_object_get(src, "type"));
	struct buf where;
	int rc;

	rc = impersonation_url(a, root, true, path, IMPERSONATED_FIX, e);
	if (!rc)
		rc = delegates(a, root, path, e);
	if (rc)
		return rc;
	if (!json_is_object(src))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"source_credentials\" "
			       "is %s; %s", path, src ? "not a JSON object"
						      : "missing",
			       IMPERSONATED_FIX);
	if (!type || (strcmp(type, "authorized_user") != 0 &&
		      strcmp(type, "service_account") != 0))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"source_credentials\" "
			       "has type %s%s%s; the source of an "
			       "impersonated service account must be an "
			       "authorized_user or a service_account; %s",
			       path, type ? "\"" : "",
			       type ? type : "(missing)", type ? "\"" : "",
			       IMPERSONATED_FIX);
	a->inner = calloc(1, sizeof(*a->inner));
	if (!a->inner)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	auth_init_none(a->inner);
	buf_init(&where);
	if (buf_appendf(&where, "%s (source_credentials)", path)) {
		buf_release(&where);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	rc = auth_load_key_json(a->inner, src, where.data,
				IMPERSONATED_FIX, e);
	if (!rc) {
		/* Its failures are reported under the outer file's name. */
		a->inner->source = buf_detach(&where);
		if (!a->inner->source)
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	buf_release(&where);
	return rc;
}

/* auth_dup_field for a member of the object part of the file at path. */
static int nested_field(json_t *obj, const char *field, bool required,
			char **out, const char *path, const char *part,
			struct err *e)
{
	struct buf where;
	int rc;

	buf_init(&where);
	if (buf_appendf(&where, "%s (%s)", path, part))
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	else
		rc = auth_dup_field(obj, field, required, out, where.data,
				    EXTERNAL_FIX, e);
	buf_release(&where);
	return rc;
}

/* credential_source: a file or a URL (with headers), as text or JSON. */
static int credential_source(struct auth *a, json_t *cs, const char *path,
			     struct err *e)
{
	static const char *const refused[][2] = {
		{ "environment_id", "an AWS credential source" },
		{ "executable", "an executable credential source" },
		{ "certificate", "an X.509 certificate credential source" },
	};
	json_t *headers = json_object_get(cs, "headers");
	json_t *format = json_object_get(cs, "format");
	const char *ftype = json_string_value(json_object_get(format, "type"));
	const char *name;
	json_t *v;
	int rc;

	if (!json_is_object(cs))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"credential_source\" is "
			       "%s; %s", path, cs ? "not a JSON object"
						  : "missing", EXTERNAL_FIX);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (json_object_get(cs, refused[i][0]))
			return err_set(e, CLOUD_EAUTH,
				       "credentials file %s: "
				       "\"credential_source\" is %s "
				       "(\"%s\"): not supported: use a file "
				       "or url source (create-cred-config "
				       "--credential-source-file or "
				       "--credential-source-url)", path,
				       refused[i][1], refused[i][0]);
	if (json_object_get(cs, "file") && json_object_get(cs, "url"))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"credential_source\" "
			       "has both \"file\" and \"url\"; keep one",
			       path);
	rc = nested_field(cs, "file", false, &a->subject_file, path,
			  "credential_source", e);
	if (!rc && !a->subject_file)
		rc = nested_field(cs, "url", false, &a->subject_url, path,
				  "credential_source", e);
	if (rc)
		return rc;
	if (!a->subject_file && !a->subject_url)
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"credential_source\" "
			       "has neither \"file\" nor \"url\"; %s", path,
			       EXTERNAL_FIX);
	if (headers && (!json_is_object(headers) || a->subject_file))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"credential_source\"."
			       "\"headers\" is %s; %s", path,
			       a->subject_file ? "only for a url source"
					       : "not a JSON object",
			       EXTERNAL_FIX);
	json_object_foreach(headers, name, v) {
		const char *val = json_string_value(v);
		struct buf line;

		if (!val || strpbrk(val, "\r\n") || !*name ||
		    strpbrk(name, ": \r\n"))
			return err_set(e, CLOUD_EAUTH,
				       "credentials file %s: "
				       "\"credential_source\".\"headers\"."
				       "\"%s\" is not a header name with a "
				       "one-line string value; %s", path,
				       name, EXTERNAL_FIX);
		buf_init(&line);
		rc = buf_appendf(&line, "%s: %s", name, val) ||
		     strlist_push(&a->subject_headers, line.data);
		if (line.data)
			memset(line.data, 0, line.len);
		buf_release(&line);
		if (rc)
			return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	if (format && (!json_is_object(format) ||
		       (ftype && strcmp(ftype, "text") != 0 &&
			strcmp(ftype, "json") != 0)))
		return err_set(e, CLOUD_EAUTH,
			       "credentials file %s: \"credential_source\"."
			       "\"format\" is not {\"type\": \"text\"} or "
			       "{\"type\": \"json\", "
			       "\"subject_token_field_name\": NAME}; %s", path,
			       EXTERNAL_FIX);
	if (ftype && strcmp(ftype, "json") == 0)
		rc = nested_field(format, "subject_token_field_name", true,
				  &a->subject_field, path,
				  "credential_source.format", e);
	return rc;
}

int auth_load_external(struct auth *a, json_t *root, const char *path,
		       struct err *e)
{
	char *sts = NULL;
	int rc;

	rc = auth_dup_field(root, "audience", true, &a->audience, path,
			    EXTERNAL_FIX, e);
	if (!rc)
		rc = auth_dup_field(root, "subject_token_type", true,
				    &a->subject_token_type, path,
				    EXTERNAL_FIX, e);
	if (!rc)
		rc = auth_dup_field(root, "token_url", false, &sts, path,
				    EXTERNAL_FIX, e);
	if (!rc)
		rc = rebase(sts ? sts : AUTH_STS_BASE AUTH_STS_PATH,
			    AUTH_STS_BASE, "SLICECTL_STS_ENDPOINT",
			    &a->sts_url, e);
	free(sts);
	if (!rc)
		rc = impersonation_url(a, root, false, path, EXTERNAL_FIX, e);
	if (!rc && a->impersonation_url)
		rc = delegates(a, root, path, e);
	if (!rc)
		rc = auth_dup_field(root, "workforce_pool_user_project", false,
				    &a->user_project, path, EXTERNAL_FIX, e);
	if (!rc && a->user_project &&
	    !strstr(a->audience, "/workforcePools/"))
		rc = err_set(e, CLOUD_EAUTH,
			     "credentials file %s: "
			     "\"workforce_pool_user_project\" is only for a "
			     "workforce pool, and \"audience\" names none "
			     "(//iam.googleapis.com/locations/global/"
			     "workforcePools/POOL/providers/PROVIDER); remove "
			     "it", path);
	if (!rc)
		rc = credential_source(a, json_object_get(root,
							  "credential_source"),
				       path, e);
	return rc;
}

/* ---------------------------------------------------------------- tokens */

/* The subject token read from the file (at most SUBJECT_MAX bytes). */
static int read_subject_file(const char *file, struct buf *out,
			     struct err *e)
{
	struct stat st;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (fd == -1)
		return err_errno(e, CLOUD_EAUTH, errno,
				 "credential_source.file %s", file);
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_size > SUBJECT_MAX) {
		close(fd);
		return err_set(e, CLOUD_EAUTH,
			       "credential_source.file %s is not a regular "
			       "file of at most 1 MiB", file);
	}
	if (buf_reserve(out, (size_t)st.st_size + 1)) {
		close(fd);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	for (;;) {
		ssize_t n = read(fd, out->data + out->len,
				 (size_t)st.st_size + 1 - out->len);

		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			rc = err_errno(e, CLOUD_EAUTH, errno,
				       "credential_source.file %s", file);
			break;
		}
		out->len += (size_t)n;
		if (n == 0 || out->len > (size_t)st.st_size)
			break;
	}
	close(fd);
	if (!rc && out->len > (size_t)st.st_size)
		rc = err_set(e, CLOUD_EAUTH, "credential_source.file %s grew "
			     "while being read", file);
	return rc;
}

static int fetch_subject_url(struct auth *a, struct http_client *h,
			     struct buf *out, struct err *e)
{
	struct http_request req = { .method = "GET", .url = a->subject_url,
				    .max_body = SUBJECT_MAX };
	struct http_response resp;
	int rc;

	http_response_init(&resp);
	req.headers = (const char *const *)a->subject_headers.v;
	if (!a->subject_headers.n)
		req.headers = NULL;
	rc = auth_do(h, &req, &resp, e);
	if (rc) {
		err_prefix(e, "credential_source.url");
		if (rc != CLOUD_ENOMEM) {
			rc = CLOUD_EAUTH;
			if (e)
				e->code = rc;
		}
	} else if (buf_append(out, resp.body.data ? resp.body.data : "",
			      resp.body.len)) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	auth_wipe_exchange(NULL, &resp);
	return rc;
}

/* The subject token, as text (trailing white space dropped: a token has
 * none, an editor's newline would be refused by STS) or a JSON member. */
static int subject_token(struct auth *a, struct http_client *h, char **tok,
			 struct err *e)
{
	const char *where = a->subject_file ? a->subject_file
					    : a->subject_url;
	struct buf raw;
	int rc;

	*tok = NULL;
	buf_init(&raw);
	rc = a->subject_file ? read_subject_file(a->subject_file, &raw, e)
			     : fetch_subject_url(a, h, &raw, e);
	if (!rc && a->subject_field) {
		json_t *root = json_loadb(raw.data ? raw.data : "", raw.len,
					  0, NULL);
		const char *s = json_string_value(
			json_object_get(root, a->subject_field));

		if (!s || !*s)
			rc = err_set(e, CLOUD_EAUTH,
				     "the subject token at %s is %s; the "
				     "credential source's format names "
				     "\"subject_token_field_name\": \"%s\"",
				     where, root ? "JSON without a string "
						   "member of that name"
						 : "not JSON", a->subject_field);
		else if (!(*tok = strdup(s)))
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		json_decref(root);
	} else if (!rc) {
		while (raw.len && strchr(" \t\r\n", raw.data[raw.len - 1]))
			raw.len--;
		if (!raw.len)
			rc = err_set(e, CLOUD_EAUTH,
				     "the subject token at %s is empty",
				     where);
		else {
			/* Trimmed in place: the buffer had room for more. */
			raw.data[raw.len] = '\0';
			*tok = buf_detach(&raw);
		}
	}
	if (raw.data)
		memset(raw.data, 0, raw.cap);
	buf_release(&raw);
	return rc;
}

/* RFC 8693 token exchange at STS: the subject token for a Google access
 * token, which lands in a->token. */
static int sts_exchange(struct auth *a, struct http_client *h, struct err *e)
{
	struct http_request req = { .method = "POST", .url = a->sts_url,
				    .max_body = 1 << 20 };
	const char *headers[] = {
		"Content-Type: application/x-www-form-urlencoded", NULL
	};
	struct http_response resp;
	struct buf form, options;
	char *subject = NULL;
	int rc;

	buf_init(&form);
	buf_init(&options);
	http_response_init(&resp);
	rc = subject_token(a, h, &subject, e);
	if (rc)
		goto out;
	/* A workforce pool bills its quota to a project; with impersonation
	 * the service account's project is billed instead. */
	if (a->user_project && !a->impersonation_url &&
	    (buf_appends(&options, "{\"userProject\":") ||
	     json_append_string(&options, a->user_project,
				strlen(a->user_project)) ||
	     buf_appends(&options, "}")))
		rc = CLOUD_ENOMEM;
	if (!rc)
		rc = auth_form_field(&form, "grant_type", TOKEN_EXCHANGE) ||
		     auth_form_field(&form, "audience", a->audience) ||
		     auth_form_field(&form, "scope", AUTH_SCOPE) ||
		     auth_form_field(&form, "requested_token_type",
				     ACCESS_TOKEN_TYPE) ||
		     auth_form_field(&form, "subject_token", subject) ||
		     auth_form_field(&form, "subject_token_type",
				     a->subject_token_type) ||
		     (options.len && auth_form_field(&form, "options",
						     options.data));
	if (rc) {
		rc = err_set(e, CLOUD_ENOMEM, "out of memory");
		goto out;
	}
	req.headers = headers;
	req.body = form.data;
	req.body_len = form.len;
	rc = auth_do(h, &req, &resp, e);
	if (rc) {
		err_prefix(e, "the token exchange (STS)");
		goto out;
	}
	rc = auth_parse_token(a, &resp, a->sts_url, e);
out:
	auth_free_secret(subject);
	auth_wipe_exchange(&form, &resp);
	buf_release(&options);
	return rc;
}

static const char *iam_hint(long status, const char *message)
{
	(void)message;
	if (status == 403)
		return "; the source credential needs "
		       "roles/iam.serviceAccountTokenCreator on the service "
		       "account (and on every delegate), and the IAM "
		       "Credentials API must be enabled in its project";
	return NULL;
}

/* generateAccessToken with bearer's token: the service account's token
 * and its expiry land in a->token. */
static int impersonate(struct auth *a, struct http_client *h,
		       const char *bearer, struct http_response *resp,
		       struct err *e)
{
	struct http_request req = { .method = "POST",
				    .url = a->impersonation_url,
				    .max_body = 1 << 20, .hint = iam_hint };
	const char *headers[] = { "Content-Type: application/json", NULL,
				  NULL };
	struct buf auth, body;
	json_t *root = NULL;
	const char *tok, *expiry;
	time_t until;
	int rc = CLOUD_ENOMEM;

	buf_init(&auth);
	buf_init(&body);
	if (buf_appendf(&auth, "Authorization: Bearer %s", bearer) ||
	    buf_appends(&body, "{\"scope\":[\"" AUTH_SCOPE "\"],"
			"\"delegates\":") ||
	    buf_appends(&body, a->delegates) ||
	    buf_appends(&body, ",\"lifetime\":\"3600s\"}")) {
		err_set(e, rc, "out of memory");
		goto out;
	}
	headers[1] = auth.data;
	req.headers = headers;
	req.body = body.data;
	req.body_len = body.len;
	rc = auth_do(h, &req, resp, e);
	if (rc) {
		err_prefix(e, "impersonating the service account");
		goto out;
	}
	root = json_loadb(resp->body.data ? resp->body.data : "",
			  resp->body.len, 0, NULL);
	tok = json_string_value(json_object_get(root, "accessToken"));
	expiry = json_string_value(json_object_get(root, "expireTime"));
	until = expiry ? rfc3339_parse(expiry) : (time_t)-1;
	if (!tok || !*tok || until == (time_t)-1) {
		rc = err_set(e, CLOUD_ECORRUPT,
			     "%s answered without an accessToken and an "
			     "RFC 3339 expireTime; is the IAM Credentials "
			     "endpoint right?", a->impersonation_url);
		goto out;
	}
	rc = auth_keep_token(a, tok, (int64_t)(until - time(NULL)), e);
out:
	json_decref(root);
	if (auth.data)
		memset(auth.data, 0, auth.len);
	buf_release(&auth);
	buf_release(&body);
	return rc;
}

int auth_fetch_federated(struct auth *a, struct http_client *h,
			 struct err *e)
{
	struct http_response resp;
	char *bearer = NULL;
	int rc = 0;

	http_response_init(&resp);
	for (int round = 0; round < 2; round++) {
		const char *src;

		if (a->kind == AUTH_EXTERNAL) {
			rc = sts_exchange(a, h, e);
			if (rc || !a->impersonation_url)
				break;
			/* The STS token only buys the impersonated one. */
			bearer = a->token;
			a->token = NULL;
			src = bearer;
		} else {
			rc = auth_token(a->inner, h, &src, e);
			if (rc)
				break;
		}
		rc = impersonate(a, h, src, &resp, e);
		auth_free_secret(bearer);
		bearer = NULL;
		/* A source token revoked or expired early: once more with a
		 * fresh one. */
		if (rc != CLOUD_EAUTH || resp.status != 401)
			break;
		if (a->inner)
			auth_invalidate(a->inner);
		auth_wipe_exchange(NULL, &resp);
		http_response_init(&resp);
	}
	auth_wipe_exchange(NULL, &resp);
	if (rc) {
		err_prefix(e, "cannot get an access token with the "
			   "credentials in %s", a->source);
		if (rc == CLOUD_EHTTP || rc == CLOUD_ENOTFOUND) {
			rc = CLOUD_EAUTH;
			if (e)
				e->code = rc;
		}
	}
	return rc;
}
