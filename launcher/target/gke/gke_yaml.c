/*
 * gke_yaml.c: JSON to block-style YAML, as kubectl prints it (sequences
 * of mappings start their first key on the "- " line). A string is left
 * plain only when YAML 1.1 and 1.2 both read it back as that string;
 * otherwise it is double-quoted with JSON's escapes, which YAML's
 * double-quoted style shares.
 */
#include "launcher/target/gke/gke.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool plain_safe(const char *s)
{
	static const char *const special[] = {
		"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~",
	};
	size_t n = strlen(s);
	bool numeric = true;

	if (!n || s[0] == ' ' || s[n - 1] == ' ' ||
	    strchr("-?:,[]{}#&*!|>'\"%@`.", s[0]))
		return false;
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (!strcasecmp(s, special[i]))
			return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
			return false;
		if (strchr("#,[]{}&*!|>'\"%@`", c))
			return false;
		if (c == ':' && (i + 1 == n || s[i + 1] == ' '))
			return false;
		if (!strchr("0123456789+-.eExXoO_", c))
			numeric = false;
	}
	/* Anything a YAML resolver might take for a number stays a string. */
	return !numeric;
}

static int scalar(const json_t *v, struct buf *b)
{
	char *text;
	int rc;

	if (json_is_string(v) && plain_safe(json_string_value(v)))
		return buf_appends(b, json_string_value(v));
	text = json_dumps(v, JSON_ENCODE_ANY);
	if (!text)
		return -1;
	rc = buf_appends(b, text);
	free(text);
	return rc;
}

static bool is_collection(const json_t *v)
{
	return (json_is_object(v) && json_object_size(v)) ||
	       (json_is_array(v) && json_array_size(v));
}

static int indent(struct buf *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (buf_appends(b, " "))
			return -1;
	return 0;
}

static int node(const json_t *v, unsigned col, bool inline_first,
		struct buf *b);

/* A value after "key:" or "- ": inline when scalar or empty. */
static int value_after(const json_t *v, unsigned col, struct buf *b)
{
	if (!is_collection(v))
		return buf_appends(b, " ") || scalar(v, b) ||
		       buf_appends(b, "\n");
	if (buf_appends(b, "\n"))
		return -1;
	/* Sequences under a key sit at the key's column, as kubectl writes. */
	return node(v, json_is_array(v) ? col : col + 2, false, b);
}

static int node(const json_t *v, unsigned col, bool inline_first,
		struct buf *b)
{
	bool first = true;

	if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_t *key;

		json_object_foreach((json_t *)v, k, x) {
			if (!(first && inline_first) && indent(b, col))
				return -1;
			first = false;
			key = json_string(k);
			if (!key || scalar(key, b) || buf_appends(b, ":")) {
				json_decref(key);
				return -1;
			}
			json_decref(key);
			if (value_after(x, col, b))
				return -1;
		}
		return 0;
	}
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *x = json_array_get(v, i);

		if (!(first && inline_first) && indent(b, col))
			return -1;
		first = false;
		if (buf_appends(b, "-"))
			return -1;
		if (json_is_object(x) && json_object_size(x)) {
			if (buf_appends(b, " ") || node(x, col + 2, true, b))
				return -1;
		} else if (json_is_array(x) && json_array_size(x)) {
			if (buf_appends(b, "\n") || node(x, col + 2, false, b))
				return -1;
		} else if (value_after(x, col, b)) {
			return -1;
		}
	}
	return 0;
}

int gke_yaml(const json_t *obj, struct buf *b, struct err *e)
{
	if (!json_is_object(obj))
		return err_set(e, COMMON_EINVAL, "YAML of a non-object");
	if (node(obj, 0, false, b))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}
