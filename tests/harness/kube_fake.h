/*
 * tests/harness/kube_fake.h: starts tests/fakes/kube_fake.py (the
 * Kubernetes API fake: JobSet, Kueue, pods run as local processes, GKE's
 * container API) on loopback for a test with fake_start, calls it, and
 * stops it by pid.
 * The fake's own header documents its API, its controllers and its
 * /_fake/ control endpoints (evict, lose-node, forbid, faults, ...).
 */
#ifndef SLICECTL_TESTS_KUBE_FAKE_H
#define SLICECTL_TESTS_KUBE_FAKE_H

#include "tests/harness/harness.h"

#include <stdbool.h>

struct kube_fake_options {
	bool tls;                 /* HTTPS API with a CA of its own (ca) */
	const char *token;        /* required bearer token, or NULL */
	const char *const *extra; /* more arguments, NULL-terminated, or NULL
				   * (e.g. "--without-group", "jobset.x-k8s.io",
				   * "--pass-env", "NAME", "--cluster", "P/L/C") */
};

struct kube_fake {
	struct test_fake proc;    /* the fake's process (fake_start) */
	unsigned port;            /* the Kubernetes API (HTTPS with tls) */
	unsigned plain_port;      /* plain HTTP: the same API, GKE's
				   * container API and /_fake/ */
	char server[64];          /* "https://127.0.0.1:PORT" (http: no tls) */
	char control[64];         /* "http://127.0.0.1:PLAIN_PORT": the base
				   * for SLICECTL_CONTAINER_ENDPOINT too */
	char token[128];          /* the required token, or "" */
	char dir[HARNESS_PATH];   /* private temp dir, removed by stop */
	char state[HARNESS_PATH]; /* the fake's state: pods' volumes, logs */
	char ca[HARNESS_PATH];    /* the CA's PEM file with tls, else "" */
};

/* Starts the fake (o may be NULL: plain HTTP, no token) and returns once
 * it listens: 0, or -1 after printing why. The fake gets SIGTERM if the
 * test process dies. */
int kube_fake_start(struct kube_fake *f, const struct kube_fake_options *o);
/* SIGTERM by pid (the fake then kills every pod's process tree), waits
 * for it, removes the directory. */
void kube_fake_stop(struct kube_fake *f);
/* One request on the plain port (any path: API, container API or
 * /_fake/), with f->token when set; a PATCH body is a merge patch. *out
 * (may be NULL) gets the answer's body, malloc'd. Returns the HTTP
 * status, or -1. */
long kube_fake_call(struct kube_fake *f, const char *method,
		    const char *path, const char *body, char **out);
/* Writes a kubeconfig for the API: server, CA (certificate-authority-data)
 * with tls, token (may be NULL), namespace (may be NULL), current context
 * "kube-fake". Returns 0 or -1 after printing why. */
int kube_fake_write_kubeconfig(const struct kube_fake *f, const char *path,
			       const char *token, const char *ns);

#endif
