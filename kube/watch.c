/*
 * watch.c: list, then watch from the list's resourceVersion. The stream
 * is one JSON event per line ({"type", "object"}); each event moves the
 * resourceVersion on (bookmarks too), so a stream that ends (the server's
 * timeoutSeconds) or breaks is resumed from the last one seen, and a 410
 * Gone (the version was compacted away) lists again. Reconnections after
 * failures are spaced by the retry backoff, which restarts whenever
 * events arrive, so a flapping connection is retried for as long as it
 * keeps delivering and given up on when it does not.
 */
#include "kube/client.h"

#include <stdlib.h>
#include <string.h>

/* The server ends each watch after this long; it is asked again. */
#define WINDOW_S 300u
/* Our own limit on a watch request beyond the server's. */
#define WINDOW_SLACK_MS 30000u
#define LINE_MAX_BYTES (16u << 20)

struct stream {
	kube_watch_fn fn;
	void *ud;
	struct buf line;
	char *rv;          /* the last resourceVersion seen */
	unsigned events;   /* delivered during this request */
	int fn_rc;         /* the callback's stop */
	bool gone;         /* an ERROR event with 410 */
	int error;         /* another ERROR event, or a bad line */
	struct err *e;
};

static int set_rv(struct stream *s, json_t *obj)
{
	const char *rv = json_string_value(json_object_get(
		json_object_get(obj, "metadata"), "resourceVersion"));
	char *copy;

	if (!rv || !*rv)
		return 0;
	copy = strdup(rv);
	if (!copy)
		return err_set(s->e, KUBE_ENOMEM, "out of memory");
	free(s->rv);
	s->rv = copy;
	return 0;
}

static int event(struct stream *s, const char *text, size_t len)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	const char *type = json_string_value(json_object_get(root, "type"));
	json_t *obj = json_object_get(root, "object");
	int rc = 0;

	if (!type || !json_is_object(obj)) {
		rc = s->error = err_set(s->e, KUBE_ECORRUPT, "a watch event "
					"that is not {\"type\", \"object\"} "
					"(%s)", root ? "fields missing"
						     : je.text);
	} else if (strcmp(type, "ERROR") == 0) {
		json_int_t code = json_integer_value(json_object_get(obj,
								     "code"));
		const char *msg = json_string_value(json_object_get(
			obj, "message"));

		if (code == 410)
			s->gone = true;
		else
			s->error = err_set(s->e, KUBE_EHTTP, "the watch "
					   "ended with an error (%lld): %s",
					   (long long)code,
					   msg ? msg : "no message");
		rc = 1;
	} else if (strcmp(type, "BOOKMARK") == 0) {
		rc = s->error = set_rv(s, obj);
	} else {
		rc = s->error = set_rv(s, obj);
		if (!rc) {
			s->events++;
			rc = s->fn_rc = s->fn(s->ud, type, obj);
		}
	}
	json_decref(root);
	return rc;
}

static int on_data(void *ud, const char *data, size_t len)
{
	struct stream *s = ud;

	for (;;) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		int rc;

		if (s->line.len + n > LINE_MAX_BYTES)
			return s->error = err_set(s->e, KUBE_ECORRUPT,
						  "a watch event larger than "
						  "16 MiB");
		if (buf_append(&s->line, data, n))
			return s->error = err_set(s->e, KUBE_ENOMEM,
						  "out of memory");
		if (!nl)
			return 0;
		if (s->line.len && (rc = event(s, s->line.data, s->line.len)))
			return rc;
		buf_reset(&s->line);
		data = nl + 1;
		len -= n + 1;
	}
}

/* Lists and hands every item over as ADDED; s->rv is the list's. */
static int relist(struct kube_client *k, const char *collection,
		  const char *selector, struct stream *s)
{
	json_t *list, *item;
	size_t i;
	int rc = kube_list(k, collection, selector, &list, s->e);

	if (rc)
		return rc;
	free(s->rv);
	s->rv = NULL;
	rc = set_rv(s, list);
	if (!rc && !s->rv)
		rc = err_set(s->e, KUBE_ECORRUPT, "GET %s: the list has no "
			     "metadata.resourceVersion to watch from",
			     collection);
	json_array_foreach(json_object_get(list, "items"), i, item) {
		if (rc)
			break;
		rc = s->fn(s->ud, "ADDED", item);
	}
	json_decref(list);
	return rc;
}

static int watch_path(struct buf *p, const char *collection,
		      const char *selector, const char *rv, unsigned window_s)
{
	char *esc_rv = curl_easy_escape(NULL, rv, 0);
	char *esc_sel = selector && *selector
				? curl_easy_escape(NULL, selector, 0) : NULL;
	int rc;

	buf_reset(p);
	rc = !esc_rv || (selector && *selector && !esc_sel) ||
	     buf_appendf(p, "%s%swatch=1&allowWatchBookmarks=true&"
			 "resourceVersion=%s&timeoutSeconds=%u%s%s",
			 collection, strchr(collection, '?') ? "&" : "?",
			 esc_rv, window_s, esc_sel ? "&labelSelector=" : "",
			 esc_sel ? esc_sel : "");
	curl_free(esc_rv);
	curl_free(esc_sel);
	return rc ? KUBE_ENOMEM : 0;
}

int kube_watch(struct kube_client *k, const char *collection,
	       const char *label_selector, unsigned timeout_ms,
	       kube_watch_fn fn, void *ud, struct err *e)
{
	uint64_t deadline = timeout_ms ? mono_ms() + timeout_ms : 0;
	struct stream s = { .fn = fn, .ud = ud, .e = e };
	struct http_response a;
	struct http_retry r;
	struct buf path;
	bool reauthed = false;
	int rc;

	buf_init(&s.line);
	buf_init(&path);
	http_response_init(&a);
	rc = relist(k, collection, label_selector, &s);
	http_retry_init(&r, &k->http);
	while (!rc) {
		uint64_t now = mono_ms();
		uint64_t left = deadline ? (deadline > now ? deadline - now
							   : 0)
					 : UINT64_MAX;
		unsigned window = left / 1000 < WINDOW_S
					  ? (unsigned)(left / 1000) : WINDOW_S;
		struct kube_call c = { .method = "GET", .sink = on_data,
				       .sink_ud = &s };

		if (!left)
			break;
		c.timeout_ms = (unsigned)(left < (uint64_t)window * 1000 +
						 WINDOW_SLACK_MS
					  ? left : window * 1000 +
						 WINDOW_SLACK_MS);
		rc = watch_path(&path, collection, label_selector, s.rv,
				window ? window : 1);
		if (rc) {
			err_set(e, rc, "out of memory");
			break;
		}
		c.path = path.data;
		s.events = 0;
		buf_reset(&s.line);
		a.attempts = 0;
		rc = kube_send(k, &c, 1, &a, e);
		if (rc)
			break;
		if (s.events) {
			/* A watch that keeps delivering is retried for as long
			 * as it does: its time budget starts again too. */
			http_retry_progress(&r);
			r.start_ms = mono_ms();
		}
		if (s.fn_rc || s.error) {
			rc = s.fn_rc ? s.fn_rc : s.error;
		} else if (s.gone || a.status == 410) {
			s.gone = false;
			log_debug("kube: watch of %s: resourceVersion %s is "
				  "gone; listing again", collection, s.rv);
			rc = relist(k, collection, label_selector, &s);
		} else if (deadline && mono_ms() >= deadline) {
			break;
		} else if (a.status >= 200 && a.status < 300) {
			/* The server ended the window: go on. (A stream that
			 * broke has no status: a transport failure.) */
		} else if (!kube_retry_again(k, &r, &reauthed, &a)) {
			rc = kube_failure(k, &c, &a, r.attempts > 1, e);
		}
	}
	http_response_release(&a);
	buf_release(&path);
	buf_release(&s.line);
	free(s.rv);
	return rc;
}
