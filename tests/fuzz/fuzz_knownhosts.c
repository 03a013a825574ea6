/*
 * fuzz_knownhosts.c: known_hosts files (ssh/knownhosts.c), read with
 * knownhosts_open as slicectl reads ~/.ssh/known_hosts, then asked about
 * a few hosts as a fan-out asks. Under StrictHostKeyChecking=yes a check
 * answers known or refused and never writes the file.
 */
#include "fuzz.h"

#include "ssh/knownhosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libssh2.h>

/* The key every host presents: an ed25519 blob whose point is
 * 0x01..0x20, "AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYX
 * GBkaGxwdHh8g" in a known_hosts line (the seeds use it). */
static const unsigned char presented[4 + 11 + 4 + 32] = {
	0, 0, 0, 11, 's', 's', 'h', '-', 'e', 'd', '2', '5', '5', '1', '9',
	0, 0, 0, 32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};

static const struct {
	const char *host;
	unsigned port;
} hosts[] = {
	{ "10.130.0.2", 22 },
	{ "10.130.0.3", 2222 },
	{ "Node-1.Example.COM", 0 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	struct knownhosts k;
	struct stat st;
	struct err e;
	char name[KNOWNHOSTS_NAME_CAP];
	static bool ready;

	/* knownhosts_open asks libssh2 for its host key methods; one
	 * reference held for the run spares it a crypto setup per input. */
	if (!ready && libssh2_init(0)) {
		fprintf(stderr, "fuzz: libssh2_init failed\n");
		abort();
	}
	ready = true;
	fuzz_write("known_hosts", data, size);
	path = fuzz_path("known_hosts");
	if (knownhosts_open(&k, path, FANOUT_HOSTKEY_YES, &e)) {
		FUZZ_ASSERT(e.msg[0]);
		knownhosts_close(&k);
		return 0;
	}
	for (size_t h = 0; h < sizeof(hosts) / sizeof(*hosts); h++) {
		const char *methods =
			knownhosts_methods(&k, hosts[h].host, hosts[h].port);
		int rc = knownhosts_check(&k, hosts[h].host, hosts[h].port,
					  (const char *)presented,
					  sizeof(presented),
					  LIBSSH2_HOSTKEY_TYPE_ED25519, &e);

		FUZZ_ASSERT(methods && *methods);
		FUZZ_ASSERT(rc == 0 || rc == SSH_EHOSTKEY);
		FUZZ_ASSERT(!knownhosts_name(hosts[h].host, hosts[h].port,
					     name, sizeof(name), &e));
		for (size_t i = 0; i < k.n; i++)
			FUZZ_ASSERT(knownhosts_entry_line(&k, i) >= 1 &&
				    knownhosts_entry_is(&k, i, name) >= 0);
	}
	knownhosts_close(&k);
	FUZZ_ASSERT(stat(path, &st) == 0 && (size_t)st.st_size == size);
	return 0;
}
