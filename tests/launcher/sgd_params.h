/*
 * sgd_params.h: the final parameters of an examples/sgd run of 2 slices x
 * 2 workers, read back two ways, for the tests that compare a run under
 * failures with an uninterrupted one (test_demo.c, test_gke_chaos.c).
 * Failures end the calling criterion test.
 */
#ifndef SLICECTL_TESTS_LAUNCHER_SGD_PARAMS_H
#define SLICECTL_TESTS_LAUNCHER_SGD_PARAMS_H

/* Every part of BUCKET/RUN's newest committed checkpoint, restored with
 * `slicectl ckpt restore` under scratch/restore/RUN: the parts must agree
 * and be at step. Returned as train.py prints them (sorted keys, Python's
 * round-tripping float repr), to be freed. */
char *sgd_checkpoint_params(const char *bucket, const char *scratch,
			    const char *run, long step);
/* The same for a run of slices x workers. */
char *sgd_checkpoint_params_of(const char *bucket, const char *scratch,
			       const char *run, long step, int slices,
			       int workers);

/* The "final params:" line worker s/w of BUCKET/RUN logged last, from
 * `slicectl logs`; to be freed. */
char *sgd_logged_params(const char *bucket, const char *run, int s, int w);

#endif
