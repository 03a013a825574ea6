/*
 * status.c: a failed answer as a kube_error a user can act on. The API
 * server's Status (message, reason, details: the resource, its group, the
 * object's name, the fields it refused) is kept as the server wrote it,
 * and a hint is added from the request's path: the RBAC rule a 403 lacks,
 * whether a 404 means a missing object or a missing API (JobSet or Kueue
 * not installed), the fields of a 422.
 */
#include "kube/client.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JOBSET_GROUP "jobset.x-k8s.io"
#define KUEUE_GROUP "kueue.x-k8s.io"
#define JOBSET_INSTALL "kubectl apply --server-side -f https://github.com/" \
	"kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml"
#define KUEUE_INSTALL "kubectl apply --server-side -f https://github.com/" \
	"kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml"

/* What a request's path names. */
struct api_path {
	char group[256];    /* "" for the core API */
	char ns[256];       /* "" when not namespaced */
	char resource[256]; /* "jobsets" */
	char name[256];     /* "" for a collection */
};

/* "/api/v1/namespaces/NS/pods/NAME", "/apis/G/V/namespaces/NS/R/NAME",
 * "/apis/G/V/R/NAME" (cluster-scoped), query dropped. */
static void parse_path(const char *path, struct api_path *p)
{
	char seg[6][256];
	size_t n = 0, len = strcspn(path, "?");
	const char *s = path;
	size_t i = 0;

	memset(p, 0, sizeof(*p));
	while (s < path + len && n < 6) {
		size_t k;

		while (s < path + len && *s == '/')
			s++;
		k = strcspn(s, "/?");
		if (!k)
			break;
		snprintf(seg[n++], sizeof(seg[0]), "%.*s", (int)k, s);
		s += k;
	}
	if (n >= 2 && strcmp(seg[0], "api") == 0) {
		i = 2;
	} else if (n >= 3 && strcmp(seg[0], "apis") == 0) {
		snprintf(p->group, sizeof(p->group), "%s", seg[1]);
		i = 3;
	} else {
		return;
	}
	if (i + 1 < n && strcmp(seg[i], "namespaces") == 0 && i + 2 < n) {
		snprintf(p->ns, sizeof(p->ns), "%s", seg[i + 1]);
		i += 2;
	}
	if (i < n)
		snprintf(p->resource, sizeof(p->resource), "%s", seg[i]);
	if (i + 1 < n)
		snprintf(p->name, sizeof(p->name), "%s", seg[i + 1]);
}

/* The API server's Status, or what there is of it. */
struct status {
	const char *message;
	const char *reason;
	const char *name;   /* details.name */
	const char *group;  /* details.group */
	const char *kind;   /* details.kind: the resource, for most errors */
	json_t *causes;     /* details.causes */
};

static void read_status(json_t *root, struct status *st)
{
	json_t *d = json_object_get(root, "details");

	memset(st, 0, sizeof(*st));
	if (!json_is_object(root))
		return;
	st->message = json_string_value(json_object_get(root, "message"));
	st->reason = json_string_value(json_object_get(root, "reason"));
	st->name = json_string_value(json_object_get(d, "name"));
	st->group = json_string_value(json_object_get(d, "group"));
	st->kind = json_string_value(json_object_get(d, "kind"));
	st->causes = json_object_get(d, "causes");
	if (!json_is_array(st->causes))
		st->causes = NULL;
}

static int status_error(long status)
{
	switch (status) {
	case 401: return KUBE_EAUTH;
	case 403: return KUBE_EFORBIDDEN;
	case 404: return KUBE_ENOTFOUND;
	case 409: return KUBE_ECONFLICT;
	case 422: return KUBE_EINVALID;
	default: return KUBE_EHTTP;
	}
}

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle);
}

/* The RBAC verb of a request, as a 403's message states it ("cannot
 * create resource") or else as the method and path imply. */
static void rbac_verb(const char *method, const char *path,
		      const struct api_path *p, const char *message,
		      char *out, size_t len)
{
	const char *c = message ? strstr(message, "cannot ") : NULL;

	if (c) {
		c += 7;
		snprintf(out, len, "%.*s", (int)strcspn(c, " "), c);
		return;
	}
	if (strcmp(method, "GET") == 0)
		snprintf(out, len, "%s", has(path, "watch=1") ||
			 has(path, "watch=true") ? "watch" :
			 p->name[0] ? "get" : "list");
	else if (strcmp(method, "POST") == 0)
		snprintf(out, len, "create");
	else if (strcmp(method, "PUT") == 0)
		snprintf(out, len, "update");
	else if (strcmp(method, "PATCH") == 0)
		snprintf(out, len, "patch");
	else if (strcmp(method, "DELETE") == 0)
		snprintf(out, len, "%s", p->name[0] ? "delete"
						    : "deletecollection");
	else
		snprintf(out, len, "%s", method);
}

/* " in namespace \"NS\"" when the path has one. */
static void in_namespace(struct buf *h, const struct api_path *p)
{
	if (p->ns[0])
		buf_appendf(h, " in namespace \"%s\"", p->ns);
}

static void hint_403(struct buf *h, const char *method, const char *path,
		     const struct api_path *p, const struct status *st)
{
	const char *resource = st->kind && *st->kind ? st->kind
						     : p->resource;
	const char *group = st->group ? st->group : p->group;
	char verb[64];

	rbac_verb(method, path, p, st->message, verb, sizeof(verb));
	buf_appendf(h, "; the account lacks the RBAC permission to %s %s%s%s"
		    "%s%s: it needs a %s with apiGroups [\"%s\"], resources "
		    "[\"%s\"], verbs [\"%s\"] bound to it (on GKE, "
		    "roles/container.developer grants this)", verb, resource,
		    *group ? "." : "", group, p->ns[0] ? " in namespace " : "",
		    p->ns, p->ns[0] ? "Role (or ClusterRole)" : "ClusterRole",
		    group, resource, verb);
}

static void hint_404(struct buf *h, const struct api_path *p,
		     const struct status *st)
{
	/* A missing API answers "404 page not found", or a Status without
	 * the name of an object. */
	bool object = st->name && *st->name;

	if (st->kind && strcmp(st->kind, "namespaces") == 0) {
		buf_appendf(h, "; the namespace \"%s\" does not exist: create "
			    "it (`kubectl create namespace %s`) or give "
			    "another --namespace", st->name, st->name);
	} else if (strcmp(p->group, JOBSET_GROUP) == 0 && !object) {
		buf_appends(h, "; JobSet is not installed on this cluster: "
			    JOBSET_INSTALL);
	} else if (strcmp(p->group, KUEUE_GROUP) == 0 && !object) {
		buf_appends(h, "; Kueue is not installed on this cluster: "
			    KUEUE_INSTALL);
	} else if (strcmp(p->resource, "localqueues") == 0) {
		buf_appendf(h, "; there is no LocalQueue \"%s\" in namespace "
			    "\"%s\": see `kubectl get localqueues -n %s` and "
			    "give one with --queue", st->name, p->ns, p->ns);
	} else if (strcmp(p->resource, "clusterqueues") == 0) {
		buf_appendf(h, "; there is no ClusterQueue \"%s\": see "
			    "`kubectl get clusterqueues`", st->name);
	} else if (object) {
		buf_appendf(h, "; there is no \"%s\" among the %s", st->name,
			    p->resource);
		in_namespace(h, p);
	} else {
		buf_appendf(h, "; the API server does not serve %s%s%s: is "
			    "this the right cluster?", p->resource,
			    p->group[0] ? "." : "", p->group);
	}
}

/* "spec.a (FieldValueInvalid), spec.b" from details.causes. */
static void fields(struct buf *h, json_t *causes)
{
	size_t i, n = 0;
	json_t *c;

	json_array_foreach(causes, i, c) {
		const char *f = json_string_value(json_object_get(c, "field"));
		const char *r = json_string_value(json_object_get(c,
								  "reason"));

		if (!f || !*f)
			continue;
		buf_appendf(h, "%s%s%s%s%s", n++ ? ", " : "", f,
			    r ? " (" : "", r ? r : "", r ? ")" : "");
	}
	if (!n)
		buf_appends(h, "the fields the message names");
}

static void hint_401(struct buf *h, const struct kube_config *c)
{
	if (c->exec_argv.n)
		buf_appendf(h, "; the credential from the exec plugin `%s` "
			    "(%s) was refused: for GKE run `gcloud auth "
			    "login` and check that the account may use the "
			    "cluster", c->exec_argv.v[0], c->origin);
	else if (c->token && c->origin && strncmp(c->origin, "kubeconfig",
						  10) == 0)
		buf_appendf(h, "; the token of %s was refused: it may have "
			    "expired; fetch a new kubeconfig (for GKE, "
			    "`gcloud container clusters get-credentials`)",
			    c->origin);
	else if (c->token)
		buf_appendf(h, "; the token (%s) was refused: check "
			    "SLICECTL_ACCESS_TOKEN or "
			    "GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud "
			    "auth application-default login`",
			    c->origin ? c->origin : "given");
	else if (c->cert_pem)
		buf_appendf(h, "; the client certificate of %s was refused",
			    c->origin ? c->origin : "the kubeconfig");
	else
		buf_appendf(h, "; %s gives no credentials for this cluster",
			    c->origin ? c->origin : "the configuration");
}

static void hint(struct buf *h, const struct kube_client *k,
		 const struct kube_call *c, long status,
		 const struct status *st, bool retried)
{
	struct api_path p;

	parse_path(c->path, &p);
	switch (status) {
	case 400:
		if (has(st->message, "unknown field") ||
		    has(st->message, "strict decoding error"))
			buf_appends(h, "; the cluster does not know a field "
				    "slicectl sent: its JobSet or Kueue may be "
				    "older than v0.10.1 / v0.19.2");
		break;
	case 401:
		hint_401(h, &k->cfg);
		break;
	case 403:
		hint_403(h, c->method, c->path, &p, st);
		break;
	case 404:
		hint_404(h, &p, st);
		if (retried && strcmp(c->method, "DELETE") == 0)
			buf_appends(h, " (an earlier attempt of this request "
				    "may have deleted it)");
		break;
	case 409:
		if (has(st->reason, "AlreadyExists")) {
			buf_appendf(h, "; the name \"%s\" is taken among the "
				    "%s", st->name ? st->name : "", p.resource);
			in_namespace(h, &p);
			buf_appends(h, ": choose another name, or delete that "
				    "one first");
		} else {
			buf_appends(h, "; the object changed meanwhile: read "
				    "it again and retry");
		}
		if (retried && strcmp(c->method, "POST") == 0)
			buf_appends(h, " (an earlier attempt of this request "
				    "may have created it)");
		break;
	case 422:
		buf_appends(h, "; the server refused ");
		fields(h, st->causes);
		break;
	case 429:
		buf_appends(h, "; the API server is throttling this client: "
			    "try again later");
		break;
	case 500:
		if (has(st->message, "failed calling webhook"))
			buf_appends(h, "; an admission webhook did not answer: "
				    "check that the JobSet and Kueue "
				    "controllers run (`kubectl get pods -n "
				    "jobset-system`, `-n kueue-system`)");
		else
			buf_appends(h, "; the API server failed: try again "
				    "later");
		break;
	case 502:
	case 503:
	case 504:
		buf_appends(h, "; the API server is unavailable (a control "
			    "plane upgrade or resize?): try again in a few "
			    "minutes");
		break;
	default:
		break;
	}
}

static const char *curl_hint(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
		return "; the server's certificate is not signed by the "
		       "cluster's CA (certificate-authority in the "
		       "kubeconfig, or the GKE API's clusterCaCertificate): "
		       "is this the cluster's address?";
	case CURLE_SSL_CERTPROBLEM:
		return "; the client certificate or key of the kubeconfig "
		       "cannot be used";
	case CURLE_COULDNT_RESOLVE_HOST:
		return "; the server's name does not resolve";
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
		return "; is the cluster reachable from here (authorized "
		       "networks, a private endpoint, a VPN)?";
	default:
		return "";
	}
}

/* Control characters out of a server's text, and trailing blanks. */
static void clean(struct buf *b)
{
	for (size_t i = 0; i < b->len; i++)
		if ((unsigned char)b->data[i] < 0x20 || b->data[i] == 0x7f)
			b->data[i] = ' ';
	while (b->len && b->data[b->len - 1] == ' ')
		b->data[--b->len] = '\0';
}

int kube_failure(const struct kube_client *k, const struct kube_call *c,
		 const struct http_response *a, bool retried, struct err *e)
{
	int path_len = (int)strcspn(c->path, "?");
	struct status st;
	struct buf h, msg;
	json_t *root = NULL;
	int code;

	if (a->status == 0)
		return err_set(e, KUBE_ENETWORK, "%s %.*s: no answer from %s%s:"
			       " %s%s", c->method, path_len, c->path,
			       k->cfg.server, retried ? " after retries" : "",
			       k->http.errbuf[0] ? k->http.errbuf
					    : curl_easy_strerror(a->curl_code),
			       curl_hint(a->curl_code));
	if (a->body.len)
		root = json_loadb(a->body.data, a->body.len, 0, NULL);
	read_status(root, &st);
	buf_init(&h);
	buf_init(&msg);
	/* The server's words may echo a credential. */
	if (st.message)
		http_redact(&msg, st.message);
	else if (a->body.len)
		http_redact(&msg, a->body.data);
	if (msg.len > 200)
		msg.data[msg.len = 200] = '\0';
	hint(&h, k, c, a->status, &st, retried);
	if (msg.data)
		clean(&msg);
	code = status_error(a->status);
	err_set(e, code, "%s %.*s: %ld %s%s%s%s%s", c->method, path_len,
		c->path, a->status, http_reason_phrase(a->status),
		msg.len ? ": " : "", msg.len ? msg.data : "",
		retried && (a->status == 429 || a->status >= 500)
			? " (after retries)" : "",
		h.data ? h.data : "");
	buf_release(&h);
	buf_release(&msg);
	json_decref(root);
	return code;
}
