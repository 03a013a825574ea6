/*
 * fuzz_tpu_operation.c: a long-running Operation as the TPU API sends it
 * (tpu_operation_parse, cloud/tpu_parse.c), parsed into one struct again
 * and again as a poll does. An operation not done has a name to poll.
 */
#include "fuzz.h"

#include "cloud/tpu.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* What the previous input left, as a poll's struct holds it. */
	static struct tpu_operation op;
	struct err e;

	if (tpu_operation_parse((const char *)data, size, &op, &e)) {
		FUZZ_ASSERT(e.msg[0]);
		return 0;
	}
	FUZZ_ASSERT(op.done || (op.name && *op.name));
	FUZZ_ASSERT(memchr(op.message, '\0', sizeof(op.message)));
	FUZZ_ASSERT(op.failed || !op.message[0]);
	return 0;
}
