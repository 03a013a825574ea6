/*
 * tests/kube/test_config.c: kubeconfigs as kubectl and gcloud write them
 * (contexts, data fields and files, tokens, exec plugins, $KUBECONFIG
 * lists merged as kubectl merges them, JSON), YAML's corners, and files
 * that must be refused with a message that says where and why.
 */
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[256];

static void setup(void)
{
	kubeconfig_scratch(dir, sizeof(dir));
}

static void teardown(void)
{
	scratch_rm(dir);
}

TestSuite(kubeconfig, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(yaml, .timeout = 30);

/* As `gcloud container clusters get-credentials` writes it (installHint
 * folded over two lines), plus a second context by hand. */
static const char gcloud_config[] =
	"apiVersion: v1\n"
	"clusters:\n"
	"- cluster:\n"
	"    certificate-authority-data: " CA_B64 "\n"
	"    server: https://34.1.2.3\n"
	"  name: gke_proj_us-central2-b_tpu\n"
	"- cluster:\n"
	"    server: http://127.0.0.1:8001/\n"
	"    insecure-skip-tls-verify: true\n"
	"  name: local\n"
	"contexts:\n"
	"- context:\n"
	"    cluster: gke_proj_us-central2-b_tpu\n"
	"    user: gke_proj_us-central2-b_tpu\n"
	"  name: gke_proj_us-central2-b_tpu\n"
	"- context:\n"
	"    cluster: local   # a comment\n"
	"    namespace: team-a\n"
	"    user: static\n"
	"  name: 'local'\n"
	"current-context: gke_proj_us-central2-b_tpu\n"
	"kind: Config\n"
	"preferences: {}\n"
	"users:\n"
	"- name: gke_proj_us-central2-b_tpu\n"
	"  user:\n"
	"    exec:\n"
	"      apiVersion: client.authentication.k8s.io/v1beta1\n"
	"      args: null\n"
	"      command: gke-gcloud-auth-plugin\n"
	"      env: null\n"
	"      installHint: Install gke-gcloud-auth-plugin for use with "
	"kubectl by following\n"
	"        https://cloud.google.com/kubernetes-engine/docs/how-to/"
	"cluster-access-for-kubectl#install_plugin\n"
	"      interactiveMode: IfAvailable\n"
	"      provideClusterInfo: true\n"
	"- name: static\n"
	"  user:\n"
	"    token: \"abc#def\"\n";

static int load(const char *text, const char *context,
		struct kube_config *c, struct err *e)
{
	return kubeconfig_load(dir, text, context, c, e);
}

static void load_fails(const char *text, const char *want)
{
	kubeconfig_refused(dir, text, want);
}

Test(kubeconfig, current_context_with_exec_plugin)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(load(gcloud_config, NULL, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://34.1.2.3");
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert_str_eq(c.context, "gke_proj_us-central2-b_tpu");
	cr_assert_null(c.namespace);
	cr_assert_null(c.token);
	cr_assert_eq(c.exec_argv.n, 1);
	cr_assert_str_eq(c.exec_argv.v[0], "gke-gcloud-auth-plugin");
	cr_assert_str_eq(c.exec_api_version,
			 "client.authentication.k8s.io/v1beta1");
	cr_assert(c.exec_cluster_info);
	cr_assert(strstr(c.exec_install_hint, "following https://"));
	cr_assert(!c.insecure);
	cr_assert(strstr(c.origin, "user \"gke_proj_us-central2-b_tpu\""));
	kube_config_release(&c);
}

Test(kubeconfig, named_context)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(load(gcloud_config, "local", &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "http://127.0.0.1:8001");
	cr_assert(c.insecure);
	cr_assert_null(c.ca_pem);
	cr_assert_str_eq(c.namespace, "team-a");
	cr_assert_str_eq(c.token, "abc#def");
	cr_assert_eq(c.exec_argv.n, 0);
	kube_config_release(&c);
}

Test(kubeconfig, unknown_context_names_the_known_ones)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(load(gcloud_config, "nope", &c, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "context \"nope\" (--context) is not in"),
		  "%s", e.msg);
	cr_assert(strstr(e.msg, "gke_proj_us-central2-b_tpu, local"), "%s",
		  e.msg);
}

Test(kubeconfig, files_relative_to_the_kubeconfig)
{
	struct kube_config c;
	struct err e;
	char sub[300];

	snprintf(sub, sizeof(sub), "%s/certs", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	scratch_write(dir, "certs/ca.crt", CA_TEXT, false);
	scratch_write(dir, "certs/me.crt", "-----BEGIN CERTIFICATE-----\nme\n",
		      false);
	scratch_write(dir, "certs/me.key", "-----BEGIN EC PRIVATE KEY-----\n",
		      false);
	scratch_write(dir, "certs/token", "file-token\n", false);
	cr_assert_eq(load("clusters:\n"
			  "- name: c\n"
			  "  cluster:\n"
			  "    server: https://k.example:6443\n"
			  "    certificate-authority: certs/ca.crt\n"
			  "users:\n"
			  "- name: u\n"
			  "  user:\n"
			  "    client-certificate: certs/me.crt\n"
			  "    client-key: certs/me.key\n"
			  "    tokenFile: certs/token\n"
			  "contexts:\n"
			  "- name: x\n"
			  "  context: {\"cluster\": \"c\", \"user\": \"u\"}\n"
			  "current-context: x\n", NULL, &c, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert(strstr(c.cert_pem, "\nme\n"));
	cr_assert(strstr(c.key_pem, "PRIVATE KEY"));
	cr_assert_str_eq(c.token, "file-token");
	kube_config_release(&c);
}

Test(kubeconfig, data_wins_over_file_and_token_over_exec)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(load("clusters:\n"
			  "- name: c\n"
			  "  cluster:\n"
			  "    server: https://k\n"
			  "    certificate-authority: /does/not/exist\n"
			  "    certificate-authority-data: " CA_B64 "\n"
			  "users:\n"
			  "- name: u\n"
			  "  user:\n"
			  "    token: t0\n"
			  "    exec:\n"
			  "      apiVersion: client.authentication.k8s.io/v1\n"
			  "      command: never-run\n"
			  "      interactiveMode: Never\n"
			  "contexts:\n"
			  "- name: x\n"
			  "  context:\n"
			  "    cluster: c\n"
			  "    user: u\n"
			  "current-context: x\n", NULL, &c, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert_str_eq(c.token, "t0");
	cr_assert_eq(c.exec_argv.n, 0);
	kube_config_release(&c);
}

Test(kubeconfig, exec_args_env_and_relative_command)
{
	struct kube_config c;
	struct err e;
	char want[300];

	cr_assert_eq(load("clusters: [{\"name\": \"c\", \"cluster\": "
			  "{\"server\": \"https://k\"}}]\n"
			  "users:\n"
			  "  - name: u\n"
			  "    user:\n"
			  "      exec:\n"
			  "        apiVersion: "
			  "\"client.authentication.k8s.io/v1beta1\"\n"
			  "        command: ./bin/plugin\n"
			  "        args:\n"
			  "          - --use_application_default_credentials\n"
			  "          - 'it''s'\n"
			  "        env:\n"
			  "          - name: FOO\n"
			  "            value: \"bar\\tbaz\"\n"
			  "contexts:\n"
			  "  - name: x\n"
			  "    context:\n"
			  "      cluster: c\n"
			  "      user: u\n"
			  "current-context: x\n", NULL, &c, &e), 0, "%s",
		     e.msg);
	snprintf(want, sizeof(want), "%s/./bin/plugin", dir);
	cr_assert_eq(c.exec_argv.n, 3);
	cr_assert_str_eq(c.exec_argv.v[0], want);
	cr_assert_str_eq(c.exec_argv.v[1],
			 "--use_application_default_credentials");
	cr_assert_str_eq(c.exec_argv.v[2], "it's");
	cr_assert_eq(c.exec_env.n, 1);
	cr_assert_str_eq(c.exec_env.v[0], "FOO=bar\tbaz");
	cr_assert(!c.exec_cluster_info);
	kube_config_release(&c);
}

static const char minimal[] =
	"clusters:\n- name: c\n  cluster:\n    server: https://%s\n"
	"users:\n- name: u\n  user:\n    token: %s\n"
	"contexts:\n- name: %s\n  context:\n    cluster: c\n    user: u\n"
	"%s";

static const char *minimal_config(const char *server, const char *token,
				  const char *ctx, const char *current)
{
	static char text[1024];
	char cur[100] = "";

	if (current)
		snprintf(cur, sizeof(cur), "current-context: %s\n", current);
	snprintf(text, sizeof(text), minimal, server, token, ctx, cur);
	return text;
}

Test(kubeconfig, kubeconfig_list_merges_first_wins)
{
	struct kube_config c;
	struct err e;
	char list[1200], a[300], b[300];

	snprintf(a, sizeof(a), "%s",
		 scratch_write(dir, "a", minimal_config("a", "ta", "ctx-a",
							NULL), false));
	snprintf(b, sizeof(b), "%s",
		 scratch_write(dir, "b", minimal_config("b", "tb", "ctx-b",
							"ctx-b"), false));
	snprintf(list, sizeof(list), "%s/missing:%s::%s", dir, a, b);
	setenv("KUBECONFIG", list, 1);
	err_init(&e);
	/* current-context from b (a sets none); cluster "c" and user "u"
	 * from a, the first file that has them. */
	cr_assert_eq(kube_config_load(NULL, NULL, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.context, "ctx-b");
	cr_assert_str_eq(c.server, "https://a");
	cr_assert_str_eq(c.token, "ta");
	kube_config_release(&c);
}

Test(kubeconfig, home_default_and_missing)
{
	struct kube_config c;
	struct err e;
	char kd[300];

	err_init(&e);
	cr_assert_eq(kube_config_load(NULL, NULL, &c, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "no kubeconfig"), "%s", e.msg);
	cr_assert(strstr(e.msg, "get-credentials"), "%s", e.msg);
	snprintf(kd, sizeof(kd), "%s/.kube", dir);
	cr_assert_eq(mkdir(kd, 0700), 0);
	scratch_write(dir, ".kube/config", minimal_config("h", "th", "h", "h"),
		      false);
	cr_assert_eq(kube_config_load(NULL, NULL, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://h");
	kube_config_release(&c);
	setenv("KUBECONFIG", "/nonexistent/1:/nonexistent/2", 1);
	cr_assert_eq(kube_config_load(NULL, NULL, &c, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "no file of KUBECONFIG"), "%s", e.msg);
}

Test(kubeconfig, json_kubeconfig)
{
	struct kube_config c;
	struct err e;

	cr_assert_eq(load("{\"apiVersion\": \"v1\", \"kind\": \"Config\",\n"
			  " \"clusters\": [{\"name\": \"c\", \"cluster\": "
			  "{\"server\": \"https://j\"}}],\n"
			  " \"users\": [{\"name\": \"u\", \"user\": "
			  "{\"token\": \"tj\"}}],\n"
			  " \"contexts\": [{\"name\": \"x\", \"context\": "
			  "{\"cluster\": \"c\", \"user\": \"u\", "
			  "\"namespace\": \"ns\"}}],\n"
			  " \"current-context\": \"x\"}\n", NULL, &c, &e), 0,
		     "%s", e.msg);
	cr_assert_str_eq(c.server, "https://j");
	cr_assert_str_eq(c.token, "tj");
	cr_assert_str_eq(c.namespace, "ns");
	kube_config_release(&c);
}

Test(kubeconfig, refused_with_reasons)
{
	load_fails("clusters:\n\t- name: c\n", "line 2: a tab");
	load_fails("a: 1\nb: 2\na: 3\n", "line 3: the key \"a\" appears "
		   "twice");
	load_fails("a: \"open\n", "line 1: a quoted value is not closed");
	load_fails("a:\n    b: 1\n  c: 2\n", "line 3: unexpected "
		   "indentation");
	load_fails("just text\n", "not a mapping");
	load_fails("", "the document is empty");
	load_fails("{\"a\": 1", "did not find expected ',' or '}'");
	load_fails("a: b: c\n", "line 1: a value holds \": \"");
	load_fails("? [a]\n: b\n", "complex keys");
	load_fails("current-context: x\ncontexts:\n- name: x\n  context:\n"
		   "    user: u\n", "context \"x\": cluster is missing");
	load_fails("current-context: x\n", "context \"x\" (current-context) "
		   "is not in");
	load_fails("contexts: []\n", "has no current-context");
}

static const char *with_user(const char *user_block)
{
	static char text[2048];

	snprintf(text, sizeof(text),
		 "clusters:\n- name: c\n  cluster:\n    server: https://k\n"
		 "users:\n- name: u\n  user:\n%s"
		 "contexts:\n- name: x\n  context: {cluster: c}\n", user_block);
	return text;
}

Test(kubeconfig, refused_fields)
{
	load_fails("clusters:\n- name: c\n  cluster:\n    server: ftp://k\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n", "server is not an http(s):// URL");
	load_fails("clusters:\n- name: c\n  cluster:\n    server: https://k\n"
		   "    certificate-authority-data: " CA_B64 "\n"
		   "    insecure-skip-tls-verify: yes\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n", "insecure-skip-tls-verify is true "
		   "together with a certificate authority");
	load_fails("clusters:\n- name: c\n  cluster:\n    server: https://k\n"
		   "    certificate-authority-data: '!!notbase64'\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n",
		   "certificate-authority-data is not base64");
	load_fails("clusters:\n- name: c\n  cluster:\n    server: https://k\n"
		   "    certificate-authority-data: aGVsbG8=\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n",
		   "certificate-authority-data is not PEM");
	load_fails("clusters:\n- name: c\n  cluster:\n    server: https://k\n"
		   "    proxy-url: http://proxy:3128\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n", "proxy-url is set");
	load_fails("clusters:\n- name: c\n  cluster:\n    server: 443\n"
		   "contexts:\n- name: x\n  context:\n    cluster: c\n"
		   "current-context: x\n", "server is not a string");
}

static void user_fails(const char *user_block, const char *want)
{
	struct kube_config c;
	struct err e;
	char text[2100];

	snprintf(text, sizeof(text), "%s",
		 with_user(user_block));
	/* Every user test names the user through the context. */
	snprintf(text + strlen(text), sizeof(text) - strlen(text),
		 "current-context: x\n");
	*strstr(text, "context: {cluster: c}") = '\0';
	snprintf(text + strlen(text), sizeof(text) - strlen(text),
		 "context: {\"cluster\": \"c\", \"user\": \"u\"}\n"
		 "current-context: x\n");
	cr_assert_eq(load(text, NULL, &c, &e), KUBE_ECONFIG, "accepted %s",
		     text);
	cr_assert(strstr(e.msg, want), "\"%s\" lacks \"%s\"", e.msg, want);
}

Test(kubeconfig, refused_users)
{
	user_fails("    auth-provider:\n      name: gcp\n",
		   "auth-provider is set");
	user_fails("    username: a\n    password: b\n", "username is set");
	user_fails("    exec:\n      apiVersion: "
		   "client.authentication.k8s.io/v1alpha1\n"
		   "      command: x\n", "v1alpha1 is no longer supported");
	user_fails("    exec:\n      apiVersion: "
		   "client.authentication.k8s.io/v1\n      command: x\n",
		   "interactiveMode is required");
	user_fails("    exec:\n      apiVersion: "
		   "client.authentication.k8s.io/v1\n      command: x\n"
		   "      interactiveMode: Always\n", "without a terminal");
	user_fails("    exec:\n      apiVersion: "
		   "client.authentication.k8s.io/v1beta1\n",
		   "exec.command is missing");
	user_fails("    client-certificate-data: " CA_B64 "\n",
		   "client-key is missing");
	user_fails("    tokenFile: /nonexistent/token\n",
		   "user \"u\": tokenFile: /nonexistent/token");
}

Test(kubeconfig, from_endpoint)
{
	struct kube_config c;
	struct err e;

	err_init(&e);
	cr_assert_eq(kube_config_from_endpoint("34.1.2.3", CA_B64, "ya29",
					       &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "https://34.1.2.3");
	cr_assert_str_eq(c.ca_pem, CA_TEXT);
	cr_assert_str_eq(c.token, "ya29");
	kube_config_release(&c);
	cr_assert_eq(kube_config_from_endpoint("http://127.0.0.1:9/", NULL,
					       "t", &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.server, "http://127.0.0.1:9");
	cr_assert_null(c.ca_pem);
	kube_config_release(&c);
	cr_assert_eq(kube_config_from_endpoint("1.2.3.4", "aGVsbG8=", "t", &c,
					       &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "not base64 of a PEM"), "%s", e.msg);
	cr_assert_eq(kube_config_from_endpoint("", NULL, "t", &c, &e),
		     KUBE_ECONFIG);
}

/* ---- YAML itself, through the loader's parser ---- */

#include "kube/yaml.h"

static json_t *yaml(const char *text)
{
	struct err e;
	json_t *j;

	err_init(&e);
	cr_assert_eq(yaml_parse(text, strlen(text), &j, &e), 0, "%s: %s",
		     e.msg, text);
	return j;
}

static void yaml_is(const char *text, const char *want_json)
{
	json_t *got = yaml(text), *want = json_loads(want_json, 0, NULL);
	char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert(want, "bad expectation %s", want_json);
	cr_assert(json_equal(got, want), "%s\ngot  %s\nwant %s", text, g,
		  want_json);
	free(g);
	json_decref(got);
	json_decref(want);
}

Test(yaml, scalars)
{
	yaml_is("a: 1\nb: -2.5\nc: 0x1f\nd: true\ne: yes\nf: Off\ng: ~\n"
		"h:\ni: null\nj: 1.2.3\nk: https://x:6443/p?q=1\n",
		"{\"a\":1,\"b\":-2.5,\"c\":31,\"d\":true,\"e\":true,"
		"\"f\":false,\"g\":null,\"h\":null,\"i\":null,\"j\":\"1.2.3\","
		"\"k\":\"https://x:6443/p?q=1\"}");
	yaml_is("a: 'x # y'  # c\nb: \"\\u00e9\\x41\\\"\\\\\"\nc: x#y\n"
		"\"d e\": '' \n'f': \"\"\n",
		"{\"a\":\"x # y\",\"b\":\"\\u00e9A\\\"\\\\\",\"c\":\"x#y\","
		"\"d e\":\"\",\"f\":\"\"}");
	yaml_is("\xef\xbb\xbf---\n# top\na: b   \n...\n", "{\"a\":\"b\"}");
}

Test(yaml, collections)
{
	yaml_is("l:\n- a\n- - b\n  - c\n-\n  k: v\n- k2: v2\n  k3: v3\n"
		"m:\n  n:\n    - 1\n",
		"{\"l\":[\"a\",[\"b\",\"c\"],{\"k\":\"v\"},"
		"{\"k2\":\"v2\",\"k3\":\"v3\"}],\"m\":{\"n\":[1]}}");
	yaml_is("a: []\nb: {}\nc: [\"x\", 1, {\"y\": null}]  # flow\n",
		"{\"a\":[],\"b\":{},\"c\":[\"x\",1,{\"y\":null}]}");
	yaml_is("- a\n-   b: 1\n    c: 2\n", "[\"a\",{\"b\":1,\"c\":2}]");
}

Test(yaml, folded_lines)
{
	yaml_is("a: one\n  two\n\n   three # c\nb: x\n",
		"{\"a\":\"one two\\nthree\",\"b\":\"x\"}");
	yaml_is("- one\n  two\n- \"q1\n  q2 \\\n  q3\"\n- 'a\n\n  b'\n",
		"[\"one two\",\"q1 q2 q3\",\"a\\nb\"]");
	yaml_is("a: one\n  - two\n", "{\"a\":\"one - two\"}");
}

Test(yaml, folded_lines_refused)
{
	struct {
		const char *text, *want;
	} cases[] = {
		{ "a: one\n# c\n  two\n", "line 3: unexpected indentation" },
		{ "a: one # c\n  two\n", "line 2: unexpected indentation" },
		{ "a: one\n  b: two\n", "line 2: a value holds" },
		{ "a: \"one\nb: two\n", "line 1: a quoted value is not "
		  "closed" },
		{ "\"a\n  b\": 1\n", "line 2: a value holds" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err e;
		json_t *j;

		err_init(&e);
		cr_assert_eq(yaml_parse(cases[i].text, strlen(cases[i].text),
					&j, &e), KUBE_ECONFIG, "accepted %s",
			     cases[i].text);
		cr_assert(strstr(e.msg, cases[i].want), "\"%s\" lacks \"%s\"",
			  e.msg, cases[i].want);
	}
}

Test(yaml, deep_nesting_is_refused)
{
	struct buf b;
	struct err e;
	json_t *j;

	buf_init(&b);
	for (int i = 0; i < 100; i++)
		buf_appendf(&b, "%*sk:\n", i, "");
	err_init(&e);
	cr_assert_eq(yaml_parse(b.data, b.len, &j, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "nested too deeply"), "%s", e.msg);
	buf_release(&b);
}

/*
 * Against a real YAML parser (PyYAML, YAML 1.1 like kubectl's) on a
 * kubeconfig that kubectl itself wrote (folded long values, quoted keys
 * and numbers) and on the corners above, flow style, anchors, tags and
 * block scalars: the same document, value for value. Skipped where
 * kubectl or PyYAML is missing. kubectl starts slowly on a loaded machine:
 * its timeout is a bound, not a pace.
 */
Test(kubeconfig, agrees_with_pyyaml_on_what_kubectl_writes, .timeout = 300)
{
	static const char *const docs[] = {
		"a: 1\nb: -2.5\nc: 0x1f\nd: true\ne: yes\nf: Off\ng: ~\nh:\n"
		"j: 1.2.3\nk: https://x:6443/p?q=1\n",
		"a: 'x # y'  # c\nb: \"\\u00e9\\x41\\\"\\\\\"\nc: x#y\n"
		"\"d e\": '' \n",
		"l:\n- a\n- - b\n  - c\n-\n  k: v\n- k2: v2\n  k3: v3\n",
		"a: one\n  two\n\n   three # c\nb: x\n",
		"- \"q1\n  q2 \\\n  q3\"\n- 'a\n\n  b'\n",
		"f: [a, {b: c}, 'd', \"e\"]\ng: {h: 0123, i: \"0123\", "
		"j: !!str 12, k: !!int '7'}\n",
		"a: &a {k: v, l: [1, 2]}\nb: *a\nc:\n  <<: *a\n  k: w\n"
		"d: [&s x, *s]\n",
		"x: |\n  l1\n   l2\n\ny: >-\n  f1\n  f2\n\n  f3\nz: |+\n"
		"  k\n\nw: \"\\t\\x41\\u00e9 \\\n  z\"\n",
	};
	char cmd[2048], cfg[300], ref[300];
	json_t *want, *got;
	struct err e;
	char *text;

	if (system("command -v kubectl >/dev/null 2>&1 && "
		   "python3 -c 'import yaml' 2>/dev/null") != 0)
		cr_skip_test("kubectl or PyYAML is not installed");
	snprintf(cfg, sizeof(cfg), "%s/kubectl-config", dir);
	snprintf(ref, sizeof(ref), "%s/ref.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; export KUBECONFIG='%s'; cd '%s'; exec >/dev/null; "
		 "printf -- '-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END "
		 "CERTIFICATE-----\\n' > ca.crt; "
		 "kubectl config set-cluster c --server=https://34.1.2.3 "
		 "--certificate-authority=ca.crt --embed-certs=true; "
		 "kubectl config set-credentials u --exec-command=plugin "
		 "--exec-api-version=client.authentication.k8s.io/v1beta1 "
		 "--exec-arg='a long argument with spaces that the YAML writer "
		 "folds over lines because it is longer than eighty columns' "
		 "--exec-arg=\"it's # not a comment: no\" --exec-env=K=yes "
		 "--exec-env=N=0123 --exec-provide-cluster-info=true; "
		 "kubectl config set-credentials t --token=1234; "
		 "kubectl config set-context x --cluster=c --user=u "
		 "--namespace=team-a; kubectl config use-context x", cfg, dir);
	cr_assert_eq(system(cmd), 0, "kubectl config failed");
	for (size_t i = 0; i <= sizeof(docs) / sizeof(docs[0]); i++) {
		const char *doc = cfg;

		if (i < sizeof(docs) / sizeof(docs[0]))
			doc = scratch_write(dir, "doc.yaml", docs[i], false);
		snprintf(cmd, sizeof(cmd), "python3 -c 'import json, sys, yaml; "
			 "json.dump(yaml.safe_load(open(sys.argv[1])), "
			 "open(sys.argv[2], \"w\"))' '%s' '%s'", doc, ref);
		cr_assert_eq(system(cmd), 0);
		want = json_load_file(ref, 0, NULL);
		text = slurp(doc);
		err_init(&e);
		cr_assert_eq(yaml_parse(text, strlen(text), &got, &e), 0,
			     "%s: %s", e.msg, text);
		cr_assert(want && json_equal(got, want), "%s\nours   %s\nPyYAML "
			  "%s", text, json_dumps(got, JSON_SORT_KEYS),
			  json_dumps(want, JSON_SORT_KEYS));
		json_decref(got);
		json_decref(want);
		free(text);
	}
	{
		struct kube_config c;

		err_init(&e);
		cr_assert_eq(kube_config_load(cfg, NULL, &c, &e), 0, "%s",
			     e.msg);
		cr_assert_eq(c.exec_argv.n, 3);
		cr_assert_str_eq(c.exec_argv.v[2], "it's # not a comment: no");
		cr_assert_str_eq(c.namespace, "team-a");
		kube_config_release(&c);
	}
}
