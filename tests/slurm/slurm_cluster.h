/*
 * slurm_cluster.h: a real Slurm cluster for a test (slurm-cluster.sh:
 * slurmctld and `slurmd -N nX` nodes on loopback ports under the test's
 * temporary directory), and what the Slurm tests ask of slicectl.
 * Failures end the calling criterion test.
 */
#ifndef SLICECTL_TESTS_SLURM_CLUSTER_H
#define SLICECTL_TESTS_SLURM_CLUSTER_H

#include "tests/harness/harness.h"

#include <jansson.h>
#include <stdbool.h>

extern char slurm_dir[HARNESS_PATH];         /* the test's temp dir */
extern char slurm_bucket[HARNESS_PATH + 32]; /* file://DIR/bucket */

/* Makes the temp dir, starts a cluster of nodes nodes in it, and makes
 * it the test's: SLURM_CONF, TMPDIR (the supervisors' state) and the
 * working directory (sbatch's slurm-ID.out) point into it. */
void slurm_cluster_start(unsigned nodes);
/* Cancels every job, stops the daemons by pid, removes the dir; no
 * process may be left naming it. */
void slurm_cluster_stop(void);

/* slurmrestd (Slurm 22.05's /usr/sbin/slurmrestd, openapi/v0.0.38) as
 * root (the test's jobs must run as its user: SLURMRESTD_SECURITY=
 * disable_user_check lets it); returns once it answers. Not jwt: on a
 * unix socket in the cluster's dir with rest_auth/local, url "unix:PATH";
 * jwt: on a free loopback port with rest_auth/jwt, url "http://...".
 * slurm_rest_stop ends it by pid; slurm_cluster_stop does. */
void slurm_rest_start(char *url, size_t len, bool jwt);
void slurm_rest_stop(void);

/* Expects no job.json for run in the cluster's bucket. */
void slurm_no_run(const char *run);

long long slurm_now_ms(void);
/* `slicectl status RUN --format json`. */
json_t *slurm_status(const char *run);
const char *slurm_jstr(json_t *o, const char *k);
/* Polls status until every one of n workers runs at the run's
 * generation >= gen with committed step >= min_step; returns it. */
json_t *slurm_wait_running(const char *run, size_t n, long long gen,
			   long long min_step);
/* The "generation" of a status or control.json object, which it frees. */
long long slurm_generation(json_t *j);
/* Polls until the run's control.json state is state. */
json_t *slurm_wait_state(const char *run, const char *state, long ms);
/* Prints to stderr the last lines of the jobs' output, the daemons' logs
 * and the supervisors' logs: what a failing test shows. */
void slurm_dump(void);
/* Polls `scontrol show job` until JobState is state (and, when not NULL,
 * Reason is reason); returns its restart count. */
long slurm_wait_job(const char *job_id, const char *state,
		    const char *reason, long ms);
/* Lets a requeued job run again a second after every supervisor of its
 * last allocation has gone, instead of after Slurm's BeginTime hold;
 * returns once it runs with a restart count of at least restarts. */
void slurm_release_requeued(const char *id, long restarts);

#endif
