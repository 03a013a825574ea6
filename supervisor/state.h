/*
 * state.h (private to supervisor/): what a supervisor must remember across
 * its own restarts (systemd restarting it after a crash or SIGKILL) and
 * across reboots: the boot it ran in, the generation it ran, and the
 * trainer's process group, so a new supervisor can end an orphaned
 * trainer and tell a reboot or slice reset from its own restart.
 */
#ifndef SLICECTL_SUPERVISOR_STATE_H
#define SLICECTL_SUPERVISOR_STATE_H

#include "common/common.h"

#include <stdint.h>
#include <sys/types.h>

struct sup_state {
	char run[1024];        /* the run URL it belonged to */
	char boot_id[40];
	int64_t generation;    /* 0: none */
	pid_t trainer_pgid;    /* 0: none */
	uint64_t trainer_start;
	bool preempted;        /* it left through the emergency path */
};

/* Reads path; a missing file is not an error (*found false). A damaged
 * one is reported and treated as missing. */
int sup_state_load(const char *path, struct sup_state *st, bool *found,
		   struct err *e);
/* Writes it atomically (temporary file, fsync, rename). */
int sup_state_save(const char *path, const struct sup_state *st,
		   struct err *e);

/* Takes STATE_DIR/lock (creating the directory), so that two supervisors
 * never share a state directory: an fcntl write lock, which the trainer
 * does not inherit and the kernel drops when this process ends however it
 * ends. *fd is the lock's file, to keep open until the end (-1 on error).
 * When another process holds it, COMMON_EIO with a message naming the
 * directory and, when the kernel says, that process's pid. */
int sup_lock(const char *state_dir, int *fd, struct err *e);

/* This boot's id: /proc/sys/kernel/random/boot_id, or the file named by
 * SLICE_BOOT_ID_FILE (the local provider's stand-in for a reboot). */
int boot_id_read(char out[40], struct err *e);

#endif
