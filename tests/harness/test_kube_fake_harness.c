/*
 * tests/harness/test_kube_fake_harness.c: kube_fake.h's starter: the fake
 * listens with TLS and a token, its CA verifies the API's certificate (as
 * the GKE client pins it), the plain port serves the API, the container
 * API and /_fake/, a written kubeconfig names it all, and stop leaves no
 * process behind.
 */
#include "tests/harness/kube_fake.h"
#include "common/common.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t discard(char *data, size_t size, size_t n, void *ud)
{
	(void)data;
	(void)ud;
	return size * n;
}

/* GET path on the TLS port with the CA pinned; the HTTP status or -1. */
static long https_get(const struct kube_fake *f, const char *path)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs;
	char url[256], auth[200];
	long status = -1;

	cr_assert_not_null(h);
	snprintf(url, sizeof(url), "%s%s", f->server, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", f->token);
	hdrs = curl_slist_append(NULL, auth);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CAINFO, f->ca);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return status;
}

Test(kube_fake, starts_serves_and_stops)
{
	const struct kube_fake_options o = { .tls = true, .token = "tok" };
	struct kube_fake f;
	char *out = NULL, *cfg, path[HARNESS_PATH + 16], want[128];
	pid_t pid;

	cr_assert_eq(kube_fake_start(&f, &o), 0);
	pid = f.proc.pid;
	cr_assert_gt(f.port, 0);
	cr_assert_gt(f.plain_port, 0);
	cr_assert_eq(access(f.ca, R_OK), 0);
	cr_assert_eq(https_get(&f, "/version"), 200);
	cr_assert_eq(kube_fake_call(&f, "GET",
				    "/api/v1/namespaces/default/pods", NULL,
				    &out), 200);
	cr_assert_not_null(strstr(out, "\"PodList\""));
	free(out);
	cr_assert_eq(kube_fake_call(&f, "GET", "/v1/projects/p/locations/l/"
				    "clusters/c", NULL, &out), 200);
	snprintf(want, sizeof(want), "\"endpoint\": \"127.0.0.1:%u\"",
		 f.port);
	cr_assert_not_null(strstr(out, want), "%s", out);
	cr_assert_not_null(strstr(out, "clusterCaCertificate"));
	free(out);
	cr_assert_eq(kube_fake_call(&f, "GET", "/_fake/processes", NULL,
				    NULL), 200);
	snprintf(path, sizeof(path), "%s/kubeconfig", f.dir);
	cr_assert_eq(kube_fake_write_kubeconfig(&f, path, "tok", "team"), 0);
	cfg = read_file(path, NULL);
	cr_assert_not_null(cfg);
	cr_assert_not_null(strstr(cfg, f.server));
	cr_assert_not_null(strstr(cfg, "certificate-authority-data: LS0t"));
	cr_assert_not_null(strstr(cfg, "    token: tok\n"));
	cr_assert_not_null(strstr(cfg, "    namespace: team\n"));
	free(cfg);
	kube_fake_stop(&f);
	cr_assert_eq(f.proc.pid, -1);
	cr_assert_eq(kill(pid, 0), -1);
}
