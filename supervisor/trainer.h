/*
 * trainer.h (private to supervisor/): the trainer as a child process in a
 * process group of its own, so that stopping it stops everything it
 * started; its stdout and stderr come back through one pipe that the
 * supervisor's loop drains into the local log.
 */
#ifndef SLICECTL_SUPERVISOR_TRAINER_H
#define SLICECTL_SUPERVISOR_TRAINER_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct trainer {
	pid_t pid;            /* also the process group; 0: not running */
	int out_fd;           /* read end of stdout+stderr; -1 when closed */
	int log_fd;           /* the local log the output is appended to */
	uint64_t started_ms;  /* mono_ms */
	uint64_t last_output_ms;
	uint64_t start_time;  /* /proc/PID/stat starttime, to recognise it */
	bool exited;
	int status;           /* waitpid status once exited */
};

void trainer_init(struct trainer *t);

/* Starts /bin/sh -c command in dir with env (NULL-terminated "K=V",
 * replacing the supervisor's environment), output appended to log_path
 * (created 0644). */
int trainer_start(struct trainer *t, const char *command, const char *dir,
		  char *const *env, const char *log_path, struct err *e);

/* Moves what the pipe holds into the log; returns false once the pipe
 * is at its end (the trainer and all its children closed it). */
bool trainer_drain(struct trainer *t);

/* Reaps the trainer if it exited (non-blocking); true when it has. */
bool trainer_reap(struct trainer *t);

/* Sends sig to the trainer's whole process group. */
void trainer_signal(struct trainer *t, int sig);

/* Ends what is left of the group (SIGKILL), reaps, closes the pipe and
 * the log. Safe on a trainer that never started. */
void trainer_release(struct trainer *t);

/* A process group left by an earlier supervisor (found in its state
 * file): killed with SIGKILL when pid still runs with that start time. */
void trainer_kill_orphan(pid_t pgid, uint64_t start_time);

/* /proc/PID/stat's starttime (clock ticks since boot), 0 if gone. */
uint64_t proc_start_time(pid_t pid);

/* "exit 3", "signal 9 (KILL)" for a waitpid status. */
void trainer_describe_status(int status, char *out, size_t len);

#endif
