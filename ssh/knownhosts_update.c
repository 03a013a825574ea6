/*
 * knownhosts_update.c: replaces the keys of some hosts in a known_hosts
 * file with keys from a trusted source, keeping every other line as it
 * was. A plain line naming several hosts loses only the names being
 * replaced; a hashed line for one of them is dropped, since its name
 * cannot be rewritten. Wildcard patterns are the user's and stay.
 *
 * Writers take an exclusive lock on "path.lock" (not on path, which the
 * rename replaces) and read the file only once they hold it, so two
 * updates for different hosts both land.
 */
#include "ssh/knownhosts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <unistd.h>

struct update {
	const char *path;
	char **names;  /* knownhosts_name of each host */
	size_t n;
	bool *drop;    /* per line of the old file: a hashed entry of ours */
	size_t nlines;
};

static bool ours(const struct update *u, const char *name, size_t len)
{
	for (size_t i = 0; i < u->n; i++)
		if (strlen(u->names[i]) == len &&
		    !strncasecmp(u->names[i], name, len))
			return true;
	return false;
}

/* Marks the lines that hold hashed entries for one of our names. */
static int mark_hashed(struct update *u, struct err *e)
{
	struct knownhosts k;
	int rc = knownhosts_open(&k, u->path, FANOUT_HOSTKEY_YES, e);

	if (rc)
		return rc;
	for (size_t i = 0; i < k.n && !rc; i++) {
		unsigned line = knownhosts_entry_line(&k, i);

		if (!knownhosts_entry_hashed(&k, i) || line == 0 ||
		    line > u->nlines)
			continue;
		for (size_t j = 0; j < u->n; j++) {
			int m = knownhosts_entry_is(&k, i, u->names[j]);

			if (m < 0) {
				rc = err_set(e, SSH_EIO,
					     "OpenSSL cannot compute HMAC-SHA1 for %s",
					     u->path);
				break;
			}
			if (m) {
				u->drop[line - 1] = true;
				break;
			}
		}
	}
	knownhosts_close(&k);
	return rc;
}

/* Copies one old line to out, without the names being replaced. */
static int keep_line(const struct update *u, const char *line, size_t len,
		     struct buf *out)
{
	const char *p = line, *end = line + len, *names, *names_end;
	size_t kept = 0;
	int rc = 0;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p == '#' || *p == '|')
		return buf_append(out, line, len) || buf_append(out, "\n", 1);
	if (*p == '@') {
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
	}
	names = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	names_end = p;
	rc = buf_append(out, line, (size_t)(names - line));
	for (const char *s = names; s < names_end && !rc;) {
		const char *comma = memchr(s, ',', (size_t)(names_end - s));
		const char *stop = comma ? comma : names_end;

		if (!ours(u, s, (size_t)(stop - s))) {
			if (kept++)
				rc = buf_append(out, ",", 1);
			if (!rc)
				rc = buf_append(out, s, (size_t)(stop - s));
		}
		s = stop + 1;
	}
	if (rc)
		return rc;
	if (!kept) {
		/* Every name was ours: the line goes. */
		out->len -= (size_t)(names - line);
		if (out->data)
			out->data[out->len] = '\0';
		return 0;
	}
	return buf_append(out, names_end, (size_t)(end - names_end)) ||
	       buf_append(out, "\n", 1);
}

static int read_old(const char *path, struct buf *old, struct err *e)
{
	char chunk[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0
				       : err_errno(e, SSH_EHOSTKEY, errno,
						   "cannot read %s", path);
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || buf_append(old, chunk, (size_t)n)) {
			int err = n < 0 ? errno : ENOMEM;

			close(fd);
			return err_errno(e, n < 0 ? SSH_EHOSTKEY : SSH_ENOMEM,
					 err, "reading %s", path);
		}
	}
	close(fd);
	return 0;
}

static int rewrite(struct update *u, const struct fanout_known_host *hosts,
		   struct err *e)
{
	struct buf old, out;
	int rc;

	buf_init(&old);
	buf_init(&out);
	rc = read_old(u->path, &old, e);
	for (size_t i = 0; !rc && i < old.len; i++)
		u->nlines += old.data[i] == '\n';
	if (!rc && old.len && old.data[old.len - 1] != '\n')
		u->nlines++;
	if (!rc && u->nlines &&
	    !(u->drop = calloc(u->nlines, sizeof(*u->drop))))
		rc = err_set(e, SSH_ENOMEM, "out of memory");
	if (!rc && u->nlines)
		rc = mark_hashed(u, e);
	for (size_t at = 0, line = 0; !rc && at < old.len; line++) {
		const char *nl = memchr(old.data + at, '\n', old.len - at);
		size_t len = nl ? (size_t)(nl - (old.data + at)) : old.len - at;

		if (!u->drop[line] &&
		    keep_line(u, old.data + at, len, &out))
			rc = err_set(e, SSH_ENOMEM, "out of memory");
		at += len + 1;
	}
	for (size_t i = 0; !rc && i < u->n; i++)
		for (size_t j = 0; !rc && j < hosts[i].nkeys; j++)
			if (buf_appendf(&out, "%s %s\n", u->names[i],
					hosts[i].keys[j]))
				rc = err_set(e, SSH_ENOMEM, "out of memory");
	if (!rc && fs_write_atomic(u->path, out.data, out.len, 0600, true, e))
		rc = e->code == SSH_ENOMEM ? SSH_ENOMEM
					   : (e->code = SSH_EHOSTKEY);
	buf_release(&old);
	buf_release(&out);
	return rc;
}

/* A key line must be "TYPE BASE64" with nothing a known_hosts reader
 * would take for another field or line. */
static bool key_line_ok(const char *k)
{
	const char *sp = strchr(k, ' ');

	if (!sp || sp == k || !sp[1] || strchr(sp + 1, ' '))
		return false;
	for (const char *p = k; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return false;
	return true;
}

int fanout_known_hosts_update(const char *path,
			      const struct fanout_known_host *hosts, size_t n,
			      struct err *e)
{
	struct update u = { .path = path, .n = n };
	struct buf lock;
	int fd = -1, rc = 0;

	if (!path || !*path)
		return err_set(e, SSH_EINVAL, "no known_hosts file named");
	u.names = calloc(n ? n : 1, sizeof(*u.names));
	if (!u.names)
		return err_set(e, SSH_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		char name[KNOWNHOSTS_NAME_CAP];

		rc = knownhosts_name(hosts[i].host, hosts[i].port, name,
				     sizeof(name), e);
		for (size_t j = 0; !rc && j < hosts[i].nkeys; j++)
			if (!key_line_ok(hosts[i].keys[j]))
				rc = err_set(e, SSH_EINVAL,
					     "host key for %s is not 'TYPE BASE64': '%.60s'",
					     name, hosts[i].keys[j]);
		if (!rc && !(u.names[i] = strdup(name)))
			rc = err_set(e, SSH_ENOMEM, "out of memory");
	}
	buf_init(&lock);
	if (!rc && buf_appendf(&lock, "%s.lock", path))
		rc = err_set(e, SSH_ENOMEM, "out of memory");
	if (!rc && (rc = fs_mkdir_parents(path, 0700, NULL)))
		rc = err_errno(e, SSH_EHOSTKEY, rc,
			       "cannot create the directory of %s", path);
	if (!rc) {
		fd = open(lock.data, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = err_errno(e, SSH_EHOSTKEY, errno, "cannot open %s",
				       lock.data);
	}
	while (!rc && flock(fd, LOCK_EX))
		if (errno != EINTR)
			rc = err_errno(e, SSH_EHOSTKEY, errno,
				       "cannot lock %s", lock.data);
	if (!rc)
		rc = rewrite(&u, hosts, e);
	if (fd >= 0)
		close(fd);
	buf_release(&lock);
	for (size_t i = 0; i < n; i++)
		free(u.names[i]);
	free(u.names);
	free(u.drop);
	return rc;
}
