/*
 * job.c: see job.h. Everything is checked before anything is written:
 * the request's values (named by the flag that gave them), the script
 * directory, the supervisor binary, an existing job.json that differs,
 * and last that the bucket takes a write (a probe object, deleted again).
 * Then the run's objects go up in the order a worker needs them last to
 * first: bundle, supervisor, job.json, control.json.
 */
#include "launcher/job.h"
#include "launcher/watch_lease.h"
#include "launcher/launcher.h"
#include "launcher/accelerator.h"
#include "checkpoint/checkpoint.h"
#include "startup/startup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Larger than any job.json written here (run_options.c reads as much). */
#define JOB_READ_MAX ((size_t)1 << 20)
#define SUPERVISOR_PREFIX "supervisor/slice-supervisor-"

void job_request_init(struct job_request *r)
{
	struct job d;

	memset(r, 0, sizeof(*r));
	strlist_init(&r->env);
	strlist_init(&r->notify);
	job_init(&d);
	r->num_slices = 1;
	r->max_restarts = d.max_restarts;
	r->max_infra_restarts = JOB_NO_LIMIT;
	r->hang_timeout_s = d.hang_timeout_s;
	r->grace_s = d.grace_s;
	r->keep = d.keep;
	r->keep_every = d.keep_every;
	r->local_keep = d.local_keep;
	r->preflight_timeout_s = d.preflight_timeout_s;
	job_release(&d);
}

void job_request_release(struct job_request *r)
{
	if (!r)
		return;
	strlist_release(&r->env);
	strlist_release(&r->notify);
	memset(r, 0, sizeof(*r));
	strlist_init(&r->env);
	strlist_init(&r->notify);
}

void prepared_run_release(struct prepared_run *p)
{
	if (!p)
		return;
	free(p->startup_script);
	job_release(&p->job);
	memset(p, 0, sizeof(*p));
	job_init(&p->job);
}

void job_say(uint64_t start_ms, const char *fmt, ...)
{
	va_list ap;

	printf("[%8.1f s] ", (double)(mono_ms() - start_ms) / 1000.0);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

int job_follow_control(struct store *s, uint64_t start_ms, char *state,
		       size_t len, int64_t *generation, struct control *c)
{
	struct err e;

	err_init(&e);
	if (control_load(s, c, &e)) {
		log_warn("reading the run's control.json: %s", e.msg);
		return -1;
	}
	if (strcmp(c->state, state) || c->generation != *generation) {
		job_say(start_ms, "run: %s, generation %" PRId64 "%s%s%s",
			c->state, c->generation, *c->reason ? " (" : "",
			c->reason, *c->reason ? ")" : "");
		snprintf(state, len, "%s", c->state);
		*generation = c->generation;
	}
	return 0;
}

int job_run_over(uint64_t start_ms, const struct control *c)
{
	if (!strcmp(c->state, "done")) {
		job_say(start_ms, "run: done");
		return 0;
	}
	if (!strcmp(c->state, "failed")) {
		log_error("the run failed: %s", c->reason);
		return 1;
	}
	return -1;
}

int job_watch_loop(int (*once)(void *ud, unsigned *errors), void *ud,
		   unsigned max_errors, uint64_t poll_ms,
		   struct watch_lease *lease)
{
	unsigned errors = 0;
	struct err e;

	for (;;) {
		int status;

		if (!watch_lease_held(lease) && watch_lease_take(lease, &e)) {
			log_error("taking the watch lease: %s", e.msg);
			return 1;
		}
		status = once(ud, &errors);

		if (status >= 0)
			return status;
		if (errors >= max_errors) {
			log_error("%u looks in a row failed: giving up "
				  "watching (the run goes on)", errors);
			return 1;
		}
		proc_sleep_ms(poll_ms, true);
	}
}

unsigned job_env_ms(const char *var, unsigned dflt)
{
	const char *v = getenv(var);
	unsigned long ms;
	char *end;

	if (!v || !*v)
		return dflt;
	errno = 0;
	ms = strtoul(v, &end, 10);
	return errno || *end || !ms || ms > 60000 ? dflt : (unsigned)ms;
}

const char *job_default_runtime(const char *accelerator_type)
{
	struct accelerator a;

	return accelerator_lookup(accelerator_type, &a) ? a.runtime : NULL;
}

unsigned job_workers_per_slice(const char *accelerator_type)
{
	struct accelerator a;

	return accelerator_lookup(accelerator_type, &a) && !a.gpus_per_host
		       ? a.workers
		       : 0;
}

/* The request's own values, each named by its flag. */
static int check_request(const struct job_request *r, struct err *e)
{
	struct stat st;

	if (!r->name || !*r->name)
		return err_set(e, COMMON_EUSAGE,
			       "--name is required: the run's name (lowercase "
			       "letters, digits and '-')");
	if (!r->bucket || !*r->bucket)
		return err_set(e, COMMON_EUSAGE,
			       "--bucket is required: gs://BUCKET[/PREFIX], or "
			       "file:///DIR for the local provider");
	if (!r->command || !*r->command)
		return err_set(e, COMMON_EUSAGE,
			       "--command is required: the trainer's command "
			       "line, as /bin/sh -c reads it");
	for (size_t i = 0; i < r->env.n; i++) {
		const char *kv = r->env.v[i], *eq = strchr(kv, '=');

		if (!eq || !env_name_valid(kv, (size_t)(eq - kv)))
			return err_set(e, COMMON_EUSAGE,
				       "--env '%.100s' is not NAME=VALUE with a "
				       "valid name (letters, digits and '_', "
				       "not starting with a digit)", kv);
	}
	if (r->num_slices < 1)
		return err_set(e, COMMON_EUSAGE, "--num-slices must be >= 1");
	if (r->script_dir) {
		if (stat(r->script_dir, &st))
			return err_errno(e, COMMON_EUSAGE, errno,
					 "--script-dir %s", r->script_dir);
		if (!S_ISDIR(st.st_mode))
			return err_set(e, COMMON_EUSAGE,
				       "--script-dir %s is not a directory",
				       r->script_dir);
	}
	if (r->grace_s > STARTUP_MAX_GRACE_S)
		return err_set(e, COMMON_EUSAGE, "--grace is at most %u s",
			       STARTUP_MAX_GRACE_S);
	if (r->notify.n > NOTIFY_MAX_URLS)
		return err_set(e, COMMON_EUSAGE,
			       "--notify is given %zu times; at most %d URLs",
			       r->notify.n, NOTIFY_MAX_URLS);
	for (size_t i = 0; i < r->notify.n; i++) {
		struct err ue;

		err_init(&ue);
		if (notify_url_check(r->notify.v[i], &ue))
			return err_set(e, COMMON_EUSAGE, "--notify: %s",
				       ue.msg);
	}
	return 0;
}

/* The job as job.json will hold it; its check names what is wrong. */
static int build_job(const struct job_request *r, struct job *j, char **json,
		     struct err *e)
{
	unsigned wps = r->workers_per_slice;

	if (!wps)
		wps = job_workers_per_slice(r->accelerator_type);
	if (!wps)
		return err_set(e, COMMON_EUSAGE,
			       "cannot tell the workers per slice of "
			       "accelerator type '%s' (v2-8, v4-32, "
			       "v5litepod-16, v5p-64, v6e-16 ...)",
			       r->accelerator_type ? r->accelerator_type : "");
	j->name = strdup(r->name);
	j->command = strdup(r->command);
	if (!j->name || !j->command)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->env.n; i++)
		if (strlist_push(&j->env, r->env.v[i]))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	j->num_slices = r->num_slices;
	j->workers_per_slice = wps;
	j->max_restarts = r->max_restarts;
	j->max_infra_restarts = r->max_infra_restarts == JOB_NO_LIMIT
					? -1 : (int64_t)r->max_infra_restarts;
	j->hang_timeout_s = r->hang_timeout_s;
	j->hang_signal = r->hang_signal;
	j->grace_s = r->grace_s;
	j->keep = r->keep;
	j->keep_every = r->keep_every;
	j->local_keep = r->local_keep;
	if (r->persist_every > 1 && !r->local_keep)
		return err_set(e, COMMON_EINVAL, "--persist-every %u keeps the "
			       "other steps on the local and peer tiers, and "
			       "--local-keep 0 turns them off: drop one of "
			       "the two", r->persist_every);
	j->persist_every = r->persist_every;
	if (r->local_dir && !(j->local_dir = strdup(r->local_dir)))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	if (r->rendezvous_port)
		j->rendezvous_port = r->rendezvous_port;
	if (r->preflight && !(j->preflight = strdup(r->preflight)))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	j->preflight_timeout_s = r->preflight_timeout_s;
	if (r->bad_host_pattern &&
	    !(j->bad_host_pattern = strdup(r->bad_host_pattern)))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	j->delete_on_finish = r->delete_on_finish;
	if (job_monitoring_project(r, &j->monitoring_project, e))
		return e->code;
	for (size_t i = 0; i < r->notify.n; i++)
		if (strlist_push(&j->notify, r->notify.v[i]))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	if (r->project && r->zone) {
		j->tpu_project = strdup(r->project);
		j->tpu_zone = strdup(r->zone);
		j->tpu_name = strdup(r->name);
		if (!j->tpu_project || !j->tpu_zone || !j->tpu_name)
			return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	if (r->target ? job_target_copy(&j->target, r->target)
		      : !(j->target.kind = strdup(j->tpu_name ? "tpu-vm"
							      : "local")))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	if (job_to_json(j, json, e)) {
		/* job.c's words name the field; say it is this request. */
		if (e->code != COMMON_ENOMEM)
			e->code = COMMON_EUSAGE;
		return e->code;
	}
	return 0;
}

static bool executable_file(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

/* --supervisor-bin, $SLICE_SUPERVISOR_BIN, or next to slicectl (an
 * installed pair, or the build tree's supervisor/ next to launcher/),
 * slice-supervisor.portable first when r->portable. */
static int find_supervisor(const struct job_request *r, char *out, size_t cap,
			   struct err *e)
{
	const char *given = r->supervisor_bin;
	const char *what = "--supervisor-bin";
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (!given || !*given) {
		given = getenv("SLICE_SUPERVISOR_BIN");
		what = "$SLICE_SUPERVISOR_BIN";
	}
	if (given && *given) {
		if (!executable_file(given))
			return err_set(e, COMMON_EUSAGE,
				       "%s %s is not an executable file; build "
				       "slice-supervisor or point %s at it",
				       what, given, what);
		snprintf(out, cap, "%s", given);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			/* A TPU VM image, a container image or a
			 * cluster node may lack the build's libraries:
			 * those get the self-contained one. */
			static const char *const rel[] = {
				"/slice-supervisor.portable",
				"/../supervisor/slice-supervisor.portable",
				"/slice-supervisor",
				"/../supervisor/slice-supervisor",
			};

			for (size_t i = r->portable ? 0 : 2; i < 4; i++) {
				int k = snprintf(out, cap, "%s%s", self,
						 rel[i]);

				if (k <= 0 || (size_t)k >= cap ||
				    !executable_file(out))
					continue;
				if (i >= 2 && r->portable)
					log_warn("no slice-supervisor.portable "
						 "next to slicectl: uploading "
						 "%s, which starts only on "
						 "workers with this machine's "
						 "glibc and libraries", out);
				return 0;
			}
		}
	}
	return err_set(e, COMMON_EUSAGE,
		       "cannot find slice-supervisor next to slicectl; pass "
		       "--supervisor-bin PATH or set SLICE_SUPERVISOR_BIN");
}

/* Whether path is a slice-supervisor.portable: it ends with the trailer
 * supervisor/portable.c describes, "SLICEPB1" then three 8-byte fields. */
static bool portable_file(const char *path)
{
	static const char magic[] = "SLICEPB1";
	char tr[32];
	bool yes;
	FILE *f;

	f = fopen(path, "rb");
	if (!f)
		return false;
	yes = !fseek(f, -(long)sizeof(tr), SEEK_END) &&
	      fread(tr, 1, sizeof(tr), f) == sizeof(tr) &&
	      !memcmp(tr, magic, sizeof(magic) - 1);
	fclose(f);
	return yes;
}

static int sha256_file(const char *path, char hex[65], uint64_t *size,
		       struct err *e)
{
	unsigned char md[EVP_MAX_MD_SIZE], chunk[1 << 16];
	unsigned md_len = 0;
	EVP_MD_CTX *ctx;
	FILE *f;
	size_t n;
	int ok;

	f = fopen(path, "rb");
	if (!f)
		return err_errno(e, COMMON_EIO, errno, "reading %s", path);
	ctx = EVP_MD_CTX_new();
	ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
	*size = 0;
	while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		ok = EVP_DigestUpdate(ctx, chunk, n) == 1;
		*size += n;
	}
	if (ok && ferror(f)) {
		EVP_MD_CTX_free(ctx);
		fclose(f);
		return err_errno(e, COMMON_EIO, errno, "reading %s", path);
	}
	ok = ok && EVP_DigestFinal_ex(ctx, md, &md_len) == 1 && md_len == 32;
	EVP_MD_CTX_free(ctx);
	fclose(f);
	if (!ok)
		return err_set(e, COMMON_EIO, "sha256 of %s failed", path);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

static int upload_file(struct store *s, const char *name, const char *path,
		       struct err *e)
{
	struct store_upload *u = NULL;
	char chunk[1 << 16];
	FILE *f;
	size_t n;
	int rc;

	f = fopen(path, "rb");
	if (!f)
		return err_errno(e, COMMON_EIO, errno, "reading %s", path);
	rc = store_upload_begin(s, name, STORE_ANY_GENERATION, &u, e);
	while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		rc = store_upload_write(u, chunk, n, e);
	if (!rc && ferror(f))
		rc = err_errno(e, COMMON_EIO, errno, "reading %s", path);
	fclose(f);
	if (rc) {
		if (u)
			store_upload_abort(u);
		return rc;
	}
	return store_upload_finish(u, NULL, e);
}

static int write_chunk(void *ud, const void *data, size_t len, struct err *e)
{
	return store_upload_write(ud, data, len, e);
}

static int upload_bundle(struct store *s, const char *dir, struct err *e)
{
	struct store_upload *u = NULL;
	struct pack_stats st = { 0 };
	int rc;

	rc = store_upload_begin(s, RUN_BUNDLE, STORE_ANY_GENERATION, &u, e);
	if (rc)
		return rc;
	rc = pack_tree(dir, NULL, write_chunk, u, &st, e);
	if (rc) {
		store_upload_abort(u);
		err_prefix(e, "packing --script-dir %s", dir);
		return rc;
	}
	rc = store_upload_finish(u, NULL, e);
	if (!rc)
		log_info("uploaded %s: %llu files, %llu bytes (%llu packed)",
			 store_url(s, RUN_BUNDLE), (unsigned long long)st.files,
			 (unsigned long long)st.bytes_in,
			 (unsigned long long)st.bytes_out);
	return rc;
}

static int upload_supervisor(struct store *s, const char *path,
			     const char *sha, bool portable, uint64_t size,
			     struct err *e)
{
	struct store_object o = { 0 };
	char name[128];
	int rc;

	snprintf(name, sizeof(name), SUPERVISOR_PREFIX "%s", sha);
	rc = store_stat(s, name, &o, e);
	if (!rc && o.size == size) {
		store_object_release(&o);
		return 0;
	}
	store_object_release(&o);
	if (rc && rc != CLOUD_ENOTFOUND)
		return rc;
	err_init(e);
	rc = upload_file(s, name, path, e);
	if (!rc)
		log_info("uploaded %s%s", store_url(s, name),
			 portable ? " (slice-supervisor.portable)" : "");
	return rc;
}

/* Whether two job.json texts say the same (whitespace aside, and the
 * rendezvous port when any_port). */
static bool same_job(const char *a, size_t alen, const char *b, bool any_port)
{
	struct job ja, jb;
	char *ta = NULL, *tb = NULL;
	struct err e;
	bool same;

	if (alen == strlen(b) && !memcmp(a, b, alen))
		return true;
	if (job_parse(a, alen, &ja, &e))
		return false;
	if (job_parse(b, strlen(b), &jb, &e)) {
		job_release(&ja);
		return false;
	}
	if (any_port)
		jb.rendezvous_port = ja.rendezvous_port;
	same = !job_to_json(&ja, &ta, &e) && !job_to_json(&jb, &tb, &e) &&
	       !strcmp(ta, tb);
	free(ta);
	free(tb);
	job_release(&ja);
	job_release(&jb);
	return same;
}

/* An existing job.json: fine when it says the same, refused otherwise.
 * *exists tells whether there is one. */
static int check_existing(struct store *s, const char *json, bool any_port,
			  bool *exists, struct err *e)
{
	char *old = NULL;
	size_t len = 0;
	int rc;

	*exists = false;
	rc = store_read(s, RUN_JOB, JOB_READ_MAX, &old, &len, NULL, e);
	if (rc == CLOUD_ENOTFOUND) {
		err_init(e);
		return 0;
	}
	if (rc)
		return rc;
	*exists = true;
	if (!same_job(old, len, json, any_port)) {
		rc = err_set(e, COMMON_EUSAGE,
			     "%s exists and describes another job: a run's "
			     "job.json is written once. Choose another --name, "
			     "or give the same flags as before to resume it",
			     store_url(s, RUN_JOB));
	}
	free(old);
	return rc;
}

static int probe_writable(struct store *s, struct err *e)
{
	char name[64];
	int rc;

	snprintf(name, sizeof(name), ".slicectl-probe-%ld", (long)getpid());
	rc = store_put(s, name, "probe\n", 6, STORE_ANY_GENERATION, NULL, e);
	if (!rc)
		rc = store_delete(s, name, STORE_ANY_GENERATION, e);
	if (rc)
		err_prefix(e, "the bucket does not take a write (fix its "
			      "permissions or --bucket)");
	return rc;
}

/* Everything job_plan and job_prepare share; *json is job.json's text,
 * supervisor the binary's path. */
static int plan(const struct job_request *r, struct prepared_run *out,
		char **json, char *supervisor, size_t cap, uint64_t *size,
		struct err *e)
{
	size_t blen;
	int rc;

	err_init(e);
	memset(out, 0, sizeof(*out));
	job_init(&out->job);
	*json = NULL;
	rc = check_request(r, e);
	if (!rc)
		rc = build_job(r, &out->job, json, e);
	if (!rc)
		rc = find_supervisor(r, supervisor, cap, e);
	if (rc)
		return rc;
	blen = strlen(r->bucket);
	while (blen > 1 && r->bucket[blen - 1] == '/')
		blen--;
	if (snprintf(out->run_url, sizeof(out->run_url), "%.*s/%s", (int)blen,
		     r->bucket, r->name) >= (int)sizeof(out->run_url))
		return err_set(e, COMMON_EUSAGE, "--bucket is too long");
	if (strncmp(out->run_url, "gs://", 5) &&
	    strncmp(out->run_url, "file:///", 8))
		return err_set(e, COMMON_EUSAGE,
			       "--bucket %s is not gs://BUCKET[/PREFIX] or "
			       "file:///DIR", r->bucket);
	out->supervisor_portable = portable_file(supervisor);
	return sha256_file(supervisor, out->supervisor_sha256, size, e);
}

int job_plan(const struct job_request *r, struct prepared_run *out,
	     struct err *e)
{
	char supervisor[PATH_MAX];
	uint64_t size = 0;
	char *json = NULL;
	int rc;

	rc = plan(r, out, &json, supervisor, sizeof(supervisor), &size, e);
	free(json);
	if (rc) {
		job_release(&out->job);
		job_init(&out->job);
	}
	return rc;
}

/* The run's elapsed time (slicectl goodput) counts from `created` (made
 * when slicectl job began: the upload of its code counts too), recorded
 * once its job.json is there. */
static void note_created(struct store *s, const struct event *created)
{
	struct err e;

	if (event_record(NULL, s, created, &e))
		log_warn("the run's creation is not in its history: %s",
			 e.msg);
}

int job_prepare(const struct job_request *r, struct prepared_run *out,
		struct err *e)
{
	struct startup_params sp = { 0 };
	char supervisor[PATH_MAX];
	char *json = NULL;
	struct store *s = NULL;
	struct control ctl;
	uint64_t size = 0;
	struct event created;
	bool exists;
	int rc;

	event_init(&created, "created", 0, "slicectl");
	snprintf(created.by, sizeof(created.by), "slicectl");
	snprintf(created.cause, sizeof(created.cause), "slicectl job");
	rc = plan(r, out, &json, supervisor, sizeof(supervisor), &size, e);
	if (rc)
		goto out;

	rc = store_open(&s, out->run_url, e);
	if (rc) {
		err_prefix(e, "--bucket %s", r->bucket);
		goto out;
	}
	rc = check_existing(s, json, r->rendezvous_port_picked, &exists, e);
	if (!rc)
		rc = probe_writable(s, e);
	if (rc)
		goto out;

	if (r->script_dir)
		rc = upload_bundle(s, r->script_dir, e);
	if (!rc)
		rc = upload_supervisor(s, supervisor, out->supervisor_sha256,
				       out->supervisor_portable, size, e);
	if (!rc && !exists) {
		rc = store_put(s, RUN_JOB, json, strlen(json),
			       STORE_CREATE_ONLY, NULL, e);
		if (rc == CLOUD_EPRECONDITION || rc == CLOUD_EEXISTS) {
			/* Someone wrote it meanwhile: same rule. */
			err_init(e);
			rc = check_existing(s, json, r->rendezvous_port_picked,
					    &exists, e);
		} else if (!rc) {
			note_created(s, &created);
		}
	}
	if (!rc)
		rc = control_load(s, &ctl, e);
	if (rc)
		goto out;
	if (exists)
		log_info("%s exists with this job: resuming the run at "
			 "generation %lld (%s)", store_url(s, RUN_JOB),
			 (long long)ctl.generation, ctl.state);

	sp.run_url = out->run_url;
	sp.supervisor_sha256 = out->supervisor_sha256;
	sp.supervisor_portable = out->supervisor_portable;
	sp.grace_s = r->grace_s;
	rc = startup_render(&sp, &out->startup_script, &out->startup_len, e);
out:
	store_close(s);
	free(json);
	if (rc) {
		free(out->startup_script);
		out->startup_script = NULL;
		job_release(&out->job);
		job_init(&out->job);
	}
	return rc;
}

int job_exit_status(const struct err *e)
{
	log_error("%s", e->msg);
	switch (e->code) {
	case COMMON_EUSAGE:
	case COMMON_EINVAL:
	case CLOUD_EURL:
		return EXIT_USAGE;
	default:
		return 1;
	}
}
