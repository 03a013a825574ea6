/*
 * test_keygen.c: fanout_key_ensure makes an ed25519 key that OpenSSH's
 * ssh-keygen reads back to the same public key, keeps it private, reuses
 * it on the next call, and reports any existing key's public half.
 */
#include "ssh/fanout.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/keygen-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	cr_assert_eq(rm_rf(dir), 0);
}

TestSuite(keygen, .init = setup, .fini = teardown, .timeout = 60);

/* The first line of a command's output. */
static void first_line(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");

	cr_assert_not_null(p);
	out[0] = '\0';
	cr_assert_not_null(fgets(out, (int)len, p), "%s printed nothing", cmd);
	out[strcspn(out, "\n")] = '\0';
	cr_assert_eq(pclose(p), 0, "%s failed", cmd);
}

Test(keygen, makes_a_key_openssh_reads)
{
	char path[400], cmd[600], want[512];
	char *pub = NULL, *again = NULL;
	struct stat st;
	struct err e;

	snprintf(path, sizeof(path), "%s/a/b/id_ed25519", dir);
	err_init(&e);
	cr_assert_eq(fanout_key_ensure(path, "me@here", &pub, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(strncmp(pub, "ssh-ed25519 AAAA", 16), 0, "%s", pub);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	snprintf(cmd, sizeof(cmd), "ssh-keygen -y -f '%s'", path);
	first_line(cmd, want, sizeof(want));
	cr_assert_eq(strncmp(pub, want, strlen(want)), 0, "%s vs %s", pub,
		     want);
	snprintf(cmd, sizeof(cmd), "cat '%s.pub'", path);
	first_line(cmd, want, sizeof(want));
	cr_assert_str_eq(want, pub);
	cr_assert_eq(fanout_key_ensure(path, "ignored", &again, &e), 0);
	cr_assert_str_eq(again, pub, "the key is made once");
	free(pub);
	free(again);
}

Test(keygen, reports_an_existing_key)
{
	char path[400], cmd[600], want[1024];
	char *pub = NULL;
	struct err e;

	snprintf(path, sizeof(path), "%s/ecdsa", dir);
	snprintf(cmd, sizeof(cmd),
		 "ssh-keygen -q -t ecdsa -N '' -C hers -f '%s'", path);
	cr_assert_eq(system(cmd), 0);
	err_init(&e);
	cr_assert_eq(fanout_key_ensure(path, "x", &pub, &e), 0, "%s", e.msg);
	snprintf(cmd, sizeof(cmd), "cat '%s.pub'", path);
	first_line(cmd, want, sizeof(want));
	cr_assert_str_eq(pub, want);
	free(pub);
}

Test(keygen, unreadable_key_is_an_error)
{
	char path[400];
	char *pub = NULL;
	struct err e;
	FILE *f;

	snprintf(path, sizeof(path), "%s/garbage", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("not a key\n", f);
	fclose(f);
	err_init(&e);
	cr_assert_eq(fanout_key_ensure(path, "x", &pub, &e), SSH_EKEY);
	cr_assert_null(pub);
	cr_assert(strstr(e.msg, path), "%s", e.msg);
}

/* Runs racing to make the same key: one makes it, whole (written aside,
 * synced, then linked into place), and every run uses that one key; no
 * temporary file is left. */
Test(keygen, racing_runs_share_one_whole_key)
{
	enum { N = 6 };
	char path[400], pubs[N][512], names[512] = "";
	int fd[N][2];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/id_ed25519", dir);
	for (int i = 0; i < N; i++) {
		pid_t pid;

		cr_assert_eq(pipe(fd[i]), 0);
		pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0) {
			char *pub = NULL;
			struct err e;

			err_init(&e);
			if (fanout_key_ensure(path, "racer", &pub, &e))
				_exit(1);
			if (write(fd[i][1], pub, strlen(pub)) < 0)
				_exit(2);
			_exit(0);
		}
		close(fd[i][1]);
	}
	for (int i = 0; i < N; i++) {
		ssize_t n = read(fd[i][0], pubs[i], sizeof(pubs[i]) - 1);
		int st;

		cr_assert(n > 0, "racer %d printed no key", i);
		pubs[i][n] = '\0';
		close(fd[i][0]);
		cr_assert(wait(&st) > 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		cr_assert_str_eq(pubs[i], pubs[0]);
	}
	d = opendir(dir);
	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || strstr(de->d_name, ".tmp."))
			snprintf(names + strlen(names),
				 sizeof(names) - strlen(names), " %s",
				 de->d_name);
	closedir(d);
	cr_assert(!strcmp(names, " id_ed25519 id_ed25519.pub") ||
		  !strcmp(names, " id_ed25519.pub id_ed25519"), "%s", names);
}
