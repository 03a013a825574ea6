/*
 * slicectl job end to end on the Cloud TPU path, with nothing faked but
 * the clouds: tests/fakes/tpu_fake.py for the TPU API,
 * tests/fakes/gcs_fake.py for the bucket (gs://bucket/runs through
 * STORAGE_EMULATOR_HOST) and tests/fakes/metadata_fake.py for the VMs'
 * metadata server. The test plays the VMs: it reads the queued resource's
 * node from the TPU fake and runs its startup-script metadata with /bin/sh
 * for each worker, under a SLICE_ROOT of its own with SLICE_SYSTEMD=none,
 * so the real startup script installs the real slice-supervisor from the
 * GCS fake and runs tests/supervisor/toy_trainer.py.
 *
 * A run boots, trains, commits checkpoints and ends done, and worker 0
 * deletes the queued resource (delete_on_finish); --watch recreates a
 * SUSPENDED queued resource and the run resumes on new VMs from its newest
 * committed step; a gs:// bucket that is refused, missing or unreachable
 * is named before anything is created.
 */
#include "tests/cloud/fake_gcs.h"
#include "tests/cloud/fake_metadata.h"
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ZONE "us-central2-b"
#define API "/v2alpha1/projects/proj/locations/" ZONE
#define GCS_BUCKET "bucket"
#define PREFIX "runs"
#define MAXW 2

struct vm {
	pid_t pid;            /* /bin/sh, then slice-supervisor: a group */
	char root[HARNESS_PATH + 64];
	char log[HARNESS_PATH + 64];
};

static struct {
	char dir[HARNESS_PATH];
	char bucket[64];      /* gs://bucket/runs */
	char events[HARNESS_PATH + 16], sync_dir[HARNESS_PATH + 16];
	struct fake_tpu tpu;
	struct fake_gcs gcs;
	struct fake_metadata md;
	bool tpu_up, gcs_up, md_up;
	struct vm vm[MAXW];
	unsigned nvm;
	pid_t watch;
} w;

/* slicectl's environment */
static char env_tpu[128], env_gcs[128], env_home[HARNESS_PATH + 32];
static const char *env[16];

static void up(void)
{
	memset(&w, 0, sizeof(w));
	/* Trainers whose supervisor was killed (a VM that vanished) are
	 * orphans: they come here, to be reaped and stopped by pid. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "e2e"), 0);
	snprintf(w.bucket, sizeof(w.bucket), "gs://%s/%s", GCS_BUCKET, PREFIX);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	snprintf(w.sync_dir, sizeof(w.sync_dir), "%s/sync", w.dir);
	cr_assert_eq(sh("mkdir -p '%s'", w.sync_dir), 0);
	cr_assert_eq(fake_tpu_start(&w.tpu, (const char *const[]){
					    "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	w.tpu_up = true;
	cr_assert_eq(fake_gcs_start(&w.gcs, NULL), 0,
		     "the GCS fake did not start");
	w.gcs_up = true;
	cr_assert_eq(fake_metadata_start(&w.md, (const char *const[]){
						 "--workers", "2", NULL }),
		     0, "the metadata fake did not start");
	w.md_up = true;
	snprintf(env_tpu, sizeof(env_tpu), "SLICECTL_TPU_ENDPOINT=%s",
		 w.tpu.base);
	snprintf(env_gcs, sizeof(env_gcs), "STORAGE_EMULATOR_HOST=%s",
		 w.gcs.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", w.dir);
	env[0] = env_tpu;
	env[1] = env_gcs;
	env[2] = env_home;
	env[3] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[4] = "CLOUDSDK_CORE_PROJECT=proj";
	env[5] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[6] = "SLICECTL_TPU_POLL_MS=20";
	env[7] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	env[8] = NULL;
}

/* The trainer of a worker whose root is root (state.json's
 * trainer_pgid), or 0. */
static pid_t trainer_group(const char *root)
{
	char path[HARNESS_PATH + 64];
	json_t *j;
	pid_t g = 0;

	snprintf(path, sizeof(path), "%s/var/lib/slicectl/state.json", root);
	j = json_load_file(path, 0, NULL);
	if (j) {
		g = (pid_t)json_integer_value(json_object_get(j,
							      "trainer_pgid"));
		json_decref(j);
	}
	return g > 1 ? g : 0;
}

/* The VMs are gone: every worker's group and its trainer's, at once. */
static void kill_vms(void)
{
	for (unsigned i = 0; i < w.nvm; i++) {
		pid_t t = trainer_group(w.vm[i].root);

		if (w.vm[i].pid > 0)
			kill(-w.vm[i].pid, SIGKILL);
		if (t)
			kill(-t, SIGKILL);
	}
	for (unsigned i = 0; i < w.nvm; i++) {
		if (w.vm[i].pid > 0)
			waitpid(w.vm[i].pid, NULL, 0);
		w.vm[i].pid = 0;
	}
}

/* Children adopted as orphans (see up()), stopped by their pids. */
static void reap_orphans(void)
{
	char path[64], line[256];
	DIR *d;
	struct dirent *de;

	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		int pid = atoi(de->d_name), ppid = -1;
		FILE *f;

		if (pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "PPid: %d", &ppid) == 1)
				break;
		fclose(f);
		if (ppid == getpid() && pid != w.watch &&
		    pid != w.tpu.proc.pid && pid != w.gcs.proc.pid &&
		    pid != w.md.proc.pid) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	closedir(d);
}

static void down(void)
{
	kill_vms();
	if (w.watch > 0) {
		kill(w.watch, SIGTERM);
		waitpid(w.watch, NULL, 0);
		w.watch = 0;
	}
	reap_orphans();
	if (w.md_up)
		fake_metadata_stop(&w.md);
	if (w.gcs_up)
		fake_gcs_stop(&w.gcs);
	if (w.tpu_up)
		fake_tpu_stop(&w.tpu);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(e2e, .init = up, .fini = down, .timeout = 150);

static char *show(const char *path)
{
	char *t = read_file(path, NULL);

	return t ? t : strdup("(none)");
}

/* ---- the TPU fake */

static char *qr_state(const char *name)
{
	char path[256];
	const char *s = NULL;
	char *st;
	json_t *j;

	snprintf(path, sizeof(path), API "/queuedResources/%s", name);
	j = fake_tpu_get(&w.tpu, path);
	if (j)
		s = json_string_value(json_object_get(
			json_object_get(j, "state"), "state"));
	st = strdup(j ? (s ? s : "") : "(gone)");
	json_decref(j);
	return st;
}

static void wait_qr_state(const char *name, const char *want, unsigned s)
{
	char *st = NULL;

	for (unsigned i = 0; i < s * 50; i++) {
		free(st);
		st = qr_state(name);
		if (!strcmp(st, want)) {
			free(st);
			return;
		}
		sleep_ms(20);
	}
	cr_assert_fail("queued resource %s is %s, never %s", name, st, want);
}

static size_t tpu_requests(void)
{
	json_t *all = fake_tpu_requests(&w.tpu);
	size_t n = json_array_size(all);

	json_decref(all);
	return n;
}

static void wait_changes(const char *want, unsigned s)
{
	char got[512];

	for (unsigned i = 0; i < s * 50; i++) {
		fake_tpu_qr_changes(&w.tpu, got, sizeof(got));
		if (!strcmp(got, want))
			return;
		sleep_ms(20);
	}
	cr_assert_fail("queued resource changes: '%s', not '%s'", got, want);
}

/* The node of queued resource name (one slice): its startup-script
 * metadata (malloc'd) and its number of workers. */
static char *node_script(const char *name, unsigned *workers)
{
	char want[256];
	json_t *all, *node;
	char *script = NULL;
	size_t i, len = strlen(name) + 17;

	snprintf(want, sizeof(want), "/queuedResources/%s", name);
	all = fake_tpu_get(&w.tpu, API "/nodes");
	cr_assert_not_null(all, "cannot list the nodes");
	json_array_foreach(json_object_get(all, "nodes"), i, node) {
		const char *qr = json_string_value(json_object_get(
			node, "queuedResource"));
		const char *s = json_string_value(json_object_get(
			json_object_get(node, "metadata"), "startup-script"));

		if (!qr || strlen(qr) < len ||
		    strcmp(qr + strlen(qr) - len, want))
			continue;
		cr_assert_null(script, "more than one node for %s", name);
		cr_assert_not_null(s, "node of %s has no startup-script", name);
		script = strdup(s);
		*workers = (unsigned)json_array_size(
			json_object_get(node, "networkEndpoints"));
	}
	json_decref(all);
	cr_assert_not_null(script, "no node of %s", name);
	return script;
}

/* ---- the GCS fake */

/* Object name (below gs://bucket/runs/) as text, or NULL when missing. */
static char *gcs_read(const char *name)
{
	char path[512], *out = NULL;
	size_t n = 0;
	long code;

	n = (size_t)snprintf(path, sizeof(path),
			     "/storage/v1/b/" GCS_BUCKET "/o/" PREFIX "%%2F");
	for (const char *p = name; *p && n + 4 < sizeof(path); p++)
		n += (size_t)(*p == '/' ? snprintf(path + n, 4, "%%2F")
					: snprintf(path + n, 2, "%c", *p));
	snprintf(path + n, sizeof(path) - n, "?alt=media");
	code = fake_gcs_call(&w.gcs, "GET", path, NULL, &out);
	if (code == 200)
		return out;
	free(out);
	return NULL;
}

static const char *str_of(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));

	return s ? s : "";
}

/* control.json's state and generation ("" and 0 when missing). */
static void control(const char *run, char *state, size_t cap,
		    long long *generation, char *reason, size_t rcap)
{
	char name[128];
	char *text;
	json_t *j = NULL;

	snprintf(name, sizeof(name), "%s/control.json", run);
	text = gcs_read(name);
	if (text)
		j = json_loads(text, 0, NULL);
	free(text);
	snprintf(state, cap, "%s", str_of(j, "state"));
	if (reason)
		snprintf(reason, rcap, "%s", str_of(j, "reason"));
	*generation = j ? json_integer_value(json_object_get(j, "generation"))
			: 0;
	json_decref(j);
}

/* Every object name in the bucket starting with prefix, one a line. */
static char *gcs_names(const char *prefix)
{
	char path[512], *out = NULL;
	json_t *j, *o;
	size_t i, n = 0, cap = 1;
	char *names = calloc(1, 1);

	snprintf(path, sizeof(path),
		 "/storage/v1/b/" GCS_BUCKET "/o?prefix=%s&maxResults=1000",
		 prefix);
	cr_assert_eq(fake_gcs_call(&w.gcs, "GET", path, NULL, &out), 200,
		     "%s", out ? out : "");
	j = json_loads(out, 0, NULL);
	free(out);
	cr_assert_not_null(j);
	cr_assert_null(json_object_get(j, "nextPageToken"));
	json_array_foreach(json_object_get(j, "items"), i, o) {
		const char *s = json_string_value(json_object_get(o, "name"));
		size_t l = strlen(s);

		names = realloc(names, cap + l + 1);
		memcpy(names + n, s, l);
		names[n + l] = '\n';
		n += l + 1;
		names[n] = '\0';
		cap += l + 1;
	}
	json_decref(j);
	return names;
}

/* The committed steps of run (their COMMIT markers): the newest, and how
 * many. */
/* Whether run's history (events/) holds slicectl's "recreated" event
 * with cause why, naming the queued resource. */
static bool recreated_event(const char *run, const char *why)
{
	char prefix[128];
	char *names, *line, *save = NULL;
	bool found = false;

	snprintf(prefix, sizeof(prefix), PREFIX "/%s/events/", run);
	names = gcs_names(prefix);
	for (line = strtok_r(names, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		char *text = gcs_read(line + strlen(PREFIX "/"));
		json_t *j = text ? json_loads(text, 0, NULL) : NULL, *ev;
		size_t i;

		json_array_foreach(json_object_get(j, "events"), i, ev) {
			json_t *d = json_object_get(ev, "details");

			found |= !strcmp(str_of(ev, "kind"), "recreated") &&
				 !strcmp(str_of(ev, "worker"), "slicectl") &&
				 !strcmp(str_of(ev, "cause"), why) &&
				 !strcmp(str_of(d, "queued_resource"), run);
		}
		json_decref(j);
		free(text);
	}
	free(names);
	return found;
}

static long long newest_committed(const char *run, unsigned *count)
{
	char prefix[128];
	char *names, *line, *save = NULL;
	long long best = 0;
	unsigned n = 0;

	snprintf(prefix, sizeof(prefix), PREFIX "/%s/checkpoints/", run);
	names = gcs_names(prefix);
	for (line = strtok_r(names, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		long long s;
		char tail[16];

		if (sscanf(line + strlen(prefix), "step-%lld/%15s", &s,
			   tail) == 2 && !strcmp(tail, "COMMIT")) {
			n++;
			if (s > best)
				best = s;
		}
	}
	free(names);
	if (count)
		*count = n;
	return best;
}

static long long wait_committed(const char *run, long long at_least,
				unsigned s)
{
	long long got = 0;

	for (unsigned i = 0; i < s * 20; i++) {
		got = newest_committed(run, NULL);
		if (got >= at_least)
			return got;
		sleep_ms(50);
	}
	cr_assert_fail("no step >= %lld committed in %u s (newest %lld)",
		       at_least, s, got);
	return 0;
}

/* ---- the VMs */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* Boots the queued resource's VMs: every worker of its node runs the
 * node's startup script, as the VM would at boot, under
 * DIR/vms-TAG/wN. */
static void boot_vms(const char *run, const char *tag)
{
	char dir[HARNESS_PATH + 32], script[HARNESS_PATH + 64];
	char boot[HARNESS_PATH + 64], id[64];
	unsigned workers = 0;
	char *text = node_script(run, &workers);

	cr_assert_eq(workers, MAXW, "the node has %u workers, not %d",
		     workers, MAXW);
	snprintf(dir, sizeof(dir), "%s/vms-%s", w.dir, tag);
	cr_assert_eq(sh("mkdir -p '%s'", dir), 0);
	snprintf(script, sizeof(script), "%s/startup-script", dir);
	write_file(script, text);
	free(text);
	w.nvm = workers;
	for (unsigned i = 0; i < workers; i++) {
		struct vm *v = &w.vm[i];
		char env_root[HARNESS_PATH + 96], env_boot[HARNESS_PATH + 96];
		char env_md[64];
		/* The startup script's environment on a VM; env_gcs and
		 * env_tpu are slicectl's (up()). */
		const char *vm_env[] = { env_root, "SLICE_SYSTEMD=none",
					 env_boot, env_gcs,
					 "SLICECTL_ACCESS_TOKEN=vm-token",
					 env_md, env_tpu,
					 "SLICECTL_HTTP_RETRY_BASE_MS=50", NULL };

		snprintf(v->root, sizeof(v->root), "%s/w%u", dir, i);
		snprintf(v->log, sizeof(v->log), "%s/w%u.log", dir, i);
		snprintf(boot, sizeof(boot), "%s/boot%u", dir, i);
		snprintf(id, sizeof(id), "boot-%s-%u\n", tag, i);
		write_file(boot, id);
		cr_assert_eq(sh("mkdir -p '%s'", v->root), 0);
		snprintf(env_root, sizeof(env_root), "SLICE_ROOT=%s", v->root);
		snprintf(env_boot, sizeof(env_boot), "SLICE_BOOT_ID_FILE=%s",
			 boot);
		snprintf(env_md, sizeof(env_md), "GCE_METADATA_HOST=127.0.0.1:%u",
			 fake_metadata_port(&w.md, i));
		cr_assert_neq(fake_metadata_port(&w.md, i), 0);
		v->pid = spawn_group((const char *const[]){ "/bin/sh", script,
							    NULL },
				     vm_env, v->log);
		cr_assert_gt(v->pid, 0, "worker %u did not start", i);
	}
}

/* Waits for every VM's supervisor to exit; fails unless each exits 0. */
static void vms_exit_0(unsigned s)
{
	for (unsigned i = 0; i < w.nvm; i++) {
		int st = -1;

		for (unsigned t = 0; t < s * 20 && w.vm[i].pid; t++) {
			int raw;

			if (waitpid(w.vm[i].pid, &raw, WNOHANG) == w.vm[i].pid) {
				st = WIFEXITED(raw) ? WEXITSTATUS(raw)
						    : 128 + WTERMSIG(raw);
				w.vm[i].pid = 0;
				break;
			}
			sleep_ms(50);
		}
		if (st != 0) {
			char *log = show(w.vm[i].log);

			cr_assert_fail("worker %u: %s\n%s", i,
				       st < 0 ? "still running" : "exit",
				       log);
		}
	}
}


/* `slicectl job` arguments for run: the toy trainer as the command,
 * TOY_TOTAL steps of step_s seconds, a checkpoint every 5, then extra
 * (NULL-terminated). */
struct job_args {
	const char *v[48];
	char command[HARNESS_PATH + 64];
	char e_events[HARNESS_PATH + 32], e_sync[HARNESS_PATH + 32];
	char e_total[32], e_step[32];
};

static const char *const *job_args(struct job_args *a, const char *run,
				   unsigned total, const char *step_s,
				   const char *const *extra)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	size_t n = 0;

	snprintf(a->command, sizeof(a->command),
		 "exec python3 %s/tests/supervisor/toy_trainer.py",
		 src ? src : ".");
	snprintf(a->e_events, sizeof(a->e_events), "TOY_EVENTS=%s",
		 w.events);
	snprintf(a->e_sync, sizeof(a->e_sync), "TOY_SYNC_DIR=%s", w.sync_dir);
	snprintf(a->e_total, sizeof(a->e_total), "TOY_TOTAL=%u", total);
	snprintf(a->e_step, sizeof(a->e_step), "TOY_STEP_S=%s", step_s);
	a->v[n++] = "job";
	a->v[n++] = "--name";
	a->v[n++] = run;
	a->v[n++] = "--bucket";
	a->v[n++] = w.bucket;
	a->v[n++] = "--accelerator-type";
	a->v[n++] = "v4-16";
	a->v[n++] = "--num-slices";
	a->v[n++] = "1";
	a->v[n++] = "--command";
	a->v[n++] = a->command;
	a->v[n++] = "--env";
	a->v[n++] = a->e_events;
	a->v[n++] = "--env";
	a->v[n++] = a->e_sync;
	a->v[n++] = "--env";
	a->v[n++] = a->e_total;
	a->v[n++] = "--env";
	a->v[n++] = a->e_step;
	a->v[n++] = "--env";
	a->v[n++] = "TOY_CKPT_EVERY=5";
	a->v[n++] = "--grace";
	a->v[n++] = "5";
	for (size_t i = 0; extra && extra[i]; i++) {
		cr_assert_lt(n, sizeof(a->v) / sizeof(a->v[0]) - 1);
		a->v[n++] = extra[i];
	}
	a->v[n] = NULL;
	return a->v;
}

static void set_env(void)
{
	for (size_t i = 0; env[i]; i++)
		cr_assert_eq(putenv((char *)env[i]), 0);
}

/* ---- 1. a job whose startup script boots local workers */

Test(e2e, a_job_boots_its_workers_trains_and_deletes_its_qr)
{
	char state[32], reason[256], changes[256], *st;
	struct job_args a;
	struct run_result r;
	long long gen, newest, step = -1;
	unsigned count;

	cr_assert_eq(run_slicectl(&r, job_args(&a, "e1", 20, "0.05",
					       (const char *const[]){
						       "--delete-on-finish",
						       NULL }),
				  env), 0);
	cr_assert_eq(r.status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s",
		     r.status, r.out, r.err);
	ASSERT_HAS(r.out, "gs://bucket/runs/e1");
	run_result_release(&r);
	control("e1", state, sizeof(state), &gen, NULL, 0);
	cr_assert_str_eq(state, "running");
	cr_assert_eq(gen, 1);

	wait_qr_state("e1", "ACTIVE", 30);
	boot_vms("e1", "1");
	vms_exit_0(90);

	control("e1", state, sizeof(state), &gen, reason, sizeof(reason));
	cr_assert_str_eq(state, "done", "control.json: %s (%s)", state,
			 reason);
	cr_assert_eq(gen, 1);
	newest = newest_committed("e1", &count);
	cr_assert_eq(newest, 20, "newest committed step %lld", newest);
	cr_assert_geq(count, 1);
	/* both workers trained, each to the end, from the start */
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 1, "start", &step), 1);
		cr_assert_eq(step, 0);
		cr_assert_eq(toy_events(w.events, p, 1, "done", &step), 1,
			     "process %d", p);
		cr_assert_eq(step, 20);
		cr_assert_eq(toy_events(w.events, p, -1, "restored", NULL), 0);
	}
	/* worker 0 deleted the queued resource through the API */
	fake_tpu_qr_changes(&w.tpu, changes, sizeof(changes));
	cr_assert_str_eq(changes, "POST DELETE", "changes: %s", changes);
	for (int i = 0; i < 500; i++) {
		st = qr_state("e1");
		if (!strcmp(st, "(gone)"))
			break;
		free(st);
		st = NULL;
		sleep_ms(20);
	}
	cr_assert_not_null(st, "the queued resource is still there");
	free(st);
	st = show(w.vm[0].log);
	ASSERT_HAS(st, "queued resource e1 deleted");
	free(st);
}

/* What a failed test shows: the watch's output, control.json, the
 * trainer's events and the workers' logs (leaked: the test ends). */
static char *diagnosis(const char *watch_out)
{
	char *parts[4 + MAXW];
	size_t n = 0, len = 1;
	char *all;

	parts[n++] = watch_out ? show(watch_out) : strdup("");
	parts[n++] = gcs_read("e2/control.json");
	if (!parts[n - 1])
		parts[n - 1] = strdup("(no control.json)");
	parts[n++] = show(w.events);
	for (unsigned i = 0; i < w.nvm; i++)
		parts[n++] = show(w.vm[i].log);
	for (size_t i = 0; i < n; i++)
		len += strlen(parts[i]) + 64;
	all = calloc(1, len);
	for (size_t i = 0; i < n; i++) {
		sprintf(all + strlen(all), "---- %s\n%s\n",
			i == 0 ? "watch" : i == 1 ? "control.json"
				   : i == 2 ? "events" : "worker log",
			parts[i]);
		free(parts[i]);
	}
	return all;
}

/* ---- 2. --watch recreates a SUSPENDED queued resource; the run resumes */

Test(e2e, watch_recreates_a_suspended_qr_and_the_run_resumes)
{
	char out_path[HARNESS_PATH + 32], err_path[HARNESS_PATH + 32];
	char state[32], reason[256], body[64], *o, *er;
	struct job_args a;
	long long gen, before, step = -1;
	int status;

	set_env();
	snprintf(out_path, sizeof(out_path), "%s/watch.out", w.dir);
	snprintf(err_path, sizeof(err_path), "%s/watch.err", w.dir);
	/* The first VMs' trainers stop stepping at step 10 (after its
	 * checkpoint): however long the test takes to preempt them, their
	 * run is not over by then. */
	w.watch = spawn_slicectl(job_args(&a, "e2", 60, "0.1",
					  (const char *const[]){
						  "--spot", "--watch",
						  "--recreate-budget", "2",
						  "--env", "TOY_HANG_AT=*:10:1",
						  NULL }),
				 out_path, err_path);
	cr_assert_gt(w.watch, 0);
	wait_qr_state("e2", "ACTIVE", 30);
	boot_vms("e2", "1");
	wait_committed("e2", 5, 60);

	/* A preemption: the VMs vanish (no notice), the QR is SUSPENDED. */
	kill_vms();
	before = newest_committed("e2", NULL);
	cr_assert_lt(before, 60, "the run ended before the preemption");
	snprintf(body, sizeof(body), "{\"name\": \"e2\"}");
	cr_assert_eq(fake_tpu_call(&w.tpu, "POST", "/_fake/suspend", body,
				   NULL), 200);
	wait_changes("POST DELETE POST", 30);
	wait_qr_state("e2", "ACTIVE", 30);
	control("e2", state, sizeof(state), &gen, reason, sizeof(reason));
	cr_assert_eq(gen, 2, "generation %lld (%s: %s)\n%s", gen, state,
		     reason, diagnosis(out_path));
	cr_assert_str_eq(state, "running");
	cr_assert_str_eq(reason, "queued resource recreated after SUSPENDED");
	/* --watch records it once the queued resource is asked for. */
	for (int i = 0; i < 100 && !recreated_event("e2", "SUSPENDED"); i++)
		usleep(100000);
	cr_assert(recreated_event("e2", "SUSPENDED"),
		  "no recreated event in the run's history");

	/* New VMs: new roots, nothing left of the old ones. */
	boot_vms("e2", "2");
	vms_exit_0(90);
	control("e2", state, sizeof(state), &gen, reason, sizeof(reason));
	cr_assert_str_eq(state, "done", "control.json: %s (%s)", state,
			 reason);
	cr_assert_eq(gen, 2, "generation %lld (%s)\n%s", gen, reason,
		     diagnosis(out_path));
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 2, "restored", &step), 1,
			     "process %d did not restore", p);
		cr_assert_eq(step, before, "process %d restored step %lld, "
			     "not the newest committed %lld", p, step, before);
		cr_assert_eq(toy_events(w.events, p, 2, "done", &step), 1);
		cr_assert_eq(step, 60);
	}
	cr_assert_eq(newest_committed("e2", NULL), 60);

	status = wait_exit(w.watch, 30);
	w.watch = 0;
	o = show(out_path);
	er = show(err_path);
	cr_assert_eq(status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", status, o,
		     er);
	ASSERT_HAS(o, "SUSPENDED");
	ASSERT_HAS(o, "run: done");
	free(o);
	free(er);
	/* one recreation, and nobody deleted the QR at the end */
	fake_tpu_qr_changes(&w.tpu, out_path, sizeof(out_path));
	cr_assert_str_eq(out_path, "POST DELETE POST");
}

/* ---- 3. unreachable buckets: named before anything is created */

/* Runs a job against bucket (with env, and more env: NULL or one
 * "K=V"); wants exit status want, stderr holding needle, and no request
 * to the TPU API and no object in the GCS fake. */
static void refused(int want, const char *needle, const char *bucket,
		    const char *more)
{
	const char *e2[16];
	struct run_result r;
	size_t n = 0;
	char *names;

	for (size_t i = 0; env[i]; i++)
		if (!more || strncmp(env[i], more, strcspn(more, "=") + 1))
			e2[n++] = env[i];
	if (more)
		e2[n++] = more;
	e2[n] = NULL;
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			 "job", "--name", "r3", "--bucket", bucket,
			 "--accelerator-type", "v4-8", "--command", "true",
			 NULL }, e2), 0);
	cr_assert_eq(r.status, want, "%s: exit %d (not %d)\nstderr:\n%s",
		     bucket, r.status, want, r.err);
	ASSERT_HAS(r.err, needle);
	cr_assert_eq(tpu_requests(), 0, "%s: the TPU API was asked", bucket);
	names = gcs_names("");
	cr_assert_str_eq(names, "", "%s: objects were written:\n%s", bucket,
			 names);
	free(names);
	run_result_release(&r);
}

Test(e2e, unreachable_gs_buckets_fail_before_anything_is_created)
{
	char down_host[64];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd;

	cr_assert_eq(fake_gcs_faults(&w.gcs,
				     "[{\"path\": \"/b/denied/\", \"times\": -1, "
				     "\"action\": \"status\", \"status\": 403}, "
				     "{\"path\": \"/b/missing/\", \"times\": -1, "
				     "\"action\": \"status\", \"status\": 404}]"),
		     0);
	refused(1, "gs://denied/runs", "gs://denied/runs", NULL);
	refused(1, "403", "gs://denied/runs", NULL);
	refused(1, "gs://missing/runs", "gs://missing/runs", NULL);
	refused(1, "404", "gs://missing/runs", NULL);

	/* An emulator that is down: a port nothing listens on. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(down_host, sizeof(down_host),
		 "STORAGE_EMULATOR_HOST=http://127.0.0.1:%u",
		 (unsigned)ntohs(sa.sin_port));
	refused(1, "gs://bucket/runs", "gs://bucket/runs", down_host);
	close(fd);
}
