/* tests/cloud/gcs_check.c: see gcs_check.h. */
#include "tests/cloud/gcs_check.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

void gcs_check_clean_env(void)
{
	unsetenv("SLICECTL_ACCESS_TOKEN");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TOKEN_URI");
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
	setenv("HOME", "/nonexistent", 1);
}

void gcs_check_policy(struct http_policy *p)
{
	http_policy_default(p);
	p->backoff_base_ms = 5;
	p->backoff_max_ms = 50;
	p->max_attempts = 6;
	p->stall_ms = 1000;
	p->connect_timeout_ms = 2000;
}

unsigned char *gcs_check_pattern(size_t len, unsigned seed)
{
	unsigned char *d = malloc(len ? len : 1);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	cr_assert(d);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		d[i] = (unsigned char)x;
	}
	return d;
}

int gcs_check_to_buf(void *ud, const void *data, size_t len, struct err *e)
{
	(void)e;
	return buf_append(ud, data, len) ? CLOUD_ENOMEM : 0;
}

void gcs_check_object(struct gcs_client *c, const char *bucket,
		      const char *name, const void *want, size_t len)
{
	struct buf got;
	struct store_object o;
	struct err e;

	buf_init(&got);
	cr_assert_eq(gcs_get(c, bucket, name, 0, gcs_check_to_buf, &got, &o,
			     &e), 0, "%s", e.msg);
	cr_assert_eq(got.len, len);
	cr_assert_eq(o.size, len);
	cr_assert(len == 0 || memcmp(got.data, want, len) == 0,
		  "%s differs", name);
	cr_assert_eq(o.crc32c, crc32c_update(0, want, len));
	store_object_release(&o);
	buf_release(&got);
}

void gcs_check_fault(struct fake_gcs *f, const char *rules)
{
	cr_assert_eq(fake_gcs_faults(f, rules), 0, "%s", rules);
}

void gcs_check_no_faults_left(struct fake_gcs *f)
{
	char *log;

	cr_assert_eq(fake_gcs_call(f, "GET", "/_fake/faults", NULL, &log),
		     200);
	cr_assert(!strstr(log, "\"times\": 1"), "unused fault: %s", log);
	free(log);
	cr_assert_eq(fake_gcs_call(f, "DELETE", "/_fake/faults", NULL, NULL),
		     200);
}

json_t *gcs_check_requests(struct fake_gcs *f)
{
	char *log;
	json_t *arr;

	cr_assert_eq(fake_gcs_call(f, "GET", "/_fake/requests", NULL, &log),
		     200);
	arr = json_loads(log, 0, NULL);
	cr_assert(json_is_array(arr));
	free(log);
	return arr;
}
