/*
 * test_agent.c: the ssh-agent client against OpenSSH's ssh-agent (started
 * here on a socket in a temp dir, stopped by pid), and against scripted
 * fake agents (forked here) that refuse, lie about lengths, send malformed
 * or wrong signatures, or hang up.
 */
#include <criterion/criterion.h>

#include "common/common.h"
#include "ssh/agent.h"
#include "ssh/key.h"
#include "tests/harness/harness.h"
#include "tests/ssh/key_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <openssl/evp.h>

static char dir[PATH_MAX];
static char sock[PATH_MAX];
static pid_t child = -1; /* ssh-agent, or a fake one */

static void setup(void)
{
	cr_assert_eq(tk_tmpdir(dir, sizeof(dir)), 0);
	FMT(sock, "%s/agent.sock", dir);
}

static void teardown(void)
{
	if (child > 0) {
		kill(child, SIGTERM);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
		child = -1;
	}
	rm_rf(dir);
}

TestSuite(agent, .init = setup, .fini = teardown);

/* In a forked child: dies with the test process even if the test crashes
 * before its teardown. */
static void child_setup(void)
{
#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static bool can_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	bool ok;

	cr_assert(fd >= 0);
	FMT(sa.sun_path, "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void start_agent(void)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };

	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		int nul = open("/dev/null", O_RDWR);

		child_setup();
		if (nul < 0)
			_exit(126);
		dup2(nul, 0);
		dup2(nul, 1);
		execlp("ssh-agent", "ssh-agent", "-D", "-a", sock,
		       (char *)NULL);
		_exit(127);
	}
	/* Ready when its socket accepts; give up if it died, or after
	 * about 20 s. */
	for (int i = 0; i < 2000 && !can_connect(sock); i++) {
		cr_assert_eq(waitpid(child, NULL, WNOHANG), 0,
			     "ssh-agent exited");
		nanosleep(&pause, NULL);
	}
	cr_assert(can_connect(sock), "ssh-agent did not start");
}

static void ssh_add(const char *path)
{
	const char *argv[] = { "ssh-add", path, NULL };

	cr_assert_eq(tk_run(argv, sock, NULL), 0, "ssh-add %s failed", path);
}

static const struct ssh_key *find_key(const struct agent *a,
				      const unsigned char *blob, size_t len)
{
	for (size_t i = 0; i < a->nkeys; i++)
		if (a->keys[i].pub_len == len &&
		    !memcmp(a->keys[i].pub, blob, len))
			return &a->keys[i];
	return NULL;
}

Test(agent, lists_and_signs)
{
	static const struct {
		const char *name, *type, *bits;
		enum key_type key_type;
	} kinds[] = {
		{ "ed", "ed25519", NULL, KEY_ED25519 },
		{ "p256", "ecdsa", "256", KEY_ECDSA_P256 },
		{ "p384", "ecdsa", "384", KEY_ECDSA_P384 },
		{ "p521", "ecdsa", "521", KEY_ECDSA_P521 },
		{ "rsa", "rsa", "2048", KEY_RSA },
	};
	char path[PATH_MAX], comment[64];
	unsigned char *blob;
	size_t blob_len;
	struct agent a;
	struct err e;

	start_agent();
	for (size_t i = 0; i < 5; i++) {
		tk_keygen(path, sizeof(path), dir, kinds[i].name,
			  kinds[i].type, kinds[i].bits, NULL, NULL);
		ssh_add(path);
	}
	err_init(&e);
	cr_assert_eq(agent_open(&a, sock, &e), 0, "%s", e.msg);
	cr_assert_eq(a.nkeys, 5);
	cr_assert(a.fd >= 0);
	for (size_t i = 0; i < 5; i++) {
		const struct ssh_key *k;

		FMT(path, "%s/%s", dir, kinds[i].name);
		blob = tk_pub_blob(path, &blob_len);
		k = find_key(&a, blob, blob_len);
		cr_assert_not_null(k, "%s not listed", kinds[i].name);
		cr_assert_eq(k->type, kinds[i].key_type);
		cr_assert_eq(k->agent, &a);
		cr_assert_null(k->pkey);
		FMT(comment, "tk-%s", kinds[i].name);
		cr_assert_str_eq(k->comment, comment);
		switch (k->type) {
		case KEY_ED25519:
			tk_check_sign(k, "ssh-ed25519", NULL);
			break;
		case KEY_ECDSA_P256:
			tk_check_sign(k, "ecdsa-sha2-nistp256", EVP_sha256());
			break;
		case KEY_ECDSA_P384:
			tk_check_sign(k, "ecdsa-sha2-nistp384", EVP_sha384());
			break;
		case KEY_ECDSA_P521:
			tk_check_sign(k, "ecdsa-sha2-nistp521", EVP_sha512());
			break;
		case KEY_RSA:
			/* The flags make the agent hash with SHA-2. */
			tk_check_sign(k, "ssh-rsa", EVP_sha1());
			tk_check_sign(k, "rsa-sha2-256", EVP_sha256());
			tk_check_sign(k, "rsa-sha2-512", EVP_sha512());
			break;
		}
		free(blob);
	}
	agent_close(&a);
	cr_assert_eq(a.fd, -1);
	cr_assert_null(a.keys);
	agent_close(&a);
}

Test(agent, sign_direct_and_callback)
{
	char path[PATH_MAX];
	unsigned char *data, *sig;
	size_t len, sig_len;
	struct agent a;
	struct err e;
	void *abstract;

	start_agent();
	tk_keygen(path, sizeof(path), dir, "ed", "ed25519", NULL, NULL, NULL);
	ssh_add(path);
	err_init(&e);
	cr_assert_eq(agent_open(&a, sock, &e), 0, "%s", e.msg);
	cr_assert_eq(a.nkeys, 1);

	data = tk_userauth("ssh-ed25519", a.keys[0].pub, a.keys[0].pub_len,
			   &len);
	cr_assert_eq(agent_sign(&a, a.keys[0].pub, a.keys[0].pub_len, data,
				len, 0, &sig, &sig_len, &e),
		     0, "%s", e.msg);
	cr_assert_eq(sig_len, 64);
	cr_assert(tk_verify(a.keys[0].pub, a.keys[0].pub_len, NULL, data, len,
			    sig, sig_len));
	free(sig);

	abstract = &a.keys[0];
	cr_assert_eq(key_sign_callback(NULL, &sig, &sig_len, data, len,
				       &abstract),
		     0, "%s", a.keys[0].sign_err.msg);
	cr_assert(tk_verify(a.keys[0].pub, a.keys[0].pub_len, NULL, data, len,
			    sig, sig_len));
	free(sig);
	free(data);
	agent_close(&a);
}

Test(agent, empty_agent)
{
	struct agent a;
	struct err e;

	start_agent();
	err_init(&e);
	cr_assert_eq(agent_open(&a, sock, &e), 0, "%s", e.msg);
	cr_assert_eq(a.nkeys, 0);
	agent_close(&a);
}

Test(agent, removed_key_refused)
{
	char path[PATH_MAX];
	const char *argv[] = { "ssh-add", "-D", NULL };
	unsigned char *data, *sig;
	size_t len, sig_len;
	struct agent a;
	struct err e;

	start_agent();
	tk_keygen(path, sizeof(path), dir, "ed", "ed25519", NULL, NULL, NULL);
	ssh_add(path);
	err_init(&e);
	cr_assert_eq(agent_open(&a, sock, &e), 0, "%s", e.msg);
	cr_assert_eq(tk_run(argv, sock, NULL), 0);
	data = tk_userauth("ssh-ed25519", a.keys[0].pub, a.keys[0].pub_len,
			   &len);
	cr_assert_eq(key_sign(&a.keys[0], data, len, &sig, &sig_len, &e),
		     SSH_EAGENT);
	cr_assert_null(sig);
	cr_assert(strstr(e.msg, "refused") && strstr(e.msg, "SHA256:") &&
			  strstr(e.msg, sock),
		  "%s", e.msg);
	/* A refusal leaves the connection usable. */
	cr_assert(a.fd >= 0);
	free(data);
	agent_close(&a);
}

Test(agent, agent_gone)
{
	char path[PATH_MAX];
	unsigned char *data, *sig;
	size_t len, sig_len;
	struct agent a;
	struct err e;

	start_agent();
	tk_keygen(path, sizeof(path), dir, "ed", "ed25519", NULL, NULL, NULL);
	ssh_add(path);
	err_init(&e);
	cr_assert_eq(agent_open(&a, sock, &e), 0, "%s", e.msg);
	kill(child, SIGTERM);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	child = -1;
	data = tk_userauth("ssh-ed25519", a.keys[0].pub, a.keys[0].pub_len,
			   &len);
	cr_assert_eq(key_sign(&a.keys[0], data, len, &sig, &sig_len, &e),
		     SSH_EAGENT);
	cr_assert(strstr(e.msg, sock), "%s", e.msg);
	cr_assert_eq(a.fd, -1);
	cr_assert_eq(key_sign(&a.keys[0], data, len, &sig, &sig_len, &e),
		     SSH_EAGENT);
	cr_assert(strstr(e.msg, "lost earlier"), "%s", e.msg);
	free(data);
	agent_close(&a);
}

static void check_open_fails(const char *path, const char *needle)
{
	struct agent a;
	struct err e;

	err_init(&e);
	cr_assert_eq(agent_open(&a, path, &e), SSH_EAGENT);
	cr_assert(strstr(e.msg, needle), "no \"%s\" in: %s", needle, e.msg);
	cr_assert_eq(a.fd, -1);
	cr_assert_null(a.keys);
	cr_assert_eq(a.nkeys, 0);
	agent_close(&a);
}

Test(agent, no_agent)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char stale[PATH_MAX], missing[PATH_MAX];
	int fd;

	check_open_fails(NULL, "SSH_AUTH_SOCK");
	check_open_fails("", "SSH_AUTH_SOCK");
	FMT(missing, "%s/no-such-agent", dir);
	check_open_fails(missing, missing);
	check_open_fails(missing, "does not exist");

	/* A socket left behind by an agent that has exited. */
	FMT(stale, "%s/stale.sock", dir);
	FMT(sa.sun_path, "%s", stale);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	check_open_fails(stale, "nothing listens");

	memset(missing, 'x', 200);
	missing[200] = '\0';
	check_open_fails(missing, "longer than");
}

/* ---- fake agents ---- */

struct reply {
	const void *data;
	size_t len;
};

static bool read_full(int fd, unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* Answers each request on one connection with the next reply, as given
 * (length included, so lengths can lie), then hangs up. */
static void start_fake(const struct reply *replies, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);

	cr_assert(lfd >= 0);
	FMT(sa.sun_path, "%s", sock);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		int fd;

		child_setup();
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			_exit(1);
		for (size_t i = 0; i < n; i++) {
			unsigned char hdr[4], body[65536];
			uint32_t len;

			if (!read_full(fd, hdr, 4))
				_exit(1);
			len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
			      (uint32_t)hdr[2] << 8 | hdr[3];
			if (len > sizeof(body) || !read_full(fd, body, len))
				_exit(1);
			if (write(fd, replies[i].data, replies[i].len) !=
			    (ssize_t)replies[i].len)
				_exit(1);
		}
		close(fd);
		_exit(0);
	}
	close(lfd);
}

/* A message with its length in front. */
static void finish(struct buf *msg, struct buf *out)
{
	buf_init(out);
	cr_assert(!key_put_u32(out, (uint32_t)msg->len));
	cr_assert(!buf_append(out, msg->data, msg->len));
	buf_release(msg);
}

static void put_str(struct buf *b, const char *s)
{
	cr_assert(!key_put_string(b, s, strlen(s)));
}

/* An RSA public blob the fake agent lists; its numbers need not be a
 * real key, as no signature is checked against it. */
static void rsa_blob(struct buf *b)
{
	unsigned char n[129] = { 0, 0xc1 };

	buf_init(b);
	put_str(b, "ssh-rsa");
	cr_assert(!key_put_string(b, "\x01\x00\x01", 3));
	cr_assert(!key_put_string(b, n, sizeof(n)));
}

/* An identities answer holding the given blobs. */
static void identities(struct buf *out, const struct buf *blobs, size_t n)
{
	struct buf msg;

	buf_init(&msg);
	cr_assert(!key_put_u8(&msg, 12));
	cr_assert(!key_put_u32(&msg, (uint32_t)n));
	for (size_t i = 0; i < n; i++) {
		cr_assert(!key_put_string(&msg, blobs[i].data, blobs[i].len));
		put_str(&msg, "fake");
	}
	finish(&msg, out);
}

static void open_fake(struct agent *a, size_t want_keys)
{
	struct err e;

	err_init(&e);
	cr_assert_eq(agent_open(a, sock, &e), 0, "%s", e.msg);
	cr_assert_eq(a->nkeys, want_keys);
}

static int fake_sign(struct agent *a, const char *alg, struct err *e)
{
	unsigned char *data, *sig = NULL;
	size_t len, sig_len;
	int rc;

	data = tk_userauth(alg, a->keys[0].pub, a->keys[0].pub_len, &len);
	err_init(e);
	rc = key_sign(&a->keys[0], data, len, &sig, &sig_len, e);
	if (!rc)
		free(sig);
	free(data);
	return rc;
}

Test(agent, fake_skips_unknown_keys)
{
	struct buf blobs[4], ids;
	struct agent a;
	unsigned char pk[32] = { 9 };

	buf_init(&blobs[0]);
	put_str(&blobs[0], "ssh-dss");
	put_str(&blobs[0], "whatever");
	buf_init(&blobs[1]);
	put_str(&blobs[1], "ssh-ed25519");
	cr_assert(!key_put_string(&blobs[1], pk, 31)); /* short */
	buf_init(&blobs[2]);
	put_str(&blobs[2], "sk-ssh-ed25519@openssh.com");
	cr_assert(!key_put_string(&blobs[2], pk, 32));
	put_str(&blobs[2], "ssh:");
	buf_init(&blobs[3]);
	put_str(&blobs[3], "ssh-ed25519");
	cr_assert(!key_put_string(&blobs[3], pk, 32));
	identities(&ids, blobs, 4);
	start_fake(&(struct reply){ ids.data, ids.len }, 1);
	open_fake(&a, 1);
	cr_assert_eq(a.keys[0].type, KEY_ED25519);
	cr_assert_arr_eq(a.keys[0].pub, blobs[3].data, blobs[3].len);
	cr_assert_str_eq(a.keys[0].comment, "fake");
	agent_close(&a);
	for (int i = 0; i < 4; i++)
		buf_release(&blobs[i]);
	buf_release(&ids);
}

Test(agent, fake_refuses_to_list)
{
	static const unsigned char fail[] = { 0, 0, 0, 1, 5 };

	start_fake(&(struct reply){ fail, sizeof(fail) }, 1);
	check_open_fails(sock, "refused to list");
}

Test(agent, fake_huge_length)
{
	static const unsigned char huge[] = { 0xff, 0xff, 0xff, 0xff, 12 };

	start_fake(&(struct reply){ huge, sizeof(huge) }, 1);
	check_open_fails(sock, "4294967295 bytes");
}

Test(agent, fake_huge_count)
{
	static const unsigned char lie[] = { 0, 0, 0, 5, 12, 0x7f, 0xff,
					     0xff, 0xff };

	start_fake(&(struct reply){ lie, sizeof(lie) }, 1);
	check_open_fails(sock, "malformed");
}

Test(agent, fake_truncated_list)
{
	static const unsigned char cut[] = { 0, 0, 0, 13, 12, 0, 0, 0, 1,
					     0, 0, 0, 40, 1, 2, 3, 4 };

	start_fake(&(struct reply){ cut, sizeof(cut) }, 1);
	check_open_fails(sock, "truncated");
}

Test(agent, fake_hangs_up_mid_reply)
{
	static const unsigned char part[] = { 0, 0, 0, 100, 12, 0, 0 };

	start_fake(&(struct reply){ part, sizeof(part) }, 1);
	check_open_fails(sock, "closed the connection");
}

/* Lists one RSA key, then answers a sign request with sign_reply. */
static void fake_rsa(const struct buf *sign_reply, struct agent *a)
{
	struct buf blob, ids;

	rsa_blob(&blob);
	identities(&ids, &blob, 1);
	start_fake((struct reply[]){ { ids.data, ids.len },
				     { sign_reply->data, sign_reply->len } },
		   2);
	open_fake(a, 1);
	cr_assert_eq(a->keys[0].type, KEY_RSA);
	buf_release(&blob);
	buf_release(&ids);
}

static void sign_response(struct buf *out, const char *alg, size_t sig_len)
{
	struct buf msg, inner;
	unsigned char sig[256] = { 7 };

	buf_init(&inner);
	put_str(&inner, alg);
	cr_assert(!key_put_string(&inner, sig, sig_len));
	buf_init(&msg);
	cr_assert(!key_put_u8(&msg, 14));
	cr_assert(!key_put_string(&msg, inner.data, inner.len));
	finish(&msg, out);
	buf_release(&inner);
}

Test(agent, fake_signs_unwrapped)
{
	struct buf reply;
	struct agent a;
	unsigned char *data, *sig;
	size_t len, sig_len;
	struct err e;

	sign_response(&reply, "rsa-sha2-512", 256);
	fake_rsa(&reply, &a);
	data = tk_userauth("rsa-sha2-512", a.keys[0].pub, a.keys[0].pub_len,
			   &len);
	err_init(&e);
	cr_assert_eq(key_sign(&a.keys[0], data, len, &sig, &sig_len, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(sig_len, 256);
	cr_assert_eq(sig[0], 7);
	free(sig);
	free(data);
	agent_close(&a);
	buf_release(&reply);
}

Test(agent, fake_signs_with_wrong_algorithm)
{
	struct buf reply;
	struct agent a;
	struct err e;

	sign_response(&reply, "ssh-rsa", 256);
	fake_rsa(&reply, &a);
	cr_assert_eq(fake_sign(&a, "rsa-sha2-256", &e), SSH_EAGENT);
	cr_assert(strstr(e.msg, "ssh-rsa instead of rsa-sha2-256"), "%s",
		  e.msg);
	agent_close(&a);
	buf_release(&reply);
}

Test(agent, fake_refuses_to_sign)
{
	static const unsigned char fail[] = { 0, 0, 0, 1, 5 };
	struct buf reply;
	struct agent a;
	struct err e;

	buf_init(&reply);
	cr_assert(!buf_append(&reply, fail, sizeof(fail)));
	fake_rsa(&reply, &a);
	cr_assert_eq(fake_sign(&a, "rsa-sha2-512", &e), SSH_EAGENT);
	cr_assert(strstr(e.msg, "refused to sign") && strstr(e.msg, "SHA-2"),
		  "%s", e.msg);
	agent_close(&a);
	buf_release(&reply);
}

Test(agent, fake_malformed_signature)
{
	static const unsigned char bad[] = { 0, 0, 0, 9, 14, 0, 0, 0, 4,
					     0, 0, 0, 9 };
	struct buf reply;
	struct agent a;
	struct err e;

	buf_init(&reply);
	cr_assert(!buf_append(&reply, bad, sizeof(bad)));
	fake_rsa(&reply, &a);
	cr_assert_eq(fake_sign(&a, "ssh-rsa", &e), SSH_EAGENT);
	cr_assert(strstr(e.msg, "malformed"), "%s", e.msg);
	agent_close(&a);
	buf_release(&reply);
}

Test(agent, fake_unexpected_reply)
{
	static const unsigned char odd[] = { 0, 0, 0, 1, 6 };
	struct buf reply;
	struct agent a;
	struct err e;

	buf_init(&reply);
	cr_assert(!buf_append(&reply, odd, sizeof(odd)));
	fake_rsa(&reply, &a);
	cr_assert_eq(fake_sign(&a, "ssh-rsa", &e), SSH_EAGENT);
	cr_assert(strstr(e.msg, "message type 6"), "%s", e.msg);
	agent_close(&a);
	buf_release(&reply);
}
