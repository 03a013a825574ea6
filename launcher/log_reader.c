/*
 * log_reader.c: what log_reader.h promises: lists a worker's generations
 * of logs, prints one (segments or a gen-G.log that may slide) as text or
 * JSON lines, and follows them to the next generation until the run is
 * over for this worker.
 */
#include "launcher/log_reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output ---- */

static void emit_event(struct logs *l, const char *type, json_t *extra)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:I}", "type", type, "slice",
			      (json_int_t)l->slice, "worker",
			      (json_int_t)l->worker, "generation",
			      (json_int_t)l->gen);

	if (o && extra)
		json_object_update(o, extra);
	json_decref(extra);
	run_print_json(o);
}

static void emit_line(struct logs *l, const char *text, size_t len)
{
	struct buf b;

	buf_init(&b);
	if (buf_appendf(&b, "{\"type\": \"line\", \"slice\": %u, \"worker\": "
			"%u, \"generation\": %" PRId64 ", \"text\": ",
			l->slice, l->worker, l->gen) ||
	    json_append_string(&b, text, len) || buf_appends(&b, "}\n")) {
		log_error("out of memory");
	} else {
		fwrite(b.data, 1, b.len, stdout);
	}
	buf_release(&b);
}

/* The log's own bytes, in either format. */
static void put_bytes(struct logs *l, const char *data, size_t len)
{
	if (!len)
		return;
	l->printed_any = true;
	if (!l->json) {
		fwrite(data, 1, len, stdout);
		l->at_line_start = data[len - 1] == '\n';
		return;
	}
	for (;;) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;

		if (!nl) {
			if (buf_append(&l->line, data, n))
				log_error("out of memory");
			return;
		}
		if (l->line.len) {
			if (buf_append(&l->line, data, n))
				log_error("out of memory");
			emit_line(l, l->line.data, l->line.len);
			buf_reset(&l->line);
		} else {
			emit_line(l, data, n);
		}
		data += n + 1;
		len -= n + 1;
	}
}

/* Ends what one log printed: the json line not ended yet, or, in text,
 * a line break so the next log starts on a line of its own. */
static void end_log(struct logs *l, bool newline)
{
	if (l->json && l->line.len) {
		emit_line(l, l->line.data, l->line.len);
		buf_reset(&l->line);
	} else if (!l->json && newline && !l->at_line_start) {
		fputc('\n', stdout);
		l->at_line_start = true;
	}
}

/* ---- the store ---- */

static int sink(void *ud, const void *data, size_t len, struct err *e)
{
	if (buf_append(ud, data, len))
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	return 0;
}

static void log_name(const struct logs *l, int64_t gen, bool segments,
		     char *out, size_t cap)
{
	snprintf(out, cap, "%sgen-%" PRId64 "%s", l->dir, gen,
		 segments ? "/" : ".log");
}

/* A generation's log: segments (gen-G/) or one object (gen-G.log). */
struct gen_log {
	int64_t gen;
	bool segments;
};

struct gens {
	struct gen_log *v;
	size_t n, cap;
	const struct logs *l;
};

static int collect_gen(void *ud, const struct store_object *o,
		       bool is_prefix)
{
	struct gens *g = ud;
	const char *leaf;
	long long gen;
	char canon[128];
	int n = 0;

	if (strncmp(o->name, g->l->dir, strlen(g->l->dir)))
		return 0;
	leaf = o->name + strlen(g->l->dir);
	if (sscanf(leaf, is_prefix ? "gen-%lld/%n" : "gen-%lld.log%n", &gen,
		   &n) != 1 || !n || leaf[n] || gen < 1)
		return 0;
	log_name(g->l, gen, is_prefix, canon, sizeof(canon));
	if (strcmp(canon, o->name))
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct gen_log *v = realloc(g->v, cap * sizeof(*v));

		if (!v)
			return CLOUD_ENOMEM;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n].gen = gen;
	g->v[g->n++].segments = is_prefix;
	return 0;
}

/* By generation; a generation with both kinds of log (a supervisor of
 * each kind ran it) is read from its segments, which sort first. */
static int cmp_gen(const void *a, const void *b)
{
	const struct gen_log *x = a, *y = b;

	if (x->gen != y->gen)
		return (x->gen > y->gen) - (x->gen < y->gen);
	return (int)y->segments - (int)x->segments;
}

/* The generations this worker has a log of, ascending. */
static int list_gens(struct logs *l, struct gens *g, struct err *e)
{
	size_t k = 0;
	int rc;

	g->n = 0;
	g->l = l;
	rc = store_list(l->ro->store, l->dir, "/", collect_gen, g, e);
	if (rc == CLOUD_ENOMEM)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	if (rc)
		return rc;
	if (g->n)
		qsort(g->v, g->n, sizeof(*g->v), cmp_gen);
	/* One entry a generation. */
	for (size_t i = 0; i < g->n; i++)
		if (!k || g->v[i].gen != g->v[k - 1].gen)
			g->v[k++] = g->v[i];
	g->n = k;
	return 0;
}

static const struct gen_log *gens_find(const struct gens *g, int64_t gen)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].gen == gen)
			return &g->v[i];
	return NULL;
}

/* ---- one log ---- */

static void start_log(struct logs *l, const struct gen_log *g)
{
	bool first = !l->gen;

	end_log(l, true);
	l->gen = g->gen;
	l->segments = g->segments;
	log_name(l, g->gen, g->segments, l->name, sizeof(l->name));
	l->object_gen = 0;
	l->off = 0;
	l->tlen = 0;
	if (!l->follow)
		return;
	if (l->json)
		emit_event(l, "generation",
			   json_pack("{s:s}", "object", l->name));
	else if (!first)
		fprintf(stderr,
			"slicectl: ---- generation %" PRId64 ": %s ----\n",
			g->gen, l->name);
}

/* Where the bytes not printed yet begin in data: after the tail printed
 * last, where it is now. SIZE_MAX when it is nowhere. */
static size_t resume_at(const struct logs *l, const char *data, size_t len)
{
	size_t from;

	if (!l->tlen)
		return l->off ? SIZE_MAX : 0;
	if (len >= l->off &&
	    !memcmp(data + l->off - l->tlen, l->tail, l->tlen))
		return (size_t)l->off;
	/* Slid (the supervisor keeps the last 8 MiB): look for the tail at
	 * or before where it was. */
	if (len < l->tlen)
		return SIZE_MAX;
	from = len - l->tlen;
	if (l->off >= l->tlen && from > l->off - l->tlen)
		from = (size_t)(l->off - l->tlen);
	for (size_t i = from + 1; i-- > 0;)
		if (data[i] == l->tail[0] &&
		    !memcmp(data + i, l->tail, l->tlen))
			return i + l->tlen;
	return SIZE_MAX;
}

/* Prints what is new in content data[len] of the current log. Returns
 * whether anything was printed. */
static bool print_new(struct logs *l, const char *data, size_t len)
{
	size_t at = resume_at(l, data, len);
	bool any;

	if (at == SIZE_MAX) {
		end_log(l, true);
		if (l->json)
			emit_event(l, "reset",
				   json_pack("{s:I, s:I}", "size",
					     (json_int_t)len, "was",
					     (json_int_t)l->off));
		else
			fprintf(stderr, "slicectl: ---- %s was rewritten (%zu "
				"bytes, was %" PRIu64 "): printing it again "
				"from its start ----\n", l->name, len, l->off);
		at = 0;
	}
	any = at < len;
	put_bytes(l, data + at, len - at);
	l->off = len;
	l->tlen = len < TAIL_MAX ? len : TAIL_MAX;
	if (l->tlen)
		memcpy(l->tail, data + len - l->tlen, l->tlen);
	return any;
}

/* Prints the segments past what was printed. */
static int read_segments(struct logs *l, bool *progress, struct err *e)
{
	uint64_t end = l->off;
	struct buf b;
	int rc;

	buf_init(&b);
	rc = store_segments_read(l->ro->store, l->name, l->off, sink, &b, &end,
				 e);
	if (!rc) {
		if (b.len)
			*progress = true;
		put_bytes(l, b.data, b.len);
		l->off = end;
	}
	buf_release(&b);
	return rc;
}

/* Reads the current log when it changed and prints what is new.
 * *progress is set when anything was printed. A log that is gone is not
 * an error while following. */
static int read_log(struct logs *l, bool *progress, struct err *e)
{
	struct store_object o = { 0 };
	struct buf b;
	int rc;

	if (l->segments)
		return read_segments(l, progress, e);
	if (l->object_gen) {
		int64_t now_gen;

		rc = store_stat(l->ro->store, l->name, &o, e);
		if (rc == CLOUD_ENOTFOUND && l->follow) {
			err_init(e);
			return 0;
		}
		if (rc)
			return rc;
		now_gen = o.generation;
		store_object_release(&o);
		if (now_gen == l->object_gen)
			return 0;
	}
	buf_init(&b);
	rc = store_get(l->ro->store, l->name, 0, sink, &b, &o, e);
	if (rc == CLOUD_ENOTFOUND && l->follow) {
		err_init(e);
		rc = 0;
	} else if (!rc) {
		l->object_gen = o.generation;
		if (print_new(l, b.data ? b.data : "", b.len))
			*progress = true;
	}
	store_object_release(&o);
	buf_release(&b);
	return rc;
}

/* ---- following ---- */

/* Whether the run is over for this worker: done or failed, or stopping
 * with this worker's supervisor gone. */
static int run_over(struct logs *l, bool *over, struct err *e)
{
	struct control c;
	bool found;
	char w[64], name[128], *data = NULL;
	size_t len;
	json_t *root, *state;
	int rc;

	*over = false;
	rc = run_control_peek(l->ro, &c, &found, e);
	if (rc || !found)
		return rc;
	if (!strcmp(c.state, "done") || !strcmp(c.state, "failed")) {
		*over = true;
		return 0;
	}
	if (strcmp(c.state, "stopping"))
		return 0;
	run_worker_name(l->slice, l->worker, w, sizeof(w));
	snprintf(name, sizeof(name), "status/%s.json", w);
	rc = store_read(l->ro->store, name, (size_t)64 << 10, &data, &len,
			NULL, e);
	if (rc == CLOUD_ENOTFOUND) {
		/* No supervisor ever ran there: nothing will come. */
		err_init(e);
		*over = true;
		return 0;
	}
	if (rc)
		return rc;
	root = json_loadb(data, len, 0, NULL);
	state = json_object_get(root, "state");
	if (json_is_string(state)) {
		const char *s = json_string_value(state);

		*over = !strcmp(s, "exited") || !strcmp(s, "finished") ||
			!strcmp(s, "preempted");
	}
	json_decref(root);
	free(data);
	return 0;
}

/* One look at the store: the next logs when they appeared, new bytes of
 * the current one. */
static int follow_once(struct logs *l, struct gens *g, int64_t pinned,
		       bool *progress, struct err *e)
{
	int rc = list_gens(l, g, e);

	if (rc)
		return rc;
	if (!l->gen) {
		const struct gen_log *first = NULL;

		/* The pinned generation, or the first one after it when
		 * it never had a log here; else the newest. */
		for (size_t i = 0; i < g->n && !first; i++)
			if (!pinned || g->v[i].gen >= pinned)
				first = pinned ? &g->v[i] : &g->v[g->n - 1];
		if (!first)
			return 0;
		start_log(l, first);
		*progress = true;
	}
	for (;;) {
		const struct gen_log *next = NULL;

		rc = read_log(l, progress, e);
		if (rc)
			return rc;
		for (size_t i = 0; i < g->n && !next; i++)
			if (g->v[i].gen > l->gen)
				next = &g->v[i];
		if (!next)
			return 0;
		/* A newer generation: this one is over for this worker,
		 * and was just read for the last time. */
		start_log(l, next);
		*progress = true;
	}
}

int logs_follow(struct logs *l, int64_t pinned, unsigned interval_ms)
{
	struct gens g = { 0 };
	char last_warning[sizeof(((struct err *)0)->msg)] = "";
	unsigned quiet = 0;
	bool said_waiting = false, looked = false;
	struct err e;
	int rc, status = 0;

	while (!*l->interrupted) {
		bool progress = false, over = false;

		err_init(&e);
		/* Whether the run was over is asked before the logs are
		 * read, so the last read sees everything written before. */
		rc = run_over(l, &over, &e);
		if (!rc)
			rc = follow_once(l, &g, pinned, &progress, &e);
		if (rc && !looked) {
			/* The first look failing is no passing fault. */
			status = run_exit_status(rc, &e);
			break;
		}
		looked = true;
		if (rc && strcmp(last_warning, e.msg)) {
			log_warn("%s (trying again every interval)", e.msg);
			snprintf(last_warning, sizeof(last_warning), "%s",
				 e.msg);
		} else if (!rc) {
			last_warning[0] = '\0';
		}
		if (!l->gen && !said_waiting && !rc) {
			char w[64];

			run_worker_name(l->slice, l->worker, w, sizeof(w));
			fprintf(stderr, "slicectl: waiting for a log of %s "
				"under %s\n", w, l->ro->url);
			said_waiting = true;
		}
		fflush(stdout);
		if (ferror(stdout))
			break; /* the exit status reports it */
		quiet = over && !progress && !rc ? quiet + 1 : 0;
		if (quiet >= 2)
			break;
		/* Not restarted: SIGINT and SIGTERM end the wait at once. */
		if (!*l->interrupted)
			proc_sleep_ms(interval_ms, false);
	}
	end_log(l, false);
	fflush(stdout);
	free(g.v);
	if (*l->interrupted && !status)
		status = *l->interrupted == SIGINT ? EXIT_INTERRUPT
						  : 128 + (int)*l->interrupted;
	return status;
}

/* ---- once ---- */

int logs_print_once(struct logs *l, int64_t pinned)
{
	struct gens g = { 0 };
	struct err e;
	char w[64], have[256] = "";
	bool progress = false;
	int rc;

	run_worker_name(l->slice, l->worker, w, sizeof(w));
	rc = list_gens(l, &g, &e);
	if (rc) {
		free(g.v);
		return run_exit_status(rc, &e);
	}
	if (!g.n || (pinned && !gens_find(&g, pinned))) {
		for (size_t i = 0; i < g.n && strlen(have) < 200; i++)
			snprintf(have + strlen(have),
				 sizeof(have) - strlen(have), "%s%" PRId64,
				 i ? ", " : "", g.v[i].gen);
		if (!g.n)
			log_error("no log of %s under %s yet (its supervisor "
				  "uploads one once its trainer starts)", w,
				  l->ro->url);
		else
			log_error("no log of generation %" PRId64 " for %s "
				  "under %s (it has generation%s %s)", pinned,
				  w, l->ro->url, g.n == 1 ? "" : "s", have);
		free(g.v);
		return EXIT_NOT_FOUND;
	}
	start_log(l, pinned ? gens_find(&g, pinned) : &g.v[g.n - 1]);
	free(g.v);
	rc = read_log(l, &progress, &e);
	if (rc)
		return run_exit_status(rc, &e);
	end_log(l, false);
	return 0;
}
