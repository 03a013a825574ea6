/*
 * test_known_hosts_update.c: fanout_known_hosts_update replaces exactly
 * the named hosts' keys (plain, multi-name and hashed lines), keeps
 * everything else byte for byte, and never loses a concurrent writer's
 * hosts; the result then verifies the new keys and refuses the old.
 */
#include "ssh/knownhosts.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <libssh2.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Two well-formed ed25519 blobs (32 bytes of 0x11, and of 0x22). */
#define KEY_A "AAAAC3NzaC1lZDI1NTE5AAAAIBERERERERERERERERERERERERERERERERERERERERER"
#define KEY_B "AAAAC3NzaC1lZDI1NTE5AAAAICIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIi"

static char dir[256];
static char path[600];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/khu-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sub/dir/known_hosts", dir);
}

static void teardown(void)
{
	cr_assert_eq(rm_rf(dir), 0);
}

TestSuite(khu, .init = setup, .fini = teardown, .timeout = 60);

static char *slurp(void)
{
	FILE *f = fopen(path, "r");
	static char text[65536];
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return text;
}

static void spit(const char *text)
{
	char cmd[700];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/sub/dir'", dir);
	cr_assert_eq(system(cmd), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static int update1(const char *host, unsigned port, const char *key)
{
	char line[200];
	char *keys[] = { line };
	struct fanout_known_host h = { host, port, keys, 1 };
	struct err e;

	snprintf(line, sizeof(line), "ssh-ed25519 %s", key);
	err_init(&e);
	return fanout_known_hosts_update(path, &h, 1, &e);
}

/* "|1|salt|hash" for name, as ssh-keygen -H writes it. */
static void hashed(const char *name, char *out, size_t len)
{
	unsigned char salt[20], mac[20];
	unsigned char b64s[40], b64m[40];
	unsigned n = 0;

	memset(salt, 7, sizeof(salt));
	HMAC(EVP_sha1(), salt, sizeof(salt), (const unsigned char *)name,
	     strlen(name), mac, &n);
	EVP_EncodeBlock(b64s, salt, sizeof(salt));
	EVP_EncodeBlock(b64m, mac, sizeof(mac));
	snprintf(out, len, "|1|%s|%s", b64s, b64m);
}

static unsigned char *blob(const char *b64, size_t *len)
{
	static unsigned char out[128];

	/* 68 characters without padding: exactly 51 bytes. */
	*len = (size_t)EVP_DecodeBlock(out, (const unsigned char *)b64,
				       (int)strlen(b64));
	return out;
}

static int check(const char *host, unsigned port, const char *key)
{
	struct knownhosts k;
	struct err e;
	size_t len;
	unsigned char *b = blob(key, &len);
	int rc;

	err_init(&e);
	cr_assert_eq(knownhosts_open(&k, path, FANOUT_HOSTKEY_YES, &e), 0,
		     "%s", e.msg);
	rc = knownhosts_check(&k, host, port, (const char *)b, len,
			      LIBSSH2_HOSTKEY_TYPE_ED25519, &e);
	knownhosts_close(&k);
	return rc;
}

Test(khu, creates_the_file_and_its_directories_private)
{
	struct stat st;

	cr_assert_eq(update1("10.0.0.1", 22, KEY_A), 0);
	cr_assert_str_eq(slurp(), "10.0.0.1 ssh-ed25519 " KEY_A "\n");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(check("10.0.0.1", 22, KEY_A), 0);
}

Test(khu, replaces_only_the_named_hosts)
{
	char h[200], text[2048];

	hashed("[10.0.0.3]:2222", h, sizeof(h));
	snprintf(text, sizeof(text),
		 "# my comment\n"
		 "10.0.0.1 ssh-ed25519 " KEY_A "\n"
		 "10.0.0.2,[10.0.0.1]:2222,keep.example ssh-ed25519 " KEY_A "\n"
		 "%s ssh-ed25519 " KEY_A "\n"
		 "*.example ssh-ed25519 " KEY_A "\n"
		 "\n"
		 "@revoked 10.0.0.9 ssh-ed25519 " KEY_A "\n"
		 "10.0.0.4 ssh-ed25519 " KEY_A,
		 h);
	spit(text);
	{
		char a[200] = "ssh-ed25519 " KEY_B;
		char *keys[] = { a };
		struct fanout_known_host hosts[] = {
			{ "10.0.0.1", 2222, keys, 1 },
			{ "10.0.0.3", 2222, keys, 1 },
			{ "10.0.0.4", 0, keys, 1 },
		};
		struct err e;

		err_init(&e);
		cr_assert_eq(fanout_known_hosts_update(path, hosts, 3, &e), 0,
			     "%s", e.msg);
	}
	cr_assert_str_eq(slurp(),
			 "# my comment\n"
			 "10.0.0.1 ssh-ed25519 " KEY_A "\n"
			 "10.0.0.2,keep.example ssh-ed25519 " KEY_A "\n"
			 "*.example ssh-ed25519 " KEY_A "\n"
			 "\n"
			 "@revoked 10.0.0.9 ssh-ed25519 " KEY_A "\n"
			 "[10.0.0.1]:2222 ssh-ed25519 " KEY_B "\n"
			 "[10.0.0.3]:2222 ssh-ed25519 " KEY_B "\n"
			 "10.0.0.4 ssh-ed25519 " KEY_B "\n");
	cr_assert_eq(check("10.0.0.1", 2222, KEY_B), 0);
	cr_assert_eq(check("10.0.0.3", 2222, KEY_B), 0);
	cr_assert_eq(check("10.0.0.3", 2222, KEY_A), SSH_EHOSTKEY);
	cr_assert_eq(check("10.0.0.1", 22, KEY_A), 0);
}

Test(khu, refuses_malformed_keys_and_names)
{
	char bad1[] = "ssh-ed25519";
	char bad2[] = "ssh-ed25519 AAAA\nevil.example ssh-ed25519 AAAA";
	char good[] = "ssh-ed25519 " KEY_A;
	char *k1[] = { bad1 }, *k2[] = { bad2 }, *k3[] = { good };
	struct fanout_known_host h1 = { "10.0.0.1", 22, k1, 1 };
	struct fanout_known_host h2 = { "10.0.0.1", 22, k2, 1 };
	struct fanout_known_host h3 = { "bad,name", 22, k3, 1 };
	struct err e;

	err_init(&e);
	cr_assert_eq(fanout_known_hosts_update(path, &h1, 1, &e), SSH_EINVAL);
	cr_assert_eq(fanout_known_hosts_update(path, &h2, 1, &e), SSH_EINVAL);
	cr_assert_eq(fanout_known_hosts_update(path, &h3, 1, &e), SSH_EINVAL);
	cr_assert_eq(access(path, F_OK), -1, "nothing is written");
}

Test(khu, concurrent_updates_keep_every_host)
{
	enum { WRITERS = 8, EACH = 20 };
	pid_t pids[WRITERS];
	char *text;

	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		cr_assert_geq(pids[w], 0);
		if (pids[w] == 0) {
			for (int i = 0; i < EACH; i++) {
				char host[32];

				snprintf(host, sizeof(host), "10.%d.0.%d", w, i);
				if (update1(host, 22, KEY_A))
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int w = 0; w < WRITERS; w++) {
		int status;

		cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	text = slurp();
	for (int w = 0; w < WRITERS; w++)
		for (int i = 0; i < EACH; i++) {
			char line[64];

			snprintf(line, sizeof(line), "10.%d.0.%d ssh", w, i);
			cr_assert(strstr(text, line), "%s lost", line);
		}
}
