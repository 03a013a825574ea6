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

#include "cloud/cloud.h"
#include "common/common.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum checkpoint_error {
	CKPT_OK = 0,
	CKPT_ENOMEM = COMMON_ENOMEM,
	CKPT_EINVAL = COMMON_EINVAL,
	CKPT_EIO = COMMON_EIO,
	CKPT_ESOURCE = 20, /* the source tree could not be read */
	CKPT_EWRITE,       /* the writer callback failed */
	CKPT_ECOMMITTED,   /* the step is committed: its parts are final */
	CKPT_EUNSAFE,      /* an archive entry would land outside dest */
	/* The ckpt_* functions also return cloud_error codes as they are:
	 * CLOUD_ENOTFOUND (no such step), CLOUD_ECORRUPT (a part does not
	 * match COMMIT or is not a valid archive), CLOUD_ENOSPACE (a full
	 * disk or file size limit while restoring), network errors. */
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
	/* The whole tar stream, headers and padding included: what
	 * unpacking it reads, and a bound on what it writes to disk. */
	uint64_t bytes_unpacked;
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

/*
 * Checkpoints in an object store (docs/DESIGN.md, "Bucket layout" and
 * "Commit protocol"): step N of a run is
 *     checkpoints/step-NNNNNNNNNN/PART.tar.zst   one part per host
 *     checkpoints/step-NNNNNNNNNN/COMMIT         manifest, created last
 * and exists only once COMMIT exists. COMMIT is JSON:
 *     {"step": N, "time": "RFC 3339", "parts": [{"name": "PART.tar.zst",
 *      "size": BYTES, "crc32c": UINT32, "generation": G,
 *      "unpacked": BYTES}, ...]}
 * and is created create-only, so of two committers one wins and the other
 * finds the step committed. "unpacked" (the part's tar stream, what
 * restoring it may expand to) is optional: COMMITs written before it
 * existed, or whose committer could not learn it, lack it, and restore
 * then bounds the part by CKPT_RESTORE_RATIO times its size plus
 * CKPT_RESTORE_FLOOR. The committer learns it from an empty object
 * "PART.tar.zst.unpacked-CRC32C-SIZE-UNPACKED" each save writes next to
 * its part before the part itself appears.
 */
#define CKPT_RESTORE_RATIO 64
#define CKPT_RESTORE_FLOOR ((uint64_t)1 << 30)
#define CKPT_DEFAULT_PART "slice-0-worker-0"

struct ckpt_save_options {
	struct pack_options pack;
	const char *part;        /* default CKPT_DEFAULT_PART */
	unsigned parts_expected; /* parts the step needs before COMMIT; 1 */
	/* Whether this save is a committer (the default): after its upload
	 * it lists the step once and creates COMMIT if all parts_expected
	 * parts are there (ckpt_commit). false: it uploads its part and the
	 * part's unpacked-size object and neither lists nor commits; the
	 * step's one committer does (docs/DESIGN.md, "Commit protocol"). */
	bool commit;
	/* NULL, or a flag another thread may set non-zero to stop the save:
	 * it returns CLOUD_EABORTED before the next store call or chunk of
	 * the stream, and never commits. (A request already sent to the
	 * store runs to its end first.) */
	const atomic_int *cancel;
	/* NULL, or this host's local tier: the stream is also kept as
	 * local_dir/step-NNNNNNNNNN/PART.tar.zst once the upload finished
	 * (ckpt_local_path), best effort. */
	const char *local_dir;
	/* A fast-tier step (docs/DESIGN.md, "Fast-tier steps"): the part
	 * goes to local_dir alone, which must keep it (no longer best
	 * effort: a copy that cannot be written fails the save), and not a
	 * byte to the store; nothing is listed or committed. The caller
	 * records it (ckpt_fast_record) once it knows who holds it. */
	bool fast;
};

struct ckpt_save_result {
	uint64_t bytes;          /* compressed size of this part */
	uint32_t crc32c;
	bool committed;          /* this save saw the step committed */
	struct pack_stats stats;
};

void ckpt_save_options_init(struct ckpt_save_options *o);

/* Streams dir as tar+zstd straight to the store as this host's part of
 * step (no temporary file), then, when o->commit, commits the step if
 * every expected part is there. A save killed at any moment never yields
 * a committed step. */
int ckpt_save(struct store *s, const char *dir, uint64_t step,
	      const struct ckpt_save_options *o, struct ckpt_save_result *r,
	      struct err *e);

/* Creates COMMIT when all parts_expected parts of step are present,
 * leaving out versions of parts a newer generation marked abandoned
 * (ckpt_discard_newer), and withdraws it when such a mark appears while
 * it is written. *committed tells whether the step is committed
 * afterwards (by this call or an earlier one); missing parts are not an
 * error. */
int ckpt_commit(struct store *s, uint64_t step, unsigned parts_expected,
		bool *committed, struct err *e);

/* A host holding a copy of a fast-tier step's part: the worker it is
 * (its part name, "slice-S-worker-W") and the id of the local tier it
 * keeps the copy in (ckpt_tier_id): a new disk has a new one, a reboot
 * keeps it. Each host marks its tier live in the bucket while it runs
 * and unmarks it when told its machine is going away (ckpt_tier_mark),
 * so a holder is live while its mark is there. */
struct ckpt_holder {
	char host[64];
	int64_t tier;
};
#define CKPT_HOLDERS_MAX 2

struct ckpt_part {
	char *name;          /* "PART.tar.zst" */
	struct ckpt_holder holders[CKPT_HOLDERS_MAX]; /* fast steps' only */
	size_t nholders;
	uint64_t size;
	uint32_t crc32c;
	int64_t generation;
	uint64_t unpacked;   /* 0: not known (see COMMIT above) */
};

struct ckpt_step {
	uint64_t step;
	bool committed;          /* COMMIT: every part is in the store */
	/* FAST and no COMMIT: committed on the fast tiers alone, its parts
	 * (with their holders) named by FAST, none in the store. */
	bool fast;
	bool corrupt;            /* COMMIT exists but is not a valid
				    manifest: the step cannot be restored */
	char time[40];           /* COMMIT's time, or the newest part's */
	struct ckpt_part *parts; /* from COMMIT when committed, else listed */
	size_t nparts;
	uint64_t bytes;
};

struct ckpt_list {
	struct ckpt_step *v;     /* ascending by step */
	size_t n;
};

int ckpt_list(struct store *s, struct ckpt_list *out, struct err *e);
void ckpt_list_release(struct ckpt_list *l);

/*
 * Fast-tier steps (ckpt_fast.c). A fast save's part is recorded by an
 * empty object whose name says its size, CRC32C, unpacked size and
 * holders (one LIST tells a committer everything, as the unpacked-size
 * objects do); the committer's ckpt_commit writes FAST, create-only,
 * once every part has one. A fast step is restorable only while every
 * part has a live holder, and each host's copy is checked against FAST
 * as a local copy is against COMMIT.
 */
int ckpt_fast_record(struct store *s, uint64_t step, const char *part,
		     const struct ckpt_save_result *r,
		     const struct ckpt_holder *holders, size_t n,
		     struct err *e);
/* The step a new generation restores: the newest one below `below`
 * (0: any) that is committed in the store with a sound COMMIT, or a
 * newer fast step every part of which has a live holder; 0 when there
 * is none. *fast (may be NULL) says which. */
int ckpt_choose_step(struct store *s, uint64_t below, uint64_t *step,
		     bool *fast, struct err *e);
/* Where host publishes its peer-tier address: "peers/HOST.json". */
void ckpt_peer_addr_name(char *out, size_t cap, const char *host);
/* The id of the local tier in local_dir: read from local_dir/tier-id,
 * made (random, positive) when there is none. */
int ckpt_tier_id(const char *local_dir, int64_t *id, struct err *e);
/* live: marks host's tier `id` live ("peers/HOST.tier-ID", an empty
 * object), removing the host's marks of other tiers (its disks before).
 * !live: removes the mark: its copies are no longer counted on. */
int ckpt_tier_mark(struct store *s, const char *host, int64_t id, bool live,
		   struct err *e);

struct ckpt_verify_result {
	uint64_t step;
	size_t parts_ok;
	size_t parts_bad;
	char problem[512];       /* the first problem found, if any */
};

/* Reads every part of a committed step (0: the newest) and checks size and
 * CRC32C against COMMIT. Returns 0 when it could check, whatever it found:
 * r says what. */
int ckpt_verify(struct store *s, uint64_t step, struct ckpt_verify_result *r,
		struct err *e);

struct ckpt_restore_options {
	uint64_t step;    /* 0: newest committed step whose part verifies,
			     falling back to older ones, saying why */
	const char *part; /* default: the step's only part, or
			     CKPT_DEFAULT_PART when it has several */
	/* NULL, or this host's local tier: a copy of the part there whose
	 * size and CRC32C match COMMIT is unpacked instead of the store's
	 * (no byte of the part read from the store); one that does not is
	 * deleted, saying why, and the store's is read. */
	const char *local_dir;
	bool *from_local; /* NULL, or set: the local copy was restored */
	/* NULL, or the peer tier: when local_dir has no copy, asks for one
	 * (of size bytes with crc32c, into path) from a peer: 0 when path is
	 * there; the copy is then checked and unpacked as a local one (a
	 * wrong one deleted and the store's read), and from_peer set. */
	int (*fetch)(void *ud, uint64_t step, const char *part, uint64_t size,
		     uint32_t crc32c, const char *path, struct err *e);
	void *fetch_ud;
	bool *from_peer;
};

/* Restores a part into dest atomically: unpacked (no absolute paths, no
 * "..", no symlink escapes) into a temporary sibling directory, then
 * renamed into place. On any failure dest is as it was. Only regular
 * files, directories, symlinks and hard links are restored, with their
 * permission bits (never setuid, setgid or sticky bits, never owners);
 * a part holding anything else, expanding beyond what COMMIT says it
 * unpacks to, or failing to unpack for what it holds is a bad part
 * (CKPT_EUNSAFE, CLOUD_ECORRUPT, naming the entry) and the step before
 * is tried. dest must name a directory to create or replace: "/" and
 * "." are refused before anything is read. */
int ckpt_restore(struct store *s, const char *dest,
		 const struct ckpt_restore_options *o, uint64_t *restored,
		 struct err *e);

/* Unpacks one tar+zstd object of the store (a run's code bundle, as
 * pack_tree writes it) into dest with ckpt_restore's safety and
 * atomicity: streamed without staging, no absolute paths, no "..", no
 * symlink escapes, into a temporary sibling directory that replaces dest
 * only once the whole object has arrived and its CRC32C checked. On any
 * failure dest is as it was. *generation (may be NULL) gets the object's
 * generation that was unpacked. The same entries are refused as by
 * ckpt_restore, and with no COMMIT to say what it unpacks to, the object
 * may expand to CKPT_RESTORE_RATIO times the bytes received plus
 * CKPT_RESTORE_FLOOR. Returns CLOUD_ENOTFOUND when there is no such
 * object, CLOUD_ECORRUPT when it is not a tar+zstd stream or cannot be
 * unpacked for what it holds, CKPT_EUNSAFE when an entry would land
 * outside dest or is a device, fifo or socket, CLOUD_ENOSPACE on a full
 * disk. */
int ckpt_unpack_object(struct store *s, const char *name, const char *dest,
		       int64_t *generation, struct err *e);

/* Where a save keeps step's part in a local tier: DIR/step-NNNNNNNNNN/
 * PART.tar.zst. */
void ckpt_local_path(char *out, size_t cap, const char *dir, uint64_t step,
		     const char *part);
/* Keeps the newest `keep` copies in dir of steps up to committed (the
 * newest step known committed) and the newest keep + 2 of newer steps up
 * to above (their COMMIT may still come; UINT64_MAX: any), removing the
 * rest; *dropped says how many. -1 (errno) when dir cannot be read. */
int ckpt_local_prune(const char *dir, unsigned keep, uint64_t committed,
		     uint64_t above, size_t *dropped);

/*
 * The peer tier's wire (ckpt_peer.c; docs/DESIGN.md "The peer tier"): a
 * host pushes its packed part to a partner, which keeps it in held_dir
 * as the local tier keeps its own (ckpt_local_path), and fetches it back
 * after losing its disk. Each connection first proves both ends hold the
 * run's secret (HMAC-SHA256 over fresh nonces). Every wait ends after
 * stall_ms without progress.
 */
struct ckpt_peer_server {
	const char *secret;
	const char *held_dir;    /* the parts partners pushed here */
	unsigned stall_ms;
};
/* Answers one request on connected fd (the caller closes it). */
int ckpt_peer_serve(int fd, const struct ckpt_peer_server *sv,
		    struct err *e);

struct ckpt_peer_client {
	const char *host;
	unsigned port;
	const char *secret;
	unsigned stall_ms;       /* also the connect's bound */
};
/* Sends the file at path as step's part. */
int ckpt_peer_push(const struct ckpt_peer_client *c, uint64_t step,
		   const char *part, const char *path, struct err *e);
/* Fetches step's part into path, refusing anything but size bytes of
 * CRC32C crc (CLOUD_ECORRUPT); CLOUD_ENOTFOUND when the peer has none. */
int ckpt_peer_fetch(const struct ckpt_peer_client *c, uint64_t step,
		    const char *part, uint64_t size, uint32_t crc,
		    const char *path, struct err *e);
/* The run's peer secret (s's peer.secret), made create-only by the first
 * to ask: 64 hex digits into out[cap]. */
int ckpt_peer_secret(struct store *s, char *out, size_t cap,
		     struct err *e);

struct ckpt_prune_options {
	unsigned keep;          /* newest committed steps kept, at least 1 */
	unsigned keep_every;    /* also keep steps divisible by this; 0: no */
	unsigned stale_s;       /* uncommitted steps older than the newest
				   committed one and untouched this long are
				   abandoned writes: deleted. Default 3600. */
};

/* keep 1, keep_every 0, stale_s 3600. */
void ckpt_prune_options_init(struct ckpt_prune_options *o);

struct ckpt_prune_result {
	size_t steps_deleted;
	size_t objects_deleted;
	uint64_t bytes_freed;
};

/* Never deletes the newest committed step, nor an uncommitted step newer
 * than it or touched within stale_s (a live writer's). */
int ckpt_prune(struct store *s, const struct ckpt_prune_options *o,
	       struct ckpt_prune_result *r, struct err *e);

/*
 * A new generation resumes from step `after` (0: from the start): this
 * host's parts of uncommitted steps newer than that were written by an
 * earlier generation and must not join a later COMMIT of the same step
 * number, mixed with other hosts' new parts. Deletes each at its listed
 * generation (part names "PART.tar.zst"), after marking that version
 * abandoned so that no COMMIT may name it (a committer of the earlier
 * generation may still be at work: see ckpt_discard.c); keeps it when the
 * step turns out committed. *n tells how many went. Call it before this
 * host's trainer starts: its peers cannot complete a newer step without
 * it, so no new part of this host's is deleted.
 */
int ckpt_discard_newer(struct store *s, const char *part, uint64_t after,
		       size_t *n, struct err *e);

/* The `ckpt save|ls|restore|verify|prune` command line, as prog ckpt
 * (argv[0] is "ckpt"). Returns the exit status: 0, 1 failed, 2 bad
 * arguments, 3 verify found a bad part. */
int ckpt_cli(const char *prog, int argc, char **argv);

#endif
