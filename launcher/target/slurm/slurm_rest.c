/*
 * slurm_rest.c: the Slurm target through slurmrestd's REST API, the
 * OpenAPI plugin Slurm 22.05 serves (openapi/v0.0.38), over cloud/'s HTTP
 * transport: a URL, or unix:/path for its unix socket. Credentials: a JWT
 * from SLURM_JWT (rest_auth/jwt) goes as X-SLURM-USER-TOKEN with the
 * user's name (the transport redacts it from logs and messages); without
 * one nothing is sent, which a unix socket's rest_auth/local accepts (it
 * asks the kernel who connected). slurmrestd answers a failed call with
 * HTTP 500 and an "errors" array; its first message is the one the user
 * sees.
 *
 * Retries: a 502/503/504, 408 or 429 (slurmrestd busy, or a proxy in
 * front of it), a dropped or reset connection and a stall are retried,
 * honouring Retry-After, for the calls that may run twice: reading a job,
 * releasing it (the second release finds it released) and cancelling it
 * (a cancelled job stays cancelled). A 500 is Slurm's own refusal and is
 * final. A submission is not idempotent: a second one would queue a
 * second job, and nothing in the request lets slurmrestd refuse a
 * duplicate. It is retried only when the connection was never made:
 * after a 503 or a connection that broke once the request was sent, it
 * may have been taken (for the broken connection the error says to look
 * before submitting again).
 */
#include "cloud/cloud.h"
#include "launcher/job.h"
#include "launcher/target/slurm/slurm.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#define REST_PATH "/slurm/v0.0.38"
#define ANSWER_MAX (4u << 20)

/* The first message of an answer's "errors" array, into msg; false when
 * there is none. */
static bool api_error(const json_t *root, char *msg, size_t len)
{
	const json_t *first = json_array_get(json_object_get(root, "errors"),
					     0);
	const char *text = json_string_value(json_object_get(first, "error"));
	const char *more =
		json_string_value(json_object_get(first, "description"));

	if (!first)
		return false;
	snprintf(msg, len, "%s%s%s", text ? text : "an error without a message",
		 more && *more ? ": " : "", more ? more : "");
	return true;
}

static bool rest_transient(long status)
{
	return status == 408 || status == 429 || status == 502 ||
	       status == 503 || status == 504;
}

/* The transport's policy with a budget an operator waits through: five
 * attempts within a minute, Retry-After cut to 30 s. */
static void rest_policy(struct http_policy *p)
{
	unsigned base = http_retry_base_ms();

	http_policy_default(p);
	p->transient_status = rest_transient;
	p->max_attempts = 5;
	p->max_total_ms = 60 * 1000;
	p->backoff_base_ms = base ? base : 250;
	p->backoff_max_ms = 4000;
	p->retry_after_max_ms = 30 * 1000;
}

/* The first line of text, credentials redacted, into out. */
static void first_line(const char *text, char *out, size_t len)
{
	struct buf red;

	buf_init(&red);
	if (http_redact(&red, text))
		snprintf(out, len, "(out of memory)");
	else
		snprintf(out, len, "%.*s", (int)strcspn(red.data, "\r\n"),
			 red.data);
	buf_release(&red);
}

/*
 * method path with body (NULL: none) to base; *out gets the parsed answer
 * (any status, as long as it is slurmrestd's JSON). A transport failure
 * or another answer is COMMON_EIO naming base. once: not idempotent (see
 * the top). *sent (may be NULL): whether a request that got no answer may
 * have reached slurmrestd.
 */
static int call(const char *base, const char *method, const char *path,
		const char *body, bool once, json_t **out, bool *sent,
		struct err *e)
{
	bool unix_socket = !strncmp(base, "unix:", 5);
	const char *jwt = getenv("SLURM_JWT");
	const char *headers[4] = { "Content-Type: application/json", NULL };
	struct http_request req = {
		.method = method, .body = body,
		.body_len = body ? strlen(body) : 0,
		.unix_socket = unix_socket ? base + 5 : NULL,
		.not_idempotent = once, .max_body = ANSWER_MAX,
		.timeout_ms = job_env_ms("SLICECTL_SLURM_TIMEOUT_MS", 60000),
	};
	struct http_policy policy;
	struct http_client client;
	struct http_response resp;
	struct buf url, name, token;
	json_error_t jerr;
	struct err he;
	int rc = 0;

	*out = NULL;
	if (sent)
		*sent = false;
	buf_init(&url);
	buf_init(&name);
	buf_init(&token);
	http_response_init(&resp);
	rest_policy(&policy);
	err_init(&he);
	if (http_client_init(&client, &policy, &he))
		return err_set(e, COMMON_ENOMEM, "%s", he.msg);
	if (buf_appendf(&url, "%s%s%s", unix_socket ? "http://slurmrestd" : base,
			REST_PATH, path)) {
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
		goto out;
	}
	if (jwt && *jwt) {
		char user[256];

		default_remote_user(user, sizeof(user));
		if (buf_appendf(&name, "X-SLURM-USER-NAME: %s", user) ||
		    buf_appendf(&token, "X-SLURM-USER-TOKEN: %s", jwt)) {
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
			goto out;
		}
		headers[1] = name.data;
		headers[2] = token.data;
	}
	req.url = url.data;
	req.headers = headers;
	rc = http_do(&client, &req, &resp, &he);
	if (resp.status == 0 && (rc == CLOUD_ENETWORK || rc == 0)) {
		if (sent)
			*sent = !http_unsent(resp.curl_code);
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s did not answer "
			     "%s %s: %s", base, method, path,
			     client.errbuf[0] ? client.errbuf
			     : curl_easy_strerror(resp.curl_code));
		goto out;
	}
	if (resp.status == 0) {
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s: %s", base,
			     he.msg);
		goto out;
	}
	rc = 0;
	*out = resp.body.len ? json_loadb(resp.body.data, resp.body.len, 0,
					  &jerr) : NULL;
	if (!json_is_object(*out)) {
		char text[300] = "";

		if (resp.body.len)
			first_line(resp.body.data, text, sizeof(text));
		json_decref(*out);
		*out = NULL;
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s answered %s %s "
			     "with HTTP %ld%s%s%s", base, method, path,
			     resp.status, *text ? ": " : " and no Slurm JSON",
			     text,
			     resp.status == 401 ? " (rest_auth/jwt wants a "
			     "token: SLURM_JWT from scontrol token)"
			     : resp.status == 404 ? " (slicectl speaks Slurm "
			     "22.05's openapi/v0.0.38: slurmrestd -s "
			     "openapi/v0.0.38)" : "");
	}
out:
	if (token.data)
		memset(token.data, 0, token.len);
	http_response_release(&resp);
	http_client_release(&client);
	buf_release(&url);
	buf_release(&name);
	buf_release(&token);
	return rc;
}

/* method /job/ID with body (NULL: none), the answer's first error (if
 * any) made e's message; the answer itself is not needed. */
static int job_call(const char *base, const char *method, const char *id,
		    const char *body, struct err *e)
{
	char path[64], msg[300];
	json_t *answer;
	int rc;

	snprintf(path, sizeof(path), "/job/%s", id);
	rc = call(base, method, path, body, false, &answer, NULL, e);
	if (!rc && api_error(answer, msg, sizeof(msg)))
		rc = err_set(e, COMMON_EIO, "slurmrestd: %s", msg);
	json_decref(answer);
	return rc;
}

/* Slurm's time limit (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; slurm_check
 * has read it) in whole minutes, rounded up, as the API takes it. */
static long minutes(const char *limit)
{
	long f[4] = { 0 }, days = 0, secs;
	const char *p = limit;
	int n = 0;

	if (strchr(limit, '-'))
		days = strtol(limit, (char **)&p, 10), p++;
	while (n < 3 && *p) {
		f[n++] = strtol(p, (char **)&p, 10);
		if (*p == ':')
			p++;
	}
	if (strchr(limit, '-')) /* D-H[:M[:S]] */
		secs = ((days * 24 + f[0]) * 60 + f[1]) * 60 + f[2];
	else if (n == 3) /* H:M:S */
		secs = (f[0] * 60 + f[1]) * 60 + f[2];
	else /* M[:S] */
		secs = f[0] * 60 + f[1];
	return (secs + 59) / 60;
}

/* The job's properties: the #SBATCH lines of slurm_render, which
 * slurmrestd does not read from the script. */
static json_t *job_properties(const struct slurm_spec *s, struct err *e)
{
	char signal[32], cwd[4096], gpus[16];
	json_t *env = json_object(), *job;
	bool bad = !env || !getcwd(cwd, sizeof(cwd));

	/* sbatch hands the job the submitter's environment: so does this,
	 * but for the token. */
	for (char **v = environ; !bad && *v; v++) {
		const char *eq = strchr(*v, '=');
		char name[256];

		if (!eq || (size_t)(eq - *v) >= sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(eq - *v), *v);
		if (strcmp(name, "SLURM_JWT"))
			bad = json_object_set_new(env, name,
						  json_string(eq + 1)) != 0;
	}
	/* slurmrestd 22.05 refuses sbatch's "B:" ("Invalid SIGNAL
	 * specification"): the notice then goes to the step, the
	 * supervisors themselves, instead of the batch shell that relays it
	 * to them; the script requeues the job as it does after a relay. */
	snprintf(signal, sizeof(signal), "TERM@%u",
		 s->grace_s + SLURM_UPLOAD_S);
	job = bad ? NULL
		  : json_pack("{s:s, s:s, s:i, s:i, s:b, s:s, s:s, s:s, s:b, "
			      "s:O}", "name", s->run, "partition",
			      s->partition, "nodes", (int)s->nodes,
			      "tasks_per_node", 1, "requeue", 1, "signal",
			      signal, "open_mode", "append",
			      "current_working_directory", cwd, "hold", 1,
			      "environment", env);
	json_decref(env);
	snprintf(gpus, sizeof(gpus), "%u", s->gpus_per_node);
	if (job && ((s->gpus_per_node &&
		     json_object_set_new(job, "gpus_per_node",
					 json_string(gpus))) ||
		    (s->account && json_object_set_new(job, "account",
						       json_string(s->account))) ||
		    (s->qos &&
		     json_object_set_new(job, "qos", json_string(s->qos))) ||
		    (s->time_limit &&
		     json_object_set_new(job, "time_limit",
					 json_integer(minutes(s->time_limit)))) ||
		    (s->constraint &&
		     json_object_set_new(job, "constraints",
					 json_string(s->constraint))))) {
		json_decref(job);
		job = NULL;
	}
	if (!job)
		err_set(e, COMMON_ENOMEM, "the job's properties: out of "
			"memory or no working directory");
	return job;
}

int slurm_rest_submit(const char *base, const struct slurm_spec *s,
		      const char *script, char *id, size_t len, struct err *e)
{
	json_t *job = job_properties(s, e), *req, *answer = NULL;
	char *body = NULL, msg[300];
	json_int_t job_id;
	bool sent;
	int rc;

	if (!job)
		return e->code;
	req = json_pack("{s:s, s:o}", "script", script, "job", job);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = call(base, "POST", "/job/submit", body, true, &answer, &sent, e);
	free(body);
	if (rc && sent) {
		size_t n = strlen(e->msg);

		snprintf(e->msg + n, sizeof(e->msg) - n, " (the job may have "
			 "been queued all the same: look for it with `squeue "
			 "--name %s` before submitting again)", s->run);
	}
	if (rc)
		return rc;
	/* A held job comes with an "error" saying it is held: the job's id
	 * is what says it was taken. */
	job_id = json_integer_value(json_object_get(answer, "job_id"));
	if (job_id > 0)
		snprintf(id, len, "%" JSON_INTEGER_FORMAT, job_id);
	else if (api_error(answer, msg, sizeof(msg)))
		rc = err_set(e, COMMON_EIO, "slurmrestd refused the job: %s",
			     msg);
	else
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s answered the "
			     "submission without a job id", base);
	json_decref(answer);
	return rc;
}

int slurm_rest_release(const char *base, const char *id, struct err *e)
{
	return job_call(base, "POST", id, "{\"hold\":false}", e);
}

int slurm_rest_cancel(const char *base, const char *id, struct err *e)
{
	return job_call(base, "DELETE", id, NULL, e);
}

int slurm_rest_job(const char *base, const char *id,
		   struct slurm_job_info *out, struct err *e)
{
	json_t *answer, *job;
	char path[64], msg[300];
	int rc;

	memset(out, 0, sizeof(*out));
	out->restarts = -1;
	snprintf(path, sizeof(path), "/job/%s", id);
	rc = call(base, "GET", path, NULL, false, &answer, NULL, e);
	if (rc)
		return rc;
	job = json_array_get(json_object_get(answer, "jobs"), 0);
	if (api_error(answer, msg, sizeof(msg))) {
		out->missing = strstr(msg, "Invalid job id") != NULL;
		if (!out->missing)
			rc = err_set(e, COMMON_EIO, "slurmrestd: %s", msg);
	} else if (!json_is_string(json_object_get(job, "job_state"))) {
		rc = err_set(e, COMMON_EIO, "slurmrestd said no job_state "
			     "for job %s", id);
	} else {
		const char *reason = json_string_value(
			json_object_get(job, "state_reason"));
		const char *nodes =
			json_string_value(json_object_get(job, "nodes"));

		snprintf(out->state, sizeof(out->state), "%s",
			 json_string_value(json_object_get(job, "job_state")));
		snprintf(out->reason, sizeof(out->reason), "%s",
			 reason ? reason : "");
		snprintf(out->nodes, sizeof(out->nodes), "%s",
			 nodes ? nodes : "");
		out->restarts = (long)json_integer_value(
			json_object_get(job, "restart_cnt"));
	}
	json_decref(answer);
	return rc;
}

/* One "prefix[1-3,07]" item (at most one bracket, nothing after it)
 * onto fn. */
static int expand_item(const char *item, size_t len,
		       int (*fn)(void *, const char *), void *ud)
{
	const char *open = memchr(item, '[', len), *p;
	char host[256];

	if (!open) {
		snprintf(host, sizeof(host), "%.*s", (int)len, item);
		return fn(ud, host);
	}
	for (p = open + 1; p < item + len && *p != ']';) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		int width = (int)(end - p);

		if (end == p)
			return -1;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (*end != ',' && *end != ']')
			return -1;
		for (long k = lo; k <= hi; k++) {
			int rc;

			snprintf(host, sizeof(host), "%.*s%0*ld",
				 (int)(open - item), item, width, k);
			rc = fn(ud, host);
			if (rc)
				return rc;
		}
		p = end + (*end == ',');
	}
	/* A list cut short has no ']'. */
	return p < item + len ? 0 : -1;
}

int slurm_hostlist_each(const char *list, int (*fn)(void *, const char *),
			void *ud)
{
	const char *p = list;

	while (*p) {
		size_t n = 0;
		int depth = 0, rc;

		while (p[n] && (depth || p[n] != ',')) {
			depth += (p[n] == '[') - (p[n] == ']');
			n++;
		}
		rc = n ? expand_item(p, n, fn, ud) : 0;
		if (rc)
			return rc;
		p += n + (p[n] == ',');
	}
	return 0;
}
