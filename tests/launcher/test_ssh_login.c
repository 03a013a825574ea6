/*
 * How slicectl logs in: key types, ssh-agent, and what it says about RSA,
 * which libssh2 1.10 can only sign with SHA-1 (ssh-rsa).
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <libssh2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct test_sshd sshd;
static char tmp[HARNESS_PATH];
static char hosts[HARNESS_PATH + 32];
static char kh[HARNESS_PATH + 32];

static void start(const char *key_type, const char *extra)
{
	struct sshd_options o = { .extra_config = extra,
				  .user_key_type = key_type };

	cr_assert_eq(sshd_start(&sshd, &o), 0, "sshd did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "auth"), 0);
	snprintf(hosts, sizeof(hosts), "%s/hosts", tmp);
	snprintf(kh, sizeof(kh), "%s/known_hosts", tmp);
	cr_assert_eq(sshd_write_hosts(&sshd, hosts, 1, 3), 0);
	cr_assert_eq(sshd_write_known_hosts(&sshd, kh, 1, 3), 0);
}

static void stop(void)
{
	sshd_stop(&sshd);
	rm_rf(tmp);
}

static int run_with_key(struct run_result *r, const char *key,
			const char *const *env)
{
	const char *with_key[] = { "run", "--identity", key, "--known-hosts",
				   kh, "--hosts", hosts, "--", "echo ok",
				   NULL };
	const char *without[] = { "run", "--known-hosts", kh, "--hosts", hosts,
				  "--", "echo ok", NULL };

	cr_assert_eq(run_slicectl(r, key ? with_key : without, env), 0);
	return r->status;
}

TestSuite(auth, .fini = stop, .timeout = 120);

Test(auth, ecdsa_key)
{
	struct run_result r;

	start("ecdsa", NULL);
	cr_assert_eq(run_with_key(&r, sshd.key, NULL), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok\n"), 3);
	run_result_release(&r);
}

Test(auth, rsa_key_refused_by_modern_sshd_with_advice)
{
	struct run_result r;

	start("rsa", NULL);
	cr_assert_eq(run_with_key(&r, sshd.key, NULL), 255);
	if (LIBSSH2_VERSION_NUM < 0x010b00) {
		cr_assert(strstr(r.err, "prefer an ed25519 key"), "%s", r.err);
		cr_assert(strstr(r.err, "use an ed25519 key (ssh-keygen -t "
					"ed25519)"), "%s", r.err);
	}
	run_result_release(&r);
}

Test(auth, rsa_key_signs_when_the_server_accepts_it)
{
	struct run_result r;

	start("rsa", "PubkeyAcceptedAlgorithms +ssh-rsa\n");
	cr_assert_eq(run_with_key(&r, sshd.key, NULL), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok\n"), 3);
	run_result_release(&r);
}

Test(auth, ssh_agent_without_identity)
{
	struct run_result r;
	char sock[HARNESS_PATH + 16], env_sock[HARNESS_PATH + 32];
	char env_home[HARNESS_PATH + 32];
	pid_t agent;

	start("ed25519", NULL);
	snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
	agent = fork();
	cr_assert_geq(agent, 0);
	if (agent == 0) {
		execlp("ssh-agent", "ssh-agent", "-D", "-a", sock, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && access(sock, F_OK); i++)
		usleep(50 * 1000);
	cr_assert_eq(sh("SSH_AUTH_SOCK=%s ssh-add -q %s 2>/dev/null", sock,
			sshd.key), 0);
	snprintf(env_sock, sizeof(env_sock), "SSH_AUTH_SOCK=%s", sock);
	/* An empty HOME: no ~/.ssh/id_* key can stand in for the agent. */
	snprintf(env_home, sizeof(env_home), "HOME=%s", tmp);
	const char *env[] = { env_sock, env_home, NULL };

	cr_assert_eq(run_with_key(&r, NULL, env), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, ": ok\n"), 3);
	run_result_release(&r);
	kill(agent, SIGTERM);
	waitpid(agent, NULL, 0);

	/* No agent and no key: say how to get one. */
	const char *bare[] = { env_home, "SSH_AUTH_SOCK=", NULL };
	cr_assert_eq(run_with_key(&r, NULL, bare), 255);
	cr_assert(strstr(r.err, "no SSH key to log in with"), "%s", r.err);
	run_result_release(&r);
}
