/*
 * slicectl push, end to end: one tree with awkward names, symlinks and
 * empty directories, unpacked on every host and compared byte for byte.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct test_sshd sshd;
static char tmp[HARNESS_PATH];
static char hosts[HARNESS_PATH + 32];
static char kh[HARNESS_PATH + 32];
static char src[HARNESS_PATH + 32];

#define NHOSTS 8

static void up(void)
{
	FILE *f;
	char addr[32];

	cr_assert_eq(sshd_start(&sshd, NULL), 0, "sshd did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "push"), 0);
	snprintf(hosts, sizeof(hosts), "%s/hosts", tmp);
	snprintf(kh, sizeof(kh), "%s/known_hosts", tmp);
	snprintf(src, sizeof(src), "%s/src", tmp);
	cr_assert_eq(sshd_write_known_hosts(&sshd, kh, 1, NHOSTS), 0);
	/* Every host is this machine: give each its own HOME, so that the
	 * same DEST "~/dest" lands in a different place per host. */
	f = fopen(hosts, "w");
	cr_assert_not_null(f);
	for (unsigned i = 1; i <= NHOSTS; i++) {
		loopback_addr(i, addr, sizeof(addr));
		fprintf(f, "%s@%s:%u HOME=%s/home%u\n", sshd.user, addr,
			sshd.port, sshd.shared, i);
	}
	fclose(f);
}

static void down(void)
{
	sshd_stop(&sshd);
	rm_rf(tmp);
}

TestSuite(push, .init = up, .fini = down, .timeout = 240);

/* Names, types, modes and link targets of a tree, one line each, sorted. */
static int listing(const char *dir, const char *out)
{
	return sh("cd '%s' && find . -printf '%%P|%%y|%%m|%%s|%%l\\n' | "
		  "grep -v '^|' | sort > '%s'", dir, out);
}

static void make_tree(void)
{
	cr_assert_eq(sh("set -e; mkdir -p '%s'; cd '%s'; "
			"mkdir -p 'a b/c d' empty/nested-empty deep/1/2/3/4/5/6/7; "
			"printf 'spaces\\n' > 'a b/c d/f i l e'; "
			"printf 'nl' > \"$(printf 'new\\nline')\"; "
			"printf q > \"it's \\\"quoted\\\"\"; "
			"printf d > -leading-dash; printf b > 'back\\\\slash'; "
			"printf u > 'ünïcödé-名前'; "
			"printf long > \"$(printf 'L%%.0s' $(seq 200))\"; "
			": > empty-file; "
			"head -c 3000000 /dev/urandom > deep/1/2/3/4/5/6/7/random.bin; "
			"printf '#!/bin/sh\\necho hi\\n' > run.sh; chmod 755 run.sh; "
			"chmod 600 -- -leading-dash; "
			"ln -s 'a b/c d' link-to-dir; ln -s nowhere dangling; "
			"ln -s ../run.sh deep/up-link", src, src), 0);
}

Test(push, tree_arrives_byte_for_byte_on_every_host)
{
	struct run_result r;
	char want[HARNESS_PATH + 16], got[HARNESS_PATH + 16];

	make_tree();
	snprintf(want, sizeof(want), "%s/want.txt", tmp);
	cr_assert_eq(listing(src, want), 0);
	const char *args[] = { "push", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, src, "~/dest", NULL };

	cr_assert_eq(run_slicectl(&r, args, NULL), 0);
	cr_assert_eq(r.status, 0, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "8 hosts in"), "%s", r.err);
	cr_assert(strstr(r.err, "SENT"), "%s", r.err);
	for (unsigned i = 1; i <= NHOSTS; i++) {
		char dest[HARNESS_PATH + 32];

		snprintf(dest, sizeof(dest), "%s/home%u/dest", sshd.shared, i);
		snprintf(got, sizeof(got), "%s/got%u.txt", tmp, i);
		cr_assert_eq(listing(dest, got), 0);
		cr_assert_eq(sh("diff '%s' '%s' >&2", want, got), 0,
			     "names, types, modes or links differ on host %u", i);
		cr_assert_eq(sh("diff -r --no-dereference '%s' '%s' >&2", src,
				dest), 0, "contents differ on host %u", i);
		cr_assert_eq(sh("! ls -a '%s' | grep -q slicectl-push", dest), 0,
			     "the temporary stream was left behind on host %u",
			     i);
	}
	run_result_release(&r);
}

Test(push, single_file_lands_in_dest)
{
	struct run_result r;
	char file[HARNESS_PATH + 16];

	snprintf(file, sizeof(file), "%s/model.bin", tmp);
	cr_assert_eq(sh("head -c 100000 /dev/urandom > '%s'", file), 0);
	const char *args[] = { "push", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, file, "~/models", NULL };

	cr_assert_eq(run_slicectl(&r, args, NULL), 0);
	cr_assert_eq(r.status, 0, "stderr: %s", r.err);
	for (unsigned i = 1; i <= NHOSTS; i++)
		cr_assert_eq(sh("cmp '%s' '%s/home%u/models/model.bin'", file,
				sshd.shared, i), 0, "host %u", i);
	run_result_release(&r);
}

Test(push, unwritable_dest_fails_with_the_remote_message)
{
	struct run_result r;

	make_tree();
	const char *args[] = { "push", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, src, "/proc/nope", NULL };

	cr_assert_eq(run_slicectl(&r, args, NULL), 0);
	cr_assert_neq(r.status, 0);
	cr_assert_eq(count_substr(r.err, "/proc/nope"), NHOSTS, "%s", r.err);
	run_result_release(&r);
}

Test(push, missing_source_is_a_usage_error)
{
	struct run_result r;
	const char *args[] = { "push", "--hosts", hosts, "/nonexistent/src",
			       NULL };

	cr_assert_eq(run_slicectl(&r, args, NULL), 0);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(r.err, "cannot read /nonexistent/src"), "%s", r.err);
	run_result_release(&r);
}

/* The remote side trusts nothing it has not checked: a checksum that does
 * not match (a sha256sum that says so stands in for corruption in
 * transit) unpacks nothing, and a host without zstd says what to install. */
Test(push, remote_checks_before_unpacking)
{
	struct run_result r;
	char fake[HARNESS_PATH + 16], nozstd[HARNESS_PATH + 16];
	char addr1[32], addr2[32];
	FILE *f;

	make_tree();
	snprintf(fake, sizeof(fake), "%s/fakebin", sshd.shared);
	snprintf(nozstd, sizeof(nozstd), "%s/nozstd", sshd.shared);
	cr_assert_eq(sh("mkdir -p %s %s && chmod 755 %s %s && "
			"printf '#!/bin/sh\\nexit 1\\n' > %s/sha256sum && "
			"chmod 755 %s/sha256sum && "
			"for t in sh cat mkdir mktemp wc rm tar sha256sum; do "
			"ln -s \"$(command -v $t)\" %s/$t; done",
			fake, nozstd, fake, nozstd, fake, fake, nozstd), 0);
	loopback_addr(1, addr1, sizeof(addr1));
	loopback_addr(2, addr2, sizeof(addr2));
	f = fopen(hosts, "w");
	cr_assert_not_null(f);
	fprintf(f, "%s@%s:%u HOME=%s/home1 PATH=%s:/usr/bin:/bin\n", sshd.user,
		addr1, sshd.port, sshd.shared, fake);
	fprintf(f, "%s@%s:%u HOME=%s/home2 PATH=%s\n", sshd.user, addr2,
		sshd.port, sshd.shared, nozstd);
	fclose(f);
	const char *args[] = { "push", "--identity", sshd.key, "--known-hosts",
			       kh, "--hosts", hosts, src, "~/dest", NULL };

	cr_assert_eq(run_slicectl(&r, args, NULL), 0);
	cr_assert_eq(r.status, 127, "stderr: %s", r.err);
	cr_assert(strstr(r.err, "checksum mismatch"), "%s", r.err);
	cr_assert(strstr(r.err, "zstd is not installed here"), "%s", r.err);
	cr_assert_eq(sh("test -z \"$(ls -A %s/home1/dest 2>/dev/null)\"",
			sshd.shared), 0, "something was unpacked");
	run_result_release(&r);
}
