/*
 * fuzz_tpu_qr.c: a QueuedResource as the TPU API sends it
 * (tpu_qr_parse, cloud/tpu_parse.c). What parses has every string the
 * struct promises, "" when absent, and one id per node.
 */
#include "fuzz.h"

#include "cloud/cloud.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const capacities[] = { "spot", "reserved",
						  "best-effort", "on-demand" };
	struct tpu_qr q;
	struct err e;
	bool known = false;

	if (tpu_qr_parse((const char *)data, size, &q, &e)) {
		FUZZ_ASSERT(e.msg[0] && !q.name && !q.node_ids);
		return 0;
	}
	FUZZ_ASSERT(q.name && q.id && q.state && q.state_initiator &&
		    q.create_time && q.accelerator_type &&
		    q.runtime_version && q.reservation && q.error_message &&
		    q.json);
	FUZZ_ASSERT(*q.name && !strchr(q.id, '/'));
	for (size_t i = 0; i < sizeof(capacities) / sizeof(*capacities); i++)
		known |= q.capacity && !strcmp(q.capacity, capacities[i]);
	FUZZ_ASSERT(known);
	for (size_t i = 0; i < q.nnodes; i++)
		FUZZ_ASSERT(q.node_ids[i]);
	tpu_qr_release(&q);
	return 0;
}
