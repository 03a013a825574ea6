/*
 * yaml.c: the kubeconfig subset of YAML (see yaml.h). The document is cut
 * into lines (indent, text), and block nodes are read by recursive
 * descent on the indents. A sequence item "- key: v" is read by moving
 * the line's indent past the dash, so the item is an ordinary block node.
 * Scalars may run over several lines (gcloud and kubectl fold long
 * strings): continuation lines are those indented deeper than the
 * scalar's parent, joined by a space, or by newlines where blank lines
 * were.
 * Plain scalars are typed as kubectl's YAML library (YAML 1.1) types them,
 * so "yes" is a boolean here as there; kube/config.c then insists on the
 * type each field must have.
 */
#include "kube/yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Deeper than any kubeconfig; stops a hostile file from eating the stack. */
#define DEPTH_MAX 64

struct yline {
	unsigned no;     /* 1-based, for messages */
	int indent;      /* columns of spaces before text */
	char *text;      /* trailing blanks removed, never empty */
	unsigned blanks_before; /* blank lines just before it */
	bool comment_before;    /* a comment line just before it */
};

/* The parent indent of what cannot run over lines (keys). */
#define NO_CONTINUATION (1 << 30)

struct yparser {
	struct yline *lines;
	size_t n;
	size_t i;        /* the next line to read */
	unsigned depth;
	struct err *e;
};

static int fail(struct yparser *p, unsigned no, const char *what)
{
	return err_set(p->e, KUBE_ECONFIG, "line %u: %s", no, what);
}

static struct yline *cur(struct yparser *p)
{
	return p->i < p->n ? &p->lines[p->i] : NULL;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Whether only blanks and a comment are left. */
static bool rest_empty(const char *s)
{
	while (blank(*s))
		s++;
	return *s == '\0' || *s == '#';
}

static bool seq_item(const char *text)
{
	return text[0] == '-' && (text[1] == ' ' || text[1] == '\0');
}

/* ---- scalars ---- */

static int put_utf8(struct buf *b, unsigned long cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return buf_append(b, u, n);
}

static bool hex_value(const char *s, int digits, unsigned long *out)
{
	unsigned long v = 0;

	for (int i = 0; i < digits; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		v = v * 16 + d;
	}
	*out = v;
	return true;
}

/* The escapes of a double-quoted scalar that has a single-character
 * meaning. */
static char simple_escape(char c)
{
	switch (c) {
	case '"': return '"';
	case '\\': return '\\';
	case '/': return '/';
	case '0': return '\0';
	case 'a': return '\a';
	case 'b': return '\b';
	case 't': return '\t';
	case 'n': return '\n';
	case 'v': return '\v';
	case 'f': return '\f';
	case 'r': return '\r';
	case 'e': return '\x1b';
	case ' ': return ' ';
	default: return 1; /* not one of them */
	}
}

/*
 * The next line, when it continues a scalar whose parent is at parent
 * (it is deeper): the separator for the line break goes onto b (a space,
 * or a newline per blank line; nothing after an escaped line break) and
 * the line is taken. NULL when the scalar has ended.
 */
static struct yline *continuation(struct yparser *p, int parent,
				  bool escaped_break, struct buf *b,
				  int *rc)
{
	struct yline *l = cur(p);

	*rc = 0;
	if (!l || l->indent <= parent || parent == NO_CONTINUATION)
		return NULL;
	if (l->comment_before) {
		*rc = fail(p, l->no, "a comment inside a value that runs "
			   "over several lines");
		return NULL;
	}
	for (unsigned i = 0; i < l->blanks_before && !*rc; i++)
		*rc = buf_append(b, "\n", 1);
	if (!l->blanks_before && !escaped_break && !*rc)
		*rc = buf_append(b, " ", 1);
	if (*rc) {
		*rc = err_set(p->e, KUBE_ENOMEM, "out of memory");
		return NULL;
	}
	p->i++;
	return l;
}

/*
 * A quoted scalar starting at s (at its quote) into b; *end is set past
 * the closing quote, which may be on a later line (see continuation).
 */
static int quoted(struct yparser *p, unsigned *no, const char *s,
		  int parent, struct buf *b, const char **end)
{
	char q = *s++;

	if (buf_appends(b, ""))
		return err_set(p->e, KUBE_ENOMEM, "out of memory");
	for (;;) {
		char c = *s;
		int rc = 0;
		bool escaped_break = c == '\\' && q == '"' && s[1] == '\0';

		if (c == '\0' || escaped_break) {
			struct yline *l = continuation(p, parent,
						       escaped_break, b, &rc);

			if (rc)
				return rc;
			if (!l)
				return fail(p, *no, "a quoted value is not "
					    "closed");
			s = l->text;
			*no = l->no;
			continue;
		}
		if (c == q && q == '\'' && s[1] == '\'') {
			rc = buf_append(b, "'", 1);
			s += 2;
		} else if (c == q) {
			*end = s + 1;
			return 0;
		} else if (c == '\\' && q == '"') {
			char x = s[1];
			char simple = simple_escape(x);
			unsigned long cp;
			int digits = x == 'x' ? 2 : x == 'u' ? 4
					   : x == 'U' ? 8 : 0;

			if (simple != 1) {
				rc = buf_append(b, &simple, 1);
				s += 2;
			} else if (digits && hex_value(s + 2, digits, &cp)) {
				s += 2 + digits;
				/* A UTF-16 surrogate pair, as JSON writes
				 * characters beyond the BMP. */
				if (cp >= 0xd800 && cp < 0xdc00 &&
				    s[0] == '\\' && s[1] == 'u') {
					unsigned long lo;

					if (hex_value(s + 2, 4, &lo) &&
					    lo >= 0xdc00 && lo < 0xe000) {
						cp = 0x10000 +
						     ((cp - 0xd800) << 10) +
						     (lo - 0xdc00);
						s += 6;
					}
				}
				if ((cp >= 0xd800 && cp < 0xe000) ||
				    cp > 0x10ffff)
					return fail(p, *no, "an escape in a "
						    "quoted value is not a "
						    "Unicode character");
				rc = put_utf8(b, cp);
			} else {
				return fail(p, *no, "unknown escape in a "
					    "double-quoted value");
			}
		} else {
			rc = buf_append(b, s, 1);
			s++;
		}
		if (rc)
			return err_set(p->e, KUBE_ENOMEM, "out of memory");
	}
}

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

/* A plain scalar typed as YAML 1.1 does (kubectl's reading). */
static json_t *plain_value(const char *s)
{
	static const char *const nulls[] = { "~", "null", "Null", "NULL",
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

static int flow(struct yparser *p, unsigned no, const char *s, json_t **out)
{
	json_error_t je;
	char msg[300];

	*out = json_loads(s, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY |
				     JSON_REJECT_DUPLICATES, &je);
	if (!*out) {
		snprintf(msg, sizeof(msg), "a [ ] or { } value that is not "
			 "JSON (%s) is not supported; write it as a block or "
			 "quote its strings", je.text);
		return fail(p, no, msg);
	}
	if (!rest_empty(s + je.position)) {
		json_decref(*out);
		*out = NULL;
		return fail(p, no, "text after a [ ] or { } value");
	}
	return 0;
}

/* The length of the plain scalar text at s: up to a comment, trailing
 * blanks dropped. *comment: a comment ends it. */
static size_t plain_len(const char *s, bool *comment)
{
	size_t n;

	for (n = 0; s[n]; n++)
		if (s[n] == '#' && n && blank(s[n - 1]))
			break;
	*comment = s[n] == '#';
	while (n && blank(s[n - 1]))
		n--;
	return n;
}

static int plain_part(struct yparser *p, unsigned no, const char *s,
		      size_t n, struct buf *b)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == ':' && (i + 1 == n || blank(s[i + 1])))
			return fail(p, no, "a value holds \": \"; quote it");
	if (buf_append(b, s, n))
		return err_set(p->e, KUBE_ENOMEM, "out of memory");
	return 0;
}

/* The value that starts at s (on line no, the current line being the
 * next one), running over the lines deeper than parent. */
static int inline_value(struct yparser *p, unsigned no, const char *s,
			int parent, json_t **out)
{
	struct buf b;
	const char *end;
	size_t n;
	bool comment;
	int rc;

	*out = NULL;
	switch (*s) {
	case '"':
	case '\'':
		buf_init(&b);
		rc = quoted(p, &no, s, parent, &b, &end);
		if (!rc && !rest_empty(end))
			rc = fail(p, no, "text after a quoted value");
		if (!rc && !(*out = json_stringn(b.data, b.len)))
			rc = fail(p, no, "a quoted value is not UTF-8");
		buf_release(&b);
		return rc;
	case '[':
	case '{':
		return flow(p, no, s, out);
	case '&':
	case '*':
	case '!':
		return fail(p, no, "anchors, aliases and tags (&, *, !) are "
			    "not supported");
	case '|':
	case '>':
		return fail(p, no, "block scalars (| and >) are not "
			    "supported; write the value on one line");
	case '%':
	case '@':
	case '`':
		return fail(p, no, "a value cannot start with %, @ or `; "
			    "quote it");
	default:
		break;
	}
	if (seq_item(s))
		return fail(p, no, "a sequence cannot start on its key's "
			    "line");
	/* A plain scalar ends where a comment starts. */
	buf_init(&b);
	n = plain_len(s, &comment);
	rc = plain_part(p, no, s, n, &b);
	while (!rc && !comment) {
		struct yline *l = continuation(p, parent, false, &b, &rc);

		if (!l)
			break;
		if (seq_item(l->text))
			rc = fail(p, l->no, "a sequence item inside a value "
				  "that runs over several lines");
		else
			rc = plain_part(p, l->no, l->text,
					plain_len(l->text, &comment), &b);
	}
	if (!rc && buf_appends(&b, ""))
		rc = err_set(p->e, KUBE_ENOMEM, "out of memory");
	if (!rc && !(*out = plain_value(b.data)))
		rc = err_set(p->e, KUBE_ENOMEM, "out of memory");
	buf_release(&b);
	return rc;
}

/*
 * Whether text is "key: ..." (or "key:"). If so, *key gets the key
 * (malloc'd) and *rest what follows the colon. Returns -1 when it is not
 * a key line, else 0 or an error.
 */
static int split_key(struct yparser *p, unsigned no, const char *text,
		     char **key, const char **rest)
{
	const char *colon = NULL;

	*key = NULL;
	if ((text[0] == '?' && (text[1] == ' ' || !text[1])))
		return fail(p, no, "complex keys (\"? \") are not supported");
	if (text[0] == '"' || text[0] == '\'') {
		struct buf b;
		const char *end;
		int rc;

		buf_init(&b);
		/* A quote not closed on its line starts a value over
		 * several lines (keys are one line); a bad escape is
		 * reported when the value is read. */
		rc = quoted(p, &no, text, NO_CONTINUATION, &b, &end);
		while (!rc && blank(*end))
			end++;
		if (rc || *end != ':' || (end[1] && !blank(end[1]))) {
			buf_release(&b);
			return -1;
		}
		if (strlen(b.data) != b.len) {
			buf_release(&b);
			return fail(p, no, "a key holds a NUL character");
		}
		*key = buf_detach(&b);
		*rest = end + 1;
		return 0;
	}
	if (strchr("[{&*!|>%@`#", text[0]))
		return -1;
	for (const char *c = text; *c; c++) {
		if (*c == '#' && c > text && blank(c[-1]))
			return -1;
		if (*c == ':' && (c[1] == '\0' || blank(c[1]))) {
			colon = c;
			break;
		}
	}
	if (!colon)
		return -1;
	while (colon > text && blank(colon[-1]))
		colon--;
	*key = strndup(text, (size_t)(colon - text));
	if (!*key)
		return err_set(p->e, KUBE_ENOMEM, "out of memory");
	*rest = strchr(colon, ':') + 1;
	return 0;
}

/* ---- blocks ---- */

static int block(struct yparser *p, int parent, json_t **out);

/* What follows "key:" or "-" with nothing after it on the line: a deeper
 * block, a sequence at the same indent (for a key), or null. */
static int nested(struct yparser *p, int indent, bool after_key,
		  json_t **out)
{
	struct yline *l = cur(p);

	if (l && (l->indent > indent ||
		  (after_key && l->indent == indent && seq_item(l->text))))
		return block(p, indent, out);
	*out = json_null();
	return 0;
}

static int check_deeper(struct yparser *p, int indent)
{
	struct yline *l = cur(p);

	if (l && l->indent > indent)
		return fail(p, l->no, "unexpected indentation (values over "
			    "several lines are not supported)");
	return 0;
}

static int sequence(struct yparser *p, int indent, json_t *arr)
{
	struct yline *l;

	while ((l = cur(p)) && l->indent == indent && seq_item(l->text)) {
		size_t skip = 1;
		json_t *item = NULL;
		int rc;

		while (blank(l->text[skip]))
			skip++;
		if (rest_empty(l->text + skip)) {
			p->i++;
			rc = nested(p, indent, false, &item);
		} else {
			/* "- x": x is a block node one column past the
			 * blanks after the dash. */
			l->indent += (int)skip;
			l->text += skip;
			rc = block(p, indent, &item);
		}
		if (!rc && json_array_append_new(arr, item))
			rc = err_set(p->e, KUBE_ENOMEM, "out of memory");
		if (!rc)
			rc = check_deeper(p, indent);
		if (rc)
			return rc;
	}
	return 0;
}

static int mapping(struct yparser *p, int indent, json_t *obj)
{
	struct yline *l;

	while ((l = cur(p)) && l->indent == indent) {
		const char *rest;
		char *key;
		json_t *value = NULL;
		unsigned no = l->no;
		int rc;

		if (seq_item(l->text))
			return fail(p, no, "a sequence item where a key was "
				    "expected");
		rc = split_key(p, no, l->text, &key, &rest);
		if (rc == -1)
			return fail(p, no, "expected \"key: value\"");
		if (rc)
			return rc;
		if (json_object_get(obj, key)) {
			char msg[200];

			snprintf(msg, sizeof(msg), "the key \"%.100s\" appears "
				 "twice", key);
			free(key);
			return fail(p, no, msg);
		}
		while (blank(*rest))
			rest++;
		p->i++;
		if (rest_empty(rest)) {
			rc = nested(p, indent, true, &value);
		} else {
			rc = inline_value(p, no, rest, indent, &value);
			if (!rc)
				rc = check_deeper(p, indent);
		}
		/* json_object_set_new takes value even when it fails. */
		if (rc)
			json_decref(value);
		else if (json_object_set_new(obj, key, value))
			rc = err_set(p->e, KUBE_ENOMEM, "out of memory");
		free(key);
		if (!rc)
			rc = check_deeper(p, indent);
		if (rc)
			return rc;
	}
	return 0;
}

/* The block node on the current line, at that line's indent, inside a
 * node at parent. */
static int block(struct yparser *p, int parent, json_t **out)
{
	struct yline *l = cur(p);
	int indent = l->indent;
	const char *rest;
	char *key;
	int rc;

	*out = NULL;
	if (++p->depth > DEPTH_MAX)
		return fail(p, l->no, "nested too deeply");
	if (seq_item(l->text)) {
		*out = json_array();
		rc = *out ? sequence(p, indent, *out)
			  : err_set(p->e, KUBE_ENOMEM, "out of memory");
	} else if ((rc = split_key(p, l->no, l->text, &key, &rest)) == 0) {
		free(key);
		*out = json_object();
		rc = *out ? mapping(p, indent, *out)
			  : err_set(p->e, KUBE_ENOMEM, "out of memory");
	} else if (rc == -1) {
		p->i++;
		rc = inline_value(p, l->no, l->text, parent, out);
		if (!rc)
			rc = check_deeper(p, indent);
	}
	p->depth--;
	if (rc) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- lines ---- */

static bool marker(const char *text, const char *m)
{
	return strncmp(text, m, 3) == 0 && rest_empty(text + 3) &&
	       (text[3] == '\0' || blank(text[3]));
}

/* Cuts the copy into lines, skipping blank and comment lines. */
static int split_lines(struct yparser *p, char *text)
{
	unsigned no = 0, blanks = 0;
	bool content = false, ended = false, comment = false;
	char *s = text;

	while (*s) {
		char *eol = strchr(s, '\n');
		char *next = eol ? eol + 1 : s + strlen(s);
		int indent = 0;
		size_t len;

		no++;
		if (eol)
			*eol = '\0';
		len = strlen(s);
		while (len && (blank(s[len - 1]) || s[len - 1] == '\r'))
			s[--len] = '\0';
		while (s[indent] == ' ')
			indent++;
		if (s[indent] == '\t')
			return fail(p, no, "a tab in the indentation (YAML "
				    "indents with spaces)");
		if (s[indent] == '\0' || s[indent] == '#') {
			if (s[indent] == '#')
				comment = true;
			else
				blanks++;
			s = next;
			continue;
		}
		if (indent == 0 && marker(s, "---")) {
			if (content)
				return fail(p, no, "more than one document");
			s = next;
			continue;
		}
		if (indent == 0 && marker(s, "...")) {
			ended = true;
			s = next;
			continue;
		}
		if (ended || (indent == 0 && s[0] == '%'))
			return fail(p, no, ended ? "text after the end of the "
				    "document (...)" : "directives (%) are not "
				    "supported");
		content = true;
		if (p->n % 64 == 0) {
			struct yline *grown = realloc(
				p->lines, (p->n + 64) * sizeof(*grown));

			if (!grown)
				return err_set(p->e, KUBE_ENOMEM,
					       "out of memory");
			p->lines = grown;
		}
		p->lines[p->n++] = (struct yline){ no, indent, s + indent,
						   blanks, comment };
		blanks = 0;
		comment = false;
		s = next;
	}
	return 0;
}

static int json_document(const char *text, size_t len, json_t **out,
			 struct err *e)
{
	json_error_t je;

	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!*out)
		return err_set(e, KUBE_ECONFIG, "line %d: not JSON: %s",
			       je.line, je.text);
	return 0;
}

int yaml_parse(const char *text, size_t len, json_t **out, struct err *e)
{
	struct yparser p = { .e = e };
	size_t skip = 0;
	char *copy;
	int rc;

	*out = NULL;
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		skip = 3;
	if (memchr(text + skip, '\0', len - skip))
		return err_set(e, KUBE_ECONFIG, "a NUL byte: not a text "
			       "file");
	while (skip < len && strchr(" \t\r\n", text[skip]))
		skip++;
	if (skip < len && text[skip] == '{')
		return json_document(text + skip, len - skip, out, e);
	copy = strndup(text + skip, len - skip);
	if (!copy)
		return err_set(e, KUBE_ENOMEM, "out of memory");
	rc = split_lines(&p, copy);
	if (!rc && p.n == 0)
		rc = err_set(e, KUBE_ECONFIG, "the document is empty");
	if (!rc && p.lines[0].indent != 0)
		rc = fail(&p, p.lines[0].no, "the document's first line is "
			  "indented");
	if (!rc)
		rc = block(&p, -1, out);
	if (!rc && cur(&p))
		rc = fail(&p, cur(&p)->no, "unexpected indentation");
	if (rc) {
		json_decref(*out);
		*out = NULL;
	}
	free(p.lines);
	free(copy);
	return rc;
}
