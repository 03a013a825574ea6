/*
 * tests/startup/test_startup.c: the startup script run for real with
 * /bin/sh under a temporary SLICE_ROOT: from file:// and from the GCS fake
 * (with a ready token, and with one from a metadata server), twice in a
 * row (the second run fetches nothing), with SLICE_SYSTEMD=skip, =none
 * (the supervisor runs in the foreground) and with a systemctl that
 * records what it is asked. Refusals: a sha256 that does not match, a
 * missing object, a missing package. One test builds the "supervisor"
 * from a source bundle of this tree (slow: a minute or two). The script
 * as rendered is test_startup_render.c's.
 *
 * The "supervisor" is a tiny shell script that prints its arguments and
 * the endpoint variables, so a test sees exactly what the unit would run.
 */
#include "startup/startup.h"

#include "tests/cloud/fake_gcs.h"
#include "tests/cloud/tiny_http.h"
#include "tests/harness/harness.h"
#include "tests/startup/startup_check.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define TOKEN "ya29.startup-test"

static const char fake_supervisor[] =
	"#!/bin/sh\n"
	"echo \"fake-supervisor: $# args\"\n"
	"for a in \"$@\"; do printf 'arg=[%s]\\n' \"$a\"; done\n"
	"for v in STORAGE_EMULATOR_HOST GCE_METADATA_HOST "
	"SLICECTL_TPU_ENDPOINT SLICECTL_ACCESS_TOKEN; do\n"
	"\teval \"printf 'env %s=[%s]\\n' $v \\\"\\${$v-unset}\\\"\"\n"
	"done\n"
	"echo \"cwd=[$(pwd)]\"\n";

/* What runs the script: TPU VMs' /bin/sh is dash, as here; a test may
 * choose bash. */
static const char *test_shell = "/bin/sh";

/* sha256sum's hex digest of a file (read from stdin: with a backslash in
 * a file's name sha256sum would put one before the digest). */
static void sha256_file(const char *path, char out[65])
{
	const char *argv[] = { "/bin/sh", "-c", "exec sha256sum <\"$0\"", path,
			       NULL };
	struct run_result r;

	cr_assert_eq(run_program(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "sha256sum %s: %s", path, r.err);
	cr_assert(r.out_len >= 64);
	memcpy(out, r.out, 64);
	out[64] = '\0';
	run_result_release(&r);
}

/* Runs the script with /bin/sh, SLICE_ROOT=TMP/root and env (NULL-ended
 * "K=V"; the endpoint variables are cleared unless env sets them). */
static void run_script(struct run_result *r, const char *script,
		       const char *const *env)
{
	static char root_kv[PATHLEN + 16];
	const char *all[32];
	const char *argv[] = { test_shell, script, NULL };
	size_t n = 0;

	snprintf(root_kv, sizeof(root_kv), "SLICE_ROOT=%s/root", tmp);
	all[n++] = root_kv;
	all[n++] = "STORAGE_EMULATOR_HOST=";
	all[n++] = "GCE_METADATA_HOST=";
	all[n++] = "SLICECTL_TPU_ENDPOINT=";
	all[n++] = "SLICECTL_ACCESS_TOKEN=";
	while (env && *env && n < 31)
		all[n++] = *env++;
	all[n] = NULL;
	cr_assert_eq(run_program(r, argv, all), 0);
}

/* run_script, and the script must exit with status. */
static void run_expect(struct run_result *r, const char *script,
		       const char *const *env, int status)
{
	run_script(r, script, env);
	cr_assert_eq(r->status, status, "%s%s", r->out, r->err);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Entries directly in dir whose names contain needle. */
static int count_named(const char *dir, const char *needle)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += strstr(de->d_name, needle) != NULL;
	closedir(d);
	return n;
}

/* A run directory TMP/NAME with job.json and the fake supervisor under
 * its sha256 (written to sha). */
static void make_run_dir(const char *name, char sha[65])
{
	char path[PATHLEN], bin[PATHLEN];

	path_in(path, "%s/%s/job.json", name);
	write_text(path, "{\"name\": \"test-job\"}\n", 0644);
	path_in(path, "%s/%s/supervisor/tmp", name);
	write_text(path, fake_supervisor, 0755);
	sha256_file(path, sha);
	path_in(bin, "%s/%s/supervisor/slice-supervisor-", name);
	strcat(bin, sha);
	cr_assert_eq(rename(path, bin), 0);
}

/* The unit the script should write (no Environment= lines). */
static char *expected_unit(const char *exec_start, unsigned timeout,
			   const char *env_lines)
{
	struct buf b;

	buf_init(&b);
	buf_appendf(&b,
		"# Written by slicectl's startup script on every boot: "
		"edits are replaced.\n"
		"[Unit]\n"
		"Description=slicectl slice supervisor\n"
		"Wants=network-online.target\n"
		"After=network-online.target\n"
		"\n"
		"[Service]\n"
		"ExecStart=%s\n"
		"%s"
		"Restart=always\n"
		"# Exit 0 means the run ended or this worker left after a notice.\n"
		"RestartPreventExitStatus=0\n"
		"RestartSec=2\n"
		"KillMode=mixed\n"
		"TimeoutStopSec=%u\n"
		"StandardOutput=journal\n"
		"StandardError=journal\n"
		"\n"
		"[Install]\n"
		"WantedBy=multi-user.target\n", exec_start, env_lines, timeout);
	return buf_detach(&b);
}

static char *read_unit(void)
{
	char path[PATHLEN];
	char *s;

	path_in(path, "%s/root/%s", "etc/systemd/system/slice-supervisor."
		"service");
	s = read_file(path, NULL);
	cr_assert(s, "no unit at %s", path);
	return s;
}

/* Renders the script for the run at file://TMP/name (its URL into url)
 * and the supervisor of sha256 sha. */
static void render_file_run(struct startup_params *p, const char *name,
			    const char *sha, char *url, char *script)
{
	path_in(url, "file://%s/%s", name);
	p->run_url = url;
	p->supervisor_sha256 = sha;
	render_script(p, script);
}

static void bin_path(char *out, const char *sha)
{
	path_in(out, "%s/root/opt/slicectl/bin/slice-supervisor-%s", sha);
}

/* One suite: Criterion 2.4 leaks a little when tests of several suites
 * run in parallel, which fails the sanitizer build. */
TestSuite(startup, .init = startup_setup, .fini = startup_teardown, .timeout = 60);

/* ---------------------------------------------------------------- file:// */

Test(startup, file_twice_then_in_the_foreground)
{
	const char *skip[] = { "SLICE_SYSTEMD=skip", NULL };
	const char *none[] = { "SLICE_SYSTEMD=none",
			       "SLICECTL_TPU_ENDPOINT=http://127.0.0.1:9/",
			       NULL };
	struct startup_params p = { .grace_s = 90 };
	char sha[65], url[PATHLEN], script[PATHLEN], bin[PATHLEN];
	char path[PATHLEN], exec_start[PATHLEN * 3], got[65];
	char *unit, *want, *job;
	struct run_result r;
	struct stat st1, st2;

	make_run_dir("run", sha);
	render_file_run(&p, "run", sha, url, script);
	bin_path(bin, sha);

	/* First run: everything is fetched and installed. */
	run_expect(&r, script, skip, 0);
	assert_has(r.err, "slice-startup: [job]");
	assert_has(r.err, "fetched: job.json supervisor/slice-supervisor-");
	assert_has(r.err, "SLICE_SYSTEMD=skip: installed, not started");
	assert_lacks(r.out, "fake-supervisor");
	run_result_release(&r);
	cr_assert_eq(stat(bin, &st1), 0, "no %s", bin);
	cr_assert_eq(st1.st_mode & 07777, 0755);
	sha256_file(bin, got);
	cr_assert_str_eq(got, sha);
	path_in(path, "%s/%s", "root/etc/slicectl/job.json");
	job = read_file(path, NULL);
	cr_assert_str_eq(job, "{\"name\": \"test-job\"}\n");
	free(job);
	unit = read_unit();
	snprintf(exec_start, sizeof(exec_start), "%s run --job %s", bin, url);
	want = expected_unit(exec_start, 120, "");
	cr_assert_str_eq(unit, want);
	free(want);

	/* Second run: nothing fetched, nothing rewritten; what a run cut
	 * short would have left is cleared. */
	path_in(path, "%s/root/opt/slicectl/bin/slice-supervisor-%s.part.99999",
		sha);
	write_text(path, "half", 0600);
	run_expect(&r, script, skip, 0);
	assert_has(r.err, "job.json is in place for this run: not fetched");
	/* Verified when installed and unchanged since: neither hashed nor
	 * run again. */
	assert_has(r.err, "unchanged since): not fetched");
	assert_lacks(r.err, "runs here");
	assert_has(r.err, "is unchanged");
	assert_has(r.err, "nothing fetched: job.json and the supervisor were "
		   "in place");
	assert_lacks(r.err, "fetching");
	run_result_release(&r);
	cr_assert_eq(stat(bin, &st2), 0);
	cr_assert_eq(st1.st_ino, st2.st_ino, "the binary was written again");
	cr_assert(!exists(path), "%s is left", path);
	{
		char *again = read_unit();

		cr_assert_str_eq(again, unit);
		free(again);
	}
	free(unit);

	/* With none, the unit's command line runs in the foreground, with
	 * the unit's environment, and the unit says so too. */
	run_expect(&r, script, none, 0);
	assert_has(r.out, "fake-supervisor: 3 args\n");
	assert_has(r.out, "arg=[run]\narg=[--job]\n");
	{
		char line[PATHLEN + 16];

		snprintf(line, sizeof(line), "arg=[%s]\n", url);
		assert_has(r.out, line);
	}
	assert_has(r.out, "env SLICECTL_TPU_ENDPOINT=[http://127.0.0.1:9/]");
	assert_has(r.out, "cwd=[/]");
	assert_has(r.err, "running the supervisor in the foreground");
	assert_has(r.err, "nothing fetched");
	run_result_release(&r);
	unit = read_unit();
	assert_has(unit, "\nEnvironment=SLICECTL_TPU_ENDPOINT=http://127.0.0.1"
		   ":9/\n");
	assert_lacks(unit, "STORAGE_EMULATOR_HOST");
	free(unit);

	/* A binary touched since (same bytes) is hashed again, not trusted
	 * on its record. */
	cr_assert_eq(utimes(bin, NULL), 0);
	run_expect(&r, script, skip, 0);
	assert_has(r.err, "(sha256 checked): not fetched");
	assert_has(r.err, "runs here");
	run_result_release(&r);

	/* A damaged installed binary is noticed and fetched again. */
	write_text(bin, "#!/bin/sh\necho damaged\n", 0755);
	run_expect(&r, script, skip, 0);
	assert_has(r.err, "fetched: supervisor/slice-supervisor-");
	run_result_release(&r);
	sha256_file(bin, got);
	cr_assert_str_eq(got, sha);
}

/* Systemd's quoting for one argument, as the script writes it. */
static void sd_quoted(char *out, size_t cap, const char *s, bool exec)
{
	size_t n = 0;

	out[n++] = '"';
	for (; *s && n + 4 < cap; s++) {
		if (*s == '\\' || *s == '"')
			out[n++] = '\\';
		else if (*s == '%')
			out[n++] = '%';
		else if (*s == '$' && exec)
			out[n++] = '$';
		out[n++] = *s;
	}
	out[n++] = '"';
	out[n] = '\0';
}

Test(startup, file_a_run_url_with_odd_characters_survives)
{
	const char *none[] = { "SLICE_SYSTEMD=none",
			       "SLICECTL_ACCESS_TOKEN=tok 'with\" %n $x",
			       NULL };
	/* Space, both quotes, $, %, backslash, a backquote. */
	const char *name = "run dir/it's \"odd\" $HOME %n \\t `x`";
	struct startup_params p = { .grace_s = 0 };
	char sha[65], url[PATHLEN], script[PATHLEN], bin[PATHLEN];
	char line[PATHLEN * 2], q[PATHLEN * 2];
	char *unit;
	struct run_result r;
	struct stat st;

	make_run_dir(name, sha);
	render_file_run(&p, name, sha, url, script);
	bin_path(bin, sha);

	test_shell = "bash";
	run_expect(&r, script, none, 0);
	snprintf(line, sizeof(line), "arg=[%s]\n", url);
	assert_has(r.out, line);
	assert_has(r.out, "env SLICECTL_ACCESS_TOKEN=[tok 'with\" %n $x]");
	run_result_release(&r);

	unit = read_unit();
	sd_quoted(q, sizeof(q), url, true);
	snprintf(line, sizeof(line), "\nExecStart=%s run --job %s\n", bin, q);
	assert_has(unit, line);
	assert_has(unit, "\nEnvironment=\"SLICECTL_ACCESS_TOKEN=tok 'with\\\" "
		   "%%n $x\"\n");
	assert_has(unit, "\nTimeoutStopSec=30\n");
	free(unit);
	/* A unit holding a token is for root's eyes only. */
	path_in(line, "%s/root/%s", "etc/systemd/system/slice-supervisor."
		"service");
	cr_assert_eq(stat(line, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
}

Test(startup, file_a_sha256_mismatch_is_refused_and_nothing_installed)
{
	const char *skip[] = { "SLICE_SYSTEMD=skip", NULL };
	struct startup_params p = { .grace_s = 30 };
	char sha[65], url[PATHLEN], script[PATHLEN], bin[PATHLEN];
	char path[PATHLEN], bad[PATHLEN];
	struct run_result r;

	make_run_dir("run", sha);
	/* The object named for sha holds other bytes. */
	path_in(bad, "%s/run/supervisor/slice-supervisor-%s", sha);
	write_text(bad, "#!/bin/sh\necho tampered\n", 0755);
	render_file_run(&p, "run", sha, url, script);

	run_script(&r, script, skip);
	cr_assert_neq(r.status, 0, "%s%s", r.out, r.err);
	assert_has(r.err, "; refused");
	assert_has(r.err, "FAILED in step 'supervisor'");
	run_result_release(&r);
	bin_path(bin, sha);
	cr_assert(!exists(bin), "%s was installed", bin);
	path_in(path, "%s/%s", "root/opt/slicectl/bin");
	cr_assert_eq(count_named(path, ".part"), 0, "a partial file is left");
	path_in(path, "%s/%s", "root/etc/systemd/system/slice-supervisor."
		"service");
	cr_assert(!exists(path), "a unit was written");
}

Test(startup, file_a_missing_object_is_a_clear_error)
{
	const char *skip[] = { "SLICE_SYSTEMD=skip", NULL };
	struct startup_params p = { .grace_s = 30 };
	char sha[65], url[PATHLEN], script[PATHLEN], path[PATHLEN];
	struct run_result r;

	make_run_dir("run", sha);
	/* A supervisor that was never uploaded. */
	render_file_run(&p, "run", SHA_A, url, script);
	run_expect(&r, script, skip, 1);
	snprintf(path, sizeof(path), "/run/supervisor/slice-supervisor-%s "
		 "does not exist", SHA_A);
	assert_has(r.err, path);
	assert_has(r.err, "FAILED in step 'supervisor' (exit status 1)");
	run_result_release(&r);

	/* No run at all. */
	path_in(url, "file://%s/%s", "no-such-run");
	render_script(&p, script);
	run_expect(&r, script, skip, 1);
	assert_has(r.err, "/no-such-run/job.json does not exist");
	assert_has(r.err, "FAILED in step 'job'");
	run_result_release(&r);
}

Test(startup, file_a_missing_package_is_named_not_installed)
{
	const char *skip[] = { "SLICE_SYSTEMD=skip", NULL, NULL };
	struct startup_params p = { .grace_s = 30 };
	char sha[65], url[PATHLEN], script[PATHLEN], bin[PATHLEN];
	char pathkv[PATHLEN + 8];
	struct run_result r;

	make_run_dir("run", sha);
	render_file_run(&p, "run", sha, url, script);
	/* A PATH with every tool the script uses but zstd. */
	path_in(bin, "%s/%s", "bin");
	mkdir_p(bin);
	cr_assert_eq(sh("cd '%s' && for t in sh date cat cp mv rm mkdir chmod "
			"sync sha256sum cut sed grep od tr cmp head tail "
			"flock curl tar dpkg-query pkg-config base64 md5sum "
			"ls; do p=$(command -v $t) && ln -s \"$p\" $t; done",
			bin), 0);
	snprintf(pathkv, sizeof(pathkv), "PATH=%s", bin);
	skip[1] = pathkv;
	run_expect(&r, script, skip, 1);
	assert_has(r.err, "missing packages: zstd; SLICE_ROOT is set, so they "
		   "are not installed here");
	assert_has(r.err, "FAILED in step 'packages'");
	run_result_release(&r);
}

/* A systemctl that appends its arguments to $SYSTEMCTL_LOG; pathkv and
 * logkv get "PATH=..." and "SYSTEMCTL_LOG=..." (PATHLEN * 2 each). */
static void fake_systemctl(char *pathkv, char *logkv, char *log)
{
	char dir[PATHLEN], path[PATHLEN];

	path_in(dir, "%s/%s", "sbin");
	path_in(log, "%s/%s", "systemctl.log");
	path_in(path, "%s/%s", "sbin/systemctl");
	write_text(path, "#!/bin/sh\necho \"$*\" >>\"$SYSTEMCTL_LOG\"\n",
		   0755);
	snprintf(pathkv, PATHLEN * 2, "PATH=%s:%s", dir, getenv("PATH"));
	snprintf(logkv, PATHLEN * 2, "SYSTEMCTL_LOG=%s", log);
}

/* Runs the script; systemctl (fake_systemctl's log) must have been told
 * want, and nothing else. */
static void systemctl_told(const char *script, const char *const *env,
			   const char *log, const char *want)
{
	struct run_result r;
	char *calls;

	run_expect(&r, script, env, 0);
	run_result_release(&r);
	calls = read_file(log, NULL);
	cr_assert_str_eq(calls, want);
	free(calls);
	unlink(log);
}

Test(startup, file_systemd_is_told_once_what_changed)
{
	static char pathkv[PATHLEN * 2], logkv[PATHLEN * 2];
	const char *env[] = { pathkv, logkv, "SLICE_SYSTEMD=", NULL, NULL };
	struct startup_params p = { .grace_s = 30 };
	char sha[65], url[PATHLEN], script[PATHLEN], log[PATHLEN];

	make_run_dir("run", sha);
	render_file_run(&p, "run", sha, url, script);
	fake_systemctl(pathkv, logkv, log);

	systemctl_told(script, env, log, "daemon-reload\n"
		       "enable --quiet slice-supervisor.service\n"
		       "restart slice-supervisor.service\n");

	/* Nothing changed: start (a no-op when it runs), no reload. */
	systemctl_told(script, env, log,
		       "enable --quiet slice-supervisor.service\n"
		       "start slice-supervisor.service\n");

	/* A new endpoint changes the unit: reload and restart. */
	env[3] = "SLICECTL_TPU_ENDPOINT=http://127.0.0.1:8/";
	systemctl_told(script, env, log, "daemon-reload\n"
		       "enable --quiet slice-supervisor.service\n"
		       "restart slice-supervisor.service\n");
}

/* ---------------------------------------------------------------- gs:// */

#define BUCKET "startup-bkt"
#define PREFIX "runs/my run"

static void escape(struct buf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~", c))
			buf_append(b, s, 1);
		else
			buf_appendf(b, "%%%02X", c);
	}
}

/* Uploads file path as object name with curl (simple media upload). */
static void upload(struct fake_gcs *f, const char *name, const char *path)
{
	struct buf url, data;
	struct run_result r;

	buf_init(&url);
	buf_init(&data);
	buf_appendf(&url, "%s/upload/storage/v1/b/" BUCKET
		    "/o?uploadType=media&name=", f->base);
	escape(&url, name);
	buf_appendf(&data, "@%s", path);
	{
		const char *argv[] = {
			"curl", "-sS", "-f", "-X", "POST", "-H",
			"Authorization: Bearer " TOKEN, "-H",
			"Content-Type: application/octet-stream",
			"--data-binary", data.data, url.data, NULL
		};

		cr_assert_eq(run_program(&r, argv, NULL), 0);
	}
	cr_assert_eq(r.status, 0, "upload %s: %s%s", name, r.out, r.err);
	run_result_release(&r);
	buf_release(&url);
	buf_release(&data);
}

/* The fake with the run uploaded from a run directory TMP/src; hostkv
 * (128 bytes), if not NULL, gets STORAGE_EMULATOR_HOST=HOST:PORT for it. */
static void start_gcs_run(struct fake_gcs *f, char sha[65], char *hostkv)
{
	const char *args[] = { "--require-token", TOKEN, NULL };
	char path[PATHLEN], name[512];

	cr_assert_eq(fake_gcs_start(f, args), 0);
	make_run_dir("src", sha);
	path_in(path, "%s/%s", "src/job.json");
	upload(f, PREFIX "/job.json", path);
	path_in(path, "%s/src/supervisor/slice-supervisor-%s", sha);
	snprintf(name, sizeof(name), PREFIX "/supervisor/slice-supervisor-%s",
		 sha);
	upload(f, name, path);
	snprintf(f->token, sizeof(f->token), "%s", TOKEN);
	if (hostkv)
		snprintf(hostkv, 128, "STORAGE_EMULATOR_HOST=127.0.0.1:%u",
			 f->port);
}

Test(startup, gs_from_the_gcs_fake_with_a_token_then_cached)
{
	static char hostkv[128];
	const char *skip[] = { "SLICE_SYSTEMD=skip", hostkv,
			       "SLICECTL_ACCESS_TOKEN=" TOKEN, NULL };
	const char *none[] = { "SLICE_SYSTEMD=none", hostkv,
			       "SLICECTL_ACCESS_TOKEN=" TOKEN, NULL };
	struct startup_params p = {
		.run_url = "gs://" BUCKET "/" PREFIX,
		.grace_s = 30,
	};
	struct fake_gcs f;
	char sha[65], script[PATHLEN], bin[PATHLEN], got[65];
	char *log = NULL, *unit;
	struct run_result r;

	start_gcs_run(&f, sha, hostkv);
	p.supervisor_sha256 = sha;
	render_script(&p, script);
	bin_path(bin, sha);
	cr_assert_eq(fake_gcs_call(&f, "DELETE", "/_fake/requests", NULL,
				   NULL), 200);
	/* Transient failures on the way: retried, and a corrupt body is
	 * caught by its MD5. */
	cr_assert_eq(fake_gcs_faults(&f,
		"[{\"method\": \"GET\", \"path\": \"job\\\\.json\", "
		"\"action\": \"status\", \"status\": 503, \"times\": 1},"
		" {\"method\": \"GET\", \"path\": \"job\\\\.json\", "
		"\"action\": \"corrupt\", \"after_bytes\": 3, \"times\": 1},"
		" {\"method\": \"GET\", \"path\": \"slice-supervisor\", "
		"\"action\": \"cut\", \"after_bytes\": 10, \"times\": 1}]"), 0);

	run_expect(&r, script, skip, 0);
	assert_has(r.err, "fetching gs://" BUCKET "/" PREFIX "/job.json");
	assert_has(r.err, "an MD5 that does not match x-goog-hash; trying");
	assert_has(r.err, "fetched: job.json supervisor/slice-supervisor-");
	run_result_release(&r);
	sha256_file(bin, got);
	cr_assert_str_eq(got, sha);
	/* The name is escaped as one path segment; the token is sent. */
	cr_assert_eq(fake_gcs_call(&f, "GET", "/_fake/requests", NULL, &log),
		     200);
	assert_has(log, "/storage/v1/b/" BUCKET
		   "/o/runs%2fmy%20run%2fjob.json");
	assert_has(log, "\"alt\": \"media\"");
	assert_has(log, "Bearer " TOKEN);
	assert_lacks(log, "\"status\": 401");
	free(log);
	unit = read_unit();
	{
		char line[256];

		snprintf(line, sizeof(line), "\nEnvironment="
			 "STORAGE_EMULATOR_HOST=127.0.0.1:%u\n", f.port);
		assert_has(unit, line);
	}
	assert_has(unit, "\nEnvironment=SLICECTL_ACCESS_TOKEN=" TOKEN "\n");
	assert_has(unit, " run --job \"gs://" BUCKET "/" PREFIX "\"\n");
	free(unit);

	/* Second run: not one request. */
	cr_assert_eq(fake_gcs_call(&f, "DELETE", "/_fake/requests", NULL,
				   NULL), 200);
	run_expect(&r, script, none, 0);
	assert_has(r.err, "nothing fetched");
	assert_has(r.out, "arg=[gs://" BUCKET "/" PREFIX "]\n");
	assert_has(r.out, "env SLICECTL_ACCESS_TOKEN=[" TOKEN "]");
	assert_has(r.out, "env STORAGE_EMULATOR_HOST=[127.0.0.1:");
	run_result_release(&r);
	cr_assert_eq(fake_gcs_call(&f, "GET", "/_fake/requests", NULL, &log),
		     200);
	cr_assert_str_eq(log, "[]");
	free(log);
	fake_gcs_stop(&f);
}

Test(startup, gs_a_token_from_the_metadata_server)
{
	static const struct tiny_answer answers[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		  "Content-Length: *\r\n\r\n"
		  "{\"access_token\":\"" TOKEN "\",\"expires_in\":3599,"
		  "\"token_type\":\"Bearer\"}", 0, false },
	};
	static char hostkv[128], mdkv[128];
	const char *skip[] = { "SLICE_SYSTEMD=skip", hostkv, mdkv, NULL };
	struct startup_params p = {
		.run_url = "gs://" BUCKET "/" PREFIX "/",
		.grace_s = 30,
	};
	struct tiny_http md;
	struct fake_gcs f;
	char sha[65], script[PATHLEN], bin[PATHLEN];
	char *log, *unit;
	struct run_result r;

	start_gcs_run(&f, sha, NULL);
	cr_assert_eq(tiny_start(&md, answers, 1), 0);
	snprintf(hostkv, sizeof(hostkv), "STORAGE_EMULATOR_HOST=%s", f.base);
	snprintf(mdkv, sizeof(mdkv), "GCE_METADATA_HOST=127.0.0.1:%u",
		 md.port);
	p.supervisor_sha256 = sha;
	render_script(&p, script);
	bin_path(bin, sha);

	run_expect(&r, script, skip, 0);
	run_result_release(&r);
	cr_assert(exists(bin));
	/* One token request for both objects. */
	cr_assert_eq(tiny_requests(&md), 1);
	log = tiny_log(&md);
	assert_has(log, "GET /computeMetadata/v1/instance/service-accounts/"
		   "default/token HTTP/1.1\r\n");
	assert_has(log, "Metadata-Flavor: Google\r\n");
	free(log);
	unit = read_unit();
	assert_has(unit, "\nEnvironment=GCE_METADATA_HOST=127.0.0.1:");
	assert_lacks(unit, "SLICECTL_ACCESS_TOKEN");
	free(unit);
	tiny_stop(&md);
	fake_gcs_stop(&f);
}

Test(startup, gs_refusals_missing_object_and_sha256_mismatch)
{
	static char hostkv[128];
	const char *skip[] = { "SLICE_SYSTEMD=skip", hostkv,
			       "SLICECTL_ACCESS_TOKEN=" TOKEN, NULL };
	const char *wrong[] = { "SLICE_SYSTEMD=skip", hostkv,
				"SLICECTL_ACCESS_TOKEN=ya29.wrong", NULL };
	struct startup_params p = {
		.run_url = "gs://" BUCKET "/" PREFIX,
		.grace_s = 30,
	};
	struct fake_gcs f;
	char sha[65], script[PATHLEN], bin[PATHLEN], path[PATHLEN];
	char name[512];
	struct run_result r;

	start_gcs_run(&f, sha, hostkv);

	/* Not uploaded. */
	p.supervisor_sha256 = SHA_A;
	render_script(&p, script);
	run_expect(&r, script, skip, 1);
	snprintf(path, sizeof(path), "gs://" BUCKET "/" PREFIX
		 "/supervisor/slice-supervisor-%s does not exist (HTTP 404)",
		 SHA_A);
	assert_has(r.err, path);
	run_result_release(&r);

	/* Uploaded under a name its bytes do not match. */
	path_in(path, "%s/%s", "src/job.json");
	snprintf(name, sizeof(name), PREFIX "/supervisor/slice-supervisor-%s",
		 SHA_A);
	upload(&f, name, path);
	run_expect(&r, script, skip, 1);
	assert_has(r.err, "; refused");
	run_result_release(&r);
	bin_path(bin, SHA_A);
	cr_assert(!exists(bin));
	path_in(path, "%s/%s", "root/opt/slicectl/bin");
	cr_assert_eq(count_named(path, "slice-supervisor"), 0);

	/* A token the bucket refuses. */
	p.supervisor_sha256 = sha;
	render_script(&p, script);
	run_expect(&r, script, wrong, 1);
	assert_has(r.err, "access refused (HTTP 401)");
	run_result_release(&r);
	wrong[2] = "SLICECTL_ACCESS_TOKEN=ya29.x\" -H \"Host: evil";
	run_expect(&r, script, wrong, 1);
	assert_has(r.err, "SLICECTL_ACCESS_TOKEN holds characters a token "
		   "cannot");
	run_result_release(&r);
	bin_path(bin, sha);
	cr_assert(!exists(bin));
	fake_gcs_stop(&f);
}

/* ---------------------------------------------------------------- source */

/*
 * The supervisor built from a source bundle of this tree's HEAD (git
 * archive, so half-written work in the checkout cannot break it), with
 * the default target, supervisor/slice-supervisor.
 */
Test(startup, source_a_bundle_is_built_once_then_cached, .timeout = 900)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	const char *skip[] = { "SLICE_SYSTEMD=skip", NULL };
	struct startup_params p = {
		.supervisor_from_source = true,
		.grace_s = 30,
	};
	char bundle[PATHLEN], sha[65], url[PATHLEN], script[PATHLEN];
	char bin[PATHLEN], named[PATHLEN], stamp[PATHLEN], sum[65];
	struct run_result r;

	cr_assert(src && *src, "SLICECTL_SRCDIR is not set");
	path_in(bundle, "%s/%s", "bundle.tar.zst");
	cr_assert_eq(sh("git -C '%s' archive --format=tar HEAD | zstd -q -T0 "
			"-o '%s'", src, bundle), 0);
	sha256_file(bundle, sha);
	path_in(named, "%s/run/supervisor/source-%s.tar.zst", sha);
	path_in(url, "%s/%s", "run/supervisor");
	mkdir_p(url);
	cr_assert_eq(rename(bundle, named), 0);
	path_in(url, "%s/%s", "run/job.json");
	write_text(url, "{}\n", 0644);
	render_file_run(&p, "run", sha, url, script);

	run_expect(&r, script, skip, 0);
	assert_has(r.err,
		   "building supervisor/slice-supervisor (meson setup + ninja)");
	assert_has(r.err, "fetched: job.json supervisor/source-");
	run_result_release(&r);
	bin_path(bin, sha);
	cr_assert_eq(access(bin, X_OK), 0, "no %s", bin);
	{
		const char *argv[] = { bin, "--help", NULL };

		cr_assert_eq(run_program(&r, argv, NULL), 0);
		cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
		assert_has(r.out, "slice-supervisor");
		run_result_release(&r);
	}
	/* The build directory is gone; what was built is recorded. */
	path_in(named, "%s/%s", "root/var/lib/slicectl");
	cr_assert_eq(count_named(named, "build-"), 0);
	path_in(stamp, "%s/root/var/lib/slicectl/source-%s.built", sha);
	sha256_file(bin, sum);
	{
		char *s = read_file(stamp, NULL);

		cr_assert(s, "no %s", stamp);
		cr_assert(!strncmp(s, sum, 64));
		free(s);
	}

	run_expect(&r, script, skip, 0);
	assert_has(r.err, "(sha256 checked): not fetched or built");
	assert_has(r.err, "nothing fetched");
	assert_lacks(r.err, "building");
	run_result_release(&r);
}
