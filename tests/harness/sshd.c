/*
 * tests/harness/sshd.c: a real OpenSSH sshd for tests, prepared by
 * sshd-prepare.sh, listening on every loopback address, and the hosts and
 * known_hosts files that point slicectl at it. sshd never outlives the test
 * process that started it.
 */
#define _GNU_SOURCE /* unshare() and CLONE_NEWNET are Linux-only */

#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HARNESS_PREPARE_SCRIPT
#error "tests/harness/meson.build defines HARNESS_PREPARE_SCRIPT"
#endif

#define SSHD_PATH "/usr/sbin/sshd"
/* A bound for a loaded machine: a dead sshd is seen at once (its pid, a
 * refused or closed connection), a live one may be slow to answer. */
#define READY_TIMEOUT_MS 60000
#define STOP_GRACE_MS 3000
#define START_ATTEMPTS 3

static bool netns_done;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int loopback_up(void)
{
	struct ifreq ifr;
	int fd, rc = -1;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) == 0)
			rc = 0;
	}
	close(fd);
	return rc;
}

/*
 * As root, moves this process into a network namespace of its own: there
 * 0.0.0.0 is loopback only, every 127.x.y.z reaches sshd, and no port is
 * taken. Without CAP_SYS_ADMIN (some containers) the host's loopback is
 * used instead, which is only a weaker isolation, so that is no error.
 */
static int enter_private_netns(void)
{
	if (netns_done || geteuid() != 0)
		return 0;
	netns_done = true;
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "harness: unshare(CLONE_NEWNET): %s; sshd "
			"will use a free port on the host's loopback\n",
			strerror(errno));
		return 0;
	}
	if (loopback_up() < 0) {
		fprintf(stderr, "harness: cannot bring up lo in the private "
			"network namespace: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int free_port(unsigned *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	int fd, rc = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		*port = ntohs(sa.sin_port);
		rc = 0;
	} else {
		fprintf(stderr, "harness: cannot find a free port on "
			"127.0.0.1: %s\n", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* True once a connection to the port is answered with an SSH banner by
 * deadline. One connection waits for it: on a loaded machine sshd's
 * fork and re-exec may take seconds, and a probe that gave up sooner
 * would only start that cost again. */
static bool banner_seen(unsigned port, uint64_t deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[256];
	size_t len = 0;
	bool seen = false;
	int fd;

	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		goto out;
	while (!seen && len < sizeof buf - 1 && now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		seen = strstr(buf, "SSH-2.0-") != NULL;
	}
out:
	close(fd);
	return seen;
}

static void print_log(const struct test_sshd *s)
{
	char path[HARNESS_PATH + 16];
	char *log;

	snprintf(path, sizeof path, "%s/sshd.log", s->dir);
	log = read_file(path, NULL);
	fprintf(stderr, "harness: sshd.log:\n%s\n", log ? log : "(none)");
	free(log);
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static int path_in(char *out, const struct test_sshd *s, const char *name)
{
	if ((size_t)snprintf(out, HARNESS_PATH, "%s/%s", s->dir, name) >=
	    HARNESS_PATH) {
		fprintf(stderr, "harness: path %s/%s is too long\n", s->dir,
			name);
		return -1;
	}
	return 0;
}

static int prepare(struct test_sshd *s, const struct sshd_options *o)
{
	const char *type = o->user_key_type ? o->user_key_type : "ed25519";
	const char *argv[] = { "/bin/sh", HARNESS_PREPARE_SCRIPT, s->dir,
			       type, NULL };
	char port_env[32];
	char *extra_env = NULL;
	const char *env[3] = { port_env, NULL, NULL };
	char user_path[HARNESS_PATH];
	struct run_result r;
	char *user;
	int rc = -1;

	snprintf(port_env, sizeof port_env, "PORT=%u", s->port);
	if (o->extra_config) {
		extra_env = malloc(strlen(o->extra_config) + 16);
		if (!extra_env) {
			fprintf(stderr, "harness: out of memory\n");
			return -1;
		}
		sprintf(extra_env, "EXTRA_CONFIG=%s", o->extra_config);
		env[1] = extra_env;
	}
	if (run_program(&r, argv, env) < 0)
		goto out;
	if (r.status != 0) {
		fprintf(stderr, "harness: %s failed (status %d):\n%s%s",
			HARNESS_PREPARE_SCRIPT, r.status, r.out, r.err);
		run_result_release(&r);
		goto out;
	}
	run_result_release(&r);
	if (path_in(s->key, s, "user_key") < 0 ||
	    path_in(s->known_hosts, s, "known_hosts") < 0 ||
	    path_in(s->host_pub, s, "host_ed25519_key.pub") < 0 ||
	    path_in(s->shared, s, "shared") < 0 ||
	    path_in(user_path, s, "user") < 0)
		goto out;
	user = read_file(user_path, NULL);
	if (!user || !*user || strlen(user) >= sizeof s->user) {
		fprintf(stderr, "harness: %s does not name the login user\n",
			user_path);
		free(user);
		goto out;
	}
	user[strcspn(user, "\n")] = '\0';
	snprintf(s->user, sizeof s->user, "%s", user);
	free(user);
	rc = 0;
out:
	free(extra_env);
	return rc;
}

static pid_t spawn_sshd(const struct test_sshd *s)
{
	char config[HARNESS_PATH], log[HARNESS_PATH];
	const char *argv[] = { SSHD_PATH, "-D", "-e", "-f", config, NULL };
	pid_t parent = getpid();
	int log_fd, null_fd;
	pid_t pid;

	if (path_in(config, s, "sshd_config") < 0 ||
	    path_in(log, s, "sshd.log") < 0)
		return -1;
	log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (log_fd < 0 || null_fd < 0) {
		fprintf(stderr, "harness: cannot open %s or /dev/null: %s\n",
			log, strerror(errno));
		pid = -1;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "harness: fork for sshd: %s\n",
			strerror(errno));
	} else if (pid == 0) {
		/* A test that crashes must not leave sshd behind. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		if (dup2(null_fd, 0) >= 0 && dup2(null_fd, 1) >= 0 &&
		    dup2(log_fd, 2) >= 0)
			execv(SSHD_PATH, (char *const *)argv);
		dprintf(log_fd, "exec %s: %s\n", SSHD_PATH, strerror(errno));
		_exit(127);
	}
out:
	if (log_fd >= 0)
		close(log_fd);
	if (null_fd >= 0)
		close(null_fd);
	return pid;
}

/* Returns 0 once sshd answers, -1 if it exited or stayed silent; *reaped
 * tells whether it exited. */
static int wait_ready(const struct test_sshd *s, bool *reaped)
{
	uint64_t deadline = now_ms() + READY_TIMEOUT_MS;
	int st;

	*reaped = false;
	for (;;) {
		pid_t w = waitpid(s->pid, &st, WNOHANG);

		if (w == s->pid) {
			*reaped = true;
			fprintf(stderr, "harness: sshd on port %u exited "
				"(status 0x%x) before accepting logins\n",
				s->port, st);
			return -1;
		}
		if (banner_seen(s->port, deadline))
			return 0;
		if (now_ms() >= deadline) {
			fprintf(stderr, "harness: sshd on port %u sent no "
				"banner within %u s\n", s->port,
				READY_TIMEOUT_MS / 1000);
			return -1;
		}
		sleep_ms(50);
	}
}

/* The port may be taken between free_port() and sshd's bind on the host's
 * loopback; *retry says so. */
static int start_once(struct test_sshd *s, const struct sshd_options *o,
		      bool *retry)
{
	char log_path[HARNESS_PATH];
	bool reaped;
	char *log;

	*retry = false;
	if (make_temp_dir(s->dir, sizeof s->dir, "sshd") < 0)
		return -1;
	/* Others may read (sshd reads authorized_keys as the login user)
	 * but not write: this directory decides who may log in. */
	if (chmod(s->dir, 0755) < 0 || free_port(&s->port) < 0 ||
	    prepare(s, o) < 0)
		goto fail;
	s->pid = spawn_sshd(s);
	if (s->pid < 0)
		goto fail;
	if (wait_ready(s, &reaped) == 0)
		return 0;
	if (!reaped)
		kill_and_reap(s->pid);
	if (path_in(log_path, s, "sshd.log") == 0 &&
	    (log = read_file(log_path, NULL))) {
		*retry = strstr(log, "Address already in use") != NULL;
		free(log);
	}
	if (!*retry)
		print_log(s);
fail:
	s->pid = 0;
	rm_rf(s->dir);
	s->dir[0] = '\0';
	return -1;
}

int sshd_start(struct test_sshd *s, const struct sshd_options *o)
{
	static const struct sshd_options defaults;
	bool retry = true;
	int i;

	memset(s, 0, sizeof *s);
	if (!o)
		o = &defaults;
	if (enter_private_netns() < 0)
		return -1;
	for (i = 0; i < START_ATTEMPTS && retry; i++) {
		if (start_once(s, o, &retry) == 0)
			return 0;
		if (retry)
			fprintf(stderr, "harness: port %u was taken; "
				"trying another\n", s->port);
	}
	return -1;
}

void sshd_stop(struct test_sshd *s)
{
	uint64_t deadline = now_ms() + STOP_GRACE_MS;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (;;) {
			pid_t w = waitpid(s->pid, NULL, WNOHANG);

			if (w == s->pid || (w < 0 && errno != EINTR))
				break;
			if (now_ms() >= deadline) {
				kill_and_reap(s->pid);
				break;
			}
			sleep_ms(20);
		}
		s->pid = 0;
	}
	if (s->dir[0]) {
		rm_rf(s->dir);
		s->dir[0] = '\0';
	}
}

void loopback_addr(unsigned n, char *out, size_t len)
{
	unsigned i, host, net;

	if (n == 0 || n > 254u * 256 * 256) {
		snprintf(out, len, "%s", "");
		return;
	}
	i = n - 1;
	host = i % 254 + 1;
	net = i / 254;
	snprintf(out, len, "127.%u.%u.%u", net / 256, net % 256, host);
}

/* Reads "TYPE BASE64" out of sshd's ed25519 host public key. */
static int host_key(const struct test_sshd *s, char *out, size_t len)
{
	char *pub = read_file(s->host_pub, NULL);
	char *sp;

	if (!pub) {
		fprintf(stderr, "harness: cannot read %s: %s\n", s->host_pub,
			strerror(errno));
		return -1;
	}
	sp = strchr(pub, ' ');
	sp = sp ? strchr(sp + 1, ' ') : NULL;
	if (sp)
		*sp = '\0';
	pub[strcspn(pub, "\r\n")] = '\0';
	if (!strchr(pub, ' ') || strlen(pub) >= len) {
		fprintf(stderr, "harness: %s is not an OpenSSH public key\n",
			s->host_pub);
		free(pub);
		return -1;
	}
	snprintf(out, len, "%s", pub);
	free(pub);
	return 0;
}

static FILE *create(const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		fprintf(stderr, "harness: cannot create %s: %s\n", path,
			strerror(errno));
	return f;
}

static int finish(FILE *f, const char *path)
{
	bool bad = ferror(f) != 0;

	if (fclose(f) != 0 || bad) {
		fprintf(stderr, "harness: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

int sshd_write_known_hosts(const struct test_sshd *s, const char *path,
			   unsigned first, unsigned count)
{
	char key[1024], addr[32];
	unsigned i;
	FILE *f;

	if (host_key(s, key, sizeof key) < 0 || !(f = create(path)))
		return -1;
	for (i = 0; i < count; i++) {
		loopback_addr(first + i, addr, sizeof addr);
		/* OpenSSH writes plain names for the default port. */
		if (s->port == 22)
			fprintf(f, "%s %s\n", addr, key);
		else
			fprintf(f, "[%s]:%u %s\n", addr, s->port, key);
	}
	return finish(f, path);
}

int sshd_write_hosts(const struct test_sshd *s, const char *path,
		     unsigned first, unsigned count)
{
	char addr[32];
	unsigned i;
	FILE *f = create(path);

	if (!f)
		return -1;
	for (i = 0; i < count; i++) {
		loopback_addr(first + i, addr, sizeof addr);
		fprintf(f, "%s@%s:%u\n", s->user, addr, s->port);
	}
	return finish(f, path);
}
