/*
 * lease_record.c: see lease_record.h.
 */
#include "launcher/lease_record.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t lease_wall_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts))
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lease_time_text(int64_t ms, char *out, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		snprintf(out, cap, "?");
		return;
	}
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

void lease_note_release(struct lease_note *n)
{
	free(n->body);
	memset(n, 0, sizeof(*n));
}

static json_t *note_json(const struct lease_note *n)
{
	if (!*n->about)
		return json_null();
	return json_pack("{s:s, s:I, s:s, s:s?, s:s?}", "about", n->about,
			 "from_generation", (json_int_t)n->from_generation,
			 "why", n->why, "body", n->body, "replaces",
			 *n->replaces ? n->replaces : NULL);
}

int lease_record_text(const struct lease_record *r, char **out,
		      struct err *e)
{
	char expires[40];
	json_t *o;

	lease_time_text(r->expires_ms, expires, sizeof(expires));
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:o}", "holder", r->holder,
		      "acquired", r->acquired, "expires", expires,
		      "expires_ms", (json_int_t)r->expires_ms, "lease_ms",
		      (json_int_t)r->lease_ms, "recreating",
		      note_json(&r->note));
	*out = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(1)) : NULL;
	json_decref(o);
	return *out ? 0 : err_set(e, COMMON_ENOMEM, "out of memory");
}

static void copy(char *dst, size_t cap, const json_t *v)
{
	snprintf(dst, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static int parse_note(const json_t *v, struct lease_note *n, struct err *e)
{
	const json_t *about = json_object_get(v, "about");
	const json_t *from = json_object_get(v, "from_generation");
	const json_t *body = json_object_get(v, "body");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v) || !json_is_string(about) ||
	    !json_is_integer(from) || (body && !json_is_null(body) &&
				       !json_is_string(body)))
		return err_set(e, COMMON_EINVAL, "its \"recreating\" is not "
			       "{\"about\", \"from_generation\", \"why\", "
			       "\"body\"}");
	copy(n->about, sizeof(n->about), about);
	copy(n->why, sizeof(n->why), json_object_get(v, "why"));
	copy(n->replaces, sizeof(n->replaces), json_object_get(v, "replaces"));
	n->from_generation = json_integer_value(from);
	if (json_is_string(body) && !(n->body = strdup(json_string_value(body))))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}

int lease_record_parse(const char *text, size_t len, struct lease_record *r,
		       struct err *e)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je), *holder, *expires, *lease;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	if (!o)
		return err_set(e, COMMON_EINVAL, "it is not JSON (%s, line %d)",
			       je.text, je.line);
	holder = json_object_get(o, "holder");
	expires = json_object_get(o, "expires_ms");
	lease = json_object_get(o, "lease_ms");
	if (!json_is_object(o) || !json_is_string(holder) ||
	    !*json_string_value(holder) || !json_is_integer(expires) ||
	    !json_is_integer(lease) || json_integer_value(lease) <= 0 ||
	    json_integer_value(lease) > WATCH_LEASE_MAX_MS)
		rc = err_set(e, COMMON_EINVAL, "it lacks a \"holder\", an "
			     "\"expires_ms\" or a \"lease_ms\"");
	if (!rc) {
		copy(r->holder, sizeof(r->holder), holder);
		copy(r->acquired, sizeof(r->acquired),
		     json_object_get(o, "acquired"));
		r->expires_ms = json_integer_value(expires);
		r->lease_ms = (unsigned)json_integer_value(lease);
		rc = parse_note(json_object_get(o, "recreating"), &r->note, e);
	}
	if (rc)
		lease_note_release(&r->note);
	json_decref(o);
	return rc;
}
