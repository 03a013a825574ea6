/*
 * tests/supervisor/run_check.c: see run_check.h.
 */
#include "tests/supervisor/run_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

int wait_child(pid_t *pid, unsigned timeout_s)
{
	int st;

	for (unsigned t = 0; t < timeout_s * 20; t++) {
		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			*pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
		}
		usleep(50000);
	}
	return -1;
}

void kill_left_trainers(const char *dir, const char *glob)
{
	sh("for f in '%s'/%s/state.json; do [ -f \"$f\" ] || continue; "
	   "g=$(sed -n 's/.*\"trainer_pgid\":\\([0-9]*\\).*/\\1/p' \"$f\"); "
	   "[ -n \"$g\" ] && [ \"$g\" -gt 1 ] && kill -9 -\"$g\" 2>/dev/null; "
	   "done; true", dir, glob);
}

void end_supervisors(pid_t *pid, unsigned n, char *dir)
{
	for (unsigned i = 0; i < n; i++)
		if (pid[i] > 0) {
			kill(pid[i], SIGKILL);
			waitpid(pid[i], NULL, 0);
			pid[i] = 0;
		}
	if (dir[0]) {
		kill_left_trainers(dir, "w*");
		rm_rf(dir);
	}
	dir[0] = '\0';
}

json_t *run_control(const char *run_dir)
{
	char path[HARNESS_PATH + 64];
	json_t *j;

	snprintf(path, sizeof(path), "%s/control.json", run_dir);
	j = json_load_file(path, 0, NULL);
	cr_assert_not_null(j, "no control.json");
	return j;
}

void assert_run_control(const char *run_dir, long long generation,
			const char *state, const char *reason_has)
{
	json_t *c = run_control(run_dir);
	char *text = json_dumps(c, 0);
	const char *st = json_string_value(json_object_get(c, "state"));
	const char *reason = json_string_value(json_object_get(c, "reason"));

	cr_assert_eq(json_integer_value(json_object_get(c, "generation")),
		     generation, "%s", text);
	cr_assert_str_eq(st, state, "%s", text);
	if (reason_has)
		cr_assert(reason && strstr(reason, reason_has), "%s", text);
	free(text);
	json_decref(c);
}

char *run_log(const char *run_dir, const char *part, long long gen)
{
	char pattern[HARNESS_PATH + 128];
	char *out = NULL;
	size_t len = 0;
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/logs/%s/gen-%lld/*.seg",
		 run_dir, part, gen);
	if (glob(pattern, 0, NULL, &g))
		return NULL;
	/* Names are zero-padded offsets: glob's order is the log's. */
	for (size_t i = 0; i < g.gl_pathc; i++) {
		size_t n;
		char *seg = read_file(g.gl_pathv[i], &n);
		char *grown;

		cr_assert_not_null(seg, "%s", g.gl_pathv[i]);
		grown = realloc(out, len + n + 1);
		cr_assert_not_null(grown);
		out = grown;
		memcpy(out + len, seg, n);
		len += n;
		out[len] = '\0';
		free(seg);
	}
	globfree(&g);
	return out;
}

bool run_committed(const char *run_dir, long long step)
{
	char path[HARNESS_PATH + 96];

	snprintf(path, sizeof(path), "%s/checkpoints/step-%010lld/COMMIT",
		 run_dir, step);
	return access(path, F_OK) == 0;
}

long long run_newest_committed(const char *run_dir)
{
	char path[HARNESS_PATH + 64];
	DIR *d;
	struct dirent *de;
	long long best = 0;

	snprintf(path, sizeof(path), "%s/checkpoints", run_dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		long long s;

		if (sscanf(de->d_name, "step-%lld", &s) == 1 &&
		    run_committed(run_dir, s) && s > best)
			best = s;
	}
	closedir(d);
	return best;
}

void run_wait_committed(const char *run_dir, long long at_least,
			unsigned timeout_s)
{
	for (unsigned t = 0; t < timeout_s * 20; t++) {
		if (run_newest_committed(run_dir) >= at_least)
			return;
		usleep(50000);
	}
	cr_assert_fail("no step >= %lld committed in %u s (newest %lld)",
		       at_least, timeout_s, run_newest_committed(run_dir));
}

void run_heartbeat_state(const char *run_dir, unsigned worker, char *out,
			 size_t cap)
{
	char path[HARNESS_PATH + 64];
	json_t *j;

	snprintf(path, sizeof(path), "%s/status/slice-0-worker-%u.json",
		 run_dir, worker);
	j = json_load_file(path, 0, NULL);
	snprintf(out, cap, "%s",
		 j ? json_string_value(json_object_get(j, "state")) : "");
	json_decref(j);
}

/* Batches are named by generation and sequence: glob's order is the
 * history's, near enough for "the last". */
unsigned run_events(const char *run_dir, const char *kind,
		    const char *worker, json_t **last)
{
	char pattern[HARNESS_PATH + 32];
	unsigned n = 0;
	glob_t g;

	if (last)
		*last = NULL;
	snprintf(pattern, sizeof(pattern), "%s/events/*.json", run_dir);
	if (glob(pattern, 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		json_t *batch = json_load_file(g.gl_pathv[i], 0, NULL);
		json_t *ev;
		size_t k;

		json_array_foreach(json_object_get(batch, "events"), k, ev) {
			const char *w = json_string_value(
				json_object_get(ev, "worker"));
			const char *what = json_string_value(
				json_object_get(ev, "kind"));

			if (!what || strcmp(what, kind) ||
			    (worker && (!w || strcmp(w, worker))))
				continue;
			n++;
			if (last) {
				json_decref(*last);
				*last = json_incref(ev);
			}
		}
		json_decref(batch);
	}
	globfree(&g);
	return n;
}

char *supervisor_log(const char *dir, unsigned i)
{
	char path[HARNESS_PATH + 16];
	char *t;

	snprintf(path, sizeof(path), "%s/sup%u.log", dir, i);
	t = read_file(path, NULL);
	return t ? t : strdup("");
}

pid_t spawn_supervisor(const char *run_url, const char *state_dir,
		       unsigned worker, const char *log,
		       const char *const *env)
{
	const char *bin = getenv("SLICE_SUPERVISOR_BIN");
	char num[16];
	pid_t pid;

	cr_assert_not_null(bin, "SLICE_SUPERVISOR_BIN is not set");
	snprintf(num, sizeof(num), "%u", worker);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		if (!freopen(log, "a", stderr))
			_exit(126);
		execl(bin, bin, "run", "--job", run_url, "--state-dir",
		      state_dir, "--control-poll", "0.2", "--slice", "0",
		      "--worker", num, "--no-metadata", (char *)NULL);
		_exit(127);
	}
	return pid;
}

double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
