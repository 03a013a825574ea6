/*
 * slurm_rest.c: the Slurm target through slurmrestd's REST API, the
 * OpenAPI plugin Slurm 22.05 serves (openapi/v0.0.38), over libcurl: a
 * URL, or unix:/path for its unix socket. Credentials: a JWT from
 * SLURM_JWT (rest_auth/jwt) goes as X-SLURM-USER-TOKEN with the user's
 * name; without one nothing is sent, which a unix socket's rest_auth/local
 * accepts (it asks the kernel who connected). slurmrestd answers a failed
 * call with HTTP 500 and an "errors" array; its first message is the one
 * the user sees. Nothing is retried: a submission must not happen twice.
 */
#include "launcher/job.h"
#include "launcher/target/slurm/slurm.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#define REST_PATH "/slurm/v0.0.38"

/* Collects an answer, at most 4 MiB. */
static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;

	if (b->len + size * n > 4u << 20 || buf_append(b, data, size * n))
		return 0;
	return size * n;
}

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

/*
 * method path with body (NULL: none) to base; *out gets the parsed answer
 * (any status, as long as it is slurmrestd's JSON). A transport failure
 * or another answer is COMMON_EIO naming base.
 */
static int call(const char *base, const char *method, const char *path,
		const char *body, json_t **out, struct err *e)
{
	bool unix_socket = !strncmp(base, "unix:", 5);
	const char *jwt = getenv("SLURM_JWT");
	struct curl_slist *headers = NULL, *h;
	char errbuf[CURL_ERROR_SIZE] = "";
	struct buf url, header, answer;
	json_error_t jerr;
	CURL *curl = curl_easy_init();
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	long status = 0;
	int rc = 0;

	*out = NULL;
	buf_init(&url);
	buf_init(&header);
	buf_init(&answer);
	if (!curl ||
	    buf_appendf(&url, "%s%s%s", unix_socket ? "http://slurmrestd" : base,
			REST_PATH, path)) {
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
		goto out;
	}
	h = curl_slist_append(NULL, "Content-Type: application/json");
	headers = h;
	if (h && jwt && *jwt) {
		char user[256];

		default_remote_user(user, sizeof(user));
		if (buf_appendf(&header, "X-SLURM-USER-NAME: %s", user))
			h = NULL;
		if (h)
			h = curl_slist_append(headers, header.data);
		header.len = 0;
		if (h && buf_appendf(&header, "X-SLURM-USER-TOKEN: %s", jwt))
			h = NULL;
		if (h)
			h = curl_slist_append(headers, header.data);
	}
	if (!h) {
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
		goto out;
	}
	if (curl_easy_setopt(curl, CURLOPT_URL, url.data) ||
	    (unix_socket &&
	     curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, base + 5)) ||
	    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method) ||
	    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers) ||
	    (body && curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body)) ||
	    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect) ||
	    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer) ||
	    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf) ||
	    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L) ||
	    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
			     (long)job_env_ms("SLICECTL_SLURM_TIMEOUT_MS",
					      60000))) {
		rc = err_set(e, COMMON_EIO, "libcurl refused an option");
		goto out;
	}
	cc = curl_easy_perform(curl);
	if (cc) {
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s did not answer "
			     "%s %s: %s", base, method, path,
			     *errbuf ? errbuf : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	*out = answer.len ? json_loadb(answer.data, answer.len, 0, &jerr)
			  : NULL;
	if (!json_is_object(*out)) {
		const char *text = answer.len ? answer.data : "";

		json_decref(*out);
		*out = NULL;
		rc = err_set(e, COMMON_EIO, "slurmrestd at %s answered %s %s "
			     "with HTTP %ld%s%.*s%s", base, method, path,
			     status, *text ? ": " : " and no Slurm JSON",
			     (int)strcspn(text, "\r\n"), text,
			     status == 401 ? " (rest_auth/jwt wants a token: "
			     "SLURM_JWT from scontrol token)"
			     : status == 404 ? " (slicectl speaks Slurm "
			     "22.05's openapi/v0.0.38: slurmrestd -s "
			     "openapi/v0.0.38)" : "");
	}
out:
	curl_slist_free_all(headers);
	if (curl)
		curl_easy_cleanup(curl);
	buf_release(&url);
	buf_release(&header);
	buf_release(&answer);
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
	rc = call(base, method, path, body, &answer, e);
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
	int rc;

	if (!job)
		return e->code;
	req = json_pack("{s:s, s:o}", "script", script, "job", job);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = call(base, "POST", "/job/submit", body, &answer, e);
	free(body);
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
	rc = call(base, "GET", path, NULL, &answer, e);
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
