/*
 * ckpt_cli.c: `ckpt save|ls|restore|verify|prune`, the checkpoint commands
 * over any store URL (gs://BUCKET/PREFIX or file:///DIR), as both
 * `slicectl ckpt` and `slice-supervisor ckpt` offer them (a trainer that
 * saves on its own calls the latter).
 */
#include "checkpoint/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ckpt_format_names[] = { "text", "json", NULL };

struct ckpt_args {
	unsigned step;
	const char *part;
	unsigned parts_expected;
	unsigned level;
	unsigned threads;
	unsigned keep;
	unsigned keep_every;
	unsigned stale_ms;
	const char *local_dir;
	int format;
	struct strlist pos;
};

/* One subcommand: its usage, how many positionals, and which of the
 * shared options it takes. */
struct ckpt_command {
	const char *name;
	int (*fn)(struct ckpt_args *a);
	const char *summary;
	const char *usage;
	size_t npos;
	const char *options; /* names of the options it accepts, space-separated */
};

static void print_json_string(struct buf *b, const char *s)
{
	json_append_string(b, s, strlen(s));
}

static int open_store(const char *url, struct store **s)
{
	struct err e;

	err_init(&e);
	if (store_open(s, url, &e)) {
		log_error("%s", e.msg);
		return e.code == CLOUD_EURL ? EXIT_USAGE : 1;
	}
	return 0;
}

static int fail(struct store *s, const struct err *e)
{
	log_error("%s", e->msg);
	store_close(s);
	return 1;
}

static int ckpt_save_cmd(struct ckpt_args *a)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r = { 0 };
	struct store *s;
	struct err e;
	uint64_t start = mono_ms();
	double secs;
	int rc;

	if (!a->step) {
		log_error("ckpt save needs --step N (N from 1)");
		return EXIT_USAGE;
	}
	if ((rc = open_store(a->pos.v[1], &s)))
		return rc;
	ckpt_save_options_init(&o);
	o.part = a->part ? a->part : o.part ? o.part : CKPT_DEFAULT_PART;
	if (a->parts_expected)
		o.parts_expected = a->parts_expected;
	if (a->level)
		o.pack.level = (int)a->level;
	o.pack.threads = a->threads;
	o.local_dir = a->local_dir;
	err_init(&e);
	if (ckpt_save(s, a->pos.v[0], a->step, &o, &r, &e))
		return fail(s, &e);
	secs = (double)(mono_ms() - start) / 1000.0;
	if (a->format) {
		printf("{\"step\":%u,\"part\":", a->step);
		struct buf b;
		buf_init(&b);
		print_json_string(&b, o.part);
		printf("%s,\"bytes\":%llu,\"bytes_in\":%llu,\"files\":%llu,"
		       "\"crc32c\":%u,\"committed\":%s,\"seconds\":%.3f}\n",
		       b.data, (unsigned long long)r.bytes,
		       (unsigned long long)r.stats.bytes_in,
		       (unsigned long long)r.stats.files, r.crc32c,
		       r.committed ? "true" : "false", secs);
		buf_release(&b);
	} else {
		printf("saved step %u part %s: %llu files, %.1f MB in, %.1f MB "
		       "stored, %.2f s; %s\n",
		       a->step, o.part, (unsigned long long)r.stats.files,
		       (double)r.stats.bytes_in / 1e6, (double)r.bytes / 1e6,
		       secs,
		       r.committed ? "step committed"
				   : "waiting for the other parts to commit");
	}
	store_close(s);
	return 0;
}

static int ckpt_ls_cmd(struct ckpt_args *a)
{
	struct ckpt_list l = { 0 };
	struct store *s;
	struct err e;
	int rc;

	if ((rc = open_store(a->pos.v[0], &s)))
		return rc;
	err_init(&e);
	if (ckpt_list(s, &l, &e))
		return fail(s, &e);
	if (!a->format)
		printf("%-12s %-10s %6s %14s  %s\n", "STEP", "STATE", "PARTS",
		       "BYTES", "TIME");
	for (size_t i = 0; i < l.n; i++) {
		const struct ckpt_step *st = &l.v[i];

		if (a->format) {
			printf("{\"step\":%llu,\"committed\":%s,\"fast\":%s,"
			       "\"parts\":%zu,\"bytes\":%llu,\"time\":"
			       "\"%s\"}\n",
			       (unsigned long long)st->step,
			       st->committed ? "true" : "false",
			       st->fast ? "true" : "false", st->nparts,
			       (unsigned long long)st->bytes, st->time);
		} else {
			/* A fast step's bytes are on the hosts, not here. */
			printf("%-12llu %-10s %6zu %14llu  %s\n",
			       (unsigned long long)st->step,
			       st->committed ? "committed"
			       : st->fast    ? "fast-tier"
					     : "partial",
			       st->nparts, (unsigned long long)st->bytes,
			       st->time);
		}
	}
	ckpt_list_release(&l);
	store_close(s);
	return 0;
}

static int ckpt_restore_cmd(struct ckpt_args *a)
{
	bool local = false;
	struct ckpt_restore_options o = { .step = a->step, .part = a->part,
					  .local_dir = a->local_dir,
					  .from_local = &local };
	struct store *s;
	struct err e;
	uint64_t restored = 0, start = mono_ms();
	int rc;

	if ((rc = open_store(a->pos.v[0], &s)))
		return rc;
	err_init(&e);
	if (ckpt_restore(s, a->pos.v[1], &o, &restored, &e))
		return fail(s, &e);
	if (a->format) {
		struct buf b;

		buf_init(&b);
		print_json_string(&b, a->pos.v[1]);
		printf("{\"step\":%llu,\"dest\":%s,\"source\":\"%s\","
		       "\"seconds\":%.3f}\n",
		       (unsigned long long)restored, b.data ? b.data : "\"\"",
		       local ? "local" : "store",
		       (double)(mono_ms() - start) / 1000.0);
		buf_release(&b);
	} else
		printf("restored step %llu into %s from %s in %.2f s\n",
		       (unsigned long long)restored, a->pos.v[1],
		       local ? "the local copy" : "the store",
		       (double)(mono_ms() - start) / 1000.0);
	store_close(s);
	return 0;
}

static int ckpt_verify_cmd(struct ckpt_args *a)
{
	struct ckpt_verify_result r = { 0 };
	struct store *s;
	struct err e;
	int rc;

	if ((rc = open_store(a->pos.v[0], &s)))
		return rc;
	err_init(&e);
	if (ckpt_verify(s, a->step, &r, &e))
		return fail(s, &e);
	if (a->format) {
		struct buf b;

		buf_init(&b);
		print_json_string(&b, r.problem);
		printf("{\"step\":%llu,\"parts_ok\":%zu,\"parts_bad\":%zu,"
		       "\"problem\":%s}\n",
		       (unsigned long long)r.step, r.parts_ok, r.parts_bad,
		       b.data);
		buf_release(&b);
	} else if (r.parts_bad) {
		printf("step %llu is CORRUPT: %zu of %zu parts bad: %s\n",
		       (unsigned long long)r.step, r.parts_bad,
		       r.parts_ok + r.parts_bad, r.problem);
	} else {
		printf("step %llu verified: %zu parts, sizes and CRC32C match\n",
		       (unsigned long long)r.step, r.parts_ok);
	}
	store_close(s);
	return r.parts_bad ? 3 : 0;
}

static int ckpt_prune_cmd(struct ckpt_args *a)
{
	struct ckpt_prune_options o;
	struct ckpt_prune_result r = { 0 };
	struct store *s;
	struct err e;
	int rc;

	if (!a->keep) {
		log_error("ckpt prune needs --keep K (K from 1)");
		return EXIT_USAGE;
	}
	ckpt_prune_options_init(&o);
	o.keep = a->keep;
	o.keep_every = a->keep_every;
	o.stale_s = a->stale_ms / 1000;
	if ((rc = open_store(a->pos.v[0], &s)))
		return rc;
	err_init(&e);
	if (ckpt_prune(s, &o, &r, &e))
		return fail(s, &e);
	if (a->format)
		printf("{\"steps_deleted\":%zu,\"objects_deleted\":%zu,"
		       "\"bytes_freed\":%llu}\n",
		       r.steps_deleted, r.objects_deleted,
		       (unsigned long long)r.bytes_freed);
	else
		printf("pruned %zu steps (%zu objects, %.1f MB)\n",
		       r.steps_deleted, r.objects_deleted,
		       (double)r.bytes_freed / 1e6);
	store_close(s);
	return 0;
}

static const struct ckpt_command ckpt_commands[] = {
	{ "save", ckpt_save_cmd, "pack a directory as one part of a step",
	  "ckpt save DIR URL --step N [options]\n\n"
	  "Packs DIR as tar+zstd straight into URL as this host's part of\n"
	  "step N, then commits the step once all its parts are there.\n"
	  "With --local-tier-dir it also keeps the part there, for restore.",
	  2, "step part parts-expected level threads local-tier-dir format" },
	{ "ls", ckpt_ls_cmd, "list steps, committed or partial",
	  "ckpt ls URL [--format json]\n\n"
	  "Lists the steps under URL, committed or not.",
	  1, "format" },
	{ "restore", ckpt_restore_cmd, "restore the newest good step",
	  "ckpt restore URL DEST [--step N] [--part NAME]\n\n"
	  "Restores the newest committed step whose part verifies (or step\n"
	  "N) into DEST, atomically: DEST is untouched on any failure.\n"
	  "With --local-tier-dir a copy kept there by save is unpacked instead\n"
	  "when it matches COMMIT (no byte of the part read from URL).",
	  2, "step part local-tier-dir format" },
	{ "verify", ckpt_verify_cmd, "check a step's parts against COMMIT",
	  "ckpt verify URL [--step N]\n\n"
	  "Reads every part of the newest committed step (or step N) and\n"
	  "checks sizes and CRC32C against COMMIT. Exit 3 if any is bad.",
	  1, "step format" },
	{ "prune", ckpt_prune_cmd, "delete old steps, keeping the newest",
	  "ckpt prune URL --keep K [--keep-every M]\n\n"
	  "Deletes committed steps older than the newest K, except every\n"
	  "M-th; abandoned partial steps older than --stale go too. The\n"
	  "newest committed step and live writers' steps are never touched.",
	  1, "keep keep-every stale format" },
};

static bool accepts(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += len)
		if ((p == list || p[-1] == ' ') && (p[len] == ' ' || !p[len]))
			return true;
	return false;
}

static int run_sub(const char *prog, const struct ckpt_command *c, int argc,
		   char **argv)
{
	struct ckpt_args a = { .stale_ms = 3600 * 1000 };
	const struct opt all[] = {
		{ .name = "step", .kind = OPT_UINT, .value = &a.step,
		  .arg = "N", .min = 1, .max = 4000000000u,
		  .help = "the step (default for restore and verify: the "
			  "newest committed)" },
		{ .name = "part", .kind = OPT_STRING, .value = &a.part,
		  .arg = "NAME",
		  .help = "this host's part (default slice-0-worker-0)" },
		{ .name = "parts-expected", .kind = OPT_UINT,
		  .value = &a.parts_expected, .arg = "K", .min = 1,
		  .max = 100000,
		  .help = "parts the step needs before it commits (default 1)" },
		{ .name = "level", .kind = OPT_UINT, .value = &a.level,
		  .arg = "L", .min = 1, .max = 19,
		  .help = "zstd level (default 3: tensors compress little "
			  "more at higher levels)" },
		{ .name = "threads", .kind = OPT_UINT, .value = &a.threads,
		  .arg = "T", .min = 0, .max = 256,
		  .help = "zstd threads (default: one per CPU)" },
		{ .name = "keep", .kind = OPT_UINT, .value = &a.keep,
		  .arg = "K", .min = 1, .max = 1000000,
		  .help = "committed steps to keep" },
		{ .name = "keep-every", .kind = OPT_UINT, .value = &a.keep_every,
		  .arg = "M", .min = 1, .max = 4000000000u,
		  .help = "also keep steps divisible by M" },
		{ .name = "stale", .kind = OPT_SECONDS, .value = &a.stale_ms,
		  .arg = "S",
		  .help = "partial steps untouched this long are abandoned "
			  "(default 3600)" },
		{ .name = "local-tier-dir", .kind = OPT_STRING,
		  .value = &a.local_dir, .arg = "DIR",
		  .help = "a local tier: save keeps the part there, restore "
			  "reads it from there when it verifies" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &a.format,
		  .arg = "text|json", .choices = ckpt_format_names,
		  .help = "json: one JSON object a line" },
	};
	struct opt opts[sizeof(all) / sizeof(all[0]) + 1] = { 0 };
	size_t n = 0;
	char name[96];
	struct buf usage;
	int status;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (accepts(c->options, all[i].name))
			opts[n++] = all[i];
	strlist_init(&a.pos);
	buf_init(&usage);
	snprintf(name, sizeof(name), "%s ckpt %s", prog, c->name);
	if (buf_appendf(&usage, "usage: %s %s", prog, c->usage)) {
		log_error("out of memory");
		return 1;
	}
	status = opt_parse_command(opts, argc, argv, name, usage.data, false,
				   &a.pos);
	if (status < 0 && a.pos.n != c->npos) {
		log_error("ckpt %s takes %zu argument%s, not %zu (see %s "
			  "--help)", c->name, c->npos,
			  c->npos == 1 ? "" : "s", a.pos.n, name);
		status = EXIT_USAGE;
	} else if (status < 0) {
		status = c->fn(&a);
	}
	buf_release(&usage);
	strlist_release(&a.pos);
	return status;
}

int ckpt_cli(const char *prog, int argc, char **argv)
{
	const size_t n = sizeof(ckpt_commands) / sizeof(ckpt_commands[0]);

	if (argc >= 2)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(argv[1], ckpt_commands[i].name))
				return run_sub(prog, &ckpt_commands[i],
					       argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "--help") && strcmp(argv[1], "-h")) {
		log_error("'%s' is not a ckpt command; see %s ckpt --help",
			  argv[1], prog);
		return EXIT_USAGE;
	}
	printf("usage: %s ckpt COMMAND [ARGS]\n\n"
	       "Checkpoints in gs://BUCKET/PREFIX or file:///DIR:\n", prog);
	for (size_t i = 0; i < n; i++)
		printf("  %-8s %s\n", ckpt_commands[i].name,
		       ckpt_commands[i].summary);
	printf("\nExit status: 0 done; 1 failed (the message says why); 2 bad\n"
	       "arguments; 3 verify found a bad part.\n");
	return argc >= 2 ? 0 : EXIT_USAGE;
}
