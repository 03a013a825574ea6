/*
 * tests/startup/test_portable.c: slice-supervisor.portable, the file a
 * worker fetches (supervisor/portable.c), on systems other than the one
 * that built it. Its head needs nothing (no interpreter, no library); what
 * it unpacks resolves every library inside itself, as the loader reports
 * it (what ldd shows) and as readelf's NEEDED entries demand; it runs in
 * a root holding nothing but itself; and in a minimal Debian 11 root
 * (glibc 2.31, OpenSSL 1.1: Ubuntu 20.04 TPU images' libraries) it runs
 * --version and a real `run --pod`, where the plainly linked supervisor
 * does not start; there the startup script says which binary runs and,
 * for one that does not, turns to the source bundle. What `slicectl job`
 * uploads for a TPU VM run (its default, against the TPU fake) is the
 * portable one, and the queued resource's startup script, run there with
 * the metadata fake as the VM's server, installs it and runs the job.
 *
 * The chroot tests need root and the Debian 11 root
 * (tests/startup/debian11-root.sh makes it once and caches it); without
 * them they are skipped, saying why.
 */
#include "startup/startup.h"

#include "tests/cloud/fake_metadata.h"
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATHLEN 4096
#define CMDLEN (PATHLEN * 8)

static char tmp[PATHLEN];   /* a host directory of the test */
static char deb[PATHLEN];   /* the Debian 11 root, when a test uses it */
static char inside[128];    /* the test's directory, as seen inside it */
/* The Cloud TPU API and a VM's metadata server, when a test uses them. */
static struct fake_tpu tpu;
static struct fake_metadata md;
static bool tpu_up, md_up;

static void setup(void)
{
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "portable"), 0);
}

static void teardown(void)
{
	if (md_up)
		fake_metadata_stop(&md);
	if (tpu_up)
		fake_tpu_stop(&tpu);
	md_up = tpu_up = false;
	if (deb[0] && inside[0]) {
		char p[PATHLEN + 128];

		snprintf(p, sizeof(p), "%s%s", deb, inside);
		rm_rf(p);
	}
	/* tmp's mount point in the root, when it was shared: empty. */
	if (deb[0] && tmp[0])
		sh("rmdir '%s%s' 2>/dev/null || :", deb, tmp);
	if (tmp[0])
		rm_rf(tmp);
	deb[0] = inside[0] = '\0';
}

TestSuite(portable, .init = setup, .fini = teardown, .timeout = 600);

static const char *portable(void)
{
	static char path[PATHLEN];
	const char *b = getenv("SLICECTL_BUILDDIR");

	cr_assert_not_null(b, "SLICECTL_BUILDDIR is not set");
	snprintf(path, sizeof(path), "%s/supervisor/slice-supervisor.portable",
		 b);
	cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
	return path;
}

/* Runs /bin/sh -c cmd; its stdout and stderr together in r->out. */
static int capture(struct run_result *r, const char *cmd)
{
	char full[CMDLEN + 16];

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	cr_assert_eq(run_program(r, (const char *const[]){ "/bin/sh", "-c",
							    full, NULL },
				 NULL),
		     0);
	return r->status;
}

static void has(const char *text, const char *what)
{
	cr_assert(strstr(text, what), "'%s' not in:\n%s", what, text);
}

/* The head is static, so the host's loader and libraries play no part. */
Test(portable, its_head_needs_no_loader_and_no_library)
{
	struct run_result r = { 0 };
	char cmd[CMDLEN];

	snprintf(cmd, sizeof(cmd), "readelf -l -d '%s'", portable());
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	cr_assert_null(strstr(r.out, "program interpreter"), "%s", r.out);
	cr_assert_null(strstr(r.out, "(NEEDED)"), "%s", r.out);
	run_result_release(&r);
}

/* Unpacked, the supervisor resolves every library from the bundle (the
 * loader's --list mode, which is what ldd runs), and every NEEDED entry of
 * it and of its libraries is there. */
Test(portable, what_it_unpacks_resolves_nothing_from_the_host)
{
	struct run_result r = { 0 };
	char cmd[CMDLEN], dir[PATHLEN + 64];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/s' && '%s/s' --version",
		 portable(), tmp, tmp);
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	has(r.out, "slice-supervisor ");
	run_result_release(&r);
	snprintf(cmd, sizeof(cmd), "ls -d '%s'/.s.*", tmp);
	cr_assert_eq(capture(&r, cmd), 0, "nothing unpacked: %s", r.out);
	snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_result_release(&r);
	snprintf(cmd, sizeof(cmd),
		 "d='%s'; \"$d/ld.so\" --library-path \"$d/lib\" --list "
		 "\"$d/bin/slice-supervisor\"",
		 dir);
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	has(r.out, "libcurl.so.4 => ");
	for (char *line = r.out; *line;) {
		size_t len = strcspn(line, "\n");
		char *arrow = strstr(line, "=> ");

		if (arrow && arrow < line + len)
			cr_assert(!strncmp(arrow + 3, dir, strlen(dir)),
				  "resolved from the host: %.*s", (int)len,
				  line);
		else
			cr_assert(strstr(line, "linux-vdso") ||
					  strstr(line, dir) || !len,
				  "not from the bundle: %.*s", (int)len, line);
		line += len + (line[len] == '\n');
	}
	run_result_release(&r);
	snprintf(cmd, sizeof(cmd),
		 "d='%s'; for f in \"$d/bin/slice-supervisor\" \"$d\"/lib/*; do "
		 "readelf -d \"$f\" | sed -n 's/.*(NEEDED).*\\[\\(.*\\)\\]/\\1/p'"
		 "; done | sort -u | while read -r so; do "
		 "[ -e \"$d/lib/$so\" ] || [ \"$so\" = ld-linux-x86-64.so.2 ] || "
		 "[ \"$so\" = ld-linux-aarch64.so.1 ] || echo \"missing $so\"; "
		 "done",
		 dir);
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	cr_assert_str_eq(r.out, "", "%s", r.out);
	run_result_release(&r);
}

static void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("not root: chroot needs root");
}

/* A root holding nothing but the file: no /lib, no /bin/sh, no /proc. */
Test(portable, it_runs_in_a_root_holding_nothing_else)
{
	struct run_result r = { 0 };
	char cmd[CMDLEN];

	need_root();
	/* A sanitizer build reads its options and its threads from /proc
	 * (it starts before libc can read the environment): only there does
	 * the root get a /proc, in a mount namespace of its own. */
	snprintf(cmd, sizeof(cmd),
		 "mkdir '%s/empty' && cp '%s' '%s/empty/slice-supervisor' && "
		 "if [ -n \"${ASAN_OPTIONS:-}\" ]; then "
		 "mkdir '%s/empty/proc' && unshare --mount --propagation "
		 "private /bin/sh -c 'mount -t proc proc \"$0/proc\" && exec "
		 "chroot \"$0\" /slice-supervisor --version' '%s/empty'; "
		 "else chroot '%s/empty' /slice-supervisor --version; fi",
		 tmp, portable(), tmp, tmp, tmp, tmp);
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	has(r.out, "slice-supervisor ");
	run_result_release(&r);
}

/* The Debian 11 root, and the test's directory in it (inside). */
static void debian11(void)
{
	struct run_result r = { 0 };
	const char *src = getenv("SLICECTL_SRCDIR");
	char cmd[CMDLEN];

	need_root();
	snprintf(cmd, sizeof(cmd), "'%s/tests/startup/debian11-root.sh'",
		 src ? src : ".");
	cr_assert_eq(run_program(&r, (const char *const[]){ "/bin/sh", "-c",
							    cmd, NULL },
				 NULL),
		     0);
	if (r.status == 77) {
		fprintf(stderr, "%s", r.err);
		cr_skip_test("no Debian 11 root: %s", r.err);
	}
	cr_assert_eq(r.status, 0, "debian11-root.sh: %s", r.err);
	snprintf(deb, sizeof(deb), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_result_release(&r);
	snprintf(inside, sizeof(inside), "/tmp/slicectl-portable-%ld",
		 (long)getpid());
	cr_assert_eq(sh("rm -rf '%s%s' && mkdir -p '%s%s'", deb, inside, deb,
			inside),
		     0);
	/* What it is: glibc 2.31 and OpenSSL 1.1, no OpenSSL 3. */
	cr_assert_eq(sh("ls '%s'/lib/*-linux-gnu/libc-2.31.so "
			"'%s'/usr/lib/*-linux-gnu/libssl.so.1.1 >/dev/null && "
			"! ls '%s'/usr/lib/*-linux-gnu/libssl.so.3 "
			">/dev/null 2>&1",
			deb, deb, deb),
		     0, "%s is not a Debian 11 root", deb);
}

/* Runs cmd (a shell command line without single quotes) in the Debian
 * 11 root with /proc mounted, in a mount namespace of its own; host
 * directory share, unless NULL, is seen inside at the same path (so a
 * file:// URL means the same inside and out). */
static int in_debian11_sharing(struct run_result *r, const char *share,
			       const char *cmd)
{
	char full[CMDLEN * 2];

	snprintf(full, sizeof(full),
		 "unshare --mount --propagation private /bin/sh -c "
		 "'if [ -n \"$2\" ]; then mkdir -p \"$0$2\" && "
		 "mount --bind \"$2\" \"$0$2\" || exit; fi && "
		 "mount -t proc proc \"$0/proc\" && exec chroot \"$0\" "
		 "/bin/sh -c \"$1\"' '%s' '%s' '%s'",
		 deb, cmd, share ? share : "");
	return capture(r, full);
}

static int in_debian11(struct run_result *r, const char *cmd)
{
	return in_debian11_sharing(r, NULL, cmd);
}

Test(portable, it_runs_and_supervises_in_debian_11)
{
	struct run_result r = { 0 };
	char path[CMDLEN];
	FILE *f;

	debian11();
	cr_assert_eq(sh("cp '%s' '%s%s/slice-supervisor' && "
			"cp \"$SLICE_SUPERVISOR_BIN\" '%s%s/plain' && "
			"mkdir -p '%s%s/run'",
			portable(), deb, inside, deb, inside, deb, inside),
		     0);
	/* The plain build does not start there: this test means something. */
	snprintf(path, sizeof(path), "%s/plain --version", inside);
	cr_assert_neq(in_debian11(&r, path), 0, "%s", r.out);
	run_result_release(&r);
	snprintf(path, sizeof(path), "%s/slice-supervisor --version", inside);
	cr_assert_eq(in_debian11(&r, path), 0, "%s", r.out);
	has(r.out, "slice-supervisor ");
	run_result_release(&r);
	/* A real run, as a pod would run it: one step, committed. */
	snprintf(path, sizeof(path), "%s%s/run/job.json", deb, inside);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "{\"name\": \"deb11\", \"num_slices\": 1, "
		   "\"workers_per_slice\": 1, \"grace_s\": 5, "
		   "\"heartbeat_s\": 1, \"command\": \"d=$SLICE_CHECKPOINT_DIR; "
		   "mkdir -p $d/step-1 && echo $MEGASCALE_SLICE_ID > "
		   "$d/step-1/slice && touch $d/step-1.done && sleep 1\"}\n");
	fclose(f);
	snprintf(path, sizeof(path),
		 "cd / && SLICE_POD_SLICE=0 SLICE_POD_WORKER=0 "
		 "MEGASCALE_SLICE_ID=0 %s/slice-supervisor run --job "
		 "file://%s/run --pod --state-dir %s/state --control-poll 0.2",
		 inside, inside, inside);
	cr_assert_eq(in_debian11(&r, path), 0, "%s", r.out);
	run_result_release(&r);
	cr_assert_eq(sh("grep -q '\"done\"' '%s%s/run/control.json' && "
			"[ -f '%s%s/run/checkpoints/step-0000000001/COMMIT' ]",
			deb, inside, deb, inside),
		     0, "the run in Debian 11 did not finish with step 1");
}

/* The startup script in the Debian 11 root, under SLICE_ROOT, installing
 * (SLICE_SYSTEMD=skip) the supervisor whose file is at host path bin;
 * source_sha256 as rendered. Its exit status; its journal in r->out. */
static int startup_in_debian11(struct run_result *r, const char *bin,
			       const char *source_sha256)
{
	struct startup_params p = { 0 };
	char url[256], sha[80], path[PATHLEN * 2], cmd[CMDLEN];
	char *script = NULL;
	size_t len = 0;
	struct run_result s = { 0 };
	struct err e;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "sha256sum < '%s'", bin);
	cr_assert_eq(capture(&s, cmd), 0);
	snprintf(sha, sizeof(sha), "%.64s", s.out);
	run_result_release(&s);
	cr_assert_eq(sh("mkdir -p '%s%s/run/supervisor' && cp '%s' "
			"'%s%s/run/supervisor/slice-supervisor-%s' && "
			"echo '{}' > '%s%s/run/job.json' && "
			"rm -rf '%s%s/root'",
			deb, inside, bin, deb, inside, sha, deb, inside, deb,
			inside),
		     0);
	snprintf(url, sizeof(url), "file://%s/run", inside);
	p.run_url = url;
	p.supervisor_sha256 = sha;
	p.supervisor_portable = !strcmp(bin, portable());
	p.source_sha256 = source_sha256;
	p.grace_s = 5;
	err_init(&e);
	cr_assert_eq(startup_render(&p, &script, &len, &e), 0, "%s", e.msg);
	snprintf(path, sizeof(path), "%s%s/startup.sh", deb, inside);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite(script, 1, len, f);
	fclose(f);
	free(script);
	snprintf(cmd, sizeof(cmd),
		 "SLICE_ROOT=%s/root SLICE_SYSTEMD=skip /bin/sh %s/startup.sh",
		 inside, inside);
	return in_debian11(r, cmd);
}

Test(portable, the_startup_script_checks_the_binary_in_debian_11)
{
	struct run_result r = { 0 };
	const char *plain = getenv("SLICE_SUPERVISOR_BIN");
	static const char source[] =
		"5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e";

	cr_assert_not_null(plain, "SLICE_SUPERVISOR_BIN is not set");
	debian11();
	/* The portable supervisor runs: installed, nothing else to do. */
	cr_assert_eq(startup_in_debian11(&r, portable(), NULL), 0, "%s",
		     r.out);
	has(r.out, "(slice-supervisor.portable, its own loader and "
		   "libraries) runs here: slice-supervisor ");
	has(r.out, "installed, not started");
	run_result_release(&r);
	/* The plain build does not: the script says so and turns to the
	 * source bundle, which needs a compiler this root lacks (SLICE_ROOT
	 * keeps it from installing one). */
	cr_assert_neq(startup_in_debian11(&r, plain, source), 0, "%s", r.out);
	has(r.out, "does not run on this machine (");
	has(r.out, "building it from the source bundle " "5ca1ab1e");
	has(r.out, "missing packages: ");
	run_result_release(&r);
	/* And without a source bundle it stops there, saying why. */
	cr_assert_neq(startup_in_debian11(&r, plain, NULL), 0, "%s", r.out);
	has(r.out, "(binary, using this machine's glibc and libraries) does "
		   "not run on this machine (");
	has(r.out, "and the run has no source bundle to build it from");
	run_result_release(&r);
}

/* The startup-script metadata slicectl asked the TPU fake for
 * (malloc'd). */
static char *asked_startup_script(void)
{
	json_t *all = fake_tpu_requests(&tpu), *q, *script = NULL;
	char *text;
	size_t i;

	json_array_foreach(all, i, q) {
		json_t *spec = json_array_get(json_object_get(json_object_get(
			json_object_get(q, "body"), "tpu"), "nodeSpec"), 0);

		if (spec)
			script = json_object_get(json_object_get(
				json_object_get(spec, "node"), "metadata"),
				"startup-script");
	}
	cr_assert(json_is_string(script), "no create request with a "
		  "startup script");
	text = strdup(json_string_value(script));
	json_decref(all);
	cr_assert_not_null(text);
	return text;
}

/* What a TPU VM run uploads by default (slicectl job on the Cloud TPU
 * path, no --supervisor-bin) starts in Debian 11; and the queued
 * resource's startup script, run there as a VM runs it at boot, fetches
 * it from the bucket, says which binary runs, and runs the job to its
 * end. The bucket is file:// under tmp, which the root sees at the same
 * path. */
Test(portable, a_tpu_vm_run_s_supervisor_runs_in_debian_11)
{
	struct run_result r = { 0 };
	char env_tpu[128], env_home[PATHLEN + 32], bucket[PATHLEN + 16];
	char obj[PATHLEN + 160], cmd[CMDLEN], *sha, *script;
	/* SLICE_SUPERVISOR_BIN empty: the default, next to slicectl. */
	const char *env[] = { env_tpu, env_home,
			      "SLICECTL_ACCESS_TOKEN=test-token",
			      "CLOUDSDK_CORE_PROJECT=proj",
			      "CLOUDSDK_COMPUTE_ZONE=us-central2-b",
			      "SLICE_SUPERVISOR_BIN=", NULL };
	FILE *f;

	debian11();
	cr_assert_eq(fake_tpu_start(&tpu, (const char *const[]){
					 "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	tpu_up = true;
	cr_assert_eq(fake_metadata_start(&md, (const char *const[]){
						 "--workers", "1", NULL }),
		     0, "the metadata fake did not start");
	md_up = true;
	snprintf(env_tpu, sizeof(env_tpu), "SLICECTL_TPU_ENDPOINT=%s",
		 tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", tmp);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	cr_assert_eq(sh("mkdir -p '%s/bucket'", tmp), 0);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			 "job", "deb11", "--bucket", bucket,
			 "--accelerator-type", "v4-8", "--grace", "5",
			 "--command", "d=$SLICE_CHECKPOINT_DIR; mkdir -p "
			 "$d/step-1 && echo $SLICE_WORKER_ID > $d/step-1/w "
			 "&& touch $d/step-1.done && sleep 1", NULL }, env),
		     0);
	cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
	has(r.err, "(slice-supervisor.portable)");
	run_result_release(&r);

	/* The object in the bucket is the portable supervisor, and it is
	 * the only one there. */
	snprintf(cmd, sizeof(cmd), "sha256sum < '%s'", portable());
	cr_assert_eq(capture(&r, cmd), 0);
	sha = strndup(r.out, 64);
	run_result_release(&r);
	snprintf(obj, sizeof(obj), "%s/bucket/deb11/supervisor/"
		 "slice-supervisor-%s", tmp, sha);
	snprintf(cmd, sizeof(cmd), "ls '%s/bucket/deb11/supervisor'", tmp);
	cr_assert_eq(capture(&r, cmd), 0, "%s", r.out);
	snprintf(cmd, sizeof(cmd), "%s\n", strrchr(obj, '/') + 1);
	cr_assert_str_eq(r.out, cmd, "the bucket's supervisor is not the "
			 "portable one");
	run_result_release(&r);
	free(sha);
	/* An object is no program: a worker copies it out and marks it. */
	snprintf(cmd, sizeof(cmd),
		 "cp %s %s/fetched && chmod 0755 %s/fetched && "
		 "%s/fetched --version", obj, tmp, tmp, tmp);
	cr_assert_eq(in_debian11_sharing(&r, tmp, cmd), 0, "%s", r.out);
	has(r.out, "slice-supervisor ");
	run_result_release(&r);

	/* Boot: the startup script the queued resource was asked with,
	 * in the foreground (SLICE_SYSTEMD=none), as worker 0 with the
	 * metadata fake for its server. */
	script = asked_startup_script();
	snprintf(obj, sizeof(obj), "%s/startup-script", tmp);
	f = fopen(obj, "w");
	cr_assert_not_null(f);
	fputs(script, f);
	cr_assert_eq(fclose(f), 0);
	free(script);
	snprintf(cmd, sizeof(cmd),
		 "cd / && SLICE_ROOT=%s/vm SLICE_SYSTEMD=none "
		 "GCE_METADATA_HOST=127.0.0.1:%u %s "
		 "SLICECTL_ACCESS_TOKEN=vm-token timeout 300 /bin/sh %s",
		 tmp, fake_metadata_port(&md, 0), env_tpu, obj);
	cr_assert_eq(in_debian11_sharing(&r, tmp, cmd), 0, "%s", r.out);
	has(r.out, "(slice-supervisor.portable, its own loader and "
		   "libraries) runs here: slice-supervisor ");
	has(r.out, "running the supervisor in the foreground");
	run_result_release(&r);
	cr_assert_eq(sh("grep -q '\"done\"' '%s/bucket/deb11/control.json' && "
			"[ -f '%s/bucket/deb11/checkpoints/step-0000000001/"
			"COMMIT' ]", tmp, tmp),
		     0, "the run in Debian 11 did not finish with step 1");
}
