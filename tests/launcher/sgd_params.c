/*
 * sgd_params.c: see sgd_params.h.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/sgd_params.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sgd_checkpoint_params(const char *bucket, const char *scratch,
			    const char *run, long step)
{
	return sgd_checkpoint_params_of(bucket, scratch, run, step, 2, 2);
}

char *sgd_checkpoint_params_of(const char *bucket, const char *scratch,
			       const char *run, long step, int slices,
			       int workers)
{
	char url[HARNESS_PATH + 64], dest[HARNESS_PATH + 96];
	char cmd[4 * HARNESS_PATH], *text = NULL;

	snprintf(url, sizeof(url), "%s/%s", bucket, run);
	for (int p = 0; p < slices * workers; p++) {
		char part[48], path[HARNESS_PATH + 128], *got = NULL;
		struct run_result r;
		size_t len = 0;
		FILE *f;

		snprintf(part, sizeof(part), "slice-%d-worker-%d", p / workers,
			 p % workers);
		snprintf(dest, sizeof(dest), "%s/restore/%s/%s", scratch, run,
			 part);
		cr_assert_eq(run_slicectl(&r, (const char *const[]){
						  "ckpt", "restore", url, dest,
						  "--part", part, NULL },
					  NULL),
			     0);
		cr_assert_eq(r.status, 0, "ckpt restore %s %s: %s%s", url,
			     part, r.out, r.err);
		run_result_release(&r);
		snprintf(path, sizeof(path), "%s/params.json", dest);
		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import json, sys\n"
			 "ck = json.load(open(sys.argv[1]))\n"
			 "print(ck[\"step\"], json.dumps(ck[\"params\"], "
			 "sort_keys=True))' '%s'", path);
		f = popen(cmd, "r");
		cr_assert_not_null(f);
		cr_assert_gt(getline(&got, &len, f), 0, "%s", path);
		cr_assert_eq(pclose(f), 0);
		got[strcspn(got, "\n")] = '\0';
		cr_assert_eq(strtol(got, NULL, 10), step, "%s: %s", part, got);
		if (!text)
			text = strdup(strchr(got, ' ') + 1);
		else
			cr_assert_str_eq(strchr(got, ' ') + 1, text,
					 "%s differs from slice-0-worker-0",
					 part);
		free(got);
	}
	return text;
}

char *sgd_logged_params(const char *bucket, const char *run, int s, int w)
{
	char worker[16];
	struct run_result r;
	const char *at;
	char *text;

	snprintf(worker, sizeof(worker), "%d/%d", s, w);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "logs", run, "--worker", worker,
					  "--bucket", bucket, NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "logs %s: %s", worker, r.err);
	at = strstr(r.out, "final params: ");
	cr_assert_not_null(at, "worker %s logged no final params:\n%s",
			   worker, r.out);
	at += strlen("final params: ");
	text = strndup(at, strcspn(at, "\n"));
	run_result_release(&r);
	return text;
}
