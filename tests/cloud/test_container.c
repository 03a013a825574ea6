/*
 * tests/cloud/test_container.c: the GKE API's clusters.get against a
 * loopback server answering fixed raw responses: the request as sent
 * (path, credentials), the fields taken, the token handed over, retries,
 * and the errors with their hints.
 */
#include "cloud/cloud.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define HEAD(status) "HTTP/1.1 " status "\r\nContent-Type: application/json" \
		     "\r\nContent-Length: *\r\n\r\n"
#define ERR(status, code, msg)                                              \
	{ HEAD(status) "{\"error\":{\"code\":" #code ",\"message\":\"" msg \
		       "\",\"status\":\"X\"}}", 0, false }
#define CLUSTER "{\"name\":\"c1\",\"endpoint\":\"34.1.2.3\",\"status\":" \
	"\"RUNNING\",\"masterAuth\":{\"clusterCaCertificate\":\"Q0E=\"}," \
	"\"currentMasterVersion\":\"1.33.1-gke.100\"}"

static struct tiny_http srv;

static void setup(void)
{
	memset(&srv, 0, sizeof(srv));
	setenv("SLICECTL_ACCESS_TOKEN", "tok-123", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	setenv("HOME", "/nonexistent", 1);
}

static void teardown(void)
{
	tiny_stop(&srv);
}

TestSuite(container, .init = setup, .fini = teardown, .timeout = 60);

static int get(const struct tiny_answer *a, size_t n, struct gke_cluster *c,
	       struct err *e)
{
	cr_assert_eq(tiny_start(&srv, a, n), 0);
	/* Without the trailing slash: the client adds it. */
	setenv("SLICECTL_CONTAINER_ENDPOINT", srv.base, 1);
	err_init(e);
	return gke_cluster_get("proj", "us-central2-b", "c1", c, e);
}

Test(container, cluster_as_sent_and_read)
{
	static const struct tiny_answer a[] = { { HEAD("200 OK") CLUSTER, 0,
						  false } };
	struct gke_cluster c;
	struct err e;
	char *log;

	cr_assert_eq(get(a, NELEM(a), &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.endpoint, "34.1.2.3");
	cr_assert_str_eq(c.ca_certificate, "Q0E=");
	cr_assert_str_eq(c.status, "RUNNING");
	cr_assert_str_eq(c.token, "tok-123");
	log = tiny_log(&srv);
	cr_assert(strncmp(log, "GET /v1/projects/proj/locations/us-central2-b/"
			  "clusters/c1 HTTP/1.1\r\n", 61) == 0, "%s", log);
	cr_assert(strstr(log, "\r\nAuthorization: Bearer tok-123\r\n"), "%s",
		  log);
	cr_assert_eq(tiny_requests(&srv), 1);
	free(log);
	gke_cluster_release(&c);
}

Test(container, provisioning_cluster_has_no_endpoint_yet)
{
	static const struct tiny_answer a[] = { { HEAD("200 OK")
		"{\"name\":\"c1\",\"status\":\"PROVISIONING\"}", 0, false } };
	struct gke_cluster c;
	struct err e;

	cr_assert_eq(get(a, NELEM(a), &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.endpoint, "");
	cr_assert_str_eq(c.ca_certificate, "");
	cr_assert_str_eq(c.status, "PROVISIONING");
	gke_cluster_release(&c);
}

Test(container, transient_errors_are_retried)
{
	static const struct tiny_answer a[] = {
		{ "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0"
		  "\r\n\r\n", 0, false },
		{ "", 0, true },
		{ HEAD("200 OK") CLUSTER, 0, false },
	};
	struct gke_cluster c;
	struct err e;

	cr_assert_eq(get(a, NELEM(a), &c, &e), 0, "%s", e.msg);
	cr_assert_eq(tiny_requests(&srv), 3);
	cr_assert_str_eq(c.endpoint, "34.1.2.3");
	gke_cluster_release(&c);
}

static void fails(const struct tiny_answer *a, int code, const char *want)
{
	struct gke_cluster c;
	struct err e;

	cr_assert_eq(get(a, 1, &c, &e), code, "%s", e.msg);
	cr_assert(strstr(e.msg, want), "\"%s\" lacks \"%s\"", e.msg, want);
	cr_assert_null(c.endpoint);
	cr_assert_null(c.token);
	tiny_stop(&srv);
	memset(&srv, 0, sizeof(srv));
}

Test(container, errors_with_hints)
{
	static const struct tiny_answer e404[] = { ERR("404 Not Found", 404,
		"Not found: projects/proj/locations/us-central2-b/clusters/c1.") };
	static const struct tiny_answer e403[] = { ERR("403 Forbidden", 403,
		"Kubernetes Engine API has not been used in project proj "
		"before or it is disabled.") };
	static const struct tiny_answer e403b[] = { ERR("403 Forbidden", 403,
		"Required \\\"container.clusters.get\\\" permission(s)") };
	static const struct tiny_answer bad[] = { { HEAD("200 OK")
		"{\"endpoint\":7}", 0, false } };
	static const struct tiny_answer notjson[] = { { HEAD("200 OK")
		"<html>", 0, false } };

	fails(e404, CLOUD_ENOTFOUND, "HTTP 404 Not Found: Not found: projects/"
	      "proj/locations/us-central2-b/clusters/c1.; there is no such "
	      "cluster in that location of the project: see `gcloud "
	      "container clusters list --project PROJECT`");
	fails(e403, CLOUD_EAUTH, "; the Kubernetes Engine API is not enabled "
	      "in this project: `gcloud services enable "
	      "container.googleapis.com`");
	fails(e403b, CLOUD_EAUTH, "; the account lacks container.clusters.get "
	      "on the project");
	fails(bad, CLOUD_ECORRUPT, "endpoint, masterAuth.clusterCaCertificate "
	      "or status is not a string");
	fails(notjson, CLOUD_ECORRUPT, "malformed cluster from the GKE API");
}

Test(container, arguments_are_required)
{
	struct gke_cluster c;
	struct err e;

	err_init(&e);
	cr_assert_eq(gke_cluster_get("p", "", "c", &c, &e), CLOUD_EINVAL);
	cr_assert(strstr(e.msg, "a project, a location and a cluster name"));
}
