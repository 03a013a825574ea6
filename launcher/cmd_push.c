/*
 * cmd_push.c: `slicectl push SRC [DEST]`: SRC is read once, packed as
 * tar+zstd into an unlinked temporary file, and that one stream is sent to
 * every host at its own pace. Each host stores it next to DEST, checks its
 * size and SHA-256 before unpacking anything, then unpacks it into DEST.
 */
#include "checkpoint/checkpoint.h"
#include "launcher/fanout_cmd.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
	"usage: slicectl push [host options] SRC [DEST]\n"
	"\n"
	"Copies SRC (a directory's contents, or a file) into the directory\n"
	"DEST on every host. DEST defaults to the base name of SRC in the\n"
	"remote home directory; a DEST starting with ~/ is relative to it.\n"
	"The stream is tar+zstd, verified by size and SHA-256 on each host\n"
	"before it is unpacked; hosts need tar, zstd and sha256sum.\n"
	"\n"
	"Exit status: as for slicectl run.";

struct packed {
	int fd;
	size_t len;
	EVP_MD_CTX *sha;
	unsigned char *map;
};

static int write_packed(void *ud, const void *data, size_t len, struct err *e)
{
	struct packed *p = ud;
	int rc;

	if (!EVP_DigestUpdate(p->sha, data, len))
		return err_set(e, COMMON_EIO, "SHA-256 failed");
	if ((rc = fs_write_all(p->fd, data, len)))
		return err_errno(e, COMMON_EIO, rc,
				 "writing the packed copy to $TMPDIR "
				 "(set TMPDIR to a roomier place)");
	p->len += len;
	return 0;
}

static int pack_source(const char *src, struct packed *p, char *hex,
		       struct err *e)
{
	const char *tmpdir = getenv("TMPDIR");
	char path[4096];
	struct pack_options po;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/slicectl-push.XXXXXX",
		 tmpdir && *tmpdir ? tmpdir : "/tmp");
	p->fd = mkstemp(path);
	if (p->fd < 0)
		return err_errno(e, COMMON_EIO, errno, "creating %s", path);
	unlink(path);
	p->sha = EVP_MD_CTX_new();
	if (!p->sha || !EVP_DigestInit_ex(p->sha, EVP_sha256(), NULL))
		return err_set(e, COMMON_ENOMEM, "SHA-256 unavailable");
	pack_options_init(&po);
	rc = pack_tree(src, &po, write_packed, p, NULL, e);
	if (rc)
		return rc;
	if (!EVP_DigestFinal_ex(p->sha, md, &mdlen))
		return err_set(e, COMMON_EIO, "SHA-256 failed");
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	p->map = mmap(NULL, p->len, PROT_READ, MAP_SHARED, p->fd, 0);
	if (p->map == MAP_FAILED) {
		p->map = NULL;
		return err_errno(e, COMMON_EIO, errno, "mapping the packed copy");
	}
	return 0;
}

static void packed_release(struct packed *p)
{
	if (p->map)
		munmap(p->map, p->len);
	if (p->fd >= 0)
		close(p->fd);
	EVP_MD_CTX_free(p->sha);
}

/* The remote half. It only reads the stream from stdin and trusts nothing
 * in it until size and checksum match. */
static int remote_command(struct buf *b, const char *dest, size_t len,
			  const char *hex)
{
	int rc = buf_appends(b, "set -e; umask 022; d=");

	if (!strncmp(dest, "~/", 2))
		rc = rc || buf_appends(b, "\"$HOME\"/") ||
		     shq_append(b, dest + 2);
	else
		rc = rc || shq_append(b, dest);
	rc = rc || buf_appendf(b,
		"; for t in tar zstd sha256sum; do command -v $t >/dev/null || "
		"{ echo \"slicectl push: $t is not installed here "
		"(apt-get install $t)\" >&2; exit 127; }; done; "
		"mkdir -p -- \"$d\"; "
		"f=$(mktemp \"$d/.slicectl-push.XXXXXX\"); "
		"trap 'rm -f \"$f\"' EXIT; "
		"cat > \"$f\"; "
		"n=$(wc -c < \"$f\"); "
		"if [ \"$n\" -ne %zu ]; then echo \"slicectl push: received "
		"$n of %zu bytes\" >&2; exit 3; fi; "
		"echo '%s  '\"$f\" | sha256sum -c --status || "
		"{ echo 'slicectl push: checksum mismatch: the stream was "
		"corrupted in transit' >&2; exit 3; }; "
		"zstd -dcq -- \"$f\" | tar -xf - -C \"$d\" --no-same-owner",
		len, len, hex);
	return rc ? COMMON_ENOMEM : 0;
}

static const char *default_dest(const char *src, char *out, size_t len)
{
	struct stat st;
	const char *base;
	size_t n = strlen(src);

	while (n > 1 && src[n - 1] == '/')
		n--;
	base = src + n;
	while (base > src && base[-1] != '/')
		base--;
	if (stat(src, &st) == 0 && !S_ISDIR(st.st_mode))
		snprintf(out, len, ".");
	else
		snprintf(out, len, "%.*s", (int)(src + n - base), base);
	return out;
}

int cmd_push(int argc, char **argv)
{
	struct host_options ho;
	struct strlist pos;
	struct fanout_config cfg;
	struct packed p = { .fd = -1 };
	struct buf cmd;
	struct err e;
	char hex[2 * EVP_MAX_MD_SIZE + 1] = "", dest[4096];
	int rc, status;

	host_options_init(&ho);
	strlist_init(&pos);
	buf_init(&cmd);
	err_init(&e);
	status = host_options_parse(&ho, argc, argv, usage, false, &pos);
	if (status >= 0)
		goto out;
	if (pos.n < 1 || pos.n > 2) {
		log_error("want SRC and at most one DEST (see slicectl push "
			  "--help)");
		status = EXIT_USAGE;
		goto out;
	}
	if (access(pos.v[0], R_OK)) {
		log_error("cannot read %s: %s", pos.v[0], strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	rc = pack_source(pos.v[0], &p, hex, &e);
	if (!rc)
		rc = remote_command(&cmd,
				    pos.n == 2 ? pos.v[1]
					       : default_dest(pos.v[0], dest,
							      sizeof(dest)),
				    p.len, hex);
	if (rc) {
		log_error("%s", rc == COMMON_ENOMEM ? "out of memory" : e.msg);
		status = EXIT_FAILURE_SSH;
		goto out;
	}
	log_info("packed %s: %zu bytes (tar+zstd), sha256 %.16s...",
		 pos.v[0], p.len, hex);
	fanout_config_init(&cfg);
	cfg.command = cmd.data;
	cfg.input = p.map;
	cfg.input_len = p.len;
	status = fanout_cmd_run(&ho, &cfg, true);
out:
	packed_release(&p);
	buf_release(&cmd);
	strlist_release(&pos);
	host_options_release(&ho);
	return status;
}
