/*
 * config.c: where a cluster is, from a kubeconfig (read as kubectl does)
 * or from what the GKE API says about a cluster.
 *
 * $KUBECONFIG lists files merged the way kubectl merges them: missing
 * files are skipped, the first file that sets current-context sets it,
 * and a context, cluster or user is the first entry of that name in list
 * order (its relative paths are relative to the file it came from). Data
 * fields win over file fields, a static token over tokenFile and over an
 * exec plugin, as in client-go. What slicectl cannot honour (auth
 * providers, basic auth, impersonation, proxies, a TLS server name) is
 * refused, so a cluster is never reached other than as configured.
 */
#include "kube/client.h"
#include "kube/yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kubeconfigs, certificates and tokens are small; the cap stops a wrong
 * path from being read whole. */
#define FILE_MAX (4u << 20)
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"
#define EXEC_V1 "client.authentication.k8s.io/v1"

static int nomem(struct err *e)
{
	return err_set(e, KUBE_ENOMEM, "out of memory");
}

static void free_secret(char **s)
{
	if (*s)
		memset(*s, 0, strlen(*s));
	free(*s);
	*s = NULL;
}

void kube_config_init(struct kube_config *c)
{
	memset(c, 0, sizeof(*c));
	strlist_init(&c->exec_argv);
	strlist_init(&c->exec_env);
}

void kube_config_release(struct kube_config *c)
{
	free(c->server);
	free(c->ca_pem);
	free_secret(&c->token);
	free(c->cert_pem);
	free_secret(&c->key_pem);
	free(c->namespace);
	free(c->context);
	strlist_release(&c->exec_argv);
	strlist_release(&c->exec_env);
	free(c->exec_api_version);
	free(c->exec_install_hint);
	free(c->origin);
	kube_config_init(c);
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : KUBE_ENOMEM;
}

int kube_config_copy(struct kube_config *dst, const struct kube_config *src,
		     struct err *e)
{
	int rc = 0;

	kube_config_init(dst);
	dst->insecure = src->insecure;
	dst->token_expiry = src->token_expiry;
	dst->exec_cluster_info = src->exec_cluster_info;
	rc |= dup_opt(src->server, &dst->server);
	rc |= dup_opt(src->ca_pem, &dst->ca_pem);
	rc |= dup_opt(src->token, &dst->token);
	rc |= dup_opt(src->cert_pem, &dst->cert_pem);
	rc |= dup_opt(src->key_pem, &dst->key_pem);
	rc |= dup_opt(src->namespace, &dst->namespace);
	rc |= dup_opt(src->context, &dst->context);
	rc |= dup_opt(src->exec_api_version, &dst->exec_api_version);
	rc |= dup_opt(src->exec_install_hint, &dst->exec_install_hint);
	rc |= dup_opt(src->origin, &dst->origin);
	for (size_t i = 0; !rc && i < src->exec_argv.n; i++)
		rc = strlist_push(&dst->exec_argv, src->exec_argv.v[i]);
	for (size_t i = 0; !rc && i < src->exec_env.n; i++)
		rc = strlist_push(&dst->exec_env, src->exec_env.v[i]);
	if (rc) {
		kube_config_release(dst);
		return nomem(e);
	}
	return 0;
}

/* ---- files ---- */

int kube_read_file(const char *path, char **data, size_t *len,
		   struct err *e)
{
	struct stat st;
	struct buf b;
	FILE *f;
	char chunk[8192];
	size_t n;

	*data = NULL;
	f = fopen(path, "r");
	if (!f)
		return err_errno(e, KUBE_ECONFIG, errno, "%s", path);
	if (fstat(fileno(f), &st) == -1 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > FILE_MAX) {
		fclose(f);
		return err_set(e, KUBE_ECONFIG, "%s: not a regular file of at "
			       "most 4 MiB", path);
	}
	buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > FILE_MAX || buf_append(&b, chunk, n)) {
			buf_release(&b);
			fclose(f);
			return err_set(e, KUBE_ECONFIG, "%s: cannot hold it "
				       "in memory", path);
		}
	}
	if (ferror(f)) {
		buf_release(&b);
		fclose(f);
		return err_set(e, KUBE_ECONFIG, "%s: read error", path);
	}
	fclose(f);
	if (buf_appends(&b, "")) {
		buf_release(&b);
		return nomem(e);
	}
	*len = b.len;
	*data = buf_detach(&b);
	return 0;
}

/* One file of the merged kubeconfig. */
struct kc_file {
	char *path;
	char *dir;   /* for relative paths in it */
	json_t *doc;
};

struct kc_set {
	struct kc_file *f;
	size_t n;
};

static void set_release(struct kc_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->f[i].path);
		free(s->f[i].dir);
		json_decref(s->f[i].doc);
	}
	free(s->f);
	memset(s, 0, sizeof(*s));
}

static int check_list(json_t *doc, const char *name, const char *path,
		      struct err *e)
{
	json_t *l = json_object_get(doc, name);
	size_t i;
	json_t *item;

	if (!l || json_is_null(l))
		return 0;
	if (!json_is_array(l))
		return err_set(e, KUBE_ECONFIG, "kubeconfig %s: \"%s\" is not "
			       "a list", path, name);
	json_array_foreach(l, i, item) {
		if (!json_is_object(item) ||
		    !json_is_string(json_object_get(item, "name")))
			return err_set(e, KUBE_ECONFIG, "kubeconfig %s: %s[%zu] "
				       "has no \"name\"", path, name, i);
	}
	return 0;
}

static int set_add(struct kc_set *s, const char *path, struct err *e)
{
	struct kc_file *grown, *f;
	char *text, *slash;
	size_t len;
	json_t *cc;
	int rc;

	rc = kube_read_file(path, &text, &len, e);
	if (rc) {
		err_prefix(e, "kubeconfig");
		return rc;
	}
	grown = realloc(s->f, (s->n + 1) * sizeof(*grown));
	if (!grown) {
		free(text);
		return nomem(e);
	}
	s->f = grown;
	f = &s->f[s->n];
	memset(f, 0, sizeof(*f));
	rc = yaml_parse(text, len, &f->doc, e);
	free(text);
	if (rc) {
		err_prefix(e, "kubeconfig %s", path);
		return rc;
	}
	s->n++;
	f->path = strdup(path);
	slash = f->path ? strrchr(f->path, '/') : NULL;
	f->dir = slash ? strndup(f->path, (size_t)(slash - f->path + 1))
		       : strdup("");
	if (!f->path || !f->dir)
		return nomem(e);
	if (!json_is_object(f->doc))
		return err_set(e, KUBE_ECONFIG, "kubeconfig %s: not a mapping "
			       "(apiVersion, clusters, contexts, users...)",
			       path);
	cc = json_object_get(f->doc, "current-context");
	if (cc && !json_is_string(cc) && !json_is_null(cc))
		return err_set(e, KUBE_ECONFIG, "kubeconfig %s: "
			       "current-context is not a string", path);
	rc = check_list(f->doc, "clusters", path, e);
	if (!rc)
		rc = check_list(f->doc, "contexts", path, e);
	if (!rc)
		rc = check_list(f->doc, "users", path, e);
	return rc;
}

static int load_files(struct kc_set *s, const char *path, struct err *e)
{
	const char *env = getenv("KUBECONFIG");
	const char *home = getenv("HOME");
	struct buf def;
	int rc;

	if (path)
		return set_add(s, path, e);
	if (env && *env) {
		char *list = strdup(env), *save = NULL;

		if (!list)
			return nomem(e);
		for (char *p = strtok_r(list, ":", &save); p;
		     p = strtok_r(NULL, ":", &save)) {
			if (access(p, F_OK) != 0)
				continue;
			rc = set_add(s, p, e);
			if (rc) {
				free(list);
				return rc;
			}
		}
		free(list);
		if (!s->n)
			return err_set(e, KUBE_ECONFIG, "no file of KUBECONFIG "
				       "(%s) exists; run `gcloud container "
				       "clusters get-credentials CLUSTER` or "
				       "fix KUBECONFIG", env);
		return 0;
	}
	buf_init(&def);
	if (buf_appendf(&def, "%s/.kube/config", home ? home : "")) {
		buf_release(&def);
		return nomem(e);
	}
	if (!home || !*home || access(def.data, F_OK) != 0) {
		rc = err_set(e, KUBE_ECONFIG, "no kubeconfig: KUBECONFIG is "
			     "unset and %s does not exist; run `gcloud "
			     "container clusters get-credentials CLUSTER "
			     "--location LOCATION`, or give --kubeconfig",
			     def.data);
		buf_release(&def);
		return rc;
	}
	rc = set_add(s, def.data, e);
	buf_release(&def);
	return rc;
}

/* For messages: where the credentials came from. */
static int set_origin(struct kube_config *out, const char *path,
		      const char *user)
{
	struct buf b;

	buf_init(&b);
	if (buf_appendf(&b, "kubeconfig %s", path) ||
	    (user && buf_appendf(&b, " (user \"%s\")", user))) {
		buf_release(&b);
		return KUBE_ENOMEM;
	}
	out->origin = buf_detach(&b);
	return 0;
}

/* The named entry of a list ("contexts") across the files, first wins:
 * *body is its inner object (entry["context"]), *file where it is. */
static json_t *find_entry(const struct kc_set *s, const char *list,
			  const char *name, const struct kc_file **file)
{
	const char *inner = strcmp(list, "contexts") == 0 ? "context"
			    : strcmp(list, "clusters") == 0 ? "cluster"
							      : "user";

	for (size_t i = 0; i < s->n; i++) {
		json_t *l = json_object_get(s->f[i].doc, list);
		size_t k;
		json_t *item;

		json_array_foreach(l, k, item) {
			if (strcmp(json_string_value(json_object_get(
					   item, "name")), name) == 0) {
				*file = &s->f[i];
				return json_object_get(item, inner);
			}
		}
	}
	return NULL;
}

/* For a message: the names a list has, "a, b, c". */
static void names(const struct kc_set *s, const char *list, char *out,
		  size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		json_t *l = json_object_get(s->f[i].doc, list);
		size_t k;
		json_t *item;

		json_array_foreach(l, k, item) {
			int w = snprintf(out + used, len - used, "%s%s",
					 used ? ", " : "",
					 json_string_value(json_object_get(
						 item, "name")));

			if (w < 0 || (size_t)w >= len - used)
				return;
			used += (size_t)w;
		}
	}
	if (!used)
		snprintf(out, len, "none");
}

/* ---- fields ---- */

struct ctx {
	const struct kc_file *file;
	const char *where;  /* "cluster \"c\"" */
	json_t *obj;
	struct err *e;
};

static int field_err(const struct ctx *c, const char *key, const char *what)
{
	return err_set(c->e, KUBE_ECONFIG, "kubeconfig %s: %s: %s %s",
		       c->file->path, c->where, key, what);
}

/* A string field: *out NULL when absent or null. */
static int str(const struct ctx *c, const char *key, const char **out)
{
	json_t *v = json_object_get(c->obj, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return field_err(c, key, "is not a string (quote it)");
	*out = json_string_value(v);
	return 0;
}

static int boolean(const struct ctx *c, const char *key, bool *out)
{
	json_t *v = json_object_get(c->obj, key);

	*out = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return field_err(c, key, "is not true or false");
	*out = json_is_true(v);
	return 0;
}

static int refuse(const struct ctx *c, const char *const *keys,
		  const char *why)
{
	for (; *keys; keys++) {
		json_t *v = json_object_get(c->obj, *keys);

		if (v && !json_is_null(v) &&
		    !(json_is_string(v) && !*json_string_value(v)) &&
		    !(json_is_array(v) && !json_array_size(v)) &&
		    !(json_is_object(v) && !json_object_size(v)))
			return field_err(c, *keys, why);
	}
	return 0;
}

/* A path relative to the file it is in. */
static int resolve(const struct ctx *c, const char *path, struct buf *out)
{
	buf_reset(out);
	if (buf_appendf(out, "%s%s", path[0] == '/' ? "" : c->file->dir,
			path))
		return nomem(c->e);
	return 0;
}

/* The file a field (key) names, relative to the kubeconfig, whole. */
static int read_relative(const struct ctx *c, const char *key,
			 const char *path, char **out, size_t *len)
{
	struct buf p;
	int rc;

	buf_init(&p);
	rc = resolve(c, path, &p);
	if (!rc)
		rc = kube_read_file(p.data, out, len, c->e);
	buf_release(&p);
	if (rc)
		err_prefix(c->e, "kubeconfig %s: %s: %s", c->file->path,
			   c->where, key);
	return rc;
}

/* data (base64) or else the file path names: *out the text. pem: it
 * must be PEM (certificates and keys). */
static int data_or_file(const struct ctx *c, const char *data_key,
			const char *file_key, bool pem, char **out)
{
	const char *data, *file;
	int rc;

	*out = NULL;
	rc = str(c, data_key, &data);
	if (!rc)
		rc = str(c, file_key, &file);
	if (rc)
		return rc;
	if (data && *data) {
		size_t len = strlen(data), got;
		unsigned char *bin = malloc(len / 4 * 3 + 4);

		if (!bin)
			return nomem(c->e);
		if (base64_decode(data, len, bin, len / 4 * 3 + 3, &got)) {
			free(bin);
			return field_err(c, data_key, "is not base64");
		}
		bin[got] = '\0';
		if (strlen((char *)bin) != got) {
			free(bin);
			return field_err(c, data_key, "holds a NUL byte: "
					 "not base64 of PEM");
		}
		*out = (char *)bin;
	} else if (file && *file) {
		size_t len;

		rc = read_relative(c, file_key, file, out, &len);
		if (rc)
			return rc;
	} else {
		return 0;
	}
	if (pem && !strstr(*out, "-----BEGIN ")) {
		free_secret(out);
		return field_err(c, data && *data ? data_key : file_key,
				 "is not PEM (\"-----BEGIN ...\")");
	}
	return 0;
}

static int cluster_fields(const struct ctx *c, struct kube_config *out)
{
	static const char *const unsupported[] = { "proxy-url",
		"tls-server-name", NULL };
	const char *server;
	size_t n;
	int rc;

	rc = refuse(c, unsupported, "is set, which slicectl does not "
		    "support; reach the server directly");
	if (!rc)
		rc = str(c, "server", &server);
	if (!rc && (!server || !*server))
		rc = field_err(c, "server", "is missing");
	if (!rc && strncmp(server, "https://", 8) != 0 &&
	    strncmp(server, "http://", 7) != 0)
		rc = field_err(c, "server", "is not an http(s):// URL");
	if (rc)
		return rc;
	n = strlen(server);
	while (n && server[n - 1] == '/')
		n--;
	out->server = strndup(server, n);
	if (!out->server)
		return nomem(c->e);
	rc = boolean(c, "insecure-skip-tls-verify", &out->insecure);
	if (!rc)
		rc = data_or_file(c, "certificate-authority-data",
				  "certificate-authority", true, &out->ca_pem);
	if (!rc && out->insecure && out->ca_pem)
		rc = field_err(c, "insecure-skip-tls-verify", "is true "
			       "together with a certificate authority, "
			       "which kubectl refuses too; drop one");
	return rc;
}

static int exec_fields(const struct ctx *uc, json_t *exec,
		       struct kube_config *out)
{
	struct ctx c = *uc;
	const char *cmd, *ver, *hint, *mode;
	json_t *args, *env, *v;
	size_t i;
	int rc;

	c.obj = exec;
	if (!json_is_object(exec))
		return field_err(uc, "exec", "is not a mapping");
	rc = str(&c, "command", &cmd);
	if (!rc && (!cmd || !*cmd))
		rc = field_err(&c, "exec.command", "is missing");
	if (!rc)
		rc = str(&c, "apiVersion", &ver);
	if (!rc)
		rc = str(&c, "installHint", &hint);
	if (!rc)
		rc = str(&c, "interactiveMode", &mode);
	if (!rc)
		rc = boolean(&c, "provideClusterInfo",
			     &out->exec_cluster_info);
	if (rc)
		return rc;
	if (!ver || (strcmp(ver, EXEC_V1BETA1) && strcmp(ver, EXEC_V1)))
		return field_err(&c, "exec.apiVersion", ver ?
				 "is not client.authentication.k8s.io/v1 or "
				 "v1beta1 (v1alpha1 is no longer supported)"
				 : "is missing");
	if (mode && strcmp(mode, "Never") && strcmp(mode, "IfAvailable") &&
	    strcmp(mode, "Always"))
		return field_err(&c, "exec.interactiveMode", "is not Never, "
				 "IfAvailable or Always");
	if (!mode && strcmp(ver, EXEC_V1) == 0)
		return field_err(&c, "exec.interactiveMode", "is required "
				 "with client.authentication.k8s.io/v1");
	if (mode && strcmp(mode, "Always") == 0)
		return field_err(&c, "exec.interactiveMode", "is Always, but "
				 "slicectl runs the plugin without a terminal; "
				 "use a plugin that works non-interactively");
	if (strchr(cmd, '/') && cmd[0] != '/') {
		struct buf p;

		buf_init(&p);
		rc = resolve(&c, cmd, &p);
		if (!rc && strlist_push(&out->exec_argv, p.data))
			rc = nomem(c.e);
		buf_release(&p);
	} else if (strlist_push(&out->exec_argv, cmd)) {
		rc = nomem(c.e);
	}
	if (rc)
		return rc;
	args = json_object_get(exec, "args");
	if (args && !json_is_null(args) && !json_is_array(args))
		return field_err(&c, "exec.args", "is not a list");
	json_array_foreach(args, i, v) {
		if (!json_is_string(v))
			return field_err(&c, "exec.args", "holds a non-string "
					 "(quote it)");
		if (strlist_push(&out->exec_argv, json_string_value(v)))
			return nomem(c.e);
	}
	env = json_object_get(exec, "env");
	if (env && !json_is_null(env) && !json_is_array(env))
		return field_err(&c, "exec.env", "is not a list");
	json_array_foreach(env, i, v) {
		const char *name = json_string_value(json_object_get(v,
								     "name"));
		const char *value = json_string_value(json_object_get(
			v, "value"));
		struct buf kv;

		if (!name || !value || !env_name_valid(name, strlen(name)))
			return field_err(&c, "exec.env", "entries need a valid "
					 "\"name\" and a string \"value\"");
		buf_init(&kv);
		if (buf_appendf(&kv, "%s=%s", name, value) ||
		    strlist_push(&out->exec_env, kv.data)) {
			buf_release(&kv);
			return nomem(c.e);
		}
		buf_release(&kv);
	}
	if (dup_opt(ver, &out->exec_api_version) ||
	    dup_opt(hint, &out->exec_install_hint))
		return nomem(c.e);
	return 0;
}

static int user_fields(const struct ctx *c, struct kube_config *out)
{
	static const char *const unsupported[] = { "auth-provider",
		"username", "password", "as", "as-uid", "as-groups",
		"as-user-extra", NULL };
	const char *token, *token_file;
	json_t *exec;
	int rc;

	rc = refuse(c, unsupported, "is set, which slicectl does not "
		    "support (auth providers were removed from kubectl: for "
		    "GKE run `gcloud container clusters get-credentials` "
		    "again to use gke-gcloud-auth-plugin)");
	if (!rc)
		rc = data_or_file(c, "client-certificate-data",
				  "client-certificate", true, &out->cert_pem);
	if (!rc)
		rc = data_or_file(c, "client-key-data", "client-key", true,
				  &out->key_pem);
	if (!rc && !out->cert_pem != !out->key_pem)
		rc = field_err(c, out->cert_pem ? "client-key" :
			       "client-certificate", "is missing (a client "
			       "certificate needs both)");
	if (!rc)
		rc = str(c, "token", &token);
	if (!rc)
		rc = str(c, "tokenFile", &token_file);
	if (rc)
		return rc;
	if (token && *token) {
		out->token = strdup(token);
		return out->token ? 0 : nomem(c->e);
	}
	if (token_file && *token_file) {
		size_t len;

		rc = read_relative(c, "tokenFile", token_file, &out->token,
				   &len);
		if (rc)
			return rc;
		while (len && strchr(" \t\r\n", out->token[len - 1]))
			out->token[--len] = '\0';
		return 0;
	}
	exec = json_object_get(c->obj, "exec");
	if (exec && !json_is_null(exec))
		return exec_fields(c, exec, out);
	return 0;
}

/* The inner object of the named entry, or an error naming what exists. */
static int entry(const struct kc_set *s, const char *list, const char *kind,
		 const char *name, const char *from, struct ctx *c)
{
	char have[400];

	c->obj = find_entry(s, list, name, &c->file);
	if (c->obj && json_is_object(c->obj))
		return 0;
	if (c->obj)
		return err_set(c->e, KUBE_ECONFIG, "kubeconfig %s: %s \"%s\" "
			       "is not a mapping", c->file->path, kind, name);
	names(s, list, have, sizeof(have));
	return err_set(c->e, KUBE_ECONFIG, "%s \"%s\" (%s) is not in the "
		       "kubeconfig %s%s (its %s: %s)", kind, name, from,
		       s->f[0].path, s->n > 1 ? " or the other KUBECONFIG "
		       "files" : "", list, have);
}

static int resolve_context(const struct kc_set *s, const char *context,
			   struct kube_config *out, struct err *e)
{
	const char *name = context, *cluster, *user, *ns;
	char where[300];
	struct ctx c = { .e = e, .where = where };
	int rc;

	for (size_t i = 0; !name && i < s->n; i++) {
		const char *cc = json_string_value(
			json_object_get(s->f[i].doc, "current-context"));

		if (cc && *cc)
			name = cc;
	}
	if (!name)
		return err_set(e, KUBE_ECONFIG, "kubeconfig %s has no "
			       "current-context; give --context, or run "
			       "`kubectl config use-context NAME`",
			       s->f[0].path);
	rc = entry(s, "contexts", "context", name, context ? "--context"
		   : "current-context", &c);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "context \"%s\"", name);
	rc = str(&c, "cluster", &cluster);
	if (!rc)
		rc = str(&c, "user", &user);
	if (!rc)
		rc = str(&c, "namespace", &ns);
	if (!rc && (!cluster || !*cluster))
		rc = field_err(&c, "cluster", "is missing");
	if (rc)
		return rc;
	if ((out->context = strdup(name)) == NULL ||
	    (ns && *ns && !(out->namespace = strdup(ns))))
		return nomem(e);
	rc = entry(s, "clusters", "cluster", cluster, where, &c);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "cluster \"%s\"", cluster);
	rc = cluster_fields(&c, out);
	if (rc || !user || !*user) {
		if (!rc && set_origin(out, s->f[0].path, NULL))
			rc = nomem(e);
		return rc;
	}
	snprintf(where, sizeof(where), "context \"%s\"", name);
	rc = entry(s, "users", "user", user, where, &c);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "user \"%s\"", user);
	rc = user_fields(&c, out);
	if (!rc && set_origin(out, c.file->path, user))
		rc = nomem(e);
	return rc;
}

int kube_config_load(const char *path, const char *context,
		     struct kube_config *out, struct err *e)
{
	struct kc_set s = { 0 };
	int rc;

	kube_config_init(out);
	rc = load_files(&s, path, e);
	if (!rc)
		rc = resolve_context(&s, context, out, e);
	set_release(&s);
	if (rc)
		kube_config_release(out);
	return rc;
}

/* The GKE API gives "1.2.3.4" (or a name, or a test's URL). */
static int set_server(struct kube_config *out, const char *endpoint)
{
	struct buf b;
	size_t n = strlen(endpoint);

	while (n && endpoint[n - 1] == '/')
		n--;
	buf_init(&b);
	if (buf_appendf(&b, "%s%.*s", strstr(endpoint, "://") ? ""
		        : "https://", (int)n, endpoint)) {
		buf_release(&b);
		return KUBE_ENOMEM;
	}
	out->server = buf_detach(&b);
	return 0;
}

int kube_config_from_endpoint(const char *endpoint, const char *ca_base64,
			      const char *token, struct kube_config *out,
			      struct err *e)
{
	int rc = 0;

	kube_config_init(out);
	if (!endpoint || !*endpoint)
		return err_set(e, KUBE_ECONFIG, "the GKE API gave no endpoint "
			       "for the cluster (is it still being created?)");
	if (set_server(out, endpoint) || dup_opt(token, &out->token) ||
	    dup_opt("the GKE API's endpoint and your Google credentials",
		    &out->origin))
		rc = nomem(e);
	if (!rc && ca_base64 && *ca_base64) {
		size_t len = strlen(ca_base64), got;
		unsigned char *pem = malloc(len / 4 * 3 + 4);

		if (!pem)
			rc = nomem(e);
		else if (base64_decode(ca_base64, len, pem, len / 4 * 3 + 3,
				       &got) ||
			 (pem[got] = '\0', strlen((char *)pem) != got) ||
			 !strstr((char *)pem, "-----BEGIN ")) {
			free(pem);
			rc = err_set(e, KUBE_ECONFIG, "the GKE API's "
				     "clusterCaCertificate is not base64 of "
				     "a PEM certificate");
		} else {
			out->ca_pem = (char *)pem;
		}
	}
	if (rc)
		kube_config_release(out);
	return rc;
}
