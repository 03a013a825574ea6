/* tests/cloud/tpu_check.c: see tpu_check.h. */
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void env_setup(void)
{
	setenv("SLICECTL_ACCESS_TOKEN", "tok-123", 1);
	setenv("SLICECTL_TPU_POLL_MS", "5", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TPU_ENDPOINT");
	setenv("HOME", "/nonexistent", 1);
}

json_t *load(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	cr_assert(j, "not JSON (%s): %s", je.text, s);
	return j;
}

void assert_json_eq(const char *got, const char *want)
{
	json_t *g = load(got), *w = load(want);

	cr_assert(json_equal(g, w), "got  %s\nwant %s", got, want);
	json_decref(g);
	json_decref(w);
}

void spec_basic(struct tpu_qr_spec *s)
{
	tpu_qr_spec_init(s);
	s->id = "qr1";
	s->accelerator_type = "v5litepod-8";
	s->runtime_version = "v2-alpha-tpuv5-lite";
}

void start(struct fx *f, const struct tiny_answer *a, size_t n)
{
	memset(f, 0, sizeof(*f));
	cr_assert_eq(tiny_start(&f->srv, a, n), 0);
	setenv("SLICECTL_TPU_ENDPOINT", f->srv.base, 1);
	err_init(&f->e);
	cr_assert_eq(tpu_open(&f->c, "p", "z", &f->e), 0, "%s", f->e.msg);
}

void stop(struct fx *f)
{
	tpu_close(f->c);
	tiny_stop(&f->srv);
	free(f->log);
}

char *request(struct fx *f, unsigned i)
{
	const char *p;
	size_t n;

	free(f->log);
	f->log = tiny_log(&f->srv);
	p = f->log;
	for (unsigned k = 0; k < i; k++) {
		p = strstr(p, "\n---\n");
		cr_assert(p, "no request %u in:\n%s", i, f->log);
		p += 5;
	}
	n = strstr(p, "\n---\n") ? (size_t)(strstr(p, "\n---\n") - p)
				 : strlen(p);
	cr_assert(n, "no request %u in:\n%s", i, f->log);
	return strndup(p, n);
}

char *request_line(struct fx *f, unsigned i)
{
	char *r = request(f, i);
	char *end = strstr(r, " HTTP/1.1\r\n");

	cr_assert(end, "%s", r);
	*end = '\0';
	return r;
}

char *request_body(struct fx *f, unsigned i)
{
	char *r = request(f, i);
	char *b = strstr(r, "\r\n\r\n");
	char *out;

	cr_assert(b);
	out = strdup(b + 4);
	free(r);
	return out;
}

bool is_uuid4(const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	if (n != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!strchr(hex, s[i]) || !s[i]) {
			return false;
		}
	}
	return s[14] == '4' && strchr("89ab", s[19]);
}

void assert_line(struct fx *f, unsigned i, const char *want)
{
	char *line = request_line(f, i);

	cr_assert_str_eq(line, want);
	free(line);
}

void assert_line_rid(struct fx *f, unsigned i, const char *prefix)
{
	char *line = request_line(f, i);
	size_t n = strlen(prefix);

	cr_assert(strncmp(line, prefix, n) == 0, "%s", line);
	cr_assert(is_uuid4(line + n, strlen(line + n)), "%s", line);
	free(line);
}

void on_progress(void *ud, const struct tpu_qr *q, uint64_t elapsed)
{
	struct seen *s = ud;

	cr_assert_lt(s->n, 16);
	snprintf(s->states[s->n], sizeof(s->states[0]), "%s", q->state);
	s->elapsed[s->n++] = elapsed;
}
