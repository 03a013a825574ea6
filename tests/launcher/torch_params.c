/*
 * torch_params.c: see torch_params.h.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/torch_params.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

const char *torch_python(void)
{
	static const char *const candidates[] = { "/usr/bin/python3",
						  "python3" };

	for (size_t i = 0; i < 2; i++)
		if (!sh("%s -c 'import torch.distributed' >/dev/null 2>&1",
			candidates[i]))
			return candidates[i];
	cr_skip_test("SKIPPED: neither /usr/bin/python3 nor python3 on PATH "
		     "imports torch (install python3-torch: scripts/deps)");
	return NULL;
}

char *torch_final_params(const char *bucket, const char *run,
			 unsigned slices, unsigned workers, unsigned procs)
{
	char *want = NULL;

	for (unsigned p = 0; p < slices * workers; p++) {
		char worker[24];
		struct run_result r;
		unsigned lines = 0;

		snprintf(worker, sizeof(worker), "%u/%u", p / workers,
			 p % workers);
		cr_assert_eq(run_slicectl(&r, (const char *const[]){
				"logs", run, "--worker", worker, "--bucket",
				bucket, NULL }, NULL), 0);
		cr_assert_eq(r.status, 0, "logs %s: %s", worker, r.err);
		for (const char *at = r.out;
		     (at = strstr(at, "final params: ")); lines++) {
			at += strlen("final params: ");
			/* The digest alone (SHA-256, 64 hex digits):
			 * torchrun's processes share one output, and another's
			 * line may follow it on the same line (fresh-check at
			 * 73ffadc: "...8e75step 100 loss 0.192049", or
			 * "...8e75final params: ..."). */
			cr_assert_geq(strspn(at, "0123456789abcdef"), 64,
				      "%s worker %s: %.80s", run, worker, at);
			if (!want)
				want = strndup(at, 64);
			cr_assert(!strncmp(at, want, strlen(want)),
				  "%s worker %s: %.64s, not %s", run, worker,
				  at, want);
		}
		if (lines != procs) {
			struct run_result ev;

			run_slicectl(&ev, (const char *const[]){
				"events", run, "--bucket", bucket, NULL },
				     NULL);
			cr_assert_fail("%s worker %s logged %u final params, "
				       "not %u:\n%s\nthe run's events:\n%s",
				       run, worker, lines, procs, r.out,
				       ev.out);
		}
		run_result_release(&r);
	}
	return want;
}

/* Whether TCP port p binds on 127.0.0.1 now. */
static bool port_free(unsigned p)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)p) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = !bind(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return ok;
}

/* The lock on the reservation file of base in the shared folder dir, as
 * a descriptor that holds it until closed, or -1 when another process
 * has it. */
static int reserve(const char *dir, unsigned base)
{
	char path[HARNESS_PATH + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/%u", dir, base);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	if (!flock(fd, LOCK_EX | LOCK_NB))
		return fd;
	close(fd);
	return -1;
}

const char *torch_rendezvous_base(void)
{
	static char text[8];
	char dir[HARNESS_PATH];
	const char *build = getenv("SLICECTL_BUILDDIR");

	/* Every test has a PID namespace and a /tmp of its own (the
	 * reaper), but they share loopback: the ranges are reserved in the
	 * build folder, which they share. */
	snprintf(dir, sizeof(dir), "%s/test-ports", build ? build : ".");
	if (mkdir(dir, 0755) && errno != EEXIST)
		cr_assert_fail("%s: %s", dir, strerror(errno));
	for (unsigned base = 30000; base < 32752; base += 16) {
		unsigned k = 0;
		int held = reserve(dir, base);

		if (held < 0)
			continue;
		while (k < 16 && port_free(base + k))
			k++;
		if (k == 16) {
			/* held stays open: the reservation lasts as long
			 * as this process. */
			snprintf(text, sizeof(text), "%u", base);
			return text;
		}
		close(held);
	}
	cr_assert_fail("no 16 free and unreserved ports on 127.0.0.1 from "
		       "30000 to 32767 (reservations: %s)", dir);
	return NULL;
}
