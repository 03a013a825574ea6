/*
 * tests/cloud/test_auth.c: every token source in its order, against the
 * GCS fake's OAuth endpoint (which verifies the JWT's RS256 signature with
 * the public half of a key made here by openssl) and a loopback stand-in
 * for the metadata server; impersonated service accounts and external
 * accounts (Workload Identity Federation) against tests/fakes/sts_fake.py
 * (STS, IAM Credentials and OAuth, each checking requests as Google's
 * do); bad credential files; the cache and its renewal.
 */
#include "cloud/auth.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/cloud/fake_server.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/slicectl-auth-XXXXXX";

static void clean_env(void)
{
	unsetenv("SLICECTL_ACCESS_TOKEN");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TOKEN_URI");
	unsetenv("STORAGE_EMULATOR_HOST");
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("SLICECTL_STS_ENDPOINT");
	unsetenv("SLICECTL_IAM_CREDENTIALS_ENDPOINT");
	/* No gcloud ADC file, and no metadata server. */
	setenv("HOME", dir, 1);
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
}

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	clean_env();
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(auth, .init = setup, .fini = teardown);

static void fast_client(struct http_client *c)
{
	struct http_policy p;
	struct err e;

	http_policy_default(&p);
	p.backoff_base_ms = 5;
	p.backoff_max_ms = 20;
	p.stall_ms = 2000;
	p.connect_timeout_ms = 2000;
	cr_assert_eq(http_client_init(c, &p, &e), 0);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* Makes DIR/NAME.pem (private) and DIR/NAME.pub.pem; returns the PEM. */
static char *make_key(const char *name)
{
	char cmd[512], path[300];
	size_t len;
	FILE *f;
	char *pem;

	snprintf(cmd, sizeof(cmd),
		 "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 "
		 "-out '%s/%s.pem' 2>/dev/null && openssl pkey -in '%s/%s.pem' "
		 "-pubout -out '%s/%s.pub.pem'", dir, name, dir, name, dir,
		 name);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/%s.pem", dir, name);
	f = fopen(path, "r");
	cr_assert(f);
	pem = calloc(1, 8192);
	len = fread(pem, 1, 8191, f);
	fclose(f);
	cr_assert_gt(len, 100);
	return pem;
}

/* A service-account key file, as `gcloud iam service-accounts keys
 * create` writes it; returns its path (static). */
static const char *sa_file(const char *pem, const char *token_uri)
{
	static char path[300];
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}",
			      "type", "service_account",
			      "project_id", "proj",
			      "private_key_id", "kid-123",
			      "private_key", pem,
			      "client_email", "sa@proj.iam.gserviceaccount.com",
			      "client_id", "1234");

	if (token_uri)
		json_object_set_new(o, "token_uri", json_string(token_uri));
	snprintf(path, sizeof(path), "%s/sa.json", dir);
	cr_assert_eq(json_dump_file(o, path, 0), 0);
	json_decref(o);
	return path;
}

Test(auth, static_token_comes_first)
{
	struct auth a;
	struct http_client c;
	const char *tok;
	struct err e;

	setenv("SLICECTL_ACCESS_TOKEN", "ya29.given", 1);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent.json", 1);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_STATIC);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0);
	cr_assert_str_eq(tok, "ya29.given");
	cr_assert_not(auth_renewable(&a));
	http_client_release(&c);
	auth_release(&a);
}

static void expect_bad_file(const char *content, const char *want)
{
	char path[300];
	struct auth a;
	struct err e;

	snprintf(path, sizeof(path), "%s/creds.json", dir);
	write_text(path, content);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	err_init(&e);
	cr_assert_eq(auth_init(&a, &e), CLOUD_EAUTH, "%s", content);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(strstr(e.msg, want), "want \"%s\" in: %s", want, e.msg);
}

Test(auth, bad_credentials_files)
{
	struct auth a;
	struct err e;

	setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json", 1);
	cr_assert_eq(auth_init(&a, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "/nonexistent/key.json"), "%s", e.msg);
	cr_assert(strstr(e.msg, "No such file"), "%s", e.msg);

	expect_bad_file("{ not json", "is not JSON");
	expect_bad_file("[1, 2]", "not a JSON object");
	expect_bad_file("{\"type\": \"gdch_service_account\"}",
			"\"gdch_service_account\" is not supported");
	expect_bad_file("{\"client_email\": \"x\"}", "(missing)");
	expect_bad_file("{\"type\": \"service_account\", \"private_key\": "
			"\"x\"}", "\"client_email\" is missing");
	expect_bad_file("{\"type\": \"service_account\", \"client_email\": "
			"\"a@b\", \"private_key\": 7}",
			"\"private_key\" is not");
	expect_bad_file("{\"type\": \"service_account\", \"client_email\": "
			"\"a@b\", \"private_key\": "
			"\"-----BEGIN PRIVATE KEY-----\\nAAAA\\n"
			"-----END PRIVATE KEY-----\\n\"}",
			"not a PEM private key");
	expect_bad_file("{\"type\": \"authorized_user\", \"client_id\": "
			"\"c\", \"client_secret\": \"s\"}",
			"\"refresh_token\" is missing");
}

/* Splits a JWT and checks its signature with the public key file. */
static void check_jwt(const char *jwt, const char *pub_path)
{
	const char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : 0;
	unsigned char sig[1024];
	size_t sig_len = 0, n;
	char b64[2048];
	FILE *f = fopen(pub_path, "r");
	EVP_PKEY *pub;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	cr_assert(d1 && d2 && !strchr(d2 + 1, '.'));
	cr_assert_eq(strcspn(jwt, "+/="), strlen(jwt), "not base64url");
	n = strlen(d2 + 1);
	cr_assert_lt(n, sizeof(b64) - 4);
	for (size_t i = 0; i < n; i++)
		b64[i] = d2[1 + i] == '-' ? '+' : d2[1 + i] == '_' ? '/'
								 : d2[1 + i];
	while (n % 4)
		b64[n++] = '=';
	cr_assert_eq(base64_decode(b64, n, sig, sizeof(sig), &sig_len), 0);
	cr_assert(f);
	pub = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	fclose(f);
	cr_assert(pub);
	cr_assert_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub),
		     1);
	cr_assert_eq(EVP_DigestVerify(md, sig, sig_len,
				      (const unsigned char *)jwt,
				      (size_t)(d2 - jwt)), 1);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pub);
}

static json_t *jwt_part(const char *start, size_t len)
{
	char b64[2048];
	unsigned char raw[2048];
	size_t n = 0, out;

	for (size_t i = 0; i < len; i++)
		b64[n++] = start[i] == '-' ? '+' : start[i] == '_' ? '/'
								   : start[i];
	while (n % 4)
		b64[n++] = '=';
	cr_assert_eq(base64_decode(b64, n, raw, sizeof(raw), &out), 0);
	return json_loadb((char *)raw, out, 0, NULL);
}

Test(auth, jwt_is_rs256_with_the_claims_google_wants)
{
	char *pem = make_key("k");
	char pub[300];
	EVP_PKEY *key;
	char *jwt;
	struct err e;
	json_t *h, *c;
	const char *d1;

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", dir);
	cr_assert_eq(jwt_load_key(pem, &key, &e), 0, "%s", e.msg);
	cr_assert_eq(jwt_service_account(key, "kid-1", "sa@p.iam", AUTH_SCOPE,
					 AUTH_TOKEN_URI, 1700000000, &jwt, &e),
		     0, "%s", e.msg);
	check_jwt(jwt, pub);
	d1 = strchr(jwt, '.');
	h = jwt_part(jwt, (size_t)(d1 - jwt));
	c = jwt_part(d1 + 1, strcspn(d1 + 1, "."));
	cr_assert(h && c);
	cr_assert_str_eq(json_string_value(json_object_get(h, "alg")),
			 "RS256");
	cr_assert_str_eq(json_string_value(json_object_get(h, "typ")), "JWT");
	cr_assert_str_eq(json_string_value(json_object_get(h, "kid")),
			 "kid-1");
	cr_assert_str_eq(json_string_value(json_object_get(c, "iss")),
			 "sa@p.iam");
	cr_assert_str_eq(json_string_value(json_object_get(c, "scope")),
			 "https://www.googleapis.com/auth/cloud-platform "
			 "https://www.googleapis.com/auth/userinfo.email");
	cr_assert_str_eq(json_string_value(json_object_get(c, "aud")),
			 "https://oauth2.googleapis.com/token");
	cr_assert_eq(json_integer_value(json_object_get(c, "iat")),
		     1700000000);
	cr_assert_eq(json_integer_value(json_object_get(c, "exp")),
		     1700003600);
	json_decref(h);
	json_decref(c);
	free(jwt);
	EVP_PKEY_free(key);
	free(pem);
}

static unsigned token_posts(struct fake_gcs *f)
{
	char *log = NULL;
	json_t *arr;
	unsigned n = 0;
	size_t i;
	json_t *v;

	cr_assert_eq(fake_gcs_call(f, "GET", "/_fake/requests", NULL, &log),
		     200);
	arr = json_loads(log, 0, NULL);
	json_array_foreach(arr, i, v)
		if (!strcmp(json_string_value(json_object_get(v, "path")),
			    "/token"))
			n++;
	json_decref(arr);
	free(log);
	return n;
}

Test(auth, service_account_through_the_token_endpoint)
{
	char *pem = make_key("k");
	char pub[300], uri[128];
	const char *args[] = { "--jwt-public-key", pub, NULL };
	struct fake_gcs f;
	struct http_client c;
	struct auth a;
	const char *tok;
	char first[128];
	struct err e;

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", dir);
	cr_assert_eq(fake_gcs_start(&f, args), 0);
	snprintf(uri, sizeof(uri), "%s/token", f.base);
	/* The file's own token_uri is honoured. */
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa_file(pem, uri), 1);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_SERVICE_ACCOUNT);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert(!strncmp(tok, "ya29.fake-", 10), "%s", tok);
	snprintf(first, sizeof(first), "%s", tok);
	/* Cached: no second exchange. */
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_eq(tok, first);
	cr_assert_eq(token_posts(&f), 1);
	/* After a 401 the caller invalidates it: a new exchange. */
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_eq(token_posts(&f), 2);
	auth_release(&a);

	/* SLICECTL_TOKEN_URI wins over the file; a key the endpoint does
	 * not know is refused, and the message says which file. */
	free(pem);
	pem = make_key("other");
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	       sa_file(pem, "https://oauth2.googleapis.com/token"), 1);
	setenv("SLICECTL_TOKEN_URI", uri, 1);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "Invalid JWT Signature"), "%s", e.msg);
	cr_assert(strstr(e.msg, "sa.json"), "%s", e.msg);
	cr_assert_eq(token_posts(&f), 3);
	auth_release(&a);
	http_client_release(&c);
	fake_gcs_stop(&f);
	free(pem);
}

Test(auth, authorized_user_refresh_and_the_adc_file)
{
	struct fake_gcs f;
	struct http_client c;
	struct auth a;
	const char *tok;
	const char *args[] = { "--require-token", "ya29.user-token", NULL };
	char path[300], uri[128];
	struct err e;

	cr_assert_eq(fake_gcs_start(&f, args), 0);
	snprintf(uri, sizeof(uri), "%s/token", f.base);
	setenv("SLICECTL_TOKEN_URI", uri, 1);
	/* No GOOGLE_APPLICATION_CREDENTIALS: gcloud's ADC file is used. */
	snprintf(path, sizeof(path), "%s/.config", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/.config/gcloud", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path),
		 "%s/.config/gcloud/application_default_credentials.json", dir);
	write_text(path, "{\"type\": \"authorized_user\", \"client_id\": "
			 "\"cid\", \"client_secret\": \"csecret\", "
			 "\"refresh_token\": \"1//refresh\"}");
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_AUTHORIZED_USER);
	cr_assert_str_eq(a.source, path);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_eq(tok, "ya29.user-token");
	auth_release(&a);

	write_text(path, "{\"type\": \"authorized_user\", \"client_id\": "
			 "\"cid\", \"client_secret\": \"csecret\", "
			 "\"refresh_token\": \"revoked\"}");
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "expired or revoked"), "%s", e.msg);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(!strstr(e.msg, "csecret"), "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
	fake_gcs_stop(&f);
}

Test(auth, metadata_server)
{
	static const struct tiny_answer ans[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		  "Metadata-Flavor: Google\r\nContent-Length: *\r\n\r\n"
		  "{\"access_token\":\"ya29.vm\",\"expires_in\":3599,"
		  "\"token_type\":\"Bearer\"}", 0, false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: *\r\n\r\n<html>", 0,
		  false },
	};
	struct tiny_http srv;
	struct http_client c;
	struct auth a;
	const char *tok;
	char host[64], *log;
	struct err e;

	cr_assert_eq(tiny_start(&srv, ans, 2), 0);
	snprintf(host, sizeof(host), "127.0.0.1:%u", srv.port);
	setenv("GCE_METADATA_HOST", host, 1);
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_METADATA);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_eq(tok, "ya29.vm");
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_eq(tiny_requests(&srv), 1);
	log = tiny_log(&srv);
	cr_assert(strstr(log, "GET /computeMetadata/v1/instance/"
			      "service-accounts/default/token HTTP/1.1"),
		  "%s", log);
	cr_assert(strstr(log, "\r\nMetadata-Flavor: Google\r\n"), "%s", log);
	free(log);
	/* Garbage instead of a token. */
	auth_invalidate(&a);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_ECORRUPT);
	cr_assert(strstr(e.msg, "without an access_token"), "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
	tiny_stop(&srv);
}

Test(auth, no_credentials_anywhere)
{
	struct http_client c;
	struct auth a;
	const char *tok;
	struct err e;

	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(a.kind, AUTH_METADATA);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), CLOUD_EAUTH);
	cr_assert(strstr(e.msg, "no credentials"), "%s", e.msg);
	cr_assert(strstr(e.msg, "gcloud auth application-default login"),
		  "%s", e.msg);
	auth_release(&a);
	http_client_release(&c);
}

/* ------------------------------------------------ keyless credentials */

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

	snprintf(path, sizeof(path), "%s/creds.json", dir);
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
	cr_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(body, "scope"), 0)),
			 AUTH_SCOPE);
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
	json_t *log;
	struct err e;

	sts_start(&f, NULL);
	point_at(&f);
	/* A 2 s token is renewed 1 s (half its life) before its end. */
	sts_config(&f, "{\"impersonated_expires_in\": 2}");
	creds_json(impersonated_doc());
	cr_assert_eq(auth_init(&a, &e), 0, "%s", e.msg);
	fast_client(&c);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	snprintf(first, sizeof(first), "%s", tok);
	usleep(1300 * 1000);
	cr_assert_eq(auth_token(&a, &c, &tok, &e), 0, "%s", e.msg);
	cr_assert_str_neq(tok, first);
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

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", dir);
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
	snprintf(subject, sizeof(subject), "%s/subject.jwt", dir);
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
