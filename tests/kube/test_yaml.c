/*
 * tests/kube/test_yaml.c: kubeconfigs in all the YAML that kubectl reads
 * (flow style, anchors, aliases and merge keys, several documents, every
 * scalar style, tags), what must still be refused (malformed files, alias
 * bombs, deep nesting), and each of those files read by the real kubectl,
 * which must agree with us on every field kube/config.c uses.
 */
#include "tests/kube/stub.h"
#include "kube/yaml.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];

static void setup(void)
{
	kubeconfig_scratch(dir, sizeof(dir));
}

static void teardown(void)
{
	scratch_rm(dir);
}

TestSuite(kubeconfig_yaml, .init = setup, .fini = teardown, .timeout = 60);

#define V1BETA1 "client.authentication.k8s.io/v1beta1"

static const char flow_config[] =
	"apiVersion: v1\n"
	"kind: Config\n"
	"clusters: [{name: c, cluster: {server: \"https://flow.example:6443\","
	" certificate-authority-data: " CA_B64 "}}]\n"
	"users: [{name: u, user: {token: flow-token}},\n"
	"        {name: e, user: {exec: {apiVersion: " V1BETA1 ",\n"
	"           command: plugin, args: [--a, 'b c'],\n"
	"           env: [{name: K, value: 'yes'}]}}}]\n"
	"contexts: [{name: x, context: {cluster: c, user: u,"
	" namespace: team-f}},\n"
	"           {name: w, context: {cluster: c, user: e}}]\n"
	"current-context: x\n";

/* A whole document in flow style, over several lines. */
static const char flow_document[] =
	"{apiVersion: v1, kind: Config,\n"
	" clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8001',\n"
	"   insecure-skip-tls-verify: true}}],\n"
	" users: [{name: u, user: {token: t}}],\n"
	" contexts: [{name: x, context: {cluster: c, user: u}}],\n"
	" current-context: x}\n";

/*
 * Merge keys as kubectl (go-yaml v2) reads them: a merge overwrites the
 * keys written before it (cluster d ends up at base's server) and the
 * later keys win (cluster c keeps its own); in a list of merged mappings
 * the earlier win (user v's command is the anchored one).
 */
static const char anchors_config[] =
	"clusters:\n"
	"- name: base\n"
	"  cluster: &base\n"
	"    server: https://base.example\n"
	"    certificate-authority-data: " CA_B64 "\n"
	"- name: c\n"
	"  cluster:\n"
	"    <<: *base\n"
	"    server: https://merged.example\n"
	"- name: d\n"
	"  cluster:\n"
	"    server: https://overwritten.example\n"
	"    <<: *base\n"
	"users:\n"
	"- name: u\n"
	"  user:\n"
	"    exec: &exec\n"
	"      apiVersion: " V1BETA1 "\n"
	"      command: gke-gcloud-auth-plugin\n"
	"      args: &args [--flag, 'x y']\n"
	"      provideClusterInfo: true\n"
	"- name: v\n"
	"  user:\n"
	"    exec:\n"
	"      <<: [*exec, {command: other, installHint: merged}]\n"
	"      args: *args\n"
	"contexts:\n"
	"- name: x\n"
	"  context: &ctx {cluster: c, user: u}\n"
	"- name: w\n"
	"  context: {<<: *ctx, cluster: d, user: v}\n"
	"current-context: x\n";

/* kubectl reads the first document and never parses the second. */
static const char multi_document[] =
	"---\n"
	"current-context: x\n"
	"clusters: [{name: c, cluster: {server: \"https://first.example\"}}]\n"
	"users: [{name: u, user: {token: first}}]\n"
	"contexts: [{name: x, context: {cluster: c, user: u}}]\n"
	"...\n"
	"---\n"
	"current-context: y\n"
	"clusters: [{name: c, cluster: {server: \"https://second.example\"}}]\n"
	"broken: [a: b: c\n";

static const char scalars_config[] =
	"clusters:\n"
	"- name: \"c\"\n"
	"  cluster:\n"
	"    server: 'https://quoted.example'\n"
	"    certificate-authority-data: \"" CA_B64 "\"\n"
	"    insecure-skip-tls-verify: false\n"
	"users:\n"
	"- name: u\n"
	"  user:\n"
	"    token: \"a\\\"b\\\\c\\u00e9 \\\n"
	"      d\"\n"
	"- name: e\n"
	"  user:\n"
	"    exec:\n"
	"      apiVersion: !!str " V1BETA1 "\n"
	"      command: plugin\n"
	"      args:\n"
	"      - |\n"
	"        line one\n"
	"          line two\n"
	"      - >-\n"
	"        folded\n"
	"        text\n"
	"\n"
	"        para\n"
	"      - 'it''s'\n"
	"      - !!str 0123\n"
	"      - \"0123\"\n"
	"      - ! 12\n"
	"      env:\n"
	"      - name: MODE\n"
	"        value: !!str yes\n"
	"      installHint: >\n"
	"        Install the plugin\n"
	"        by following the docs.\n"
	"      provideClusterInfo: !!bool on\n"
	"contexts:\n"
	"- {name: x, context: {cluster: c, user: u}}\n"
	"- {name: w, context: {cluster: c, user: e}}\n"
	"current-context: \"x\"\n";

/* Line 4: the quote is never closed. */
static const char unclosed_quote[] =
	"clusters:\n"
	"- name: c\n"
	"  cluster:\n"
	"    server: \"https://k\n"
	"current-context: x\n";

/* Line 3: a flow mapping that does not end where it should. */
static const char broken_flow[] =
	"current-context: x\n"
	"users:\n"
	"- {name: u, user: {token: t}\n"
	"contexts: []\n";

static void load_ok(const char *text, const char *context,
		    struct kube_config *c)
{
	struct err e;

	cr_assert_eq(kubeconfig_load(dir, text, context, c, &e), 0, "%s\n%s",
		     e.msg, text);
}

Test(kubeconfig_yaml, flow_style)
{
	struct kube_config c;

	load_ok(flow_config, NULL, &c);
	cr_assert_str_eq(c.server, "https://flow.example:6443");
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert_str_eq(c.token, "flow-token");
	cr_assert_str_eq(c.namespace, "team-f");
	kube_config_release(&c);
	load_ok(flow_config, "w", &c);
	cr_assert_eq(c.exec_argv.n, 3);
	cr_assert_str_eq(c.exec_argv.v[2], "b c");
	cr_assert_eq(c.exec_env.n, 1);
	cr_assert_str_eq(c.exec_env.v[0], "K=yes");
	kube_config_release(&c);
	load_ok(flow_document, NULL, &c);
	cr_assert_str_eq(c.server, "http://127.0.0.1:8001");
	cr_assert(c.insecure);
	cr_assert_str_eq(c.token, "t");
	kube_config_release(&c);
}

Test(kubeconfig_yaml, anchors_aliases_and_merge_keys)
{
	struct kube_config c;

	load_ok(anchors_config, NULL, &c);
	cr_assert_str_eq(c.server, "https://merged.example");
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert_eq(c.exec_argv.n, 3);
	cr_assert_str_eq(c.exec_argv.v[0], "gke-gcloud-auth-plugin");
	cr_assert_str_eq(c.exec_argv.v[2], "x y");
	cr_assert(c.exec_cluster_info);
	kube_config_release(&c);
	load_ok(anchors_config, "w", &c);
	cr_assert_str_eq(c.server, "https://base.example");
	cr_assert_str_eq(c.exec_argv.v[0], "gke-gcloud-auth-plugin");
	cr_assert_str_eq(c.exec_argv.v[1], "--flag");
	cr_assert_str_eq(c.exec_install_hint, "merged");
	cr_assert(c.exec_cluster_info);
	kube_config_release(&c);
}

Test(kubeconfig_yaml, first_document_only)
{
	struct kube_config c;

	load_ok(multi_document, NULL, &c);
	cr_assert_str_eq(c.context, "x");
	cr_assert_str_eq(c.server, "https://first.example");
	cr_assert_str_eq(c.token, "first");
	kube_config_release(&c);
}

Test(kubeconfig_yaml, quoted_and_block_scalars)
{
	struct kube_config c;

	load_ok(scalars_config, NULL, &c);
	cr_assert_str_eq(c.server, "https://quoted.example");
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert(!c.insecure);
	cr_assert_str_eq(c.token, "a\"b\\c\xc3\xa9 d");
	kube_config_release(&c);
	load_ok(scalars_config, "w", &c);
	cr_assert_eq(c.exec_argv.n, 7);
	cr_assert_str_eq(c.exec_argv.v[1], "line one\n  line two\n");
	cr_assert_str_eq(c.exec_argv.v[2], "folded text\npara");
	cr_assert_str_eq(c.exec_argv.v[3], "it's");
	cr_assert_str_eq(c.exec_argv.v[4], "0123");
	cr_assert_str_eq(c.exec_argv.v[5], "0123");
	cr_assert_str_eq(c.exec_argv.v[6], "12");
	cr_assert_str_eq(c.exec_env.v[0], "MODE=yes");
	cr_assert_str_eq(c.exec_install_hint,
			 "Install the plugin by following the docs.\n");
	cr_assert(c.exec_cluster_info);
	kube_config_release(&c);
}

static void refused(const char *text, const char *want)
{
	kubeconfig_refused(dir, text, want);
}

Test(kubeconfig_yaml, malformed_names_file_line_and_column)
{
	char want[400];

	snprintf(want, sizeof(want), "kubeconfig %s/config: line 4: a quoted "
		 "value is not closed (column 13)", dir);
	refused(unclosed_quote, want);
	snprintf(want, sizeof(want), "kubeconfig %s/config: line 4: while "
		 "parsing a flow mapping (from line 3), did not find "
		 "expected ',' or '}' (column 1)", dir);
	refused(broken_flow, want);
	refused("a: *nowhere\n", "line 1: the alias *nowhere names no "
		"anchor before it (column 4)");
	refused("a: &a [1, *a]\n", "line 1: the alias *a is inside its "
		"own anchor");
	refused("a: !!binary aGk=\n", "line 1: the tag !!binary is not "
		"supported");
	refused("a: !!int x\n", "\"x\" does not fit its tag !!int");
	refused("a: {<<: [1]}\n", "a merge key (<<) needs a mapping");
	refused("a: &m {k: v}\n*m : x\n", "line 2: the alias *m is a key "
		"but not a string");
	refused("a: 1\nb: 2\n<<: {a: 3}\nb: 4\n", "line 4: the key \"b\" "
		"appears twice");
}

/* Anchor a0 holds 10 values; each a<i> lists a<i-1> ten times. */
static char *laughs(int levels)
{
	struct buf b;

	buf_init(&b);
	buf_appendf(&b, "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, "
		    "lol, lol]\n");
	for (int i = 1; i < levels; i++) {
		buf_appendf(&b, "a%d: &a%d [", i, i);
		for (int k = 0; k < 10; k++)
			buf_appendf(&b, "%s*a%d", k ? ", " : "", i - 1);
		buf_appendf(&b, "]\n");
	}
	cr_assert(b.data);
	return buf_detach(&b);
}

Test(kubeconfig_yaml, alias_bomb_is_refused)
{
	char *text = laughs(4);
	struct err e;
	json_t *j;

	/* Four levels add 12330 values: a real use of aliases, if a big one. */
	err_init(&e);
	cr_assert_eq(yaml_parse(text, strlen(text), &j, &e), 0, "%s", e.msg);
	cr_assert_eq(json_array_size(json_object_get(j, "a3")), 10);
	json_decref(j);
	free(text);
	text = laughs(5);
	refused(text, "line 5: aliases expand the document by more than "
		"100000 values or 4 MiB, as an alias bomb does");
	free(text);
	/* A billion laughs is refused as soon (and as fast). */
	text = laughs(10);
	refused(text, "line 5: aliases expand the document by more than");
	free(text);
}

/* A few values, but a long string: 80 aliases of 64 KiB add 5 MiB. */
Test(kubeconfig_yaml, alias_bomb_in_bytes_is_refused)
{
	struct buf b;

	buf_init(&b);
	buf_appends(&b, "a: &a ");
	for (int i = 0; i < 64 * 1024; i++)
		buf_appends(&b, "x");
	buf_appends(&b, "\nb: [");
	for (int i = 0; i < 80; i++)
		buf_appends(&b, i ? ", *a" : "*a");
	buf_appends(&b, "]\n");
	cr_assert(b.data);
	refused(b.data, "line 2: aliases expand the document by more than "
		"100000 values or 4 MiB");
	buf_release(&b);
}

/* n lists, one in the other, around inner. */
static void nest(struct buf *b, int n, const char *inner)
{
	for (int i = 0; i < n; i++)
		buf_appends(b, "[");
	buf_appends(b, inner);
	for (int i = 0; i < n; i++)
		buf_appends(b, "]");
}

Test(kubeconfig_yaml, depth_is_bounded)
{
	struct buf b;
	struct err e;
	json_t *j;

	/* 64 nested lists are read... */
	buf_init(&b);
	nest(&b, 64, "1");
	err_init(&e);
	cr_assert_eq(yaml_parse(b.data, b.len, &j, &e), 0, "%s", e.msg);
	json_decref(j);
	/* ...but not inside a mapping: its 64th list would be the 65th. */
	buf_reset(&b);
	buf_appends(&b, "a: ");
	nest(&b, 64, "1");
	cr_assert_eq(yaml_parse(b.data, b.len, &j, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "line 1: nested too deeply (column 67)"),
		  "%s", e.msg);
	/* Two chains of 40 that are fine apart, joined by an alias. */
	buf_reset(&b);
	buf_appends(&b, "a: &a ");
	nest(&b, 40, "1");
	buf_appends(&b, "\nb: ");
	nest(&b, 40, "*a");
	cr_assert_eq(yaml_parse(b.data, b.len, &j, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "line 2: nested too deeply (through an "
			 "alias)"), "%s", e.msg);
	buf_release(&b);
}

/* ---- against kubectl ---- */

/* Missing, null, "", false, [] and {} all mean "not set": kubectl prints
 * unset fields so, and we leave them out. */
static bool unset(json_t *v)
{
	return !v || json_is_null(v) || json_is_false(v) ||
	       (json_is_string(v) && !*json_string_value(v)) ||
	       (json_is_array(v) && !json_array_size(v)) ||
	       (json_is_object(v) && !json_object_size(v));
}

static void same(json_t *ours, json_t *theirs, const char *where,
		 const char *key, const char *file)
{
	json_t *a = json_object_get(ours, key), *b = json_object_get(theirs,
								     key);
	char *sa, *sb;

	if ((unset(a) && unset(b)) || json_equal(a, b))
		return;
	sa = json_dumps(a, JSON_ENCODE_ANY);
	sb = json_dumps(b, JSON_ENCODE_ANY);
	cr_assert_fail("%s: %s.%s: ours %s, kubectl's %s", file, where, key,
		       sa, sb);
}

static json_t *named(json_t *list, const char *name)
{
	size_t i;
	json_t *item;

	json_array_foreach(list, i, item)
		if (strcmp(json_string_value(json_object_get(item, "name")),
			   name) == 0)
			return item;
	return NULL;
}

/* Each entry of a list, field by field. */
static void same_list(json_t *ours, json_t *theirs, const char *list,
		      const char *inner, const char *const *fields,
		      const char *file)
{
	json_t *l = json_object_get(ours, list), *item;
	size_t i;

	cr_assert_eq(json_array_size(l),
		     json_array_size(json_object_get(theirs, list)),
		     "%s: %s differ in number", file, list);
	json_array_foreach(l, i, item) {
		const char *name = json_string_value(json_object_get(item,
								     "name"));
		json_t *t = named(json_object_get(theirs, list), name);
		json_t *a = json_object_get(item, inner);
		json_t *b = json_object_get(t, inner);

		cr_assert(t, "%s: kubectl has no %s \"%s\"", file, list, name);
		for (const char *const *f = fields; *f; f++)
			same(a, b, name, *f, file);
		if (strcmp(inner, "user") == 0 &&
		    !unset(json_object_get(a, "exec"))) {
			static const char *const exec[] = { "command", "args",
				"env", "apiVersion", "installHint",
				"provideClusterInfo", NULL };

			for (const char *const *f = exec; *f; f++)
				same(json_object_get(a, "exec"),
				     json_object_get(b, "exec"), name, *f,
				     file);
		}
	}
}

/*
 * Every kubeconfig above, read by the real kubectl (`kubectl config view
 * -o json --raw`) and by us: the fields kube/config.c uses agree, and the
 * malformed ones are refused by both. Skipped where kubectl is missing.
 */
Test(kubeconfig_yaml, agrees_with_kubectl, .timeout = 300)
{
	static const struct {
		const char *name, *text;
		bool valid;
	} files[] = {
		{ "flow_config", flow_config, true },
		{ "flow_document", flow_document, true },
		{ "anchors_config", anchors_config, true },
		{ "multi_document", multi_document, true },
		{ "scalars_config", scalars_config, true },
		{ "unclosed_quote", unclosed_quote, false },
		{ "broken_flow", broken_flow, false },
	};
	static const char *const cluster[] = { "server",
		"certificate-authority-data", "insecure-skip-tls-verify",
		NULL };
	static const char *const user[] = { "token", NULL };
	static const char *const context[] = { "cluster", "user",
		"namespace", NULL };
	char cmd[1200], out[300];

	if (system("command -v kubectl >/dev/null 2>&1") != 0)
		cr_skip_test("kubectl is not installed");
	snprintf(out, sizeof(out), "%s/kubectl.json", dir);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		const char *path = scratch_write(dir, "config", files[i].text,
						 false);
		struct err e;
		json_t *ours = NULL, *theirs;
		int kubectl_rc, rc;

		snprintf(cmd, sizeof(cmd), "kubectl config view --kubeconfig "
			 "'%s' -o json --raw >'%s' 2>/dev/null", path, out);
		kubectl_rc = system(cmd);
		err_init(&e);
		rc = yaml_parse(files[i].text, strlen(files[i].text), &ours,
				&e);
		cr_assert_eq(rc == 0, files[i].valid, "%s: ours: %s",
			     files[i].name, e.msg);
		cr_assert_eq(kubectl_rc == 0, files[i].valid, "%s: kubectl "
			     "exited %d", files[i].name, kubectl_rc);
		if (!files[i].valid)
			continue;
		theirs = json_load_file(out, 0, NULL);
		cr_assert(theirs, "%s: kubectl printed no JSON",
			  files[i].name);
		same(ours, theirs, "", "current-context", files[i].name);
		same_list(ours, theirs, "clusters", "cluster", cluster,
			  files[i].name);
		same_list(ours, theirs, "users", "user", user, files[i].name);
		same_list(ours, theirs, "contexts", "context", context,
			  files[i].name);
		json_decref(ours);
		json_decref(theirs);
	}
}
