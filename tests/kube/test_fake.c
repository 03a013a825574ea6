/*
 * tests/kube/test_fake.c: the client against the Kubernetes API fake
 * (tests/fakes/kube_fake.py), as the GKE target will use it: the GKE API
 * gives the endpoint and CA (pinned, over TLS, with the bearer token),
 * a kubeconfig reaches the same API; objects are refused by the CRD
 * schemas with the server's own messages, RBAC and missing APIs answer
 * with hints, and a watch survives a reset connection.
 */
#include "cloud/cloud.h"
#include "tests/harness/kube_fake.h"
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define FLAVORS "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"
#define JOBSETS "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"

static struct kube_fake fake;

static void setup(void)
{
	memset(&fake, 0, sizeof(fake));
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("KUBECONFIG");
	setenv("HOME", "/nonexistent", 1);
}

static void teardown(void)
{
	if (fake.proc.pid > 0)
		kube_fake_stop(&fake);
}

TestSuite(fake, .init = setup, .fini = teardown, .timeout = 120);

static void start(const char *const *extra)
{
	const struct kube_fake_options o = { .tls = true, .token = "tok-9",
					     .extra = extra };

	cr_assert_eq(kube_fake_start(&fake, &o), 0);
}

/* A client through a kubeconfig written for the fake. */
static struct kube_client *kubeconfig_client(const char *token)
{
	struct kube_config c;
	struct kube_client *k;
	struct err e;
	char path[HARNESS_PATH + 16];

	snprintf(path, sizeof(path), "%s/kubeconfig", fake.dir);
	cr_assert_eq(kube_fake_write_kubeconfig(&fake, path, token, "default"),
		     0);
	err_init(&e);
	cr_assert_eq(kube_config_load(path, NULL, &c, &e), 0, "%s", e.msg);
	cr_assert(c.ca_pem, "the kubeconfig pins the fake's CA");
	cr_assert_str_eq(c.namespace, "default");
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	kube_config_release(&c);
	return k;
}

static json_t *flavor(const char *name)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion",
			      "kueue.x-k8s.io/v1beta1", "kind",
			      "ResourceFlavor", "metadata", "name", name);

	cr_assert(o);
	return o;
}

Test(fake, gke_api_endpoint_and_ca_reach_the_cluster)
{
	static const char *const extra[] = { "--cluster", "proj/loc/c1",
					     NULL };
	struct gke_cluster gc;
	struct kube_config c;
	struct kube_client *k;
	struct err e;
	json_t *out = NULL;

	start(extra);
	setenv("SLICECTL_CONTAINER_ENDPOINT", fake.control, 1);
	setenv("SLICECTL_ACCESS_TOKEN", "tok-9", 1);
	err_init(&e);
	cr_assert_eq(gke_cluster_get("proj", "loc", "c1", &gc, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(gc.status, "RUNNING");
	cr_assert_eq(kube_config_from_endpoint(gc.endpoint, gc.ca_certificate,
					       gc.token, &c, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(strncmp(c.server, "https://127.0.0.1:", 18), 0);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(kube_list(k, "/api/v1/namespaces/default/pods", NULL,
			       &out, &e), 0, "%s", e.msg);
	cr_assert_str_eq(json_string_value(json_object_get(out, "kind")),
			 "PodList");
	json_decref(out);
	kube_client_free(k);
	kube_config_release(&c);
	gke_cluster_release(&gc);
	cr_assert_eq(gke_cluster_get("proj", "loc", "nope", &gc, &e),
		     CLOUD_ENOTFOUND);
	cr_assert(strstr(e.msg, "there is no such cluster in that location"),
		  "%s", e.msg);
}

Test(fake, create_get_list_delete_and_their_errors)
{
	struct kube_client *k;
	struct err e;
	json_t *o = flavor("f1"), *out = NULL;

	start(NULL);
	k = kubeconfig_client("tok-9");
	err_init(&e);
	cr_assert_eq(kube_create(k, FLAVORS, o, true, &out, &e), 0, "%s",
		     e.msg);
	json_decref(out);
	cr_assert_eq(kube_get(k, FLAVORS "/f1", &out, &e), KUBE_ENOTFOUND,
		     "a dry run creates nothing");
	cr_assert(strstr(e.msg, "; there is no \"f1\" among the "
			 "resourceflavors"), "%s", e.msg);
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(kube_get(k, FLAVORS "/f1", &out, &e), 0, "%s", e.msg);
	json_decref(out);
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e),
		     KUBE_ECONFLICT);
	cr_assert(strstr(e.msg, "409 Conflict: ") &&
		  strstr(e.msg, "already exists; the name \"f1\" is taken "
			 "among the resourceflavors: "), "%s", e.msg);

	/* Strict field validation: an unknown field is refused. */
	json_object_set_new(o, "spec", json_pack("{s:s}", "bogus", "x"));
	json_object_set_new(json_object_get(o, "metadata"), "name",
			    json_string("f2"));
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e), KUBE_EHTTP);
	cr_assert(strstr(e.msg, "400 Bad Request: ") &&
		  strstr(e.msg, "unknown field") &&
		  strstr(e.msg, "; the cluster does not know a field"), "%s",
		  e.msg);
	/* The schema: a wrong type, with the field named. */
	json_object_set_new(o, "spec", json_pack("{s:i}", "nodeLabels", 5));
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e),
		     KUBE_EINVALID);
	cr_assert(strstr(e.msg, "422 Unprocessable Entity: ") &&
		  strstr(e.msg, "; the server refused spec.nodeLabels"), "%s",
		  e.msg);

	cr_assert_eq(kube_list(k, FLAVORS, NULL, &out, &e), 0, "%s", e.msg);
	cr_assert_eq(json_array_size(json_object_get(out, "items")), 1);
	json_decref(out);
	cr_assert_eq(kube_delete(k, FLAVORS "/f1", "Foreground", &e), 0, "%s",
		     e.msg);
	cr_assert_eq(kube_delete(k, FLAVORS "/f1", NULL, &e), KUBE_ENOTFOUND);
	json_decref(o);
	kube_client_free(k);
}

Test(fake, wrong_token)
{
	struct kube_client *k;
	struct err e;
	json_t *out = NULL;

	start(NULL);
	k = kubeconfig_client("wrong");
	err_init(&e);
	cr_assert_eq(kube_list(k, FLAVORS, NULL, &out, &e), KUBE_EAUTH);
	cr_assert(strstr(e.msg, "401 Unauthorized") &&
		  strstr(e.msg, "; the token of kubeconfig "), "%s", e.msg);
	kube_client_free(k);
}

Test(fake, rbac_and_missing_apis)
{
	static const char *const extra[] = { "--without-group",
					     "jobset.x-k8s.io", NULL };
	struct kube_client *k;
	struct err e;
	json_t *o = flavor("f3"), *js;

	start(extra);
	cr_assert_eq(kube_fake_call(&fake, "POST", "/_fake/forbid",
				    "{\"verb\": \"create\", \"resource\": "
				    "\"resourceflavors\"}", NULL), 200);
	k = kubeconfig_client("tok-9");
	err_init(&e);
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e),
		     KUBE_EFORBIDDEN);
	cr_assert(strstr(e.msg, "403 Forbidden: ") &&
		  strstr(e.msg, "; the account lacks the RBAC permission to "
			 "create resourceflavors.kueue.x-k8s.io: it needs a "
			 "ClusterRole with apiGroups [\"kueue.x-k8s.io\"], "
			 "resources [\"resourceflavors\"], verbs "
			 "[\"create\"]"), "%s", e.msg);
	js = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion",
		       "jobset.x-k8s.io/v1alpha2", "kind", "JobSet",
		       "metadata", "name", "r1");
	cr_assert_eq(kube_create(k, JOBSETS, js, false, NULL, &e),
		     KUBE_ENOTFOUND);
	cr_assert(strstr(e.msg, "; JobSet is not installed on this cluster: "
			 "kubectl apply --server-side -f "), "%s", e.msg);
	json_decref(js);
	json_decref(o);
	kube_client_free(k);
}

struct watch_state {
	struct buf log;
	bool armed;
};

static int on_event(void *ud, const char *type, json_t *obj)
{
	struct watch_state *s = ud;
	const char *name = json_string_value(json_object_get(
		json_object_get(obj, "metadata"), "name"));

	buf_appendf(&s->log, "%s %s;", type, name);
	if (!s->armed) {
		/* The first watch connection is reset; f5 is created
		 * meanwhile and must still be seen. */
		s->armed = true;
		cr_assert_eq(kube_fake_call(&fake, "POST", "/_fake/faults",
					    "{\"method\": \"GET\", \"path\": "
					    "\"watch=1\", \"count\": 1, "
					    "\"reset\": true}", NULL), 200);
		cr_assert_eq(kube_fake_call(&fake, "POST", FLAVORS,
					    "{\"apiVersion\": \"kueue.x-k8s.io/"
					    "v1beta1\", \"kind\": "
					    "\"ResourceFlavor\", \"metadata\": "
					    "{\"name\": \"f5\"}}", NULL), 201);
	}
	return strcmp(name, "f5") == 0 ? 7 : 0;
}

Test(fake, watch_resumes_after_a_reset)
{
	struct kube_client *k;
	struct watch_state s = { .armed = false };
	struct err e;
	json_t *o = flavor("f4");
	char *reqs = NULL;

	start(NULL);
	k = kubeconfig_client("tok-9");
	err_init(&e);
	cr_assert_eq(kube_create(k, FLAVORS, o, false, NULL, &e), 0, "%s",
		     e.msg);
	buf_init(&s.log);
	cr_assert_eq(kube_watch(k, FLAVORS, NULL, 30000, on_event, &s, &e), 7,
		     "%s", e.msg);
	cr_assert_str_eq(s.log.data, "ADDED f4;ADDED f5;");
	cr_assert_eq(kube_fake_call(&fake, "GET", "/_fake/requests", NULL,
				    &reqs), 200);
	{
		json_t *all = json_loads(reqs, 0, NULL), *r;
		size_t i, watches = 0;

		cr_assert(all);
		json_array_foreach(all, i, r) {
			json_t *q = json_object_get(r, "query");

			if (json_object_get(q, "watch"))
				watches++;
		}
		cr_assert_eq(watches, 2, "%s", reqs);
		json_decref(all);
	}
	free(reqs);
	buf_release(&s.log);
	json_decref(o);
	kube_client_free(k);
}
