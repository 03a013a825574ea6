/* tests/ssh/key_check.c: see key_check.h. */
#include "tests/ssh/key_check.h"

#include "common/common.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/param_build.h>

int tk_tmpdir(char *out, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	/* Agent sockets live in here: keep the path short. The damage tests
	 * write thousands of small files, several times faster in memory. */
	if (!tmp || !*tmp || strlen(tmp) > 60)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(out, len, "%s/slicectl-key-XXXXXX", tmp);
	return mkdtemp(out) ? 0 : -1;
}

int tk_run(const char *const argv[], const char *sock, const char *out_path)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int in = open("/dev/null", O_RDWR);
		int out = out_path ? open(out_path, O_WRONLY | O_CREAT |
							    O_TRUNC, 0600)
				   : in;

		if (in < 0 || out < 0)
			_exit(126);
		dup2(in, 0);
		dup2(out, 1);
		dup2(in, 2);
		if (sock && setenv("SSH_AUTH_SOCK", sock, 1))
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void tk_keygen(char *out, size_t len, const char *dir, const char *name,
	       const char *type, const char *bits, const char *format,
	       const char *pass)
{
	char comment[128];
	const char *argv[16];
	int n = 0;

	snprintf(out, len, "%s/%s", dir, name);
	FMT(comment, "tk-%s", name);
	argv[n++] = "ssh-keygen";
	argv[n++] = "-q";
	argv[n++] = "-t";
	argv[n++] = type;
	if (bits) {
		argv[n++] = "-b";
		argv[n++] = bits;
	}
	if (format) {
		argv[n++] = "-m";
		argv[n++] = format;
	}
	argv[n++] = "-N";
	argv[n++] = pass ? pass : "";
	argv[n++] = "-C";
	argv[n++] = comment;
	argv[n++] = "-f";
	argv[n++] = out;
	argv[n] = NULL;
	cr_assert_eq(tk_run(argv, NULL, NULL), 0, "ssh-keygen -t %s failed",
		     type);
}

char *tk_read(const char *path, size_t *len)
{
	struct stat st;
	char *data;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	cr_assert(fstat(fd, &st) == 0);
	data = malloc((size_t)st.st_size + 1);
	cr_assert_not_null(data);
	n = read(fd, data, (size_t)st.st_size);
	cr_assert_eq(n, st.st_size, "short read of %s", path);
	close(fd);
	data[n] = '\0';
	*len = (size_t)n;
	return data;
}

void tk_write(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

unsigned char *tk_unbase64(const char *in, size_t in_len, size_t *len)
{
	unsigned char *out = malloc(in_len / 4 * 3 + 3);
	int n;

	cr_assert_not_null(out);
	n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)in_len);
	if (n < 0 || in_len % 4) {
		free(out);
		return NULL;
	}
	if (in_len && in[in_len - 1] == '=')
		n--;
	if (in_len > 1 && in[in_len - 2] == '=')
		n--;
	*len = (size_t)n;
	return out;
}

unsigned char *tk_pub_blob(const char *path, size_t *len)
{
	char pub[PATH_MAX];
	size_t text_len;
	char *text, *b64, *end;
	unsigned char *blob;

	FMT(pub, "%s.pub", path);
	text = tk_read(pub, &text_len);
	b64 = strchr(text, ' ');
	cr_assert_not_null(b64, "%s has no key", pub);
	b64++;
	end = b64 + strcspn(b64, " \n");
	blob = tk_unbase64(b64, (size_t)(end - b64), len);
	cr_assert_not_null(blob, "%s: bad base64", pub);
	free(text);
	return blob;
}

/* A reader of SSH wire data of the tests' own, so that checks of key.c do
 * not rest on key.c. */
struct tk_wire {
	const unsigned char *p;
	size_t left;
};

static bool tk_string(struct tk_wire *w, const unsigned char **s, size_t *len)
{
	uint32_t n;

	if (w->left < 4)
		return false;
	n = (uint32_t)w->p[0] << 24 | (uint32_t)w->p[1] << 16 |
	    (uint32_t)w->p[2] << 8 | w->p[3];
	if (n > w->left - 4)
		return false;
	*s = w->p + 4;
	*len = n;
	w->p += 4 + n;
	w->left -= 4 + n;
	return true;
}

static bool is(const unsigned char *s, size_t len, const char *lit)
{
	return len == strlen(lit) && !memcmp(s, lit, len);
}

static EVP_PKEY *from_params(const char *alg, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, alg, NULL);
	EVP_PKEY *pkey = NULL;

	cr_assert(params && ctx);
	cr_assert_eq(EVP_PKEY_fromdata_init(ctx), 1);
	cr_assert_eq(EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params),
		     1);
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	return pkey;
}

/* An OpenSSL public key from an SSH public blob. */
static EVP_PKEY *tk_pub_pkey(const unsigned char *blob, size_t len)
{
	struct tk_wire w = { blob, len };
	const unsigned char *type, *a, *b;
	size_t type_len, a_len, b_len;
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	BIGNUM *e, *n;
	EVP_PKEY *pkey;

	cr_assert_not_null(bld);
	cr_assert(tk_string(&w, &type, &type_len) && tk_string(&w, &a, &a_len));
	if (is(type, type_len, "ssh-ed25519")) {
		OSSL_PARAM_BLD_free(bld);
		pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, a,
						   a_len);
		cr_assert_not_null(pkey);
		return pkey;
	}
	cr_assert(tk_string(&w, &b, &b_len));
	if (is(type, type_len, "ssh-rsa")) {
		e = BN_bin2bn(a, (int)a_len, NULL);
		n = BN_bin2bn(b, (int)b_len, NULL);
		cr_assert(e && n);
		cr_assert(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N,
						 n));
		cr_assert(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E,
						 e));
		pkey = from_params("RSA", bld);
		BN_free(e);
		BN_free(n);
		return pkey;
	}
	cr_assert(OSSL_PARAM_BLD_push_utf8_string(
		bld, OSSL_PKEY_PARAM_GROUP_NAME,
		is(a, a_len, "nistp256")   ? "P-256"
		: is(a, a_len, "nistp384") ? "P-384"
					   : "P-521",
		0));
	cr_assert(OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY,
						   b, b_len));
	return from_params("EC", bld);
}

unsigned char *tk_userauth(const char *alg, const unsigned char *pub,
			   size_t pub_len, size_t *len)
{
	struct buf b;
	unsigned char session_id[32];

	for (size_t i = 0; i < sizeof(session_id); i++)
		session_id[i] = (unsigned char)rand();
	buf_init(&b);
	cr_assert(!key_put_string(&b, session_id, sizeof(session_id)));
	cr_assert(!key_put_u8(&b, 50));
	cr_assert(!key_put_string(&b, "tester", 6));
	cr_assert(!key_put_string(&b, "ssh-connection", 14));
	cr_assert(!key_put_string(&b, "publickey", 9));
	cr_assert(!key_put_u8(&b, 1));
	cr_assert(!key_put_string(&b, alg, strlen(alg)));
	cr_assert(!key_put_string(&b, pub, pub_len));
	*len = b.len;
	return (unsigned char *)buf_detach(&b);
}

/* An mpint as SSH writes it: no needless leading zero, and a zero byte
 * before a set high bit. */
static bool canonical_mpint(const unsigned char *s, size_t len)
{
	if (!len)
		return true;
	if (s[0] & 0x80)
		return false;
	return s[0] || (len > 1 && (s[1] & 0x80));
}

bool tk_verify(const unsigned char *pub, size_t pub_len, const EVP_MD *md,
	       const unsigned char *data, size_t len, const unsigned char *sig,
	       size_t sig_len)
{
	EVP_PKEY *pkey = tk_pub_pkey(pub, pub_len);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *der = NULL;
	int der_len = 0;
	bool ok;

	cr_assert_not_null(ctx);
	if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC) {
		struct tk_wire w = { sig, sig_len };
		const unsigned char *r, *s;
		size_t r_len, s_len;
		ECDSA_SIG *es = ECDSA_SIG_new();

		cr_assert(tk_string(&w, &r, &r_len), "no r in the signature");
		cr_assert(tk_string(&w, &s, &s_len), "no s in the signature");
		cr_assert_eq(w.left, 0, "bytes after the ecdsa signature");
		cr_assert(canonical_mpint(r, r_len), "r: not canonical");
		cr_assert(canonical_mpint(s, s_len), "s: not canonical");
		cr_assert(ECDSA_SIG_set0(es, BN_bin2bn(r, (int)r_len, NULL),
					 BN_bin2bn(s, (int)s_len, NULL)));
		der_len = i2d_ECDSA_SIG(es, &der);
		cr_assert(der_len > 0);
		ECDSA_SIG_free(es);
		sig = der;
		sig_len = (size_t)der_len;
	}
	ok = EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) == 1 &&
	     EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1;
	OPENSSL_free(der);
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	return ok;
}

void tk_check_sign(const struct ssh_key *k, const char *alg,
		   const EVP_MD *md)
{
	const EVP_MD *others[] = { EVP_sha1(), EVP_sha256(), EVP_sha384(),
				   EVP_sha512() };
	unsigned char *data, *sig;
	size_t len, sig_len;
	struct err e;
	int rc;

	err_init(&e);
	data = tk_userauth(alg, k->pub, k->pub_len, &len);
	rc = key_sign(k, data, len, &sig, &sig_len, &e);
	cr_assert_eq(rc, 0, "key_sign %s: %s", alg, e.msg);
	cr_assert(tk_verify(k->pub, k->pub_len, md, data, len, sig, sig_len),
		  "%s signature does not verify", alg);
	for (size_t i = 0; md && i < sizeof(others) / sizeof(others[0]); i++)
		if (others[i] != md)
			cr_assert(!tk_verify(k->pub, k->pub_len, others[i],
					     data, len, sig, sig_len),
				  "%s signature verifies with another hash",
				  alg);
	data[len / 2] ^= 1;
	cr_assert(!tk_verify(k->pub, k->pub_len, md, data, len, sig, sig_len),
		  "%s signature verifies over other data", alg);
	free(sig);
	free(data);
}

