/*
 * tests/supervisor/shipper_check.h: what the shipper's tests
 * (test_shipper*.c) share: the fixture (a temporary root, the GCS fake),
 * a trainer simulated by the test, and waits on the shipper's state.
 * Failures are Criterion assertions.
 */
#ifndef SLICECTL_TESTS_SUPERVISOR_SHIPPER_CHECK_H
#define SLICECTL_TESTS_SUPERVISOR_SHIPPER_CHECK_H

#include "supervisor/shipper.h"
#include "checkpoint/checkpoint.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATHLEN 2048
#define KiB 1024u
#define MiB (1024u * 1024u)
/* A fault rule: every request fails with 503 until clear_faults. */
#define OUTAGE "{\"action\": \"status\", \"status\": 503, \"times\": -1}"

typedef bool (*state_pred)(const struct shipper_state *st, int64_t arg);

extern char root[1024];
extern char ckpt_dir[PATHLEN], spool_dir[PATHLEN];
extern char file_url[PATHLEN];
extern struct fake_gcs fake;
extern bool fake_up;

void setup(void);
void teardown(void);

bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void start_fake(void);
void faults(const char *rules);
void clear_faults(void);
/* Bytes that do not compress, the same for the same seed, so a test can
 * write a step again to compare it with what was restored. */
void write_random(const char *path, size_t len, uint64_t seed);
void touch(const char *path);
/* The trainer's side: dir/step-N/ with bytes of data, not yet done. */
void write_step_dir(const char *dir, uint64_t step, size_t bytes);
void mark_done(const char *dir, uint64_t step);
void make_step(const char *dir, uint64_t step, size_t bytes);
/* Entries of a directory other than . and .. */
unsigned count_entries(const char *dir);
void config_init(struct shipper_config *c, const char *url);
struct shipper *start(const struct shipper_config *c);
/* Polls until pred holds, or fails the test after ms. */
struct shipper_state wait_state(struct shipper *s, state_pred pred,
				int64_t arg, unsigned ms,
				const char *what);
bool committed_is(const struct shipper_state *st, int64_t n);
bool uploaded_is(const struct shipper_state *st, int64_t n);
bool done_is(const struct shipper_state *st, int64_t n);
bool waiting_is(const struct shipper_state *st, int64_t n);
bool failures_at_least(const struct shipper_state *st, int64_t n);
void wait_spool_entries(unsigned n, unsigned ms);
struct store *open_store(const char *url);
/* The steps in the store as "N:committed:parts N:...". */
void describe_steps(struct store *st, char *out, size_t len);
void expect_steps(const char *url, const char *want);
unsigned drain(int fd);
/* The GCS fake, holding back the start of the first upload session for
 * stall seconds, and a shipper at url that has taken step (bytes of data)
 * and has been on its upload for 300 ms. */
struct shipper *start_stalled(const char *url, double stall,
			      uint64_t step, size_t bytes);
/* The GCS fake failing every request, and a shipper at url that has
 * step 1 to upload. */
struct shipper *start_in_outage(const char *url);
/* Steps 1 to n, each committed before the next is written. */
void commit_each(struct shipper *s, uint64_t n);
void stop_within(struct shipper *s, unsigned ms);

#endif
