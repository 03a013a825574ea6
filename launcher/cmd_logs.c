/*
 * cmd_logs.c: `slicectl logs RUN`: a worker's trainer output, as its
 * supervisor uploads it (log_reader.h reads and follows it): options,
 * Ctrl-C, and the worker and generation to read.
 */
#include "launcher/log_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl logs RUN [--worker S/W] [--generation G] [--follow]\n"
	"                    [--interval S] [--bucket URL] [--format text|json]\n"
	"\n"
	"Prints a worker's trainer output from logs/slice-S-worker-W/gen-G/\n"
	"(gen-G.log for runs of older supervisors):\n"
	"worker 0/0 unless --worker names another (stderr says so when the run\n"
	"has more), of the newest generation it has a log of unless\n"
	"--generation names one.\n"
	"\n"
	"--follow keeps printing: it reads the log again every --interval\n"
	"(default 1 s) and prints only what is new, moves on to the next\n"
	"generation's log when one appears (saying so on stderr), and ends on\n"
	"Ctrl-C, or when nothing new came for two intervals after the run is\n"
	"done or failed (or stopping, and this worker's supervisor has ended).\n"
	"An older run's gen-G.log that was rewritten or shrank (its supervisor\n"
	"kept the last 8 MiB) is printed again from its start after a marker\n"
	"on stderr.\n"
	"\n"
	"--format json prints one object a line: {\"type\": \"line\",\n"
	"\"slice\", \"worker\", \"generation\", \"text\"} per line of output\n"
	"(invalid UTF-8 becomes U+FFFD), and with --follow\n"
	"{\"type\": \"generation\", ..., \"object\"} as each log starts and\n"
	"{\"type\": \"reset\", ..., \"size\", \"was\"} where text mode prints a\n"
	"marker.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 printed (or followed to the end); 1 the store failed;\n"
	"2 bad arguments; 4 no run RUN under BUCKET, no such worker, or no such\n"
	"log (without --follow, which waits for it); 130 Ctrl-C.";

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

/* Not SA_RESTART: SIGINT and SIGTERM end follow's wait at once. */
static void catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* "S/W" */
static bool parse_worker(const char *s, unsigned *slice, unsigned *worker)
{
	unsigned long a, b;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	a = strtoul(s, &end, 10);
	if (*end != '/' || end[1] < '0' || end[1] > '9')
		return false;
	b = strtoul(end + 1, &end, 10);
	if (*end || a > 65535 || b > 65535)
		return false;
	*slice = (unsigned)a;
	*worker = (unsigned)b;
	return true;
}

int cmd_logs(int argc, char **argv)
{
	struct run_options ro = { 0 };
	const char *worker_flag = NULL;
	unsigned generation = 0, interval_ms = 1000;
	bool follow_flag = false;
	const struct opt own[] = {
		{ .name = "worker", .short_name = 'w', .kind = OPT_STRING,
		  .value = &worker_flag, .arg = "S/W",
		  .help = "slice S's worker W (default: 0/0)" },
		{ .name = "generation", .short_name = 'g', .kind = OPT_UINT,
		  .value = &generation, .arg = "G", .min = 1,
		  .max = 4000000000u,
		  .help = "this generation's log (default: the newest); with "
			  "--follow, start there" },
		{ .name = "follow", .short_name = 'f', .kind = OPT_FLAG,
		  .value = &follow_flag,
		  .help = "keep printing what comes, until the run is over" },
		{ .name = "interval", .kind = OPT_SECONDS,
		  .value = &interval_ms, .arg = "S",
		  .help = "with --follow, how often to look (default 1 s)" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_OPTIONS_COUNT + 1] = { 0 };
	struct logs l;
	char w[64];
	unsigned n_workers;
	int status;

	memset(&l, 0, sizeof(l));
	buf_init(&l.line);
	memcpy(opts, own, sizeof(own));
	run_options_table(&ro, opt_end(opts));
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto done;
	status = EXIT_USAGE;
	if (worker_flag && !parse_worker(worker_flag, &l.slice, &l.worker)) {
		log_error("--worker wants SLICE/WORKER, like 0/3, not '%s'",
			  worker_flag);
		goto done;
	}
	if (interval_ms < 50) {
		log_error("--interval must be at least 0.05 s");
		goto done;
	}
	if (l.slice >= ro.job.num_slices ||
	    l.worker >= ro.job.workers_per_slice) {
		log_error("%s has %u slice%s of %u worker%s: there is no "
			  "worker %u/%u", ro.run, ro.job.num_slices,
			  ro.job.num_slices == 1 ? "" : "s",
			  ro.job.workers_per_slice,
			  ro.job.workers_per_slice == 1 ? "" : "s", l.slice,
			  l.worker);
		status = EXIT_NOT_FOUND;
		goto done;
	}
	n_workers = ro.job.num_slices * ro.job.workers_per_slice;
	if (!worker_flag && n_workers > 1)
		fprintf(stderr, "slicectl: %s has %u workers; showing worker "
			"0/0 (choose another with --worker S/W)\n", ro.run,
			n_workers);
	l.ro = &ro;
	l.json = ro.format == 1;
	l.follow = follow_flag;
	l.at_line_start = true;
	run_worker_name(l.slice, l.worker, w, sizeof(w));
	snprintf(l.dir, sizeof(l.dir), "logs/%s/", w);
	l.interrupted = &interrupted;
	if (follow_flag)
		catch_signals();
	status = follow_flag ? logs_follow(&l, generation, interval_ms)
			     : logs_print_once(&l, generation);
done:
	buf_release(&l.line);
	run_options_release(&ro);
	return status;
}
