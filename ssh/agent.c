/*
 * agent.c: a small ssh-agent client. It lists the agent's identities once
 * and then asks for one signature per host authentication, over a single
 * connection. Every length the agent sends is checked and capped, so a
 * broken agent gives an error rather than a crash or a huge allocation;
 * after a failed read or write the connection is dropped, since the next
 * reply could no longer be matched to its request.
 */
#include "ssh/agent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

enum agent_msg {
	AGENT_FAILURE = 5,
	AGENTC_REQUEST_IDENTITIES = 11,
	AGENT_IDENTITIES_ANSWER = 12,
	AGENTC_SIGN_REQUEST = 13,
	AGENT_SIGN_RESPONSE = 14,
	AGENT_EXTENSION_FAILURE = 28,
	AGENT_COM_FAILURE = 102, /* ssh.com's agents, and some others */
};

/* Real messages are a few KiB (a hundred keys); anything larger is a
 * broken or hostile agent. */
#define AGENT_MSG_MAX (256 * 1024)

/* An identity is at least two empty strings. */
#define AGENT_IDENTITY_MIN 8

static void drop(struct agent *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
}

/* what: the thing asked for, as in "asked for a signature". */
static int io_error(struct agent *a, int errnum, const char *what,
		    struct err *e)
{
	drop(a);
	if (errnum == 0)
		return err_set(e, SSH_EAGENT,
			       "ssh-agent at %s closed the connection when "
			       "asked for %s: is it still running? "
			       "(ssh-add -l)", a->path, what);
	if (errnum == EAGAIN || errnum == EWOULDBLOCK)
		return err_set(e, SSH_EAGENT,
			       "ssh-agent at %s did not answer within %d s "
			       "when asked for %s: is it waiting for a "
			       "confirmation, or stuck? (ssh-add -l)",
			       a->path, AGENT_TIMEOUT_S, what);
	return err_errno(e, SSH_EAGENT, errnum,
			 "asking ssh-agent at %s for %s", a->path, what);
}

/* 0, or the errno of the failure (0 left in *errnum for end of file).
 * EINTR is a failure too: the only handlers slicectl installs are for its
 * interrupts, and an interrupted slicectl must not wait for a hung agent
 * (the exchange is dropped, as after any failure). */
static int read_all(int fd, unsigned char *p, size_t n, int *errnum)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0) {
			*errnum = r < 0 ? errno : 0;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n, int *errnum)
{
	while (n) {
		/* MSG_NOSIGNAL: an agent gone away is an error, not SIGPIPE. */
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0) {
			*errnum = errno;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* A request buffer starts with room for its length, filled in by call. */
static int request_start(struct buf *req, uint8_t type)
{
	buf_init(req);
	if (key_put_u32(req, 0) || key_put_u8(req, type))
		return SSH_ENOMEM;
	return 0;
}

/* Sends req and reads one reply into reply (without its length). */
static int call(struct agent *a, struct buf *req, struct buf *reply,
		const char *what, struct err *e)
{
	unsigned char hdr[4];
	size_t body = req->len - 4;
	uint32_t len;
	int errnum = 0;

	if (a->fd < 0)
		return err_set(e, SSH_EAGENT,
			       "the connection to ssh-agent at %s was lost "
			       "earlier; cannot ask it for %s",
			       a->path ? a->path : "(none)", what);
	if (body > AGENT_MSG_MAX)
		return err_set(e, SSH_EAGENT,
			       "a request to ssh-agent for %s would be %zu "
			       "bytes, more than the %d an agent accepts",
			       what, body, AGENT_MSG_MAX);
	req->data[0] = (char)(body >> 24);
	req->data[1] = (char)(body >> 16);
	req->data[2] = (char)(body >> 8);
	req->data[3] = (char)body;
	if (write_all(a->fd, (unsigned char *)req->data, req->len, &errnum))
		return io_error(a, errnum, what, e);
	if (read_all(a->fd, hdr, sizeof(hdr), &errnum))
		return io_error(a, errnum, what, e);
	len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	      (uint32_t)hdr[2] << 8 | hdr[3];
	if (len == 0 || len > AGENT_MSG_MAX) {
		drop(a);
		return err_set(e, SSH_EAGENT,
			       "ssh-agent at %s sent a reply of %u bytes when "
			       "asked for %s (the limit is %d): it is not a "
			       "working ssh-agent; check SSH_AUTH_SOCK",
			       a->path, len, what, AGENT_MSG_MAX);
	}
	buf_reset(reply);
	if (buf_reserve(reply, len)) {
		/* The unread reply would be taken for the next one. */
		drop(a);
		return err_set(e, SSH_ENOMEM, "out of memory");
	}
	if (read_all(a->fd, (unsigned char *)reply->data, len, &errnum))
		return io_error(a, errnum, what, e);
	reply->len = len;
	reply->data[len] = '\0';
	return 0;
}

static bool is_failure(uint8_t type)
{
	return type == AGENT_FAILURE || type == AGENT_EXTENSION_FAILURE ||
	       type == AGENT_COM_FAILURE;
}

static int add_identity(struct agent *a, const unsigned char *blob,
			size_t blob_len, const unsigned char *comment,
			size_t comment_len, size_t *cap, struct err *e)
{
	struct ssh_key k;
	struct err skip;

	err_init(&skip);
	if (key_from_blob(&k, blob, blob_len, &skip)) {
		if (skip.code == SSH_ENOMEM)
			return err_set(e, SSH_ENOMEM, "out of memory");
		log_debug("ssh-agent at %s: skipping a key: %s", a->path,
			  skip.msg);
		return 0;
	}
	if (comment_len) {
		k.comment = malloc(comment_len + 1);
		if (!k.comment) {
			key_release(&k);
			return err_set(e, SSH_ENOMEM, "out of memory");
		}
		memcpy(k.comment, comment, comment_len);
		k.comment[comment_len] = '\0';
	}
	if (a->nkeys == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4;
		struct ssh_key *keys = realloc(a->keys, ncap * sizeof(*keys));

		if (!keys) {
			key_release(&k);
			return err_set(e, SSH_ENOMEM, "out of memory");
		}
		a->keys = keys;
		*cap = ncap;
	}
	k.agent = a;
	a->keys[a->nkeys++] = k;
	return 0;
}

static int list_identities(struct agent *a, struct err *e)
{
	struct buf req, reply;
	struct key_reader r;
	uint8_t type = 0;
	uint32_t n;
	size_t cap = 0;
	int rc;

	buf_init(&reply);
	rc = request_start(&req, AGENTC_REQUEST_IDENTITIES);
	if (rc) {
		rc = err_set(e, rc, "out of memory");
		goto out;
	}
	rc = call(a, &req, &reply, "its keys", e);
	if (rc)
		goto out;
	r = (struct key_reader){ (unsigned char *)reply.data, reply.len };
	key_get_u8(&r, &type);
	if (is_failure(type)) {
		rc = err_set(e, SSH_EAGENT,
			     "ssh-agent at %s refused to list its keys: is it "
			     "locked? (ssh-add -X unlocks it)", a->path);
		goto out;
	}
	if (type != AGENT_IDENTITIES_ANSWER || key_get_u32(&r, &n) ||
	    n > r.left / AGENT_IDENTITY_MIN) {
		rc = err_set(e, SSH_EAGENT,
			     "ssh-agent at %s answered the request for its "
			     "keys with a malformed message (type %u): check "
			     "SSH_AUTH_SOCK", a->path, type);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *blob, *comment;
		size_t blob_len, comment_len;

		if (key_get_string(&r, &blob, &blob_len) ||
		    key_get_string(&r, &comment, &comment_len)) {
			rc = err_set(e, SSH_EAGENT,
				     "ssh-agent at %s sent a truncated list "
				     "of keys: check SSH_AUTH_SOCK", a->path);
			goto out;
		}
		rc = add_identity(a, blob, blob_len, comment, comment_len,
				  &cap, e);
		if (rc)
			goto out;
	}
out:
	buf_release(&req);
	buf_release(&reply);
	return rc;
}

int agent_open(struct agent *a, const char *socket_path, struct err *e)
{
	struct sockaddr_un addr;
	struct timeval tv = { .tv_sec = AGENT_TIMEOUT_S };
	int rc;

	a->fd = -1;
	a->keys = NULL;
	a->nkeys = 0;
	a->path = NULL;
	if (!socket_path || !*socket_path)
		return err_set(e, SSH_EAGENT,
			       "no ssh-agent to ask: SSH_AUTH_SOCK is not set; "
			       "start one (eval $(ssh-agent); ssh-add KEY) or "
			       "pass --identity KEY");
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	if (strlen(socket_path) >= sizeof(addr.sun_path))
		return err_set(e, SSH_EAGENT,
			       "ssh-agent socket path %s is longer than the "
			       "%zu bytes a unix socket path may have",
			       socket_path, sizeof(addr.sun_path) - 1);
	memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
	a->path = strdup(socket_path);
	if (!a->path)
		return err_set(e, SSH_ENOMEM, "out of memory");
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		rc = err_errno(e, SSH_EAGENT, errno,
			       "cannot create a socket for ssh-agent");
		goto fail;
	}
	if (connect(a->fd, (struct sockaddr *)&addr, sizeof(addr))) {
		int errnum = errno;

		if (errnum == ENOENT)
			rc = err_set(e, SSH_EAGENT,
				     "ssh-agent socket %s does not exist (a "
				     "stale SSH_AUTH_SOCK?): start an agent "
				     "(eval $(ssh-agent); ssh-add KEY) or "
				     "pass --identity KEY", socket_path);
		else if (errnum == ECONNREFUSED)
			rc = err_set(e, SSH_EAGENT,
				     "nothing listens on ssh-agent socket %s "
				     "(the agent has exited?): start an agent "
				     "(eval $(ssh-agent); ssh-add KEY) or "
				     "pass --identity KEY", socket_path);
		else
			rc = err_errno(e, SSH_EAGENT, errnum,
				       "cannot connect to ssh-agent at %s",
				       socket_path);
		goto fail;
	}
	/* A hung agent must not hang every host with it. */
	if (setsockopt(a->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(a->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		rc = err_errno(e, SSH_EAGENT, errno,
			       "setting a timeout on ssh-agent socket %s",
			       socket_path);
		goto fail;
	}
	rc = list_identities(a, e);
	if (rc)
		goto fail;
	return 0;
fail:
	agent_close(a);
	return rc;
}

void agent_close(struct agent *a)
{
	if (!a)
		return;
	drop(a);
	for (size_t i = 0; i < a->nkeys; i++)
		key_release(&a->keys[i]);
	free(a->keys);
	free(a->path);
	a->keys = NULL;
	a->nkeys = 0;
	a->path = NULL;
}

/* The algorithm a signature must carry: the key's own, unless RSA was
 * asked to hash with SHA-2. */
static int expected_alg(const unsigned char *pub, size_t pub_len,
			uint32_t flags, const unsigned char **alg,
			size_t *alg_len)
{
	struct key_reader r = { pub, pub_len };

	if (flags & AGENT_RSA_SHA2_512) {
		*alg = (const unsigned char *)"rsa-sha2-512";
		*alg_len = strlen("rsa-sha2-512");
		return 0;
	}
	if (flags & AGENT_RSA_SHA2_256) {
		*alg = (const unsigned char *)"rsa-sha2-256";
		*alg_len = strlen("rsa-sha2-256");
		return 0;
	}
	return key_get_string(&r, alg, alg_len);
}

static int sign_refused(struct agent *a, const unsigned char *pub,
			size_t pub_len, uint32_t flags, struct err *e)
{
	char fp[KEY_FINGERPRINT_SIZE];

	key_fingerprint(pub, pub_len, fp);
	return err_set(e, SSH_EAGENT,
		       "ssh-agent at %s refused to sign with key %s: it may "
		       "have been removed (ssh-add -l lists what the agent "
		       "holds), or the agent is locked%s",
		       a->path, fp,
		       flags ? ", or too old to sign RSA with SHA-2" : "");
}

static int unwrap(struct agent *a, struct key_reader *r, uint32_t flags,
		  const unsigned char *want, size_t want_len,
		  unsigned char **sig, size_t *sig_len, struct err *e)
{
	const unsigned char *blob, *alg, *raw;
	size_t blob_len, alg_len, raw_len;
	struct key_reader in;

	if (key_get_string(r, &blob, &blob_len))
		goto bad;
	in = (struct key_reader){ blob, blob_len };
	if (key_get_string(&in, &alg, &alg_len) ||
	    key_get_string(&in, &raw, &raw_len) || !raw_len)
		goto bad;
	if (alg_len != want_len || memcmp(alg, want, want_len)) {
		char got[64];
		size_t n = 0;

		for (size_t i = 0; i < alg_len && n + 1 < sizeof(got); i++)
			got[n++] = alg[i] >= 0x20 && alg[i] < 0x7f
					   ? (char)alg[i]
					   : '?';
		got[n] = '\0';
		return err_set(e, SSH_EAGENT,
			       "ssh-agent at %s signed with %s instead of "
			       "%.*s%s",
			       a->path, got, (int)want_len, want,
			       flags ? ": it cannot sign RSA with SHA-2; use "
				       "an ed25519 key, or a newer ssh-agent"
				     : ": check SSH_AUTH_SOCK");
	}
	*sig = malloc(raw_len);
	if (!*sig)
		return err_set(e, SSH_ENOMEM, "out of memory");
	memcpy(*sig, raw, raw_len);
	*sig_len = raw_len;
	return 0;
bad:
	return err_set(e, SSH_EAGENT,
		       "ssh-agent at %s sent a malformed signature: check "
		       "SSH_AUTH_SOCK", a->path);
}

int agent_sign(struct agent *a, const unsigned char *pub, size_t pub_len,
	       const unsigned char *data, size_t len, uint32_t flags,
	       unsigned char **sig, size_t *sig_len, struct err *e)
{
	const unsigned char *want;
	size_t want_len;
	struct buf req, reply;
	struct key_reader r;
	uint8_t type = 0;
	int rc;

	*sig = NULL;
	*sig_len = 0;
	if (!a || !pub || !data ||
	    expected_alg(pub, pub_len, flags, &want, &want_len))
		return err_set(e, SSH_EINVAL, "agent_sign: no usable key");
	buf_init(&reply);
	if (len > AGENT_MSG_MAX || pub_len > AGENT_MSG_MAX) {
		rc = err_set(e, SSH_EAGENT,
			     "%zu bytes to sign are more than ssh-agent "
			     "accepts", len);
		goto out;
	}
	if (request_start(&req, AGENTC_SIGN_REQUEST) ||
	    key_put_string(&req, pub, pub_len) ||
	    key_put_string(&req, data, len) || key_put_u32(&req, flags)) {
		rc = err_set(e, SSH_ENOMEM, "out of memory");
		goto out_req;
	}
	rc = call(a, &req, &reply, "a signature", e);
	if (rc)
		goto out_req;
	r = (struct key_reader){ (unsigned char *)reply.data, reply.len };
	key_get_u8(&r, &type);
	if (is_failure(type))
		rc = sign_refused(a, pub, pub_len, flags, e);
	else if (type != AGENT_SIGN_RESPONSE)
		rc = err_set(e, SSH_EAGENT,
			     "ssh-agent at %s answered a sign request with "
			     "message type %u: check SSH_AUTH_SOCK",
			     a->path, type);
	else
		rc = unwrap(a, &r, flags, want, want_len, sig, sig_len, e);
out_req:
	buf_release(&req);
out:
	buf_release(&reply);
	return rc;
}
