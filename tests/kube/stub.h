/*
 * tests/kube/stub.h: what the kube/ tests share: kube_stub.py started with
 * a script (over TLS when asked, with a CA made by the openssl CLI), its
 * request log, and scratch files.
 */
#ifndef SLICECTL_TESTS_KUBE_STUB_H
#define SLICECTL_TESTS_KUBE_STUB_H

#include "kube/kube.h"
#include "tests/cloud/fake_server.h"

struct kstub {
	struct fake_server f;
	char dir[256];     /* scratch: script, log, certificates */
	char url[96];      /* "http(s)://127.0.0.1:PORT" */
};

/* A scratch directory (removed with everything in it by scratch_rm). */
void scratch_make(char *dir, size_t len);
void scratch_rm(const char *dir);
/* Writes text to dir/name; mode 0755 when exec. Returns the path
 * (static buffer, valid until the next call). */
const char *scratch_write(const char *dir, const char *name,
			  const char *text, bool exec);
/* The file's text (free it), or NULL. */
char *slurp(const char *path);

/* A stand-in certificate for kubeconfigs, as text and as base64. */
#define CA_TEXT "-----BEGIN CERTIFICATE-----\nCA\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg=="

/* For kubeconfig tests: a scratch directory that is also HOME, with
 * KUBECONFIG unset. */
void kubeconfig_scratch(char *dir, size_t len);
/* Writes text to dir/config and loads it (kube_config_load). */
int kubeconfig_load(const char *dir, const char *text, const char *context,
		    struct kube_config *c, struct err *e);
/* Asserts that loading text is KUBE_ECONFIG with a message holding want. */
void kubeconfig_refused(const char *dir, const char *text, const char *want);

/* In dir: ca.pem/ca.key, srv.pem/srv.key (127.0.0.1, signed by ca),
 * client.pem/client.key (signed by ca), other.pem (an unrelated CA). */
void tls_make(const char *dir);

/* Starts the stub with script (JSON). tls: serve https with dir's
 * srv.pem (tls_make first); client_ca: also demand a client certificate
 * signed by it. */
void kstub_start(struct kstub *s, const char *script, bool tls,
		 bool client_ca);
void kstub_stop(struct kstub *s);
/* The log: one JSON object per request, as an array (json_decref it). */
json_t *kstub_requests(struct kstub *s);

/* A plain config for the stub: server, token "tok". */
void stub_config(const struct kstub *s, struct kube_config *c);
/* Starts the stub (plain HTTP) and a client with stub_config. */
struct kube_client *kstub_client(struct kstub *s, const char *script);

#endif
