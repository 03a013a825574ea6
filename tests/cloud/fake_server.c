/* tests/cloud/fake_server.c: see fake_server.h. */
#include "tests/cloud/fake_server.h"
#include "common/common.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bound, not a pace: a fake that dies is seen at once by its pid, and
 * Python may start slowly on a loaded machine. */
#define START_MS 60000

int fake_server_start(struct fake_server *f, const char *script,
		      const char *const *extra)
{
	memset(f, 0, sizeof(*f));
	if (fake_start(&f->proc, script, extra, 1, START_MS) < 0)
		return -1;
	f->port = f->proc.ports[0];
	snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%u", f->port);
	return 0;
}

void fake_server_stop(struct fake_server *f)
{
	fake_stop(&f->proc);
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
