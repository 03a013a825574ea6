/* tests/harness/kube_fake.c: see kube_fake.h. */
#include "tests/harness/kube_fake.h"
#include "common/common.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START_MS 90000 /* TLS makes a CA with openssl; a bound, not a pace */
#define MAX_ARGS 48

static int fail_start(struct kube_fake *f, const char *why)
{
	fprintf(stderr, "kube_fake: %s\n", why);
	kube_fake_stop(f);
	return -1;
}

int kube_fake_start(struct kube_fake *f, const struct kube_fake_options *o)
{
	const char *argv[MAX_ARGS];
	size_t n = 0;

	memset(f, 0, sizeof(*f));
	f->proc.pid = -1;
	if (make_temp_dir(f->dir, sizeof(f->dir), "kube-fake") < 0)
		return -1;
	if ((size_t)snprintf(f->state, sizeof(f->state), "%s/state",
			     f->dir) >= sizeof(f->state))
		return fail_start(f, "paths too long");
	if (o && o->tls && (size_t)snprintf(f->ca, sizeof(f->ca), "%.*s/ca.pem",
					    (int)sizeof(f->ca) - 8, f->state) >=
	    sizeof(f->ca))
		return fail_start(f, "paths too long");
	if (o && o->token && (size_t)snprintf(f->token, sizeof(f->token),
					      "%s", o->token) >=
	    sizeof(f->token))
		return fail_start(f, "token too long");
	argv[n++] = "--state-dir";
	argv[n++] = f->state;
	if (o && o->tls)
		argv[n++] = "--tls";
	if (f->token[0]) {
		argv[n++] = "--require-token";
		argv[n++] = f->token;
	}
	for (const char *const *e = o ? o->extra : NULL; e && *e; e++) {
		if (n >= MAX_ARGS - 1)
			return fail_start(f, "too many arguments");
		argv[n++] = *e;
	}
	argv[n] = NULL;
	if (fake_start(&f->proc, "tests/fakes/kube_fake.py", argv, 2,
		       START_MS) < 0)
		return fail_start(f, "the fake did not start (see above)");
	f->port = f->proc.ports[0];
	f->plain_port = f->proc.ports[1];
	snprintf(f->server, sizeof(f->server), "%s://127.0.0.1:%u",
		 o && o->tls ? "https" : "http", f->port);
	snprintf(f->control, sizeof(f->control), "http://127.0.0.1:%u",
		 f->plain_port);
	return 0;
}

void kube_fake_stop(struct kube_fake *f)
{
	fake_stop(&f->proc);
	if (f->dir[0]) {
		rm_rf(f->dir);
		f->dir[0] = '\0';
	}
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	return buf_append(ud, data, size * n) ? 0 : size * n;
}

long kube_fake_call(struct kube_fake *f, const char *method,
		    const char *path, const char *body, char **out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct buf answer, url, auth;
	long status = -1;

	if (out)
		*out = NULL;
	if (!h)
		return -1;
	buf_init(&answer);
	buf_init(&url);
	buf_init(&auth);
	if (buf_appendf(&url, "%s%s", f->control, path) < 0 ||
	    buf_appendf(&auth, "Authorization: Bearer %s", f->token) < 0)
		goto done;
	hdrs = curl_slist_append(NULL, strcmp(method, "PATCH") ?
				 "Content-Type: application/json" :
				 "Content-Type: application/merge-patch+json");
	if (hdrs && f->token[0])
		hdrs = curl_slist_append(hdrs, auth.data);
	if (!hdrs)
		goto done;
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (out && status >= 0) {
		if (!answer.data && buf_appends(&answer, "") < 0)
			status = -1;
		else
			*out = buf_detach(&answer);
	}
done:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	buf_release(&url);
	buf_release(&auth);
	buf_release(&answer);
	return status;
}

/* The CA file's content in base64, as kubeconfigs carry it; NULL when it
 * cannot be read. */
static char *ca_base64(const char *path)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
				  "qrstuvwxyz0123456789+/";
	size_t len, i;
	unsigned char *pem = (unsigned char *)read_file(path, &len);
	struct buf b;

	if (!pem)
		return NULL;
	buf_init(&b);
	for (i = 0; i < len; i += 3) {
		unsigned v = (unsigned)pem[i] << 16;
		char q[4];

		if (i + 1 < len)
			v |= (unsigned)pem[i + 1] << 8;
		if (i + 2 < len)
			v |= pem[i + 2];
		q[0] = abc[v >> 18 & 63];
		q[1] = abc[v >> 12 & 63];
		q[2] = i + 1 < len ? abc[v >> 6 & 63] : '=';
		q[3] = i + 2 < len ? abc[v & 63] : '=';
		if (buf_append(&b, q, 4) < 0)
			break;
	}
	free(pem);
	if (i < len || buf_appends(&b, "") < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}

int kube_fake_write_kubeconfig(const struct kube_fake *f, const char *path,
			       const char *token, const char *ns)
{
	char *ca = f->ca[0] ? ca_base64(f->ca) : NULL;
	FILE *fp;
	int rc = 0;

	if (f->ca[0] && !ca) {
		fprintf(stderr, "kube_fake: cannot read %s\n", f->ca);
		return -1;
	}
	fp = fopen(path, "w");
	if (!fp) {
		fprintf(stderr, "kube_fake: %s: %s\n", path, strerror(errno));
		free(ca);
		return -1;
	}
	fprintf(fp, "apiVersion: v1\nkind: Config\nclusters:\n"
		"- name: kube-fake\n  cluster:\n    server: %s\n", f->server);
	if (ca)
		fprintf(fp, "    certificate-authority-data: %s\n", ca);
	fprintf(fp, "users:\n- name: kube-fake\n  user:%s\n", token ? "" :
		" {}");
	if (token)
		fprintf(fp, "    token: %s\n", token);
	fprintf(fp, "contexts:\n- name: kube-fake\n  context:\n"
		"    cluster: kube-fake\n    user: kube-fake\n");
	if (ns)
		fprintf(fp, "    namespace: %s\n", ns);
	fprintf(fp, "current-context: kube-fake\n");
	if (fclose(fp) != 0) {
		fprintf(stderr, "kube_fake: %s: %s\n", path, strerror(errno));
		rc = -1;
	}
	free(ca);
	return rc;
}
