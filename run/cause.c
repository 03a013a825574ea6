/*
 * run/cause.c: why a generation ended (run.h, struct gen_cause): the
 * classes, a log's signature and tail, and the rule that says two
 * failures are the same one repeating.
 *
 * A deterministic failure (a bad flag, a port taken, a shape that does
 * not fit) ends every generation at the step it restored, with the same
 * status and the same last line but for its numbers (a pid, a port, an
 * address, a time). Progress between two failures, another status, or
 * another last line is a different failure, or a flaky one: restarting
 * may help those.
 */
#include "run/run.h"

#include "run/spec_util.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cause_class_names[CAUSE_NCLASSES] = {
	"trainer", "hang", "preflight", "infrastructure", "operator",
};

int cause_class_of(const char *name)
{
	for (int i = 0; i < CAUSE_NCLASSES; i++)
		if (name && !strcmp(name, cause_class_names[i]))
			return i;
	return -1;
}

void gen_cause_init(struct gen_cause *c, int cls, const char *kind,
		    const char *worker)
{
	memset(c, 0, sizeof(*c));
	c->cls = cls;
	c->exit_code = -1;
	c->step = -1;
	c->restored = -1;
	spec_copy_text(c->kind, sizeof(c->kind), kind);
	spec_copy_text(c->worker, sizeof(c->worker), worker);
}

void cause_set_tail(struct gen_cause *c, const char *text)
{
	spec_copy_text(c->tail, sizeof(c->tail), text);
}

/* The line before end (exclusive) in text, skipping blank ones: its
 * start and length; false when none is left. */
static bool prev_line(const char *text, const char **end, const char **line,
		      size_t *len)
{
	const char *p = *end;

	while (p > text) {
		const char *e = p, *b;

		while (e > text && (e[-1] == '\n' || e[-1] == '\r'))
			e--;
		b = e;
		while (b > text && b[-1] != '\n')
			b--;
		*end = b;
		p = b;
		for (const char *q = b; q < e; q++)
			if (!isspace((unsigned char)*q)) {
				*line = b;
				*len = (size_t)(e - b);
				return true;
			}
	}
	return false;
}

/* A run of hex characters at p, with a digit in it: its length. */
static size_t hex_word(const char *p)
{
	size_t n = 0;
	bool digit = false;

	while (isxdigit((unsigned char)p[n])) {
		digit |= isdigit((unsigned char)p[n]) != 0;
		n++;
	}
	return digit ? n : 0;
}

void cause_signature(const char *text, char *out, size_t cap)
{
	const char *end = text ? text + strlen(text) : NULL, *line;
	size_t len, o = 0;

	if (!cap)
		return;
	out[0] = '\0';
	if (!text || !prev_line(text, &end, &line, &len))
		return;
	for (size_t i = 0; i < len && o + 1 < cap;) {
		const char *p = line + i;
		bool word_start = i == 0 || !isalnum((unsigned char)p[-1]);
		size_t n = 0;

		if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
		    isxdigit((unsigned char)p[2]))
			n = 2 + strspn(p + 2, "0123456789abcdefABCDEF");
		else if (word_start && hex_word(p) >= 8)
			n = hex_word(p);
		else if (isdigit((unsigned char)*p))
			n = strspn(p, "0123456789");
		if (n) {
			out[o++] = '#';
			i += n < len - i ? n : len - i;
			continue;
		}
		out[o++] = *p;
		i++;
	}
	out[o] = '\0';
}

void cause_tail(const char *text, unsigned n, char *out, size_t cap)
{
	const char *end = text ? text + strlen(text) : NULL;
	const char *line[8];
	size_t len[8], k = 0;
	struct buf b;

	if (!cap)
		return;
	out[0] = '\0';
	if (n > 8)
		n = 8;
	while (text && k < n && prev_line(text, &end, &line[k], &len[k]))
		k++;
	buf_init(&b);
	/* Oldest first, as they were printed. */
	while (k-- > 0)
		if (buf_appendf(&b, "%.*s%s", (int)len[k], line[k],
				k ? " | " : ""))
			break;
	spec_copy_text(out, cap, b.data ? b.data : "");
	buf_release(&b);
}

static bool near_restore(const struct gen_cause *c)
{
	return c->step < 0 || c->step <= c->restored + CAUSE_SAME_WAY_STEPS;
}

bool cause_same_way(const struct gen_cause *a, const struct gen_cause *b)
{
	return a->cls == CAUSE_TRAINER && b->cls == CAUSE_TRAINER &&
	       !strcmp(a->kind, b->kind) && a->exit_code == b->exit_code &&
	       a->signal == b->signal && a->restored == b->restored &&
	       near_restore(a) && near_restore(b) &&
	       !strcmp(a->signature, b->signature);
}

/* c as a JSON object, without the tail, the signature and the host's
 * blame when told. */
static json_t *cause_object(const struct gen_cause *c, bool tail, bool sig,
			    bool host)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "class",
			      c->cls >= 0 && c->cls < CAUSE_NCLASSES
				      ? cause_class_names[c->cls] : "",
			      "kind", c->kind, "worker", c->worker);
	int bad = !o;

	if (!bad && c->exit_code >= 0)
		bad |= json_object_set_new(o, "exit_code",
					   json_integer(c->exit_code));
	if (!bad && c->signal)
		bad |= json_object_set_new(o, "signal",
					   json_integer(c->signal));
	if (!bad && c->step >= 0)
		bad |= json_object_set_new(o, "step", json_integer(c->step));
	if (!bad && c->restored >= 0)
		bad |= json_object_set_new(o, "restored",
					   json_integer(c->restored));
	if (!bad && c->notice)
		bad |= json_object_set_new(o, "notice", json_true());
	if (!bad && host && c->host[0])
		bad |= json_object_set_new(o, "host", json_string(c->host));
	if (!bad && host && c->blame[0])
		bad |= json_object_set_new(o, "blame", json_string(c->blame));
	if (!bad && sig && c->signature[0])
		bad |= json_object_set_new(o, "signature",
					   json_string(c->signature));
	if (!bad && tail && c->tail[0])
		bad |= json_object_set_new(o, "tail", json_string(c->tail));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int cause_details(const struct gen_cause *c, char *out, size_t cap)
{
	for (int cut = 0; cut < 4; cut++) {
		json_t *o = cause_object(c, cut < 1, cut < 2, cut < 3);
		char *text = o ? json_dumps(o, JSON_COMPACT |
						       JSON_PRESERVE_ORDER)
			       : NULL;
		bool fits = text && strlen(text) < cap;

		if (fits)
			memcpy(out, text, strlen(text) + 1);
		free(text);
		json_decref(o);
		if (fits)
			return 0;
	}
	if (cap)
		out[0] = '\0';
	return -1;
}

int cause_class_in(const char *details, char *kind, size_t cap)
{
	json_t *d = details && *details ? json_loads(details, 0, NULL) : NULL;
	int k = cause_class_of(json_string_value(json_object_get(d, "class")));

	spec_copy_text(kind, cap,
		       json_string_value(json_object_get(d, "kind")));
	json_decref(d);
	return k;
}

void cause_describe(const struct gen_cause *c, char *out, size_t cap)
{
	char how[48], at[64];

	if (c->exit_code >= 0)
		snprintf(how, sizeof(how), "exit %d", c->exit_code);
	else if (c->signal)
		snprintf(how, sizeof(how), "%s %d",
			 strcmp(c->kind, "oom") ? "signal" : "OOM kill, signal",
			 c->signal);
	else
		snprintf(how, sizeof(how), "%s", c->kind);
	if (c->step >= 0)
		snprintf(at, sizeof(at), " at step %lld (restored %lld)",
			 (long long)c->step, (long long)c->restored);
	else
		snprintf(at, sizeof(at), " before a step (restored %lld)",
			 (long long)(c->restored < 0 ? 0 : c->restored));
	snprintf(out, cap, "%s%s on %s: %s", how, at, c->worker,
		 c->tail[0] ? c->tail : "(no output)");
}
