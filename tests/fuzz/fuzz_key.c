/*
 * fuzz_key.c: private key files (ssh/key.c: OpenSSH and PEM), loaded with
 * key_load_file as --identity loads them. A key that loads has a public
 * blob key_from_blob reads back as the same type.
 */
#include "fuzz.h"

#include "ssh/key.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ssh_key k, pub;
	struct err e;
	char fp[KEY_FINGERPRINT_SIZE];

	fuzz_write("id_key", data, size);
	if (key_load_file(&k, fuzz_path("id_key"), &e)) {
		FUZZ_ASSERT(e.msg[0] && !k.pkey && !k.pub);
		return 0;
	}
	FUZZ_ASSERT(k.pkey && k.pub && k.pub_len);
	FUZZ_ASSERT(key_from_blob(&pub, k.pub, k.pub_len, &e) == 0);
	FUZZ_ASSERT(pub.type == k.type && pub.pub_len == k.pub_len);
	key_fingerprint(k.pub, k.pub_len, fp);
	FUZZ_ASSERT(!strncmp(fp, "SHA256:", 7));
	key_release(&pub);
	key_release(&k);
	return 0;
}
