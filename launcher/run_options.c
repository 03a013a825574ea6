/*
 * run_options.c: see run_options.h.
 */
#include "launcher/run_options.h"
#include "launcher/hosts.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger than any job.json the launcher writes (job.c reads 1 MiB). */
#define JOB_READ_MAX ((size_t)1 << 20)
/* control.json keeps 255 bytes of a reason. */
#define RUN_REASON_MAX 200

void run_options_table(struct run_options *ro, struct opt *opts)
{
	const struct opt table[RUN_OPTIONS_COUNT] = {
		{ .name = "bucket", .kind = OPT_STRING, .value = &ro->bucket,
		  .arg = "URL",
		  .help = "where runs live: gs://BUCKET[/PREFIX] or "
			  "file:///DIR (default: $SLICECTL_BUCKET)" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &ro->format,
		  .arg = "text|json", .choices = format_names,
		  .help = "json: one JSON object on stdout" },
	};

	for (size_t i = 0; i < RUN_OPTIONS_COUNT; i++)
		opts[i] = table[i];
}

/* A run's name becomes one component of its URL. */
static bool run_name_ok(const char *run)
{
	if (!*run || !strcmp(run, ".") || !strcmp(run, ".."))
		return false;
	for (const char *p = run; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/*
 * A file:// run that does not exist is said so before the store is
 * opened: opening creates the directory, and looking must not. Returns 0
 * to go on (also for URLs store_open will refuse with a better message).
 */
static int file_run_missing(const char *url, bool *missing)
{
	const char *path = url + strlen("file://");
	struct stat st;

	*missing = false;
	if (strncmp(url, "file://", 7))
		return 0;
	if (!strncmp(path, "localhost/", 10))
		path += 9;
	if (path[0] != '/')
		return 0;
	if (stat(path, &st) != 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return errno;
		*missing = true;
	} else if (!S_ISDIR(st.st_mode)) {
		*missing = true;
	}
	return 0;
}

static int not_found(const struct run_options *ro, const char *bucket)
{
	if (ro->quiet_missing)
		return EXIT_NOT_FOUND;
	log_error("no run %s under %s (no %s/%s)", ro->run, bucket, ro->url,
		  RUN_JOB);
	return EXIT_NOT_FOUND;
}

int run_open(struct run_options *ro, const char *run)
{
	char *data = NULL;
	const char *bucket;
	size_t len, blen;
	bool missing;
	struct err e;
	int status = EXIT_USAGE, rc;

	job_init(&ro->job);
	ro->run = strdup(run);
	if (!ro->run) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	if (!run_name_ok(ro->run)) {
		log_error("'%s' is not a run's name: RUN is one name, without "
			  "'/' (the bucket goes in --bucket)", ro->run);
		goto out;
	}
	bucket = ro->bucket && *ro->bucket ? ro->bucket
					   : getenv("SLICECTL_BUCKET");
	if (!bucket || !*bucket) {
		log_error("no bucket: pass --bucket gs://BUCKET[/PREFIX] (or "
			  "file:///DIR) or set SLICECTL_BUCKET");
		goto out;
	}
	ro->bucket = bucket;
	blen = strlen(bucket);
	while (blen > 1 && bucket[blen - 1] == '/')
		blen--;
	len = blen + strlen(ro->run) + 2;
	ro->url = malloc(len);
	if (!ro->url) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	snprintf(ro->url, len, "%.*s/%s", (int)blen, bucket, ro->run);
	rc = file_run_missing(ro->url, &missing);
	if (rc) {
		log_error("%s: %s", ro->url, strerror(rc));
		status = 1;
		goto out;
	}
	if (missing) {
		status = not_found(ro, bucket);
		goto out;
	}
	err_init(&e);
	rc = store_open(&ro->store, ro->url, &e);
	if (!rc)
		rc = store_read(ro->store, RUN_JOB, JOB_READ_MAX, &data, &len,
				NULL, &e);
	if (rc == CLOUD_ENOTFOUND) {
		status = not_found(ro, bucket);
		goto out;
	}
	if (rc == CLOUD_EINVAL) {
		log_error("%s/%s is larger than %zu bytes: not a job spec",
			  ro->url, RUN_JOB, JOB_READ_MAX);
		status = 1;
		goto out;
	}
	if (rc) {
		status = run_exit_status(rc, &e);
		goto out;
	}
	rc = job_parse(data, len, &ro->job, &e);
	if (rc) {
		log_error("%s/%s: %s", ro->url, RUN_JOB, e.msg);
		status = 1;
		goto out;
	}
	status = -1;
out:
	free(data);
	return status;
}

int run_command_start(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct run_options *ro)
{
	struct strlist pos;
	char name[64];
	int status;

	job_init(&ro->job);
	snprintf(name, sizeof(name), "slicectl %s", argv[0]);
	strlist_init(&pos);
	status = opt_parse_command(opts, argc, argv, name, usage, false, &pos);
	if (status < 0 && pos.n != 1) {
		log_error("%s (see %s --help)",
			  pos.n ? "too many arguments: give one RUN"
				: "missing the run's name (RUN)",
			  name);
		status = EXIT_USAGE;
	}
	if (status < 0)
		status = run_open(ro, pos.v[0]);
	strlist_release(&pos);
	return status;
}

void run_options_release(struct run_options *ro)
{
	if (!ro)
		return;
	store_close(ro->store);
	ro->store = NULL;
	free(ro->url);
	ro->url = NULL;
	free(ro->run);
	ro->run = NULL;
	job_release(&ro->job);
}

int run_exit_status(int rc, const struct err *e)
{
	log_error("%s", e->msg);
	switch (rc) {
	case CLOUD_OK:
		return 0;
	case CLOUD_EURL:
		return EXIT_USAGE;
	case CLOUD_ENOTFOUND:
		return EXIT_NOT_FOUND;
	default:
		return 1;
	}
}

int run_control_peek(struct run_options *ro, struct control *c, bool *found,
		     struct err *e)
{
	bool exists;
	int rc;

	memset(c, 0, sizeof(*c));
	c->restore_step = -1;
	*found = false;
	rc = store_exists(ro->store, RUN_CONTROL, &exists, e);
	if (rc || !exists)
		return rc;
	rc = control_load(ro->store, c, e);
	if (!rc)
		*found = true;
	return rc;
}

/* 0 for text control.json keeps as it is; -1 for invalid UTF-8; else the
 * first control character. */
static int reason_problem(const char *s)
{
	if (!json_utf8_valid(s, strlen(s)))
		return -1;
	for (const char *p = s; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
			return (unsigned char)*p;
	return 0;
}

/* USER@HOST of whoever runs this slicectl, each part cut to fit. */
static void operator_name(char *out, size_t cap)
{
	char host[256] = "";
	const char *user = getenv("USER");

	if (!user || !*user) {
		struct passwd *pw = getpwuid(getuid());

		user = pw && pw->pw_name ? pw->pw_name : "?";
	}
	if (gethostname(host, sizeof(host) - 1) != 0 || !*host)
		snprintf(host, sizeof(host), "?");
	snprintf(out, cap, "%.30s@%.30s", user, host);
}

void run_default_reason(char *out, size_t cap, const char *what)
{
	char who[64];

	operator_name(who, sizeof(who));
	if (cap > RUN_REASON_MAX + 1)
		cap = RUN_REASON_MAX + 1;
	snprintf(out, cap, "%s by %s (slicectl, pid %ld)", what, who,
		 (long)getpid());
	/* What control.json keeps must read back as written. */
	if (reason_problem(out))
		snprintf(out, cap, "%s (slicectl, pid %ld)", what,
			 (long)getpid());
}

void run_operator_cause(struct gen_cause *c, const char *kind,
			const char *why)
{
	char who[64];

	operator_name(who, sizeof(who));
	gen_cause_init(c, CAUSE_OPERATOR, kind, who);
	cause_set_tail(c, why);
}

/* Checks a --reason: valid UTF-8, at most 200 bytes, no control
 * characters but tabs. Logs what is wrong and returns false. */
static bool run_reason_ok(const char *reason)
{
	size_t n = strlen(reason);
	int c = reason_problem(reason);

	if (n > RUN_REASON_MAX) {
		log_error("--reason is %zu bytes long; at most %d fit", n,
			  RUN_REASON_MAX);
		return false;
	}
	if (c < 0) {
		log_error("--reason is not valid UTF-8");
		return false;
	}
	if (c > 0) {
		log_error("--reason holds a control character (0x%02x)", c);
		return false;
	}
	return true;
}

json_t *run_json_text(const char *s)
{
	struct buf b;
	json_t *v;

	if (!s)
		return json_null();
	if (json_utf8_valid(s, strlen(s)))
		return json_string(s);
	buf_init(&b);
	if (json_append_string(&b, s, strlen(s))) {
		buf_release(&b);
		return NULL;
	}
	v = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
	buf_release(&b);
	return v;
}

json_t *run_control_json(const struct run_options *ro,
			 const struct control *c)
{
	json_t *o = json_object();

	json_object_set_new(o, "run", run_json_text(ro->run));
	json_object_set_new(o, "url", run_json_text(ro->url));
	json_object_set_new(o, "state", run_json_text(c->state));
	json_object_set_new(o, "generation", json_integer(c->generation));
	json_object_set_new(o, "reason", run_json_text(c->reason));
	json_object_set_new(o, "updated_by", run_json_text(c->updated_by));
	json_object_set_new(o, "time", run_json_text(c->time));
	return o;
}

void run_print_json(json_t *v)
{
	char *text = v ? json_dumps(v, JSON_PRESERVE_ORDER) : NULL;

	if (text) {
		printf("%s\n", text);
		free(text);
	} else {
		log_error("out of memory");
	}
	json_decref(v);
}

int run_change_start(int argc, char **argv, const char *usage,
		     const char *what, struct run_options *ro, char *reason,
		     size_t cap)
{
	const char *given = NULL;
	char help[128];
	struct opt opts[RUN_OPTIONS_COUNT + 2] = {
		{ .name = "reason", .kind = OPT_STRING, .value = &given,
		  .arg = "TEXT", .help = help },
	};
	int status;

	snprintf(help, sizeof(help),
		 "why, for control.json and the supervisors' logs "
		 "(default: %s by USER@HOST)", what);
	run_options_table(ro, opts + 1);
	status = run_command_start(opts, argc, argv, usage, ro);
	if (status >= 0)
		return status;
	if (given && !run_reason_ok(given))
		return EXIT_USAGE;
	if (given)
		snprintf(reason, cap, "%s", given);
	else
		run_default_reason(reason, cap, what);
	return -1;
}
