/*
 * cmd_events.c: `slicectl events RUN`: the run's history (events/, see
 * run/run.h) in time order, once or as it grows.
 */
#include "launcher/launcher.h"
#include "launcher/run_options.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl events RUN [--follow] [--interval S] [--bucket URL]\n"
	"                       [--format text|json]\n"
	"\n"
	"Prints the run's history in time order: every generation bump with\n"
	"its cause and who made it, preemption notices, restores and the step\n"
	"they agreed on, commits, trainer starts and exits, the local\n"
	"provider's injected chaos, and the run's end. The supervisors write\n"
	"it to BUCKET/RUN/events/ (within about a second, or late after a\n"
	"store outage: --follow prints late events when they arrive).\n"
	"\n"
	"Text: \"TIME gGENERATION WRITER KIND [step N] CAUSE [by WHO]\n"
	"[DETAILS]\"; a hang's ends with \"forensics: URL\", the object its\n"
	"supervisor left (stacks and output, taken before it ended the\n"
	"trainer; its details' \"forensics\" is the name under the run);\n"
	"--format json prints one object a line: {time, kind, generation,\n"
	"worker, cause, step, by, details}.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 done; 1 the store failed; 2 bad arguments; 4 no run\n"
	"RUN under BUCKET (no job.json).";

/* A hang's forensics object, where it is. */
static void print_forensics(struct store *s, const struct event *ev)
{
	char name[256];

	if (event_forensics(ev, name, sizeof(name)))
		printf(" forensics: %s", store_url(s, name));
}

static void print_event(struct store *s, const struct event *ev, bool json)
{
	json_t *o, *d;

	if (!json) {
		printf("%s g%" PRId64 " %s %s", ev->time, ev->generation,
		       ev->worker, ev->kind);
		if (ev->step >= 0)
			printf(" step %" PRId64, ev->step);
		if (*ev->cause)
			printf(" %s", ev->cause);
		if (*ev->by && strcmp(ev->by, ev->worker))
			printf(" [by %s]", ev->by);
		if (*ev->details)
			printf(" %s", ev->details);
		print_forensics(s, ev);
		putchar('\n');
		return;
	}
	d = *ev->details ? json_loads(ev->details, 0, NULL) : NULL;
	o = json_pack("{s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:o}", "time",
		      run_json_text(ev->time), "kind", run_json_text(ev->kind),
		      "generation", (json_int_t)ev->generation, "worker",
		      run_json_text(ev->worker), "cause",
		      run_json_text(ev->cause), "step",
		      ev->step >= 0 ? json_integer(ev->step) : json_null(),
		      "by", run_json_text(ev->by), "details",
		      d ? d : json_object());
	if (o)
		run_print_json(o);
}

/* Prints the events not printed yet. */
static int print_new(struct run_options *ro, struct events_seen *seen,
		     bool *over)
{
	struct event *v;
	size_t n;
	struct err e;
	int rc = events_new(ro->store, seen, &v, &n, &e);

	if (rc)
		return run_exit_status(rc, &e);
	for (size_t i = 0; i < n; i++) {
		print_event(ro->store, &v[i], ro->format == 1);
		if (!strcmp(v[i].kind, "done") ||
		    !strcmp(v[i].kind, "failed"))
			*over = true;
	}
	free(v);
	fflush(stdout);
	return 0;
}

/* Late events (a worker that could not reach the store) may still come
 * after the run's end: --follow looks this long past it. */
#define FOLLOW_AFTER_END_MS 15000

int cmd_events(int argc, char **argv)
{
	struct run_options ro = { 0 };
	bool follow = false, over = false;
	unsigned interval_ms = 1000;
	const struct opt own[] = {
		{ .name = "follow", .short_name = 'f', .kind = OPT_FLAG,
		  .value = &follow,
		  .help = "keep printing events as they come, until the run "
			  "is over" },
		{ .name = "interval", .kind = OPT_SECONDS,
		  .value = &interval_ms, .arg = "S",
		  .help = "with --follow, how often to look (default 1 s)" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_OPTIONS_COUNT + 1] = { 0 };
	struct events_seen seen = { 0 };
	uint64_t end_ms = 0;
	int status;

	memcpy(opts, own, sizeof(own));
	run_options_table(&ro, opt_end(opts));
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto done;
	if (interval_ms < 50) {
		log_error("--interval must be at least 0.05 s");
		status = EXIT_USAGE;
		goto done;
	}
	for (;;) {
		status = print_new(&ro, &seen, &over);
		if (status || !follow)
			break;
		if (over && !end_ms)
			end_ms = mono_ms() + FOLLOW_AFTER_END_MS;
		if (end_ms && mono_ms() >= end_ms)
			break;
		proc_sleep_ms(interval_ms, true);
	}
done:
	events_seen_release(&seen);
	run_options_release(&ro);
	return status;
}
