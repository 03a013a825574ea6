/* tests/cloud/fake_gcs.c: see fake_gcs.h. */
#include "tests/cloud/fake_gcs.h"
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

int fake_gcs_start(struct fake_gcs *f, const char *const *extra)
{
	const char *src = getenv("SLICECTL_SRCDIR");
	char script[512], port_file[300];
	const char *argv[32];
	size_t n = 0;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/slicectl-gcsfake-XXXXXX");
	if (!mkdtemp(f->dir)) {
		perror("fake_gcs: mkdtemp");
		return -1;
	}
	snprintf(script, sizeof(script), "%s/tests/fakes/gcs_fake.py",
		 src && *src ? src : SLICECTL_TEST_SRCDIR);
	snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
	argv[n++] = "python3";
	argv[n++] = script;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	for (; extra && *extra && n < 30; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	f->pid = fork();
	if (f->pid < 0) {
		perror("fake_gcs: fork");
		return -1;
	}
	if (f->pid == 0) {
		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		FILE *fp = fopen(port_file, "r");
		struct timespec ts = { 0, 50 * 1000000L };

		if (fp) {
			if (fscanf(fp, "%u", &f->port) == 1) {
				fclose(fp);
				snprintf(f->base, sizeof(f->base),
					 "http://127.0.0.1:%u", f->port);
				return 0;
			}
			fclose(fp);
		}
		if (waitpid(f->pid, NULL, WNOHANG) == f->pid) {
			fprintf(stderr, "fake_gcs: %s exited at start\n",
				script);
			f->pid = -1;
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "fake_gcs: %s did not start in 10 s\n", script);
	return -1;
}

void fake_gcs_stop(struct fake_gcs *f)
{
	char path[300];

	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
	snprintf(path, sizeof(path), "%s/port", f->dir);
	unlink(path);
	rmdir(f->dir);
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	return buf_append(ud, data, size * n) ? 0 : size * n;
}

long fake_gcs_call(struct fake_gcs *f, const char *method, const char *path,
		   const char *body, char **out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct buf b, url;
	long status = -1;

	if (out)
		*out = NULL;
	if (!h)
		return -1;
	buf_init(&b);
	buf_init(&url);
	buf_appendf(&url, "%s%s", f->base, path);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
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
		if (!b.data)
			buf_appends(&b, "");
		*out = buf_detach(&b);
	}
	buf_release(&b);
	return status;
}

int fake_gcs_faults(struct fake_gcs *f, const char *rules)
{
	return fake_gcs_call(f, "POST", "/_fake/faults", rules, NULL) == 200
		       ? 0 : -1;
}
