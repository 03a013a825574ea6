/*
 * run/job.c: job.json, the run's spec, both ways.
 *
 * Parsing checks the JSON types field by field (unknown fields are
 * errors, so a typo in a field name never silently becomes a default);
 * job_check then checks the values of the struct, and job_to_json runs
 * the same check, so what job_to_json writes job_parse reads back.
 * Every error names the field and says what it allows.
 */
#include "run/run.h"

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Larger than any object the launcher writes; a bound for readers. */
#define JOB_JSON_MAX ((size_t)1 << 20)

/* Workers of a run, all slices together. */
#define MAX_WORKERS 65536u

#define DEFAULT_MAX_RESTARTS 100
#define DEFAULT_HANG_TIMEOUT_S 1800
#define DEFAULT_GRACE_S 25
#define DEFAULT_KEEP 3
#define DEFAULT_HEARTBEAT_S 10
#define DEFAULT_SPOOL_MB 10240
/* torchrun's default MASTER_PORT. */
#define DEFAULT_RENDEZVOUS_PORT 29500
/* Long enough for a DCGM diagnostic's short run or an NCCL test. */
#define DEFAULT_PREFLIGHT_TIMEOUT_S 300

/* The unsigned fields, their JSON names and ranges. */
struct uint_field {
	const char *key;
	size_t off;
	unsigned min, max;
	const char *meaning; /* what 0 means, when allowed and special */
};

static const struct uint_field uint_fields[] = {
	{ "num_slices", offsetof(struct job, num_slices), 1, 65536, NULL },
	{ "workers_per_slice", offsetof(struct job, workers_per_slice), 1,
	  65536, NULL },
	{ "max_restarts", offsetof(struct job, max_restarts), 0, 1000000,
	  NULL },
	{ "hang_timeout_s", offsetof(struct job, hang_timeout_s), 0,
	  30 * 86400, "0 turns hang detection off" },
	{ "grace_s", offsetof(struct job, grace_s), 1, 3600, NULL },
	{ "keep", offsetof(struct job, keep), 1, 1000000, NULL },
	{ "keep_every", offsetof(struct job, keep_every), 0, 4000000000u,
	  "0 keeps no extra steps" },
	{ "heartbeat_s", offsetof(struct job, heartbeat_s), 1, 3600, NULL },
	{ "spool_mb", offsetof(struct job, spool_mb), 1, 1u << 30, NULL },
	/* Unprivileged, and the whole range of RUN_RENDEZVOUS_PORTS within
	 * 65535. */
	{ "rendezvous_port", offsetof(struct job, rendezvous_port), 1024,
	  65536 - RUN_RENDEZVOUS_PORTS, NULL },
	{ "preflight_timeout_s", offsetof(struct job, preflight_timeout_s), 1,
	  86400, NULL },
};

#define N_UINT_FIELDS (sizeof(uint_fields) / sizeof(uint_fields[0]))

static const char *const all_fields =
	"name, command, env, workdir, num_slices, workers_per_slice, "
	"max_restarts, hang_timeout_s, grace_s, keep, keep_every, "
	"heartbeat_s, spool_mb, rendezvous_port, preflight, "
	"preflight_timeout_s, delete_on_finish, max_infra_restarts, tpu, "
	"target, monitoring, notify, hang_signal, bad_host_pattern, local_keep, local_dir, "
	"persist_every";

/* Signals a trainer may catch to print its stacks, and nothing that
 * stops, kills or crashes a process by design. */
static const struct {
	const char *name;
	int number;
} hang_signals[] = {
	{ "SIGHUP", SIGHUP },   { "SIGINT", SIGINT },   { "SIGQUIT", SIGQUIT },
	{ "SIGUSR1", SIGUSR1 }, { "SIGUSR2", SIGUSR2 }, { "SIGALRM", SIGALRM },
	{ "SIGWINCH", SIGWINCH },
};

#define N_HANG_SIGNALS (sizeof(hang_signals) / sizeof(hang_signals[0]))
#define HANG_SIGNAL_NAMES \
	"SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM or SIGWINCH"

int job_signal_number(const char *name)
{
	for (size_t i = 0; name && i < N_HANG_SIGNALS; i++)
		if (!strcmp(name, hang_signals[i].name) ||
		    !strcmp(name, hang_signals[i].name + 3))
			return hang_signals[i].number;
	return 0;
}

const char *job_signal_name(int sig)
{
	for (size_t i = 0; i < N_HANG_SIGNALS; i++)
		if (hang_signals[i].number == sig)
			return hang_signals[i].name;
	return NULL;
}

static unsigned *uint_at(struct job *j, const struct uint_field *f)
{
	return (unsigned *)((char *)j + f->off);
}

static unsigned uint_of(const struct job *j, const struct uint_field *f)
{
	return *(const unsigned *)((const char *)j + f->off);
}

void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	strlist_init(&j->env);
	strlist_init(&j->notify);
	j->num_slices = 1;
	j->workers_per_slice = 1;
	j->max_restarts = DEFAULT_MAX_RESTARTS;
	j->hang_timeout_s = DEFAULT_HANG_TIMEOUT_S;
	j->grace_s = DEFAULT_GRACE_S;
	j->keep = DEFAULT_KEEP;
	j->keep_every = 0;
	j->heartbeat_s = DEFAULT_HEARTBEAT_S;
	j->spool_mb = DEFAULT_SPOOL_MB;
	j->rendezvous_port = DEFAULT_RENDEZVOUS_PORT;
	j->preflight_timeout_s = DEFAULT_PREFLIGHT_TIMEOUT_S;
	j->delete_on_finish = false;
	j->max_infra_restarts = -1;
	j->local_keep = JOB_LOCAL_KEEP;
}

void job_local_tier_dir(const struct job *j, const char *state_dir,
			const char *part, char *out, size_t cap)
{
	if (!j->local_keep)
		snprintf(out, cap, "%s", "");
	else if (j->local_dir)
		snprintf(out, cap, "%s/%s/%s", j->local_dir, j->name, part);
	else
		snprintf(out, cap, "%s/local", state_dir);
}

void job_release(struct job *j)
{
	if (!j)
		return;
	free(j->name);
	free(j->command);
	strlist_release(&j->env);
	free(j->workdir);
	free(j->preflight);
	free(j->bad_host_pattern);
	free(j->local_dir);
	free(j->tpu_project);
	free(j->tpu_zone);
	free(j->tpu_name);
	free(j->monitoring_project);
	strlist_release(&j->notify);
	job_target_release(&j->target);
	job_init(j);
}

void job_target_release(struct job_target *t)
{
	free(t->kind);
	free(t->cluster);
	free(t->location);
	free(t->project);
	free(t->namespace);
	free(t->jobset);
	free(t->kubeconfig);
	free(t->context);
	free(t->partition);
	free(t->job_id);
	free(t->slurmrestd);
	memset(t, 0, sizeof(*t));
}

static int dup_or_null(char **dst, const char *s)
{
	*dst = s ? strdup(s) : NULL;
	return s && !*dst ? -1 : 0;
}

int job_target_copy(struct job_target *dst, const struct job_target *src)
{
	memset(dst, 0, sizeof(*dst));
	if (dup_or_null(&dst->kind, src->kind) ||
	    dup_or_null(&dst->cluster, src->cluster) ||
	    dup_or_null(&dst->location, src->location) ||
	    dup_or_null(&dst->project, src->project) ||
	    dup_or_null(&dst->namespace, src->namespace) ||
	    dup_or_null(&dst->jobset, src->jobset) ||
	    dup_or_null(&dst->kubeconfig, src->kubeconfig) ||
	    dup_or_null(&dst->context, src->context) ||
	    dup_or_null(&dst->partition, src->partition) ||
	    dup_or_null(&dst->job_id, src->job_id) ||
	    dup_or_null(&dst->slurmrestd, src->slurmrestd)) {
		job_target_release(dst);
		return -1;
	}
	return 0;
}

void run_worker_name(unsigned slice, unsigned worker, char *out, size_t len)
{
	if (out && len)
		snprintf(out, len, "slice-%u-worker-%u", slice, worker);
}

/* ^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$ */
static bool run_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63 || s[0] < 'a' || s[0] > 'z' || s[n - 1] == '-')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* Project, zone and queued resource ids end up in API paths. */
static bool tpu_id_valid(const char *s)
{
	if (!*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f || *p == '/' || *p == '?' ||
		    *p == '#' || *p == '%')
			return false;
	return true;
}

static int check_uint(const struct uint_field *f, long long v, struct err *e)
{
	if (v < (long long)f->min || v > (long long)f->max)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"%s\" is %lld; it must be an "
			       "integer from %u to %u%s%s%s", f->key, v, f->min,
			       f->max, f->meaning ? " (" : "",
			       f->meaning ? f->meaning : "",
			       f->meaning ? ")" : "");
	return 0;
}

/* Checks one "NAME=VALUE" entry, and that NAME is not in env[0..i). */
static int check_env_entry(const struct strlist *env, size_t i,
			   struct err *e)
{
	const char *kv = env->v[i];
	const char *eq = strchr(kv, '=');
	size_t n;

	if (!eq)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"env\" entry \"%.100s\" is not "
			       "NAME=VALUE", kv);
	n = (size_t)(eq - kv);
	if (!env_name_valid(kv, n))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"env\" name \"%.*s\" is not a valid "
			       "environment variable name (letters, digits "
			       "and '_', not starting with a digit)",
			       (int)(n > 100 ? 100 : n), kv);
	if (!json_utf8_valid(eq + 1, strlen(eq + 1)))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"env\" value of %.*s is not valid "
			       "UTF-8 text", (int)(n > 100 ? 100 : n), kv);
	for (size_t k = 0; k < i; k++)
		if (!strncmp(env->v[k], kv, n + 1))
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"env\" sets %.*s twice; "
				       "give each name once",
				       (int)(n > 100 ? 100 : n), kv);
	return 0;
}


/* The targets whose "target" is its kind alone: a queued resource's
 * run (its "tpu" object says which) and the local provider's. Runs
 * written before the kind was recorded for them have no "target". */
static bool bare_kind(const char *kind)
{
	return !strcmp(kind, "tpu-vm") || !strcmp(kind, "local");
}

static int check_bare_target(const struct job *j, struct err *e)
{
	const struct job_target *t = &j->target;
	const char *const fields[] = { t->cluster,    t->location,
				       t->project,    t->namespace,
				       t->jobset,     t->kubeconfig,
				       t->context,    t->partition,
				       t->job_id,     t->slurmrestd };
	bool tpu = !strcmp(t->kind, "tpu-vm");

	for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++)
		if (fields[i])
			return err_set(e, COMMON_EINVAL,
				       "job.json: a \"%s\" \"target\" has "
				       "only \"kind\"", t->kind);
	if (tpu != (j->tpu_name != NULL))
		return err_set(e, COMMON_EINVAL,
			       "job.json: a \"%s\" \"target\" %s a \"tpu\" "
			       "object", t->kind, tpu ? "needs" : "has no");
	return 0;
}
/* The values of a job, whether parsed or built by a caller. */
static bool nonempty(const char *s)
{
	return s && *s;
}

static int job_check(const struct job *j, struct err *e)
{
	int r;

	if (!j->name)
		return err_set(e, COMMON_EINVAL,
			       "job.json has no \"name\"; give the run a "
			       "name of lowercase letters, digits and '-'");
	if (!run_name_valid(j->name))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"name\" \"%.100s\" is not a valid "
			       "run name: 1 to 63 lowercase letters, digits "
			       "and '-', starting with a letter and not "
			       "ending with '-'", j->name);
	if (!j->command)
		return err_set(e, COMMON_EINVAL,
			       "job.json has no \"command\"; give the "
			       "trainer's command line, as /bin/sh -c reads "
			       "it");
	if (!*j->command)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"command\" is empty; it must be "
			       "the trainer's command line");
	if (!json_utf8_valid(j->command, strlen(j->command)))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"command\" is not valid UTF-8 "
			       "text");
	if (j->workdir && (!*j->workdir ||
			   !json_utf8_valid(j->workdir, strlen(j->workdir))))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"workdir\" must be a non-empty "
			       "path in UTF-8, or left out (null)");
	if (j->preflight && (!*j->preflight ||
			     !json_utf8_valid(j->preflight,
					      strlen(j->preflight))))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"preflight\" must be a non-empty "
			       "command line in UTF-8, as /bin/sh -c reads "
			       "it, or left out (null)");
	if (j->local_dir && (j->local_dir[0] != '/' ||
			     !json_utf8_valid(j->local_dir,
					      strlen(j->local_dir))))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"local_dir\" must be an absolute "
			       "path in UTF-8, or left out (null: the state "
			       "directory)");
	if (j->bad_host_pattern) {
		r = job_check_pattern(j->bad_host_pattern, e);
		if (r)
			return r;
	}
	for (size_t i = 0; i < j->env.n; i++) {
		r = check_env_entry(&j->env, i, e);
		if (r)
			return r;
	}
	for (size_t i = 0; i < N_UINT_FIELDS; i++) {
		r = check_uint(&uint_fields[i],
			       (long long)uint_of(j, &uint_fields[i]), e);
		if (r)
			return r;
	}
	if (j->hang_signal && !job_signal_name(j->hang_signal))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"hang_signal\" %d is not one of "
			       HANG_SIGNAL_NAMES, j->hang_signal);
	if ((uint64_t)j->num_slices * j->workers_per_slice > MAX_WORKERS)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"num_slices\" %u times "
			       "\"workers_per_slice\" %u is more than the %u "
			       "workers a run may have", j->num_slices,
			       j->workers_per_slice, MAX_WORKERS);
	if (j->tpu_project || j->tpu_zone || j->tpu_name) {
		const char *const v[3] = { j->tpu_project, j->tpu_zone,
					   j->tpu_name };
		const char *const k[3] = { "project", "zone", "name" };

		for (int i = 0; i < 3; i++)
			if (!v[i] || !tpu_id_valid(v[i]))
				return err_set(e, COMMON_EINVAL,
					       "job.json: \"tpu\" needs "
					       "\"%s\" as a non-empty string "
					       "without spaces, '/', '?', '#' "
					       "or '%%' (or leave \"tpu\" out "
					       "for the local provider)", k[i]);
	}
	if (j->monitoring_project && !tpu_id_valid(j->monitoring_project))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"monitoring\" needs \"project\" as "
			       "a non-empty string without spaces, '/', '?', "
			       "'#' or '%%' (or leave \"monitoring\" out)");
	if (j->notify.n > NOTIFY_MAX_URLS)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"notify\" lists %zu URLs; at most "
			       "%d", j->notify.n, NOTIFY_MAX_URLS);
	for (size_t i = 0; i < j->notify.n; i++) {
		struct err ue;

		err_init(&ue);
		if (notify_url_check(j->notify.v[i], &ue))
			return err_set(e, COMMON_EINVAL, "job.json: \"notify\": "
				       "%s", ue.msg);
	}
	if (j->target.kind && !strcmp(j->target.kind, "slurm") &&
	    !(nonempty(j->target.partition) && nonempty(j->target.job_id)))
		return err_set(e, COMMON_EINVAL,
			       "job.json: a \"slurm\" \"target\" must have "
			       "non-empty \"partition\" and \"job_id\"");
	if (j->target.kind && !strcmp(j->target.kind, "gke") &&
	    !(nonempty(j->target.namespace) && nonempty(j->target.jobset)))
		return err_set(e, COMMON_EINVAL,
			       "job.json: a \"gke\" \"target\" must have "
			       "non-empty \"namespace\" and \"jobset\"");
	if (j->target.kind && !strcmp(j->target.kind, "vertex") &&
	    !(nonempty(j->target.location) && nonempty(j->target.project)))
		return err_set(e, COMMON_EINVAL,
			       "job.json: a \"vertex\" \"target\" must have "
			       "non-empty \"location\" and \"project\"");
	if (j->target.kind && bare_kind(j->target.kind))
		return check_bare_target(j, e);
	if (j->target.kind && strcmp(j->target.kind, "slurm") &&
	    strcmp(j->target.kind, "gke") && strcmp(j->target.kind, "vertex"))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"target\"'s \"kind\" must be one "
			       "of tpu-vm, gke, slurm, local, vertex, not "
			       "\"%.40s\"",
			       j->target.kind);
	return 0;
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "a list";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number with a fraction";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "something else";
}

/* *dst = a copy of the string v, member key of the object that `in` names
 * in messages ("" for job.json's own); null_ok: null leaves *dst NULL. */
/* key's v, an integer from 0 (what 0 means: zero) to max, into *out. */
static int take_count(const char *key, const json_t *v, long long max,
		      const char *zero, unsigned *out, struct err *e)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > max)
		return err_set(e, COMMON_EINVAL, "job.json: \"%s\" must be "
			       "an integer from 0 (%s) to %lld", key, zero,
			       max);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static int take_string(const char *in, const char *key, const json_t *v,
		       bool null_ok, char **dst, struct err *e)
{
	if (null_ok && json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return err_set(e, COMMON_EINVAL,
			       "job.json: %s\"%s\" must be a string%s, not %s",
			       in, key, null_ok ? " or null" : "",
			       json_type_name(v));
	*dst = strdup(json_string_value(v));
	if (!*dst)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}

static int parse_env(const json_t *v, struct strlist *env, struct err *e)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x) {
			struct buf b;
			int r;

			if (strchr(k, '=') || !env_name_valid(k, strlen(k)))
				return err_set(e, COMMON_EINVAL,
					       "job.json: \"env\" name "
					       "\"%.100s\" is not a valid "
					       "environment variable name "
					       "(letters, digits and '_', not "
					       "starting with a digit)", k);
			if (!json_is_string(x))
				return err_set(e, COMMON_EINVAL,
					       "job.json: \"env\" value of "
					       "%.100s must be a string, not "
					       "%s", k, json_type_name(x));
			buf_init(&b);
			r = buf_appendf(&b, "%s=%s", k, json_string_value(x));
			if (!r)
				r = strlist_push(env, b.data);
			buf_release(&b);
			if (r)
				return err_set(e, COMMON_ENOMEM,
					       "out of memory");
		}
		return 0;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			if (!json_is_string(x))
				return err_set(e, COMMON_EINVAL,
					       "job.json: \"env\" entry %zu "
					       "must be a \"NAME=VALUE\" "
					       "string, not %s", i,
					       json_type_name(x));
			if (strlist_push(env, json_string_value(x)))
				return err_set(e, COMMON_ENOMEM,
					       "out of memory");
		}
		return 0;
	}
	return err_set(e, COMMON_EINVAL,
		       "job.json: \"env\" must be an object of string values "
		       "or a list of \"NAME=VALUE\" strings, not %s",
		       json_type_name(v));
}

static int parse_tpu(const json_t *v, struct job *j, struct err *e)
{
	const char *k;
	json_t *x;
	int r;

	if (!json_is_object(v))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"tpu\" must be an object "
			       "{\"project\", \"zone\", \"name\"} or null, "
			       "not %s", json_type_name(v));
	json_object_foreach((json_t *)v, k, x) {
		char **dst = !strcmp(k, "project") ? &j->tpu_project :
			     !strcmp(k, "zone") ? &j->tpu_zone :
			     !strcmp(k, "name") ? &j->tpu_name : NULL;

		if (!dst)
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"tpu\" has an unknown "
				       "field \"%.100s\"; its fields are "
				       "project, zone and name", k);
		r = take_string("\"tpu\".", k, x, false, dst, e);
		if (r)
			return r;
	}
	if (!j->tpu_project || !j->tpu_zone || !j->tpu_name)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"tpu\" needs all of \"project\", "
			       "\"zone\" and \"name\"");
	return 0;
}

/* "target" fields: which may be null, and where each goes. */
static char **target_field(struct job_target *t, const char *k, bool *null_ok)
{
	*null_ok = strcmp(k, "kind");
	return !strcmp(k, "kind")	  ? &t->kind
	       : !strcmp(k, "cluster")	  ? &t->cluster
	       : !strcmp(k, "location")	  ? &t->location
	       : !strcmp(k, "project")	  ? &t->project
	       : !strcmp(k, "namespace")  ? &t->namespace
	       : !strcmp(k, "jobset")	  ? &t->jobset
	       : !strcmp(k, "kubeconfig") ? &t->kubeconfig
	       : !strcmp(k, "context")	  ? &t->context
	       : !strcmp(k, "partition")  ? &t->partition
	       : !strcmp(k, "job_id")	  ? &t->job_id
	       : !strcmp(k, "slurmrestd") ? &t->slurmrestd
					  : NULL;
}

static int parse_target(const json_t *v, struct job *j, struct err *e)
{
	const char *k;
	bool null_ok;
	json_t *x;
	int r;

	if (!json_is_object(v))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"target\" must be an object or "
			       "null, not %s", json_type_name(v));
	json_object_foreach((json_t *)v, k, x) {
		char **dst = target_field(&j->target, k, &null_ok);

		if (!dst)
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"target\" has an unknown "
				       "field \"%.100s\"; its fields are kind, "
				       "cluster, location, project, namespace, "
				       "jobset, kubeconfig, context, partition, "
				       "job_id and slurmrestd", k);
		r = take_string("\"target\".", k, x, null_ok, dst, e);
		if (r)
			return r;
	}
	if (!j->target.kind)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"target\" needs \"kind\"");
	return 0;
}

/* "notify": a list of URLs (job_check checks each), or null (none). */
static int parse_notify(const json_t *v, struct strlist *out, struct err *e)
{
	const json_t *x;
	size_t i;

	if (!json_is_array(v))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"notify\" must be a list of URLs "
			       "or null, not %s", json_type_name(v));
	json_array_foreach((json_t *)v, i, x) {
		if (!json_is_string(x))
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"notify\" item %zu must be "
				       "a URL string, not %s", i,
				       json_type_name(x));
		if (strlist_push(out, json_string_value(x)))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	return 0;
}

/* "monitoring": {"project": P}, or null (off). */
static int parse_monitoring(const json_t *v, struct job *j, struct err *e)
{
	const json_t *p = json_object_get(v, "project");

	if (!json_is_object(v))
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"monitoring\" must be an object "
			       "{\"project\": P} or null, not %s",
			       json_type_name(v));
	if (json_object_size(v) != 1 || !p)
		return err_set(e, COMMON_EINVAL,
			       "job.json: \"monitoring\" takes one field, "
			       "\"project\"");
	return take_string("\"monitoring\".", "project", p, false,
			   &j->monitoring_project, e);
}

static int parse_field(const char *k, const json_t *v, struct job *j,
		       struct err *e)
{
	if (!strcmp(k, "name"))
		return take_string("", k, v, false, &j->name, e);
	if (!strcmp(k, "command"))
		return take_string("", k, v, false, &j->command, e);
	if (!strcmp(k, "workdir"))
		return take_string("", k, v, true, &j->workdir, e);
	if (!strcmp(k, "preflight"))
		return take_string("", k, v, true, &j->preflight, e);
	if (!strcmp(k, "local_dir"))
		return take_string("", k, v, true, &j->local_dir, e);
	if (!strcmp(k, "local_keep"))
		return take_count(k, v, 1000, "no local tier", &j->local_keep,
				  e);
	if (!strcmp(k, "persist_every"))
		return take_count(k, v, 4000000000LL, "every step",
				  &j->persist_every, e);
	if (!strcmp(k, "bad_host_pattern"))
		return take_string("", k, v, true, &j->bad_host_pattern, e);
	if (!strcmp(k, "env"))
		return json_is_null(v) ? 0 : parse_env(v, &j->env, e);
	if (!strcmp(k, "tpu"))
		return json_is_null(v) ? 0 : parse_tpu(v, j, e);
	if (!strcmp(k, "target"))
		return json_is_null(v) ? 0 : parse_target(v, j, e);
	if (!strcmp(k, "monitoring"))
		return json_is_null(v) ? 0 : parse_monitoring(v, j, e);
	if (!strcmp(k, "notify"))
		return json_is_null(v) ? 0 : parse_notify(v, &j->notify, e);
	if (!strcmp(k, "hang_signal")) {
		/* Absent or null: none. */
		if (json_is_null(v))
			return 0;
		/* job.json spells it whole, as it writes it. */
		if (json_is_string(v) &&
		    !strncmp(json_string_value(v), "SIG", 3))
			j->hang_signal = job_signal_number(json_string_value(v));
		if (!j->hang_signal)
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"hang_signal\" must be null "
				       "or one of " HANG_SIGNAL_NAMES);
		return 0;
	}
	if (!strcmp(k, "max_infra_restarts")) {
		/* Absent or null: no limit, as capacity comes and goes. */
		if (json_is_null(v)) {
			j->max_infra_restarts = -1;
			return 0;
		}
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 1000000)
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"max_infra_restarts\" must "
				       "be null (no limit) or an integer from 0 "
				       "to 1000000");
		j->max_infra_restarts = (int64_t)json_integer_value(v);
		return 0;
	}
	if (!strcmp(k, "delete_on_finish")) {
		if (!json_is_boolean(v))
			return err_set(e, COMMON_EINVAL,
				       "job.json: \"delete_on_finish\" must "
				       "be true or false, not %s",
				       json_type_name(v));
		j->delete_on_finish = json_is_true(v);
		return 0;
	}
	for (size_t i = 0; i < N_UINT_FIELDS; i++) {
		const struct uint_field *f = &uint_fields[i];
		int r;

		if (strcmp(k, f->key))
			continue;
		if (!json_is_integer(v)) {
			r = err_set(e, COMMON_EINVAL,
				    "job.json: \"%s\" must be an integer from "
				    "%u to %u, not %s", k, f->min, f->max,
				    json_type_name(v));
			return r;
		}
		r = check_uint(f, (long long)json_integer_value(v), e);
		if (r)
			return r;
		*uint_at(j, f) = (unsigned)json_integer_value(v);
		return 0;
	}
	return err_set(e, COMMON_EINVAL,
		       "job.json: unknown field \"%.100s\"; the fields are %s",
		       k, all_fields);
}

int job_parse(const char *json, size_t len, struct job *out, struct err *e)
{
	json_error_t jerr;
	json_t *root;
	const char *k;
	json_t *v;
	int r = 0;

	err_init(e);
	job_init(out);
	if (!json)
		return err_set(e, COMMON_EINVAL, "job.json: no text to parse");
	if (len > JOB_JSON_MAX)
		return err_set(e, COMMON_EINVAL,
			       "job.json is %zu bytes; at most %zu are "
			       "expected of it", len, JOB_JSON_MAX);
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(e, COMMON_EINVAL,
			       "job.json is not valid JSON: line %d column "
			       "%d: %s", jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root))
		r = err_set(e, COMMON_EINVAL,
			    "job.json must be a JSON object, not %s",
			    json_type_name(root));
	else
		json_object_foreach(root, k, v) {
			r = parse_field(k, v, out, e);
			if (r)
				break;
		}
	json_decref(root);
	if (!r)
		r = job_check(out, e);
	if (r)
		job_release(out);
	return r;
}

static int set_new(json_t *o, const char *k, json_t *v)
{
	return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *env_object(const struct strlist *env)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < env->n; i++) {
		const char *eq = strchr(env->v[i], '=');
		char *name = strndup(env->v[i], (size_t)(eq - env->v[i]));
		int r = name ? set_new(o, name, json_string(eq + 1)) : -1;

		free(name);
		if (r) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *string_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *target_object(const struct job_target *t)
{
	if (bare_kind(t->kind))
		return json_pack("{s:s}", "kind", t->kind);
	if (!strcmp(t->kind, "slurm"))
		return json_pack("{s:s, s:s, s:s, s:o, s:o}", "kind", t->kind,
				 "partition", t->partition, "job_id", t->job_id,
				 "cluster", string_or_null(t->cluster),
				 "slurmrestd", string_or_null(t->slurmrestd));
	/* A Vertex run's custom jobs are found by their run label: --watch
	 * submits new ones, and job.json does not change. */
	if (!strcmp(t->kind, "vertex"))
		return json_pack("{s:s, s:s, s:s}", "kind", t->kind,
				 "location", t->location, "project",
				 t->project);
	return json_pack("{s:s, s:o, s:o, s:o, s:s, s:s, s:o, s:o}",
			 "kind", t->kind, "cluster", string_or_null(t->cluster),
			 "location", string_or_null(t->location),
			 "project", string_or_null(t->project),
			 "namespace", t->namespace, "jobset", t->jobset,
			 "kubeconfig", string_or_null(t->kubeconfig),
			 "context", string_or_null(t->context));
}

int job_to_json(const struct job *j, char **out, struct err *e)
{
	json_t *root;
	char *text = NULL;
	struct buf b;
	int bad = 0, r;

	err_init(e);
	*out = NULL;
	r = job_check(j, e);
	if (r)
		return r;
	root = json_object();
	if (!root)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	bad |= set_new(root, "name", json_string(j->name));
	bad |= set_new(root, "command", json_string(j->command));
	bad |= set_new(root, "env", env_object(&j->env));
	if (j->workdir)
		bad |= set_new(root, "workdir", json_string(j->workdir));
	if (j->preflight)
		bad |= set_new(root, "preflight", json_string(j->preflight));
	for (size_t i = 0; i < N_UINT_FIELDS; i++)
		bad |= set_new(root, uint_fields[i].key,
			       json_integer(uint_of(j, &uint_fields[i])));
	bad |= set_new(root, "delete_on_finish",
		       json_boolean(j->delete_on_finish));
	/* Only when limited: older supervisors refuse a field they do not
	 * know, and no limit is what they do. */
	if (j->max_infra_restarts >= 0)
		bad |= set_new(root, "max_infra_restarts",
			       json_integer(j->max_infra_restarts));
	/* Only when set: older supervisors refuse a field they do not
	 * know. */
	/* Only when not the default, or set: older supervisors refuse a
	 * field they do not know. */
	if (j->local_keep != JOB_LOCAL_KEEP)
		bad |= set_new(root, "local_keep",
			       json_integer(j->local_keep));
	if (j->local_dir)
		bad |= set_new(root, "local_dir", json_string(j->local_dir));
	if (j->persist_every > 1)
		bad |= set_new(root, "persist_every",
			       json_integer(j->persist_every));
	if (j->bad_host_pattern)
		bad |= set_new(root, "bad_host_pattern",
			       json_string(j->bad_host_pattern));
	if (j->hang_signal)
		bad |= set_new(root, "hang_signal",
			       json_string(job_signal_name(j->hang_signal)));
	if (j->tpu_project)
		bad |= set_new(root, "tpu",
			       json_pack("{s:s, s:s, s:s}",
					 "project", j->tpu_project,
					 "zone", j->tpu_zone,
					 "name", j->tpu_name));
	if (j->target.kind)
		bad |= set_new(root, "target", target_object(&j->target));
	if (j->monitoring_project)
		bad |= set_new(root, "monitoring",
			       json_pack("{s:s}", "project",
					 j->monitoring_project));
	/* Only when given, for the supervisors that do not know it. */
	if (j->notify.n) {
		json_t *a = json_array();

		for (size_t i = 0; a && i < j->notify.n; i++)
			bad |= json_array_append_new(
				a, json_string(j->notify.v[i]));
		bad |= set_new(root, "notify", a);
	}
	if (!bad)
		text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	buf_init(&b);
	r = buf_appendf(&b, "%s\n", text);
	free(text);
	if (r) {
		buf_release(&b);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	*out = buf_detach(&b);
	return 0;
}
