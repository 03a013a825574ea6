/*
 * startup/startup.h: the startup script a TPU VM runs as root on every
 * boot (the queued resource's "startup-script" metadata). It installs the
 * run's job.json and slice-supervisor (a prebuilt binary, or built from a
 * source bundle, also when the binary does not run on the worker) under
 * /opt/slicectl, checked by sha256 and cached by it,
 * writes the slice-supervisor.service unit and starts it with systemd.
 *
 * The script is startup/startup.sh.in, embedded at build time; rendering
 * fills in the values below, shell-quoted. Its behaviour, and the
 * environment it reads (SLICE_ROOT, SLICE_SYSTEMD, the endpoint overrides),
 * are described at the top of that file.
 */
#ifndef SLICECTL_STARTUP_H
#define SLICECTL_STARTUP_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>

enum startup_error {
	STARTUP_OK = 0,
	STARTUP_ENOMEM = COMMON_ENOMEM,
	STARTUP_EINVAL = COMMON_EINVAL, /* a malformed value */
	STARTUP_ETOOBIG = 60, /* the script exceeds STARTUP_MAX_BYTES */
	STARTUP_ETEMPLATE,    /* the embedded template names an unknown
				 @PLACEHOLDER@ (a build defect) */
};

/* GCE's limit on one metadata value. */
#define STARTUP_MAX_BYTES (256u * 1024u)
/* The largest grace period rendered (a day). */
#define STARTUP_MAX_GRACE_S 86400u
/* What a source bundle builds, relative to its meson build directory. */
#define STARTUP_SOURCE_TARGET "supervisor/slice-supervisor"

struct startup_params {
	const char *run_url;            /* gs://... or file:///... */
	const char *supervisor_sha256;  /* 64 lowercase hex chars */
	bool supervisor_from_source;    /* source bundle instead of a binary */
	/* The binary is a slice-supervisor.portable (its own loader and
	 * libraries): the script's log says which kind runs. */
	bool supervisor_portable;
	unsigned grace_s;               /* the supervisor's grace period */
	/* With supervisor_from_source: the ninja target (an output path in
	 * the build directory) installed as the supervisor. NULL means
	 * STARTUP_SOURCE_TARGET. */
	const char *source_target;
	/* With a binary: the sha256 of the run's source bundle
	 * (supervisor/source-SHA256.tar.zst), built on a worker where the
	 * fetched binary does not run (its --version fails: an older glibc,
	 * a missing library). NULL: no such bundle; the script then stops
	 * there, saying why. */
	const char *source_sha256;
};

/*
 * The script with p's values filled in, shell-quoted: *out (malloc'd,
 * NUL-terminated) and *len. Returns 0, or STARTUP_EINVAL when a value is
 * malformed, STARTUP_ETOOBIG when the script would exceed
 * STARTUP_MAX_BYTES, with e saying which and why.
 */
int startup_render(const struct startup_params *p, char **out, size_t *len,
		   struct err *e);

#endif
