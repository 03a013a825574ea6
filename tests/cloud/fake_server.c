/* tests/cloud/fake_server.c: see fake_server.h. */
#include "tests/cloud/fake_server.h"
#include "common/common.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SLICECTL_TEST_SRCDIR
#define SLICECTL_TEST_SRCDIR "."
#endif

/* A bound, not a pace: a fake that dies is seen at once by its pid, and
 * Python may start slowly on a loaded machine. */
#define START_MS 60000
#define MAX_ARGS 32

/* The port the fake wrote, once it has; 0 until then. */
static unsigned read_port(const char *port_file)
{
	FILE *fp = fopen(port_file, "r");
	unsigned port = 0;

	if (!fp)
		return 0;
	if (fscanf(fp, "%u", &port) != 1)
		port = 0;
	fclose(fp);
	return port;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t spawn(const char *const *argv)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int fake_server_start(struct fake_server *f, const char *script,
		      const char *const *extra)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	char path[512], port_file[300];
	const char *argv[MAX_ARGS];
	size_t n = 0;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/slicectl-fake-XXXXXX");
	if (!mkdtemp(f->dir)) {
		perror("fake_server: mkdtemp");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s",
		 src && *src ? src : SLICECTL_TEST_SRCDIR, script);
	snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
	argv[n++] = "python3";
	argv[n++] = path;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	while (extra && *extra && n < MAX_ARGS - 1)
		argv[n++] = *extra++;
	argv[n] = NULL;
	f->pid = spawn(argv);
	if (f->pid < 0) {
		perror("fake_server: fork");
		return -1;
	}
	for (long long until = now_ms() + START_MS;;) {
		struct timespec pause = { 0, 50 * 1000000L };

		f->port = read_port(port_file);
		if (f->port) {
			snprintf(f->base, sizeof(f->base),
				 "http://127.0.0.1:%u", f->port);
			return 0;
		}
		if (waitpid(f->pid, NULL, WNOHANG) == f->pid) {
			fprintf(stderr, "fake_server: %s exited at start\n",
				path);
			f->pid = -1;
			return -1;
		}
		if (now_ms() >= until)
			break;
		nanosleep(&pause, NULL);
	}
	fprintf(stderr, "fake_server: %s did not start in %d s\n", path,
		START_MS / 1000);
	return -1;
}

void fake_server_stop(struct fake_server *f)
{
	char port_file[300];

	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
	if (!f->dir[0])
		return;
	snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
	unlink(port_file);
	rmdir(f->dir);
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	return buf_append(ud, data, size * n) ? 0 : size * n;
}

long fake_server_call(struct fake_server *f, const char *method,
		      const char *path, const char *body, char **out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs;
	struct buf answer, url;
	long status = -1;

	if (out)
		*out = NULL;
	if (!h)
		return -1;
	buf_init(&answer);
	buf_init(&url);
	buf_appendf(&url, "%s%s", f->base, path);
	hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (f->token[0]) {
		struct buf auth;

		buf_init(&auth);
		buf_appendf(&auth, "Authorization: Bearer %s", f->token);
		hdrs = curl_slist_append(hdrs, auth.data);
		buf_release(&auth);
	}
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	buf_release(&url);
	if (out) {
		if (!answer.data)
			buf_appends(&answer, "");
		*out = buf_detach(&answer);
	}
	buf_release(&answer);
	return status;
}

int fake_server_post(struct fake_server *f, const char *path,
		     const char *body)
{
	return fake_server_call(f, "POST", path, body, NULL) == 200 ? 0 : -1;
}

int fake_server_faults(struct fake_server *f, const char *rules)
{
	return fake_server_post(f, "/_fake/faults", rules);
}
