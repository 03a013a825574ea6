/*
 * tests/kube/test_client.c: the requests as sent (paths, queries, headers,
 * bodies), each error with the server's Status message and its hint, the
 * retries (429 with Retry-After, 5xx, drops, stalls) and their bound, and
 * TLS: the cluster's CA pinned (a server signed by another CA is refused,
 * even one the system would trust), a client certificate, insecure mode.
 */
#include "tests/cloud/tiny_http.h"
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define NS "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"

static struct kstub stub;

static void setup(void)
{
	memset(&stub, 0, sizeof(stub));
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("SLICECTL_HTTP_STALL_SECONDS");
}

static void teardown(void)
{
	kstub_stop(&stub);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 60);

static json_t *request(size_t i)
{
	json_t *all = kstub_requests(&stub);
	json_t *r = json_incref(json_array_get(all, i));

	cr_assert(r, "no request %zu", i);
	json_decref(all);
	return r;
}

static const char *field(json_t *r, const char *name)
{
	const char *v = json_string_value(json_object_get(r, name));

	cr_assert(v, "no %s", name);
	return v;
}

static const char *header(json_t *r, const char *name)
{
	return json_string_value(json_object_get(json_object_get(r,
								 "headers"),
						 name));
}

Test(client, create_get_list_delete_as_sent)
{
	struct kube_client *k = kstub_client(&stub,
		"[{\"method\": \"POST\", \"status\": 201, \"body\": "
		"{\"kind\": \"JobSet\", \"metadata\": {\"name\": \"r1\", "
		"\"uid\": \"u-1\"}}},"
		"{\"method\": \"GET\", \"path\": \"" NS "/r1\", \"body\": "
		"{\"kind\": \"JobSet\", \"metadata\": {\"name\": \"r1\"}}},"
		"{\"method\": \"GET\", \"path\": \"" NS "?\", \"body\": "
		"{\"kind\": \"JobSetList\", \"metadata\": {}, \"items\": "
		"[{\"metadata\": {\"name\": \"r1\"}}]}},"
		"{\"method\": \"DELETE\", \"body\": {\"kind\": \"Status\", "
		"\"status\": \"Success\"}}]");
	json_t *obj = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion",
				"jobset.x-k8s.io/v1alpha2", "kind", "JobSet",
				"metadata", "name", "r1");
	json_t *out = NULL, *r;
	struct err e;

	err_init(&e);
	cr_assert_eq(kube_create(k, NS, obj, true, &out, &e), 0, "%s", e.msg);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(out, "metadata"), "uid")),
			 "u-1");
	json_decref(out);
	cr_assert_eq(kube_get(k, NS "/r1", &out, &e), 0, "%s", e.msg);
	json_decref(out);
	cr_assert_eq(kube_list(k, NS, "slicectl.dev/run=r1,app in (a b)",
			       &out, &e), 0, "%s", e.msg);
	cr_assert_eq(json_array_size(json_object_get(out, "items")), 1);
	json_decref(out);
	cr_assert_eq(kube_delete(k, NS "/r1", "Foreground", &e), 0, "%s",
		     e.msg);

	r = request(0);
	cr_assert_str_eq(field(r, "method"), "POST");
	cr_assert_str_eq(field(r, "path"), NS "?fieldManager=slicectl&"
			 "fieldValidation=Strict&dryRun=All");
	cr_assert_str_eq(header(r, "authorization"), "Bearer tok");
	cr_assert_str_eq(header(r, "content-type"), "application/json");
	cr_assert_str_eq(header(r, "accept"), "application/json");
	out = json_loads(field(r, "body"), 0, NULL);
	cr_assert(json_equal(out, obj), "body %s", field(r, "body"));
	json_decref(out);
	json_decref(r);
	r = request(2);
	cr_assert_str_eq(field(r, "path"), NS "?labelSelector=slicectl.dev"
			 "%2Frun%3Dr1%2Capp%20in%20%28a%20b%29");
	json_decref(r);
	r = request(3);
	cr_assert_str_eq(field(r, "method"), "DELETE");
	cr_assert_str_eq(field(r, "path"), NS "/r1?propagationPolicy="
			 "Foreground");
	json_decref(r);
	json_decref(obj);
	kube_client_free(k);
}

/* A Status answer as the API server writes it (extra: more answer
 * fields, such as "\"repeat\": true, "). */
#define STATUS_A(extra, code, reason, msg, details)                        \
	"{" extra "\"status\": " #code ", \"body\": {\"kind\": \"Status\", " \
	"\"apiVersion\": \"v1\", \"metadata\": {}, \"status\": \"Failure\", " \
	"\"message\": \"" msg "\", \"reason\": \"" reason "\", \"details\": " \
	details ", \"code\": " #code "}}"
#define STATUS(code, reason, msg, details) \
	STATUS_A("", code, reason, msg, details)

static size_t requests_seen(void)
{
	json_t *all = kstub_requests(&stub);
	size_t n = json_array_size(all);

	json_decref(all);
	return n;
}

static int fails(const char *script, const char *method, const char *path,
		 struct err *e)
{
	struct kube_client *k = kstub_client(&stub, script);
	json_t *obj = json_pack("{s:{s:s}}", "metadata", "name", "r1");
	json_t *out = NULL;
	int rc;

	err_init(e);
	if (strcmp(method, "POST") == 0)
		rc = kube_create(k, path, obj, false, &out, e);
	else if (strcmp(method, "DELETE") == 0)
		rc = kube_delete(k, path, NULL, e);
	else
		rc = kube_get(k, path, &out, e);
	cr_assert_null(out);
	json_decref(obj);
	kube_client_free(k);
	return rc;
}

static void assert_msg(const struct err *e, const char *want)
{
	cr_assert(strstr(e->msg, want), "message:\n  %s\nlacks:\n  %s",
		  e->msg, want);
}

Test(client, error_422_names_the_fields)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(422, "Invalid", "JobSet.jobset.x-k8s.io "
				      "\\\"r1\\\" is invalid: spec.replicatedJobs"
				      "[0].replicas: Invalid value: -1: must be "
				      "greater than or equal to 0",
				      "{\"name\": \"r1\", \"group\": "
				      "\"jobset.x-k8s.io\", \"kind\": "
				      "\"JobSet\", \"causes\": [{\"reason\": "
				      "\"FieldValueInvalid\", \"message\": "
				      "\"Invalid value\", \"field\": "
				      "\"spec.replicatedJobs[0].replicas\"}]}")
			   "]", "POST", NS, &e), KUBE_EINVALID);
	assert_msg(&e, "POST " NS ": 422 Unprocessable Entity: JobSet."
		   "jobset.x-k8s.io \"r1\" is invalid: spec.replicatedJobs[0]"
		   ".replicas: Invalid value: -1");
	assert_msg(&e, "; the server refused spec.replicatedJobs[0].replicas "
		   "(FieldValueInvalid)");
	cr_assert_null(strstr(e.msg, "?"), "the query is left out: %s",
		       e.msg);
}

Test(client, error_403_names_the_rbac_rule)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(403, "Forbidden", "jobsets.jobset.x-k8s"
				      ".io is forbidden: User \\\"alice@x\\\" "
				      "cannot create resource \\\"jobsets\\\" in"
				      " API group \\\"jobset.x-k8s.io\\\" in the "
				      "namespace \\\"default\\\"",
				      "{\"group\": \"jobset.x-k8s.io\", "
				      "\"kind\": \"jobsets\"}") "]",
			   "POST", NS, &e), KUBE_EFORBIDDEN);
	assert_msg(&e, ": 403 Forbidden: jobsets.jobset.x-k8s.io is "
		   "forbidden: User \"alice@x\" cannot create");
	assert_msg(&e, "; the account lacks the RBAC permission to create "
		   "jobsets.jobset.x-k8s.io in namespace default: it needs a "
		   "Role (or ClusterRole) with apiGroups [\"jobset.x-k8s.io\"]"
		   ", resources [\"jobsets\"], verbs [\"create\"]");
}

Test(client, error_403_verb_from_the_request)
{
	struct err e;

	/* No "cannot VERB" in the message: the verb comes from the
	 * request (a GET of a collection is list), the resource from the
	 * path. */
	cr_assert_eq(fails("[" STATUS(403, "Forbidden", "forbidden", "{}")
			   "]", "GET", "/api/v1/namespaces/ns1/pods", &e),
		     KUBE_EFORBIDDEN);
	assert_msg(&e, "permission to list pods in namespace ns1: it needs a "
		   "Role (or ClusterRole) with apiGroups [\"\"], resources "
		   "[\"pods\"], verbs [\"list\"]");
}

Test(client, error_404_jobset_not_installed)
{
	struct err e;

	/* What an API server without the JobSet CRD answers. */
	cr_assert_eq(fails("[{\"status\": 404, \"body\": \"404 page not "
			   "found\\n\"}]", "POST", NS, &e), KUBE_ENOTFOUND);
	assert_msg(&e, "POST " NS ": 404 Not Found: 404 page not found; ");
	assert_msg(&e, "; JobSet is not installed on this cluster: kubectl "
		   "apply --server-side -f https://github.com/kubernetes-sigs/"
		   "jobset/releases/download/v0.10.1/manifests.yaml");
}

Test(client, error_404_kueue_not_installed)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(404, "NotFound", "the server could not "
				      "find the requested resource", "{}") "]",
			   "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/"
			   "default/workloads", &e), KUBE_ENOTFOUND);
	assert_msg(&e, "; Kueue is not installed on this cluster: kubectl "
		   "apply --server-side -f https://github.com/kubernetes-sigs/"
		   "kueue/releases/download/v0.19.2/manifests.yaml");
}

Test(client, error_404_missing_objects)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(404, "NotFound", "jobsets.jobset.x-k8s"
				      ".io \\\"r9\\\" not found",
				      "{\"name\": \"r9\", \"group\": "
				      "\"jobset.x-k8s.io\", \"kind\": "
				      "\"jobsets\"}") "]", "GET", NS "/r9", &e),
		     KUBE_ENOTFOUND);
	assert_msg(&e, "404 Not Found: jobsets.jobset.x-k8s.io \"r9\" not "
		   "found; there is no \"r9\" among the jobsets in namespace "
		   "\"default\"");
	kstub_stop(&stub);
	cr_assert_eq(fails("[" STATUS(404, "NotFound", "localqueues.kueue.x-"
				      "k8s.io \\\"lq\\\" not found",
				      "{\"name\": \"lq\", \"group\": "
				      "\"kueue.x-k8s.io\", \"kind\": "
				      "\"localqueues\"}") "]", "GET",
			   "/apis/kueue.x-k8s.io/v1beta1/namespaces/team/"
			   "localqueues/lq", &e), KUBE_ENOTFOUND);
	assert_msg(&e, "; there is no LocalQueue \"lq\" in namespace \"team\""
		   ": see `kubectl get localqueues -n team`");
	kstub_stop(&stub);
	cr_assert_eq(fails("[" STATUS(404, "NotFound", "namespaces \\\"nope\\"
				      "\" not found", "{\"name\": \"nope\", "
				      "\"kind\": \"namespaces\"}") "]", "POST",
			   "/apis/jobset.x-k8s.io/v1alpha2/namespaces/nope/"
			   "jobsets", &e), KUBE_ENOTFOUND);
	assert_msg(&e, "; the namespace \"nope\" does not exist: create it "
		   "(`kubectl create namespace nope`)");
}

Test(client, error_409_already_exists)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(409, "AlreadyExists", "jobsets.jobset.x-"
				      "k8s.io \\\"r1\\\" already exists",
				      "{\"name\": \"r1\", \"group\": "
				      "\"jobset.x-k8s.io\", \"kind\": "
				      "\"jobsets\"}") "]", "POST", NS, &e),
		     KUBE_ECONFLICT);
	assert_msg(&e, "409 Conflict: jobsets.jobset.x-k8s.io \"r1\" already "
		   "exists; the name \"r1\" is taken among the jobsets in "
		   "namespace \"default\": choose another name, or delete that "
		   "one first");
	cr_assert_null(strstr(e.msg, "earlier attempt"), "%s", e.msg);
}

Test(client, retried_create_that_conflicts_says_so)
{
	struct err e;

	cr_assert_eq(fails("[{\"status\": 503, \"body\": \"\"}, "
			   STATUS(409, "AlreadyExists", "exists", "{\"name\": "
				  "\"r1\"}") "]", "POST", NS, &e),
		     KUBE_ECONFLICT);
	assert_msg(&e, "(an earlier attempt of this request may have created "
		   "it)");
}

Test(client, error_401_static_token)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS(401, "Unauthorized", "Unauthorized",
				      "{}") "]", "GET", NS "/r1", &e),
		     KUBE_EAUTH);
	assert_msg(&e, "401 Unauthorized: Unauthorized; the token (the test) "
		   "was refused");
}

Test(client, error_500_webhook_bounded_retries)
{
	struct err e;

	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "1", 1);
	cr_assert_eq(fails("[" STATUS_A("\"repeat\": true, ", 500,
					"InternalError", "Internal error "
					"occurred: failed calling webhook "
					"\\\"mjobset.kb.io\\\": connection "
					"refused", "{}") "]", "POST", NS, &e),
		     KUBE_EHTTP);
	assert_msg(&e, "failed calling webhook \"mjobset.kb.io\": connection "
		   "refused (after retries); an admission webhook did not "
		   "answer");
	/* Bounded: the policy's 8 attempts. */
	cr_assert_eq(requests_seen(), 8);
}

Test(client, retry_after_is_honoured)
{
	struct err e;
	json_t *out = NULL;
	struct kube_client *k = kstub_client(&stub,
		"[" STATUS_A("\"headers\": {\"Retry-After\": \"1\"}, ", 429,
			     "TooManyRequests", "slow down", "{}") ","
		"{\"body\": {\"kind\": \"JobSet\"}}]");
	uint64_t t0 = mono_ms();

	err_init(&e);
	cr_assert_eq(kube_get(k, NS "/r1", &out, &e), 0, "%s", e.msg);
	cr_assert_geq(mono_ms() - t0, 1000, "waited %llu ms",
		      (unsigned long long)(mono_ms() - t0));
	cr_assert_eq(requests_seen(), 2);
	json_decref(out);
	kube_client_free(k);
}

Test(client, transient_failures_are_retried)
{
	struct err e;
	json_t *out = NULL;
	struct kube_client *k;

	/* A dropped connection, a 503, a 502 and a stalled body, then the
	 * answer. */
	setenv("SLICECTL_HTTP_STALL_SECONDS", "1", 1);
	k = kstub_client(&stub, "[{\"drop\": true}, {\"status\": 503}, "
		       "{\"status\": 502, \"body\": \"<html>bad gateway"
		       "</html>\"}, {\"stall_ms\": 3000, \"body\": "
		       "{\"kind\": \"Pod\", \"pad\": \"xxxxxxxxxxxx\"}}, "
		       "{\"body\": {\"kind\": \"Pod\"}}]");
	err_init(&e);
	cr_assert_eq(kube_get(k, "/api/v1/namespaces/d/pods/p", &out, &e), 0,
		     "%s", e.msg);
	cr_assert_str_eq(json_string_value(json_object_get(out, "kind")),
			 "Pod");
	cr_assert_eq(requests_seen(), 5);
	json_decref(out);
	kube_client_free(k);
}

Test(client, client_errors_are_not_retried)
{
	struct err e;

	cr_assert_eq(fails("[" STATUS_A("\"repeat\": true, ", 400,
					"BadRequest", "strict decoding error: "
					"unknown field \\\"spec.foo\\\"",
					"{}") "]", "POST", NS, &e), KUBE_EHTTP);
	assert_msg(&e, "400 Bad Request: strict decoding error: unknown field "
		   "\"spec.foo\"; the cluster does not know a field slicectl "
		   "sent");
	cr_assert_eq(requests_seen(), 1);
}

Test(client, no_answer)
{
	struct kube_config c;
	struct kube_client *k;
	struct err e;
	json_t *out = NULL;

	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "1", 1);
	kube_config_init(&c);
	/* Port 1 on loopback: nothing listens there. */
	c.server = strdup("http://127.0.0.1:1");
	err_init(&e);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(kube_get(k, "/api/v1/namespaces", &out, &e),
		     KUBE_ENETWORK);
	assert_msg(&e, "GET /api/v1/namespaces: no answer from "
		   "http://127.0.0.1:1 after retries: ");
	assert_msg(&e, "; is the cluster reachable from here");
	kube_client_free(k);
	kube_config_release(&c);
}

/* The bearer token goes to the server, and neither a debug log line nor
 * an error message (here a 401 whose body echoes it) shows it. */
Test(client, the_token_is_never_shown)
{
	struct kube_config c;
	struct kube_client *k;
	struct log_capture cap;
	json_t *out = NULL, *r;
	struct err e;
	char *text;

	kstub_start(&stub, "[{\"status\": 401, \"body\": \"Authorization: "
		    "Bearer kube-sekrit-42 refused\"}]", false, false);
	stub_config(&stub, &c);
	free(c.token);
	c.token = strdup("kube-sekrit-42");
	err_init(&e);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	kube_config_release(&c);
	cr_assert_eq(log_capture_begin(&cap), 0);
	cr_expect_eq(kube_get(k, NS "/r1", &out, &e), KUBE_EAUTH);
	text = log_capture_end(&cap);
	cr_assert(text);
	r = request(0);
	cr_expect_str_eq(header(r, "authorization"), "Bearer kube-sekrit-42");
	json_decref(r);
	cr_expect(strstr(text, "Authorization: <redacted>"), "%s", text);
	cr_expect_null(strstr(text, "sekrit"), "%s", text);
	cr_expect(strstr(e.msg, "401"), "%s", e.msg);
	cr_expect_null(strstr(e.msg, "sekrit"), "%s", e.msg);
	free(text);
	json_decref(out);
	kube_client_free(k);
}

/* ---- TLS ---- */

static struct kube_client *tls_client(bool client_ca, const char *ca_file,
				      bool insecure, bool client_cert)
{
	struct kube_config c;
	struct kube_client *k;
	struct err e;
	char path[400];

	scratch_make(stub.dir, sizeof(stub.dir));
	tls_make(stub.dir);
	kstub_start(&stub, "[{\"repeat\": true, \"body\": {\"kind\": "
		    "\"Namespace\"}}]", true, client_ca);
	stub_config(&stub, &c);
	c.insecure = insecure;
	if (ca_file) {
		snprintf(path, sizeof(path), "%s/%s", stub.dir, ca_file);
		c.ca_pem = slurp(path);
		cr_assert(c.ca_pem);
	}
	if (client_cert) {
		snprintf(path, sizeof(path), "%s/client.pem", stub.dir);
		c.cert_pem = slurp(path);
		snprintf(path, sizeof(path), "%s/client.key", stub.dir);
		c.key_pem = slurp(path);
		cr_assert(c.cert_pem && c.key_pem);
	}
	err_init(&e);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	kube_config_release(&c);
	return k;
}

static int get_ns(struct kube_client *k, struct err *e)
{
	json_t *out = NULL;
	int rc;

	err_init(e);
	rc = kube_get(k, "/api/v1/namespaces/default", &out, e);
	json_decref(out);
	kube_client_free(k);
	return rc;
}

Test(client, tls_with_the_pinned_ca)
{
	struct err e;

	cr_assert_eq(get_ns(tls_client(false, "ca.pem", false, false), &e), 0,
		     "%s", e.msg);
}

Test(client, tls_other_ca_is_refused_at_once)
{
	struct err e;

	cr_assert_eq(get_ns(tls_client(false, "other.pem", false, false), &e),
		     KUBE_ENETWORK);
	assert_msg(&e, "; the server's certificate is not signed by the "
		   "cluster's CA");
	/* A certificate that does not verify is not retried. */
	cr_assert_eq(requests_seen(), 0);
	cr_assert_null(strstr(e.msg, "after retries"), "%s", e.msg);
}

Test(client, tls_system_cas_do_not_know_a_private_ca)
{
	struct err e;

	cr_assert_eq(get_ns(tls_client(false, NULL, false, false), &e),
		     KUBE_ENETWORK);
}

Test(client, tls_insecure)
{
	struct err e;

	cr_assert_eq(get_ns(tls_client(false, NULL, true, false), &e), 0,
		     "%s", e.msg);
}

Test(client, tls_client_certificate)
{
	struct err e;

	cr_assert_eq(get_ns(tls_client(true, "ca.pem", false, true), &e), 0,
		     "%s", e.msg);
	kstub_stop(&stub);
	cr_assert_neq(get_ns(tls_client(true, "ca.pem", false, false), &e),
		      0);
}
