/*
 * accelerator.h (private to launcher/): what a Cloud TPU accelerator type
 * ("v4-16", "v5litepod-16", "tpu7x-128") means, for every family of the
 * TPU API's AcceleratorConfig.type enum that Cloud TPU and GKE document:
 * how many hosts (workers) and chips a slice has, its topology, the TPU VM
 * runtime it boots by default, and the node labels GKE gives its node
 * pools. One table answers the queued-resource path, the local provider's
 * checks and the GKE renderer alike.
 *
 * It knows Google's GPU machine types too ("a3-megagpu-8g", "g2-standard-24"),
 * for GKE only: one such type is one node, whose GPUs, node label and
 * network stack (the GPUDirect flavour its pods need) it gives.
 */
#ifndef SLICECTL_LAUNCHER_ACCELERATOR_H
#define SLICECTL_LAUNCHER_ACCELERATOR_H

#include <stdbool.h>
#include <stddef.h>

/* How a GPU node's GPUs reach the other nodes' (GKE's "GPUDirect"). */
enum gpu_net {
	GPU_NET_PLAIN,  /* the node's own NIC: G2, A2 */
	GPU_NET_TCPX,   /* GPUDirect-TCPX: A3 High, 4 GPU NICs */
	GPU_NET_TCPXO,  /* GPUDirect-TCPXO: A3 Mega, 8 GPU NICs */
	GPU_NET_RDMA,   /* GPUDirect-RDMA over RoCE: A3 Ultra, A4 */
};

struct accelerator {
	const char *family;         /* the API's enum: "V4", "V5LITE_POD";
				     * a GPU series: "A3_MEGA", "G2" */
	unsigned chips;             /* in the slice */
	unsigned workers;           /* hosts (TPU VMs, GKE nodes) */
	unsigned chips_per_host;    /* GKE: google.com/tpu per pod */
	char topology[16];          /* "4x4", "2x2x2" */
	const char *runtime;        /* the default runtime version */
	const char *gke_accelerator; /* cloud.google.com/gke-tpu-accelerator;
				      * NULL: GKE has no node pools of it */
	const char *gke_machine_type; /* "ct5lp-hightpu-4t"; NULL as above */
	/* GPU machine types only (gpus_per_host 0: a TPU type). Then
	 * workers is 1 (the job says how many nodes), chips and
	 * chips_per_host are the node's GPUs, topology is "", runtime NULL,
	 * gke_accelerator the cloud.google.com/gke-accelerator label. */
	unsigned gpus_per_host;     /* nvidia.com/gpu per pod */
	const char *gpu;            /* "H100 80GB" */
	enum gpu_net net;
};

/* Fills *out for a type Cloud TPU documents. Returns false for any other
 * string (a size the family does not come in, an unknown family). */
bool accelerator_lookup(const char *type, struct accelerator *out);

/* A few known types of each family, for an error message: "v4-8, v4-16,
 * ..., v6e-256". Writes at most cap bytes (always terminated). */
void accelerator_examples(char *buf, size_t cap);

/* The GPU machine types, likewise: "a3-highgpu-8g, a3-megagpu-8g, ...". */
void accelerator_gpu_examples(char *buf, size_t cap);

#endif
