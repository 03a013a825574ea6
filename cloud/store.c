/*
 * cloud/store.c: the object store facade. Parses gs:// and file:// URLs,
 * checks arguments once for both backends, puts the store's prefix in
 * front of every name on the way down and takes it off on the way up, and
 * forwards each call to the backend of the URL's scheme (backend.h).
 *
 * With SLICECTL_STORE_TRACE=FILE in the environment every call is also
 * appended to FILE as one line "TIME PROGRAM OP RC BYTES URL" (TIME: Unix
 * seconds, to the millisecond, when the call returned; PROGRAM: the
 * process's name, slicectl or slice-supervis(or); OP: put, upload,
 * get, stat, list, delete; RC the call's result, 0 ok; BYTES sent or
 * received), one write(2) a line so that many processes can share the
 * file: bench/cost counts a run's requests and bytes by it, the same for
 * file:// runs as for gs:// ones.
 */
#include "cloud/backend.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STORE_NAME_MAX 1024

struct store {
	const struct store_ops *ops;
	struct store_backend *b;
	char *base;   /* "gs://bucket" or "file:///dir", no trailing slash */
	char *prefix; /* "" or "some/prefix/" (gs:// only) */
	struct buf url;
	int trace_fd; /* SLICECTL_STORE_TRACE's, or -1 */
	char trace_comm[32]; /* the process's name, for the trace */
};

static void trace_open(struct store *s, const char *path)
{
	ssize_t n = 0;
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, s->trace_comm, sizeof(s->trace_comm) - 1);
		close(fd);
	}
	s->trace_comm[n > 0 ? n : 0] = '\0';
	s->trace_comm[strcspn(s->trace_comm, " \n")] = '\0';
	if (!s->trace_comm[0])
		snprintf(s->trace_comm, sizeof(s->trace_comm), "-");
	s->trace_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			   0644);
}

/* name: relative to the store's prefix, as the caller gave it. */
static void trace(struct store *s, const char *op, int rc, uint64_t bytes,
		  const char *name)
{
	char line[2 * STORE_NAME_MAX + 256];
	struct timespec ts;
	int n;

	if (s->trace_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line),
		     "%lld.%03ld %s %s %d %" PRIu64 " %s/%s%s\n",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000000L, s->trace_comm,
		     op, rc, bytes, s->base, s->prefix, name ? name : "");
	/* A trace is best effort: a failed write only loses a line. */
	if (n > 0 && (size_t)n < sizeof(line)) {
		ssize_t w = write(s->trace_fd, line, (size_t)n);

		(void)w;
	}
}

void store_object_release(struct store_object *o)
{
	if (!o)
		return;
	free(o->name);
	memset(o, 0, sizeof(*o));
}

/* A malloc'd formatted string, or NULL when out of memory. */
static char *str_printf(const char *fmt, ...) ATTR_PRINTF(1, 2);

static char *str_printf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	p = malloc((size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

bool store_is_piece(const char *name)
{
	return name && strstr(name, STORE_PIECE_MARK) != NULL;
}

static bool is_cloud_error(int code)
{
	return code == CLOUD_ENOMEM || code == CLOUD_EINVAL ||
	       code == CLOUD_EIO ||
	       (code >= CLOUD_EURL && code <= CLOUD_EABORTED);
}

static bool bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

static bool alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* GCS's rules for bucket names, so a typo fails here with a reason rather
 * than as an HTTP 400 after a token exchange. */
static int check_bucket(const char *url, const char *b, size_t len,
			struct err *e)
{
	if (len < 3 || len > 222)
		return err_set(e, CLOUD_EURL,
			       "%s: bucket name \"%.*s\" must be 3 to 63 "
			       "characters long", url, (int)len, b);
	for (size_t i = 0; i < len; i++)
		if (!bucket_char(b[i]))
			return err_set(e, CLOUD_EURL,
				       "%s: bucket name \"%.*s\" may hold only "
				       "lowercase letters, digits, '-', '_' "
				       "and '.'", url, (int)len, b);
	if (!alnum_lower(b[0]) || !alnum_lower(b[len - 1]))
		return err_set(e, CLOUD_EURL,
			       "%s: bucket name \"%.*s\" must start and end "
			       "with a letter or a digit", url, (int)len, b);
	return 0;
}

/* Whether path has an empty, "." or ".." component between slashes. A
 * leading slash counts as an empty component. */
static bool bad_component(const char *p, size_t len, bool allow_trailing)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;

		while (j < len && p[j] != '/')
			j++;
		if (j == i)
			return true;
		if ((j - i == 1 && p[i] == '.') ||
		    (j - i == 2 && p[i] == '.' && p[i + 1] == '.'))
			return true;
		if (j < len && j + 1 == len && !allow_trailing)
			return true;
		i = j + 1;
	}
	return false;
}

static int check_name(struct store *s, const char *name, struct err *e)
{
	size_t len;

	if (!name || !*name)
		return err_set(e, CLOUD_EINVAL, "an object name is needed");
	len = strlen(name);
	if (len + strlen(s->prefix) > STORE_NAME_MAX)
		return err_set(e, CLOUD_EINVAL,
			       "object name \"%.60s...\" is too long (at most "
			       "%d bytes with the URL's prefix)", name,
			       STORE_NAME_MAX);
	if (strpbrk(name, "\r\n"))
		return err_set(e, CLOUD_EINVAL,
			       "object name \"%s\" holds a line break, which "
			       "object names may not", name);
	if (bad_component(name, len, false))
		return err_set(e, CLOUD_EINVAL,
			       "object name \"%s\" has an empty, \".\" or "
			       "\"..\" part; name objects like "
			       "\"dir/file.json\"", name);
	return 0;
}

static int check_generation(int64_t g, struct err *e)
{
	if (g < STORE_ANY_GENERATION)
		return err_set(e, CLOUD_EINVAL,
			       "generation precondition %lld is not a "
			       "generation, STORE_CREATE_ONLY or "
			       "STORE_ANY_GENERATION", (long long)g);
	return 0;
}

/* The full name in the backend's namespace (malloc'd). */
static char *full_name(struct store *s, const char *name)
{
	size_t pl = strlen(s->prefix), nl = strlen(name);
	char *f = malloc(pl + nl + 1);

	if (f) {
		memcpy(f, s->prefix, pl);
		memcpy(f + pl, name, nl + 1);
	}
	return f;
}

static int full_or_fail(struct store *s, const char *name, char **out,
			struct err *e)
{
	int r = check_name(s, name, e);

	if (r)
		return r;
	*out = full_name(s, name);
	if (!*out)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

static void strip_prefix(struct store *s, struct store_object *o)
{
	size_t pl = strlen(s->prefix);

	if (o && o->name && pl && !strncmp(o->name, s->prefix, pl))
		memmove(o->name, o->name + pl, strlen(o->name + pl) + 1);
}

static int open_gs(struct store *s, const char *url, const char *rest,
		   struct err *e)
{
	const char *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	const char *p = slash ? slash + 1 : "";
	size_t plen = strlen(p);
	int r;

	if (!blen)
		return err_set(e, CLOUD_EURL,
			       "%s has no bucket; write gs://BUCKET or "
			       "gs://BUCKET/PREFIX", url);
	r = check_bucket(url, rest, blen, e);
	if (r)
		return r;
	while (plen && p[plen - 1] == '/')
		plen--;
	if (plen && bad_component(p, plen, false))
		return err_set(e, CLOUD_EURL,
			       "%s: the prefix has an empty, \".\" or \"..\" "
			       "part; write gs://BUCKET/some/prefix", url);
	if (strpbrk(url, "\r\n"))
		return err_set(e, CLOUD_EURL, "%s holds a line break", url);
	s->ops = &store_gs_ops;
	s->base = str_printf("gs://%.*s", (int)blen, rest);
	s->prefix = str_printf("%.*s%s", (int)plen, p, plen ? "/" : "");
	if (!s->base || !s->prefix)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

static int open_file(struct store *s, const char *url, const char *rest,
		     struct err *e)
{
	size_t len;

	/* RFC 8089 allows "localhost" as the host of a local path. */
	if (!strncmp(rest, "localhost/", 10))
		rest += 9;
	if (rest[0] != '/')
		return err_set(e, CLOUD_EURL,
			       "%s: file:// URLs need an absolute path; write "
			       "file:///ABSOLUTE/DIR (three slashes)", url);
	len = strlen(rest);
	while (len > 1 && rest[len - 1] == '/')
		len--;
	s->ops = &store_file_ops;
	/* The root directory is "file://" + "" so that "/name" follows. */
	if (len == 1)
		len = 0;
	s->base = str_printf("file://%.*s", (int)len, rest);
	s->prefix = strdup("");
	if (!s->base || !s->prefix)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

int store_open(struct store **out, const char *url, struct err *e)
{
	struct store *s;
	const char *where;
	int r;

	*out = NULL;
	err_init(e);
	if (!url || !*url)
		return err_set(e, CLOUD_EURL,
			       "a storage URL is needed: gs://BUCKET/PREFIX "
			       "or file:///DIR");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	buf_init(&s->url);
	s->trace_fd = -1;
	if (getenv("SLICECTL_STORE_TRACE") && *getenv("SLICECTL_STORE_TRACE"))
		trace_open(s, getenv("SLICECTL_STORE_TRACE"));
	if (!strncmp(url, "gs://", 5))
		r = open_gs(s, url, url + 5, e);
	else if (!strncmp(url, "file://", 7))
		r = open_file(s, url, url + 7, e);
	else if (!strncmp(url, "file:", 5))
		r = err_set(e, CLOUD_EURL,
			    "%s: write local directories as file:///ABSOLUTE/"
			    "DIR (three slashes)", url);
	else if (strstr(url, "://"))
		r = err_set(e, CLOUD_EURL,
			    "%s: only gs://BUCKET/PREFIX and file:///DIR "
			    "URLs can hold checkpoints and run state", url);
	else
		r = err_set(e, CLOUD_EURL,
			    "%s is not a URL; write gs://BUCKET/PREFIX, or "
			    "file:///ABSOLUTE/DIR for a local directory", url);
	if (r) {
		store_close(s);
		return r;
	}
	/* What follows "scheme://", without the trailing slash. */
	where = s->base + strlen(s->ops->scheme) + 3;
	if (s->prefix[0]) {
		char *w = str_printf("%s/%.*s", where,
				     (int)strlen(s->prefix) - 1, s->prefix);

		if (!w) {
			store_close(s);
			return err_set(e, CLOUD_ENOMEM, "out of memory");
		}
		r = s->ops->open(&s->b, w, e);
		free(w);
	} else {
		r = s->ops->open(&s->b, *where ? where : "/", e);
	}
	if (r) {
		s->b = NULL;
		store_close(s);
		return r;
	}
	*out = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	if (s->b)
		s->ops->close(s->b);
	if (s->trace_fd >= 0)
		close(s->trace_fd);
	free(s->base);
	free(s->prefix);
	buf_release(&s->url);
	free(s);
}

const char *store_url(struct store *s, const char *name)
{
	buf_reset(&s->url);
	if (buf_appendf(&s->url, "%s/%s%s", s->base, s->prefix,
			name ? name : ""))
		return s->base;
	return s->url.data;
}

int store_put(struct store *s, const char *name, const void *data,
	      size_t len, int64_t if_generation_match,
	      struct store_object *out, struct err *e)
{
	char *full;
	int r;

	err_init(e);
	if (out)
		memset(out, 0, sizeof(*out));
	if (!data && len)
		return err_set(e, CLOUD_EINVAL, "store_put: no data");
	r = check_generation(if_generation_match, e);
	if (!r)
		r = full_or_fail(s, name, &full, e);
	if (r)
		return r;
	r = s->ops->put(s->b, full, data ? data : "", len,
			if_generation_match, out, e);
	free(full);
	trace(s, "put", r, len, name);
	if (!r)
		strip_prefix(s, out);
	return r;
}

int store_upload_begin(struct store *s, const char *name,
		       int64_t if_generation_match, struct store_upload **out,
		       struct err *e)
{
	char *full;
	int r;

	err_init(e);
	*out = NULL;
	r = check_generation(if_generation_match, e);
	if (!r)
		r = full_or_fail(s, name, &full, e);
	if (r)
		return r;
	r = s->ops->upload_begin(s->b, full, if_generation_match, out, e);
	free(full);
	if (r) {
		*out = NULL;
		trace(s, "upload", r, 0, name);
		return r;
	}
	(*out)->store = s;
	(*out)->written = 0;
	(*out)->trace_name = NULL;
	if (s->trace_fd >= 0)
		(*out)->trace_name = strdup(name);
	return 0;
}

int store_upload_write(struct store_upload *u, const void *data, size_t len,
		       struct err *e)
{
	err_init(e);
	if (!u || (!data && len))
		return err_set(e, CLOUD_EINVAL, "store_upload_write: no %s",
			       u ? "data" : "upload");
	if (!len)
		return 0;
	u->written += len;
	return u->store->ops->upload_write(u, data, len, e);
}

int store_upload_finish(struct store_upload *u, struct store_object *out,
			struct err *e)
{
	struct store *s;
	char *name;
	uint64_t written;
	int r;

	err_init(e);
	if (out)
		memset(out, 0, sizeof(*out));
	if (!u)
		return err_set(e, CLOUD_EINVAL, "store_upload_finish: no "
			       "upload");
	s = u->store;
	name = u->trace_name;
	written = u->written;
	r = s->ops->upload_finish(u, out, e);
	if (name)
		trace(s, "upload", r, written, name);
	free(name);
	if (!r)
		strip_prefix(s, out);
	return r;
}

void store_upload_abort(struct store_upload *u)
{
	struct store *s;
	char *name;
	uint64_t written;

	if (!u)
		return;
	s = u->store;
	name = u->trace_name;
	written = u->written;
	s->ops->upload_abort(u);
	if (name)
		trace(s, "upload", CLOUD_EABORTED, written, name);
	free(name);
}

/* Remembers that the sink, not the backend, stopped a download, so its
 * code can be told apart and its message kept. */
struct sink_guard {
	store_sink_fn fn;
	void *ud;
	int code;
	uint64_t bytes;
};

static int guarded_sink(void *ud, const void *data, size_t len,
			struct err *e)
{
	struct sink_guard *g = ud;
	int r;

	g->bytes += len;
	r = g->fn(g->ud, data, len, e);

	if (!r)
		return 0;
	if (!e->code || !e->msg[0])
		err_set(e, r, "the receiver of the download failed (error %d)",
			r);
	g->code = is_cloud_error(r) ? r : CLOUD_EABORTED;
	e->code = g->code;
	return g->code;
}

int store_get(struct store *s, const char *name, int64_t generation,
	      store_sink_fn sink, void *ud, struct store_object *out,
	      struct err *e)
{
	struct sink_guard g = { sink, ud, 0, 0 };
	char *full;
	int r;

	err_init(e);
	if (out)
		memset(out, 0, sizeof(*out));
	if (!sink)
		return err_set(e, CLOUD_EINVAL, "store_get: no sink");
	if (generation < 0)
		return err_set(e, CLOUD_EINVAL,
			       "store_get: generation %lld is not a "
			       "generation (0 means the current one)",
			       (long long)generation);
	r = full_or_fail(s, name, &full, e);
	if (r)
		return r;
	r = s->ops->get(s->b, full, generation, guarded_sink, &g, out, e);
	free(full);
	trace(s, "get", r, g.bytes, name);
	if (r && g.code) {
		if (out)
			store_object_release(out);
		e->code = g.code;
		return g.code;
	}
	if (r) {
		if (out)
			store_object_release(out);
		return r;
	}
	strip_prefix(s, out);
	return 0;
}

struct read_sink {
	struct buf b;
	size_t max;
	struct store *s;
	const char *name;
};

static int read_sink_fn(void *ud, const void *data, size_t len,
			struct err *e)
{
	struct read_sink *rs = ud;

	if (rs->b.len + len > rs->max)
		return err_set(e, CLOUD_EINVAL,
			       "%s is larger than the %zu bytes expected of "
			       "it", store_url(rs->s, rs->name), rs->max);
	if (buf_append(&rs->b, data, len))
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

int store_read(struct store *s, const char *name, size_t max, char **data,
	       size_t *len, struct store_object *out, struct err *e)
{
	struct read_sink rs = { .max = max, .s = s, .name = name };
	int r;

	*data = NULL;
	if (len)
		*len = 0;
	buf_init(&rs.b);
	r = store_get(s, name, 0, read_sink_fn, &rs, out, e);
	if (!r && !rs.b.data) {
		if (buf_reserve(&rs.b, 1))
			r = err_set(e, CLOUD_ENOMEM, "out of memory");
		else
			rs.b.data[0] = '\0';
	}
	if (r) {
		buf_release(&rs.b);
		return r;
	}
	if (len)
		*len = rs.b.len;
	*data = buf_detach(&rs.b);
	return 0;
}

int store_stat(struct store *s, const char *name, struct store_object *out,
	       struct err *e)
{
	char *full;
	int r;

	err_init(e);
	memset(out, 0, sizeof(*out));
	r = full_or_fail(s, name, &full, e);
	if (r)
		return r;
	r = s->ops->stat(s->b, full, out, e);
	free(full);
	trace(s, "stat", r, 0, name);
	if (!r)
		strip_prefix(s, out);
	return r;
}

int store_exists(struct store *s, const char *name, bool *yes,
		 struct err *e)
{
	struct store_object o;
	int r = store_stat(s, name, &o, e);

	*yes = !r;
	if (r == CLOUD_ENOTFOUND) {
		err_init(e);
		return 0;
	}
	if (!r)
		store_object_release(&o);
	return r;
}

struct list_guard {
	struct store *s;
	store_list_fn fn;
	void *ud;
};

static int list_strip(void *ud, const struct store_object *o,
		      bool is_prefix)
{
	struct list_guard *g = ud;
	struct store_object rel = *o;
	size_t pl = strlen(g->s->prefix);

	if (pl && o->name && !strncmp(o->name, g->s->prefix, pl))
		rel.name = o->name + pl;
	return g->fn(g->ud, &rel, is_prefix);
}

int store_list(struct store *s, const char *prefix, const char *delimiter,
	       store_list_fn fn, void *ud, struct err *e)
{
	struct list_guard g = { s, fn, ud };
	char *full;
	int r;

	err_init(e);
	if (!fn)
		return err_set(e, CLOUD_EINVAL, "store_list: no callback");
	if (!prefix)
		prefix = "";
	if (delimiter && !*delimiter)
		delimiter = NULL;
	if (prefix[0] == '/' || strpbrk(prefix, "\r\n") ||
	    (*prefix && bad_component(prefix, strlen(prefix), true)))
		return err_set(e, CLOUD_EINVAL,
			       "list prefix \"%s\" has an empty, \".\" or "
			       "\"..\" part", prefix);
	full = full_name(s, prefix);
	if (!full)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	r = s->ops->list(s->b, full, delimiter, list_strip, &g, e);
	free(full);
	trace(s, "list", r, 0, prefix);
	return r;
}

int store_delete(struct store *s, const char *name,
		 int64_t if_generation_match, struct err *e)
{
	char *full;
	int r;

	err_init(e);
	r = check_generation(if_generation_match, e);
	if (!r)
		r = full_or_fail(s, name, &full, e);
	if (r)
		return r;
	r = s->ops->del(s->b, full, if_generation_match, e);
	free(full);
	trace(s, "delete", r, 0, name);
	return r;
}
