/*
 * monitoring.c: Cloud Monitoring's projects.timeSeries.create (see
 * cloud.h): one request writes up to 200 gauge points, one per series,
 * of custom metrics on a generic_task resource. It goes through auth_send
 * and http_do's retry policy; a create is not idempotent, but writing the
 * same point twice cannot double it (the API refuses a point not newer
 * than its series' last), so it is marked as safe to repeat.
 * monitoring_cancel sets a flag http.c polls about once a second, so a
 * stalled Monitoring never holds the caller past that.
 */
#include "cloud/auth.h"
#include "cloud/cloud.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MONITORING_DEFAULT_ENDPOINT "https://monitoring.googleapis.com/"

struct monitoring_client {
	struct http_client http;
	struct auth auth;
	char *url;          /* .../v3/projects/P/timeSeries */
	json_t *resource;   /* the generic_task every series is written on */
	char *run;
	unsigned write_ms;  /* a write's budget, 0 the policy's */
	atomic_bool cancelled;
};

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

static bool is_cancelled(void *ud)
{
	struct monitoring_client *c = ud;

	return atomic_load(&c->cancelled);
}

static void client_free(struct monitoring_client *c)
{
	free(c->url);
	free(c->run);
	json_decref(c->resource);
	free(c);
}

static int base_url(const char *project, char **out)
{
	const char *endpoint = getenv("SLICECTL_MONITORING_ENDPOINT");
	struct buf b;

	if (!endpoint || !*endpoint)
		endpoint = MONITORING_DEFAULT_ENDPOINT;
	buf_init(&b);
	if (buf_appends(&b, endpoint) ||
	    (b.data[b.len - 1] != '/' && buf_appends(&b, "/")) ||
	    buf_appends(&b, "v3/projects/") ||
	    http_escape_append(&b, project) ||
	    buf_appends(&b, "/timeSeries")) {
		buf_release(&b);
		return CLOUD_ENOMEM;
	}
	*out = buf_detach(&b);
	return *out ? 0 : CLOUD_ENOMEM;
}

int monitoring_open(struct monitoring_client **out,
		    const struct monitoring_target *t, struct err *e)
{
	struct monitoring_client *c;
	int rc;

	*out = NULL;
	if (!t->project || !*t->project || !t->run || !*t->run)
		return err_set(e, CLOUD_EINVAL,
			       "Cloud Monitoring needs a project and a run");
	c = calloc(1, sizeof(*c));
	if (!c)
		return nomem(e);
	atomic_init(&c->cancelled, false);
	c->run = strdup(t->run);
	c->resource = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s}}",
				"type", "generic_task", "labels",
				"project_id", t->project,
				"location", t->location && *t->location ?
					    t->location : "global",
				"namespace", "slicectl", "job", t->run,
				"task_id", "0");
	if (!c->run || !c->resource || base_url(t->project, &c->url)) {
		client_free(c);
		return nomem(e);
	}
	rc = auth_http_init(&c->auth, &c->http, NULL, e);
	if (rc) {
		client_free(c);
		return rc;
	}
	c->http.cancelled = is_cancelled;
	c->http.cancel_ud = c;
	if (t->write_ms) {
		c->write_ms = t->write_ms;
		c->http.policy.max_total_ms = t->write_ms;
		c->http.policy.max_attempts = 2;
	}
	*out = c;
	return 0;
}

void monitoring_close(struct monitoring_client *c)
{
	if (!c)
		return;
	http_client_release(&c->http);
	auth_release(&c->auth);
	client_free(c);
}

void monitoring_cancel(struct monitoring_client *c)
{
	atomic_store(&c->cancelled, true);
}

/* "2006-01-02T15:04:05.000Z" of ms since the epoch. */
static void end_time(int64_t ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + strlen(out), 32 - strlen(out), ".%03dZ",
		 (int)(ms % 1000));
}

static json_t *series_json(const struct monitoring_client *c,
			   const struct monitoring_point *p, const char *end)
{
	json_t *labels = json_pack("{s:s}", "run", c->run);

	if (labels && p->label_key &&
	    json_object_set_new(labels, p->label_key,
				json_string(p->label_value))) {
		json_decref(labels);
		return NULL;
	}
	if (!labels)
		return NULL;
	return json_pack("{s:{s:s, s:o}, s:O, s:s, s:s, s:[{s:{s:s}, s:{s:f}}]}",
			 "metric", "type", p->type, "labels", labels,
			 "resource", c->resource, "metricKind", "GAUGE",
			 "valueType", "DOUBLE", "points", "interval",
			 "endTime", end, "value", "doubleValue", p->value);
}

static char *request_body(const struct monitoring_client *c,
			  const struct monitoring_point *pts, size_t n,
			  int64_t end_ms)
{
	json_t *list = json_array(), *doc;
	char end[32];
	char *text = NULL;

	end_time(end_ms, end);
	for (size_t i = 0; list && i < n; i++)
		if (json_array_append_new(list, series_json(c, &pts[i], end))) {
			json_decref(list);
			list = NULL;
		}
	doc = list ? json_pack("{s:o}", "timeSeries", list) : NULL;
	if (doc)
		text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

static const char *monitoring_hint(long status, const char *message)
{
	(void)message;
	if (status == 403)
		return "the account needs roles/monitoring.metricWriter on "
		       "the project";
	if (status == 400)
		return "Cloud Monitoring refused the points (see its message)";
	return NULL;
}

int monitoring_write(struct monitoring_client *c,
		     const struct monitoring_point *pts, size_t n,
		     int64_t end_ms, struct err *e)
{
	static const char *const json_headers[] = {
		"Content-Type: application/json", NULL
	};
	struct http_request req = { .method = "POST", .url = c->url,
				    .hint = monitoring_hint,
				    .not_idempotent = true,
				    .precondition = true };
	struct http_response resp;
	char *body;
	int rc;

	if (n == 0 || n > MONITORING_MAX_SERIES)
		return err_set(e, CLOUD_EINVAL,
			       "Cloud Monitoring takes 1 to %d series a "
			       "request, not %zu", MONITORING_MAX_SERIES, n);
	body = request_body(c, pts, n, end_ms);
	if (!body)
		return nomem(e);
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = c->write_ms;
	http_response_init(&resp);
	rc = auth_send(&c->auth, &c->http, &req, json_headers, &resp, e);
	http_response_release(&resp);
	free(body);
	return rc;
}
