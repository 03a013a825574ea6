/*
 * procs.c: finding a test's processes by what /proc says of them (see
 * harness.h), for chaos aimed at one trainer whose pid no status shows.
 */
#include "tests/harness/harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool process_has(pid_t pid, const char *file, const char *a, const char *b)
{
	char path[64], buf[65536];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = '\n';
	buf[n] = '\0';
	return strstr(buf, a) && (!b || strstr(buf, b));
}

unsigned processes_with(const char *cmd_a, const char *cmd_b,
			const char *env_a, const char *env_b, pid_t *first)
{
	struct dirent *d;
	unsigned n = 0;
	DIR *dp = opendir("/proc");

	if (first)
		*first = 0;
	if (!dp)
		return 0;
	while ((d = readdir(dp))) {
		pid_t pid;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		pid = (pid_t)atoi(d->d_name);
		if (!process_has(pid, "cmdline", cmd_a, cmd_b) ||
		    (env_a && !process_has(pid, "environ", env_a, env_b)))
			continue;
		if (first && !n)
			*first = pid;
		n++;
	}
	closedir(dp);
	return n;
}
