/*
 * state.c: see state.h.
 */
#include "supervisor/state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

static void copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

int sup_state_load(const char *path, struct sup_state *st, bool *found,
		   struct err *e)
{
	json_error_t je;
	json_t *j;

	memset(st, 0, sizeof(*st));
	*found = false;
	j = json_load_file(path, 0, &je);
	(void)e;
	if (!j) {
		if (access(path, F_OK) == 0)
			log_warn("state file %s is damaged (%s); starting "
				 "afresh", path, je.text);
		return 0;
	}
	copy(st->run, sizeof(st->run),
	     json_string_value(json_object_get(j, "run")));
	copy(st->boot_id, sizeof(st->boot_id),
	     json_string_value(json_object_get(j, "boot_id")));
	st->generation = json_integer_value(json_object_get(j, "generation"));
	st->trainer_pgid =
		(pid_t)json_integer_value(json_object_get(j, "trainer_pgid"));
	st->trainer_start = (uint64_t)json_integer_value(
		json_object_get(j, "trainer_start"));
	st->preempted = json_is_true(json_object_get(j, "preempted"));
	json_decref(j);
	*found = true;
	return 0;
}

int sup_state_save(const char *path, const struct sup_state *st,
		   struct err *e)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b}", "run", st->run,
			      "boot_id", st->boot_id, "generation",
			      (json_int_t)st->generation, "trainer_pgid",
			      (json_int_t)st->trainer_pgid, "trainer_start",
			      (json_int_t)st->trainer_start, "preempted",
			      st->preempted);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct buf out;
	int rc = 0;

	json_decref(j);
	buf_init(&out);
	if (!text || buf_appends(&out, text) || buf_appends(&out, "\n"))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	else if (fs_write_atomic(path, out.data, out.len, 0600, true, e))
		rc = e->code;
	free(text);
	buf_release(&out);
	return rc;
}

/* The holder's pid as the kernel knows it: 0 when it lives in another
 * pid namespace (a pod's supervisor seen from the host) or just let go. */
static pid_t lock_holder(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	if (fcntl(fd, F_GETLK, &fl) || fl.l_type == F_UNLCK)
		return 0;
	return fl.l_pid;
}

int sup_lock(const char *state_dir, int *fd, struct err *e)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char path[1100];
	pid_t holder;
	int rc;

	*fd = -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/lock", state_dir) >=
	    sizeof(path))
		return err_set(e, COMMON_EINVAL, "state directory too long: %s",
			       state_dir);
	if (fs_mkdir_p(state_dir, 0755, e))
		return e->code;
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return err_errno(e, COMMON_EIO, errno, "cannot open %s", path);
	if (!fcntl(*fd, F_SETLK, &fl))
		return 0;
	if (errno != EACCES && errno != EAGAIN)
		rc = err_errno(e, COMMON_EIO, errno, "cannot lock %s", path);
	else if ((holder = lock_holder(*fd)) > 0)
		rc = err_set(e, COMMON_EIO,
			     "state directory %s is in use by another "
			     "supervisor (pid %ld holds %s)",
			     state_dir, (long)holder, path);
	else
		rc = err_set(e, COMMON_EIO,
			     "state directory %s is in use by another "
			     "supervisor (it holds %s)", state_dir, path);
	close(*fd);
	*fd = -1;
	return rc;
}

int boot_id_read(char out[40], struct err *e)
{
	const char *path = getenv("SLICE_BOOT_ID_FILE");
	FILE *f;

	if (!path || !*path)
		path = "/proc/sys/kernel/random/boot_id";
	f = fopen(path, "r");
	if (!f)
		return err_errno(e, COMMON_EIO, errno, "cannot read %s", path);
	if (!fgets(out, 40, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, " \n")] = '\0';
	if (!out[0])
		return err_set(e, COMMON_EIO, "%s is empty", path);
	return 0;
}
