/*
 * knownhosts.c: host key verification against an OpenSSH known_hosts file.
 *
 * It promises OpenSSH's reading of the file: comma-separated name patterns
 * ('*', '?', and '!' to exclude), "[host]:port" names for ports other than
 * 22 (a bare name is for port 22 only), hashed "|1|salt|hash" names, and
 * the @revoked and @cert-authority markers. A key is known when an entry
 * for the host holds it, changed when entries for the host hold keys of its
 * type but none is it, and unknown otherwise. Unlike OpenSSH, a changed key
 * is refused under every policy, as is a key marked @revoked for the host.
 *
 * The file is read once, at open. A check walks the entries in memory (one
 * HMAC-SHA1 per hashed entry, a pattern match per plain one) and touches
 * the file only to append a key the policy accepts, in one O_APPEND write so
 * that concurrent writers never interleave lines.
 *
 * libssh2's knownhost API is not used: in 1.10 libssh2_knownhost_checkp
 * falls back from "[host]:port" to a bare "host" entry, so a key recorded
 * for port 22 would vouch for every port; it knows neither patterns nor
 * markers, and cannot tell which key types a host has, which
 * knownhosts_methods needs.
 */
#include "ssh/knownhosts.h"
#include "ssh/key.h"
#include "ssh/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh2.h>
#include <openssl/evp.h>

#define SHA1_LEN 20
/* OpenSSH's own known_hosts for 100,000 hosts is about 10 MiB; a file far
 * larger is the wrong path (or /dev/zero-like), not a list of hosts. */
#define KNOWN_HOSTS_MAX ((size_t)64 << 20)

enum key_kind {
	KIND_ED25519,
	KIND_P256,
	KIND_P384,
	KIND_P521,
	KIND_RSA,
	KIND_COUNT,
};

static const struct kind_info {
	const char *name;    /* in known_hosts and at the start of the blob */
	int libssh2_type;    /* LIBSSH2_HOSTKEY_TYPE_* */
	const char *keyscan; /* the ssh-keyscan -t value that fetches it */
} kinds[KIND_COUNT] = {
	[KIND_ED25519] = { "ssh-ed25519", LIBSSH2_HOSTKEY_TYPE_ED25519,
			   "ed25519" },
	[KIND_P256] = { "ecdsa-sha2-nistp256", LIBSSH2_HOSTKEY_TYPE_ECDSA_256,
			"ecdsa" },
	[KIND_P384] = { "ecdsa-sha2-nistp384", LIBSSH2_HOSTKEY_TYPE_ECDSA_384,
			"ecdsa" },
	[KIND_P521] = { "ecdsa-sha2-nistp521", LIBSSH2_HOSTKEY_TYPE_ECDSA_521,
			"ecdsa" },
	[KIND_RSA] = { "ssh-rsa", LIBSSH2_HOSTKEY_TYPE_RSA, "rsa" },
};

/* Key types OpenSSH writes that no libssh2 host key method can present:
 * their lines are valid, just of no use here. */
static const char *const foreign_kinds[] = {
	"ssh-dss",
	"sk-ssh-ed25519@openssh.com",
	"sk-ecdsa-sha2-nistp256@openssh.com",
};

/*
 * Host key methods in our default order, with the kind of key each one
 * verifies. libssh2 1.10 has no rsa-sha2-* host key methods (1.11 added
 * them), so an RSA host key can only be negotiated there as ssh-rsa, which
 * OpenSSH 8.8 and later servers no longer offer by default: such a server
 * presents another of its keys instead. Only the methods the linked libssh2
 * reports are ever listed.
 */
static const struct host_method {
	const char *name;
	enum key_kind kind;
} host_methods[] = {
	{ "ssh-ed25519", KIND_ED25519 },
	{ "ecdsa-sha2-nistp256", KIND_P256 },
	{ "ecdsa-sha2-nistp384", KIND_P384 },
	{ "ecdsa-sha2-nistp521", KIND_P521 },
	{ "rsa-sha2-512", KIND_RSA },
	{ "rsa-sha2-256", KIND_RSA },
	{ "ssh-rsa", KIND_RSA },
};

#define N_HOST_METHODS (sizeof(host_methods) / sizeof(host_methods[0]))

struct knownhosts_entry {
	unsigned char *blob; /* the key; the allocation also holds names */
	size_t blob_len;
	char *names;         /* lowercased pattern list, NULL when hashed */
	EVP_MD_CTX *inner;   /* hashed names: HMAC state after the key */
	EVP_MD_CTX *outer;
	unsigned char hash[SHA1_LEN];
	unsigned line;       /* 0 for an entry this process appended */
	enum key_kind kind;
	bool revoked;
};

/* Decodes base64 into out; false when s is not base64 or decodes to more
 * than cap bytes. */
static bool b64_decode(const char *s, size_t len, unsigned char *out,
		       size_t cap, size_t *out_len)
{
	return base64_decode(s, len, out, cap, out_len) == 0;
}

/* Whether an SSH key blob starts with the type name it should. */
static bool blob_has_type(const unsigned char *blob, size_t len,
			  const char *type)
{
	size_t tlen = strlen(type);
	uint32_t n;

	if (len < 4)
		return false;
	n = (uint32_t)blob[0] << 24 | (uint32_t)blob[1] << 16 |
	    (uint32_t)blob[2] << 8 | blob[3];
	return n == tlen && len - 4 >= tlen && !memcmp(blob + 4, type, tlen);
}

/* OpenSSH's wildcard match: '*' any run, '?' any one character. */
static bool wild_match(const char *s, const char *p, const char *pend)
{
	for (; p < pend; p++, s++) {
		if (*p == '*') {
			while (p + 1 < pend && p[1] == '*')
				p++;
			if (p + 1 == pend)
				return true;
			for (; *s; s++)
				if (wild_match(s, p + 1, pend))
					return true;
			return false;
		}
		if (!*s || (*p != '?' && *p != *s))
			return false;
	}
	return !*s;
}

/* A name matches a list when one pattern does and no "!pattern" does. */
static bool names_match(const char *list, const char *name)
{
	bool hit = false;
	const char *p = list;

	while (*p) {
		const char *end = strchr(p, ',');
		bool negated = *p == '!';

		if (!end)
			end = p + strlen(p);
		if (wild_match(name, p + negated, end)) {
			if (negated)
				return false;
			hit = true;
		}
		p = *end ? end + 1 : end;
	}
	return hit;
}

/*
 * Hashed names are HMAC-SHA1(key = salt, name). The salt's two padded key
 * blocks are hashed once, at open, so that matching a name against an entry
 * costs a copy of each state and two short updates, a fraction of a fresh
 * HMAC's cost; a fan-out compares every host with every entry.
 */
static bool hashed_prepare(struct knownhosts_entry *en,
			   const unsigned char salt[SHA1_LEN])
{
	unsigned char ipad[64], opad[64];

	for (size_t i = 0; i < sizeof(ipad); i++) {
		unsigned char c = i < SHA1_LEN ? salt[i] : 0;

		ipad[i] = c ^ 0x36;
		opad[i] = c ^ 0x5c;
	}
	en->inner = EVP_MD_CTX_new();
	en->outer = EVP_MD_CTX_new();
	return en->inner && en->outer &&
	       EVP_DigestInit_ex(en->inner, EVP_sha1(), NULL) &&
	       EVP_DigestUpdate(en->inner, ipad, sizeof(ipad)) &&
	       EVP_DigestInit_ex(en->outer, EVP_sha1(), NULL) &&
	       EVP_DigestUpdate(en->outer, opad, sizeof(opad));
}

/* 1 when name is the entry's, 0 when not, -1 when OpenSSL failed. */
static int hashed_matches(EVP_MD_CTX *t, const struct knownhosts_entry *en,
			  const char *name, size_t name_len)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n;

	if (!EVP_MD_CTX_copy_ex(t, en->inner) ||
	    !EVP_DigestUpdate(t, name, name_len) ||
	    !EVP_DigestFinal_ex(t, d, &n) ||
	    !EVP_MD_CTX_copy_ex(t, en->outer) ||
	    !EVP_DigestUpdate(t, d, n) || !EVP_DigestFinal_ex(t, d, &n))
		return -1;
	return n == SHA1_LEN && !memcmp(d, en->hash, SHA1_LEN);
}

/* As hashed_matches, for any entry. */
static int entry_matches(const struct knownhosts *k,
			 const struct knownhosts_entry *en, const char *name,
			 size_t name_len)
{
	if (en->names)
		return names_match(en->names, name);
	return hashed_matches(k->scratch, en, name, name_len);
}

int knownhosts_entry_is(const struct knownhosts *k, size_t i,
			const char *name)
{
	return entry_matches(k, &k->entries[i], name, strlen(name));
}

unsigned knownhosts_entry_line(const struct knownhosts *k, size_t i)
{
	return k->entries[i].line;
}

bool knownhosts_entry_hashed(const struct knownhosts *k, size_t i)
{
	return !k->entries[i].names;
}

static void entry_release(struct knownhosts_entry *en)
{
	free(en->blob);
	EVP_MD_CTX_free(en->inner);
	EVP_MD_CTX_free(en->outer);
}

/*
 * The name OpenSSH looks up and records: the host, lowercased, and as
 * "[host]:port" when the port is not 22. Names that would read as
 * something else in the file (patterns, markers, comments) are refused.
 */
int knownhosts_name(const char *host, unsigned port, char *out, size_t cap,
		    struct err *e)
{
	size_t len = host ? strlen(host) : 0;
	int n;

	if (!len || len > 1025)
		return err_set(e, SSH_EINVAL,
			       "host name '%.64s' is empty or too long to check against known_hosts",
			       host ? host : "");
	if (strchr("#@|!", host[0]) || strpbrk(host, ",*?"))
		return err_set(e, SSH_EINVAL,
			       "host name '%.64s' cannot be checked against known_hosts: it contains a character the file gives another meaning",
			       host);
	for (const char *p = host; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return err_set(e, SSH_EINVAL,
				       "host name '%.64s' contains a space or control character",
				       host);
	if (port == 0 || port == 22)
		n = snprintf(out, cap, "%s", host);
	else
		n = snprintf(out, cap, "[%s]:%u", host, port);
	if (n < 0 || (size_t)n >= cap)
		return err_set(e, SSH_EINVAL, "host name '%.64s' is too long",
			       host);
	for (char *p = out; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return 0;
}

static int push_entry(struct knownhosts *k, const struct knownhosts_entry *en)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct knownhosts_entry *v;

		if (cap > SIZE_MAX / sizeof(*v))
			return SSH_ENOMEM;
		v = realloc(k->entries, cap * sizeof(*v));
		if (!v)
			return SSH_ENOMEM;
		k->entries = v;
		k->cap = cap;
	}
	k->entries[k->n++] = *en;
	return 0;
}

/* Fills en->blob (and en->names when names is not NULL) in one block. */
static int entry_alloc(struct knownhosts_entry *en, size_t blob_len,
		       const char *names)
{
	size_t names_len = names ? strlen(names) + 1 : 0;

	en->blob = malloc(blob_len + names_len);
	if (!en->blob)
		return SSH_ENOMEM;
	en->blob_len = blob_len;
	en->names = NULL;
	if (names) {
		en->names = (char *)en->blob + blob_len;
		memcpy(en->names, names, names_len);
	}
	return 0;
}

static char *next_field(char **p)
{
	char *s = *p;
	char *start;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s) {
		*p = s;
		return NULL;
	}
	start = s;
	while (*s && *s != ' ' && *s != '\t')
		s++;
	if (*s)
		*s++ = '\0';
	*p = s;
	return start;
}

static bool is_foreign_kind(const char *type)
{
	static const char cert[] = "-cert-v01@openssh.com";
	size_t len = strlen(type);

	for (size_t i = 0; i < sizeof(foreign_kinds) / sizeof(*foreign_kinds);
	     i++)
		if (!strcmp(type, foreign_kinds[i]))
			return true;
	return len > sizeof(cert) - 1 &&
	       !strcmp(type + len - (sizeof(cert) - 1), cert);
}

static bool parse_hashed(const char *field, unsigned char salt[SHA1_LEN],
			 unsigned char hash[SHA1_LEN])
{
	const char *s = field + 3;
	const char *bar = strchr(s, '|');
	size_t n;

	if (strncmp(field, "|1|", 3) || !bar)
		return false;
	if (!b64_decode(s, (size_t)(bar - s), salt, SHA1_LEN, &n) ||
	    n != SHA1_LEN)
		return false;
	return b64_decode(bar + 1, strlen(bar + 1), hash, SHA1_LEN, &n) &&
	       n == SHA1_LEN;
}

/* Parses one line (NUL-terminated, modified in place). Lines of no use are
 * skipped, with a warning when they are malformed. Running out of memory,
 * or OpenSSL failing to hash, is an error: a skipped entry could turn a
 * changed key into an unknown one, which accept-new would then trust. */
static int parse_line(struct knownhosts *k, char *line, unsigned lineno,
		      struct err *e)
{
	struct knownhosts_entry en = { .line = lineno };
	unsigned char salt[SHA1_LEN];
	char *p = line;
	char *names, *type, *key;
	const char *why = NULL;
	bool hashed;
	size_t cap;
	int kind;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || *p == '#')
		return 0;
	if (*p == '@') {
		char *marker = next_field(&p);

		if (!strcmp(marker, "@cert-authority"))
			return 0;
		if (strcmp(marker, "@revoked")) {
			log_warn("%s:%u: unknown marker '%.40s'; line skipped",
				 k->path, lineno, marker);
			return 0;
		}
		en.revoked = true;
	}
	names = next_field(&p);
	type = next_field(&p);
	key = next_field(&p);
	if (!names || !type || !key) {
		log_warn("%s:%u: expected 'HOSTS KEYTYPE BASE64KEY'; line skipped",
			 k->path, lineno);
		return 0;
	}
	for (kind = 0; kind < KIND_COUNT; kind++)
		if (!strcmp(type, kinds[kind].name))
			break;
	if (kind == KIND_COUNT) {
		if (is_foreign_kind(type))
			log_debug("%s:%u: %s keys are not used; line skipped",
				  k->path, lineno, type);
		else
			log_warn("%s:%u: unknown key type '%.40s'; line skipped",
				 k->path, lineno, type);
		return 0;
	}
	en.kind = (enum key_kind)kind;
	hashed = names[0] == '|';
	if (!hashed)
		for (char *c = names; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
	cap = strlen(key) / 4 * 3 + 3;
	if (entry_alloc(&en, cap, hashed ? NULL : names))
		return err_set(e, SSH_ENOMEM, "out of memory reading %s",
			       k->path);
	if (!b64_decode(key, strlen(key), en.blob, cap, &en.blob_len))
		why = "the key is not valid base64";
	else if (!blob_has_type(en.blob, en.blob_len, type))
		why = "the key is not of the type the line names";
	else if (hashed && !parse_hashed(names, salt, en.hash))
		why = "the hashed host name is not of the form |1|SALT|HASH";
	if (why) {
		log_warn("%s:%u: %s; line skipped", k->path, lineno, why);
		entry_release(&en);
		return 0;
	}
	if (hashed && !k->scratch)
		k->scratch = EVP_MD_CTX_new();
	if (hashed && (!k->scratch || !hashed_prepare(&en, salt))) {
		entry_release(&en);
		return err_set(e, SSH_EIO,
			       "%s:%u: OpenSSL cannot compute HMAC-SHA1 for hashed host names (out of memory?)",
			       k->path, lineno);
	}
	if (push_entry(k, &en)) {
		entry_release(&en);
		return err_set(e, SSH_ENOMEM, "out of memory reading %s",
			       k->path);
	}
	return 0;
}

static int parse_all(struct knownhosts *k, struct buf *data, struct err *e)
{
	char *p = data->data;
	char *end;
	unsigned lineno = 0;
	int rc;

	/* An empty file leaves data->data NULL, and NULL + 0 is undefined. */
	if (!data->len)
		return 0;
	end = p + data->len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;

		lineno++;
		*stop = '\0';
		if (stop > p && stop[-1] == '\r')
			stop[-1] = '\0';
		rc = parse_line(k, p, lineno, e);
		if (rc)
			return rc;
		p = stop + 1;
	}
	return 0;
}

static int too_large(struct err *e, const char *path)
{
	return err_set(e, SSH_EHOSTKEY,
		       "known_hosts file %s is larger than %u MiB, which no "
		       "known_hosts file is: check the path or use another "
		       "file", path, (unsigned)(KNOWN_HOSTS_MAX >> 20));
}

static int read_whole(const char *path, struct buf *b, struct err *e)
{
	char chunk[65536];
	struct stat st;
	int fd, rc = 0;

	switch (file_open_regular(path, KNOWN_HOSTS_MAX, &fd, &st)) {
	case FILE_OPENED:
		break;
	case FILE_CANNOT_OPEN:
		if (errno == ENOENT)
			return 0;
		return err_set(e, SSH_EHOSTKEY,
			       "cannot open known_hosts file %s: %s; fix its permissions or use another file",
			       path, strerror(errno));
	case FILE_NOT_REGULAR:
		return err_set(e, SSH_EHOSTKEY,
			       "known_hosts file %s is %s, not a known_hosts "
			       "file: name a regular file",
			       path, file_kind_name(st.st_mode));
	case FILE_TOO_LARGE:
		return too_large(e, path);
	}
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_set(e, SSH_EHOSTKEY,
				     "cannot read known_hosts file %s: %s; fix it or use another file",
				     path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		/* The file may grow while it is read. */
		if (b->len + (size_t)n > KNOWN_HOSTS_MAX) {
			rc = too_large(e, path);
			break;
		}
		if (buf_append(b, chunk, (size_t)n)) {
			rc = err_set(e, SSH_ENOMEM, "out of memory reading %s",
				     path);
			break;
		}
	}
	close(fd);
	return rc;
}

/* Learns which host key methods the linked libssh2 offers. The session
 * exists only because libssh2 allocates the answer through one. */
static int load_supported(struct knownhosts *k, struct err *e)
{
	LIBSSH2_SESSION *s;
	const char **algs;
	int n;

	if (libssh2_init(0))
		return err_set(e, SSH_EIO, "libssh2 could not be initialised");
	s = libssh2_session_init();
	if (!s) {
		libssh2_exit();
		return err_set(e, SSH_ENOMEM, "out of memory starting libssh2");
	}
	n = libssh2_session_supported_algs(s, LIBSSH2_METHOD_HOSTKEY, &algs);
	for (int i = 0; i < n; i++)
		for (size_t m = 0; m < N_HOST_METHODS; m++)
			if (!strcmp(algs[i], host_methods[m].name))
				k->supported |= 1u << m;
	if (n > 0)
		libssh2_free(s, algs);
	libssh2_session_free(s);
	libssh2_exit();
	if (n <= 0 || !k->supported)
		return err_set(e, SSH_EIO,
			       "libssh2 reports no host key method slicectl can verify (error %d)",
			       n);
	return 0;
}

/* OpenSSH's user file, ~/.ssh/known_hosts, in allocated memory. */
static int default_path(char **out, struct err *e)
{
	const char *home = home_dir();
	struct buf b;

	if (!home)
		return err_set(e, SSH_EHOSTKEY,
			       "cannot find your home directory for ~/.ssh/known_hosts; set HOME or name a known_hosts file");
	buf_init(&b);
	if (buf_appendf(&b, "%s/.ssh/known_hosts", home))
		return err_set(e, SSH_ENOMEM, "out of memory");
	*out = buf_detach(&b);
	return 0;
}

int knownhosts_open(struct knownhosts *k, const char *path,
		    enum fanout_hostkey_policy policy, struct err *e)
{
	struct buf data;
	int rc;

	memset(k, 0, sizeof(*k));
	k->policy = policy;
	if (path && *path) {
		k->path = strdup(path);
		if (!k->path)
			return err_set(e, SSH_ENOMEM, "out of memory");
	} else if ((rc = default_path(&k->path, e))) {
		return rc;
	}
	buf_init(&data);
	rc = load_supported(k, e);
	if (!rc)
		rc = read_whole(k->path, &data, e);
	if (!rc)
		rc = parse_all(k, &data, e);
	buf_release(&data);
	if (rc)
		knownhosts_close(k);
	return rc;
}

void knownhosts_close(struct knownhosts *k)
{
	for (size_t i = 0; i < k->n; i++)
		entry_release(&k->entries[i]);
	free(k->entries);
	EVP_MD_CTX_free(k->scratch);
	free(k->path);
	memset(k, 0, sizeof(*k));
}

/*
 * Appends "\nLINE" or "LINE" (text starts with the '\n') in one write, so
 * the line never joins an unterminated last line nor another writer's. A
 * writer may see another's line half written (the file grows page by page)
 * and add a needless blank line: harmless, as readers skip blank lines.
 * Returns 0 or an errno value.
 */
static int append_line(const char *path, const char *text, size_t len)
{
	struct stat st;
	char last = '\n';
	ssize_t n;
	int fd;
	int rc = 0;

	rc = fs_mkdir_parents(path, 0700, NULL);
	if (rc)
		return rc;
	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) == 0 && st.st_size > 0 &&
	    pread(fd, &last, 1, st.st_size - 1) != 1)
		last = '\n';
	if (last == '\n') {
		text++;
		len--;
	}
	do
		n = write(fd, text, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = errno;
	else if ((size_t)n != len)
		rc = EIO;
	if (close(fd) && !rc)
		rc = errno;
	return rc;
}

static int accept_new(struct knownhosts *k, const char *name,
		      enum key_kind kind, const unsigned char *key,
		      size_t key_len, struct err *e)
{
	struct knownhosts_entry en = { .kind = kind };
	struct buf line;
	char *b64;
	int rc;

	if (key_len > (size_t)INT_MAX / 2)
		return err_set(e, SSH_EINVAL, "host key of %s is too large",
			       name);
	b64 = malloc(4 * ((key_len + 2) / 3) + 1);
	if (!b64)
		return err_set(e, SSH_ENOMEM, "out of memory");
	EVP_EncodeBlock((unsigned char *)b64, key, (int)key_len);
	buf_init(&line);
	rc = buf_appendf(&line, "\n%s %s %s\n", name, kinds[kind].name, b64);
	free(b64);
	if (!rc)
		rc = entry_alloc(&en, key_len, name);
	if (!rc) {
		memcpy(en.blob, key, key_len);
		rc = push_entry(k, &en);
		if (rc)
			entry_release(&en);
	}
	if (rc) {
		buf_release(&line);
		return err_set(e, SSH_ENOMEM, "out of memory");
	}
	rc = append_line(k->path, line.data, line.len);
	buf_release(&line);
	if (rc && !k->append_failed) {
		k->append_failed = true;
		log_warn("cannot add host keys to %s: %s; new hosts are trusted for this run only",
			 k->path, strerror(rc));
	} else if (!rc) {
		log_debug("added the %s key of %s to %s", kinds[kind].name,
			  name, k->path);
	}
	return 0;
}

static void entry_place(const struct knownhosts *k,
			const struct knownhosts_entry *en, char *out,
			size_t cap)
{
	if (en->line)
		snprintf(out, cap, "%s:%u", k->path, en->line);
	else
		snprintf(out, cap, "%s (added by this run)", k->path);
}

static int refuse_changed(const struct knownhosts *k, const char *name,
			  enum key_kind kind, const char *fp,
			  const struct knownhosts_entry *old, struct err *e)
{
	char place[512];
	struct buf cmd;

	buf_init(&cmd);
	if (buf_appends(&cmd, "ssh-keygen -R ") || shq_append(&cmd, name) ||
	    buf_appends(&cmd, " -f ") || shq_append(&cmd, k->path)) {
		buf_release(&cmd);
		return err_set(e, SSH_ENOMEM, "out of memory");
	}
	entry_place(k, old, place, sizeof(place));
	err_set(e, SSH_EHOSTKEY,
		"host key for %s has CHANGED: it presented %s %s, not the key at %s (someone may be intercepting the connection); if the host was rebuilt, remove the old entry: %s",
		name, kinds[kind].name, fp, place, cmd.data);
	buf_release(&cmd);
	return SSH_EHOSTKEY;
}

static int refuse_unknown(const struct knownhosts *k, const char *host,
			  unsigned port, const char *name, enum key_kind kind,
			  const char *fp, unsigned other_kinds, struct err *e)
{
	char have[128] = "";
	struct buf cmd;

	buf_init(&cmd);
	if (buf_appends(&cmd, "ssh-keyscan") ||
	    (port && port != 22 && buf_appendf(&cmd, " -p %u", port)) ||
	    buf_appendf(&cmd, " -t %s ", kinds[kind].keyscan) ||
	    shq_append(&cmd, host) || buf_appends(&cmd, " >> ") ||
	    shq_append(&cmd, k->path)) {
		buf_release(&cmd);
		return err_set(e, SSH_ENOMEM, "out of memory");
	}
	for (int i = 0; i < KIND_COUNT; i++) {
		if (!(other_kinds & (1u << i)))
			continue;
		if (have[0])
			strncat(have, "/", sizeof(have) - strlen(have) - 1);
		strncat(have, kinds[i].name, sizeof(have) - strlen(have) - 1);
	}
	if (have[0])
		err_set(e, SSH_EHOSTKEY,
			"host key for %s (%s %s) is not known: %s has only %s keys for it; verify it and add it (%s), or pass --strict-host-key-checking accept-new to trust it on first use",
			name, kinds[kind].name, fp, k->path, have, cmd.data);
	else
		err_set(e, SSH_EHOSTKEY,
			"host key for %s (%s %s) is not known: no entry in %s; verify it and add it (%s), or pass --strict-host-key-checking accept-new to trust it on first use",
			name, kinds[kind].name, fp, k->path, cmd.data);
	buf_release(&cmd);
	return SSH_EHOSTKEY;
}

int knownhosts_check(struct knownhosts *k, const char *host, unsigned port,
		     const char *key, size_t key_len, int key_type,
		     struct err *e)
{
	const unsigned char *blob = (const unsigned char *)key;
	const struct knownhosts_entry *changed = NULL;
	unsigned other_kinds = 0;
	bool found = false;
	char name[KNOWNHOSTS_NAME_CAP];
	char fp[KEY_FINGERPRINT_SIZE];
	size_t name_len;
	int kind;
	int rc;

	rc = knownhosts_name(host, port, name, sizeof(name), e);
	if (rc)
		return rc;
	for (kind = 0; kind < KIND_COUNT; kind++)
		if (kinds[kind].libssh2_type == key_type)
			break;
	if (kind == KIND_COUNT)
		return err_set(e, SSH_EHOSTKEY,
			       "host %s presented a host key of a type slicectl cannot verify (libssh2 type %d); give it an ed25519, ecdsa or rsa host key",
			       name, key_type);
	if (!blob || !blob_has_type(blob, key_len, kinds[kind].name))
		return err_set(e, SSH_EHOSTKEY,
			       "host %s presented a malformed %s host key",
			       name, kinds[kind].name);
	key_fingerprint((const unsigned char *)blob, key_len, fp);
	name_len = strlen(name);
	for (size_t i = 0; i < k->n; i++) {
		const struct knownhosts_entry *en = &k->entries[i];
		int match = entry_matches(k, en, name, name_len);
		char place[512];
		bool same;

		if (match < 0)
			return err_set(e, SSH_EIO,
				       "OpenSSL failed to hash %s to compare it with the hashed names in %s",
				       name, k->path);
		if (!match)
			continue;
		same = en->blob_len == key_len &&
		       !memcmp(en->blob, blob, key_len);
		if (en->revoked && same) {
			entry_place(k, en, place, sizeof(place));
			return err_set(e, SSH_EHOSTKEY,
				       "host key for %s (%s %s) is marked @revoked at %s, so it is refused: the key may be compromised; get the host's new key from its administrator, or delete that line if the revocation is a mistake",
				       name, kinds[kind].name, fp, place);
		}
		if (en->revoked)
			continue;
		if (same)
			found = true;
		else if (en->kind == (enum key_kind)kind)
			changed = changed ? changed : en;
		else
			other_kinds |= 1u << en->kind;
	}
	if (found)
		return 0;
	if (changed)
		return refuse_changed(k, name, (enum key_kind)kind, fp, changed,
				      e);
	if (k->policy == FANOUT_HOSTKEY_YES)
		return refuse_unknown(k, host, port, name, (enum key_kind)kind,
				      fp, other_kinds, e);
	return accept_new(k, name, (enum key_kind)kind, blob, key_len, e);
}

const char *knownhosts_methods(struct knownhosts *k, const char *host,
			       unsigned port)
{
	char name[KNOWNHOSTS_NAME_CAP];
	unsigned have = 0;
	size_t len = 0;

	if (!knownhosts_name(host, port, name, sizeof(name), NULL)) {
		size_t name_len = strlen(name);

		for (size_t i = 0; i < k->n; i++) {
			const struct knownhosts_entry *en = &k->entries[i];

			if (!en->revoked &&
			    entry_matches(k, en, name, name_len) > 0)
				have |= 1u << en->kind;
		}
	}
	k->methods[0] = '\0';
	for (int known_first = 1; known_first >= 0; known_first--) {
		for (size_t m = 0; m < N_HOST_METHODS; m++) {
			bool known = have & (1u << host_methods[m].kind);
			int n;

			if (!(k->supported & (1u << m)) ||
			    known != (bool)known_first)
				continue;
			n = snprintf(k->methods + len, sizeof(k->methods) - len,
				     "%s%s", len ? "," : "",
				     host_methods[m].name);
			if (n > 0 && (size_t)n < sizeof(k->methods) - len)
				len += (size_t)n;
		}
	}
	return k->methods;
}
