/* tests/kube/stub.c: see stub.h. */
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void scratch_make(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/slicectl-kube-XXXXXX");
	cr_assert(mkdtemp(dir), "mkdtemp");
}

void scratch_rm(const char *dir)
{
	char cmd[400];

	if (!dir[0] || strncmp(dir, "/tmp/slicectl-kube-", 19) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

const char *scratch_write(const char *dir, const char *name,
			  const char *text, bool exec)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f, "cannot write %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	if (exec)
		cr_assert_eq(chmod(path, 0755), 0);
	return path;
}

char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	struct buf b;
	char chunk[4096];
	size_t n;

	if (!f)
		return NULL;
	buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		cr_assert_eq(buf_append(&b, chunk, n), 0);
	fclose(f);
	cr_assert_eq(buf_appends(&b, ""), 0);
	return buf_detach(&b);
}

void kubeconfig_scratch(char *dir, size_t len)
{
	scratch_make(dir, len);
	unsetenv("KUBECONFIG");
	setenv("HOME", dir, 1);
}

int kubeconfig_load(const char *dir, const char *text, const char *context,
		    struct kube_config *c, struct err *e)
{
	const char *path = scratch_write(dir, "config", text, false);

	err_init(e);
	return kube_config_load(path, context, c, e);
}

void kubeconfig_refused(const char *dir, const char *text, const char *want)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(kubeconfig_load(dir, text, NULL, &c, &e), KUBE_ECONFIG,
		     "accepted:\n%s", text);
	cr_assert(strstr(e.msg, want), "message \"%s\" lacks \"%s\"", e.msg,
		  want);
}

void tls_make(const char *dir)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; exec 2>openssl.log; "
		 "key() { openssl genpkey -algorithm EC -pkeyopt "
		 "ec_paramgen_curve:P-256 -out $1; }; "
		 "key ca.key; key other.key; key srv.key; key client.key; "
		 "openssl req -x509 -new -key ca.key -subj /CN=test-ca "
		 "-days 2 -out ca.pem; "
		 "openssl req -x509 -new -key other.key -subj /CN=other-ca "
		 "-days 2 -out other.pem; "
		 "openssl req -new -key srv.key -subj /CN=127.0.0.1 "
		 "-out srv.csr; "
		 "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext; "
		 "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key "
		 "-CAcreateserial -days 2 -extfile srv.ext -out srv.pem; "
		 "openssl req -new -key client.key -subj /CN=alice "
		 "-out client.csr; "
		 "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
		 "-CAcreateserial -days 2 -out client.pem", dir);
	cr_assert_eq(system(cmd), 0, "openssl failed: see %s/openssl.log",
		     dir);
}

void kstub_start(struct kstub *s, const char *script, bool tls,
		 bool client_ca)
{
	char spath[300], lpath[300], cert[300], key[300], ca[300];
	const char *extra[12];
	size_t n = 0;

	if (!s->dir[0])
		scratch_make(s->dir, sizeof(s->dir));
	snprintf(spath, sizeof(spath), "%s",
		 scratch_write(s->dir, "script.json", script, false));
	snprintf(lpath, sizeof(lpath), "%s/log.jsonl", s->dir);
	snprintf(cert, sizeof(cert), "%s/srv.pem", s->dir);
	snprintf(key, sizeof(key), "%s/srv.key", s->dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", s->dir);
	extra[n++] = "--script";
	extra[n++] = spath;
	extra[n++] = "--log";
	extra[n++] = lpath;
	if (tls) {
		extra[n++] = "--cert";
		extra[n++] = cert;
		extra[n++] = "--key";
		extra[n++] = key;
	}
	if (client_ca) {
		extra[n++] = "--client-ca";
		extra[n++] = ca;
	}
	extra[n] = NULL;
	cr_assert_eq(fake_server_start(&s->f, "tests/kube/kube_stub.py",
				       extra), 0);
	snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%u",
		 tls ? "https" : "http", s->f.port);
}

void kstub_stop(struct kstub *s)
{
	fake_server_stop(&s->f);
	scratch_rm(s->dir);
	s->dir[0] = '\0';
}

json_t *kstub_requests(struct kstub *s)
{
	char path[300];
	char *text, *line, *save = NULL;
	json_t *all = json_array();

	snprintf(path, sizeof(path), "%s/log.jsonl", s->dir);
	text = slurp(path);
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *r = json_loads(line, 0, NULL);

		cr_assert(r, "bad log line %s", line);
		json_array_append_new(all, r);
	}
	free(text);
	return all;
}

void stub_config(const struct kstub *s, struct kube_config *c)
{
	kube_config_init(c);
	c->server = strdup(s->url);
	c->token = strdup("tok");
	c->origin = strdup("the test");
	cr_assert(c->server && c->token && c->origin);
}

struct kube_client *kstub_client(struct kstub *s, const char *script)
{
	struct kube_config c;
	struct kube_client *k;
	struct err e;

	kstub_start(s, script, false, false);
	stub_config(s, &c);
	err_init(&e);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	kube_config_release(&c);
	return k;
}
