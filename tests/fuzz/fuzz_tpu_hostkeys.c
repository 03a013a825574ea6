/*
 * fuzz_tpu_hostkeys.c: the workers' SSH host keys as the TPU API's
 * getGuestAttributes sends them (tpu_hostkeys_parse, cloud/tpu_parse.c).
 * They become known_hosts lines, so every key kept must be one line
 * "TYPE BASE64" of a type known_hosts carries.
 */
#include "fuzz.h"

#include "cloud/tpu.h"

#include <stdlib.h>
#include <string.h>

static bool key_line(const char *line)
{
	const char *sp = strchr(line, ' ');
	char type[32];
	size_t n;

	if (!sp || (size_t)(sp - line) >= sizeof(type))
		return false;
	memcpy(type, line, (size_t)(sp - line));
	type[sp - line] = '\0';
	n = strspn(sp + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			   "0123456789+/=");
	return tpu_ssh_key_type(type) && n > 0 && !sp[1 + n];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpu_hostkeys *h;
	struct err e;
	size_t n;

	if (tpu_hostkeys_parse((const char *)data, size, &h, &n, &e)) {
		FUZZ_ASSERT(e.msg[0] && !h && !n);
		return 0;
	}
	FUZZ_ASSERT(!n || h);
	for (size_t w = 0; w < n; w++)
		for (size_t i = 0; i < h[w].keys.n; i++)
			FUZZ_ASSERT(key_line(h[w].keys.v[i]));
	tpu_hostkeys_release(h, n);
	return 0;
}
