/*
 * tests/harness/escaper.c: `escaper READY` starts a daemon the way slurmd
 * and slurmctld do (fork, setsid, fork again), so that it leaves the
 * caller's process group and session, and then blocks like a test using
 * it. The daemon runs as `escaper --daemon READY`, so test_reaper.c finds
 * it by its command line, and creates READY once it runs.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int daemon_main(const char *ready)
{
	int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0) {
		perror(ready);
		return 1;
	}
	close(fd);
	for (;;)
		pause();
}

/* The first fork's child: a new session, and the daemon forked off it
 * so that it is no session leader either. */
static int detach(const char *self, const char *ready)
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
		execl(self, "escaper", "--daemon", ready, (char *)NULL);
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
		fprintf(stderr, "usage: escaper READY\n");
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
