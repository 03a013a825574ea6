/*
 * tests/harness/gcs.c: the GCS fake (tests/fakes/gcs_fake.py) as a real
 * server for tests: started on a free loopback port, stopped by pid, and
 * never outliving the test that started it.
 */
#include "tests/harness/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HARNESS_GCS_FAKE
#error "tests/harness/meson.build defines HARNESS_GCS_FAKE"
#endif

int gcs_fake_start(struct gcs_fake *g, const char *const *extra_args)
{
	char port_file[HARNESS_PATH + 16];
	const char *argv[32];
	size_t n = 0;
	pid_t parent = getpid();

	memset(g, 0, sizeof(*g));
	if (make_temp_dir(g->dir, sizeof(g->dir), "gcs") < 0)
		return -1;
	snprintf(port_file, sizeof(port_file), "%s/port", g->dir);
	argv[n++] = "python3";
	argv[n++] = HARNESS_GCS_FAKE;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	for (size_t i = 0; extra_args && extra_args[i] && n < 30; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;
	g->pid = fork();
	if (g->pid < 0)
		return -1;
	if (g->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		char *s = read_file(port_file, NULL);

		if (s && atoi(s) > 0) {
			g->port = (unsigned)atoi(s);
			free(s);
			snprintf(g->endpoint, sizeof(g->endpoint),
				 "http://127.0.0.1:%u", g->port);
			snprintf(g->env, sizeof(g->env),
				 "STORAGE_EMULATOR_HOST=%s", g->endpoint);
			return 0;
		}
		free(s);
		if (waitpid(g->pid, NULL, WNOHANG) == g->pid) {
			fprintf(stderr, "harness: the GCS fake exited at start\n");
			g->pid = 0;
			return -1;
		}
		usleep(50 * 1000);
	}
	fprintf(stderr, "harness: the GCS fake did not write its port\n");
	gcs_fake_stop(g);
	return -1;
}

void gcs_fake_stop(struct gcs_fake *g)
{
	if (g->pid > 0) {
		kill(g->pid, SIGTERM);
		while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
			;
		g->pid = 0;
	}
	if (g->dir[0])
		rm_rf(g->dir);
	g->dir[0] = '\0';
}
