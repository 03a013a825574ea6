/*
 * test_knownhosts.c: known_hosts verification against files written the
 * way OpenSSH writes them (plain, hashed by ssh-keygen -H, "[host]:port",
 * name lists, patterns, markers, comments, malformed lines), with keys made
 * by ssh-keygen and fingerprints compared with ssh-keygen -l. No network:
 * the checks are fed the raw key blobs libssh2 would hand over.
 */
#include "ssh/knownhosts.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if LIBSSH2_VERSION_NUM >= 0x010b00
#define RSA_METHODS "rsa-sha2-512,rsa-sha2-256,ssh-rsa"
#else
#define RSA_METHODS "ssh-rsa"
#endif
#define ECDSA_METHODS \
	"ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521"

struct test_key {
	char path[512];         /* private key; the public one is path.pub */
	char type[64];          /* as in known_hosts */
	char b64[4096];
	unsigned char blob[4096];
	size_t len;
	int libssh2_type;
	char fp[80];            /* "SHA256:..." as ssh-keygen -l prints it */
};

static char dir[256];
static char kh_path[600];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/kh-test-XXXXXX", tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(kh_path, sizeof(kh_path), "%s/known_hosts", dir);
}

static void teardown(void)
{
	rm_rf(dir);
}

TestSuite(knownhosts, .init = setup, .fini = teardown);

static void spew(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	cr_assert_eq(fclose(f), 0);
}

/* Makes a host key with ssh-keygen and loads its public blob the way
 * libssh2_session_hostkey would hand it over. */
static void make_key(struct test_key *k, const char *name,
		     const char *keygen_args)
{
	char cmd[1400];
	char pub[600];
	char *text, *sp, *end;
	FILE *p;
	int n;

	memset(k, 0, sizeof(*k));
	snprintf(k->path, sizeof(k->path), "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd),
		 "ssh-keygen -q %s -N '' -C test -f '%s' </dev/null >/dev/null",
		 keygen_args, k->path);
	cr_assert_eq(sh("%s", cmd), 0, "%s failed", cmd);
	snprintf(pub, sizeof(pub), "%s.pub", k->path);
	text = read_file(pub, NULL);
	cr_assert_not_null(text);
	sp = strchr(text, ' ');
	cr_assert_not_null(sp);
	end = strchr(sp + 1, ' ');
	cr_assert_not_null(end);
	snprintf(k->type, sizeof(k->type), "%.*s", (int)(sp - text), text);
	snprintf(k->b64, sizeof(k->b64), "%.*s", (int)(end - sp - 1), sp + 1);
	free(text);
	n = EVP_DecodeBlock(k->blob, (const unsigned char *)k->b64,
			    (int)strlen(k->b64));
	cr_assert_gt(n, 0);
	k->len = (size_t)n - count_substr(k->b64, "=");
	if (!strcmp(k->type, "ssh-ed25519"))
		k->libssh2_type = LIBSSH2_HOSTKEY_TYPE_ED25519;
	else if (!strcmp(k->type, "ecdsa-sha2-nistp256"))
		k->libssh2_type = LIBSSH2_HOSTKEY_TYPE_ECDSA_256;
	else if (!strcmp(k->type, "ecdsa-sha2-nistp384"))
		k->libssh2_type = LIBSSH2_HOSTKEY_TYPE_ECDSA_384;
	else if (!strcmp(k->type, "ecdsa-sha2-nistp521"))
		k->libssh2_type = LIBSSH2_HOSTKEY_TYPE_ECDSA_521;
	else
		k->libssh2_type = LIBSSH2_HOSTKEY_TYPE_RSA;

	snprintf(cmd, sizeof(cmd), "ssh-keygen -l -f '%s'", pub);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	cr_assert_not_null(fgets(cmd, sizeof(cmd), p));
	cr_assert_eq(pclose(p), 0);
	sp = strstr(cmd, "SHA256:");
	cr_assert_not_null(sp, "no fingerprint in: %s", cmd);
	end = strchr(sp, ' ');
	snprintf(k->fp, sizeof(k->fp), "%.*s",
		 (int)(end ? end - sp : (long)strlen(sp)), sp);
}

static void ed25519(struct test_key *k, const char *name)
{
	make_key(k, name, "-t ed25519");
}

/* "NAMES TYPE BASE64\n" */
static char *line_for(const char *names, const struct test_key *k)
{
	static char line[8192];

	snprintf(line, sizeof(line), "%s %s %s\n", names, k->type, k->b64);
	return line;
}

static int check(struct knownhosts *kh, const char *host, unsigned port,
		 const struct test_key *k, struct err *e)
{
	err_init(e);
	return knownhosts_check(kh, host, port, (const char *)k->blob, k->len,
				k->libssh2_type, e);
}

static void open_kh(struct knownhosts *kh, enum fanout_hostkey_policy p)
{
	struct err e;

	err_init(&e);
	cr_assert_eq(knownhosts_open(kh, kh_path, p, &e), 0, "open: %s",
		     e.msg);
}

/* Runs fn with stderr going to a file, and returns what it printed. */
static char *stderr_of(void (*fn)(void *), void *arg)
{
	char path[700];
	int saved, fd;

	snprintf(path, sizeof(path), "%s/stderr", dir);
	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	return read_file(path, NULL);
}

Test(knownhosts, plain_entry_matches)
{
	struct knownhosts kh;
	struct test_key k;
	struct err e;

	ed25519(&k, "host");
	spew(kh_path, line_for("127.0.0.5", &k));
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, port_entry_matches_only_its_port)
{
	struct knownhosts kh;
	struct test_key k;
	struct err e;

	ed25519(&k, "host");
	spew(kh_path, line_for("[127.0.0.5]:2222", &k));
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "127.0.0.5", 2223, &k, &e), SSH_EHOSTKEY);
	knownhosts_close(&kh);
}

Test(knownhosts, bare_name_is_for_port_22_only)
{
	struct knownhosts kh;
	struct test_key k;
	struct err e;

	ed25519(&k, "host");
	spew(kh_path, line_for("127.0.0.5", &k));
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "[127.0.0.5]:2222 "), "%s", e.msg);
	cr_assert(strstr(e.msg, "is not known"), "%s", e.msg);
	/* Port 0 means the default port, as in OpenSSH. */
	cr_assert_eq(check(&kh, "127.0.0.5", 0, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, name_lists_patterns_and_case)
{
	struct knownhosts kh;
	struct test_key k;
	struct err e;
	char text[16384];

	ed25519(&k, "host");
	snprintf(text, sizeof(text), "%s",
		 line_for("alpha,127.0.0.6,[127.0.0.7]:2222", &k));
	strcat(text, line_for("*.Example.com,!bad.example.com", &k));
	strcat(text, line_for("[10.0.0.?]:2222", &k));
	spew(kh_path, text);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "alpha", 22, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "ALPHA", 22, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.6", 22, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.7", 2222, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "beta", 22, &k, &e), SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "127.0.0.7", 22, &k, &e), SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "w1.example.com", 22, &k, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(check(&kh, "bad.example.com", 22, &k, &e),
		     SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "10.0.0.3", 2222, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "10.0.0.33", 2222, &k, &e), SSH_EHOSTKEY);
	knownhosts_close(&kh);
}

Test(knownhosts, every_supported_key_type_matches)
{
	static const char *const args[] = {
		"-t ecdsa -b 256", "-t ecdsa -b 384", "-t ecdsa -b 521",
		"-t rsa -b 2048",
	};
	struct test_key k[4];
	struct knownhosts kh;
	struct err e;
	char text[32768] = "";

	for (int i = 0; i < 4; i++) {
		char name[32];

		snprintf(name, sizeof(name), "key%d", i);
		make_key(&k[i], name, args[i]);
		snprintf(name, sizeof(name), "h%d", i);
		strcat(text, line_for(name, &k[i]));
	}
	spew(kh_path, text);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	for (int i = 0; i < 4; i++) {
		char name[32];

		snprintf(name, sizeof(name), "h%d", i);
		cr_assert_eq(check(&kh, name, 22, &k[i], &e), 0, "%s: %s",
			     k[i].type, e.msg);
	}
	knownhosts_close(&kh);
}

static void open_noisy_file(void *arg)
{
	struct err e;

	err_init(&e);
	cr_assert_eq(knownhosts_open(arg, kh_path, FANOUT_HOSTKEY_YES, &e), 0,
		     "%s", e.msg);
}

Test(knownhosts, comments_blank_and_malformed_lines_are_skipped)
{
	struct test_key k, other;
	struct knownhosts kh;
	struct err e;
	char text[32768];
	char *warnings;
	char where[700];

	ed25519(&k, "host");
	make_key(&other, "other", "-t ecdsa -b 256");
	snprintf(text, sizeof(text),
		 "# a comment\n"                                  /* 1 */
		 "\n"                                             /* 2 */
		 "   \t\n"                                        /* 3 */
		 "127.0.0.5 ssh-ed25519\n"                        /* 4 */
		 "127.0.0.5 ssh-ed25519 !!!notbase64!!!\n"        /* 5 */
		 "127.0.0.5 ssh-frobnicate AAAAB3NzaC1yc2E=\n"    /* 6 */
		 "|1|bad|hash ssh-ed25519 %s\n"                   /* 7 */
		 "@bogus 127.0.0.5 ssh-ed25519 %s\n"              /* 8 */
		 "127.0.0.5 ssh-ed25519 %s\n"                     /* 9 */
		 "127.0.0.5 ssh-dss AAAAB3NzaC1kc3M=\n"           /* 10 */
		 "    127.0.0.5 ssh-ed25519 %s  trailing comment\r\n", /* 11 */
		 k.b64, k.b64, other.b64, k.b64);
	spew(kh_path, text);
	warnings = stderr_of(open_noisy_file, &kh);
	for (int line = 4; line <= 9; line++) {
		snprintf(where, sizeof(where), "%s:%d: ", kh_path, line);
		cr_assert(strstr(warnings, where), "no warning for line %d: %s",
			  line, warnings);
	}
	for (int line = 1; line <= 11; line++) {
		if (line >= 4 && line <= 9)
			continue;
		snprintf(where, sizeof(where), "%s:%d: ", kh_path, line);
		cr_assert_null(strstr(warnings, where), "line %d: %s", line,
			       warnings);
	}
	free(warnings);
	/* Line 9 (an ecdsa blob labelled ed25519) must not count as a
	 * changed key: line 11 holds the right one. */
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, hashed_entries_match)
{
	struct test_key k, k2;
	struct knownhosts kh;
	struct err e;
	char text[16384];
	char cmd[800];
	char *hashed;

	ed25519(&k, "host");
	ed25519(&k2, "host2");
	snprintf(text, sizeof(text), "%s", line_for("127.0.0.5", &k));
	strcat(text, line_for("[127.0.0.6]:2222,worker-7", &k2));
	spew(kh_path, text);
	snprintf(cmd, sizeof(cmd), "ssh-keygen -H -f '%s' >/dev/null 2>&1",
		 kh_path);
	cr_assert_eq(sh("%s", cmd), 0);
	hashed = read_file(kh_path, NULL);
	cr_assert_eq(count_substr(hashed, "|1|"), 3, "%s", hashed);
	cr_assert_null(strstr(hashed, "127.0.0"), "%s", hashed);
	free(hashed);

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.6", 2222, &k2, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "Worker-7", 22, &k2, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "127.0.0.6", 22, &k2, &e), SSH_EHOSTKEY);
	/* A hashed entry's key changing is refused like a plain one. */
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k2, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "CHANGED"), "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, unknown_host_refused_under_yes)
{
	struct test_key k, known;
	struct knownhosts kh;
	struct err e;
	char *before, *after;

	ed25519(&k, "host");
	ed25519(&known, "known");
	spew(kh_path, line_for("127.0.0.9", &known));
	before = read_file(kh_path, NULL);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), SSH_EHOSTKEY);
	cr_assert_eq(e.code, SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "host key for [127.0.0.5]:2222 "), "%s",
		  e.msg);
	cr_assert(strstr(e.msg, "is not known"), "%s", e.msg);
	cr_assert(strstr(e.msg, k.fp), "%s lacks %s", e.msg, k.fp);
	cr_assert(strstr(e.msg, kh_path), "%s", e.msg);
	cr_assert(strstr(e.msg, "ssh-keyscan -p 2222 -t ed25519"), "%s",
		  e.msg);
	cr_assert(strstr(e.msg, "--strict-host-key-checking accept-new"),
		  "%s", e.msg);
	knownhosts_close(&kh);
	after = read_file(kh_path, NULL);
	cr_assert_str_eq(after, before);
	free(before);
	free(after);
}

static void unknown_is_added(enum fanout_hostkey_policy policy)
{
	struct knownhosts kh;
	struct test_key k, known;
	struct err e;
	char expect[8192];
	char *text;

	ed25519(&k, "host");
	ed25519(&known, "known");
	spew(kh_path, line_for("127.0.0.9", &known));
	open_kh(&kh, policy);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), 0, "%s", e.msg);
	/* The next check matches instead of adding the key again. */
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);

	text = read_file(kh_path, NULL);
	snprintf(expect, sizeof(expect), "%s",
		 line_for("127.0.0.9", &known));
	strcat(expect, line_for("[127.0.0.5]:2222", &k));
	cr_assert_str_eq(text, expect);
	free(text);

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.9", 22, &known, &e), 0, "%s",
		     e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, unknown_host_added_under_accept_new)
{
	unknown_is_added(FANOUT_HOSTKEY_ACCEPT_NEW);
}

Test(knownhosts, unknown_host_added_under_no)
{
	unknown_is_added(FANOUT_HOSTKEY_NO);
}

Test(knownhosts, added_line_follows_an_unterminated_last_line)
{
	struct test_key k, known;
	struct knownhosts kh;
	struct err e;
	char text[8192];

	ed25519(&k, "host");
	ed25519(&known, "known");
	snprintf(text, sizeof(text), "%s", line_for("127.0.0.9", &known));
	text[strlen(text) - 1] = '\0';
	spew(kh_path, text);
	open_kh(&kh, FANOUT_HOSTKEY_ACCEPT_NEW);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.9", 22, &known, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, changed_key_refused_under_every_policy)
{
	static const enum fanout_hostkey_policy policies[] = {
		FANOUT_HOSTKEY_YES, FANOUT_HOSTKEY_ACCEPT_NEW,
		FANOUT_HOSTKEY_NO,
	};
	struct test_key old, presented;
	struct err e;
	char fix[1200];
	char where[700];
	char *before, *after;

	ed25519(&old, "old");
	ed25519(&presented, "new");
	spew(kh_path, line_for("# header\n[127.0.0.5]:2222", &old));
	before = read_file(kh_path, NULL);
	snprintf(fix, sizeof(fix),
		 "if the host was rebuilt, remove the old entry: ssh-keygen -R '[127.0.0.5]:2222' -f '%s'",
		 kh_path);
	snprintf(where, sizeof(where), "%s:2", kh_path);
	for (int i = 0; i < 3; i++) {
		struct knownhosts kh;

		open_kh(&kh, policies[i]);
		cr_assert_eq(check(&kh, "127.0.0.5", 2222, &presented, &e),
			     SSH_EHOSTKEY, "policy %d accepted it", i);
		cr_assert(strstr(e.msg, "host key for [127.0.0.5]:2222 has CHANGED"),
			  "%s", e.msg);
		cr_assert(strstr(e.msg, "ssh-ed25519"), "%s", e.msg);
		cr_assert(strstr(e.msg, presented.fp), "%s lacks %s", e.msg,
			  presented.fp);
		cr_assert(strstr(e.msg, where), "%s", e.msg);
		cr_assert(strstr(e.msg, fix), "%s", e.msg);
		/* The old key still passes. */
		cr_assert_eq(check(&kh, "127.0.0.5", 2222, &old, &e), 0, "%s",
			     e.msg);
		knownhosts_close(&kh);
	}
	after = read_file(kh_path, NULL);
	cr_assert_str_eq(after, before);
	free(before);
	free(after);
}

Test(knownhosts, any_of_several_keys_of_one_type_matches)
{
	struct test_key a, b;
	struct knownhosts kh;
	struct err e;
	char text[16384];

	ed25519(&a, "a");
	ed25519(&b, "b");
	snprintf(text, sizeof(text), "%s", line_for("h", &a));
	strcat(text, line_for("h", &b));
	spew(kh_path, text);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "h", 22, &a, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "h", 22, &b, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, key_of_another_type_only_is_unknown)
{
	struct test_key ecdsa, ed;
	struct knownhosts kh;
	struct err e;
	char *text;

	make_key(&ecdsa, "ecdsa", "-t ecdsa -b 256");
	ed25519(&ed, "ed");
	spew(kh_path, line_for("[127.0.0.5]:2222", &ecdsa));

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &ed, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "is not known"), "%s", e.msg);
	cr_assert(strstr(e.msg, "has only ecdsa-sha2-nistp256 keys"), "%s",
		  e.msg);
	cr_assert(strstr(e.msg, ed.fp), "%s", e.msg);
	cr_assert_null(strstr(e.msg, "CHANGED"), "%s", e.msg);
	knownhosts_close(&kh);

	open_kh(&kh, FANOUT_HOSTKEY_ACCEPT_NEW);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &ed, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
	text = read_file(kh_path, NULL);
	cr_assert_eq(count_substr(text, "\n"), 2, "%s", text);
	free(text);

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &ed, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "127.0.0.5", 2222, &ecdsa, &e), 0, "%s",
		     e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, revoked_key_refused_and_cert_authority_ignored)
{
	struct test_key bad, good, ca;
	struct knownhosts kh;
	struct err e;
	char text[32768];
	char where[700];

	ed25519(&bad, "bad");
	ed25519(&good, "good");
	ed25519(&ca, "ca");
	snprintf(text, sizeof(text), "%s", line_for("h1", &bad));
	strcat(text, line_for("@revoked *", &bad));
	strcat(text, line_for("h2", &good));
	strcat(text, line_for("@cert-authority *.example.com", &ca));
	spew(kh_path, text);
	snprintf(where, sizeof(where), "%s:2", kh_path);

	open_kh(&kh, FANOUT_HOSTKEY_NO);
	/* Listed for h1 too: the revocation wins. */
	cr_assert_eq(check(&kh, "h1", 22, &bad, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "@revoked"), "%s", e.msg);
	cr_assert(strstr(e.msg, bad.fp), "%s", e.msg);
	cr_assert(strstr(e.msg, where), "%s", e.msg);
	/* Unknown elsewhere, and not added, under the laxest policy. */
	cr_assert_eq(check(&kh, "h3", 22, &bad, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "@revoked"), "%s", e.msg);
	/* The revoked ed25519 key for every host does not make h2's own
	 * ed25519 key a changed one. */
	cr_assert_eq(check(&kh, "h2", 22, &good, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "w.example.com", 22, &ca, &e), SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "is not known"), "%s", e.msg);
	cr_assert_str_eq(knownhosts_methods(&kh, "h3", 22),
			 "ssh-ed25519," ECDSA_METHODS "," RSA_METHODS);
	knownhosts_close(&kh);
}

Test(knownhosts, missing_file_and_directory_are_created)
{
	struct test_key k;
	struct knownhosts kh;
	struct err e;
	struct stat st;
	char sub[300];
	char *text;

	ed25519(&k, "host");
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	snprintf(kh_path, sizeof(kh_path), "%s/known_hosts", sub);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), SSH_EHOSTKEY);
	cr_assert_neq(stat(sub, &st), 0, "refusing must not create %s", sub);
	knownhosts_close(&kh);

	open_kh(&kh, FANOUT_HOSTKEY_ACCEPT_NEW);
	cr_assert_eq(check(&kh, "127.0.0.5", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
	cr_assert_eq(stat(sub, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700, "%o", st.st_mode & 0777);
	cr_assert_eq(stat(kh_path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "%o", st.st_mode & 0777);
	text = read_file(kh_path, NULL);
	cr_assert_str_eq(text, line_for("127.0.0.5", &k));
	free(text);
}

Test(knownhosts, unwritable_file_still_accepts_for_this_run)
{
	struct test_key k;
	struct knownhosts kh;
	struct err e;

	ed25519(&k, "host");
	/* Missing, so it reads as empty, and its directory cannot be made
	 * (even by root): appending fails. */
	snprintf(kh_path, sizeof(kh_path),
		 "/proc/slicectl-no-such-dir/known_hosts");
	open_kh(&kh, FANOUT_HOSTKEY_ACCEPT_NEW);
	cr_assert_eq(check(&kh, "h", 22, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(check(&kh, "h", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
}

Test(knownhosts, unreadable_file_fails_open)
{
	struct knownhosts kh;
	struct err e;

	cr_assert_eq(mkdir(kh_path, 0700), 0);
	err_init(&e);
	cr_assert_eq(knownhosts_open(&kh, kh_path, FANOUT_HOSTKEY_YES, &e),
		     SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, kh_path), "%s", e.msg);
	knownhosts_close(&kh);
}

/* Opening fails with SSH_EHOSTKEY and a message naming the file and saying
 * what is wrong with it. */
static void open_refused(const char *path, const char *needle)
{
	struct knownhosts kh;
	struct err e;

	err_init(&e);
	cr_assert_eq(knownhosts_open(&kh, path, FANOUT_HOSTKEY_YES, &e),
		     SSH_EHOSTKEY, "%s: %s", path, e.msg);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
	cr_assert(strstr(e.msg, needle), "no \"%s\" in: %s", needle, e.msg);
	knownhosts_close(&kh);
}

/* /dev/urandom never ends and a FIFO without a writer blocks in open():
 * both are refused at once. */
Test(knownhosts, devices_and_fifos_refused_without_reading, .timeout = 10)
{
	open_refused("/dev/urandom",
		     "is a character device, not a known_hosts file: name a "
		     "regular file");
	cr_assert_eq(mkfifo(kh_path, 0600), 0);
	open_refused(kh_path, "is a FIFO (pipe), not a known_hosts file");
}

/* A sparse 65 MiB file: nothing is read, nothing large is allocated. */
Test(knownhosts, larger_than_64_mib_refused, .timeout = 10)
{
	int fd = open(kh_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)65 << 20), 0);
	close(fd);
	open_refused(kh_path, "is larger than 64 MiB, which no known_hosts "
			      "file is: check the path or use another file");
}

/* An empty file has no lines (and once computed NULL + 0). */
Test(knownhosts, empty_file_knows_no_host)
{
	struct knownhosts kh;
	struct test_key k;
	struct err e;

	ed25519(&k, "empty");
	spew(kh_path, "");
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	cr_assert_eq(check(&kh, "h", 22, &k, &e), SSH_EHOSTKEY);
	knownhosts_close(&kh);
}

Test(knownhosts, bad_presented_keys_are_refused)
{
	struct test_key k;
	struct knownhosts kh;
	struct err e;

	ed25519(&k, "host");
	open_kh(&kh, FANOUT_HOSTKEY_NO);
	err_init(&e);
	cr_assert_eq(knownhosts_check(&kh, "h", 22, (const char *)k.blob,
				      k.len, LIBSSH2_HOSTKEY_TYPE_RSA, &e),
		     SSH_EHOSTKEY);
	cr_assert(strstr(e.msg, "malformed"), "%s", e.msg);
	cr_assert_eq(knownhosts_check(&kh, "h", 22, (const char *)k.blob,
				      k.len, LIBSSH2_HOSTKEY_TYPE_DSS, &e),
		     SSH_EHOSTKEY);
	cr_assert_eq(check(&kh, "h ost", 22, &k, &e), SSH_EINVAL);
	cr_assert_eq(check(&kh, "a,b", 22, &k, &e), SSH_EINVAL);
	knownhosts_close(&kh);
	cr_assert_eq(access(kh_path, F_OK), -1, "nothing may be written");
}

Test(knownhosts, concurrent_appends_do_not_interleave)
{
	enum { WRITERS = 8, HOSTS = 50 };
	struct test_key k;
	pid_t pids[WRITERS];
	struct knownhosts kh;
	struct err e;
	char tail[4200];
	char *text, *save;
	int lines = 0;

	ed25519(&k, "host");
	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		cr_assert_geq(pids[w], 0);
		if (pids[w] == 0) {
			struct knownhosts c;
			struct err ce;
			int bad = 0;

			if (knownhosts_open(&c, kh_path,
					    FANOUT_HOSTKEY_ACCEPT_NEW, &ce))
				_exit(1);
			for (int h = 0; h < HOSTS; h++) {
				char name[64];

				snprintf(name, sizeof(name), "w%d-h%d", w, h);
				bad |= knownhosts_check(&c, name, 2222,
							(const char *)k.blob,
							k.len, k.libssh2_type,
							&ce);
			}
			knownhosts_close(&c);
			_exit(bad ? 1 : 0);
		}
	}
	for (int w = 0; w < WRITERS; w++) {
		int status;

		cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	/* Every line whole. A writer that raced another's half-written line
	 * may have added a blank line before its own, which is harmless. */
	text = read_file(kh_path, NULL);
	snprintf(tail, sizeof(tail), "]:2222 %s %s", k.type, k.b64);
	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line);

		cr_assert(!strncmp(line, "[w", 2) && len > strlen(tail) &&
			  !strcmp(line + len - strlen(tail), tail),
			  "torn line: %s", line);
		lines++;
	}
	cr_assert_eq(lines, WRITERS * HOSTS);
	free(text);
	open_kh(&kh, FANOUT_HOSTKEY_YES);
	for (int w = 0; w < WRITERS; w++)
		for (int h = 0; h < HOSTS; h++) {
			char name[64];

			snprintf(name, sizeof(name), "w%d-h%d", w, h);
			cr_assert_eq(check(&kh, name, 2222, &k, &e), 0, "%s",
				     e.msg);
		}
	knownhosts_close(&kh);
}

Test(knownhosts, methods_put_known_types_first)
{
	struct test_key ed, p256, p521, rsa;
	struct knownhosts kh;
	char text[32768];
	char cmd[800];

	ed25519(&ed, "ed");
	make_key(&p256, "p256", "-t ecdsa -b 256");
	make_key(&p521, "p521", "-t ecdsa -b 521");
	make_key(&rsa, "rsa", "-t rsa -b 2048");
	snprintf(text, sizeof(text), "%s", line_for("[e1]:2222", &p256));
	strcat(text, line_for("e2", &p521));
	strcat(text, line_for("e2", &p256));
	strcat(text, line_for("r1", &rsa));
	strcat(text, line_for("d1", &ed));
	strcat(text, line_for("@revoked v1", &p256));
	strcat(text, line_for("hashed", &p521));
	spew(kh_path, text);
	snprintf(cmd, sizeof(cmd), "ssh-keygen -H -f '%s' >/dev/null 2>&1",
		 kh_path);
	cr_assert_eq(sh("%s", cmd), 0);
	open_kh(&kh, FANOUT_HOSTKEY_YES);

	cr_assert_str_eq(knownhosts_methods(&kh, "unknown", 22),
			 "ssh-ed25519," ECDSA_METHODS "," RSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "e1", 2222),
			 "ecdsa-sha2-nistp256,ssh-ed25519,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,"
			 RSA_METHODS);
	/* The same name on port 22 is another host. */
	cr_assert_str_eq(knownhosts_methods(&kh, "e1", 22),
			 "ssh-ed25519," ECDSA_METHODS "," RSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "E2", 22),
			 "ecdsa-sha2-nistp256,ecdsa-sha2-nistp521,ssh-ed25519,ecdsa-sha2-nistp384,"
			 RSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "r1", 22),
			 RSA_METHODS ",ssh-ed25519," ECDSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "d1", 22),
			 "ssh-ed25519," ECDSA_METHODS "," RSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "v1", 22),
			 "ssh-ed25519," ECDSA_METHODS "," RSA_METHODS);
	cr_assert_str_eq(knownhosts_methods(&kh, "hashed", 22),
			 "ecdsa-sha2-nistp521,ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,"
			 RSA_METHODS);
	knownhosts_close(&kh);
}

Test(knownhosts, methods_list_only_what_libssh2_supports)
{
	LIBSSH2_SESSION *s;
	struct knownhosts kh;
	const char **algs;
	char *list, *save, *tok;
	int n;

	open_kh(&kh, FANOUT_HOSTKEY_YES);
	list = strdup(knownhosts_methods(&kh, "h", 22));
	knownhosts_close(&kh);
	cr_assert_not_null(list);
	cr_assert_eq(libssh2_init(0), 0);
	s = libssh2_session_init();
	cr_assert_not_null(s);
	n = libssh2_session_supported_algs(s, LIBSSH2_METHOD_HOSTKEY, &algs);
	cr_assert_gt(n, 0);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		bool ok = false;

		for (int i = 0; i < n; i++)
			ok |= !strcmp(algs[i], tok);
		cr_assert(ok, "%s is not a libssh2 host key method", tok);
	}
	libssh2_free(s, algs);
	libssh2_session_free(s);
	libssh2_exit();
	free(list);
}

Test(knownhosts, no_path_means_the_users_known_hosts)
{
	struct test_key k;
	struct knownhosts kh;
	struct err e;
	struct stat st;
	char ssh_dir[300];
	char *text;

	ed25519(&k, "host");
	cr_assert_eq(setenv("HOME", dir, 1), 0);
	snprintf(ssh_dir, sizeof(ssh_dir), "%s/.ssh", dir);
	snprintf(kh_path, sizeof(kh_path), "%s/known_hosts", ssh_dir);
	err_init(&e);
	cr_assert_eq(knownhosts_open(&kh, NULL, FANOUT_HOSTKEY_ACCEPT_NEW, &e),
		     0, "%s", e.msg);
	cr_assert_eq(check(&kh, "h", 22, &k, &e), 0, "%s", e.msg);
	knownhosts_close(&kh);
	cr_assert_eq(stat(ssh_dir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700, "%o", st.st_mode & 0777);
	text = read_file(kh_path, NULL);
	cr_assert_not_null(text, "%s was not written", kh_path);
	cr_assert_str_eq(text, line_for("h", &k));
	free(text);
}
