/*
 * accelerator.c: see accelerator.h. A type is FAMILY-COUNT; the families
 * differ in what COUNT counts (TensorCores for v2, v3, v4, v5p and TPU7x,
 * two to a chip; chips for v5e and v6e), in how many chips one host
 * carries, and in the sizes they come in, each with its documented
 * topology (Cloud TPU's "TPU versions" pages, GKE's "Plan TPUs in GKE").
 * A slice of at most single_host_max chips is one host holding them all;
 * larger slices have chips_per_host chips on every host.
 *
 * GPU machine types are looked up by their whole name: one type is one
 * node. Their GPUs and GKE labels are Compute Engine's "GPU machine types"
 * and GKE's "About GPUs" pages, cross-checked with xpk's
 * src/xpk/core/system_characteristics.py (which has no A2 Ultra nor G2
 * sizes under 12 vCPUs; those are from Compute Engine's page alone).
 */
#include "launcher/accelerator.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct shape {
	unsigned count;       /* the number in the type's name */
	const char *topology;
};

struct family {
	const char *prefix;   /* "v5litepod-" */
	const char *name;     /* the API's enum value */
	unsigned per_chip;    /* COUNT units per chip (TensorCores: 2) */
	unsigned single_host_max, chips_per_host;
	const char *runtime;
	const char *gke_accelerator;
	/* GKE machine types: 1, 4 and 8 chips a host (NULL: none such). */
	const char *machine_1t, *machine_4t, *machine_8t;
	const struct shape *shapes;
};

static const struct shape v2_shapes[] = {
	{ 8, "2x2" }, { 32, "4x4" }, { 128, "8x8" }, { 256, "8x16" },
	{ 512, "16x16" }, { 0, NULL },
};

static const struct shape v3_shapes[] = {
	{ 8, "2x2" }, { 32, "4x4" }, { 64, "4x8" }, { 128, "8x8" },
	{ 256, "8x16" }, { 512, "16x16" }, { 1024, "16x32" },
	{ 2048, "32x32" }, { 0, NULL },
};

/* v4, v5p and TPU7x: 3D tori counted in TensorCores. */
static const struct shape v4_shapes[] = {
	{ 8, "2x2x1" }, { 16, "2x2x2" }, { 32, "2x2x4" }, { 64, "2x4x4" },
	{ 128, "4x4x4" }, { 256, "4x4x8" }, { 512, "4x8x8" },
	{ 1024, "8x8x8" }, { 1536, "8x8x12" }, { 2048, "8x8x16" },
	{ 4096, "8x16x16" }, { 0, NULL },
};

static const struct shape v5p_shapes[] = {
	{ 8, "2x2x1" }, { 16, "2x2x2" }, { 32, "2x2x4" }, { 64, "2x4x4" },
	{ 128, "4x4x4" }, { 256, "4x4x8" }, { 512, "4x8x8" },
	{ 1024, "8x8x8" }, { 1536, "8x8x12" }, { 2048, "8x8x16" },
	{ 4096, "8x16x16" }, { 6144, "12x16x16" }, { 8192, "16x16x16" },
	{ 12288, "16x16x24" }, { 0, NULL },
};

static const struct shape tpu7x_shapes[] = {
	{ 8, "2x2x1" }, { 16, "2x2x2" }, { 32, "2x2x4" }, { 64, "2x4x4" },
	{ 128, "4x4x4" }, { 256, "4x4x8" }, { 512, "4x8x8" },
	{ 1024, "8x8x8" }, { 2048, "8x8x16" }, { 4096, "8x16x16" },
	{ 0, NULL },
};

/* v5e and v6e: 2D, counted in chips. */
static const struct shape v5e_shapes[] = {
	{ 1, "1x1" }, { 4, "2x2" }, { 8, "2x4" }, { 16, "4x4" },
	{ 32, "4x8" }, { 64, "8x8" }, { 128, "8x16" }, { 256, "16x16" },
	{ 0, NULL },
};

static const struct family families[] = {
	{ "v2-", "V2", 2, 4, 4, "tpu-ubuntu2204-base", NULL,
	  NULL, NULL, NULL, v2_shapes },
	{ "v3-", "V3", 2, 4, 4, "tpu-ubuntu2204-base", NULL,
	  NULL, NULL, NULL, v3_shapes },
	{ "v4-", "V4", 2, 4, 4, "tpu-ubuntu2204-base", "tpu-v4-podslice",
	  NULL, "ct4p-hightpu-4t", NULL, v4_shapes },
	{ "v5litepod-", "V5LITE_POD", 1, 8, 4, "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-1t", "ct5lp-hightpu-4t",
	  "ct5lp-hightpu-8t", v5e_shapes },
	{ "v5p-", "V5P", 2, 4, 4, "v2-alpha-tpuv5", "tpu-v5p-slice",
	  NULL, "ct5p-hightpu-4t", NULL, v5p_shapes },
	{ "v6e-", "V6E", 1, 8, 4, "v2-alpha-tpuv6e", "tpu-v6e-slice",
	  "ct6e-standard-1t", "ct6e-standard-4t", "ct6e-standard-8t",
	  v5e_shapes },
	{ "tpu7x-", "TPU7X", 2, 4, 4, "v2-alpha-tpu7-ubuntu2404", "tpu7x",
	  NULL, "tpu7x-standard-4t", NULL, tpu7x_shapes },
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

struct gpu_type {
	const char *machine;  /* the GCE machine type */
	const char *series;
	const char *gpu;
	const char *label;    /* cloud.google.com/gke-accelerator */
	unsigned gpus;
	enum gpu_net net;
};

static const struct gpu_type gpu_types[] = {
	{ "a3-highgpu-8g", "A3_HIGH", "H100 80GB", "nvidia-h100-80gb", 8,
	  GPU_NET_TCPX },
	{ "a3-megagpu-8g", "A3_MEGA", "H100 80GB", "nvidia-h100-mega-80gb", 8,
	  GPU_NET_TCPXO },
	{ "a3-ultragpu-8g", "A3_ULTRA", "H200 141GB", "nvidia-h200-141gb", 8,
	  GPU_NET_RDMA },
	{ "a4-highgpu-8g", "A4", "B200", "nvidia-b200", 8, GPU_NET_RDMA },
	{ "a2-highgpu-1g", "A2", "A100 40GB", "nvidia-tesla-a100", 1,
	  GPU_NET_PLAIN },
	{ "a2-highgpu-2g", "A2", "A100 40GB", "nvidia-tesla-a100", 2,
	  GPU_NET_PLAIN },
	{ "a2-highgpu-4g", "A2", "A100 40GB", "nvidia-tesla-a100", 4,
	  GPU_NET_PLAIN },
	{ "a2-highgpu-8g", "A2", "A100 40GB", "nvidia-tesla-a100", 8,
	  GPU_NET_PLAIN },
	{ "a2-megagpu-16g", "A2", "A100 40GB", "nvidia-tesla-a100", 16,
	  GPU_NET_PLAIN },
	{ "a2-ultragpu-1g", "A2_ULTRA", "A100 80GB", "nvidia-a100-80gb", 1,
	  GPU_NET_PLAIN },
	{ "a2-ultragpu-2g", "A2_ULTRA", "A100 80GB", "nvidia-a100-80gb", 2,
	  GPU_NET_PLAIN },
	{ "a2-ultragpu-4g", "A2_ULTRA", "A100 80GB", "nvidia-a100-80gb", 4,
	  GPU_NET_PLAIN },
	{ "a2-ultragpu-8g", "A2_ULTRA", "A100 80GB", "nvidia-a100-80gb", 8,
	  GPU_NET_PLAIN },
	{ "g2-standard-4", "G2", "L4", "nvidia-l4", 1, GPU_NET_PLAIN },
	{ "g2-standard-8", "G2", "L4", "nvidia-l4", 1, GPU_NET_PLAIN },
	{ "g2-standard-12", "G2", "L4", "nvidia-l4", 1, GPU_NET_PLAIN },
	{ "g2-standard-16", "G2", "L4", "nvidia-l4", 1, GPU_NET_PLAIN },
	{ "g2-standard-32", "G2", "L4", "nvidia-l4", 1, GPU_NET_PLAIN },
	{ "g2-standard-24", "G2", "L4", "nvidia-l4", 2, GPU_NET_PLAIN },
	{ "g2-standard-48", "G2", "L4", "nvidia-l4", 4, GPU_NET_PLAIN },
	{ "g2-standard-96", "G2", "L4", "nvidia-l4", 8, GPU_NET_PLAIN },
};

#define N_GPU_TYPES (sizeof(gpu_types) / sizeof(gpu_types[0]))

static bool parse_count(const char *s, unsigned *out)
{
	unsigned long v;
	char *end;

	if (*s < '1' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 1000000)
		return false;
	*out = (unsigned)v;
	return true;
}

static const char *machine_type(const struct family *f, unsigned per_host)
{
	switch (per_host) {
	case 1:
		return f->machine_1t;
	case 4:
		return f->machine_4t;
	case 8:
		return f->machine_8t;
	default:
		return NULL;
	}
}

static bool gpu_lookup(const char *type, struct accelerator *out)
{
	for (size_t i = 0; i < N_GPU_TYPES; i++) {
		const struct gpu_type *g = &gpu_types[i];

		if (strcmp(type, g->machine))
			continue;
		memset(out, 0, sizeof(*out));
		out->family = g->series;
		out->chips = out->chips_per_host = out->gpus_per_host = g->gpus;
		out->workers = 1;
		out->gke_accelerator = g->label;
		out->gke_machine_type = g->machine;
		out->gpu = g->gpu;
		out->net = g->net;
		return true;
	}
	return false;
}

bool accelerator_lookup(const char *type, struct accelerator *out)
{
	unsigned count;

	if (!type)
		return false;
	if (gpu_lookup(type, out))
		return true;
	for (size_t i = 0; i < N_FAMILIES; i++) {
		const struct family *f = &families[i];
		size_t plen = strlen(f->prefix);

		if (strncmp(type, f->prefix, plen) ||
		    !parse_count(type + plen, &count))
			continue;
		for (const struct shape *s = f->shapes; s->count; s++) {
			if (s->count != count)
				continue;
			memset(out, 0, sizeof(*out));
			out->family = f->name;
			out->chips = count / f->per_chip;
			out->chips_per_host = out->chips <= f->single_host_max
						      ? out->chips
						      : f->chips_per_host;
			out->workers = out->chips / out->chips_per_host;
			snprintf(out->topology, sizeof(out->topology), "%s",
				 s->topology);
			out->runtime = f->runtime;
			out->gke_machine_type =
				machine_type(f, out->chips_per_host);
			out->gke_accelerator =
				out->gke_machine_type ? f->gke_accelerator
						      : NULL;
			return true;
		}
		return false;
	}
	return false;
}

void accelerator_examples(char *buf, size_t cap)
{
	size_t used = 0;

	if (!cap)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < N_FAMILIES && used < cap; i++) {
		const struct family *f = &families[i];
		const struct shape *last = f->shapes;
		int n;

		while (last[1].count)
			last++;
		n = snprintf(buf + used, cap - used, "%s%s%u ... %s%u",
			     i ? ", " : "", f->prefix, f->shapes[0].count,
			     f->prefix, last->count);
		if (n < 0)
			return;
		used += (size_t)n;
	}
}

void accelerator_gpu_examples(char *buf, size_t cap)
{
	size_t used = 0;

	if (!cap)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < N_GPU_TYPES && used < cap; i++) {
		int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
				 gpu_types[i].machine);

		if (n < 0)
			return;
		used += (size_t)n;
	}
}
