/*
 * yaml.c: kubeconfigs read with libyaml's event parser into Jansson
 * values, as kubectl's YAML library (go-yaml v2, under sigs.k8s.io/yaml)
 * reads them. Nodes are built on an explicit stack of open collections;
 * an alias shares its anchor's value (a reference, not a copy), and its
 * size and depth are counted as if it were copied, so an alias bomb (in
 * values or in bytes) or a deep alias chain is refused before anyone walks
 * the tree or copies a string out of it.
 *
 * Where go-yaml v2 and the YAML spec differ, kubectl is followed: a merge
 * key ("<<") overwrites the keys written before it in its mapping (those
 * after it win), and in a list of merged mappings the earlier ones win.
 * Unlike kubectl, a key written twice in one mapping is refused rather
 * than the last one silently taken.
 */
#include "kube/yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Deeper than any kubeconfig; also bounds what an alias may bring in. */
#define DEPTH_MAX 64
/* What aliases may add to the document when expanded: a real
 * kubeconfig's aliases add a few dozen values; a billion laughs adds 10^9,
 * and a megabyte string aliased a thousand times adds a gigabyte. */
#define ALIAS_VALUES_MAX 100000
#define ALIAS_BYTES_MAX (4u << 20)

#define YAML_TAG "tag:yaml.org,2002:"

/* A node's size with its aliases expanded. */
struct extent {
	size_t values;
	size_t bytes;       /* of its scalars, keys included */
	unsigned height;    /* collections nested in it, itself included */
};

struct anchor {
	char *name;
	json_t *value;
	struct extent ext;
};

/* An open mapping or sequence. */
struct frame {
	json_t *node;
	char *anchor;        /* registered when the node ends */
	json_t *written;     /* mappings: keys written in it (not merged) */
	char *key;           /* mappings: the key waiting for its value */
	bool merge;          /* that key is "<<" */
	struct extent ext;
};

struct reader {
	yaml_parser_t parser;
	const char *text;
	size_t len;
	struct frame stack[DEPTH_MAX];
	size_t depth;
	struct anchor *anchors;
	size_t n_anchors;
	struct extent aliased;   /* what aliases added */
	json_t *root;
	struct err *e;
};

/* Marks are 0-based; messages count from 1. The column goes last, so
 * that "kubeconfig PATH: line N: what" still starts as users know it. */
static int fail(struct reader *r, yaml_mark_t at, const char *fmt, ...)
	ATTR_PRINTF(3, 4);

static int fail(struct reader *r, yaml_mark_t at, const char *fmt, ...)
{
	char what[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(r->e, KUBE_ECONFIG, "line %zu: %s (column %zu)",
		       at.line + 1, what, at.column + 1);
}

static int nomem(struct reader *r)
{
	return err_set(r->e, KUBE_ENOMEM, "out of memory");
}

/*
 * libyaml's message, said plainly for the mistakes people make most (a
 * tab, an unclosed quote, ": " inside a value, a line indented wrong);
 * anything else as libyaml says it, with where its construct started.
 */
static int parser_error(struct reader *r)
{
	const yaml_parser_t *p = &r->parser;
	const char *problem = p->problem ? p->problem : "unknown error";
	const char *context = p->context ? p->context : "";
	yaml_mark_t at = p->problem_mark;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		return nomem(r);
	case YAML_READER_ERROR:
		/* The reader knows the offset only. */
		at.line = at.column = 0;
		for (size_t i = 0; i < p->problem_offset; i++) {
			at.column = r->text[i] == '\n' ? 0 : at.column + 1;
			at.line += r->text[i] == '\n';
		}
		return fail(r, at, "%s (0x%02x)", problem,
			    (unsigned)p->problem_value);
	default:
		break;
	}
	if (strcmp(problem, "found character that cannot start any token")
	    == 0 && at.index < r->len && r->text[at.index] == '\t')
		return fail(r, at, "a tab in the indentation; YAML indents "
			    "with spaces");
	if (strcmp(context, "while scanning a quoted scalar") == 0 &&
	    strcmp(problem, "found unexpected end of stream") == 0)
		return fail(r, p->context_mark, "a quoted value is not closed");
	if (strcmp(problem, "mapping values are not allowed in this context")
	    == 0)
		return fail(r, at, "a value holds \": \"; quote it");
	if (strcmp(problem, "did not find expected key") == 0)
		return fail(r, at, "unexpected indentation, or a line that is "
			    "not \"key: value\"");
	if (!*context)
		return fail(r, at, "%s", problem);
	return fail(r, at, "%s (from line %zu), %s", context,
		    p->context_mark.line + 1, problem);
}

/* ---- scalars ---- */

static bool one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

static bool number_like(const char *s, bool *integer)
{
	const char *d = s + (*s == '-' || *s == '+');
	bool digits = false, dot = false, exp = false;

	*integer = true;
	if ((d[0] == '0' && (d[1] == 'x' || d[1] == 'o') && d[2]))
		return strspn(d + 2, "0123456789abcdefABCDEF") ==
		       strlen(d + 2);
	for (const char *c = d; *c; c++) {
		if (*c >= '0' && *c <= '9') {
			digits = true;
		} else if (*c == '.' && !dot && !exp) {
			dot = true;
			*integer = false;
		} else if ((*c == 'e' || *c == 'E') && digits && !exp) {
			exp = true;
			*integer = false;
			if (c[1] == '-' || c[1] == '+')
				c++;
			if (!c[1])
				return false;
		} else {
			return false;
		}
	}
	return digits;
}

/* A plain scalar typed as YAML 1.1 does (kubectl's reading): "yes" is a
 * boolean here as there, and kube/config.c insists on each field's type.
 * NULL only when out of memory. */
static json_t *plain_value(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL",
					     NULL };
	static const char *const trues[] = { "true", "True", "TRUE", "yes",
		"Yes", "YES", "on", "On", "ON", "y", "Y", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", "no",
		"No", "NO", "off", "Off", "OFF", "n", "N", NULL };
	bool integer;

	if (one_of(s, nulls))
		return json_null();
	if (one_of(s, trues))
		return json_true();
	if (one_of(s, falses))
		return json_false();
	if (number_like(s, &integer)) {
		char *end;

		errno = 0;
		if (integer) {
			long long v = strtoll(s, &end, 0);

			if (!errno && !*end)
				return json_integer(v);
		} else {
			double v = strtod(s, &end);

			if (!errno && !*end)
				return json_real(v);
		}
	}
	return json_string(s);
}

/*
 * A scalar's value: quoted and block scalars are strings, plain ones are
 * typed; the standard tags force a type (the text must fit it), the
 * non-specific "!" and unknown tags mean a string, as in kubectl.
 */
static int scalar_value(struct reader *r, const yaml_event_t *ev,
			json_t **out)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	const char *type = NULL;

	*out = NULL;
	if (tag && strncmp(tag, YAML_TAG, strlen(YAML_TAG)) == 0) {
		type = tag + strlen(YAML_TAG);
		if (strcmp(type, "str") == 0)
			plain = false;
		else if (strcmp(type, "int") && strcmp(type, "float") &&
			 strcmp(type, "bool") && strcmp(type, "null"))
			return fail(r, ev->start_mark, "the tag !!%s is not "
				    "supported", type);
		else
			plain = true;
	} else if (tag) {
		plain = false;
	}
	if (!plain || strlen(s) != len)
		*out = json_stringn(s, len);
	else
		*out = plain_value(s);
	if (!*out)
		return nomem(r);
	if (!type || strcmp(type, "str") == 0 ||
	    (strcmp(type, "int") == 0 && json_is_integer(*out)) ||
	    (strcmp(type, "float") == 0 && json_is_number(*out)) ||
	    (strcmp(type, "bool") == 0 && json_is_boolean(*out)) ||
	    (strcmp(type, "null") == 0 && json_is_null(*out)))
		return 0;
	json_decref(*out);
	*out = NULL;
	return fail(r, ev->start_mark, "\"%.100s\" does not fit its tag "
		    "!!%s", s, type);
}

/* ---- anchors ---- */

static const struct anchor *find_anchor(const struct reader *r,
					const char *name)
{
	/* An anchor may be defined again; the latest counts. */
	for (size_t i = r->n_anchors; i-- > 0;)
		if (strcmp(r->anchors[i].name, name) == 0)
			return &r->anchors[i];
	return NULL;
}

static int add_anchor(struct reader *r, const char *name, json_t *value,
		      struct extent ext)
{
	struct anchor *grown, *a;

	if (!name)
		return 0;
	grown = realloc(r->anchors, (r->n_anchors + 1) * sizeof(*grown));
	if (!grown)
		return nomem(r);
	r->anchors = grown;
	a = &r->anchors[r->n_anchors];
	a->name = strdup(name);
	if (!a->name)
		return nomem(r);
	a->value = json_incref(value);
	a->ext = ext;
	r->n_anchors++;
	return 0;
}

/* ---- building ---- */

static struct frame *top(struct reader *r)
{
	return r->depth ? &r->stack[r->depth - 1] : NULL;
}

static bool wants_key(struct reader *r)
{
	struct frame *f = top(r);

	return f && json_is_object(f->node) && !f->key;
}

static void frame_release(struct frame *f)
{
	json_decref(f->node);
	json_decref(f->written);
	free(f->anchor);
	free(f->key);
	memset(f, 0, sizeof(*f));
}

/* "<<: value": its mapping's keys, or those of each mapping in a list
 * (the earlier ones winning), overwrite what the mapping has so far. */
static int merge(struct reader *r, json_t *obj, json_t *v, yaml_mark_t at)
{
	size_t i;
	json_t *m;

	if (json_is_object(v))
		return json_object_update(obj, v) ? nomem(r) : 0;
	json_array_foreach(v, i, m)
		if (!json_is_object(m))
			break;
	if (!json_is_array(v) || i < json_array_size(v))
		return fail(r, at, "a merge key (<<) needs a mapping, an "
			    "alias of one, or a list of them");
	for (i = json_array_size(v); i-- > 0;)
		if (json_object_update(obj, json_array_get(v, i)))
			return nomem(r);
	return 0;
}

/*
 * A finished value (a reference the callee takes) into the collection
 * that holds it, or as the document.
 */
static int place(struct reader *r, json_t *v, struct extent ext,
		 yaml_mark_t at)
{
	struct frame *f = top(r);
	int rc = 0;

	if (!f) {
		r->root = v;
		return 0;
	}
	if (r->depth + ext.height > DEPTH_MAX) {
		json_decref(v);
		return fail(r, at, "nested too deeply (through an alias)");
	}
	f->ext.values += ext.values;
	f->ext.bytes += ext.bytes;
	if (f->ext.height < ext.height + 1)
		f->ext.height = ext.height + 1;
	if (json_is_array(f->node)) {
		if (json_array_append_new(f->node, v))
			rc = nomem(r);
	} else if (f->merge) {
		rc = merge(r, f->node, v, at);
		json_decref(v);
	} else if (json_object_set_new(f->node, f->key, v) ||
		   json_object_set_new(f->written, f->key, json_true())) {
		rc = nomem(r);
	}
	free(f->key);
	f->key = NULL;
	f->merge = false;
	return rc;
}

/* The key of the mapping on top, from a scalar or an alias of one. */
static int take_key(struct reader *r, const char *key, size_t len,
		    bool merge_key, yaml_mark_t at)
{
	struct frame *f = top(r);

	if (strlen(key) != len)
		return fail(r, at, "a key holds a NUL character");
	if (!merge_key && json_object_get(f->written, key))
		return fail(r, at, "the key \"%.100s\" appears twice", key);
	f->key = strdup(key);
	if (!f->key)
		return nomem(r);
	f->merge = merge_key;
	f->ext.values++;
	f->ext.bytes += len;
	return 0;
}

static int on_scalar(struct reader *r, const yaml_event_t *ev)
{
	const char *tag = (const char *)ev->data.scalar.tag;
	struct extent ext = { 1, ev->data.scalar.length, 0 };
	json_t *v;
	int rc = scalar_value(r, ev, &v);

	if (!rc)
		rc = add_anchor(r, (const char *)ev->data.scalar.anchor, v,
				ext);
	if (rc) {
		json_decref(v);
		return rc;
	}
	if (!wants_key(r))
		return place(r, v, ext, ev->start_mark);
	json_decref(v);
	return take_key(r, (const char *)ev->data.scalar.value,
			ev->data.scalar.length,
			(ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
			 !tag && strcmp((const char *)ev->data.scalar.value,
					"<<") == 0) ||
			(tag && strcmp(tag, YAML_TAG "merge") == 0),
			ev->start_mark);
}

static int on_alias(struct reader *r, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	const struct anchor *a = find_anchor(r, name);

	if (!a) {
		for (size_t i = 0; i < r->depth; i++)
			if (r->stack[i].anchor &&
			    strcmp(r->stack[i].anchor, name) == 0)
				return fail(r, ev->start_mark, "the alias "
					    "*%.100s is inside its own anchor",
					    name);
		return fail(r, ev->start_mark, "the alias *%.100s names no "
			    "anchor before it", name);
	}
	r->aliased.values += a->ext.values;
	r->aliased.bytes += a->ext.bytes;
	if (r->aliased.values > ALIAS_VALUES_MAX ||
	    r->aliased.bytes > ALIAS_BYTES_MAX)
		return fail(r, ev->start_mark, "aliases expand the document "
			    "by more than %d values or %u MiB, as an alias "
			    "bomb does", ALIAS_VALUES_MAX,
			    ALIAS_BYTES_MAX >> 20);
	if (wants_key(r)) {
		if (!json_is_string(a->value))
			return fail(r, ev->start_mark, "the alias *%.100s is "
				    "a key but not a string", name);
		return take_key(r, json_string_value(a->value),
				json_string_length(a->value), false,
				ev->start_mark);
	}
	return place(r, json_incref(a->value), a->ext, ev->start_mark);
}

static int on_start(struct reader *r, const yaml_event_t *ev, bool mapping)
{
	const char *anchor = (const char *)(mapping
		? ev->data.mapping_start.anchor
		: ev->data.sequence_start.anchor);
	struct frame *f;

	if (wants_key(r))
		return fail(r, ev->start_mark, "complex keys (a mapping or "
			    "list as a key) are not supported");
	if (r->depth == DEPTH_MAX)
		return fail(r, ev->start_mark, "nested too deeply");
	f = &r->stack[r->depth++];
	f->node = mapping ? json_object() : json_array();
	f->written = mapping ? json_object() : NULL;
	f->anchor = anchor ? strdup(anchor) : NULL;
	f->ext = (struct extent){ 1, 0, 1 };
	if (!f->node || (mapping && !f->written) || (anchor && !f->anchor))
		return nomem(r);
	return 0;
}

static int on_end(struct reader *r, const yaml_event_t *ev)
{
	struct frame f = r->stack[--r->depth];
	int rc;

	memset(&r->stack[r->depth], 0, sizeof(f));
	rc = add_anchor(r, f.anchor, f.node, f.ext);
	if (!rc) {
		rc = place(r, f.node, f.ext, ev->start_mark);
		f.node = NULL;
	}
	frame_release(&f);
	return rc;
}

/* One event; *done once the first document has ended. */
static int on_event(struct reader *r, const yaml_event_t *ev, bool *done)
{
	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return err_set(r->e, KUBE_ECONFIG, "the document is empty");
	case YAML_DOCUMENT_END_EVENT:
		/* kubectl reads the first document and ignores the rest,
		 * without even parsing it. */
		*done = true;
		return 0;
	case YAML_SCALAR_EVENT:
		return on_scalar(r, ev);
	case YAML_ALIAS_EVENT:
		return on_alias(r, ev);
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		return on_start(r, ev, ev->type == YAML_MAPPING_START_EVENT);
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		return on_end(r, ev);
	default:
		return 0;
	}
}

int yaml_parse(const char *text, size_t len, json_t **out, struct err *e)
{
	struct reader r = { .text = text, .len = len, .e = e };
	bool done = false;
	int rc = 0;

	*out = NULL;
	if (!yaml_parser_initialize(&r.parser))
		return nomem(&r);
	yaml_parser_set_input_string(&r.parser, (const unsigned char *)text,
				     len);
	while (!rc && !done) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&r.parser, &ev))
			rc = parser_error(&r);
		else {
			rc = on_event(&r, &ev, &done);
			yaml_event_delete(&ev);
		}
	}
	while (r.depth)
		frame_release(&r.stack[--r.depth]);
	for (size_t i = 0; i < r.n_anchors; i++) {
		free(r.anchors[i].name);
		json_decref(r.anchors[i].value);
	}
	free(r.anchors);
	yaml_parser_delete(&r.parser);
	if (rc)
		json_decref(r.root);
	else
		*out = r.root;
	return rc;
}
