/*
 * exec.c: exec credential plugins (client.authentication.k8s.io v1beta1
 * and v1), run as kubectl runs them: the command found on PATH (or
 * relative to the kubeconfig, resolved by config.c), the kubeconfig's env
 * on top of ours, KUBERNETES_EXEC_INFO describing the request, stdin
 * closed (slicectl never has a terminal to lend), and an ExecCredential
 * read from stdout. stderr is kept to explain a failure. A plugin that
 * hangs is killed, by its pid, after 2 minutes (SLICECTL_KUBE_EXEC_SECONDS
 * for tests).
 */
#include "kube/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PLUGIN_LIMIT_S 120u
#define STDOUT_MAX (1u << 20)
#define STDERR_KEEP 600

static int nomem(struct err *e)
{
	return err_set(e, KUBE_ENOMEM, "out of memory");
}

/* The command's path: as given when it holds a '/', else the first
 * executable of that name on PATH; NULL when there is none. */
static char *find_command(const char *cmd)
{
	const char *path = getenv("PATH");
	const char *p;

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0 ? strdup(cmd) : NULL;
	for (p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
	     *p;) {
		size_t n = strcspn(p, ":");
		struct buf full;
		struct stat st;

		buf_init(&full);
		if (buf_appendf(&full, "%.*s/%s", (int)n, n ? p : ".", cmd) ==
			    0 &&
		    stat(full.data, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(full.data, X_OK) == 0)
			return buf_detach(&full);
		buf_release(&full);
		p += n;
		if (*p == ':')
			p++;
	}
	return NULL;
}

static int base64_append(struct buf *b, const char *s)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
				  "opqrstuvwxyz0123456789+/";
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)u[i] << 16;
		char q[4];

		if (i + 1 < n)
			v |= (unsigned)u[i + 1] << 8;
		if (i + 2 < n)
			v |= u[i + 2];
		q[0] = tab[(v >> 18) & 63];
		q[1] = tab[(v >> 12) & 63];
		q[2] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		q[3] = i + 2 < n ? tab[v & 63] : '=';
		if (buf_append(b, q, 4))
			return KUBE_ENOMEM;
	}
	return 0;
}

/* KUBERNETES_EXEC_INFO: the ExecCredential request, with the cluster
 * when the kubeconfig says provideClusterInfo. */
static char *exec_info(const struct kube_config *c)
{
	json_t *root = json_pack("{s:s, s:s, s:{s:b}}", "apiVersion",
				 c->exec_api_version, "kind", "ExecCredential",
				 "spec", "interactive", 0);
	char *text = NULL;

	if (root && c->exec_cluster_info) {
		json_t *cl = json_pack("{s:s, s:b}", "server", c->server,
				       "insecure-skip-tls-verify",
				       c->insecure);
		struct buf ca;

		buf_init(&ca);
		if (cl && c->ca_pem &&
		    (base64_append(&ca, c->ca_pem) ||
		     json_object_set_new(cl, "certificate-authority-data",
					 json_string(ca.data)))) {
			json_decref(cl);
			cl = NULL;
		}
		buf_release(&ca);
		if (!cl || json_object_set_new(json_object_get(root, "spec"),
					       "cluster", cl)) {
			json_decref(root);
			root = NULL;
		}
	}
	if (root)
		text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return text;
}

/* environ, minus the names c sets, plus c's env and the exec info. */
static int plugin_env(const struct kube_config *c, const char *info,
		      struct strlist *env)
{
	struct buf kv;

	for (char **v = environ; *v; v++) {
		size_t n = strcspn(*v, "=");
		bool overridden = n == 20 &&
				  strncmp(*v, "KUBERNETES_EXEC_INFO", n) == 0;

		for (size_t i = 0; !overridden && i < c->exec_env.n; i++)
			overridden = strncmp(c->exec_env.v[i], *v, n + 1) == 0;
		if (!overridden && strlist_push(env, *v))
			return KUBE_ENOMEM;
	}
	for (size_t i = 0; i < c->exec_env.n; i++)
		if (strlist_push(env, c->exec_env.v[i]))
			return KUBE_ENOMEM;
	buf_init(&kv);
	if (buf_appendf(&kv, "KUBERNETES_EXEC_INFO=%s", info) ||
	    strlist_push(env, kv.data)) {
		buf_release(&kv);
		return KUBE_ENOMEM;
	}
	buf_release(&kv);
	return 0;
}

/* l as a NULL-terminated vector for execve (first, when given, in place
 * of its first string). */
static char **vector(const struct strlist *l, const char *first)
{
	char **v = calloc(l->n + 1, sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		v[i] = l->v[i];
	if (first)
		v[0] = (char *)first;
	return v;
}

struct run {
	pid_t pid;
	int out_fd, err_fd;
	struct buf out, err;
	int status;
	bool killed;
	bool too_big;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static unsigned limit_s(void)
{
	const char *v = getenv("SLICECTL_KUBE_EXEC_SECONDS");
	unsigned long s = v && *v ? strtoul(v, NULL, 10) : 0;

	return s > 0 && s <= 3600 ? (unsigned)s : PLUGIN_LIMIT_S;
}

/* Reads both pipes until they close, then reaps; kills after the limit. */
static void collect(struct run *r)
{
	uint64_t deadline = mono_ms() + (uint64_t)limit_s() * 1000;

	while (r->out_fd >= 0 || r->err_fd >= 0) {
		struct pollfd p[2] = { { r->out_fd, POLLIN, 0 },
				       { r->err_fd, POLLIN, 0 } };
		uint64_t now = mono_ms();
		int n;

		if (now >= deadline) {
			kill(r->pid, SIGKILL);
			r->killed = true;
			break;
		}
		n = poll(p, 2, (int)(deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &r->err_fd : &r->out_fd;
			struct buf *b = i ? &r->err : &r->out;
			char chunk[4096];
			ssize_t got;

			if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP |
							  POLLERR)))
				continue;
			got = read(*fd, chunk, sizeof(chunk));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				close_fd(fd);
				continue;
			}
			if (!i && b->len + (size_t)got > STDOUT_MAX) {
				r->too_big = true;
				continue;
			}
			/* Of stderr only the end is kept. */
			if (i && b->len > 4 * STDERR_KEEP)
				buf_consume(b, b->len - STDERR_KEEP);
			buf_append(b, chunk, (size_t)got);
		}
	}
	close_fd(&r->out_fd);
	close_fd(&r->err_fd);
	/* A plugin may close its output and linger: the limit holds. */
	for (;;) {
		pid_t w = r->killed ? 0 : waitpid(r->pid, &r->status, WNOHANG);

		if (r->killed || w == r->pid || (w == -1 && errno != EINTR))
			break;
		if (mono_ms() >= deadline) {
			kill(r->pid, SIGKILL);
			r->killed = true;
		} else {
			proc_sleep_ms(10, false);
		}
	}
	if (r->killed)
		while (waitpid(r->pid, &r->status, 0) == -1 && errno == EINTR)
			;
}

static int spawn(struct run *r, char **argv, char **envp, struct err *e)
{
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 };

	if (pipe(out) == -1 || pipe(errp) == -1) {
		int saved = errno;

		for (int i = 0; i < 2; i++) {
			close_fd(&out[i]);
			close_fd(&errp[i]);
		}
		return err_errno(e, KUBE_EIO, saved, "exec plugin: pipe");
	}
	r->pid = fork();
	if (r->pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 ||
		    dup2(errp[1], 2) < 0)
			_exit(126);
		if (null > 2)
			close(null);
		close(out[0]);
		close(out[1]);
		close(errp[0]);
		close(errp[1]);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(out[1]);
	close(errp[1]);
	if (r->pid < 0) {
		int saved = errno;

		close(out[0]);
		close(errp[0]);
		return err_errno(e, KUBE_EIO, saved, "exec plugin: fork");
	}
	r->out_fd = out[0];
	r->err_fd = errp[0];
	return 0;
}

static int parse_credential(struct kube_config *c, const struct run *r,
			    struct err *e)
{
	const char *cmd = c->exec_argv.v[0];
	json_error_t je;
	json_t *root = json_loadb(r->out.data ? r->out.data : "", r->out.len,
				  0, &je);
	json_t *st = json_object_get(root, "status");
	const char *kind = json_string_value(json_object_get(root, "kind"));
	const char *ver = json_string_value(json_object_get(root,
							    "apiVersion"));
	const char *token = json_string_value(json_object_get(st, "token"));
	const char *exp = json_string_value(json_object_get(
		st, "expirationTimestamp"));
	const char *cert = json_string_value(json_object_get(
		st, "clientCertificateData"));
	const char *key = json_string_value(json_object_get(st,
							    "clientKeyData"));
	time_t expiry = 0;
	int rc = 0;

	if (!root)
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s printed no "
			     "ExecCredential JSON (%s)", cmd, je.text);
	else if (!kind || strcmp(kind, "ExecCredential"))
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s printed a %s, "
			     "not an ExecCredential", cmd,
			     kind ? kind : "JSON without \"kind\"");
	else if (!ver || strcmp(ver, c->exec_api_version))
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s answered with "
			     "apiVersion %s, but the kubeconfig asks for %s",
			     cmd, ver ? ver : "(none)", c->exec_api_version);
	else if (!(token && *token) && !(cert && *cert && key && *key))
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s gave neither "
			     "status.token nor a client certificate and key",
			     cmd);
	else if (exp && (expiry = rfc3339_parse(exp)) == (time_t)-1)
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s: "
			     "status.expirationTimestamp \"%s\" is not an "
			     "RFC 3339 time", cmd, exp);
	if (!rc) {
		char *t = token && *token ? strdup(token) : NULL;
		char *ce = cert && *cert ? strdup(cert) : NULL;
		char *k = key && *key ? strdup(key) : NULL;

		if ((token && *token && !t) || (cert && *cert && !ce) ||
		    (key && *key && !k)) {
			free(t);
			free(ce);
			free(k);
			rc = nomem(e);
		} else {
			if (c->token)
				memset(c->token, 0, strlen(c->token));
			free(c->token);
			free(c->cert_pem);
			if (c->key_pem)
				memset(c->key_pem, 0, strlen(c->key_pem));
			free(c->key_pem);
			c->token = t;
			c->cert_pem = ce;
			c->key_pem = k;
			c->token_expiry = exp ? expiry : 0;
		}
	}
	json_decref(root);
	return rc;
}

/* The last line of what the plugin wrote to stderr, for a message. */
static void stderr_tail(struct buf *b, char *out, size_t len)
{
	size_t n = b->len;
	const char *s;

	while (n && strchr(" \t\r\n", b->data[n - 1]))
		n--;
	s = b->data ? b->data : "";
	for (size_t i = n; i > 0; i--)
		if (s[i - 1] == '\n') {
			s += i;
			n -= i;
			break;
		}
	if (n > STDERR_KEEP)
		n = STDERR_KEEP;
	snprintf(out, len, "%.*s", (int)n, s);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
}

int kube_exec_credential(struct kube_config *c, struct err *e)
{
	struct run r = { .pid = -1, .out_fd = -1, .err_fd = -1 };
	struct strlist env;
	char *path, *info = NULL, **argv = NULL, **envp = NULL;
	char tail[STDERR_KEEP + 1];
	int rc;

	if (!c->exec_argv.n)
		return err_set(e, KUBE_EINVAL, "no exec plugin configured");
	path = find_command(c->exec_argv.v[0]);
	if (!path)
		return err_set(e, KUBE_ECONFIG, "the exec credential plugin "
			       "`%s` of %s is not installed (not found%s)%s%s",
			       c->exec_argv.v[0], c->origin ? c->origin
			       : "the kubeconfig", strchr(c->exec_argv.v[0],
			       '/') ? "" : " on PATH",
			       c->exec_install_hint ? ": " : "",
			       c->exec_install_hint ? c->exec_install_hint
						    : "");
	strlist_init(&env);
	buf_init(&r.out);
	buf_init(&r.err);
	info = exec_info(c);
	if (!info || plugin_env(c, info, &env) ||
	    !(argv = vector(&c->exec_argv, path)) ||
	    !(envp = vector(&env, NULL))) {
		rc = nomem(e);
		goto out;
	}
	rc = spawn(&r, argv, envp, e);
	if (rc)
		goto out;
	collect(&r);
	stderr_tail(&r.err, tail, sizeof(tail));
	if (r.killed)
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s did not finish "
			     "in %u s (killed)%s%s", path, limit_s(),
			     tail[0] ? ": " : "",
			     tail);
	else if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s failed (%s %d)"
			     "%s%s", path, WIFEXITED(r.status) ? "exit status"
			     : "signal", WIFEXITED(r.status)
			     ? WEXITSTATUS(r.status) : WTERMSIG(r.status),
			     tail[0] ? ": " : "", tail);
	else if (r.too_big)
		rc = err_set(e, KUBE_ECONFIG, "exec plugin %s printed more "
			     "than 1 MiB", path);
	else
		rc = parse_credential(c, &r, e);
out:
	if (r.out.data)
		memset(r.out.data, 0, r.out.len);
	buf_release(&r.out);
	buf_release(&r.err);
	free(argv);
	free(envp);
	free(info);
	free(path);
	strlist_release(&env);
	return rc;
}
