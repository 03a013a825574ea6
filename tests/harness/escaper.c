/*
 * tests/harness/escaper.c: `escaper TAG` starts a daemon the way slurmd
 * and slurmctld do (fork, setsid, fork again), so that it leaves the
 * caller's process group and session, and then blocks like a test using
 * it. The daemon runs as `escaper --daemon TAG`, so test_reaper.c finds
 * it by its command line, and prints "TAG ready" once it runs.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int daemon_main(const char *tag)
{
	if (printf("%s ready\n", tag) < 0 || fflush(stdout) != 0)
		return 1;
	for (;;)
		pause();
}

/* The first fork's child: a new session, and the daemon forked off it
 * so that it is no session leader either. */
static int detach(const char *self, const char *tag)
{
	if (setsid() < 0) {
		perror("escaper: setsid");
		return 1;
	}
	switch (fork()) {
	case -1:
		perror("escaper: fork");
		return 1;
	case 0:
		execl(self, "escaper", "--daemon", tag, (char *)NULL);
		perror("escaper: exec");
		return 127;
	default:
		return 0;
	}
}

int main(int argc, char **argv)
{
	pid_t pid;

	if (argc == 3 && !strcmp(argv[1], "--daemon"))
		return daemon_main(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: escaper TAG\n");
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("escaper: fork");
		return 1;
	}
	if (pid == 0)
		_exit(detach("/proc/self/exe", argv[1]));
	for (;;)
		pause();
}
