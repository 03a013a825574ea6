/*
 * tests/cloud/test_keyless_tokens.c: token sources without a key of their
 * own: impersonated service accounts and external accounts (Workload
 * Identity Federation) against tests/fakes/sts_fake.py (STS, IAM
 * Credentials and OAuth, each checking requests as Google's do), the
 * cache and its renewal, and keyless files that cannot work.
 */
#include "cloud/auth.h"
#include "tests/cloud/auth_check.h"
#include "tests/cloud/fake_server.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(auth, .init = auth_setup, .fini = auth_teardown);

#define TARGET "target@proj.iam.gserviceaccount.com"
#define IAM_URL "https://iamcredentials.googleapis.com/v1/projects/-/" \
	"serviceAccounts/" TARGET ":generateAccessToken"
#define WORKLOAD_AUD "//iam.googleapis.com/projects/123/locations/global/" \
	"workloadIdentityPools/pool/providers/prov"
#define WORKFORCE_AUD "//iam.googleapis.com/locations/global/" \
	"workforcePools/staff/providers/idp"
#define JWT_TYPE "urn:ietf:params:oauth:token-type:jwt"

static void sts_start(struct fake_server *f, const char *const *args)
{
	cr_assert_eq(fake_server_start(f, "tests/fakes/sts_fake.py", args),
		     0);
}

static void sts_config(struct fake_server *f, const char *doc)
{
	cr_assert_eq(fake_server_post(f, "/_fake/config", doc), 0, "%s", doc);
}

/* The fake's request log (caller decrefs), then cleared. */
static json_t *sts_log(struct fake_server *f)
{
	char *text = NULL;
	json_t *log;

	cr_assert_eq(fake_server_call(f, "GET", "/_fake/requests", NULL,
				      &text), 200);
	log = json_loads(text, 0, NULL);
	free(text);
	cr_assert(json_is_array(log));
	cr_assert_eq(fake_server_call(f, "DELETE", "/_fake/requests", NULL,
				      NULL), 200);
	return log;
}

/* The requests in log whose path contains part. */
static unsigned count_path(json_t *log, const char *part)
{
	unsigned n = 0;
	size_t i;
	json_t *v;

	json_array_foreach(log, i, v)
		if (strstr(json_string_value(json_object_get(v, "path")), part))
			n++;
	return n;
}

/* The n-th (from 0) request in log whose path contains part. */
static json_t *nth_request(json_t *log, const char *part, unsigned n)
{
	size_t i;
	json_t *v;

	json_array_foreach(log, i, v)
		if (strstr(json_string_value(json_object_get(v, "path")),
			   part) && n-- == 0)
			return v;
	cr_assert_fail("no request %u to %s", n, part);
	return NULL;
}

static const char *member(json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

/* Writes doc as the credentials file named by GOOGLE_APPLICATION_
 * CREDENTIALS; returns its path (static). */
static const char *creds_json(json_t *doc)
{
	static char path[300];

	snprintf(path, sizeof(path), "%s/creds.json", auth_dir);
	cr_assert_eq(json_dump_file(doc, path, 0), 0);
	json_decref(doc);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	return path;
}

/* What `gcloud auth application-default login
 * --impersonate-service-account` writes, with a user as the source. */
static json_t *impersonated_doc(void)
{
	return json_pack("{s:s, s:s, s:[s], s:{s:s, s:s, s:s, s:s}}",
			 "type", "impersonated_service_account",
			 "service_account_impersonation_url", IAM_URL,
			 "delegates",
			 "projects/-/serviceAccounts/hop@proj.iam."
			 "gserviceaccount.com",
			 "source_credentials", "type", "authorized_user",
			 "client_id", "cid", "client_secret", "csecret",
			 "refresh_token", "1//refresh");
}

static void point_at(struct fake_server *f)
{
	char uri[128];

	snprintf(uri, sizeof(uri), "%s/token", f->base);
	setenv("SLICECTL_TOKEN_URI", uri, 1);
	setenv("SLICECTL_IAM_CREDENTIALS_ENDPOINT", f->base, 1);
	setenv("SLICECTL_STS_ENDPOINT", f->base, 1);
}

Test(auth, impersonated_user_source_and_the_cache)
{
	struct fake_server f;
	struct http_client c;
	struct auth a;
	const char *tok;
	char first[128];
	json_t *log, *r, *body;
	struct err e;

	sts_start(&f, NULL);
	point_at(&f);
	creds_json(impersonated_doc());
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_IMPERSONATED);
	cr_assert(auth_renewable(&a));
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.impersonated-", 18), "%s", tok);
	snprintf(first, sizeof(first), "%s", tok);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_eq(tok, first);

	/* One refresh of the user's token, then one generateAccessToken
	 * with it: the fake checked the bearer token, scope, delegates'
	 * form and lifetime. */
	log = sts_log(&f);
	cr_assert_eq(json_array_size(log), 2);
	r = nth_request(log, "/token", 0);
	cr_assert_str_eq(member(r, "form", "grant_type"), "refresh_token");
	cr_assert_str_eq(member(r, "form", "refresh_token"), "1//refresh");
	r = nth_request(log, ":generateAccessToken", 0);
	cr_assert_eq(json_integer_value(json_object_get(r, "status")), 200);
	cr_assert_str_eq(json_string_value(json_object_get(r, "path")),
			 "/v1/projects/-/serviceAccounts/" TARGET
			 ":generateAccessToken");
	cr_assert(!strncmp(member(r, "headers", "authorization"),
			   "Bearer ya29.source-", 19));
	cr_assert_str_eq(member(r, "headers", "content-type"),
			 "application/json");
	body = json_object_get(r, "json");
	/* One scope an element, as IAM takes them. */
	cr_assert_eq(json_array_size(json_object_get(body, "scope")), 2);
	cr_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(body, "scope"), 0)),
			 AUTH_SCOPE_CLOUD);
	cr_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(body, "scope"), 1)),
			 AUTH_SCOPE_EMAIL);
	cr_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(body, "delegates"), 0)),
			 "projects/-/serviceAccounts/hop@proj.iam."
			 "gserviceaccount.com");
	cr_assert_str_eq(json_string_value(json_object_get(body,
							   "lifetime")),
			 "3600s");
	json_decref(log);

	/* The API refused the token (401): a new one is bought with the
	 * source's cached token. */
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_neq(tok, first);
	log = sts_log(&f);
	cr_assert_eq(count_path(log, "/token"), 0);
	cr_assert_eq(count_path(log, ":generateAccessToken"), 1);
	json_decref(log);

	/* IAM refuses the source's token (revoked early): the source is
	 * refreshed once and the purchase tried again. */
	cr_assert_eq(fake_server_faults(&f, "{\"path\": \"generateAccess"
				       "Token\", \"status\": 401}"), 0);
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	log = sts_log(&f);
	cr_assert_eq(count_path(log, "/token"), 1);
	cr_assert_eq(count_path(log, ":generateAccessToken"), 2);
	json_decref(log);
	auth_release(&a);
	http_client_release(&c);
	fake_server_stop(&f);
}

Test(auth, impersonated_token_renewed_before_it_expires)
{
	struct fake_server f;
	struct http_client c;
	struct auth a;
	const char *tok;
	char first[128];
	uint64_t got_at;
	long long due_in;
	json_t *log;
	struct err e;

	sts_start(&f, NULL);
	point_at(&f);
	/* A 2 s token is renewed 1 s (half its life) before its end: asked
	 * every 100 ms, a new one comes before the first one's 2 s are up
	 * (the expiry is in whole seconds, so "half its life" is at 0.5 to
	 * 1 s; a fixed 1.3 s wait once saw the old token, in fresh-check at
	 * 0a8757b, refresh due in the message below). */
	sts_config(&f, "{\"impersonated_expires_in\": 2}");
	creds_json(impersonated_doc());
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	snprintf(first, sizeof(first), "%s", tok);
	got_at = mono_ms();
	due_in = (long long)a.refresh_at_ms - (long long)got_at;
	do {
		sleep_ms(100);
		cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	} while (!strcmp(tok, first) && mono_ms() - got_at < 1900);
	cr_assert_str_neq(tok, first, "still the first token after %llu "
			  "ms; its refresh was due in %lld ms",
			  (unsigned long long)(mono_ms() - got_at), due_in);
	log = sts_log(&f);
	cr_assert_eq(count_path(log, "/token"), 1, "the source's token is "
		     "still good");
	cr_assert_eq(count_path(log, ":generateAccessToken"), 2);
	json_decref(log);
	auth_release(&a);
	http_client_release(&c);
	fake_server_stop(&f);
}

Test(auth, impersonated_service_account_source_and_refusals)
{
	char *pem = make_key("k");
	char pub[300], uri[128];
	const char *args[] = { "--jwt-public-key", pub, NULL };
	const char *path;
	struct fake_server f;
	struct http_client c;
	struct auth a;
	const char *tok;
	json_t *doc, *log;
	struct err e;

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", auth_dir);
	sts_start(&f, args);
	setenv("SLICECTL_IAM_CREDENTIALS_ENDPOINT", f.base, 1);
	snprintf(uri, sizeof(uri), "%s/token", f.base);
	/* The source's own token_uri is honoured, its JWT verified. */
	doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}",
			"type", "impersonated_service_account",
			"service_account_impersonation_url", IAM_URL,
			"source_credentials", "type", "service_account",
			"client_email", "src@proj.iam.gserviceaccount.com",
			"private_key", pem, "private_key_id", "kid",
			"token_uri", uri);
	path = creds_json(doc);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.impersonated-", 18), "%s", tok);
	log = sts_log(&f);
	cr_assert_str_eq(member(nth_request(log, "/token", 0), "form",
				"grant_type"),
			 "urn:ietf:params:oauth:grant-type:jwt-bearer");
	cr_assert_eq(json_array_get(json_object_get(json_object_get(
		nth_request(log, "generateAccessToken", 0), "json"),
		"delegates"), 0), NULL);
	json_decref(log);

	/* The source may not impersonate the account: the message names
	 * the file, the permission and the role that grants it. */
	sts_config(&f, "{\"impersonable\": [\"other@p.iam."
		   "gserviceaccount.com\"]}");
	auth_invalidate(&a);
	err_init(&e);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(strstr(e.msg, "iam.serviceAccounts.getAccessToken"), "%s",
		  e.msg);
	cr_assert(strstr(e.msg, "roles/iam.serviceAccountTokenCreator"),
		  "%s", e.msg);
	auth_release(&a);

	/* A source the token endpoint refuses: said with both names. */
	sts_config(&f, "{\"impersonable\": null}");
	doc = impersonated_doc();
	json_object_set_new(json_object_get(doc, "source_credentials"),
			    "refresh_token", json_string("revoked"));
	creds_json(doc);
	setenv("SLICECTL_TOKEN_URI", uri, 1);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "(source_credentials)"), "%s", e.msg);
	cr_assert(strstr(e.msg, "expired or revoked"), "%s", e.msg);
	cr_assert(!strstr(e.msg, "csecret"), "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
	fake_server_stop(&f);
	free(pem);
}

/* An external_account file as `gcloud iam workload-identity-pools
 * create-cred-config --credential-source-file` writes it. */
static json_t *external_file_doc(const char *subject_path,
				 const char *token_url)
{
	json_t *doc = json_pack("{s:s, s:s, s:s, s:{s:s}}",
				"type", "external_account",
				"audience", WORKLOAD_AUD,
				"subject_token_type", JWT_TYPE,
				"credential_source", "file", subject_path);

	if (token_url)
		json_object_set_new(doc, "token_url", json_string(token_url));
	return doc;
}

Test(auth, external_account_file_source)
{
	struct fake_server f;
	struct http_client c;
	struct auth a;
	const char *tok;
	char subject[300], url[128];
	const char *path;
	json_t *log, *r;
	struct err e;

	sts_start(&f, NULL);
	sts_config(&f, "{\"audience\": \"" WORKLOAD_AUD "\", "
		   "\"subject_token\": \"eyJ.subject.sig\"}");
	snprintf(subject, sizeof(subject), "%s/subject.jwt", auth_dir);
	/* An editor's newline is not part of the token. */
	write_text(subject, "eyJ.subject.sig\n");
	snprintf(url, sizeof(url), "%s/v1/token", f.base);
	path = creds_json(external_file_doc(subject, url));
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_EXTERNAL);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.sts-", 9), "%s", tok);
	log = sts_log(&f);
	cr_assert_eq(json_array_size(log), 1);
	r = nth_request(log, "/v1/token", 0);
	cr_assert_str_eq(member(r, "form", "grant_type"),
			 "urn:ietf:params:oauth:grant-type:token-exchange");
	cr_assert_str_eq(member(r, "form", "requested_token_type"),
			 "urn:ietf:params:oauth:token-type:access_token");
	cr_assert_str_eq(member(r, "form", "scope"), AUTH_SCOPE);
	cr_assert_str_eq(member(r, "form", "audience"), WORKLOAD_AUD);
	cr_assert_str_eq(member(r, "form", "subject_token_type"), JWT_TYPE);
	cr_assert_str_eq(member(r, "form", "subject_token"),
			 "eyJ.subject.sig");
	cr_assert_null(json_object_get(json_object_get(r, "form"),
				       "options"));
	json_decref(log);

	/* STS is briefly unavailable: retried like any Google API. */
	cr_assert_eq(fake_server_faults(&f, "{\"path\": \"^/v1/token\", "
				       "\"status\": 503}"), 0);
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	log = sts_log(&f);
	cr_assert_eq(count_path(log, "/v1/token"), 2);
	json_decref(log);

	/* The subject token is read again for every exchange: a rotated
	 * token the pool does not accept is refused, and said so. */
	write_text(subject, "eyJ.stale.sig");
	auth_invalidate(&a);
	err_init(&e);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(strstr(e.msg, "invalid_grant"), "%s", e.msg);
	cr_assert(!strstr(e.msg, "eyJ.stale.sig"), "%s", e.msg);

	/* And a subject file that is gone is named. */
	cr_assert_eq(unlink(subject), 0);
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, subject), "%s", e.msg);
	cr_assert(strstr(e.msg, "credential_source.file"), "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
	fake_server_stop(&f);
}

Test(auth, external_account_url_source_workforce_and_impersonation)
{
	struct fake_server f;
	struct http_client c;
	struct auth a;
	const char *tok;
	char url[128];
	json_t *doc, *log, *r;
	struct err e;

	sts_start(&f, NULL);
	/* No token_url in the file: the default, rebased by the test. */
	point_at(&f);
	sts_config(&f, "{\"audience\": \"" WORKFORCE_AUD "\", "
		   "\"subject_token\": \"idp-token\", \"subject_headers\": "
		   "{\"X-Identity\": \"yes\"}}");
	snprintf(url, sizeof(url), "%s/subject/json", f.base);
	doc = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:{s:s}, "
			"s:{s:s, s:s}}}",
			"type", "external_account",
			"audience", WORKFORCE_AUD,
			"subject_token_type",
			"urn:ietf:params:oauth:token-type:id_token",
			"workforce_pool_user_project", "billing-proj",
			"credential_source", "url", url,
			"headers", "X-Identity", "yes",
			"format", "type", "json",
			"subject_token_field_name", "id_token");
	creds_json(json_deep_copy(doc));
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.sts-", 9), "%s", tok);
	log = sts_log(&f);
	cr_assert_eq(count_path(log, "/subject/json"), 1);
	r = nth_request(log, "/v1/token", 0);
	cr_assert_str_eq(member(r, "form", "subject_token"), "idp-token");
	cr_assert_str_eq(member(r, "form", "options"),
			 "{\"userProject\":\"billing-proj\"}");
	json_decref(log);
	auth_release(&a);

	/* With impersonation the STS token only buys the account's, and
	 * the account's project is billed: no userProject. */
	json_object_set_new(doc, "service_account_impersonation_url",
			    json_string(IAM_URL));
	creds_json(doc);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.impersonated-", 18), "%s", tok);
	log = sts_log(&f);
	r = nth_request(log, "/v1/token", 0);
	cr_assert_null(json_object_get(json_object_get(r, "form"),
				       "options"));
	r = nth_request(log, ":generateAccessToken", 0);
	cr_assert(!strncmp(member(r, "headers", "authorization"),
			   "Bearer ya29.sts-", 16));
	json_decref(log);

	/* The identity provider wants its header. */
	sts_config(&f, "{\"subject_headers\": {\"X-Identity\": \"other\"}}");
	auth_invalidate(&a);
	err_init(&e);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "credential_source.url"), "%s", e.msg);
	cr_assert(strstr(e.msg, "HTTP 403"), "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
	fake_server_stop(&f);
}

static void expect_bad_json(json_t *doc, const char *want)
{
	struct auth a;
	struct err e;
	const char *path = creds_json(doc);

	err_init(&e);
	cr_assert_eq(auth_init(&a, &e), CLOUD_EAUTH, "want %s", want);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(strstr(e.msg, want), "want \"%s\" in: %s", want, e.msg);
}

Test(auth, keyless_files_that_cannot_work)
{
	json_t *d;

	d = external_file_doc("/x", NULL);
	json_object_set_new(d, "credential_source", json_pack(
		"{s:s, s:s, s:s}", "environment_id", "aws1", "region_url",
		"http://169.254.169.254/latest/meta-data/placement/"
		"availability-zone", "url", "http://169.254.169.254/x"));
	expect_bad_json(d, "AWS credential source (\"environment_id\"): not "
			"supported: use a file or url source");
	d = external_file_doc("/x", NULL);
	json_object_set_new(d, "credential_source", json_pack(
		"{s:{s:s}}", "executable", "command", "/bin/idp"));
	expect_bad_json(d, "executable credential source (\"executable\"): "
			"not supported: use a file or url source");
	d = external_file_doc("/x", NULL);
	json_object_del(d, "audience");
	expect_bad_json(d, "\"audience\" is missing; make the file again "
			"with `gcloud iam workload-identity-pools "
			"create-cred-config`");
	d = external_file_doc("/x", NULL);
	json_object_del(d, "credential_source");
	expect_bad_json(d, "\"credential_source\" is missing");
	d = external_file_doc("/x", NULL);
	json_object_set_new(json_object_get(d, "credential_source"), "url",
			    json_string("http://127.0.0.1:9/"));
	expect_bad_json(d, "has both \"file\" and \"url\"");
	d = external_file_doc("/x", NULL);
	json_object_set_new(json_object_get(d, "credential_source"),
			    "format", json_pack("{s:s}", "type", "json"));
	expect_bad_json(d, "(credential_source.format): "
			"\"subject_token_field_name\" is missing; make the "
			"file again");
	d = external_file_doc("/x", NULL);
	json_object_set_new(json_object_get(d, "credential_source"), "file",
			    json_integer(3));
	expect_bad_json(d, "(credential_source): \"file\" is not a "
			"non-empty string");
	d = external_file_doc("/x", NULL);
	json_object_set_new(json_object_get(d, "credential_source"),
			    "format", json_pack("{s:s}", "type", "xml"));
	expect_bad_json(d, "\"format\" is not {\"type\": \"text\"}");
	d = external_file_doc("/x", NULL);
	json_object_set_new(json_object_get(d, "credential_source"),
			    "headers", json_pack("{s:s}", "A", "b"));
	expect_bad_json(d, "\"headers\" is only for a url source");
	d = external_file_doc("/x", NULL);
	json_object_set_new(d, "workforce_pool_user_project",
			    json_string("p"));
	expect_bad_json(d, "\"workforce_pool_user_project\" is only for a "
			"workforce pool");
	d = external_file_doc("/x", NULL);
	json_object_set_new(d, "service_account_impersonation_url",
			    json_string("https://iamcredentials.googleapis."
					"com/v1/projects/-/serviceAccounts/"
					"a@b:signBlob"));
	expect_bad_json(d, "\"service_account_impersonation_url\" is not an "
			"IAM Credentials URL");

	d = impersonated_doc();
	json_object_del(d, "source_credentials");
	expect_bad_json(d, "\"source_credentials\" is missing; run `gcloud "
			"auth application-default login "
			"--impersonate-service-account=EMAIL` again");
	d = impersonated_doc();
	json_object_set_new(d, "source_credentials",
			    external_file_doc("/x", NULL));
	expect_bad_json(d, "has type \"external_account\"; the source of an "
			"impersonated service account must be");
	d = impersonated_doc();
	json_object_del(json_object_get(d, "source_credentials"),
			"client_secret");
	expect_bad_json(d, "(source_credentials): \"client_secret\" is "
			"missing; run `gcloud auth application-default login "
			"--impersonate-service-account=EMAIL` again");
	d = impersonated_doc();
	json_object_del(d, "service_account_impersonation_url");
	expect_bad_json(d, "\"service_account_impersonation_url\" is "
			"missing");
	d = impersonated_doc();
	json_object_set_new(d, "delegates", json_string("a@b"));
	expect_bad_json(d, "\"delegates\" is not a list");
}
