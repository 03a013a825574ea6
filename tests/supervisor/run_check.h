/*
 * tests/supervisor/run_check.h: what the slice-supervisor end-to-end tests
 * (test_supervisor.c, test_pod.c) look at in a file:// run and in the
 * supervisor processes they start. Failures are Criterion assertions.
 */
#ifndef SLICECTL_TESTS_SUPERVISOR_RUN_CHECK_H
#define SLICECTL_TESTS_SUPERVISOR_RUN_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

void write_text(const char *path, const char *text);

/* Waits up to timeout_s for child *pid: its exit status (128 + N for
 * signal N) with *pid set to 0, or -1 while it still runs. */
int wait_child(pid_t *pid, unsigned timeout_s);

/* Kills what is left of the trainers whose supervisors' state files are
 * DIR/GLOB/state.json (supervisors a test killed outright). */
void kill_left_trainers(const char *dir, const char *glob);

/* Kills supervisors pid[0..n) still running (and reaps them), what is
 * left of their trainers (state files DIR/w*), and removes dir, which
 * is then "". */
void end_supervisors(pid_t *pid, unsigned n, char *dir);

/* run_dir/control.json, parsed. */
json_t *run_control(const char *run_dir);
/* Its generation and state, and (unless NULL) a part of its reason. */
void assert_run_control(const char *run_dir, long long generation,
			const char *state, const char *reason_has);

/* Worker part's trainer log of generation gen as its supervisor
 * published it (its segments, in order); NULL when it has none. */
char *run_log(const char *run_dir, const char *part, long long gen);

bool run_committed(const char *run_dir, long long step);
/* The newest committed step, 0 when none. */
long long run_newest_committed(const char *run_dir);
void run_wait_committed(const char *run_dir, long long at_least,
			unsigned timeout_s);

/* Worker `worker` of slice 0's heartbeat state in run_dir ("" when it
 * has sent none). */
void run_heartbeat_state(const char *run_dir, unsigned worker, char *out,
			 size_t cap);
/* Events of kind by worker (NULL: anyone) in run_dir's history; *last
 * (unless NULL) is the last found, the caller's to json_decref (NULL
 * when none). */
unsigned run_events(const char *run_dir, const char *kind,
		    const char *worker, json_t **last);

/* DIR/supI.log, where spawn_supervisor's callers send supervisor I's
 * stderr (malloc'd; "" when there is none). */
char *supervisor_log(const char *dir, unsigned i);

/* Starts slice-supervisor ($SLICE_SUPERVISOR_BIN) as worker `worker` of
 * slice 0 of run_url, its state in state_dir, control.json read every
 * 0.2 s, no metadata watch, stderr appended to log, with env ("K=V",
 * NULL-terminated, may be NULL) added. It dies with the test process. */
pid_t spawn_supervisor(const char *run_url, const char *state_dir,
		       unsigned worker, const char *log,
		       const char *const *env);

/* CLOCK_MONOTONIC in seconds. */
double mono_s(void);

#endif
