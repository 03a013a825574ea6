/*
 * slice-supervisor end to end: real supervisor processes, one per worker,
 * running tests/supervisor/toy_trainer.py against a file:// (or, for the
 * outage, the GCS fake's gs://) run, with tests/fakes/metadata_fake.py as
 * each worker's metadata server. Every path of docs/DESIGN.md's group restarts
 * and signals: completion, a crash, a hang, the restart budget, preemption
 * through the metadata server and through SIGTERM, a reset, a supervisor
 * killed outright, and a storage outage.
 */
#include "tests/cloud/fake_gcs.h"
#include "tests/cloud/fake_metadata.h"
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"
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

#define MAXW 4
#define GRACE_S 5

struct world {
	char dir[HARNESS_PATH];
	char run_dir[HARNESS_PATH + 16];
	char run_url[HARNESS_PATH + 64];
	char events[HARNESS_PATH + 16];
	char sync_dir[HARNESS_PATH + 16];
	struct fake_metadata md;
	bool md_up;
	struct fake_gcs gcs;
	bool gcs_up;
	struct fake_tpu tpu;
	bool tpu_up;
	unsigned n;
	pid_t sup[MAXW];
	int status[MAXW];
	bool by_metadata; /* identity from the metadata server */
	const char *control_poll; /* --control-poll, else 0.2 s */
};

static struct world w;

static void down(void)
{
	for (unsigned i = 0; i < w.n; i++)
		if (w.sup[i] > 0)
			kill(w.sup[i], SIGTERM);
	for (unsigned i = 0; i < w.n; i++) {
		for (int t = 0; w.sup[i] > 0 && t < 200; t++) {
			if (waitpid(w.sup[i], &w.status[i], WNOHANG) == w.sup[i])
				w.sup[i] = 0;
			else
				usleep(50000);
		}
		if (w.sup[i] > 0) {
			kill(w.sup[i], SIGKILL);
			waitpid(w.sup[i], NULL, 0);
			w.sup[i] = 0;
		}
	}
	/* Trainers left by supervisors the test killed outright. */
	kill_left_trainers(w.dir, "w*");
	if (w.md_up)
		fake_metadata_stop(&w.md);
	if (w.gcs_up)
		fake_gcs_stop(&w.gcs);
	if (w.tpu_up)
		fake_tpu_stop(&w.tpu);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(sup, .fini = down, .timeout = 300);

static void write_file(const char *path, const char *text)
{
	write_text(path, text);
}

/* A run of n workers whose job.json has these extra fields and TOY_*
 * variables (JSON object members, without braces). */
static void up(unsigned n, const char *fields, const char *toy_env)
{
	char job[4096], ports[16], path[HARNESS_PATH + 32];
	const char *src = getenv("SLICECTL_SRCDIR");

	memset(&w, 0, sizeof(w));
	w.n = n;
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "sup"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	snprintf(w.sync_dir, sizeof(w.sync_dir), "%s/sync", w.dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s'", w.run_dir, w.sync_dir), 0);
	snprintf(ports, sizeof(ports), "%u", n);
	cr_assert_eq(fake_metadata_start(&w.md, (const char *const[]){
						 "--workers", ports, NULL }),
		     0);
	w.md_up = true;
	snprintf(job, sizeof(job),
		 "{\"name\": \"toy\", \"command\": \"exec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 1, "
		 "\"workers_per_slice\": %u, \"heartbeat_s\": 1, "
		 "\"grace_s\": %d%s%s, \"env\": {\"TOY_EVENTS\": \"%s\", "
		 "\"TOY_SYNC_DIR\": \"%s\", \"TOY_CHECKPOINTS\": "
		 "\"%s/checkpoints\"%s%s}}",
		 src ? src : ".", n, GRACE_S, *fields ? ", " : "", fields,
		 w.events, w.sync_dir, w.run_dir, *toy_env ? ", " : "",
		 toy_env);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_file(path, job);
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/boot%u", w.dir, i);
		write_file(path, "boot-1\n");
	}
}

static void start(unsigned i)
{
	char state[HARNESS_PATH + 16], boot[HARNESS_PATH + 32], host[64];
	char worker[16];
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	const char *poll = w.control_poll ? w.control_poll : "0.2";
	pid_t pid;

	snprintf(state, sizeof(state), "%s/w%u", w.dir, i);
	snprintf(boot, sizeof(boot), "SLICE_BOOT_ID_FILE=%s/boot%u", w.dir, i);
	snprintf(host, sizeof(host), "127.0.0.1:%u",
		 fake_metadata_port(&w.md, (int)i));
	snprintf(worker, sizeof(worker), "%u", i);
	cr_assert_not_null(bin, "SLICE_SUPERVISOR_BIN is not set");
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char log[HARNESS_PATH + 32];
		FILE *f;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("GCE_METADATA_HOST", host, 1);
		putenv(boot);
		setenv("SLICECTL_HTTP_RETRY_BASE_MS", "50", 1);
		if (w.tpu_up) {
			setenv("SLICECTL_TPU_ENDPOINT", w.tpu.base, 1);
			setenv("SLICECTL_ACCESS_TOKEN", "t", 1);
		}
		if (w.gcs_up) {
			setenv("STORAGE_EMULATOR_HOST", w.gcs.base, 1);
			setenv("SLICECTL_HTTP_STALL_SECONDS", "5", 1);
		}
		snprintf(log, sizeof(log), "%s/sup%u.log", w.dir, i);
		f = freopen(log, "a", stderr);
		(void)f;
		if (w.by_metadata)
			execl(bin, bin, "run", "--job", w.run_url, "--state-dir",
			      state, "--control-poll", poll, (char *)NULL);
		else
			execl(bin, bin, "run", "--job", w.run_url, "--state-dir",
			      state, "--control-poll", poll, "--slice", "0",
			      "--worker", worker, (char *)NULL);
		_exit(127);
	}
	w.sup[i] = pid;
}

static void start_all(void)
{
	for (unsigned i = 0; i < w.n; i++)
		start(i);
}

/* Waits for supervisor i to exit; returns its exit status (or -1 when it
 * is still running after timeout_s). */
static int wait_sup(unsigned i, unsigned timeout_s)
{
	return wait_child(&w.sup[i], timeout_s);
}

static char *sup_log(unsigned i)
{
	char path[HARNESS_PATH + 32];
	char *text;

	snprintf(path, sizeof(path), "%s/sup%u.log", w.dir, i);
	text = read_file(path, NULL);
	return text ? text : strdup("");
}

static void all_exit_0(unsigned timeout_s)
{
	for (unsigned i = 0; i < w.n; i++) {
		int st = wait_sup(i, timeout_s);
		char *log = sup_log(i);

		cr_assert_eq(st, 0, "supervisor %u: %d\n%s", i, st, log);
		free(log);
	}
}

static json_t *control(void)
{
	return run_control(w.run_dir);
}

static void assert_control(long long generation, const char *state,
			   const char *reason_has)
{
	assert_run_control(w.run_dir, generation, state, reason_has);
}


static bool committed(long long step)
{
	return run_committed(w.run_dir, step);
}

static long long newest_committed(void)
{
	return run_newest_committed(w.run_dir);
}

static void wait_committed(long long at_least, unsigned timeout_s)
{
	run_wait_committed(w.run_dir, at_least, timeout_s);
}

static double now_s(void)
{
	return mono_s();
}

Test(sup, a_run_goes_to_the_end)
{
	up(2, "", "\"TOY_TOTAL\": \"20\"");
	start_all();
	all_exit_0(60);
	assert_control(1, "done", "every worker finished");
	cr_assert(committed(20), "the last step is committed");
	cr_assert_eq(toy_events(w.events, -1, 1, "done", NULL), 2);
	{
		char path[HARNESS_PATH + 64];
		char *log, *local;

		log = run_log(w.run_dir, "slice-0-worker-1", 1);
		cr_assert_not_null(log, "the trainer's log was not uploaded");
		cr_assert(strstr(log, "done at step 20"), "%s", log);
		/* Its segments are the local log, each byte once. */
		snprintf(path, sizeof(path), "%s/w1/logs/gen-1.log", w.dir);
		local = read_file(path, NULL);
		cr_assert_not_null(local);
		cr_assert_str_eq(log, local);
		free(local);
		free(log);
		snprintf(path, sizeof(path), "%s/status/slice-0-worker-0.json",
			 w.run_dir);
		log = read_file(path, NULL);
		cr_assert_not_null(log, "no heartbeat");
		cr_assert(strstr(log, "\"finished\""), "%s", log);
		free(log);
	}
}

Test(sup, a_crash_restarts_every_worker_from_the_last_committed_step)
{
	long long restored = -1;

	up(2, "", "\"TOY_TOTAL\": \"25\", \"TOY_CRASH_AT\": \"1:12:1\", "
	   "\"TOY_FAULT_AFTER_COMMIT\": \"10\"");
	start_all();
	all_exit_0(90);
	assert_control(2, "done", NULL);
	cr_assert_eq(toy_events(w.events, 1, 1, "crash", NULL), 1);
	/* Both restarted at generation 2 from step 10. */
	cr_assert_eq(toy_events(w.events, 0, 2, "restored", &restored), 1);
	cr_assert_eq(restored, 10);
	cr_assert_eq(toy_events(w.events, 1, 2, "restored", &restored), 1);
	cr_assert_eq(restored, 10);
	cr_assert_eq(toy_events(w.events, -1, 2, "done", NULL), 2);
}

Test(sup, a_hang_is_ended_and_the_group_restarts)
{
	long long restored = -1;

	/* Long enough that a trainer slow to start on a loaded machine is
	 * not taken for a hung one. */
	up(2, "\"hang_timeout_s\": 5",
	   "\"TOY_TOTAL\": \"15\", \"TOY_HANG_AT\": \"0:7:1\", "
	   "\"TOY_FAULT_AFTER_COMMIT\": \"5\"");
	start_all();
	all_exit_0(90);
	assert_control(2, "done", NULL);
	cr_assert_eq(toy_events(w.events, 0, 1, "hang", NULL), 1);
	cr_assert_eq(toy_events(w.events, 1, 2, "restored", &restored), 1);
	cr_assert_eq(restored, 5);
	{
		char *log = sup_log(0);

		cr_assert(strstr(log, "hung"), "%s", log);
		free(log);
	}
}

/* A trainer that prints nothing but reports each step in SLICE_STEP_FILE
 * is not hung, and its heartbeat shows the step it reached although no
 * checkpoint was written yet. */
Test(sup, reported_steps_count_as_progress_and_show_in_heartbeats)
{
	char path[HARNESS_PATH + 64];
	long long seen = -1;

	up(2, "\"hang_timeout_s\": 2",
	   "\"TOY_TOTAL\": \"50\", \"TOY_STEP_S\": \"0.2\", "
	   "\"TOY_CKPT_EVERY\": \"1000\", \"TOY_QUIET\": \"1\"");
	start_all();
	snprintf(path, sizeof(path), "%s/status/slice-0-worker-1.json",
		 w.run_dir);
	for (int i = 0; i < 300 && seen < 10; i++) {
		json_t *j = json_load_file(path, 0, NULL);

		if (j)
			seen = json_integer_value(json_object_get(j, "step"));
		json_decref(j);
		usleep(100 * 1000);
	}
	cr_assert_geq(seen, 10, "the heartbeat's step stayed at %lld", seen);
	cr_assert_eq(newest_committed(), 0, "a step was committed already");
	all_exit_0(90);
	/* Generation 1 still: no hang restart. */
	assert_control(1, "done", "every worker finished");
}

/* Trainers stalled (as a dead peer stalls them) make their supervisors
 * read control.json closely: a new generation is seen in well under the
 * regular 30 s period. */
Test(sup, stalled_trainers_see_a_new_generation_soon)
{
	const char *slicectl = getenv("SLICECTL_BIN");
	double t0;
	bool seen = false;

	cr_assert_not_null(slicectl, "SLICECTL_BIN is not set");
	up(2, "\"hang_timeout_s\": 120",
	   "\"TOY_TOTAL\": \"100\", \"TOY_HANG_AT\": \"*:10:1\"");
	w.control_poll = "30";
	start_all();
	for (int t = 0; t < 600 && toy_events(w.events, -1, 1, "hang",
					       NULL) < 2; t++)
		usleep(50000);
	cr_assert_eq(toy_events(w.events, -1, 1, "hang", NULL), 2);
	sleep(1);
	t0 = now_s();
	cr_assert_eq(sh("'%s' restart run --bucket 'file://%s' --reason test "
			">/dev/null", slicectl, w.dir), 0);
	while (!seen && now_s() - t0 < 3) {
		char *a = sup_log(0), *b = sup_log(1);

		seen = strstr(a, "generation 2") && strstr(b, "generation 2");
		free(a);
		free(b);
		usleep(50000);
	}
	cr_assert(seen, "a new generation unseen %.1f s after the bump",
		  now_s() - t0);
}

/* An earlier generation left worker 1's part of step 15, never
 * committed. The run restarts from the start: that part is discarded
 * before the trainers run, and step 15 is committed from this
 * generation's parts only. */
Test(sup, a_part_an_earlier_generation_left_never_joins_a_commit)
{
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	char stale[HARNESS_PATH + 16], dest[HARNESS_PATH + 16];
	char path[HARNESS_PATH + 64], *log, *state;

	/* Step 15 is the last: a later one could supersede it in the
	 * shipper's queue on a slow machine, and it would never commit. */
	up(2, "", "\"TOY_TOTAL\": \"15\"");
	snprintf(stale, sizeof(stale), "%s/stale", w.dir);
	snprintf(dest, sizeof(dest), "%s/dest", w.dir);
	cr_assert_eq(sh("mkdir -p '%s' && echo old > '%s/stale.txt' && "
			"'%s' ckpt save '%s' '%s' --step 15 --part "
			"slice-0-worker-1 --parts-expected 2 >/dev/null",
			stale, stale, bin, stale, w.run_url),
		     0);
	start_all();
	all_exit_0(60);
	assert_control(1, "done", "every worker finished");
	log = sup_log(1);
	cr_assert(strstr(log, "step 15: slice-0-worker-1.tar.zst of an "
			      "earlier generation discarded"),
		  "%s", log);
	free(log);
	cr_assert(committed(15));
	cr_assert_eq(sh("'%s' ckpt restore '%s' '%s' --step 15 --part "
			"slice-0-worker-1 >/dev/null",
			bin, w.run_url, dest),
		     0);
	snprintf(path, sizeof(path), "%s/state.json", dest);
	state = read_file(path, NULL);
	cr_assert_not_null(state, "step 15's part is not this run's");
	cr_assert(strstr(state, "\"step\": 15"), "%s", state);
	free(state);
}

Test(sup, the_restart_budget_ends_the_run_as_failed)
{
	up(2, "\"max_restarts\": 2",
	   "\"TOY_TOTAL\": \"50\", \"TOY_CRASH_AT\": \"0:3:*\"");
	start_all();
	all_exit_0(90);
	assert_control(3, "failed", "max_restarts");
	cr_assert_eq(toy_events(w.events, 0, -1, "crash", NULL), 3);
}

/* Both workers preempted at once (a spot slice): each trainer saves the
 * same final step, it is uploaded and committed, and the supervisors
 * leave within the grace period. */
static void preempt_and_check(bool by_sigterm)
{
	long long final0 = -1, final1 = -1;
	double t0, took;

	start_all();
	wait_committed(10, 60);
	t0 = now_s();
	if (by_sigterm) {
		kill(w.sup[0], SIGTERM);
		kill(w.sup[1], SIGTERM);
	} else {
		cr_assert_eq(fake_metadata_set(&w.md, 0, "instance/preempted",
					       "TRUE"), 0);
		cr_assert_eq(fake_metadata_set(&w.md, 1,
					       "instance/maintenance-event",
					       "TERMINATE_ON_HOST_MAINTENANCE"),
			     0);
	}
	all_exit_0(GRACE_S + 30);
	took = now_s() - t0;
	cr_assert_eq(toy_events(w.events, 0, 1, "final", &final0), 1);
	cr_assert_eq(toy_events(w.events, 1, 1, "final", &final1), 1);
	cr_assert_eq(final0, final1, "the workers stepped together");
	cr_assert(committed(final0), "the emergency step %lld is committed",
		  final0);
	cr_assert_lt(took, GRACE_S, "took %.1f s, more than the grace", took);
}

Test(sup, preemption_notice_from_the_metadata_server)
{
	char *ev;

	up(2, "", "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
	/* Identity and MEGASCALE_* from the metadata server, as on a VM. */
	w.by_metadata = true;
	cr_assert_eq(fake_metadata_config(&w.md,
					  "{\"tpu_env\": {"
					  "\"MEGASCALE_COORDINATOR_ADDRESS\": "
					  "\"10.9.8.7:8080\"}}"),
		     0);
	preempt_and_check(false);
	ev = read_file(w.events, NULL);
	cr_assert_not_null(ev);
	cr_assert_eq(count_substr(ev, "\"coordinator\": \"10.9.8.7:8080\""), 2,
		     "%s", ev);
	free(ev);
	{
		char *log = sup_log(1);

		cr_assert(strstr(log, "maintenance-event"), "%s", log);
		free(log);
	}
}

Test(sup, sigterm_saves_and_uploads_a_final_step)
{
	up(2, "", "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
	preempt_and_check(true);
}

/* A reset: one host's supervisor and trainer die with the machine and it
 * comes back with a new boot id. */
Test(sup, a_reset_host_restarts_the_group)
{
	char path[HARNESS_PATH + 32];
	long long before, restored = -1;

	up(2, "", "\"TOY_TOTAL\": \"60\", \"TOY_STEP_S\": \"0.05\"");
	start_all();
	wait_committed(15, 60);
	kill(w.sup[1], SIGKILL);
	waitpid(w.sup[1], NULL, 0);
	w.sup[1] = 0;
	cr_assert_eq(sh("g=$(sed -n 's/.*\"trainer_pgid\":\\([0-9]*\\).*/\\1/p' "
			"'%s/w1/state.json'); kill -9 -\"$g\"", w.dir), 0);
	snprintf(path, sizeof(path), "%s/boot1", w.dir);
	write_file(path, "boot-2\n");
	before = newest_committed();
	start(1);
	all_exit_0(120);
	assert_control(2, "done", NULL);
	{
		json_t *c = control();

		json_decref(c);
	}
	cr_assert_eq(toy_events(w.events, 0, 2, "restored", &restored), 1);
	cr_assert_geq(restored, before, "restored %lld, committed %lld",
		      restored, before);
	{
		char *log = sup_log(1);

		cr_assert(strstr(log, "reset or rebooted"), "%s", log);
		free(log);
	}
}

Test(sup, a_killed_supervisor_ends_its_orphan_and_loses_no_step)
{
	char path[HARNESS_PATH + 32];
	long long before, restored = -1;
	char *state;
	int orphan = 0;

	up(2, "", "\"TOY_TOTAL\": \"60\", \"TOY_STEP_S\": \"0.05\"");
	start_all();
	wait_committed(15, 60);
	kill(w.sup[0], SIGKILL);
	waitpid(w.sup[0], NULL, 0);
	w.sup[0] = 0;
	snprintf(path, sizeof(path), "%s/w0/state.json", w.dir);
	state = read_file(path, NULL);
	cr_assert_not_null(state);
	cr_assert(sscanf(strstr(state, "\"trainer_pgid\":") + 15, "%d",
			 &orphan) == 1 && orphan > 1, "%s", state);
	free(state);
	cr_assert_eq(kill(orphan, 0), 0, "the orphan trainer still runs");
	before = newest_committed();
	start(0);
	all_exit_0(120);
	cr_assert_neq(kill(-orphan, 0), 0, "the orphan's group was ended");
	assert_control(2, "done", NULL);
	cr_assert_eq(toy_events(w.events, 1, 2, "restored", &restored), 1);
	cr_assert_geq(restored, before);
	{
		char *log = sup_log(0);

		cr_assert(strstr(log, "left by an earlier supervisor"), "%s",
			  log);
		free(log);
	}
}

/* A bucket that answers 503 for 30 s (the upload backoff, scaled down
 * here, is at its cap within 2 s, and every heartbeat, event and control
 * read fails for many periods): the trainer keeps going (no restart),
 * steps wait in the spool, and the newest goes out after. */
Test(sup, a_storage_outage_loses_nothing, .timeout = 400)
{
	long long steps_before, steps_after;

	cr_assert_eq(fake_gcs_start(&w.gcs, NULL), 0);
	w.gcs_up = true;
	{
		/* up() resets w: keep the fake across it. */
		struct fake_gcs g = w.gcs;

		up(2, "", "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.05\"");
		w.gcs = g;
		w.gcs_up = true;
	}
	snprintf(w.run_url, sizeof(w.run_url), "gs://bkt/runs/toy");
	{
		char cmd[HARNESS_PATH * 2];

		snprintf(cmd, sizeof(cmd),
			 "curl -sf -X POST --data-binary @'%s/job.json' "
			 "-H 'Content-Type: application/json' "
			 "'%s/upload/storage/v1/b/bkt/o?uploadType=media&"
			 "name=runs/toy/job.json' >/dev/null",
			 w.run_dir, w.gcs.base);
		cr_assert_eq(sh("%s", cmd), 0);
	}
	start_all();
	for (int t = 0; t < 600 && !toy_events(w.events, -1, 1, "ckpt", NULL); t++)
		usleep(50000);
	sleep(2);
	cr_assert_eq(fake_gcs_faults(&w.gcs, "{\"action\": \"status\", "
					     "\"status\": 503, \"times\": -1}"),
		     0);
	toy_events(w.events, 0, 1, "ckpt", &steps_before);
	sleep(30);
	toy_events(w.events, 0, 1, "ckpt", &steps_after);
	cr_assert_gt(steps_after, steps_before + 100,
		     "the trainer kept going: %lld -> %lld", steps_before,
		     steps_after);
	cr_assert_eq(fake_gcs_call(&w.gcs, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
	/* The newest steps go out once it answers again; stop the run
	 * gracefully and check the final one is committed. */
	sleep(8);
	kill(w.sup[0], SIGTERM);
	kill(w.sup[1], SIGTERM);
	all_exit_0(GRACE_S + 40);
	cr_assert_eq(toy_events(w.events, -1, 2, "start", NULL), 0,
		     "no group restart");
	{
		char *log = sup_log(0);

		cr_assert(strstr(log, "503"), "the outage was not seen:\n%s",
			  log);
		free(log);
	}
	{
		long long final = -1;
		char *out = NULL;
		char name[128];

		cr_assert_eq(toy_events(w.events, 0, 1, "final", &final), 1);
		snprintf(name, sizeof(name),
			 "/storage/v1/b/bkt/o/runs%%2Ftoy%%2Fcheckpoints%%2F"
			 "step-%010lld%%2FCOMMIT",
			 final);
		cr_assert_eq(fake_gcs_call(&w.gcs, "GET", name, NULL, &out),
			     200, "step %lld is not committed: %s", final,
			     out ? out : "");
		free(out);
	}
}

Test(sup, ckpt_commands_are_offered_to_trainers)
{
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	struct run_result r;

	up(1, "", "\"TOY_TOTAL\": \"10\"");
	start_all();
	all_exit_0(60);
	cr_assert_eq(run_program(&r, (const char *const[]){
					 bin, "ckpt", "ls", w.run_url, NULL },
				 NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "10"), "%s", r.out);
	run_result_release(&r);
	cr_assert_eq(run_program(&r, (const char *const[]){
					 bin, "ckpt", "nope", NULL },
				 NULL), 0);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "slice-supervisor ckpt --help"), "%s", r.err);
	run_result_release(&r);
}

Test(sup, bad_jobs_and_arguments_are_refused)
{
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	char path[HARNESS_PATH + 32];
	struct run_result r;

	up(1, "", "");
	cr_assert_eq(run_program(&r, (const char *const[]){ bin, "run", NULL },
				 NULL), 0);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "--job"), "%s", r.err);
	run_result_release(&r);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_file(path, "{\"name\": \"toy\", \"command\": \"true\", "
			 "\"grace_s\": \"soon\"}");
	cr_assert_eq(run_program(&r, (const char *const[]){
					 bin, "run", "--job", w.run_url,
					 "--state-dir", w.dir, "--slice", "0",
					 "--worker", "0", "--no-metadata",
					 NULL },
				 NULL), 0);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert(strstr(r.err, "grace_s"), "%s", r.err);
	run_result_release(&r);
}

/* delete_on_finish: when every worker finished, worker 0 deletes the
 * queued resource through the TPU API. */
Test(sup, a_finished_run_deletes_its_queued_resource)
{
	char path[HARNESS_PATH + 32], *job, *out = NULL;
	char fields[256];
	long st;

	up(2, "", "\"TOY_TOTAL\": \"10\"");
	cr_assert_eq(fake_tpu_start(&w.tpu, (const char *const[]){
					    "--delay", "0.05", NULL }),
		     0);
	w.tpu_up = true;
	cr_assert_eq(fake_tpu_call(&w.tpu, "POST",
				   "/v2alpha1/projects/p/locations/z/"
				   "queuedResources?queuedResourceId=q1&"
				   "requestId=123e4567-e89b-42d3-a456-426614174000",
				   "{\"tpu\": {\"nodeSpec\": [{\"parent\": "
				   "\"projects/p/locations/z\", \"nodeId\": \"q1\", "
				   "\"node\": {\"acceleratorType\": \"v4-8\", "
				   "\"runtimeVersion\": \"rt\"}}]}}",
				   NULL),
		     200);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	job = read_file(path, NULL);
	cr_assert_not_null(job);
	snprintf(fields, sizeof(fields),
		 ", \"delete_on_finish\": true, \"tpu\": {\"project\": \"p\", "
		 "\"zone\": \"z\", \"name\": \"q1\"}}");
	job[strlen(job) - 1] = '\0';
	{
		FILE *f = fopen(path, "w");

		cr_assert_not_null(f);
		fprintf(f, "%s%s", job, fields);
		fclose(f);
	}
	free(job);
	start_all();
	all_exit_0(60);
	assert_control(1, "done", NULL);
	st = fake_tpu_call(&w.tpu, "GET",
			   "/v2alpha1/projects/p/locations/z/queuedResources/q1",
			   NULL, &out);
	cr_assert(st == 404 || (st == 200 && strstr(out, "DELETING")),
		  "%ld %s", st, out ? out : "");
	free(out);
	{
		char *log = sup_log(0);

		cr_assert(strstr(log, "queued resource q1 deleted"), "%s", log);
		free(log);
	}
}

/* A run with a code bundle (bundle.tar.zst, as `tar | zstd` writes it):
 * the trainer runs in the unpacked tree and finds its files there by
 * relative names; a group restart with the bundle unchanged keeps the
 * unpacked tree instead of fetching it again. */
Test(sup, the_code_bundle_is_the_trainers_working_directory)
{
	char code[HARNESS_PATH + 16], path[HARNESS_PATH + 64];
	char want[4200], real[4096];
	char *log;

	up(1, "", "");
	snprintf(code, sizeof(code), "%s/code", w.dir);
	cr_assert_eq(sh("mkdir -p '%s/lib'", code), 0);
	snprintf(path, sizeof(path), "%s/lib/message.txt", code);
	write_file(path, "hello from the bundle\n");
	snprintf(path, sizeof(path), "%s/train.sh", code);
	write_file(path,
		   "#!/bin/sh\n"
		   "set -e\n"
		   "echo \"cwd $(pwd -P)\"\n"
		   "cat lib/message.txt\n"
		   "if [ \"$SLICE_GENERATION\" = 1 ]; then\n"
		   "    touch left-by-gen-1\n"
		   "    echo 'generation 1 fails'\n"
		   "    exit 3\n"
		   "fi\n"
		   "if [ -f left-by-gen-1 ]; then echo 'the tree was kept'; fi\n");
	cr_assert_eq(sh("chmod 0755 '%s'", path), 0);
	cr_assert_eq(sh("tar -C '%s' -cf - . | zstd -q -c > '%s/bundle.tar.zst'",
			code, w.run_dir), 0);
	cr_assert_eq(sh("rm -rf '%s'", code), 0);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_file(path, "{\"name\": \"toy\", \"command\": \"./train.sh\", "
			 "\"num_slices\": 1, \"workers_per_slice\": 1, "
			 "\"heartbeat_s\": 1, \"grace_s\": 5}");
	start_all();
	all_exit_0(60);
	assert_control(2, "done", NULL);
	cr_assert_not_null(realpath(w.dir, real));
	snprintf(want, sizeof(want), "cwd %s/w0/code\n", real);
	snprintf(path, sizeof(path), "%s/w0/logs/gen-1.log", w.dir);
	log = read_file(path, NULL);
	cr_assert_not_null(log, "no log of generation 1");
	cr_assert(strstr(log, want) && strstr(log, "hello from the bundle") &&
		  strstr(log, "generation 1 fails"), "%s", log);
	free(log);
	snprintf(path, sizeof(path), "%s/w0/logs/gen-2.log", w.dir);
	log = read_file(path, NULL);
	cr_assert_not_null(log, "no log of generation 2");
	cr_assert(strstr(log, want) && strstr(log, "hello from the bundle") &&
		  strstr(log, "the tree was kept"), "%s", log);
	free(log);
	snprintf(path, sizeof(path), "%s/w0/code.generation", w.dir);
	log = read_file(path, NULL);
	cr_assert_not_null(log, "no code.generation");
	cr_assert(strstr(log, "bundle.tar.zst"), "%s", log);
	free(log);
	log = sup_log(0);
	cr_assert_eq(count_substr(log, "unpacked file://"), 1, "%s", log);
	cr_assert(strstr(log, "already unpacked"), "%s", log);
	free(log);
}

/* A bundle every worker would fail to unpack ends the run as failed,
 * saying why, without starting the trainer or spending restarts. */
Test(sup, a_bundle_that_cannot_be_unpacked_fails_the_run)
{
	up(1, "", "\"TOY_TOTAL\": \"10\"");
	cr_assert_eq(sh("head -c 4096 /dev/urandom | zstd -q -c > "
			"'%s/bundle.tar.zst'", w.run_dir), 0);
	start_all();
	all_exit_0(60);
	assert_control(1, "failed", "code bundle");
	cr_assert_eq(toy_events(w.events, -1, -1, "start", NULL), 0,
		     "the trainer ran");
}
