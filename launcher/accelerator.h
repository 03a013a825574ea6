/*
 * accelerator.h (private to launcher/): what a Cloud TPU accelerator type
 * ("v4-16", "v5litepod-16", "tpu7x-128") means, for every family of the
 * TPU API's AcceleratorConfig.type enum that Cloud TPU and GKE document:
 * how many hosts (workers) and chips a slice has, its topology, the TPU VM
 * runtime it boots by default, and the node labels GKE gives its node
 * pools. One table answers the queued-resource path, the local provider's
 * checks and the GKE renderer alike.
 */
#ifndef SLICECTL_LAUNCHER_ACCELERATOR_H
#define SLICECTL_LAUNCHER_ACCELERATOR_H

#include <stdbool.h>
#include <stddef.h>

struct accelerator {
	const char *family;         /* the API's enum: "V4", "V5LITE_POD" */
	unsigned chips;             /* in the slice */
	unsigned workers;           /* hosts (TPU VMs, GKE nodes) */
	unsigned chips_per_host;    /* GKE: google.com/tpu per pod */
	char topology[16];          /* "4x4", "2x2x2" */
	const char *runtime;        /* the default runtime version */
	const char *gke_accelerator; /* cloud.google.com/gke-tpu-accelerator;
				      * NULL: GKE has no node pools of it */
	const char *gke_machine_type; /* "ct5lp-hightpu-4t"; NULL as above */
};

/* Fills *out for a type Cloud TPU documents. Returns false for any other
 * string (a size the family does not come in, an unknown family). */
bool accelerator_lookup(const char *type, struct accelerator *out);

/* A few known types of each family, for an error message: "v4-8, v4-16,
 * ..., v6e-256". Writes at most cap bytes (always terminated). */
void accelerator_examples(char *buf, size_t cap);

#endif
