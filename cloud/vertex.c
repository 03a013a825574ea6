/*
 * vertex.c: the Vertex AI customJobs methods slicectl needs (create, get,
 * list, cancel, delete), on the regional endpoint
 * (https://REGION-aiplatform.googleapis.com/, or SLICECTL_VERTEX_ENDPOINT
 * for tests). Each call goes through auth_send and http_do like every
 * Google API call here, with advice for the 4xx answers a user can fix.
 */
#include "cloud/auth.h"
#include "cloud/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

static const char *vertex_hint(long status, const char *message)
{
	switch (status) {
	case 400:
		return "; Vertex AI refused the CustomJob: its message names "
		       "the field (slicectl job --render prints the body)";
	case 403:
		if (message && (strstr(message, "has not been used") ||
				strstr(message, "is disabled") ||
				strstr(message, "SERVICE_DISABLED")))
			return "; the Vertex AI API is not enabled in this "
			       "project: `gcloud services enable "
			       "aiplatform.googleapis.com`";
		return "; the account lacks aiplatform.customJobs permissions "
		       "on the project (roles/aiplatform.user grants them)";
	case 404:
		return "; there is no such custom job in that region of the "
		       "project (check --region and --project)";
	case 429:
		return "; a Vertex AI quota is exhausted (custom training "
		       "accelerators of that type in that region): ask for "
		       "more in the console's Quotas page, or choose another "
		       "region";
	default:
		return NULL;
	}
}

struct vertex_client {
	struct auth a;
	struct http_client h;
	char *base;   /* ".../v1/" */
	char *parent; /* "projects/P/locations/R" */
};

int vertex_open(struct vertex_client **out, const char *project,
		const char *region, struct err *e)
{
	const char *endpoint = getenv("SLICECTL_VERTEX_ENDPOINT");
	struct vertex_client *c;
	struct buf b;
	int rc;

	*out = NULL;
	if (!project || !*project)
		return err_set(e, CLOUD_EINVAL,
			       "no project for Vertex AI: give --project or "
			       "set CLOUDSDK_CORE_PROJECT");
	if (!region || !*region || strpbrk(region, "/?#% "))
		return err_set(e, CLOUD_EINVAL,
			       "no region for Vertex AI: give --region (for "
			       "example us-central1)");
	c = calloc(1, sizeof(*c));
	if (!c)
		return nomem(e);
	buf_init(&b);
	rc = endpoint && *endpoint
		     ? buf_appendf(&b, "%s%sv1/", endpoint,
				   endpoint[strlen(endpoint) - 1] == '/' ? ""
									 : "/")
		     : buf_appendf(&b, "https://%s-aiplatform.googleapis.com/v1/",
				   region);
	c->base = rc ? NULL : buf_detach(&b);
	buf_release(&b);
	buf_init(&b);
	rc = buf_appends(&b, "projects/") || http_escape_append(&b, project) ||
	     buf_appendf(&b, "/locations/%s", region);
	c->parent = rc ? NULL : buf_detach(&b);
	buf_release(&b);
	if (!c->base || !c->parent) {
		free(c->base);
		free(c->parent);
		free(c);
		return nomem(e);
	}
	rc = auth_http_init(&c->a, &c->h, NULL, e);
	if (rc) {
		free(c->base);
		free(c->parent);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void vertex_close(struct vertex_client *c)
{
	if (!c)
		return;
	http_client_release(&c->h);
	auth_release(&c->a);
	free(c->base);
	free(c->parent);
	free(c);
}

/* method on base + path (+ query), body JSON when given; the answer's
 * JSON object in *out when out is not NULL. */
static int call(struct vertex_client *c, const char *method, const char *path,
		const char *query, const char *body, json_t **out,
		struct err *e)
{
	static const char *const json_headers[] = {
		"Content-Type: application/json", NULL
	};
	struct http_request req = { .method = method, .hint = vertex_hint };
	struct http_response resp;
	struct buf url;
	int rc;

	if (out)
		*out = NULL;
	buf_init(&url);
	http_response_init(&resp);
	if (buf_appendf(&url, "%s%s%s%s", c->base, path, query ? "?" : "",
			query ? query : "")) {
		buf_release(&url);
		return nomem(e);
	}
	req.url = url.data;
	if (body) {
		req.body = body;
		req.body_len = strlen(body);
		/* A create sent twice makes two jobs; a cancel twice is
		 * one cancel. */
		req.not_idempotent = !strstr(path, ":cancel");
	}
	rc = auth_send(&c->a, &c->h, &req, body ? json_headers : NULL, &resp,
		       e);
	if (!rc && out) {
		json_error_t je;

		*out = json_loadb(resp.body.data ? resp.body.data : "",
				  resp.body.len, 0, &je);
		if (!json_is_object(*out)) {
			json_decref(*out);
			*out = NULL;
			rc = err_set(e, CLOUD_ECORRUPT,
				     "malformed answer from Vertex AI to %s "
				     "%s: %s", method, path, je.text);
		}
	}
	http_response_release(&resp);
	buf_release(&url);
	return rc;
}

const char *vertex_parent(const struct vertex_client *c)
{
	return c->parent;
}

int vertex_job_create(struct vertex_client *c, const json_t *body,
		      json_t **out, struct err *e)
{
	char *text = json_dumps(body, JSON_COMPACT);
	char path[512];
	int rc;

	if (!text)
		return nomem(e);
	snprintf(path, sizeof(path), "%s/customJobs", c->parent);
	rc = call(c, "POST", path, NULL, text, out, e);
	free(text);
	return rc;
}

int vertex_job_get(struct vertex_client *c, const char *name, json_t **out,
		   struct err *e)
{
	return call(c, "GET", name, NULL, NULL, out, e);
}

int vertex_job_list(struct vertex_client *c, const char *filter,
		    json_t **jobs, struct err *e)
{
	char path[512];
	struct buf q;
	int rc = 0;
	json_t *page = NULL;

	*jobs = json_array();
	if (!*jobs)
		return nomem(e);
	snprintf(path, sizeof(path), "%s/customJobs", c->parent);
	buf_init(&q);
	do {
		const char *token = json_string_value(
			json_object_get(page, "nextPageToken"));

		buf_reset(&q);
		if (buf_appends(&q, "pageSize=100") ||
		    (filter && (buf_appends(&q, "&filter=") ||
				http_escape_append(&q, filter))) ||
		    (token && *token && (buf_appends(&q, "&pageToken=") ||
					 http_escape_append(&q, token)))) {
			rc = nomem(e);
			break;
		}
		json_decref(page);
		page = NULL;
		rc = call(c, "GET", path, q.data, NULL, &page, e);
		if (!rc) {
			json_t *more = json_object_get(page, "customJobs");

			if (more && (!json_is_array(more) ||
				     json_array_extend(*jobs, more)))
				rc = err_set(e, CLOUD_ECORRUPT,
					     "malformed customJobs list from "
					     "Vertex AI");
		}
	} while (!rc && json_string_length(json_object_get(
				page, "nextPageToken")) > 0);
	json_decref(page);
	buf_release(&q);
	if (rc) {
		json_decref(*jobs);
		*jobs = NULL;
	}
	return rc;
}

int vertex_job_cancel(struct vertex_client *c, const char *name,
		      struct err *e)
{
	char path[512];

	snprintf(path, sizeof(path), "%s:cancel", name);
	return call(c, "POST", path, NULL, "{}", NULL, e);
}

int vertex_job_delete(struct vertex_client *c, const char *name,
		      struct err *e)
{
	return call(c, "DELETE", name, NULL, NULL, NULL, e);
}
