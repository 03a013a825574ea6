/*
 * common: the few things every part of slicectl needs: an error value with a
 * printable message, growable buffers, monotonic time, backoff with jitter,
 * shell quoting, a table-driven option parser and logging.
 *
 * Conventions: functions return 0 on success or a positive error code and,
 * when given a struct err, fill it with a message a user can act on.
 */
#ifndef SLICECTL_COMMON_H
#define SLICECTL_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define ATTR_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* err.c */
enum common_error {
	COMMON_OK = 0,
	COMMON_ENOMEM,
	COMMON_EINVAL,
	COMMON_EIO,
	COMMON_EUSAGE,
};

struct err {
	int code;
	char msg[1024];
};

void err_init(struct err *e);
/* Sets the error and returns code, so callers can `return err_set(...)`. */
int err_set(struct err *e, int code, const char *fmt, ...) ATTR_PRINTF(3, 4);
/* Like err_set, with ": strerror(errnum)" appended. */
int err_errno(struct err *e, int code, int errnum, const char *fmt, ...)
	ATTR_PRINTF(4, 5);
/* Puts "context: " in front of the message already held. */
void err_prefix(struct err *e, const char *fmt, ...) ATTR_PRINTF(2, 3);

/* buf.c: a growable byte buffer, always NUL-terminated when data != NULL. */
struct buf {
	char *data;
	size_t len;
	size_t cap;
};

void buf_init(struct buf *b);
void buf_release(struct buf *b);
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_appends(struct buf *b, const char *s);
int buf_appendf(struct buf *b, const char *fmt, ...) ATTR_PRINTF(2, 3);
void buf_consume(struct buf *b, size_t n);
void buf_reset(struct buf *b);
/* Hands the data over to the caller (who frees it) and empties b. */
char *buf_detach(struct buf *b);

/* strlist.c: an owned list of strings. */
struct strlist {
	char **v;
	size_t n;
	size_t cap;
};

void strlist_init(struct strlist *l);
void strlist_release(struct strlist *l);
int strlist_push(struct strlist *l, const char *s);

/* clock.c */
uint64_t mono_ms(void);
uint64_t mono_us(void);
/* The current UTC time as "YYYY-MM-DDTHH:MM:SSZ" (the epoch if the clock
 * cannot be read). */
void rfc3339_now(char *out, size_t cap);
/* Seconds since the epoch of an RFC 3339 time ("2025-01-31T12:00:00Z",
 * fractions and offsets too); (time_t)-1 when t is not one. */
time_t rfc3339_parse(const char *t);

/* backoff.c: exponential backoff with full jitter. */
struct backoff {
	unsigned base_ms;
	unsigned max_ms;
	unsigned attempt;
	uint64_t rng;
};

void backoff_init(struct backoff *b, unsigned base_ms, unsigned max_ms,
		  uint64_t seed);
unsigned backoff_next_ms(struct backoff *b);

/* shquote.c: POSIX shell quoting. */
int shq_append(struct buf *b, const char *s);
bool env_name_valid(const char *name, size_t len);

/* base64.c: decodes into out (at most cap bytes); COMMON_EINVAL when in is
 * not base64 or does not fit. Whitespace is skipped. */
int base64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
		  size_t *out_len);

/* json.c: a JSON string literal (quotes included) from any bytes; invalid
 * UTF-8 becomes U+FFFD. */
int json_append_string(struct buf *b, const char *s, size_t n);
/* Whether s[0..n) is valid UTF-8 (no overlongs, no surrogates), the bytes
 * json_append_string keeps as they are, and the text Jansson accepts. */
bool json_utf8_valid(const char *s, size_t n);

/* opt.c: options declared as a table, GNU style (--name=value, --name value,
 * -x value, "--" ends options, positionals may be mixed in). */
enum opt_kind {
	OPT_END = 0,
	OPT_FLAG,    /* bool */
	OPT_STRING,  /* const char * (points into argv) */
	OPT_LIST,    /* struct strlist, one entry per use */
	OPT_UINT,    /* unsigned, within [min, max] */
	OPT_SECONDS, /* unsigned milliseconds, given as seconds (may be 0.5) */
	OPT_CHOICE,  /* int index into choices, a NULL-terminated array */
};

struct opt {
	const char *name;  /* long name without "--" */
	char short_name;   /* 0 if none */
	enum opt_kind kind;
	void *value;
	const char *arg;   /* argument name in usage, e.g. "FILE" */
	const char *help;
	unsigned min, max;              /* OPT_UINT */
	const char *const *choices;     /* OPT_CHOICE */
};

enum opt_result {
	OPT_OK = 0,
	OPT_HELP = -1, /* --help or -h was given */
};

/* Parses argv[1..argc-1]. Positionals, including everything after "--", are
 * appended to pos (pointers into argv). Returns OPT_OK, OPT_HELP, or
 * COMMON_EUSAGE with e naming the bad option. */
int opt_parse(const struct opt *opts, int argc, char **argv,
	      struct strlist *pos, bool stop_at_first_positional,
	      struct err *e);
void opt_usage(FILE *f, const char *usage, const struct opt *opts);

/* The exit status of a command given bad arguments. */
#define OPT_EXIT_USAGE 2

/* How every command turns argv into options, so --help and bad flags read
 * the same everywhere: name is how the command is typed ("slicectl run").
 * Returns -1 to go on; 0 after printing usage for --help; OPT_EXIT_USAGE
 * after saying what was wrong and where help is. */
int opt_parse_command(const struct opt *opts, int argc, char **argv,
		      const char *name, const char *usage,
		      bool stop_at_first_positional, struct strlist *pos);

/* log.c: leveled logging to stderr, prefixed with the program name. */
enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_setup(const char *progname, enum log_level level);
enum log_level log_level(void);
void log_msg(enum log_level level, const char *fmt, ...) ATTR_PRINTF(2, 3);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { \
		if (log_level() >= LOG_DEBUG) \
			log_msg(LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
