/*
 * supervisor/failure.c: the evidence of a trainer's failure, for the
 * cause its group restart records (run.h, struct gen_cause): how it
 * ended, whether the kernel killed it for memory, and its output's last
 * lines and their signature.
 *
 * An OOM kill is SIGKILL with nothing else to tell it from an operator's
 * kill -9, so it is told by the kernel's own count of OOM kills: the
 * supervisor's cgroup's (memory.events, cgroup v2: the trainer is its
 * child, in a pod the container's), else the machine's (/proc/vmstat),
 * moving on while the trainer ran. No dmesg: it needs privileges.
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The last bytes of the log the evidence reads. */
#define TAIL_BYTES 4096
#define TAIL_LINES 3

/* The value of `key N` in the file at path, or -1. */
static int64_t counter_in(const char *path, const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	int64_t v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			v = strtoll(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* This process's cgroup v2 memory.events, or "" (cgroup v1, none). */
static void cgroup_events(char *out, size_t cap)
{
	char line[1024];
	FILE *f = fopen("/proc/self/cgroup", "r");

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, cap, "/sys/fs/cgroup%s/memory.events",
			 strcmp(line + 3, "/") ? line + 3 : "");
		break;
	}
	fclose(f);
}

int64_t sup_oom_kills(void)
{
	char path[1100];
	int64_t v;

	cgroup_events(path, sizeof(path));
	if (path[0] && (v = counter_in(path, "oom_kill")) >= 0)
		return v;
	return counter_in("/proc/vmstat", "oom_kill");
}

/* The last TAIL_BYTES of path from `from` on, NUL-terminated (*out
 * malloc'd), or NULL. */
static char *log_tail(const char *path, off_t from)
{
	struct stat st;
	char *text;
	ssize_t n;
	off_t at;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !(text = malloc(TAIL_BYTES + 1))) {
		close(fd);
		return NULL;
	}
	at = st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
	if (at < from)
		at = from;
	n = pread(fd, text, TAIL_BYTES, at);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	return text;
}

void sup_trainer_cause(const struct sup *s, struct gen_cause *c)
{
	int st = s->trainer.status;
	bool killed = (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
		      (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL);
	int64_t ooms = killed ? sup_oom_kills() : -1;
	char *text;

	if (killed && s->oom_kills_at_start >= 0 &&
	    ooms > s->oom_kills_at_start) {
		sup_cause(s, c, CAUSE_TRAINER, "oom");
		c->signal = SIGKILL;
	} else if (WIFSIGNALED(st)) {
		sup_cause(s, c, CAUSE_TRAINER, "signal");
		c->signal = WTERMSIG(st);
	} else {
		sup_cause(s, c, CAUSE_TRAINER, "exit");
		c->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	}
	text = log_tail(s->log_path, s->trainer_log_from);
	if (text) {
		cause_signature(text, c->signature, sizeof(c->signature));
		cause_tail(text, TAIL_LINES, c->tail, sizeof(c->tail));
		free(text);
	}
}
