/*
 * tests/kube/test_exec.c: a kubeconfig whose user is an exec credential
 * plugin (a small sh script printing an ExecCredential): what it is run
 * with (KUBERNETES_EXEC_INFO, the kubeconfig's env), its token on the
 * wire, a rerun when the token expires and after a 401, and the errors of
 * a missing, failing or confused plugin.
 */
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static struct kstub stub;

static void setup(void)
{
	memset(&stub, 0, sizeof(stub));
	scratch_make(stub.dir, sizeof(stub.dir));
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("KUBECONFIG");
}

static void teardown(void)
{
	kstub_stop(&stub);
}

TestSuite(exec, .init = setup, .fini = teardown, .timeout = 60);

#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg=="

/* Counts its runs, keeps what it was given, prints token t-RUN that
 * expires at $EXP (when set). */
static const char plugin[] =
	"#!/bin/sh\n"
	"d=$(dirname \"$0\")\n"
	"n=$(($(cat \"$d/count\" 2>/dev/null || echo 0) + 1))\n"
	"echo $n > \"$d/count\"\n"
	"printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/info\"\n"
	"printf '%s' \"$FOO\" > \"$d/foo\"\n"
	"printf '{\"apiVersion\": \"client.authentication.k8s.io/v1beta1\", "
	"\"kind\": \"ExecCredential\", \"status\": {\"token\": \"t-%s\"%s}}' "
	"\"$n\" \"${EXP:+, \\\"expirationTimestamp\\\": \\\"$EXP\\\"}\"\n";

/* A kubeconfig for server whose user runs ./plugin.sh (relative to the
 * kubeconfig) with FOO=bar and EXP=exp. */
static void load(const char *server, const char *command, const char *exp,
		 struct kube_config *c)
{
	char text[2048], path[300];
	struct err e;

	scratch_write(stub.dir, "plugin.sh", plugin, true);
	snprintf(text, sizeof(text),
		 "apiVersion: v1\n"
		 "clusters:\n"
		 "- cluster:\n"
		 "    server: %s\n"
		 "%s"
		 "  name: c\n"
		 "contexts:\n"
		 "- context:\n"
		 "    cluster: c\n"
		 "    user: u\n"
		 "  name: x\n"
		 "current-context: x\n"
		 "users:\n"
		 "- name: u\n"
		 "  user:\n"
		 "    exec:\n"
		 "      apiVersion: client.authentication.k8s.io/v1beta1\n"
		 "      command: %s\n"
		 "      env:\n"
		 "      - name: FOO\n"
		 "        value: bar\n"
		 "      - name: EXP\n"
		 "        value: '%s'\n"
		 "      installHint: Install the plugin with `apt-get install "
		 "my-plugin`\n"
		 "      provideClusterInfo: true\n", server,
		 strncmp(server, "https", 5) == 0
			 ? "    certificate-authority-data: " CA_B64 "\n" : "",
		 command, exp);
	snprintf(path, sizeof(path), "%s",
		 scratch_write(stub.dir, "kubeconfig", text, false));
	err_init(&e);
	cr_assert_eq(kube_config_load(path, NULL, c, &e), 0, "%s", e.msg);
}

static char *scratch_read(const char *name)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/%s", stub.dir, name);
	return slurp(path);
}

static int runs(void)
{
	char *n = scratch_read("count");
	int v = n ? atoi(n) : 0;

	free(n);
	return v;
}

Test(exec, runs_with_exec_info_and_env)
{
	struct kube_config c;
	struct err e;
	char *info, *foo;
	json_t *j;

	load("https://10.0.0.1", "./plugin.sh", "2030-01-02T03:04:05Z", &c);
	err_init(&e);
	cr_assert_eq(kube_exec_credential(&c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.token, "t-1");
	cr_assert_eq(c.token_expiry, rfc3339_parse("2030-01-02T03:04:05Z"));
	info = scratch_read("info");
	foo = scratch_read("foo");
	cr_assert_str_eq(foo, "bar");
	j = json_loads(info, 0, NULL);
	cr_assert(j, "KUBERNETES_EXEC_INFO is not JSON: %s", info);
	cr_assert_str_eq(json_string_value(json_object_get(j, "kind")),
			 "ExecCredential");
	cr_assert_str_eq(json_string_value(json_object_get(j, "apiVersion")),
			 "client.authentication.k8s.io/v1beta1");
	cr_assert(json_is_false(json_object_get(json_object_get(j, "spec"),
						"interactive")));
	{
		json_t *cl = json_object_get(json_object_get(j, "spec"),
					     "cluster");

		cr_assert_str_eq(json_string_value(json_object_get(
					 cl, "server")), "https://10.0.0.1");
		cr_assert_str_eq(json_string_value(json_object_get(
					 cl, "certificate-authority-data")),
				 CA_B64);
	}
	json_decref(j);
	free(info);
	free(foo);
	kube_config_release(&c);
}

/* Two GETs through the stub with c; the tokens they carried. */
static void two_gets(struct kube_config *c, const char *want0,
		     const char *want1)
{
	struct kube_client *k;
	struct err e;
	json_t *out = NULL, *all;

	err_init(&e);
	cr_assert_eq(kube_client_new(c, &k, &e), 0, "%s", e.msg);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(kube_get(k, "/api/v1/namespaces/default", &out,
				      &e), 0, "%s", e.msg);
		json_decref(out);
	}
	kube_client_free(k);
	all = kstub_requests(&stub);
	cr_assert_geq(json_array_size(all), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 json_array_get(all, 0), "headers"),
						 "authorization")), want0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 json_array_get(all, json_array_size(all) - 1),
				 "headers"), "authorization")), want1);
	json_decref(all);
}

Test(exec, token_is_reused_until_it_expires)
{
	struct kube_config c;

	kstub_start(&stub, "[{\"repeat\": true, \"body\": {}}]", false,
		    false);
	load(stub.url, "./plugin.sh", "2099-01-01T00:00:00Z", &c);
	two_gets(&c, "Bearer t-1", "Bearer t-1");
	cr_assert_eq(runs(), 1);
	kube_config_release(&c);
}

Test(exec, expired_token_reruns_the_plugin)
{
	struct kube_config c;

	kstub_start(&stub, "[{\"repeat\": true, \"body\": {}}]", false,
		    false);
	load(stub.url, "./plugin.sh", "2000-01-01T00:00:00Z", &c);
	two_gets(&c, "Bearer t-1", "Bearer t-2");
	cr_assert_eq(runs(), 2);
	kube_config_release(&c);
}

Test(exec, unauthorized_reruns_the_plugin_once)
{
	struct kube_config c;

	kstub_start(&stub, "[{\"status\": 401, \"body\": {\"kind\": "
		    "\"Status\", \"message\": \"Unauthorized\", \"code\": "
		    "401}}, {\"repeat\": true, \"body\": {}}]", false, false);
	load(stub.url, "./plugin.sh", "", &c);
	/* The first GET: 401 with t-1, again with t-2; the second GET keeps
	 * t-2 (no expiry given). */
	two_gets(&c, "Bearer t-1", "Bearer t-2");
	cr_assert_eq(runs(), 2);
	kube_config_release(&c);
}

Test(exec, missing_command_gives_the_install_hint)
{
	struct kube_config c;
	struct err e;

	load("https://10.0.0.1", "no-such-plugin-xyz", "", &c);
	err_init(&e);
	cr_assert_eq(kube_exec_credential(&c, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "the exec credential plugin "
			 "`no-such-plugin-xyz` of kubeconfig "), "%s", e.msg);
	cr_assert(strstr(e.msg, "is not installed (not found on PATH): "
			 "Install the plugin with `apt-get install "
			 "my-plugin`"), "%s", e.msg);
	kube_config_release(&c);
}

static void plugin_fails(const char *script, const char *want)
{
	struct kube_config c;
	struct err e;

	load("https://10.0.0.1", "./bad.sh", "", &c);
	scratch_write(stub.dir, "bad.sh", script, true);
	err_init(&e);
	cr_assert_eq(kube_exec_credential(&c, &e), KUBE_ECONFIG);
	cr_assert(strstr(e.msg, want), "\"%s\" lacks \"%s\"", e.msg, want);
	cr_assert_null(c.token);
	kube_config_release(&c);
}

Test(exec, plugin_errors)
{
	plugin_fails("#!/bin/sh\necho starting >&2\n"
		     "echo 'ERROR: gcloud crashed; run gcloud auth login' >&2\n"
		     "exit 1\n", "bad.sh failed (exit status 1): ERROR: "
		     "gcloud crashed; run gcloud auth login");
	plugin_fails("#!/bin/sh\necho not json\n", "printed no "
		     "ExecCredential JSON");
	plugin_fails("#!/bin/sh\necho '{\"kind\": \"ExecCredential\", "
		     "\"apiVersion\": \"client.authentication.k8s.io/v1\", "
		     "\"status\": {\"token\": \"x\"}}'\n", "answered with "
		     "apiVersion client.authentication.k8s.io/v1, but the "
		     "kubeconfig asks for client.authentication.k8s.io/"
		     "v1beta1");
	plugin_fails("#!/bin/sh\necho '{\"kind\": \"ExecCredential\", "
		     "\"apiVersion\": \"client.authentication.k8s.io/v1beta1\","
		     " \"status\": {}}'\n", "gave neither status.token");
	plugin_fails("#!/bin/sh\necho '{\"kind\": \"ExecCredential\", "
		     "\"apiVersion\": \"client.authentication.k8s.io/v1beta1\","
		     " \"status\": {\"token\": \"x\", \"expirationTimestamp\": "
		     "\"soon\"}}'\n", "\"soon\" is not an RFC 3339 time");
	plugin_fails("#!/bin/sh\nkill -9 $$\n", "failed (signal 9)");
}

Test(exec, hung_plugins_are_killed)
{
	uint64_t t0 = mono_ms();

	setenv("SLICECTL_KUBE_EXEC_SECONDS", "1", 1);
	plugin_fails("#!/bin/sh\necho 'waiting for a browser' >&2\n"
		     "exec sleep 30\n", "did not finish in 1 s (killed): "
		     "waiting for a browser");
	/* Output closed, process still there. */
	plugin_fails("#!/bin/sh\nexec >&- 2>&-\nexec sleep 30\n",
		     "did not finish in 1 s (killed)");
	cr_assert_lt(mono_ms() - t0, 10000);
	unsetenv("SLICECTL_KUBE_EXEC_SECONDS");
}

Test(exec, plugin_failure_reaches_the_request)
{
	struct kube_config c;
	struct kube_client *k;
	struct err e;
	json_t *out = NULL;

	kstub_start(&stub, "[{\"repeat\": true, \"body\": {}}]", false,
		    false);
	load(stub.url, "./bad.sh", "", &c);
	scratch_write(stub.dir, "bad.sh", "#!/bin/sh\necho nope >&2\nexit 2\n",
		      true);
	err_init(&e);
	cr_assert_eq(kube_client_new(&c, &k, &e), 0, "%s", e.msg);
	cr_assert_eq(kube_get(k, "/api/v1/namespaces/default", &out, &e),
		     KUBE_ECONFIG);
	cr_assert(strstr(e.msg, "failed (exit status 2): nope"), "%s", e.msg);
	kube_client_free(k);
	kube_config_release(&c);
	{
		json_t *all = kstub_requests(&stub);

		cr_assert_eq(json_array_size(all), 0);
		json_decref(all);
	}
}
