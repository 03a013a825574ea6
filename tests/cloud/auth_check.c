/* tests/cloud/auth_check.c: see auth_check.h. */
#include "tests/cloud/auth_check.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

char auth_dir[] = "/tmp/slicectl-auth-XXXXXX";

static void clean_env(void)
{
	unsetenv("SLICECTL_ACCESS_TOKEN");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TOKEN_URI");
	unsetenv("STORAGE_EMULATOR_HOST");
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("SLICECTL_STS_ENDPOINT");
	unsetenv("SLICECTL_IAM_CREDENTIALS_ENDPOINT");
	/* No gcloud ADC file, and no metadata server. */
	setenv("HOME", auth_dir, 1);
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
}

void auth_setup(void)
{
	cr_assert(mkdtemp(auth_dir));
	clean_env();
}

void auth_teardown(void)
{
	cr_assert_eq(rm_rf(auth_dir), 0);
}

void fast_client(struct http_client *c)
{
	struct http_policy p;
	struct err e;

	http_policy_default(&p);
	p.backoff_base_ms = 5;
	p.backoff_max_ms = 20;
	p.stall_ms = 2000;
	p.connect_timeout_ms = 2000;
	cr_assert_eq(http_client_init(c, &p, &e), 0);
}

void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

char *make_key(const char *name)
{
	char cmd[512], path[300];
	size_t len;
	FILE *f;
	char *pem;

	snprintf(cmd, sizeof(cmd),
		 "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 "
		 "-out '%s/%s.pem' 2>/dev/null && openssl pkey -in '%s/%s.pem' "
		 "-pubout -out '%s/%s.pub.pem'", auth_dir, name, auth_dir, name, auth_dir,
		 name);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/%s.pem", auth_dir, name);
	f = fopen(path, "r");
	cr_assert(f);
	pem = calloc(1, 8192);
	len = fread(pem, 1, 8191, f);
	fclose(f);
	cr_assert_gt(len, 100);
	return pem;
}
