/*
 * kube/kube.h: a Kubernetes API client in C, over libcurl and Jansson.
 * It knows where a cluster is (a kubeconfig's current or named context:
 * server, CA, bearer token, client certificate, exec credential plugins
 * such as gke-gcloud-auth-plugin; or an endpoint and CA handed over by
 * the GKE API) and makes the requests slicectl needs (create, get, list,
 * delete, watch), keeping the API server's own Status message and adding
 * a hint a user can act on. It depends on common/ and on cloud/'s HTTP
 * transport (docs/DESIGN.md).
 */
#ifndef SLICECTL_KUBE_H
#define SLICECTL_KUBE_H

#include "common/common.h"

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

enum kube_error {
	KUBE_ENOMEM = COMMON_ENOMEM,
	KUBE_EINVAL = COMMON_EINVAL,
	KUBE_EIO = COMMON_EIO,
	KUBE_ECONFIG = 50,  /* no usable kubeconfig, context or credential */
	KUBE_ENETWORK,      /* no answer (connect, TLS, stall) after retries */
	KUBE_EAUTH,         /* 401 */
	KUBE_EFORBIDDEN,    /* 403: the message names the verb and resource */
	KUBE_ENOTFOUND,     /* 404 (the hint says what is likely missing) */
	KUBE_ECONFLICT,     /* 409: AlreadyExists or Conflict */
	KUBE_EINVALID,      /* 422: the Status message names the fields */
	KUBE_EHTTP,         /* any other error status */
	KUBE_ECORRUPT,      /* malformed JSON from the server */
	KUBE_EABORTED,      /* a watch callback asked to stop */
};

/* Where a cluster is and how to authenticate to it. */
struct kube_config {
	char *server;          /* "https://1.2.3.4" or "http://127.0.0.1:P" */
	char *ca_pem;          /* NULL: the system's CAs */
	bool insecure;         /* insecure-skip-tls-verify */
	char *token;           /* bearer token, static or from a plugin */
	time_t token_expiry;   /* 0: none; a plugin is run again after it */
	char *cert_pem;        /* client certificate and key, or NULL */
	char *key_pem;
	char *namespace;       /* the context's namespace, or NULL */
	char *context;         /* the context used, or NULL */
	struct strlist exec_argv; /* exec plugin: command and args, or empty */
	struct strlist exec_env;  /* its extra "NAME=VALUE" */
	char *exec_api_version;   /* client.authentication.k8s.io/v1beta1 */
	char *exec_install_hint;  /* its installHint, or NULL */
	bool exec_cluster_info;   /* provideClusterInfo */
	char *origin;          /* for messages: "kubeconfig F (user U)" */
};

void kube_config_init(struct kube_config *c);
void kube_config_release(struct kube_config *c);

/* A kubeconfig: path NULL means $KUBECONFIG (its files merged as kubectl
 * merges them: missing ones skipped, the first current-context and the
 * first entry of each name win) and else ~/.kube/config; context NULL
 * means its current-context. Data fields and file paths (relative to the
 * kubeconfig) are both read; what slicectl cannot honour (auth-provider,
 * basic auth, impersonation, proxy-url, tls-server-name) and YAML that
 * cannot be read are KUBE_ECONFIG naming the file and line or field. The
 * exec plugin is not run here. */
int kube_config_load(const char *path, const char *context,
		     struct kube_config *out, struct err *e);

/* The GKE API's view of a cluster: endpoint ("1.2.3.4" or a host name),
 * masterAuth.clusterCaCertificate (base64 of a PEM) and an OAuth access
 * token with the cloud-platform scope. */
int kube_config_from_endpoint(const char *endpoint, const char *ca_base64,
			      const char *token, struct kube_config *out,
			      struct err *e);

/* Runs c's exec plugin (with KUBERNETES_EXEC_INFO, stdin closed, a
 * bounded time) and takes the ExecCredential it prints: token,
 * token_expiry (0 when it gives none) or a client certificate and key.
 * A missing command is KUBE_ECONFIG with the plugin's installHint; a
 * failing one, with the end of what it wrote to stderr. The client calls
 * this itself when it has no credential yet, when the token is within
 * 10 s of expiring, and once after a 401. */
int kube_exec_credential(struct kube_config *c, struct err *e);

struct kube_client;

int kube_client_new(const struct kube_config *c, struct kube_client **out,
		    struct err *e);
void kube_client_free(struct kube_client *k);

/*
 * Paths are the API's own, with the query where one is wanted:
 * "/apis/jobset.x-k8s.io/v1alpha2/namespaces/NS/jobsets",
 * "/api/v1/namespaces/NS/pods". Transient failures (429 with
 * Retry-After, 5xx, dropped connections and stalls) are retried with
 * backoff, at most 8 attempts within 2 minutes (creates too: a create
 * that then meets 409 says an earlier attempt may have made it); other
 * statuses become the kube_error above, with e holding "METHOD PATH:
 * STATUS REASON: the server's message; hint" (the query left out).
 */

/* POST with fieldValidation=Strict and fieldManager=slicectl (dryRun=All
 * when dry_run). *out (may be NULL) is the object as created. */
int kube_create(struct kube_client *k, const char *collection, json_t *obj,
		bool dry_run, json_t **out, struct err *e);
int kube_get(struct kube_client *k, const char *path, json_t **out,
	     struct err *e);
/* label_selector may be NULL. *out is the List object. */
int kube_list(struct kube_client *k, const char *collection,
	      const char *label_selector, json_t **out, struct err *e);
/* propagation: "Foreground", "Background" or NULL (the server's). A
 * missing object is KUBE_ENOTFOUND. */
int kube_delete(struct kube_client *k, const char *path,
		const char *propagation, struct err *e);

/* Called for each watch event (type "ADDED", "MODIFIED", "DELETED");
 * object is borrowed (json_incref it to keep it). A non-zero return ends
 * the watch and is returned from kube_watch. */
typedef int (*kube_watch_fn)(void *ud, const char *type, json_t *object);

/* Lists, hands every item to fn as "ADDED", then watches from the list's
 * resourceVersion until fn returns non-zero or timeout_ms passes (then 0;
 * timeout_ms 0: no limit); a dropped stream is resumed from the last
 * resourceVersion seen (bookmarks included), and a 410 Gone relists,
 * handing every item over as "ADDED" again: fn must take a repeat as a
 * refresh. */
int kube_watch(struct kube_client *k, const char *collection,
	       const char *label_selector, unsigned timeout_ms,
	       kube_watch_fn fn, void *ud, struct err *e);

/* Any other request: *status is the HTTP status, *out the JSON answer
 * (NULL when the body is empty). Errors as above. */
int kube_request(struct kube_client *k, const char *method, const char *path,
		 json_t *body, long *status, json_t **out, struct err *e);

#endif
