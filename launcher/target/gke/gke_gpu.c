/*
 * gke_gpu.c: what a GPU pod needs beyond the nvidia.com/gpu request, one
 * table row per network stack (see gke.h). The values are GKE's "Maximize
 * GPU network bandwidth with GPUDirect and multi-networking" pages (TCPX
 * for A3 High, TCPXO for A3 Mega), its "AI-optimized cluster" pages (RDMA
 * for A3 Ultra and A4: the gIB NCCL plugin under /home/kubernetes/bin/gib),
 * and the samples in GoogleCloudPlatform/container-engine-accelerators
 * (gpudirect-tcpx/, gpudirect-tcpxo/), cross-checked with xpk's
 * src/xpk/core/workload_decorators/ (tcpx_, tcpxo_, rdma_decorator.py).
 *
 * The networks are the names those pages give the cluster's Network
 * objects (vpc1..vpc8; gvnic-1 and rdma-0..rdma-7): a cluster made with
 * other names needs them in its own JobSet.
 */
#include "launcher/target/gke/gke.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The RxDM daemons' images, as the pages' samples pin them. */
#define TCPX_IMAGE "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/" \
		   "tcpgpudmarxd-dev:v2.0.11"
#define TCPXO_IMAGE "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/" \
		    "tcpgpudmarxd-dev:v1.0.12"
#define NVIDIA_LIBS "/usr/local/nvidia/lib64"

struct volume {
	const char *name, *host_path;
};

struct mount {
	const char *volume, *path;
};

struct env {
	const char *name, *value;
};

/* The RxDM daemon: a native sidecar (an init container that keeps
 * running), so that it neither delays the pod's end nor outlives it. */
struct sidecar {
	const char *name, *image;
	const char *const *command;
	const char *const *caps;
	const struct mount *mounts;
	bool dmabuf;      /* its devices include /dev/dmabuf_import_helper */
};

struct plumbing {
	enum gpu_net net;
	/* eth1, eth2, ... after eth0 on "default"; NULL: the node's
	 * network (hostNetwork), no extra NICs. */
	const char *const *networks;
	const struct volume *volumes;   /* hostPath volumes */
	const struct mount *mounts;     /* the worker's */
	const struct env *env;          /* the worker's */
	const struct sidecar *sidecar;  /* NULL: none */
};

static const char *const tcpx_networks[] = {
	"vpc1", "vpc2", "vpc3", "vpc4", NULL,
};

static const char *const tcpxo_networks[] = {
	"vpc1", "vpc2", "vpc3", "vpc4", "vpc5", "vpc6", "vpc7", "vpc8", NULL,
};

static const char *const rdma_networks[] = {
	"gvnic-1", "rdma-0", "rdma-1", "rdma-2", "rdma-3", "rdma-4", "rdma-5",
	"rdma-6", "rdma-7", NULL,
};

static const struct volume tcpx_volumes[] = {
	{ "libraries", "/home/kubernetes/bin/nvidia/lib64" },
	{ "sys", "/sys" },
	{ "proc-sys", "/proc/sys" },
	{ "tcpx-socket", "/run/tcpx" },
	{ NULL, NULL },
};

static const struct volume tcpxo_volumes[] = {
	{ "libraries", "/home/kubernetes/bin/nvidia" },
	{ "sys", "/sys" },
	{ "proc-sys", "/proc/sys" },
	{ "aperture-devices", "/dev/aperture_devices" },
	{ NULL, NULL },
};

static const struct volume rdma_volumes[] = {
	{ "libraries", "/home/kubernetes/bin/nvidia" },
	{ "gib", "/home/kubernetes/bin/gib" },
	{ NULL, NULL },
};

/* The NCCL TCPX plugin finds the daemon's socket under /tmp. */
static const struct mount tcpx_mounts[] = {
	{ "libraries", NVIDIA_LIBS },
	{ "tcpx-socket", "/tmp" },
	{ NULL, NULL },
};

static const struct mount tcpxo_mounts[] = {
	{ "libraries", "/usr/local/nvidia" },
	{ "aperture-devices", "/dev/aperture_devices" },
	{ NULL, NULL },
};

static const struct mount rdma_mounts[] = {
	{ "libraries", "/usr/local/nvidia" },
	{ "gib", "/usr/local/gib" },
	{ NULL, NULL },
};

static const struct env libs_env[] = {
	{ "LD_LIBRARY_PATH", NVIDIA_LIBS },
	{ NULL, NULL },
};

static const struct env tcpxo_env[] = {
	{ "LD_LIBRARY_PATH", NVIDIA_LIBS },
	{ "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices" },
	{ NULL, NULL },
};

static const struct mount tcpx_daemon_mounts[] = {
	{ "libraries", NVIDIA_LIBS },
	{ "tcpx-socket", "/run/tcpx" },
	{ "sys", "/hostsysfs" },
	{ "proc-sys", "/hostprocsysfs" },
	{ NULL, NULL },
};

static const struct mount tcpxo_daemon_mounts[] = {
	{ "libraries", "/usr/local/nvidia" },
	{ "sys", "/hostsysfs" },
	{ "proc-sys", "/hostprocsysfs" },
	{ NULL, NULL },
};

static const struct sidecar tcpx_daemon = {
	"tcpx-daemon", TCPX_IMAGE,
	(const char *const[]){ "/tcpgpudmarxd/build/app/tcpgpudmarxd",
			       "--gpu_nic_preset", "a3vm", "--gpu_shmem_type",
			       "fd", "--uds_path", "/run/tcpx", "--setup_param",
			       "\"--verbose 128 2 0 \"", NULL },
	(const char *const[]){ "NET_ADMIN", NULL },
	tcpx_daemon_mounts, false,
};

static const struct sidecar tcpxo_daemon = {
	"tcpxo-daemon", TCPXO_IMAGE,
	(const char *const[]){ "/bin/sh", "-c",
			       "set -ex\n"
			       "chmod 755 /fts/entrypoint_rxdm_container.sh\n"
			       "/fts/entrypoint_rxdm_container.sh --num_hops=2 "
			       "--num_nics=8 --uid= --alsologtostderr\n",
			       NULL },
	(const char *const[]){ "NET_ADMIN", "NET_BIND_SERVICE", NULL },
	tcpxo_daemon_mounts, true,
};

static const struct volume no_volumes[] = { { NULL, NULL } };
static const struct mount no_mounts[] = { { NULL, NULL } };
static const struct env no_env[] = { { NULL, NULL } };

static const struct plumbing plumbings[] = {
	{ GPU_NET_PLAIN, NULL, no_volumes, no_mounts, no_env, NULL },
	{ GPU_NET_TCPX, tcpx_networks, tcpx_volumes, tcpx_mounts, libs_env,
	  &tcpx_daemon },
	{ GPU_NET_TCPXO, tcpxo_networks, tcpxo_volumes, tcpxo_mounts,
	  tcpxo_env, &tcpxo_daemon },
	{ GPU_NET_RDMA, rdma_networks, rdma_volumes, rdma_mounts, libs_env,
	  NULL },
};

static const struct plumbing *plumbing_of(enum gpu_net net)
{
	for (size_t i = 0; i < sizeof(plumbings) / sizeof(plumbings[0]); i++)
		if (plumbings[i].net == net)
			return &plumbings[i];
	return &plumbings[0];
}

bool gke_gpu_host_network(enum gpu_net net)
{
	return !plumbing_of(net)->networks;
}

static json_t *string_array(const char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && v[i]; i++)
		if (json_array_append_new(a, json_string(v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static int add_mounts(json_t *container, const struct mount *m)
{
	json_t *list = json_object_get(container, "volumeMounts");

	for (; m->volume; m++)
		if (json_array_append_new(list,
					  json_pack("{s:s, s:s}", "name",
						    m->volume, "mountPath",
						    m->path)))
			return -1;
	return 0;
}

static int add_env(json_t *container, const struct env *e)
{
	json_t *list = json_object_get(container, "env");

	for (; e->name; e++)
		if (json_array_append_new(list, gke_value_env(e->name, e->value)))
			return -1;
	return 0;
}

/* networking.gke.io/interfaces: eth0 on the pod network, then one NIC
 * per extra network, as the JSON the annotation holds. */
static char *interfaces(const char *const *networks)
{
	json_t *a = json_pack("[{s:s, s:s}]", "interfaceName", "eth0",
			      "network", "default");
	char name[32], *text;

	for (size_t i = 0; a && networks[i]; i++) {
		snprintf(name, sizeof(name), "eth%zu", i + 1);
		if (json_array_append_new(a, json_pack("{s:s, s:s}",
						       "interfaceName", name,
						       "network", networks[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	text = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return text;
}

/* devices.gke.io/container.NAME: the GPU devices the daemon sees, as the
 * YAML list the annotation holds. */
static int devices(const struct sidecar *d, unsigned gpus, struct buf *b)
{
	for (unsigned i = 0; i < gpus; i++)
		if (buf_appendf(b, "- path: /dev/nvidia%u\n", i))
			return -1;
	if (buf_appends(b, "- path: /dev/nvidiactl\n- path: /dev/nvidia-uvm\n"))
		return -1;
	return d->dmabuf ? buf_appends(b, "- path: /dev/dmabuf_import_helper\n")
			 : 0;
}

static json_t *daemon_container(const struct sidecar *d)
{
	json_t *c = json_pack("{s:s, s:s, s:s, s:o, s:{s:{s:o}}, s:[], s:[]}",
			      "name", d->name, "image", d->image,
			      "restartPolicy", "Always", "command",
			      string_array(d->command), "securityContext",
			      "capabilities", "add", string_array(d->caps),
			      "env", "volumeMounts");

	if (c && (add_mounts(c, d->mounts) || add_env(c, libs_env))) {
		json_decref(c);
		return NULL;
	}
	return c;
}

static int annotate(const struct plumbing *p, unsigned gpus,
		    json_t *annotations)
{
	char *ifs = interfaces(p->networks), key[128];
	struct buf b;
	int bad;

	if (!ifs)
		return -1;
	bad = json_object_set_new(annotations,
				  "networking.gke.io/default-interface",
				  json_string("eth0"));
	bad |= json_object_set_new(annotations, "networking.gke.io/interfaces",
				   json_string(ifs));
	free(ifs);
	if (bad || !p->sidecar)
		return bad;
	buf_init(&b);
	snprintf(key, sizeof(key), "devices.gke.io/container.%s",
		 p->sidecar->name);
	bad = devices(p->sidecar, gpus, &b) ||
	      json_object_set_new(annotations, key, json_string(b.data));
	buf_release(&b);
	return bad;
}

int gke_gpu_plumb(const struct gke_spec *s, json_t *annotations, json_t *pod,
		  json_t *worker)
{
	const struct plumbing *p = plumbing_of(s->acc.net);
	json_t *volumes = json_object_get(pod, "volumes");
	int bad;

	/* Every family: NCCL's shared memory wants more than the
	 * runtime's 64 MB /dev/shm. */
	bad = json_array_append_new(volumes,
				    json_pack("{s:s, s:{s:s}}", "name", "dshm",
					      "emptyDir", "medium", "Memory"));
	bad |= add_mounts(worker, (const struct mount[]){ { "dshm", "/dev/shm" },
							  { NULL, NULL } });
	for (const struct volume *v = p->volumes; !bad && v->name; v++)
		bad |= json_array_append_new(
			volumes, json_pack("{s:s, s:{s:s}}", "name", v->name,
					   "hostPath", "path", v->host_path));
	bad |= add_mounts(worker, p->mounts) || add_env(worker, p->env);
	if (!bad && p->networks)
		bad |= annotate(p, s->acc.gpus_per_host, annotations);
	if (!bad && p->sidecar)
		bad |= json_array_append_new(json_object_get(pod,
							     "initContainers"),
					     daemon_container(p->sidecar));
	return bad ? -1 : 0;
}
