/*
 * tests/launcher/target/gke/gke_live_check.h: what the tests of slicectl
 * job --target gke against the Kubernetes API fake (test_gke_live.c,
 * test_gke_operator.c, test_gke_chaos.c, test_gke_gpu.c,
 * test_gke_torch.c) share: a temporary directory per test, the fake
 * (tests/fakes/kube_fake.py) and a kubeconfig reaching it, Kueue's
 * queues, the job's argv, evictions, and waits on `slicectl status`.
 * Failures are the current Criterion test's.
 *
 * The fake is started by each test and stopped by its pid (it kills every
 * process group it started); the temporary directory is removed and no
 * process naming it may be left.
 */
#ifndef SLICECTL_TESTS_GKE_LIVE_CHECK_H
#define SLICECTL_TESTS_GKE_LIVE_CHECK_H

#include "tests/harness/harness.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

extern char dir[HARNESS_PATH];
extern char bucket[HARNESS_PATH + 32];
extern char kubeconfig[HARNESS_PATH + 32];
extern struct test_fake fake;
/* The fake's plain port: the API, the container API and /_fake/. */
extern int api_port;

/* The suite's .init (dir, bucket, SLICECTL_HOME) and .fini. */
void setup(void);
void cleanup(void);
long long now_ms(void);
/* Starts the fake with extra flags (NULL-terminated), writes the
 * kubeconfig that reaches it. */
void start_fake(const char *const *extra);
/* A request to the fake; *out (may be NULL) its JSON answer. Returns the
 * HTTP status. */
long api(const char *method, const char *path, const char *body,
	 json_t **out);
#define POST(path, body) cr_assert_lt(api("POST", path, body, NULL), 300, \
				      "POST %s", path)
/* A ClusterQueue with quota chips of google.com/tpu that lets higher
 * priorities preempt lower ones, LocalQueue "lq" in default, and
 * PriorityClasses high and low. */
void make_queue(unsigned chips);
/* The same for quota of resource ("nvidia.com/gpu") in ResourceFlavor
 * flavor, whose nodeLabels (a JSON object; NULL: none) Kueue adds to
 * the pods' node selector. */
void make_queue_for(const char *resource, const char *flavor,
		    const char *node_labels, unsigned quota);
/* argv for slicectl job --target gke of run name (NULL-terminated extra
 * flags after the usual ones); static storage until the next call. */
const char *const *job_argv(const char *name, const char *type,
			    const char *slices, const char *command,
			    const char *const *extra);
/* DIR/rel exists. */
bool exists(const char *rel);
/* `slicectl status RUN --format json`. */
json_t *status_json(const char *run);
const char *jstr(json_t *o, const char *k);
/* Waits until every one of n workers runs at the run's generation, which
 * is at least gen, and the committed step is at least min_step; returns
 * the status. */
json_t *wait_running(const char *run, size_t n, long long gen,
		     long long min_step);
/* Waits until the run's control.json state is state. */
json_t *wait_state(const char *run, const char *state, long ms);
/* Waits until the run's JobSet has ended as end; returns the status. */
json_t *wait_end(const char *run, const char *end, long ms);
/* Evicts (the fake's /_fake/evict) the i-th of run's pods that status
 * lists. */
void evict_pod(const char *run, size_t i);
/* examples/sgd's flags for run (sync directory its own), with
 * --priority-class extra unless NULL. */
const char *const *sgd_flags(const char *run, const char *steps,
			     const char *step_s, const char *extra);

#endif
