/*
 * key.c: a user key parsed once and then used to sign every host's user
 * authentication. Private keys come from OpenSSH ("openssh-key-v1") or PEM
 * files and are held as libcrypto EVP_PKEYs; keys that ssh-agent holds sign
 * through agent.c. Signatures come out in the form libssh2's sign callback
 * must return: the inner signature, without the algorithm name.
 *
 * Every length read from a file is checked before use, so a truncated or
 * damaged file gives an error naming it, never a crash.
 */
#include "ssh/key.h"
#include "ssh/agent.h"
#include "ssh/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

/* Private keys are a few KiB; the cap only stops a wrong path (a log, an
 * image) from being read whole. */
#define KEY_FILE_MAX (1024 * 1024)

#define OPENSSH_BEGIN "-----BEGIN OPENSSH PRIVATE KEY-----"
#define OPENSSH_END "-----END OPENSSH PRIVATE KEY-----"
/* The magic includes its terminating NUL. */
#define OPENSSH_MAGIC "openssh-key-v1"
#define OPENSSH_MAGIC_LEN sizeof(OPENSSH_MAGIC)
/* The block size of cipher "none", which the private section is padded to. */
#define OPENSSH_BLOCK 8

#define SSH_MSG_USERAUTH_REQUEST 50
#define ED25519_LEN 32
/* The bytes of one coordinate of a nistp521 point. */
#define EC_FIELD_MAX 66
/* OpenSSH refuses smaller RSA keys; better to say so before connecting. */
#define RSA_MIN_BITS 1024

struct key_info {
	const char *name;          /* key type, and its signature algorithm */
	const char *curve;         /* ecdsa: the SSH curve name */
	const char *group;         /* ecdsa: the OpenSSL group name */
	size_t field_len;          /* ecdsa: bytes of one coordinate */
	const EVP_MD *(*md)(void); /* NULL for ed25519; for RSA, ssh-rsa's */
};

static const struct key_info key_info[] = {
	[KEY_ED25519] = { "ssh-ed25519", NULL, NULL, 0, NULL },
	[KEY_ECDSA_P256] = { "ecdsa-sha2-nistp256", "nistp256", "prime256v1",
			     32, EVP_sha256 },
	[KEY_ECDSA_P384] = { "ecdsa-sha2-nistp384", "nistp384", "secp384r1",
			     48, EVP_sha384 },
	[KEY_ECDSA_P521] = { "ecdsa-sha2-nistp521", "nistp521", "secp521r1",
			     66, EVP_sha512 },
	[KEY_RSA] = { "ssh-rsa", NULL, NULL, 0, EVP_sha1 },
};

#define KEY_TYPES (sizeof(key_info) / sizeof(key_info[0]))

/* The algorithms an RSA key signs with, by the name the server is sent. */
static const struct rsa_alg {
	const char *name;
	const EVP_MD *(*md)(void);
	uint32_t agent_flags;
} rsa_algs[] = {
	{ "ssh-rsa", EVP_sha1, 0 },
	{ "rsa-sha2-256", EVP_sha256, AGENT_RSA_SHA2_256 },
	{ "rsa-sha2-512", EVP_sha512, AGENT_RSA_SHA2_512 },
};

/* ---- wire encoding ---- */

int key_get_u8(struct key_reader *r, uint8_t *v)
{
	if (r->left < 1)
		return -1;
	*v = r->p[0];
	r->p++;
	r->left--;
	return 0;
}

int key_get_u32(struct key_reader *r, uint32_t *v)
{
	if (r->left < 4)
		return -1;
	*v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 |
	     (uint32_t)r->p[2] << 8 | (uint32_t)r->p[3];
	r->p += 4;
	r->left -= 4;
	return 0;
}

int key_get_string(struct key_reader *r, const unsigned char **s,
		   size_t *len)
{
	struct key_reader save = *r;
	uint32_t n;

	if (key_get_u32(r, &n) || n > r->left) {
		*r = save;
		return -1;
	}
	*s = r->p;
	*len = n;
	r->p += n;
	r->left -= n;
	return 0;
}

int key_put_u8(struct buf *b, uint8_t v)
{
	return buf_append(b, &v, 1) ? SSH_ENOMEM : 0;
}

int key_put_u32(struct buf *b, uint32_t v)
{
	unsigned char x[4] = { v >> 24, v >> 16, v >> 8, v };

	return buf_append(b, x, sizeof(x)) ? SSH_ENOMEM : 0;
}

int key_put_string(struct buf *b, const void *s, size_t len)
{
	if (len > UINT32_MAX)
		return SSH_EINVAL;
	if (key_put_u32(b, (uint32_t)len) || buf_append(b, s, len))
		return SSH_ENOMEM;
	return 0;
}

/* An mpint: big-endian two's complement, shortest form. */
static int put_bn(struct buf *b, const BIGNUM *bn)
{
	size_t len = (size_t)BN_num_bytes(bn);
	int pad = len && BN_num_bits(bn) % 8 == 0;

	if (BN_is_negative(bn))
		return SSH_EINVAL;
	if (key_put_u32(b, (uint32_t)(len + pad)) ||
	    (pad && key_put_u8(b, 0)) || buf_reserve(b, len))
		return SSH_ENOMEM;
	BN_bn2bin(bn, (unsigned char *)b->data + b->len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

/* A non-negative mpint as a BIGNUM; NULL when negative or out of memory.
 * Secure BIGNUMs are wiped when freed, and so are parameters built from
 * them. */
static BIGNUM *get_bn(const unsigned char *s, size_t len)
{
	BIGNUM *bn;

	if (len && (s[0] & 0x80))
		return NULL;
	bn = BN_secure_new();
	if (bn && !BN_bin2bn(s, (int)len, bn)) {
		BN_free(bn);
		return NULL;
	}
	return bn;
}

static bool str_eq(const unsigned char *s, size_t len, const char *lit)
{
	return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* Untrusted names go into messages only as short printable text. */
static void printable(const unsigned char *s, size_t len, char *out,
		      size_t size)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 4 < size; i++)
		out[n++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	if (i < len)
		for (int j = 0; j < 3; j++)
			out[n++] = '.';
	out[n] = '\0';
}

static const char *find(const char *hay, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0)
			return hay + i;
	return NULL;
}

/* ---- key types and public blobs ---- */

const char *key_type_name(enum key_type t)
{
	if ((size_t)t >= KEY_TYPES)
		return "unknown";
	return key_info[t].name;
}

static int type_from_name(const unsigned char *s, size_t len,
			  enum key_type *t)
{
	for (size_t i = 0; i < KEY_TYPES; i++) {
		if (str_eq(s, len, key_info[i].name)) {
			*t = (enum key_type)i;
			return 0;
		}
	}
	return -1;
}

/* Checks that blob is a well-formed public key of a known type. */
static int blob_parse(const unsigned char *blob, size_t len,
		      enum key_type *t)
{
	struct key_reader r = { blob, len };
	const unsigned char *s, *s2;
	size_t n, n2;

	if (key_get_string(&r, &s, &n) || type_from_name(s, n, t))
		return -1;
	switch (*t) {
	case KEY_ED25519:
		if (key_get_string(&r, &s, &n) || n != ED25519_LEN)
			return -1;
		break;
	case KEY_ECDSA_P256:
	case KEY_ECDSA_P384:
	case KEY_ECDSA_P521:
		if (key_get_string(&r, &s, &n) ||
		    !str_eq(s, n, key_info[*t].curve) ||
		    key_get_string(&r, &s, &n) ||
		    n != 1 + 2 * key_info[*t].field_len || s[0] != 4)
			return -1;
		break;
	case KEY_RSA:
		if (key_get_string(&r, &s, &n) ||
		    key_get_string(&r, &s2, &n2) || !n || (s[0] & 0x80) ||
		    !n2 || (s2[0] & 0x80))
			return -1;
		break;
	}
	return r.left ? -1 : 0;
}

int key_from_blob(struct ssh_key *k, const unsigned char *blob, size_t len,
		  struct err *e)
{
	struct key_reader r = { blob, len };
	const unsigned char *name;
	size_t name_len;
	char shown[64] = "(none)";
	enum key_type t;

	memset(k, 0, sizeof(*k));
	if (blob_parse(blob, len, &t)) {
		if (!key_get_string(&r, &name, &name_len))
			printable(name, name_len, shown, sizeof(shown));
		return err_set(e, SSH_EKEY,
			       "public key of type %s is not one slicectl "
			       "can use (ed25519, ecdsa or rsa), or is "
			       "malformed", shown);
	}
	k->pub = malloc(len);
	if (!k->pub)
		return err_set(e, SSH_ENOMEM, "out of memory");
	memcpy(k->pub, blob, len);
	k->pub_len = len;
	k->type = t;
	return 0;
}

/* The SSH public blob of pkey, built from its numbers. */
static int pub_blob(EVP_PKEY *pkey, enum key_type t, struct buf *b)
{
	const struct key_info *ki = &key_info[t];
	unsigned char raw[1 + 2 * EC_FIELD_MAX];
	size_t raw_len = sizeof(raw);
	BIGNUM *x = NULL, *y = NULL;
	int rc = SSH_EKEY;

	if (key_put_string(b, ki->name, strlen(ki->name)))
		return SSH_ENOMEM;
	switch (t) {
	case KEY_ED25519:
		if (EVP_PKEY_get_raw_public_key(pkey, raw, &raw_len) != 1 ||
		    raw_len != ED25519_LEN)
			return SSH_EKEY;
		return key_put_string(b, raw, raw_len);
	case KEY_ECDSA_P256:
	case KEY_ECDSA_P384:
	case KEY_ECDSA_P521:
		/* From the coordinates, since the encoded point keeps the
		 * compression a PEM file happened to use. */
		if (EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X,
					  &x) != 1 ||
		    EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y,
					  &y) != 1)
			goto out;
		raw[0] = 4;
		if (BN_bn2binpad(x, raw + 1, (int)ki->field_len) < 0 ||
		    BN_bn2binpad(y, raw + 1 + ki->field_len,
				 (int)ki->field_len) < 0)
			goto out;
		rc = key_put_string(b, ki->curve, strlen(ki->curve));
		if (!rc)
			rc = key_put_string(b, raw, 1 + 2 * ki->field_len);
		break;
	case KEY_RSA:
		if (EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E,
					  &x) != 1 ||
		    EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N,
					  &y) != 1)
			goto out;
		rc = put_bn(b, x);
		if (!rc)
			rc = put_bn(b, y);
		break;
	}
out:
	BN_free(x);
	BN_free(y);
	return rc;
}

void key_fingerprint(const unsigned char *pub, size_t pub_len,
		     char out[KEY_FINGERPRINT_SIZE])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	char b64[EVP_MAX_MD_SIZE * 2];
	int n;

	if (EVP_Digest(pub, pub_len, md, &md_len, EVP_sha256(), NULL) != 1) {
		ERR_clear_error();
		snprintf(out, KEY_FINGERPRINT_SIZE, "SHA256:?");
		return;
	}
	n = EVP_EncodeBlock((unsigned char *)b64, md, (int)md_len);
	while (n > 0 && b64[n - 1] == '=')
		n--;
	snprintf(out, KEY_FINGERPRINT_SIZE, "SHA256:%.*s", n, b64);
}

/* ---- signing with a key held here ---- */

/* What EVP_DigestSign produces (DER for ECDSA), allocated with malloc. */
static int pkey_sign(EVP_PKEY *pkey, const EVP_MD *md,
		     const unsigned char *data, size_t len,
		     unsigned char **sig, size_t *sig_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t n = 0;
	int rc = -1;

	*sig = NULL;
	if (!ctx || EVP_DigestSignInit(ctx, NULL, md, NULL, pkey) != 1 ||
	    EVP_DigestSign(ctx, NULL, &n, data, len) != 1 || !n)
		goto out;
	*sig = malloc(n);
	if (!*sig)
		goto out;
	if (EVP_DigestSign(ctx, *sig, &n, data, len) != 1) {
		free(*sig);
		*sig = NULL;
		goto out;
	}
	*sig_len = n;
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

static int pkey_verify(EVP_PKEY *pkey, const EVP_MD *md,
		       const unsigned char *data, size_t len,
		       const unsigned char *sig, size_t sig_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) == 1 &&
		 EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1;

	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -1;
}

/* An ECDSA signature as SSH carries it: mpint r, mpint s. */
static int ecdsa_der_to_ssh(const unsigned char *der, size_t len,
			    struct buf *out)
{
	const unsigned char *p = der;
	ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &p, (long)len);
	const BIGNUM *r, *sv;
	int rc;

	if (!s)
		return SSH_EKEY;
	ECDSA_SIG_get0(s, &r, &sv);
	rc = put_bn(out, r);
	if (!rc)
		rc = put_bn(out, sv);
	ECDSA_SIG_free(s);
	return rc;
}

static int sign_local(const struct ssh_key *k, const EVP_MD *md,
		      const unsigned char *data, size_t len,
		      unsigned char **sig, size_t *sig_len, struct err *e)
{
	struct buf b;
	unsigned char *raw;
	size_t raw_len;
	int rc;

	if (pkey_sign(k->pkey, md, data, len, &raw, &raw_len)) {
		ERR_clear_error();
		return err_set(e, SSH_EKEY, "signing with the %s key failed "
			       "in OpenSSL", key_type_name(k->type));
	}
	if (k->type != KEY_ECDSA_P256 && k->type != KEY_ECDSA_P384 &&
	    k->type != KEY_ECDSA_P521) {
		*sig = raw;
		*sig_len = raw_len;
		return 0;
	}
	buf_init(&b);
	rc = ecdsa_der_to_ssh(raw, raw_len, &b);
	free(raw);
	if (rc) {
		buf_release(&b);
		return err_set(e, rc, "encoding the %s signature failed",
			       key_type_name(k->type));
	}
	*sig_len = b.len;
	*sig = (unsigned char *)buf_detach(&b);
	return 0;
}

/*
 * The algorithm named in a userauth request: string session id, byte 50,
 * string user, string service, string "publickey", bool, string algorithm.
 */
static int userauth_alg(const unsigned char *data, size_t len,
			const unsigned char **alg, size_t *alg_len)
{
	struct key_reader r = { data, len };
	const unsigned char *s;
	size_t n;
	uint8_t type, has_sig;

	if (key_get_string(&r, &s, &n) || key_get_u8(&r, &type) ||
	    type != SSH_MSG_USERAUTH_REQUEST || key_get_string(&r, &s, &n) ||
	    key_get_string(&r, &s, &n) || key_get_string(&r, &s, &n) ||
	    !str_eq(s, n, "publickey") || key_get_u8(&r, &has_sig) ||
	    key_get_string(&r, alg, alg_len))
		return -1;
	return 0;
}

/* The hash and the agent flags for the algorithm the data asks for. */
static int sign_alg(const struct ssh_key *k, const unsigned char *data,
		    size_t len, const EVP_MD **md, uint32_t *flags,
		    struct err *e)
{
	const unsigned char *alg;
	size_t alg_len;
	char shown[64];

	*md = key_info[k->type].md ? key_info[k->type].md() : NULL;
	*flags = 0;
	if (userauth_alg(data, len, &alg, &alg_len))
		return 0;
	if (k->type == KEY_RSA) {
		for (size_t i = 0; i < sizeof(rsa_algs) / sizeof(rsa_algs[0]);
		     i++) {
			if (str_eq(alg, alg_len, rsa_algs[i].name)) {
				*md = rsa_algs[i].md();
				*flags = rsa_algs[i].agent_flags;
				return 0;
			}
		}
	} else if (str_eq(alg, alg_len, key_info[k->type].name)) {
		return 0;
	}
	printable(alg, alg_len, shown, sizeof(shown));
	return err_set(e, SSH_EKEY,
		       "asked for a %s signature, which a %s key cannot make",
		       shown, key_type_name(k->type));
}

int key_sign(const struct ssh_key *k, const unsigned char *data, size_t len,
	     unsigned char **sig, size_t *sig_len, struct err *e)
{
	const EVP_MD *md;
	uint32_t flags;
	int rc;

	*sig = NULL;
	*sig_len = 0;
	if (!k || !data || (size_t)k->type >= KEY_TYPES ||
	    (!k->pkey && !k->agent))
		return err_set(e, SSH_EINVAL, "key_sign: no usable key");
	rc = sign_alg(k, data, len, &md, &flags, e);
	if (rc)
		return rc;
	if (k->agent)
		return agent_sign(k->agent, k->pub, k->pub_len, data, len,
				  flags, sig, sig_len, e);
	return sign_local(k, md, data, len, sig, sig_len, e);
}

int key_sign_callback(LIBSSH2_SESSION *session, unsigned char **sig,
		      size_t *sig_len, const unsigned char *data,
		      size_t data_len, void **abstract)
{
	struct ssh_key *k;

	(void)session;
	if (!abstract || !*abstract)
		return -1;
	k = *abstract;
	err_init(&k->sign_err);
	if (key_sign(k, data, data_len, sig, sig_len, &k->sign_err)) {
		log_debug("signing with %s key: %s", key_type_name(k->type),
			  k->sign_err.msg);
		return -1;
	}
	return 0;
}

void key_release(struct ssh_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k->pub);
	free(k->comment);
	memset(k, 0, sizeof(*k));
}

/* ---- loading ---- */

static int corrupt(struct err *e, const char *path, const char *what)
{
	return err_set(e, SSH_EKEY,
		       "private key %s is damaged or truncated (%s): copy it "
		       "again, or create a new one with ssh-keygen -t ed25519",
		       path, what);
}

static int encrypted(struct err *e, const char *path)
{
	return err_set(e, SSH_EKEY,
		       "private key %s is encrypted with a passphrase; "
		       "slicectl signs for thousands of hosts without "
		       "prompting: load it into ssh-agent (eval $(ssh-agent); "
		       "ssh-add %s) and run without --identity",
		       path, path);
}

static int unsupported(struct err *e, const char *path, const char *type)
{
	const char *why = "";

	if (!strncmp(type, "sk-", 3))
		why = " (a FIDO security key wants a touch for every "
		      "signature)";
	else if (!strcmp(type, "ssh-dss") || !strcmp(type, "DSA"))
		why = " (DSA is obsolete and OpenSSH refuses it)";
	return err_set(e, SSH_EKEY,
		       "private key %s is of type %s, which slicectl cannot "
		       "sign with%s: use an ed25519 key (ssh-keygen -t "
		       "ed25519), or an ecdsa or rsa one",
		       path, type, why);
}

static int too_large(struct err *e, const char *path)
{
	return err_set(e, SSH_EKEY,
		       "%s is larger than %d KiB, which no private key is: "
		       "check the path", path, KEY_FILE_MAX / 1024);
}

/* The whole file, NUL-terminated, in memory that is wiped when freed. */
static int read_key_file(const char *path, char **out, size_t *out_len,
			 struct err *e)
{
	struct stat st;
	size_t cap, len = 0;
	char *data;
	int fd, rc;

	switch (file_open_regular(path, KEY_FILE_MAX, &fd, &st)) {
	case FILE_OPENED:
		break;
	case FILE_CANNOT_OPEN:
		if (errno == ENOENT)
			return err_set(e, SSH_EKEY,
				       "private key %s does not exist: check "
				       "the path", path);
		return err_errno(e, SSH_EKEY, errno,
				 "cannot open private key %s", path);
	case FILE_NOT_REGULAR:
		return err_set(e, SSH_EKEY,
			       "private key %s is %s, not a key file: name "
			       "a regular file", path, file_kind_name(st.st_mode));
	case FILE_TOO_LARGE:
		return too_large(e, path);
	}
	/* The file may still grow while it is read: the loop checks. */
	cap = (size_t)st.st_size + 1;
	data = malloc(cap);
	if (!data) {
		close(fd);
		return err_set(e, SSH_ENOMEM, "out of memory");
	}
	for (;;) {
		ssize_t n;

		if (len > KEY_FILE_MAX) {
			rc = too_large(e, path);
			goto fail;
		}
		if (len + 1 == cap) {
			char *bigger;

			bigger = malloc(cap * 2);
			if (!bigger) {
				rc = err_set(e, SSH_ENOMEM, "out of memory");
				goto fail;
			}
			memcpy(bigger, data, len);
			OPENSSL_cleanse(data, cap);
			free(data);
			data = bigger;
			cap *= 2;
		}
		n = read(fd, data + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_errno(e, SSH_EKEY, errno,
				       "cannot read private key %s", path);
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	data[len] = '\0';
	*out = data;
	*out_len = len;
	return 0;
fail:
	close(fd);
	OPENSSL_cleanse(data, cap);
	free(data);
	return rc;
}

static int b64_decode(const char *in, size_t len, unsigned char **out,
		      size_t *out_len)
{
	size_t cap = len / 4 * 3 + 3;
	unsigned char *o = malloc(cap);

	if (!o)
		return SSH_ENOMEM;
	if (base64_decode(in, len, o, cap, out_len)) {
		OPENSSL_cleanse(o, cap);
		free(o);
		return SSH_EKEY;
	}
	*out = o;
	return 0;
}

static EVP_PKEY *pkey_from_params(const char *alg, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, alg, NULL);
	EVP_PKEY *pkey = NULL;

	if (params && ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
	    EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_KEYPAIR, params) != 1)
		pkey = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	return pkey;
}

static EVP_PKEY *ec_pkey(enum key_type t, const unsigned char *q,
			 size_t q_len, const BIGNUM *d)
{
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	EVP_PKEY *pkey = NULL;

	if (bld &&
	    OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME,
					    key_info[t].group, 0) == 1 &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY,
					     q, q_len) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d) == 1)
		pkey = pkey_from_params("EC", bld);
	OSSL_PARAM_BLD_free(bld);
	return pkey;
}

/* OpenSSH keeps n, e, d, iqmp, p, q; OpenSSL's CRT also wants d mod (p-1)
 * and d mod (q-1). */
static EVP_PKEY *rsa_pkey(BIGNUM *const bn[6])
{
	const BIGNUM *n = bn[0], *e = bn[1], *d = bn[2], *iqmp = bn[3],
		     *p = bn[4], *q = bn[5];
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	BN_CTX *ctx = BN_CTX_secure_new();
	BIGNUM *dmp1 = BN_secure_new(), *dmq1 = BN_secure_new();
	BIGNUM *t = BN_secure_new();
	EVP_PKEY *pkey = NULL;

	if (bld && ctx && dmp1 && dmq1 && t &&
	    BN_sub(t, p, BN_value_one()) && BN_mod(dmp1, d, t, ctx) &&
	    BN_sub(t, q, BN_value_one()) && BN_mod(dmq1, d, t, ctx) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_D, d) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_FACTOR1, p) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_FACTOR2, q) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_EXPONENT1,
				   dmp1) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_EXPONENT2,
				   dmq1) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
				   iqmp) == 1)
		pkey = pkey_from_params("RSA", bld);
	BN_clear_free(dmp1);
	BN_clear_free(dmq1);
	BN_clear_free(t);
	BN_CTX_free(ctx);
	OSSL_PARAM_BLD_free(bld);
	return pkey;
}

/* The key fields of an OpenSSH private section, after its key type. */
static int openssh_fields(struct key_reader *r, enum key_type t,
			  EVP_PKEY **pkey, const char *path, struct err *e)
{
	const unsigned char *s, *pk;
	size_t n, pk_len;
	BIGNUM *bn[6] = { NULL };
	int rc = 0;

	*pkey = NULL;
	switch (t) {
	case KEY_ED25519:
		if (key_get_string(r, &pk, &pk_len) || pk_len != ED25519_LEN ||
		    key_get_string(r, &s, &n) || n != 2 * ED25519_LEN ||
		    memcmp(s + ED25519_LEN, pk, ED25519_LEN) != 0)
			return corrupt(e, path, "bad ed25519 fields");
		*pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, s,
						     ED25519_LEN);
		break;
	case KEY_ECDSA_P256:
	case KEY_ECDSA_P384:
	case KEY_ECDSA_P521:
		if (key_get_string(r, &s, &n) ||
		    !str_eq(s, n, key_info[t].curve) ||
		    key_get_string(r, &pk, &pk_len) ||
		    key_get_string(r, &s, &n))
			return corrupt(e, path, "bad ecdsa fields");
		bn[0] = get_bn(s, n);
		if (!bn[0])
			return corrupt(e, path, "bad ecdsa private value");
		*pkey = ec_pkey(t, pk, pk_len, bn[0]);
		break;
	case KEY_RSA:
		for (int i = 0; i < 6 && !rc; i++) {
			if (key_get_string(r, &s, &n) ||
			    !(bn[i] = get_bn(s, n)))
				rc = corrupt(e, path, "bad rsa fields");
		}
		if (!rc && BN_num_bits(bn[0]) < RSA_MIN_BITS)
			rc = err_set(e, SSH_EKEY,
				     "private key %s is a %d-bit RSA key; "
				     "OpenSSH refuses RSA keys under %d bits: "
				     "create an ed25519 key (ssh-keygen -t "
				     "ed25519)",
				     path, BN_num_bits(bn[0]), RSA_MIN_BITS);
		if (!rc)
			*pkey = rsa_pkey(bn);
		break;
	}
	for (int i = 0; i < 6; i++)
		BN_clear_free(bn[i]);
	if (rc)
		return rc;
	if (!*pkey)
		return corrupt(e, path, "OpenSSL refused the key's numbers");
	return 0;
}

static int set_comment(struct ssh_key *k, const unsigned char *s, size_t n)
{
	if (!n)
		return 0;
	k->comment = malloc(n + 1);
	if (!k->comment)
		return SSH_ENOMEM;
	memcpy(k->comment, s, n);
	k->comment[n] = '\0';
	return 0;
}

/* Makes k->pub from k->pkey; when the file also holds the public blob,
 * the two must agree. */
static int set_pub(struct ssh_key *k, const unsigned char *want,
		   size_t want_len, const char *path, struct err *e)
{
	struct buf b;
	int rc;

	buf_init(&b);
	rc = pub_blob(k->pkey, k->type, &b);
	if (rc == SSH_ENOMEM) {
		buf_release(&b);
		return err_set(e, rc, "out of memory");
	}
	if (rc) {
		buf_release(&b);
		return corrupt(e, path, "no usable public key");
	}
	if (want && (want_len != b.len || memcmp(want, b.data, b.len))) {
		buf_release(&b);
		return corrupt(e, path,
			       "public and private parts do not match");
	}
	k->pub_len = b.len;
	k->pub = (unsigned char *)buf_detach(&b);
	return 0;
}

static int parse_openssh(struct ssh_key *k, const unsigned char *bin,
			 size_t len, const char *path, struct err *e)
{
	struct key_reader r = { bin, len }, priv;
	const unsigned char *cipher, *kdf, *kdfopts, *pub, *sec, *s;
	size_t cipher_len, kdf_len, kdfopts_len, pub_len, sec_len, n;
	uint32_t nkeys, check1, check2;
	enum key_type t, t2;
	EVP_PKEY *pkey;
	char shown[64];
	int rc;

	if (len < OPENSSH_MAGIC_LEN ||
	    memcmp(bin, OPENSSH_MAGIC, OPENSSH_MAGIC_LEN) != 0)
		return corrupt(e, path, "no openssh-key-v1 header");
	r.p += OPENSSH_MAGIC_LEN;
	r.left -= OPENSSH_MAGIC_LEN;
	if (key_get_string(&r, &cipher, &cipher_len) ||
	    key_get_string(&r, &kdf, &kdf_len) ||
	    key_get_string(&r, &kdfopts, &kdfopts_len) ||
	    key_get_u32(&r, &nkeys))
		return corrupt(e, path, "short header");
	if (nkeys != 1)
		return err_set(e, SSH_EKEY,
			       "private key file %s holds %u keys; slicectl "
			       "reads files of one key, as ssh-keygen writes",
			       path, nkeys);
	if (key_get_string(&r, &pub, &pub_len) ||
	    key_get_string(&r, &sec, &sec_len))
		return corrupt(e, path, "short header");
	/* The public part is readable even in an encrypted file: a type we
	 * cannot use is the more useful thing to report. */
	priv = (struct key_reader){ pub, pub_len };
	if (key_get_string(&priv, &s, &n))
		return corrupt(e, path, "bad public key");
	if (type_from_name(s, n, &t)) {
		printable(s, n, shown, sizeof(shown));
		return unsupported(e, path, shown);
	}
	if (!str_eq(cipher, cipher_len, "none") ||
	    !str_eq(kdf, kdf_len, "none"))
		return encrypted(e, path);
	if (sec_len % OPENSSH_BLOCK)
		return corrupt(e, path, "private section is not padded");
	priv = (struct key_reader){ sec, sec_len };
	if (key_get_u32(&priv, &check1) || key_get_u32(&priv, &check2) ||
	    check1 != check2)
		return corrupt(e, path, "check values differ");
	if (key_get_string(&priv, &s, &n) || type_from_name(s, n, &t2) ||
	    t2 != t)
		return corrupt(e, path,
			       "private part is not of the public part's type");
	k->type = t;
	rc = openssh_fields(&priv, t, &pkey, path, e);
	if (rc)
		return rc;
	k->pkey = pkey;
	if (key_get_string(&priv, &s, &n))
		return corrupt(e, path, "no comment");
	if (set_comment(k, s, n))
		return err_set(e, SSH_ENOMEM, "out of memory");
	for (size_t i = 0; i < priv.left; i++)
		if (priv.p[i] != (unsigned char)(i + 1))
			return corrupt(e, path, "bad padding");
	return set_pub(k, pub, pub_len, path, e);
}

static int load_openssh(struct ssh_key *k, const char *data, size_t len,
			const char *begin, const char *path, struct err *e)
{
	const char *body = begin + strlen(OPENSSH_BEGIN);
	const char *end = find(body, len - (size_t)(body - data), OPENSSH_END);
	unsigned char *bin;
	size_t bin_len;
	int rc;

	if (!end)
		return corrupt(e, path, "no END OPENSSH PRIVATE KEY line");
	rc = b64_decode(body, (size_t)(end - body), &bin, &bin_len);
	if (rc == SSH_ENOMEM)
		return err_set(e, rc, "out of memory");
	if (rc)
		return corrupt(e, path, "bad base64");
	rc = parse_openssh(k, bin, bin_len, path, e);
	OPENSSL_cleanse(bin, bin_len);
	free(bin);
	return rc;
}

/* A passphrase is never asked for: the request itself says "encrypted". */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)asked = 1;
	return -1;
}

static int pkey_type(EVP_PKEY *pkey, enum key_type *t, const char *path,
		     struct err *e)
{
	const char *name;
	char group[64];
	int bits;

	switch (EVP_PKEY_get_base_id(pkey)) {
	case EVP_PKEY_ED25519:
		*t = KEY_ED25519;
		return 0;
	case EVP_PKEY_RSA:
		bits = EVP_PKEY_get_bits(pkey);
		if (bits < RSA_MIN_BITS)
			return err_set(e, SSH_EKEY,
				       "private key %s is a %d-bit RSA key; "
				       "OpenSSH refuses RSA keys under %d "
				       "bits: create an ed25519 key "
				       "(ssh-keygen -t ed25519)",
				       path, bits, RSA_MIN_BITS);
		*t = KEY_RSA;
		return 0;
	case EVP_PKEY_EC:
		if (EVP_PKEY_get_utf8_string_param(pkey,
						   OSSL_PKEY_PARAM_GROUP_NAME,
						   group, sizeof(group),
						   NULL) != 1)
			return unsupported(e, path,
					   "EC without a named curve");
		for (size_t i = 0; i < KEY_TYPES; i++) {
			if (key_info[i].group &&
			    !strcmp(group, key_info[i].group)) {
				*t = (enum key_type)i;
				return 0;
			}
		}
		return unsupported(e, path, group);
	case EVP_PKEY_DSA:
		return unsupported(e, path, "DSA");
	default:
		name = EVP_PKEY_get0_type_name(pkey);
		return unsupported(e, path, name ? name : "unknown");
	}
}

static int load_pem(struct ssh_key *k, const char *data, size_t len,
		    const char *path, struct err *e)
{
	BIO *bio = BIO_new_mem_buf(data, (int)len);
	EVP_PKEY *pkey;
	int asked = 0, rc;

	if (!bio)
		return err_set(e, SSH_ENOMEM, "out of memory");
	pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, &asked);
	BIO_free(bio);
	if (!pkey) {
		if (asked || find(data, len, "ENCRYPTED"))
			return encrypted(e, path);
		if (!find(data, len, "PRIVATE KEY-----"))
			return err_set(e, SSH_EKEY,
				       "%s holds no private key (a certificate "
				       "or public key?): pass the private key "
				       "file", path);
		return corrupt(e, path, "OpenSSL cannot read it as PEM");
	}
	k->pkey = pkey;
	rc = pkey_type(pkey, &k->type, path, e);
	if (rc)
		return rc;
	return set_pub(k, NULL, 0, path, e);
}

static int not_a_key(const char *data, size_t len, const char *path,
		     struct err *e)
{
	if (!len)
		return err_set(e, SSH_EKEY, "private key %s is empty", path);
	if (!strncmp(data, "ssh-", 4) || !strncmp(data, "ecdsa-", 6) ||
	    !strncmp(data, "sk-", 3))
		return err_set(e, SSH_EKEY,
			       "%s is a public key: pass the private key "
			       "file (the same name without .pub)", path);
	if (!strncmp(data, "PuTTY-User-Key-File", 19))
		return err_set(e, SSH_EKEY,
			       "%s is a PuTTY key: convert it with puttygen "
			       "%s -O private-openssh -o NEWFILE", path, path);
	return err_set(e, SSH_EKEY,
		       "%s is not a private key (no BEGIN ... PRIVATE KEY "
		       "line): check the path", path);
}

/* Signs and verifies once, so a key whose numbers do not fit together is
 * refused here rather than by every host. */
static int self_test(struct ssh_key *k, const char *path, struct err *e)
{
	static const unsigned char msg[] = "slicectl key self-test";
	const EVP_MD *md = k->type == KEY_ED25519 ? NULL : EVP_sha256();
	unsigned char *sig;
	size_t sig_len;
	int bad;

	if (pkey_sign(k->pkey, md, msg, sizeof(msg), &sig, &sig_len))
		return corrupt(e, path, "it cannot sign");
	bad = pkey_verify(k->pkey, md, msg, sizeof(msg), sig, sig_len);
	free(sig);
	if (bad)
		return corrupt(e, path,
			       "its signatures do not verify with its own "
			       "public key");
	return 0;
}

int key_load_file(struct ssh_key *k, const char *path, struct err *e)
{
	const char *begin;
	char *data = NULL;
	size_t len = 0;
	int rc;

	memset(k, 0, sizeof(*k));
	if (!path || !*path)
		return err_set(e, SSH_EINVAL, "no private key file given");
	rc = read_key_file(path, &data, &len, e);
	if (rc)
		return rc;
	begin = find(data, len, OPENSSH_BEGIN);
	if (begin)
		rc = load_openssh(k, data, len, begin, path, e);
	else if (find(data, len, "-----BEGIN "))
		rc = load_pem(k, data, len, path, e);
	else
		rc = not_a_key(data, len, path, e);
	OPENSSL_cleanse(data, len);
	free(data);
	if (!rc)
		rc = self_test(k, path, e);
	ERR_clear_error();
	if (rc)
		key_release(k);
	return rc;
}
