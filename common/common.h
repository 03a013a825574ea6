/*
 * common: the few things every part of slicectl needs: an error value with a
 * printable message, growable buffers, monotonic time, backoff with jitter,
 * shell quoting, a table-driven option parser, logging, what HTTP answers
 * say (reason phrases, Retry-After), and the file and process chores
 * (atomic writes, mkdir -p, sleeping, a signal self-pipe, helper threads
 * that take no signals).
 *
 * Conventions: functions return 0 on success or a positive error code and,
 * when given a struct err, fill it with a message a user can act on.
 */
#ifndef SLICECTL_COMMON_H
#define SLICECTL_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
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

/* env_number.c: environment variable name's number, from min to max;
 * dflt when it is unset or empty, or (with a warning) not such a number. */
unsigned env_number(const char *name, unsigned long min, unsigned long max,
		    unsigned dflt);

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
	OPT_OPTIONAL, /* const char *: "" when given alone; a value only as
			 --name=VALUE (a word after it stays positional) */
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
/* How many entries a table declared as an array holds. */
#define OPT_COUNT(table) (sizeof(table) / sizeof((table)[0]))
/* The OPT_END entry that ends opts: where a command splices a shared table
 * in after its own entries. Sized from what it splices (its own entries,
 * each shared table's most, one end) and zeroed, the command's table then
 * never has an entry written over, however many each splice wrote. */
struct opt *opt_end(struct opt *opts);

/* The exit status of a command given bad arguments, in every binary
 * (slicectl, slice-supervisor, the checkpoint CLI): nothing was started. */
#define EXIT_USAGE 2

/* How every command turns argv into options, so --help and bad flags read
 * the same everywhere: name is how the command is typed ("slicectl run").
 * Returns -1 to go on; 0 after printing usage for --help; EXIT_USAGE
 * after saying what was wrong and where help is. */
int opt_parse_command(const struct opt *opts, int argc, char **argv,
		      const char *name, const char *usage,
		      bool stop_at_first_positional, struct strlist *pos);

/* fs.c: files a reader (or a crash) never finds half written. These return
 * 0 or an errno value; e, when given, says what failed and names the path
 * (code COMMON_EIO, or COMMON_ENOMEM), so a caller may keep the message and
 * set its own part's code. */

/* Writes all len bytes, going on after EINTR and short writes. Returns 0 or
 * an errno value. */
int fs_write_all(int fd, const void *data, size_t len);
/* mkdir -p: makes path and each missing folder above it with mode (umask
 * applied). An existing directory is fine; anything else in the way fails
 * with ENOTDIR and e names it. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);
/* mkdir -p of the folder holding path (everything before its last '/'). */
int fs_mkdir_parents(const char *path, mode_t mode, struct err *e);
/* The last max bytes of the file at path, from offset from on,
 * NUL-terminated (*len, when not NULL, their count; malloc'd), or NULL
 * when it cannot be read or memory ran out. */
char *fs_read_tail(const char *path, off_t from, size_t max, size_t *len);
/* fs_tree.c: removes path and everything below it, at any depth, without
 * following symlinks; read-only directories are made writable first.
 * Returns 0 (also when path is gone already) or an errno. */
int fs_remove_tree(const char *path);
/* Puts data at path whole or not at all: writes a temporary file in the
 * same folder with mode (umask applied), fsyncs it, renames it over path
 * (replace) or links it to path failing with EEXIST if path exists
 * (!replace: of writers racing to create it, one wins), then fsyncs the
 * folder. Nothing is left behind on failure. */
int fs_write_atomic(const char *path, const void *data, size_t len,
		      mode_t mode, bool replace, struct err *e);

/* proc.c */

/* Sleeps ms milliseconds. A signal handler that runs meanwhile ends the
 * sleep early (returns EINTR) unless restart is true, in which case the
 * sleep resumes for the time left: ask for restart when nothing a handler
 * sets is checked after the sleep, and for none when the caller must see a
 * signal (an interrupt flag) at once. Returns 0 after the whole time. */
int proc_sleep_ms(uint64_t ms, bool restart);

/* The self-pipe trick, one per process: a signal handler only writes the
 * signal's number as one byte to a pipe a poll loop watches, so the loop
 * does the work outside the handler. self_pipe_open makes the pipe (both
 * ends O_CLOEXEC | O_NONBLOCK, fd[0] to read); self_pipe_catch installs the
 * handler for sigs[0..n) writing to write_fd (errno kept; a full pipe drops
 * the byte, the reader has enough to wake for). restart asks for
 * SA_RESTART; without it a blocking call returns EINTR so its caller sees
 * the signal. Other writers may share the pipe: signal numbers are below
 * 65, so letters from them never read as a signal. */
int self_pipe_open(int fd[2], struct err *e);
int self_pipe_catch(int write_fd, const int *sigs, size_t n, bool restart,
		    struct err *e);
/* Puts sigs back to their default action and closes both ends. */
void self_pipe_release(int fd[2], const int *sigs, size_t n);

/* The user name slicectl logs in as when none is given, on plain hosts and
 * TPU VMs alike (and the one ssh-keys metadata names, so the two agree):
 * the name of the effective uid, as ssh takes it; else $USER (a uid with no
 * passwd entry, in a container); else "root". cap of 256 holds any. */
#define USER_NAME_MAX 256
void default_remote_user(char *out, size_t cap);
/* The user's home: $HOME, else the effective uid's passwd entry (valid until
 * the next getpw* call); NULL when neither names one. */
const char *home_dir(void);

/* http_words.c: what HTTP answers say, read one way by cloud/ and kube/. */

/* "Not Found" for 404; "" for a status without one here. */
const char *http_reason_phrase(long status);
/* The wait a Retry-After header's value asks for, in ms: delay-seconds
 * (capped at an hour), or an HTTP-date less than an hour after now; 0
 * when it says neither. Whitespace around the value is fine. */
unsigned http_retry_after_ms(const char *value, time_t now);
/* SLICECTL_HTTP_RETRY_BASE_MS, the first retry's pause that tests and
 * slow links set for every client's backoff (HTTP, Kubernetes, the
 * checkpoint shipper): a number of ms from 1 to below
 * HTTP_RETRY_BASE_MAX_MS; 0 when unset or not one. */
#define HTTP_RETRY_BASE_MAX_MS 60000u
unsigned http_retry_base_ms(void);

/* thread.c: starts fn(arg) on a new thread with every signal blocked in
 * it (the caller's own mask is left as it was): helper threads never run
 * a signal handler, the thread with the signal loop does. Returns 0 or
 * pthread_create's error. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* A condition variable whose timed waits run on mono_ms's clock. Returns 0
 * or an errno value. */
int mono_cond_init(pthread_cond_t *cv);
/* Waits on cv (mu held) until woken or mono_ms() reaches deadline_ms;
 * UINT64_MAX waits without a limit. Returns 0 or ETIMEDOUT. cv must come
 * from mono_cond_init. */
int mono_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
			 uint64_t deadline_ms);
/* A periodic worker's wait between rounds (mu held): until *stop or
 * mono_ms() reaches *next. false when stopping; else true, with *next
 * moved period_ms past now for the round after this one. */
bool mono_cond_tick(pthread_cond_t *cv, pthread_mutex_t *mu,
		    const bool *stop, uint64_t *next, unsigned period_ms);

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
