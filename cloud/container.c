/*
 * container.c: the one GKE API call slicectl needs, clusters.get, for the
 * control plane's endpoint and CA. It goes through auth_send and http_do
 * like every Google API call here (token, one retry on 401, retries of
 * 429/5xx and dropped connections), with advice for the GKE API's 4xx.
 */
#include "cloud/auth.h"
#include "cloud/cloud.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define CONTAINER_DEFAULT_ENDPOINT "https://container.googleapis.com/"

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

static const char *container_hint(long status, const char *message)
{
	switch (status) {
	case 400:
		return "; the location must be a zone (us-central2-b) or a "
		       "region (us-central2) where the cluster is";
	case 403:
		if (message && (strstr(message, "has not been used") ||
				strstr(message, "is disabled") ||
				strstr(message, "SERVICE_DISABLED")))
			return "; the Kubernetes Engine API is not enabled in "
			       "this project: `gcloud services enable "
			       "container.googleapis.com`";
		return "; the account lacks container.clusters.get on the "
		       "project (roles/container.clusterViewer or "
		       "roles/container.developer grants it)";
	case 404:
		return "; there is no such cluster in that location of the "
		       "project: see `gcloud container clusters list "
		       "--project PROJECT`, and check --cluster and "
		       "--location";
	default:
		return NULL;
	}
}

void gke_cluster_release(struct gke_cluster *c)
{
	free(c->endpoint);
	free(c->ca_certificate);
	free(c->status);
	if (c->token)
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	memset(c, 0, sizeof(*c));
}

/* base + "v1/projects/P/locations/L/clusters/C", each name escaped. */
static int cluster_url(struct buf *u, const char *project,
		       const char *location, const char *cluster)
{
	const char *base = getenv("SLICECTL_CONTAINER_ENDPOINT");

	if (!base || !*base)
		base = CONTAINER_DEFAULT_ENDPOINT;
	if (buf_appendf(u, "%s%sv1/projects/", base,
			base[strlen(base) - 1] == '/' ? "" : "/") ||
	    http_escape_append(u, project) ||
	    buf_appends(u, "/locations/") ||
	    http_escape_append(u, location) ||
	    buf_appends(u, "/clusters/") || http_escape_append(u, cluster))
		return CLOUD_ENOMEM;
	return 0;
}

static int parse(const struct http_response *resp, struct gke_cluster *out,
		 struct err *e)
{
	json_error_t je;
	json_t *root = json_loadb(resp->body.data ? resp->body.data : "",
				  resp->body.len, 0, &je);
	json_t *endpoint = json_object_get(root, "endpoint");
	json_t *ca = json_object_get(json_object_get(root, "masterAuth"),
				     "clusterCaCertificate");
	json_t *status = json_object_get(root, "status");
	int rc = 0;

	if (!json_is_object(root))
		rc = err_set(e, CLOUD_ECORRUPT, "malformed cluster from the "
			     "GKE API: %s", root ? "not an object" : je.text);
	else if ((endpoint && !json_is_string(endpoint)) ||
		 (ca && !json_is_string(ca)) ||
		 (status && !json_is_string(status)))
		rc = err_set(e, CLOUD_ECORRUPT, "malformed cluster from the "
			     "GKE API: endpoint, masterAuth."
			     "clusterCaCertificate or status is not a "
			     "string");
	else if (!(out->endpoint = strdup(endpoint ? json_string_value(
						       endpoint) : "")) ||
		 !(out->ca_certificate = strdup(ca ? json_string_value(ca)
						   : "")) ||
		 !(out->status = strdup(status ? json_string_value(status)
					      : "")))
		rc = nomem(e);
	json_decref(root);
	return rc;
}

int gke_cluster_get(const char *project, const char *location,
		    const char *cluster, struct gke_cluster *out,
		    struct err *e)
{
	struct http_request req = { .method = "GET", .hint = container_hint };
	struct http_client h;
	struct http_response resp;
	struct auth a;
	struct buf url;
	const char *token;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!project || !*project || !location || !*location || !cluster ||
	    !*cluster)
		return err_set(e, CLOUD_EINVAL, "the GKE API needs a project, "
			       "a location and a cluster name");
	rc = auth_http_init(&a, &h, NULL, e);
	if (rc)
		return rc;
	buf_init(&url);
	http_response_init(&resp);
	rc = cluster_url(&url, project, location, cluster) ? nomem(e) : 0;
	if (!rc) {
		req.url = url.data;
		rc = auth_send(&a, &h, &req, NULL, &resp, e);
	}
	if (!rc)
		rc = parse(&resp, out, e);
	/* The token that was just accepted, cached: no second fetch. */
	if (!rc)
		rc = auth_token(&a, &h, &token, e);
	if (!rc && !(out->token = strdup(token)))
		rc = nomem(e);
	if (rc)
		gke_cluster_release(out);
	http_response_release(&resp);
	buf_release(&url);
	http_client_release(&h);
	auth_release(&a);
	return rc;
}
