/*
 * slice-supervisor in a pod (`run --pod`, docs/DESIGN.md "slice-supervisor
 * in a pod"): real supervisor processes started as a JobSet's containers
 * are, with the downward API's variables in their environment, against a
 * file:// run and tests/supervisor/toy_trainer.py. Identity from the
 * environment, refused environments, SIGTERM as the notice (exit 143
 * with the emergency step committed), a JobSet restart (new pods, a new
 * restart attempt) joining by one bump and restoring the newest committed
 * step, the one restart budget ending the run (exit 3), a failed
 * preflight (exit 4), and a quarantined node, cordoned through the
 * Kubernetes API fake (exit 4) or only marked.
 */
#include "tests/harness/harness.h"
#include "tests/harness/kube_fake.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXP 4
#define GRACE_S 5

struct world {
	char dir[HARNESS_PATH];
	char run_dir[HARNESS_PATH + 16];
	char run_url[HARNESS_PATH + 64];
	char events[HARNESS_PATH + 16];
	char sync_dir[HARNESS_PATH + 16];
	unsigned started;     /* pods started, over every attempt */
	pid_t pid[MAXP];
	unsigned slot[MAXP];  /* the pod's number in `started` order */
	struct kube_fake kube;
	bool kube_up;
};

static struct world w;

static void down(void)
{
	for (unsigned i = 0; i < MAXP; i++)
		if (w.pid[i] > 0) {
			kill(w.pid[i], SIGKILL);
			waitpid(w.pid[i], NULL, 0);
		}
	/* Trainers of supervisors killed above. */
	kill_left_trainers(w.dir, "pod*");
	if (w.kube_up)
		kube_fake_stop(&w.kube);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(pod, .fini = down, .timeout = 300);

/* A run of 2 slices of 1 worker whose job.json has these extra fields and
 * TOY_* variables (JSON object members, without braces), its trainer
 * command guard (shell, run before the toy trainer) then the toy
 * trainer. */
static void up_guarded(const char *guard, const char *fields,
		       const char *toy_env)
{
	char job[4096], path[HARNESS_PATH + 32];
	const char *src = getenv("SLICECTL_SRCDIR");

	memset(&w, 0, sizeof(w));
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "pod"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	snprintf(w.sync_dir, sizeof(w.sync_dir), "%s/sync", w.dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s'", w.run_dir, w.sync_dir), 0);
	snprintf(job, sizeof(job),
		 "{\"name\": \"toy\", \"command\": \"%sexec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 2, "
		 "\"workers_per_slice\": 1, \"heartbeat_s\": 1, "
		 "\"grace_s\": %d%s%s, \"env\": {\"TOY_EVENTS\": \"%s\", "
		 "\"TOY_SYNC_DIR\": \"%s\"%s%s}}",
		 guard, src ? src : ".", GRACE_S, *fields ? ", " : "", fields,
		 w.events, w.sync_dir, *toy_env ? ", " : "", toy_env);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
}

static void up(const char *fields, const char *toy_env)
{
	up_guarded("", fields, toy_env);
}

/* Starts pod i (index into w.pid) as the kubelet starts the worker
 * container: a fresh state directory (its emptyDir) and env, a NULL-
 * terminated list of "K=V"; extra_arg is one more argument or NULL. */
static void start_pod(unsigned i, const char *const *env,
		      const char *extra_arg)
{
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	char state[HARNESS_PATH + 16], log[HARNESS_PATH + 32];
	pid_t pid;

	cr_assert_not_null(bin, "SLICE_SUPERVISOR_BIN is not set");
	w.slot[i] = w.started++;
	snprintf(state, sizeof(state), "%s/pod%u", w.dir, w.slot[i]);
	snprintf(log, sizeof(log), "%s/pod%u.log", w.dir, w.slot[i]);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		FILE *f;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Nothing in a pod asks a metadata server; one that did
		 * would find nobody here. */
		setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
		unsetenv("JOB_COMPLETION_INDEX");
		for (const char *const *e = env; *e; e++)
			putenv((char *)*e);
		f = freopen(log, "a", stderr);
		(void)f;
		execl(bin, bin, "run", "--job", w.run_url, "--pod",
		      "--state-dir", state, "--control-poll", "0.2", extra_arg,
		      (char *)NULL);
		_exit(127);
	}
	w.pid[i] = pid;
}

/* The two pods of restart attempt `attempt`, as JobSet renders them;
 * more (NULL-terminated, or NULL) are variables of both, which then run
 * on nodes gke-tpu-slice-S (SLICE_POD_NODE), as the kube fake's kubelet
 * names a slice's node. */
static void start_attempt_with(unsigned attempt, const char *const *more)
{
	static char att[2][48], node[2][48];

	for (unsigned s = 0; s < 2; s++) {
		const char *env[16] = {
			s ? "SLICE_POD_SLICE=1" : "SLICE_POD_SLICE=0",
			"SLICE_POD_WORKER=0", att[s],
			"MEGASCALE_COORDINATOR_ADDRESS=toy-slice-0-0.toy",
			"MEGASCALE_NUM_SLICES=2",
			s ? "MEGASCALE_SLICE_ID=1" : "MEGASCALE_SLICE_ID=0",
		};
		size_t n = 6;

		snprintf(att[s], sizeof(att[s]),
			 "SLICE_POD_RESTART_ATTEMPT=%u", attempt);
		if (more) {
			snprintf(node[s], sizeof(node[s]),
				 "SLICE_POD_NODE=gke-tpu-slice-%u", s);
			env[n++] = node[s];
		}
		for (size_t i = 0; more && more[i]; i++) {
			cr_assert_lt(n, sizeof(env) / sizeof(env[0]) - 1);
			env[n++] = more[i];
		}
		start_pod(s, env, NULL);
	}
}

static void start_attempt(unsigned attempt)
{
	start_attempt_with(attempt, NULL);
}

static char *pod_log(unsigned i)
{
	char path[HARNESS_PATH + 32];
	char *text;

	snprintf(path, sizeof(path), "%s/pod%u.log", w.dir, w.slot[i]);
	text = read_file(path, NULL);
	return text ? text : strdup("");
}

static void pods_exit(unsigned n, int want, unsigned timeout_s)
{
	for (unsigned i = 0; i < n; i++) {
		int st = wait_child(&w.pid[i], timeout_s);
		char *log = pod_log(i);

		cr_assert_eq(st, want, "pod %u exited %d, not %d\n%s", i, st,
			     want, log);
		free(log);
	}
}

static void assert_control(long long generation, const char *state,
			   const char *reason_has, long long jobset_restart)
{
	json_t *c = run_control(w.run_dir);

	assert_run_control(w.run_dir, generation, state, reason_has);
	cr_assert_eq(json_integer_value(json_object_get(c, "jobset_restart")),
		     jobset_restart, "jobset_restart");
	json_decref(c);
}

/* Attempt 0's pods run until SIGTERM (an eviction): each saves the same
 * final step, which is committed before the grace ends; both exit 143.
 * Returns the final step. */
static long long run_and_evict(void)
{
	long long final0 = -1, final1 = -1;
	double t0, took;

	start_attempt(0);
	run_wait_committed(w.run_dir, 10, 60);
	t0 = mono_s();
	kill(w.pid[0], SIGTERM);
	kill(w.pid[1], SIGTERM);
	pods_exit(2, 143, GRACE_S + 30);
	took = mono_s() - t0;
	cr_assert_eq(toy_events(w.events, 0, 1, "final", &final0), 1);
	cr_assert_eq(toy_events(w.events, 1, 1, "final", &final1), 1);
	cr_assert_eq(final0, final1, "the workers stepped together");
	cr_assert(run_committed(w.run_dir, final0),
		  "the emergency step %lld is committed", final0);
	cr_assert_lt(took, GRACE_S, "took %.1f s, more than the grace", took);
	return final0;
}

Test(pod, identity_and_megascale_come_from_the_pod)
{
	char path[HARNESS_PATH + 64], *text;

	up("", "\"TOY_TOTAL\": \"10\"");
	/* Slice 1's worker from JOB_COMPLETION_INDEX, as the Job controller
	 * sets it, when SLICE_POD_WORKER is not rendered. */
	start_pod(0,
		  (const char *const[]){ "SLICE_POD_SLICE=1",
					 "JOB_COMPLETION_INDEX=0",
					 "MEGASCALE_COORDINATOR_ADDRESS=c0.toy",
					 "MEGASCALE_SLICE_ID=1", NULL },
		  NULL);
	start_pod(1,
		  (const char *const[]){ "SLICE_POD_SLICE=0",
					 "SLICE_POD_WORKER=0",
					 "MEGASCALE_COORDINATOR_ADDRESS=c0.toy",
					 "MEGASCALE_SLICE_ID=0", NULL },
		  NULL);
	pods_exit(2, 0, 60);
	assert_control(1, "done", "every worker finished", 0);
	/* SLICE_PROCESS_ID 1 is slice 1's worker. */
	cr_assert_eq(toy_events(w.events, 1, 1, "done", NULL), 1);
	cr_assert_eq(toy_events(w.events, 0, 1, "done", NULL), 1);
	text = read_file(w.events, NULL);
	cr_assert_not_null(text);
	cr_assert_eq(count_substr(text, "\"coordinator\": \"c0.toy\""), 2,
		     "%s", text);
	free(text);
	snprintf(path, sizeof(path), "%s/status/slice-1-worker-0.json",
		 w.run_dir);
	text = read_file(path, NULL);
	cr_assert_not_null(text, "no heartbeat of slice 1's worker");
	free(text);
	text = pod_log(0);
	cr_assert(strstr(text, "slice-1-worker-0 of run toy"), "%s", text);
	free(text);
}

/* Runs one pod with env and extra_arg; it must exit `want` saying `says`. */
static void refused(const char *const *env, const char *extra_arg, int want,
		    const char *says)
{
	char *log;

	start_pod(0, env, extra_arg);
	cr_assert_eq(wait_child(&w.pid[0], 30), want);
	log = pod_log(0);
	cr_assert(strstr(log, says), "'%s' not in:\n%s", says, log);
	free(log);
}

Test(pod, a_pod_without_its_identity_cannot_start)
{
	up("", "");
	refused((const char *const[]){ "SLICE_POD_WORKER=0", NULL }, NULL, 1,
		"SLICE_POD_SLICE is not set");
	refused((const char *const[]){ "SLICE_POD_SLICE=0", NULL }, NULL, 1,
		"neither SLICE_POD_WORKER nor JOB_COMPLETION_INDEX is set");
	refused((const char *const[]){ "SLICE_POD_SLICE=0",
				       "SLICE_POD_WORKER=one", NULL },
		NULL, 1, "SLICE_POD_WORKER is 'one', not a number");
	refused((const char *const[]){ "SLICE_POD_SLICE=0",
				       "SLICE_POD_WORKER=0",
				       "SLICE_POD_RESTART_ATTEMPT=-1", NULL },
		NULL, 1, "SLICE_POD_RESTART_ATTEMPT is '-1', not a number");
	refused((const char *const[]){ "SLICE_POD_SLICE=2",
				       "SLICE_POD_WORKER=0", NULL },
		NULL, 1,
		"SLICE_POD_SLICE=2, SLICE_POD_WORKER=0: this is worker 0 of "
		"slice 2, but the job has 2 slices of 1 worker");
	refused((const char *const[]){ "SLICE_POD_SLICE=0",
				       "JOB_COMPLETION_INDEX=1", NULL },
		NULL, 1, "JOB_COMPLETION_INDEX=1: this is worker 1 of slice 0");
	refused((const char *const[]){ "SLICE_POD_SLICE=0",
				       "SLICE_POD_WORKER=0", NULL },
		"--slice=0", 2, "--pod takes the slice and worker");
}

Test(pod, sigterm_commits_the_emergency_step_and_exits_143)
{
	up("", "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
	run_and_evict();
	/* An eviction is no restart: nobody bumped. */
	assert_control(1, "running", NULL, 0);
}

/* Attempt 0's pods are evicted, then pods of `attempt` start: they
 * restart the group once (two pods asking, one bump) from the emergency
 * step, and finish; control.json then records jobset_restart. */
static void restart_after_eviction(unsigned attempt, long long jobset_restart)
{
	long long final, restored0 = -1, restored1 = -1;

	up("", "\"TOY_TOTAL\": \"60\", \"TOY_STEP_S\": \"0.05\"");
	final = run_and_evict();
	start_attempt(attempt);
	pods_exit(2, 0, 90);
	assert_control(2, "done", NULL, jobset_restart);
	cr_assert_eq(toy_events(w.events, 0, 2, "restored", &restored0), 1);
	cr_assert_eq(toy_events(w.events, 1, 2, "restored", &restored1), 1);
	cr_assert_eq(restored0, final);
	cr_assert_eq(restored1, final);
	cr_assert_eq(toy_events(w.events, -1, 3, "start", NULL), 0,
		     "a second bump for one restart");
}

/* JobSet recreates both pods as restart attempt 1. */
Test(pod, a_jobset_restart_bumps_once_and_restores_the_newest_step)
{
	restart_after_eviction(1, 1);
	{
		char *a = pod_log(0), *b = pod_log(1);

		cr_assert(strstr(a, "JobSet restart attempt 1") &&
			  strstr(b, "JobSet restart attempt 1"), "%s\n%s", a,
			  b);
		free(a);
		free(b);
	}
}

/* The same pods again without a new restart attempt (the JobSet was
 * submitted again): each finds that an earlier pod of its worker ran the
 * current generation, and the group restarts once from the newest step. */
Test(pod, replaced_pods_of_the_same_attempt_restart_the_group_once)
{
	restart_after_eviction(0, 0);
}

/* A pod whose preflight fails exits 4 (not the run's failure) without
 * starting its trainer; once JobSet has replaced the set, on a node
 * whose preflight passes, the run goes on and is done. */
Test(pod, a_failed_preflight_exits_4_and_the_next_attempt_runs)
{
	char path[HARNESS_PATH + 32], *log;

	up("\"preflight\": \"[ $SLICE_ID != 1 ] || [ ! -e "
	   "$TOY_SYNC_DIR/bad-node ] || { echo no GPU; exit 9; }\"",
	   "\"TOY_TOTAL\": \"20\"");
	snprintf(path, sizeof(path), "%s/bad-node", w.sync_dir);
	write_text(path, "");
	start_attempt(0);
	cr_assert_eq(wait_child(&w.pid[1], 60), 4);
	log = pod_log(1);
	cr_assert(strstr(log, "preflight failed on"), "%s", log);
	free(log);
	cr_assert_eq(run_events(w.run_dir, "preflight_fail",
				"slice-1-worker-0", NULL), 1);
	cr_assert_eq(toy_events(w.events, 1, -1, "start", NULL), 0);
	/* JobSet ends the other pod of the set. */
	kill(w.pid[0], SIGTERM);
	cr_assert_eq(wait_child(&w.pid[0], GRACE_S + 30), 143);
	cr_assert_eq(unlink(path), 0);
	start_attempt(1);
	pods_exit(2, 0, 90);
	assert_control(2, "done", NULL, 1);
}

/* Two budgets (issue 26; they were one): the JobSet restart is the
 * infrastructure's and spends none of max_restarts 0, so the next
 * generation runs; the trainer's crash in it fails the run, and every
 * pod exits 3 (the JobSet's podFailurePolicy then fails it for good). */
Test(pod, pod_restarts_spend_the_infrastructures_budget)
{
	up("\"max_restarts\": 0",
	   "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
	run_and_evict();
	start_attempt(1);
	for (int t = 0; t < 1200 && toy_events(w.events, 0, 2, "start",
					       NULL) < 1; t++)
		usleep(50000);
	cr_assert_eq(toy_events(w.events, 0, 2, "start", NULL), 1);
	/* The trainer crashes (killed by pid, as the local chaos does). */
	cr_assert_eq(sh("g=$(sed -n 's/.*\"trainer_pgid\":\\([0-9]*\\).*/"
			"\\1/p' '%s/pod%u/state.json'); [ \"$g\" -gt 1 ] && "
			"kill -9 -\"$g\"", w.dir, w.slot[0]), 0);
	pods_exit(2, 3, 90);
	assert_control(2, "failed", "max_restarts", 1);
}

/* An infrastructure budget already spent when the new pods arrive: they
 * fail the run at once. */
Test(pod, a_jobset_restart_beyond_the_budget_fails_the_run)
{
	up("\"max_infra_restarts\": 0",
	   "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
	run_and_evict();
	start_attempt(1);
	pods_exit(2, 3, 60);
	assert_control(1, "failed", "jobset restart 1", 1);
	cr_assert_eq(toy_events(w.events, -1, 2, "start", NULL), 0);
}

/* ---- bad hosts ---- */

/* Slice 1's trainer dies of SIGSEGV in generations 1 and 2 on node
 * gke-tpu-slice-1 (which the kube fake knows), so the second bump
 * quarantines that node. The pods have in-cluster credentials for the
 * fake (SLICE_KUBE_SA_DIR, KUBERNETES_SERVICE_*), and with cordon
 * SLICE_CORDON_BAD_HOSTS=1 as --cordon-bad-hosts renders it. */
static void segv_twice_on_slice_1(bool cordon)
{
	static char port[40], sa[HARNESS_PATH + 32];
	struct kube_fake_options ko = { .tls = true };
	char path[HARNESS_PATH + 48];
	const char *more[8] = { "KUBERNETES_SERVICE_HOST=127.0.0.1", port,
				sa };

	up_guarded("if [ $SLICE_ID = 1 ] && [ $SLICE_GENERATION -le 2 ]; "
		   "then ulimit -c 0; kill -SEGV $$; fi; ", "",
		   "\"TOY_TOTAL\": \"30\", \"TOY_STEP_S\": \"0.05\"");
	cr_assert_eq(kube_fake_start(&w.kube, &ko), 0);
	w.kube_up = true;
	cr_assert_eq(kube_fake_call(&w.kube, "POST", "/api/v1/nodes",
				    "{\"apiVersion\": \"v1\", \"kind\": "
				    "\"Node\", \"metadata\": {\"name\": "
				    "\"gke-tpu-slice-1\"}}", NULL), 201);
	snprintf(sa, sizeof(sa), "SLICE_KUBE_SA_DIR=%s/sa", w.dir);
	snprintf(path, sizeof(path), "%s/sa/token", w.dir);
	cr_assert_eq(sh("mkdir -p '%s/sa' && cp '%s' '%s/sa/ca.crt'", w.dir,
			w.kube.ca, w.dir), 0);
	write_text(path, "kube-fake-sa-token");
	snprintf(port, sizeof(port), "KUBERNETES_SERVICE_PORT=%u",
		 w.kube.port);
	if (cordon)
		more[3] = "SLICE_CORDON_BAD_HOSTS=1";
	start_attempt_with(0, more);
}

/* The node's spec.unschedulable, as the API has it. */
static bool node_cordoned(void)
{
	char *body = NULL;
	json_t *node;
	bool out;

	cr_assert_eq(kube_fake_call(&w.kube, "GET",
				    "/api/v1/nodes/gke-tpu-slice-1", NULL,
				    &body), 200, "%s", body ? body : "");
	node = json_loads(body, 0, NULL);
	free(body);
	cr_assert_not_null(node);
	out = json_is_true(json_object_get(json_object_get(node, "spec"),
					   "unschedulable"));
	json_decref(node);
	return out;
}

/* control.json quarantines gke-tpu-slice-1 for slice 1's SIGSEGV in
 * generation 2, once. */
static void assert_quarantined(void)
{
	json_t *c = run_control(w.run_dir);
	json_t *q = json_object_get(c, "quarantined");
	json_t *h = json_array_get(q, 0);

	cr_assert_eq(json_array_size(q), 1);
	cr_expect_str_eq(json_string_value(json_object_get(h, "host")),
			 "gke-tpu-slice-1");
	cr_expect_str_eq(json_string_value(json_object_get(h, "worker")),
			 "slice-1-worker-0");
	cr_expect_str_eq(json_string_value(json_object_get(h, "why")),
			 "SIGSEGV");
	cr_expect_eq(json_integer_value(json_object_get(h, "generation")), 2);
	json_decref(c);
	cr_expect_eq(run_events(w.run_dir, "quarantine", "slice-1-worker-0",
				NULL), 1);
}

/* A pod allowed to cordon (--cordon-bad-hosts) cordons its quarantined
 * node and exits 4, so that JobSet's next pods land elsewhere; its peer
 * goes on in generation 3 until JobSet ends it. */
Test(pod, a_quarantined_node_is_cordoned_and_its_pod_exits_4)
{
	json_t *ev = NULL;
	char *log;

	segv_twice_on_slice_1(true);
	cr_assert_eq(wait_child(&w.pid[1], 90), 4);
	log = pod_log(1);
	cr_assert(strstr(log, "this host (gke-tpu-slice-1) is quarantined: "
			 "leaving"), "%s", log);
	free(log);
	assert_quarantined();
	cr_expect(node_cordoned(), "gke-tpu-slice-1 is not cordoned");
	cr_assert_eq(run_events(w.run_dir, "cordon", "slice-1-worker-0", &ev),
		     1);
	cr_expect_str_eq(json_string_value(json_object_get(ev, "cause")),
			 "cordoned");
	json_decref(ev);
	assert_control(3, "running", NULL, 0);
	kill(w.pid[0], SIGTERM);
	cr_assert_eq(wait_child(&w.pid[0], GRACE_S + 30), 143);
}

/* Without SLICE_CORDON_BAD_HOSTS the quarantine is only a mark: nobody
 * touches the node, nobody leaves, and generation 3 finishes the run. */
Test(pod, a_quarantined_node_without_cordon_is_only_marked)
{
	char *log;

	segv_twice_on_slice_1(false);
	pods_exit(2, 0, 90);
	assert_control(3, "done", NULL, 0);
	assert_quarantined();
	log = pod_log(1);
	cr_assert(strstr(log, "this host (gke-tpu-slice-1) is quarantined: "
			 "marked"), "%s", log);
	free(log);
	cr_expect(!node_cordoned(), "gke-tpu-slice-1 was cordoned");
	cr_expect_eq(run_events(w.run_dir, "cordon", NULL, NULL), 0);
}
