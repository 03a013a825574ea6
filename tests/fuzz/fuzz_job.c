/*
 * fuzz_job.c: job.json (run/job.c). Besides not crashing, what
 * job_parse accepts job_to_json writes, and job_parse reads that back to
 * the same job (compared by writing it again, so that fields added later
 * are compared too).
 */
#include "fuzz.h"

#include "run/run.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct job j, again;
	struct err e;
	char *text, *text2;

	if (job_parse((const char *)data, size, &j, &e))
		return 0;
	FUZZ_ASSERT(job_to_json(&j, &text, &e) == 0);
	job_release(&j);
	FUZZ_ASSERT(job_parse(text, strlen(text), &again, &e) == 0);
	FUZZ_ASSERT(job_to_json(&again, &text2, &e) == 0);
	FUZZ_ASSERT(strcmp(text, text2) == 0);
	job_release(&again);
	free(text);
	free(text2);
	return 0;
}
