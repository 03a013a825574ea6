/*
 * The accelerator table (launcher/accelerator.c) against what Cloud TPU's
 * and GKE's documentation say of each family: hosts, chips, chips a host,
 * topology, runtime, GKE's node label and machine type; and the types it
 * must refuse.
 */
#include "launcher/accelerator.h"
#include "launcher/job.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct want {
	const char *type;
	unsigned chips, workers, per_host;
	const char *topology, *runtime, *gke, *machine;
};

static const struct want wants[] = {
	{ "v2-8", 4, 1, 4, "2x2", "tpu-ubuntu2204-base", NULL, NULL },
	{ "v2-32", 16, 4, 4, "4x4", "tpu-ubuntu2204-base", NULL, NULL },
	{ "v3-8", 4, 1, 4, "2x2", "tpu-ubuntu2204-base", NULL, NULL },
	{ "v3-2048", 1024, 256, 4, "32x32", "tpu-ubuntu2204-base", NULL,
	  NULL },
	{ "v4-8", 4, 1, 4, "2x2x1", "tpu-ubuntu2204-base", "tpu-v4-podslice",
	  "ct4p-hightpu-4t" },
	{ "v4-16", 8, 2, 4, "2x2x2", "tpu-ubuntu2204-base",
	  "tpu-v4-podslice", "ct4p-hightpu-4t" },
	{ "v4-32", 16, 4, 4, "2x2x4", "tpu-ubuntu2204-base",
	  "tpu-v4-podslice", "ct4p-hightpu-4t" },
	{ "v4-4096", 2048, 512, 4, "8x16x16", "tpu-ubuntu2204-base",
	  "tpu-v4-podslice", "ct4p-hightpu-4t" },
	{ "v5litepod-1", 1, 1, 1, "1x1", "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-1t" },
	{ "v5litepod-4", 4, 1, 4, "2x2", "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-4t" },
	{ "v5litepod-8", 8, 1, 8, "2x4", "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-8t" },
	{ "v5litepod-16", 16, 4, 4, "4x4", "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-4t" },
	{ "v5litepod-256", 256, 64, 4, "16x16", "v2-alpha-tpuv5-lite",
	  "tpu-v5-lite-podslice", "ct5lp-hightpu-4t" },
	{ "v5p-8", 4, 1, 4, "2x2x1", "v2-alpha-tpuv5", "tpu-v5p-slice",
	  "ct5p-hightpu-4t" },
	{ "v5p-128", 64, 16, 4, "4x4x4", "v2-alpha-tpuv5", "tpu-v5p-slice",
	  "ct5p-hightpu-4t" },
	{ "v5p-12288", 6144, 1536, 4, "16x16x24", "v2-alpha-tpuv5",
	  "tpu-v5p-slice", "ct5p-hightpu-4t" },
	{ "v6e-1", 1, 1, 1, "1x1", "v2-alpha-tpuv6e", "tpu-v6e-slice",
	  "ct6e-standard-1t" },
	{ "v6e-8", 8, 1, 8, "2x4", "v2-alpha-tpuv6e", "tpu-v6e-slice",
	  "ct6e-standard-8t" },
	{ "v6e-16", 16, 4, 4, "4x4", "v2-alpha-tpuv6e", "tpu-v6e-slice",
	  "ct6e-standard-4t" },
	{ "v6e-256", 256, 64, 4, "16x16", "v2-alpha-tpuv6e", "tpu-v6e-slice",
	  "ct6e-standard-4t" },
	{ "tpu7x-8", 4, 1, 4, "2x2x1", "v2-alpha-tpu7-ubuntu2404", "tpu7x",
	  "tpu7x-standard-4t" },
	{ "tpu7x-128", 64, 16, 4, "4x4x4", "v2-alpha-tpu7-ubuntu2404",
	  "tpu7x", "tpu7x-standard-4t" },
};

static void same(const char *what, const char *got, const char *want)
{
	if (!want)
		cr_expect_null(got, "%s: %s", what, got);
	else
		cr_expect(got && !strcmp(got, want), "%s: %s, not %s", what,
			  got ? got : "(null)", want);
}

Test(accelerator, documented_types)
{
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		const struct want *w = &wants[i];
		struct accelerator a;

		cr_assert(accelerator_lookup(w->type, &a), "%s", w->type);
		cr_expect_eq(a.chips, w->chips, "%s chips %u", w->type,
			     a.chips);
		cr_expect_eq(a.workers, w->workers, "%s workers %u", w->type,
			     a.workers);
		cr_expect_eq(a.chips_per_host, w->per_host, "%s per host %u",
			     w->type, a.chips_per_host);
		cr_expect_eq(a.workers * a.chips_per_host, a.chips, "%s",
			     w->type);
		same(w->type, a.topology, w->topology);
		same(w->type, a.runtime, w->runtime);
		same(w->type, a.gke_accelerator, w->gke);
		same(w->type, a.gke_machine_type, w->machine);
		cr_expect_eq(job_workers_per_slice(w->type), w->workers, "%s",
			     w->type);
		same(w->type, job_default_runtime(w->type), w->runtime);
	}
}

/* The topology's product is the chip count, for every size of every
 * family the table knows. */
Test(accelerator, topology_matches_chips)
{
	static const char *const prefixes[] = { "v2-", "v3-", "v4-",
						 "v5litepod-", "v5p-", "v6e-",
						 "tpu7x-" };
	char type[32];
	unsigned found = 0;

	for (size_t p = 0; p < 7; p++) {
		for (unsigned n = 1; n <= 12288; n++) {
			struct accelerator a;
			unsigned prod = 1, d;
			const char *s;
			char *end;

			snprintf(type, sizeof(type), "%s%u", prefixes[p], n);
			if (!accelerator_lookup(type, &a))
				continue;
			found++;
			for (s = a.topology; *s; s = *end ? end + 1 : end) {
				d = (unsigned)strtoul(s, &end, 10);
				prod *= d;
			}
			cr_expect_eq(prod, a.chips, "%s: %s is %u chips", type,
				     a.topology, prod);
		}
	}
	cr_expect_geq(found, 60);
}

Test(accelerator, refused)
{
	static const char *const bad[] = {
		NULL, "", "v4", "v4-", "v4-0", "v4-24", "v4-08", "v4-8x",
		"v5litepod-2", "v5e-16", "v6e-512", "v5p-4", "tpu-9000",
		"V4-8", "v6ea-8", "tpu7x-6", " v4-8",
	};
	struct accelerator a;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect(!accelerator_lookup(bad[i], &a), "%s", bad[i]);
		cr_expect_eq(job_workers_per_slice(bad[i]), 0u);
		cr_expect_null(job_default_runtime(bad[i]));
	}
}

Test(accelerator, examples)
{
	char buf[512];

	accelerator_examples(buf, sizeof(buf));
	cr_expect(strstr(buf, "v5litepod-1 ... v5litepod-256"), "%s", buf);
	cr_expect(strstr(buf, "v4-8 ... v4-4096"), "%s", buf);
	accelerator_examples(buf, 10);
	cr_expect_eq(strlen(buf), 9u);
}

/* GPU machine types: one node each, with Compute Engine's GPU count and
 * GKE's node label; no TPU VM workers nor runtime. */
Test(accelerator, gpu_machine_types)
{
	static const struct {
		const char *type, *label;
		unsigned gpus;
		enum gpu_net net;
	} gpus[] = {
		{ "a3-highgpu-8g", "nvidia-h100-80gb", 8, GPU_NET_TCPX },
		{ "a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, GPU_NET_TCPXO },
		{ "a3-ultragpu-8g", "nvidia-h200-141gb", 8, GPU_NET_RDMA },
		{ "a4-highgpu-8g", "nvidia-b200", 8, GPU_NET_RDMA },
		{ "a2-highgpu-1g", "nvidia-tesla-a100", 1, GPU_NET_PLAIN },
		{ "a2-highgpu-8g", "nvidia-tesla-a100", 8, GPU_NET_PLAIN },
		{ "a2-megagpu-16g", "nvidia-tesla-a100", 16, GPU_NET_PLAIN },
		{ "a2-ultragpu-2g", "nvidia-a100-80gb", 2, GPU_NET_PLAIN },
		{ "g2-standard-4", "nvidia-l4", 1, GPU_NET_PLAIN },
		{ "g2-standard-32", "nvidia-l4", 1, GPU_NET_PLAIN },
		{ "g2-standard-24", "nvidia-l4", 2, GPU_NET_PLAIN },
		{ "g2-standard-48", "nvidia-l4", 4, GPU_NET_PLAIN },
		{ "g2-standard-96", "nvidia-l4", 8, GPU_NET_PLAIN },
	};
	static const char *const bad[] = {
		"a3-megagpu-4g", "g2-standard-2", "a2-ultragpu-16g", "a4",
		"a3-megagpu-8g ", "nvidia-h100-80gb",
	};
	struct accelerator a;
	char buf[512];

	for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++) {
		cr_assert(accelerator_lookup(gpus[i].type, &a), "%s",
			  gpus[i].type);
		cr_expect_eq(a.gpus_per_host, gpus[i].gpus, "%s", gpus[i].type);
		cr_expect_eq(a.chips_per_host, gpus[i].gpus, "%s", gpus[i].type);
		cr_expect_eq(a.workers, 1u, "%s", gpus[i].type);
		cr_expect_eq(a.net, gpus[i].net, "%s", gpus[i].type);
		same(gpus[i].type, a.gke_accelerator, gpus[i].label);
		same(gpus[i].type, a.gke_machine_type, gpus[i].type);
		cr_expect_null(a.runtime);
		cr_expect_eq(job_workers_per_slice(gpus[i].type), 0u);
		cr_expect_null(job_default_runtime(gpus[i].type));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect(!accelerator_lookup(bad[i], &a), "%s", bad[i]);
	accelerator_gpu_examples(buf, sizeof(buf));
	cr_expect(strstr(buf, "a3-megagpu-8g, a3-ultragpu-8g"), "%s", buf);
	accelerator_examples(buf, sizeof(buf));
	cr_expect(!strstr(buf, "gpu"), "%s", buf);
}
