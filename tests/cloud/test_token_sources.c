/*
 * tests/cloud/test_token_sources.c: every token source in its order:
 * against the GCS fake's OAuth endpoint (which verifies the JWT's RS256
 * signature with the public half of a key made here by openssl), a
 * service account's and a user's files, a loopback stand-in for the
 * metadata server; bad credential files.
 */
#include "cloud/auth.h"
#include "tests/cloud/auth_check.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(auth, .init = auth_setup, .fini = auth_teardown);

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
	snprintf(path, sizeof(path), "%s/sa.json", auth_dir);
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

	snprintf(path, sizeof(path), "%s/creds.json", auth_dir);
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

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", auth_dir);
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

	snprintf(pub, sizeof(pub), "%s/k.pub.pem", auth_dir);
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
	snprintf(path, sizeof(path), "%s/.config", auth_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/.config/gcloud", auth_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path),
		 "%s/.config/gcloud/application_default_credentials.json", auth_dir);
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
