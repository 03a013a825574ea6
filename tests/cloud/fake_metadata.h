/*
 * tests/cloud/fake_metadata.h: starts tests/fakes/metadata_fake.py (the
 * GCE metadata server, one port per TPU VM worker) on loopback for a test,
 * talks to its /_fake control endpoints, and stops it by pid. A metadata
 * fake is a fake_server (fake_server.h) running that script; f.base and
 * f.port are worker 0's. Point a client at worker W with
 * GCE_METADATA_HOST=127.0.0.1:fake_metadata_port(&f, W). The fake's
 * values, control endpoints, config and fault rules are described at the
 * top of tests/fakes/metadata_fake.py.
 */
#ifndef SLICECTL_TESTS_FAKE_METADATA_H
#define SLICECTL_TESTS_FAKE_METADATA_H

#include "common/common.h"
#include "tests/cloud/fake_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* struct fake_metadata is struct fake_server: proc (pid), port, base. */
#define fake_metadata fake_server

/* fake_metadata_set's worker for every worker at once. */
#define FAKE_METADATA_ALL_WORKERS (-1)

/* extra: more arguments for the fake (NULL-terminated, may be NULL),
 * e.g. "--workers", "4". Returns 0, or -1 after printing why. */
static inline int fake_metadata_start(struct fake_metadata *f,
				      const char *const *extra)
{
	return fake_server_start(f, "tests/fakes/metadata_fake.py", extra);
}

static inline void fake_metadata_stop(struct fake_metadata *f)
{
	fake_server_stop(f);
}

/* The port of worker (0 first, from the fake's port file); 0 when the
 * fake has no such worker. */
static inline unsigned fake_metadata_port(struct fake_metadata *f,
					  unsigned worker)
{
	char path[HARNESS_PATH + 8];
	unsigned port = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%.*s/port", HARNESS_PATH, f->proc.dir);
	fp = fopen(path, "r");
	if (!fp)
		return 0;
	for (unsigned i = 0; i <= worker; i++) {
		if (fscanf(fp, "%u", &port) != 1) {
			port = 0;
			break;
		}
	}
	fclose(fp);
	return port;
}

/* One request to worker 0's port (control endpoints need no
 * Metadata-Flavor), e.g. ("GET", "/_fake/requests", NULL, &out); *out
 * (may be NULL) gets the answer's body (malloc'd). Returns the HTTP
 * status, or -1. */
static inline long fake_metadata_call(struct fake_metadata *f,
				      const char *method, const char *path,
				      const char *body, char **out)
{
	return fake_server_call(f, method, path, body, out);
}

/* Adds fault rules (a JSON object or list), e.g. {"path":
 * "wait_for_change", "status": 503, "count": 2, "worker": 1}. Returns 0
 * or -1. */
static inline int fake_metadata_faults(struct fake_metadata *f,
				       const char *rules)
{
	return fake_server_faults(f, rules);
}

/* Merges settings into the fake's config (POST /_fake/config), e.g.
 * {"tpu_env": {"MEGASCALE_NUM_SLICES": "2"}}. Returns 0 or -1. */
static inline int fake_metadata_config(struct fake_metadata *f,
				       const char *json)
{
	return fake_server_post(f, "/_fake/config", json);
}

/* Sets path (e.g. "instance/preempted") to value on worker, or on every
 * worker with FAKE_METADATA_ALL_WORKERS; value NULL deletes it. Wakes the
 * path's long polls. Returns 0 or -1. */
static inline int fake_metadata_set(struct fake_metadata *f, int worker,
				    const char *path, const char *value)
{
	struct buf body;
	int rc = -1;

	buf_init(&body);
	if (worker < 0 ? buf_appends(&body, "{\"worker\": \"all\"")
		       : buf_appendf(&body, "{\"worker\": %d", worker))
		goto out;
	if (buf_appends(&body, ", \"path\": ") ||
	    json_append_string(&body, path, strlen(path)) ||
	    buf_appends(&body, ", \"value\": "))
		goto out;
	if (value ? json_append_string(&body, value, strlen(value))
		  : buf_appends(&body, "null"))
		goto out;
	if (buf_appends(&body, "}"))
		goto out;
	rc = fake_server_post(f, "/_fake/set", body.data);
out:
	buf_release(&body);
	return rc;
}

#endif
