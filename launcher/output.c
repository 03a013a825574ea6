/*
 * output.c: whole lines with host prefixes, per-host log files, and the
 * summary. Chunks are split into lines without copying where a line is
 * complete within its chunk; only a partial line is kept, per host and
 * stream, until its end arrives (or it reaches MAX_LINE and goes out as a
 * line of its own, so a stream without newlines cannot grow memory).
 */
#include "launcher/output.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINE (64u * 1024u)

static const char *const stream_names[] = { "stdout", "stderr" };

int output_init(struct output *o, const struct output_config *c,
		const struct fanout_target *t, size_t n, struct err *e)
{
	int rc;

	memset(o, 0, sizeof(*o));
	o->cfg = *c;
	o->targets = t;
	o->n = n;
	buf_init(&o->scratch);
	o->hosts = calloc(n, sizeof(*o->hosts));
	if (!o->hosts)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int w = (int)strlen(t[i].label);

		o->hosts[i].log_fd = -1;
		if (w > o->label_width)
			o->label_width = w;
	}
	if (c->log_dir && (rc = fs_mkdir_p(c->log_dir, 0777, NULL)))
		return err_errno(e, COMMON_EIO, rc,
				 "cannot create log directory %s", c->log_dir);
	/* Output is flushed once per loop iteration, not once per line. */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	setvbuf(stderr, NULL, _IOFBF, 1 << 16);
	return 0;
}

void output_release(struct output *o)
{
	for (size_t i = 0; o->hosts && i < o->n; i++) {
		free(o->hosts[i].line[0].data);
		free(o->hosts[i].line[1].data);
		if (o->hosts[i].log_fd >= 0)
			close(o->hosts[i].log_fd);
	}
	free(o->hosts);
	buf_release(&o->scratch);
	o->hosts = NULL;
}

static void note_write(struct output *o, FILE *f)
{
	if (ferror(f) && !o->write_failed) {
		o->write_failed = true;
		o->write_errno = errno;
	}
}

static int open_log(struct output *o, size_t host)
{
	struct host_out *h = &o->hosts[host];
	char path[4096], name[512];
	size_t k = 0;

	if (h->log_fd >= 0 || !o->cfg.log_dir)
		return h->log_fd;
	/* A label is a host name or address; keep it a single file name. */
	for (const char *p = o->targets[host].label; *p && k + 1 < sizeof(name);
	     p++)
		name[k++] = (*p == '/' || *p == '\\') ? '_' : *p;
	name[k] = '\0';
	snprintf(path, sizeof(path), "%s/%s.log", o->cfg.log_dir, name);
	h->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (h->log_fd < 0)
		log_warn("cannot write %s: %s", path, strerror(errno));
	return h->log_fd;
}

static void emit_line(struct output *o, size_t host, int stream,
		      const char *text, size_t len, struct buf *log)
{
	const char *label = o->targets[host].label;

	if (log && (buf_appends(log, stream ? "err: " : "out: ") ||
		    buf_append(log, text, len) || buf_append(log, "\n", 1)))
		log_warn("out of memory for the log of %s", label);
	if (o->cfg.json) {
		struct buf *b = &o->scratch;

		buf_reset(b);
		if (buf_appends(b, "{\"type\":\"line\",\"host\":") ||
		    json_append_string(b, label, strlen(label)) ||
		    buf_appendf(b, ",\"stream\":\"%s\",\"text\":",
				stream_names[stream]) ||
		    json_append_string(b, text, len) ||
		    buf_appends(b, "}\n"))
			return;
		fwrite(b->data, 1, b->len, stdout);
		return;
	}
	FILE *f = stream ? stderr : stdout;
	fputs(label, f);
	fputs(stream ? "! " : ": ", f);
	fwrite(text, 1, len, f);
	fputc('\n', f);
}

static int line_append(struct line_buf *l, const char *p, size_t n)
{
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? l->cap : 256;
		char *d;

		while (cap < l->len + n)
			cap *= 2;
		d = realloc(l->data, cap);
		if (!d)
			return -1;
		l->data = d;
		l->cap = cap;
	}
	memcpy(l->data + l->len, p, n);
	l->len += n;
	return 0;
}

void output_chunk(void *ud, size_t host, enum fanout_stream s,
		  const char *data, size_t len)
{
	struct output *o = ud;
	struct line_buf *l = &o->hosts[host].line[s];
	int fd = open_log(o, host);
	struct buf log, *logp = fd >= 0 ? &log : NULL;

	buf_init(&log);
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;

		if (l->len + take >= MAX_LINE) {
			take = MAX_LINE - l->len;
			nl = NULL;
		}
		if (nl && l->len == 0) {
			emit_line(o, host, s, data, take, logp);
		} else if (line_append(l, data, take)) {
			log_warn("out of memory for output of %s",
				 o->targets[host].label);
		} else if (nl || l->len >= MAX_LINE) {
			emit_line(o, host, s, l->data, l->len, logp);
			l->len = 0;
		}
		data += take + (nl ? 1 : 0);
		len -= take + (nl ? 1 : 0);
	}
	if (logp && log.len)
		fs_write_all(fd, log.data, log.len);
	buf_release(&log);
}

int output_host_status(const struct fanout_result *r)
{
	static const struct {
		const char *name;
		int number;
	} signals[] = {
		{ "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT },
		{ "ILL", SIGILL },   { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },
		{ "BUS", SIGBUS },   { "FPE", SIGFPE },   { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
		{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	};

	switch (r->outcome) {
	case FANOUT_EXITED:
		return r->exit_status;
	case FANOUT_SIGNALED:
		for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
			if (!strcmp(signals[i].name, r->signal))
				return 128 + signals[i].number;
		return EXIT_FAILURE_SSH - 1;
	case FANOUT_TIMEOUT:
		return EXIT_TIMEOUT;
	case FANOUT_CANCELLED:
		return 0;
	case FANOUT_PENDING:
	case FANOUT_UNREACHABLE:
	case FANOUT_LOST:
		break;
	}
	return EXIT_FAILURE_SSH;
}

static void describe(const struct fanout_result *r, char *out, size_t len)
{
	switch (r->outcome) {
	case FANOUT_EXITED:
		snprintf(out, len, "exit %d", r->exit_status);
		break;
	case FANOUT_SIGNALED:
		snprintf(out, len, "signal %s", r->signal);
		break;
	default:
		snprintf(out, len, "%s", fanout_outcome_name(r->outcome));
	}
}

static double seconds(const struct fanout_result *r)
{
	if (!r->start_ms || r->end_ms < r->start_ms)
		return 0;
	return (double)(r->end_ms - r->start_ms) / 1000.0;
}

static void host_json(struct output *o, size_t host,
		      const struct fanout_result *r)
{
	const struct fanout_target *t = &o->targets[host];
	struct buf *b = &o->scratch;
	int rc;

	buf_reset(b);
	rc = buf_appends(b, "{\"type\":\"host\",\"host\":") ||
	     json_append_string(b, t->label, strlen(t->label)) ||
	     buf_appends(b, ",\"address\":") ||
	     json_append_string(b, t->host, strlen(t->host)) ||
	     buf_appendf(b, ",\"port\":%u,\"outcome\":\"%s\"", t->port,
			 fanout_outcome_name(r->outcome));
	if (!rc && r->outcome == FANOUT_EXITED)
		rc = buf_appendf(b, ",\"exit_status\":%d", r->exit_status);
	if (!rc && r->signal[0])
		rc = buf_appendf(b, ",\"signal\":\"%s\"", r->signal);
	if (!rc && r->outcome != FANOUT_EXITED && r->error[0])
		rc = buf_appends(b, ",\"error\":") ||
		     json_append_string(b, r->error, strlen(r->error));
	if (!rc)
		rc = buf_appendf(b,
				 ",\"status\":%d,\"duration_s\":%.3f,"
				 "\"bytes_out\":%llu,\"bytes_err\":%llu,"
				 "\"bytes_sent\":%llu,\"attempts\":%u}\n",
				 output_host_status(r), seconds(r),
				 (unsigned long long)r->bytes_out,
				 (unsigned long long)r->bytes_err,
				 (unsigned long long)r->bytes_in, r->attempts);
	if (!rc)
		fwrite(b->data, 1, b->len, stdout);
}

void output_done(void *ud, size_t host, const struct fanout_result *r)
{
	struct output *o = ud;
	struct host_out *h = &o->hosts[host];
	int fd = open_log(o, host);
	struct buf log, *logp = fd >= 0 ? &log : NULL;

	buf_init(&log);
	for (int s = 0; s < 2; s++) {
		if (h->line[s].len)
			emit_line(o, host, s, h->line[s].data, h->line[s].len,
				  logp);
		free(h->line[s].data);
		memset(&h->line[s], 0, sizeof(h->line[s]));
	}
	if (logp) {
		char what[64];

		describe(r, what, sizeof(what));
		buf_appendf(&log, "# %s after %.2f s%s%s\n", what, seconds(r),
			    r->outcome != FANOUT_EXITED && r->error[0] ? ": "
								       : "",
			    r->outcome != FANOUT_EXITED ? r->error : "");
		fs_write_all(fd, log.data, log.len);
		close(fd);
		h->log_fd = -1;
	}
	buf_release(&log);
	if (o->cfg.json)
		host_json(o, host, r);
}

void output_flush(void *ud)
{
	struct output *o = ud;

	fflush(stdout);
	fflush(stderr);
	note_write(o, stdout);
}

static void human_bytes(uint64_t v, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%llu B", (unsigned long long)v);
	else
		snprintf(out, len, "%.1f %s", d, units[u]);
}

struct tally {
	size_t ok, failed, timeout, cancelled, unreachable, lost;
};

static void summary_text(struct output *o, const struct fanout_result *r,
			 uint64_t wall_ms, const struct tally *t)
{
	int w = o->label_width < 4 ? 4 : o->label_width;
	char buf[256];

	fprintf(stderr, "\n%-*s  %-12s %8s %10s %10s%s\n", w, "HOST", "RESULT",
		"TIME", "STDOUT", "STDERR", o->cfg.sent_column ? "       SENT" : "");
	for (size_t i = 0; i < o->n; i++) {
		char what[64], out[32], errb[32], sent[32];

		describe(&r[i], what, sizeof(what));
		human_bytes(r[i].bytes_out, out, sizeof(out));
		human_bytes(r[i].bytes_err, errb, sizeof(errb));
		human_bytes(r[i].bytes_in, sent, sizeof(sent));
		fprintf(stderr, "%-*s  %-12s %7.2fs %10s %10s", w,
			o->targets[i].label, what, seconds(&r[i]), out, errb);
		if (o->cfg.sent_column)
			fprintf(stderr, " %10s", sent);
		if (r[i].outcome != FANOUT_EXITED && r[i].error[0])
			fprintf(stderr, "  %s", r[i].error);
		fputc('\n', stderr);
	}
	snprintf(buf, sizeof(buf), "%zu host%s in %.2f s: %zu ok", o->n,
		 o->n == 1 ? "" : "s", (double)wall_ms / 1000.0, t->ok);
	fputs(buf, stderr);
	if (t->failed)
		fprintf(stderr, ", %zu failed", t->failed);
	if (t->timeout)
		fprintf(stderr, ", %zu timed out", t->timeout);
	if (t->cancelled)
		fprintf(stderr, ", %zu cancelled", t->cancelled);
	if (t->unreachable)
		fprintf(stderr, ", %zu unreachable", t->unreachable);
	if (t->lost)
		fprintf(stderr, ", %zu lost", t->lost);
	fputc('\n', stderr);
}

int output_summary(struct output *o, const struct fanout_result *r,
		   uint64_t wall_ms)
{
	struct tally t = { 0 };
	int status = 0;

	for (size_t i = 0; i < o->n; i++) {
		int s = output_host_status(&r[i]);

		if (s > status)
			status = s;
		switch (r[i].outcome) {
		case FANOUT_EXITED:
			if (r[i].exit_status == 0)
				t.ok++;
			else
				t.failed++;
			break;
		case FANOUT_SIGNALED:
			t.failed++;
			break;
		case FANOUT_TIMEOUT:
			t.timeout++;
			break;
		case FANOUT_CANCELLED:
			t.cancelled++;
			break;
		case FANOUT_PENDING:
		case FANOUT_UNREACHABLE:
			t.unreachable++;
			break;
		case FANOUT_LOST:
			t.lost++;
			break;
		}
	}
	/* Hosts cancelled by an interrupt, with nothing else wrong. */
	if (status == 0 && t.cancelled)
		status = EXIT_INTERRUPT;
	if (o->cfg.json)
		printf("{\"type\":\"summary\",\"hosts\":%zu,\"ok\":%zu,"
		       "\"failed\":%zu,\"timeout\":%zu,\"cancelled\":%zu,"
		       "\"unreachable\":%zu,\"lost\":%zu,\"wall_s\":%.3f,"
		       "\"exit_status\":%d}\n",
		       o->n, t.ok, t.failed, t.timeout, t.cancelled,
		       t.unreachable, t.lost, (double)wall_ms / 1000.0, status);
	else
		summary_text(o, r, wall_ms, &t);
	output_flush(o);
	return status;
}
