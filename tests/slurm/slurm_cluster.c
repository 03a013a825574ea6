/*
 * slurm_cluster.c: see slurm_cluster.h.
 */
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

char slurm_dir[HARNESS_PATH];
char slurm_bucket[HARNESS_PATH + 32];

static const char *script(void)
{
	static char path[HARNESS_PATH + 64];

	snprintf(path, sizeof(path), "%s/tests/slurm/slurm-cluster.sh",
		 getenv("SLICECTL_SRCDIR"));
	return path;
}

/* slurm-cluster.sh CMD DIR/slurm [NODES]: its daemons must not inherit
 * the test's other descriptors (criterion's channel to its runner would
 * stay open for as long as they live), so they are all closed first. */
static int cluster_script(const char *cmd, const char *nodes)
{
	char where[HARNESS_PATH + 16];
	int status;
	pid_t pid;

	snprintf(where, sizeof(where), "%s/slurm", slurm_dir);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		execl("/bin/sh", "sh", script(), cmd, where, nodes,
		      (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void slurm_cluster_start(unsigned nodes)
{
	char count[16];

	char conf[HARNESS_PATH + 64];

	cr_assert_eq(make_temp_dir(slurm_dir, sizeof(slurm_dir), "slurm"), 0);
	snprintf(slurm_bucket, sizeof(slurm_bucket), "file://%s/bucket",
		 slurm_dir);
	cr_assert_eq(sh("mkdir -p '%s/bucket' '%s/slurm'", slurm_dir,
			slurm_dir), 0);
	snprintf(count, sizeof(count), "%u", nodes);
	cr_assert_eq(cluster_script("start", count), 0, "Slurm did not start");
	snprintf(conf, sizeof(conf), "%s/slurm/slurm.conf", slurm_dir);
	setenv("SLURM_CONF", conf, 1);
	setenv("TMPDIR", slurm_dir, 1);
	setenv("SLICECTL_SLURM_POLL_MS", "200", 1);
	cr_assert_eq(chdir(slurm_dir), 0);
}

#define REST_START_MS 60000 /* a bound: its exit is seen at once */

static pid_t rest_pid;

/* A loopback port free now (slurmrestd binds it a moment later). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

void slurm_rest_start(char *url, size_t len, bool jwt)
{
	char listen[HARNESS_PATH + 40], log[HARNESS_PATH + 64];

	if (jwt) {
		int port = free_port();

		cr_assert_gt(port, 0);
		snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
		snprintf(url, len, "http://%s", listen);
	} else {
		snprintf(listen, sizeof(listen), "unix:%s/slurm/rest.sock",
			 slurm_dir);
		snprintf(url, len, "%s", listen);
	}
	snprintf(log, sizeof(log), "%s/slurm/log/slurmrestd.log", slurm_dir);
	rest_pid = fork();
	cr_assert_geq(rest_pid, 0);
	if (rest_pid == 0) {
		int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(out, 1);
		dup2(out, 2);
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		setenv("SLURMRESTD_SECURITY", "disable_user_check", 1);
		execl("/usr/sbin/slurmrestd", "slurmrestd", "-a",
		      jwt ? "rest_auth/jwt" : "rest_auth/local", "-s",
		      "openapi/v0.0.38", listen, (char *)NULL);
		dprintf(out, "exec /usr/sbin/slurmrestd: %s (scripts/deps "
			"installs slurmrestd)\n", strerror(errno));
		_exit(127);
	}
	/* Any answer will do: rest_auth/jwt refuses a ping without a
	 * token. */
	for (long long until = slurm_now_ms() + REST_START_MS;;) {
		if (sh("curl -s -o /dev/null --max-time 2 %s%s%s "
		       "http://%s/slurm/v0.0.38/ping", jwt ? "" : "--unix-socket '",
		       jwt ? "" : listen + 5, jwt ? "" : "'",
		       jwt ? listen : "x") == 0)
			return;
		if (waitpid(rest_pid, NULL, WNOHANG) == rest_pid) {
			rest_pid = 0;
			sh("tail -n 20 '%s' >&2", log);
			cr_assert_fail("slurmrestd exited at start (%s)", log);
		}
		if (slurm_now_ms() >= until)
			break;
		usleep(100000);
	}
	sh("tail -n 20 '%s' >&2", log);
	cr_assert_fail("slurmrestd did not answer on %s within %d s", listen,
		       REST_START_MS / 1000);
}

void slurm_rest_stop(void)
{
	if (rest_pid <= 0)
		return;
	kill(rest_pid, SIGTERM);
	for (int i = 0; i < 100 && waitpid(rest_pid, NULL, WNOHANG) == 0; i++)
		usleep(100000);
	if (waitpid(rest_pid, NULL, WNOHANG) == 0) {
		kill(rest_pid, SIGKILL);
		waitpid(rest_pid, NULL, 0);
	}
	rest_pid = 0;
}

void slurm_cluster_stop(void)
{
	if (!*slurm_dir)
		return;
	slurm_rest_stop();
	cluster_script("stop", NULL);
	cr_expect_eq(chdir("/"), 0);
	cr_expect_eq(processes_mentioning(slurm_dir), 0,
		     "processes left behind");
	rm_rf(slurm_dir);
	*slurm_dir = '\0';
}

void slurm_no_run(const char *run)
{
	char path[HARNESS_PATH + 64];

	snprintf(path, sizeof(path), "%s/bucket/%s/job.json", slurm_dir, run);
	cr_expect_eq(access(path, F_OK), -1, "%s was created", path);
}

long long slurm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *slurm_status(const char *run)
{
	struct run_result r;
	json_t *j;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", run, "--bucket",
					  slurm_bucket, "--format", "json",
					  NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "status: %s%s", r.out, r.err);
	j = json_loads(r.out, 0, NULL);
	cr_assert_not_null(j, "status printed no JSON: %s", r.out);
	run_result_release(&r);
	return j;
}

const char *slurm_jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static long long jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static bool all_running(json_t *j, size_t n, long long gen, long long step)
{
	json_t *w;
	size_t i, ok = 0;

	json_array_foreach(json_object_get(j, "workers"), i, w)
		ok += !strcmp(slurm_jstr(w, "state"), "running") &&
		      jint(w, "generation") == jint(j, "generation");
	return ok == n && jint(j, "generation") >= gen &&
	       jint(j, "committed_step") >= step;
}

void slurm_dump(void)
{
	sh("cd '%s' && tail -n 40 slurm-*.out slurm/log/*.log "
	   "slicectl-*/state-*/logs/*.log >&2 2>/dev/null", slurm_dir);
}

/* Polls status until done(j) or ms pass (failing with what). */
static json_t *poll_status(const char *run, long ms,
			   bool (*done)(json_t *, const void *),
			   const void *arg, const char *what)
{
	long long until = slurm_now_ms() + ms;
	json_t *j = NULL;

	for (;;) {
		json_decref(j);
		j = slurm_status(run);
		if (done(j, arg))
			return j;
		if (slurm_now_ms() >= until) {
			char *text = json_dumps(j, JSON_INDENT(1));

			fprintf(stderr, "%s\n", text ? text : "");
			free(text);
			json_decref(j);
			slurm_dump();
			cr_assert_fail("%s: %s never came (above: its status, "
				       "the jobs' output and the logs)", run,
				       what);
		}
		sleep_ms(500);
	}
}

struct running_want {
	size_t n;
	long long gen, step;
};

static bool running_done(json_t *j, const void *arg)
{
	const struct running_want *w = arg;

	return all_running(j, w->n, w->gen, w->step);
}

json_t *slurm_wait_running(const char *run, size_t n, long long gen,
			   long long min_step)
{
	struct running_want w = { n, gen, min_step };

	return poll_status(run, 180000, running_done, &w,
			   "every worker running");
}

static bool state_done(json_t *j, const void *arg)
{
	return !strcmp(slurm_jstr(j, "state"), arg);
}

json_t *slurm_wait_state(const char *run, const char *state, long ms)
{
	return poll_status(run, ms, state_done, state, state);
}


long slurm_wait_job(const char *job_id, const char *state, const char *reason,
		    long ms)
{
	long long until = slurm_now_ms() + ms;
	char want[128];

	snprintf(want, sizeof(want), "JobState=%s ", state);
	for (;;) {
		struct run_result r;
		const char *at;

		/* A dead slurmctld makes scontrol wait out its retries. */
		cr_assert_eq(run_program(&r, (const char *const[]){
						 "timeout", "10", "scontrol",
						 "show", "job",
						 "--oneliner", job_id, NULL },
					 NULL),
			     0);
		at = strstr(r.out, " Restarts=");
		if (strstr(r.out, want) &&
		    (!reason || strstr(r.out, reason)) && at) {
			long restarts = strtol(at + 10, NULL, 10);

			run_result_release(&r);
			return restarts;
		}
		if (slurm_now_ms() >= until) {
			fprintf(stderr, "%s%s", r.out, r.err);
			run_result_release(&r);
			slurm_dump();
			cr_assert_fail("job %s never got %s %s (above: its "
				       "record, output and the logs)",
				       job_id, state, reason ? reason : "");
		}
		run_result_release(&r);
		sleep_ms(300);
	}
}

/* Lets a requeued job run again at once, once every supervisor of the
 * last allocation has gone (a node set down here is still up: its old
 * step must not overlap the new one, whose step id is the same); returns
 * once it runs with a restart count of at least restarts. */
void slurm_release_requeued(const char *id, long restarts)
{
	long long until = slurm_now_ms() + 60000;
	char cmd[128];

	slurm_wait_job(id, "PENDING", "Reason=BeginTime", 60000);
	while (processes_with(slurm_dir, "slice-supervisor", NULL, NULL,
			      NULL)) {
		cr_assert_lt(slurm_now_ms(), until, "the old step lives on");
		sleep_ms(200);
	}
	/* slurmd refuses a credential made in the second its job was
	 * requeued ("Job credential revoked": it compares whole seconds);
	 * the BeginTime hold the test skips is what avoids that. */
	sleep_ms(1100);
	snprintf(cmd, sizeof(cmd), "scontrol update JobId=%s StartTime=now",
		 id);
	cr_assert_eq(sh("%s", cmd), 0);
	cr_assert_geq(slurm_wait_job(id, "RUNNING", NULL, 60000), restarts);
}

long long slurm_generation(json_t *j)
{
	long long g = json_integer_value(json_object_get(j, "generation"));

	json_decref(j);
	return g;
}
