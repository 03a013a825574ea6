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
 *
 * A hang's evidence is the forensics taken before the trainer is ended
 * (forensics.h), kept in STATE_DIR/forensics/ and put in the bucket by
 * the syncer as forensics/gen-G/slice-S-worker-W.txt.
 */
#include "supervisor/sup.h"
#include "supervisor/forensics.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The last bytes of the log the evidence reads, and those the bad-host
 * pattern is matched against: a driver's error comes before the
 * traceback it causes. */
#define TAIL_BYTES 4096
#define TAIL_LINES 3
#define BLAME_BYTES (64 * 1024)

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
	text = fs_read_tail(s->log_path, s->trainer_log_from, TAIL_BYTES,
			    NULL);
	if (text) {
		cause_signature(text, c->signature, sizeof(c->signature));
		cause_tail(text, TAIL_LINES, c->tail, sizeof(c->tail));
		free(text);
	}
	text = s->job.bad_host_pattern
		       ? fs_read_tail(s->log_path, s->trainer_log_from,
				      BLAME_BYTES, NULL)
		       : NULL;
	cause_blame(c, text, s->job.bad_host_pattern);
	free(text);
}

/* Where generation's forensics of this worker are kept, and their
 * object's name under the run. */
static void forensics_names(const struct sup *s, char *dir, size_t dir_cap,
			    char *path, size_t path_cap, char *name,
			    size_t name_cap)
{
	snprintf(dir, dir_cap, "%s/forensics", s->o->state_dir);
	snprintf(path, path_cap, "%s/gen-%lld.txt", dir,
		 (long long)s->generation);
	snprintf(name, name_cap, "forensics/gen-%lld/%s.txt",
		 (long long)s->generation, s->id.name);
}

void sup_hang_forensics(struct sup *s, char *details, size_t cap)
{
	struct forensics_request r = { .signal = s->job.hang_signal,
				       .log_path = s->log_path,
				       .log_from = s->trainer_log_from };
	char header[1024], dir[1200], path[1300], name[256], now[40];
	struct buf b;
	struct err e;

	details[0] = '\0';
	rfc3339_now(now, sizeof(now));
	snprintf(header, sizeof(header),
		 "slicectl hang forensics: run %s, %s (process %u of %u), "
		 "generation %lld, %s\n"
		 "the trainer (process group %ld) printed nothing and wrote "
		 "no step for %u s; its step %lld, restored %lld\n",
		 s->job.name, s->id.name, s->id.process_id,
		 s->id.num_processes, (long long)s->generation, now,
		 (long)s->trainer.pid, s->job.hang_timeout_s,
		 (long long)s->trained, (long long)s->restored);
	r.header = header;
	buf_init(&b);
	if (forensics_collect(&r, &s->trainer, &b, &e))
		log_warn("hang forensics: %s", e.msg);
	forensics_names(s, dir, sizeof(dir), path, sizeof(path), name,
			sizeof(name));
	if (fs_mkdir_p(dir, 0755, &e) ||
	    fs_write_atomic(path, b.data ? b.data : "", b.len, 0644, true,
			    &e)) {
		log_warn("hang forensics not kept: %s", e.msg);
	} else {
		log_info("hang forensics: %zu bytes, for %s", b.len, name);
		snprintf(details, cap, "{\"forensics\":\"%s\",\"bytes\":%zu}",
			 name, b.len);
	}
	buf_release(&b);
}

void sup_ship_forensics(struct sup *s)
{
	char dir[1200], path[1300], name[256];

	forensics_names(s, dir, sizeof(dir), path, sizeof(path), name,
			sizeof(name));
	syncer_upload(s->sync, path, name);
}
