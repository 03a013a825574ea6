/*
 * fuzz_kubeconfig.c: a kubeconfig file (kube/config.c over kube/yaml.c,
 * libyaml's events built into a tree). What loads has an http(s) server;
 * what is refused is KUBE_ECONFIG with a message. The YAML tree, aliases
 * shared in it, is also written out whole, and the alias bounds (100000
 * values, 4 MiB) keep that text within reach of the input's size.
 */
#include "fuzz.h"

#include "kube/kube.h"
#include "kube/yaml.h"

#include <stdlib.h>
#include <string.h>

/* A value's JSON: at most 6 bytes a byte (\u00XX) and 8 more a value
 * ("":"", or null,). */
#define JSON_BOUND(bytes, values) (6 * (bytes) + 8 * (values))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_config c;
	struct err e;
	json_t *doc;
	int rc;

	err_init(&e);
	rc = yaml_parse((const char *)data, size, &doc, &e);
	if (rc == 0) {
		char *text = json_dumps(doc, JSON_ENCODE_ANY | JSON_COMPACT);

		FUZZ_ASSERT(text);
		FUZZ_ASSERT(strlen(text) <= JSON_BOUND(size + (4u << 20),
						       size + 1 + 100000));
		free(text);
		json_decref(doc);
	} else {
		FUZZ_ASSERT(rc == KUBE_ECONFIG && e.msg[0] && !doc);
	}
	fuzz_write("config", data, size);
	err_init(&e);
	rc = kube_config_load(fuzz_path("config"), NULL, &c, &e);
	if (rc) {
		FUZZ_ASSERT(rc == KUBE_ECONFIG && e.msg[0] && !c.server);
		return 0;
	}
	FUZZ_ASSERT(c.server && c.context && c.origin);
	FUZZ_ASSERT(!strncmp(c.server, "https://", 8) ||
		    !strncmp(c.server, "http://", 7));
	kube_config_release(&c);
	return 0;
}
