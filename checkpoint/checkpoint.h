/*
 * checkpoint/checkpoint.h: directories as tar+zstd streams.
 *
 * Packing reads the tree once and hands the compressed stream to a writer
 * callback as it is produced, so nothing is staged in a temporary file and
 * memory stays bounded whatever the size of the tree. The stream is a POSIX
 * pax tar (odd file names, long names, symlinks kept as symlinks, empty
 * directories, modes) inside zstd frames with content checksums, readable by
 * `zstd -dc | tar -xf -`.
 */
#ifndef SLICECTL_CHECKPOINT_H
#define SLICECTL_CHECKPOINT_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

enum checkpoint_error {
	CKPT_OK = 0,
	CKPT_ENOMEM = COMMON_ENOMEM,
	CKPT_EINVAL = COMMON_EINVAL,
	CKPT_EIO = COMMON_EIO,
	CKPT_ESOURCE = 20, /* the source tree could not be read */
	CKPT_EWRITE,       /* the writer callback failed */
};

/* Returns 0, or an error code after filling e. */
typedef int (*pack_write_fn)(void *ud, const void *data, size_t len,
			     struct err *e);

struct pack_options {
	int level;        /* zstd level, 1..19; default 3 */
	/* zstd worker threads; 0: one per online CPU. Fewer are used when
	 * their buffers would not fit in about 192 MiB (at level 3, 19). */
	unsigned threads;
};

struct pack_stats {
	uint64_t files, dirs, symlinks;
	uint64_t bytes_in;  /* file content read */
	uint64_t bytes_out; /* compressed bytes handed to the writer */
};

void pack_options_init(struct pack_options *o);

/*
 * Packs src. A directory's entries are stored relative to it (its contents,
 * not its name); a regular file is stored under its base name. Symlinks are
 * stored, never followed (src itself may be a symlink: it is followed).
 * Sockets, fifos and devices are skipped with a warning. o and stats may be
 * NULL.
 *
 * The writer sees the stream in chunks of 1 MiB (the last one shorter).
 * Returns CKPT_ESOURCE when src is missing or something in it cannot be
 * read, or when a file changes while it is read (an entry deleted before
 * it is read is left out instead); CKPT_EWRITE with the writer's own
 * message when the writer fails; CKPT_EINVAL for bad options. After an
 * error the writer is not called again and what it received is not a
 * complete stream.
 */
int pack_tree(const char *src, const struct pack_options *o,
	      pack_write_fn write, void *ud, struct pack_stats *stats,
	      struct err *e);

#endif
