/*
 * opt.c: options declared as a table and parsed GNU style, so that every
 * command gets the same syntax, the same errors and a usage text generated
 * from the same table it parses with.
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Internal marker from the per-argument parsers; never a negated code. */
#define HELP_SEEN (-1000)

static const struct opt *find_long(const struct opt *opts, const char *name,
				   size_t len)
{
	for (const struct opt *o = opts; o->kind != OPT_END; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

static const struct opt *find_short(const struct opt *opts, char c)
{
	for (const struct opt *o = opts; o->kind != OPT_END; o++)
		if (o->short_name && o->short_name == c)
			return o;
	return NULL;
}

static int parse_uint(const struct opt *o, const char *arg, struct err *e)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < o->min ||
	    v > o->max)
		return err_set(e, COMMON_EUSAGE,
			       "--%s wants a whole number from %u to %u, not '%s'",
			       o->name, o->min, o->max, arg);
	*(unsigned *)o->value = (unsigned)v;
	return 0;
}

/* Seconds, or a number with a unit: 90, 0.5, 90s, 30m, 6h, 2d. */
static int parse_seconds(const struct opt *o, const char *arg, struct err *e)
{
	char *end;
	double v, unit = 1;

	errno = 0;
	v = strtod(arg, &end);
	if (end != arg && *end && !end[1]) {
		switch (*end) {
		case 's': unit = 1; end++; break;
		case 'm': unit = 60; end++; break;
		case 'h': unit = 3600; end++; break;
		case 'd': unit = 86400; end++; break;
		}
	}
	v *= unit;
	if (errno || end == arg || *end || !(v >= 0) || v > 4e6)
		return err_set(e, COMMON_EUSAGE,
			       "--%s wants a duration like 30, 0.5, 90s, 30m, 6h or 2d (at most 46d), not '%s'",
			       o->name, arg);
	*(unsigned *)o->value = (unsigned)(v * 1000.0 + 0.5);
	return 0;
}

static int parse_choice(const struct opt *o, const char *arg, struct err *e)
{
	char list[256] = "";

	for (int i = 0; o->choices[i]; i++) {
		if (!strcmp(o->choices[i], arg)) {
			*(int *)o->value = i;
			return 0;
		}
		if (i)
			strncat(list, ", ", sizeof(list) - strlen(list) - 1);
		strncat(list, o->choices[i], sizeof(list) - strlen(list) - 1);
	}
	return err_set(e, COMMON_EUSAGE, "--%s must be one of %s, not '%s'",
		       o->name, list, arg);
}

static int apply(const struct opt *o, const char *arg, struct err *e)
{
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)o->value = true;
		return 0;
	case OPT_STRING:
	case OPT_OPTIONAL:
		*(const char **)o->value = arg;
		return 0;
	case OPT_LIST:
		if (strlist_push(o->value, arg))
			return err_set(e, COMMON_ENOMEM, "out of memory");
		return 0;
	case OPT_UINT:
		return parse_uint(o, arg, e);
	case OPT_SECONDS:
		return parse_seconds(o, arg, e);
	case OPT_CHOICE:
		return parse_choice(o, arg, e);
	case OPT_END:
		break;
	}
	return err_set(e, COMMON_EINVAL, "bad option table entry --%s", o->name);
}

/* Handles one "--name[=value]" and returns how many argv slots it used, or a
 * negative value after filling e. */
static int parse_long(const struct opt *opts, int argc, char **argv, int i,
		      struct err *e)
{
	const char *name = argv[i] + 2;
	const char *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct opt *o = find_long(opts, name, len);

	if (!o) {
		if (len == 4 && !strncmp(name, "help", 4))
			return HELP_SEEN;
		err_set(e, COMMON_EUSAGE, "unknown option '--%.*s'", (int)len,
			name);
		return -COMMON_EUSAGE;
	}
	if (o->kind == OPT_FLAG) {
		if (eq) {
			err_set(e, COMMON_EUSAGE, "--%s takes no value", o->name);
			return -COMMON_EUSAGE;
		}
		return apply(o, NULL, e) ? -COMMON_EUSAGE : 1;
	}
	if (eq || o->kind == OPT_OPTIONAL)
		return apply(o, eq ? eq + 1 : "", e) ? -COMMON_EUSAGE : 1;
	if (i + 1 >= argc) {
		err_set(e, COMMON_EUSAGE, "--%s needs a value (%s)", o->name,
			o->arg ? o->arg : "VALUE");
		return -COMMON_EUSAGE;
	}
	return apply(o, argv[i + 1], e) ? -COMMON_EUSAGE : 2;
}

static int parse_short(const struct opt *opts, int argc, char **argv, int i,
		       struct err *e)
{
	const char *p = argv[i] + 1;

	for (; *p; p++) {
		const struct opt *o = find_short(opts, *p);
		if (!o) {
			if (*p == 'h')
				return HELP_SEEN;
			err_set(e, COMMON_EUSAGE, "unknown option '-%c'", *p);
			return -COMMON_EUSAGE;
		}
		if (o->kind == OPT_FLAG) {
			if (apply(o, NULL, e))
				return -COMMON_EUSAGE;
			continue;
		}
		if (p[1] || o->kind == OPT_OPTIONAL)
			return apply(o, p + 1, e) ? -COMMON_EUSAGE : 1;
		if (i + 1 >= argc) {
			err_set(e, COMMON_EUSAGE, "-%c needs a value (%s)", *p,
				o->arg ? o->arg : "VALUE");
			return -COMMON_EUSAGE;
		}
		return apply(o, argv[i + 1], e) ? -COMMON_EUSAGE : 2;
	}
	return 1;
}

/* Two options of one name: the second could never be given. A table
 * that says so is the program's mistake, refused before anything is
 * parsed so that every test of the command finds it. */
static int check_unique(const struct opt *opts, struct err *e)
{
	for (const struct opt *o = opts; o->kind != OPT_END; o++)
		if (o->name && find_long(o + 1, o->name, strlen(o->name)))
			return err_set(e, COMMON_EINVAL, "internal error: "
				       "option --%s is defined twice", o->name);
	return 0;
}

int opt_parse(const struct opt *opts, int argc, char **argv,
	      struct strlist *pos, bool stop_at_first_positional,
	      struct err *e)
{
	int i = 1;

	if (check_unique(opts, e))
		return e->code;

	while (i < argc) {
		const char *a = argv[i];
		int used;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			if (strlist_push(pos, a))
				return err_set(e, COMMON_ENOMEM, "out of memory");
			i++;
			if (stop_at_first_positional)
				break;
			continue;
		}
		used = a[1] == '-' ? parse_long(opts, argc, argv, i, e)
				   : parse_short(opts, argc, argv, i, e);
		if (used == HELP_SEEN)
			return OPT_HELP;
		if (used < 0)
			return -used;
		i += used;
	}
	for (; i < argc; i++)
		if (strlist_push(pos, argv[i]))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	return OPT_OK;
}

/* Writes text from column 32, wrapped to 79 columns. */
static void wrap_help(FILE *f, const char *text, size_t col)
{
	const size_t indent = 32, width = 79;

	while (*text) {
		size_t room = width - indent, len = strlen(text), cut = len;

		if (col < indent)
			fprintf(f, "%*s", (int)(indent - col), "");
		if (len > room) {
			cut = room;
			while (cut > 0 && text[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = room;
		}
		fprintf(f, "%.*s\n", (int)cut, text);
		text += cut;
		while (*text == ' ')
			text++;
		col = 0;
	}
}

void opt_usage(FILE *f, const char *usage, const struct opt *opts)
{
	fprintf(f, "%s\n", usage);
	if (opts[0].kind != OPT_END)
		fprintf(f, "\nOptions:\n");
	for (const struct opt *o = opts; o->kind != OPT_END; o++) {
		char left[64];
		int n;

		if (o->short_name)
			n = snprintf(left, sizeof(left), "  -%c, --%s",
				     o->short_name, o->name);
		else
			n = snprintf(left, sizeof(left), "      --%s", o->name);
		if (o->kind != OPT_FLAG && n > 0 && (size_t)n < sizeof(left))
			snprintf(left + n, sizeof(left) - (size_t)n,
				 o->kind == OPT_OPTIONAL ? "[=%s]" : " %s",
				 o->arg ? o->arg : "VALUE");
		fputs(left, f);
		if (strlen(left) > 30) {
			fputc('\n', f);
			wrap_help(f, o->help, 0);
		} else {
			wrap_help(f, o->help, strlen(left));
		}
	}
	fprintf(f, "  -h, --help                    show this help\n");
}

struct opt *opt_end(struct opt *opts)
{
	while (opts->kind != OPT_END)
		opts++;
	return opts;
}

int opt_parse_command(const struct opt *opts, int argc, char **argv,
		      const char *name, const char *usage,
		      bool stop_at_first_positional, struct strlist *pos)
{
	struct err e;
	int rc;

	err_init(&e);
	rc = opt_parse(opts, argc, argv, pos, stop_at_first_positional, &e);
	if (rc == OPT_HELP) {
		opt_usage(stdout, usage, opts);
		return 0;
	}
	if (rc) {
		log_error("%s (see %s --help)", e.msg, name);
		return EXIT_USAGE;
	}
	return -1;
}
