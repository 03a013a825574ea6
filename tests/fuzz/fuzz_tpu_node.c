/*
 * fuzz_tpu_node.c: a Node as the TPU API sends it (tpu_node_parse,
 * cloud/tpu_parse.c): its workers' addresses are what slicectl connects
 * to. What parses has every string the struct promises, "" when absent.
 */
#include "fuzz.h"

#include "cloud/cloud.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpu_node n;
	struct err e;

	if (tpu_node_parse((const char *)data, size, &n, &e)) {
		FUZZ_ASSERT(e.msg[0] && !n.name && !n.endpoints);
		return 0;
	}
	FUZZ_ASSERT(n.name && n.id && n.uid && n.state && n.health &&
		    n.accelerator_type && n.json);
	FUZZ_ASSERT(*n.name && !strchr(n.id, '/'));
	for (size_t i = 0; i < n.nendpoints; i++)
		FUZZ_ASSERT(n.endpoints[i].ip && n.endpoints[i].external_ip &&
			    n.endpoints[i].port <= 65535);
	tpu_node_release(&n);
	return 0;
}
