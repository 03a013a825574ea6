/*
 * watch_state.c: see watch_state.h.
 */
#include "launcher/watch_state.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_MAX ((size_t)16 << 10)

int watch_state_put(struct store *s, struct watch_state *w, struct err *e)
{
	json_t *o;
	char *text;
	int rc;

	rfc3339_now(w->time, sizeof(w->time));
	o = json_pack("{s:s, s:s, s:s, s:s?, s:i, s:i, s:I, s:s}",
		      "queued_resource", w->queued_resource, "state", w->state,
		      "capacity", w->capacity, "window_end",
		      *w->window_end ? w->window_end : NULL, "recreated",
		      (json_int_t)w->recreated, "recreate_budget",
		      (json_int_t)w->budget, "quarantines_acted",
		      (json_int_t)w->quarantines_acted, "time", w->time);
	text = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!text)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = store_put(s, RUN_WATCH, text, strlen(text), STORE_ANY_GENERATION,
		       NULL, e);
	free(text);
	return rc;
}

static void copy(char *dst, size_t cap, json_t *v)
{
	snprintf(dst, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

int watch_state_get(struct store *s, struct watch_state *out, struct err *e)
{
	char *data = NULL;
	size_t len = 0;
	json_t *o, *rec, *budget, *acted;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = store_read(s, RUN_WATCH, WATCH_MAX, &data, &len, NULL, e);
	if (rc)
		return rc;
	o = json_loadb(data, len, 0, NULL);
	free(data);
	rec = json_object_get(o, "recreated");
	budget = json_object_get(o, "recreate_budget");
	if (!json_is_object(o) ||
	    !json_is_string(json_object_get(o, "queued_resource")) ||
	    !json_is_integer(rec) || !json_is_integer(budget)) {
		json_decref(o);
		return err_set(e, CLOUD_ECORRUPT,
			       "%s is not what slicectl job --watch writes",
			       store_url(s, RUN_WATCH));
	}
	copy(out->queued_resource, sizeof(out->queued_resource),
	     json_object_get(o, "queued_resource"));
	copy(out->state, sizeof(out->state), json_object_get(o, "state"));
	copy(out->capacity, sizeof(out->capacity),
	     json_object_get(o, "capacity"));
	copy(out->window_end, sizeof(out->window_end),
	     json_object_get(o, "window_end"));
	copy(out->time, sizeof(out->time), json_object_get(o, "time"));
	out->recreated = (unsigned)json_integer_value(rec);
	out->budget = (unsigned)json_integer_value(budget);
	acted = json_object_get(o, "quarantines_acted");
	if (json_is_integer(acted) && json_integer_value(acted) > 0)
		out->quarantines_acted = (unsigned)json_integer_value(acted);
	json_decref(o);
	return 0;
}
