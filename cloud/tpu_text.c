/*
 * tpu_text.c: the lines `slicectl describe` prints about a queued
 * resource's time limits: when a flex-start run ends, and the maintenance
 * Google has announced for its nodes. Kept beside the parser that fills
 * the fields, so every command that shows them says the same.
 */
#include "cloud/cloud.h"

static void print_run(FILE *f, const struct tpu_qr *q)
{
	if (*q->termination_time)
		fprintf(f, "run ends:     %s (%s, at most %s)\n",
			q->termination_time, q->capacity,
			*q->max_run_duration ? q->max_run_duration : "-");
	else if (*q->max_run_duration)
		fprintf(f, "run ends:     %s after it is ACTIVE (%s)\n",
			q->max_run_duration, q->capacity);
}

static void print_maintenance(FILE *f, const char *id,
			      const struct tpu_maintenance *m)
{
	fprintf(f, "maintenance:  %s: %s%s%s", id, *m->type ? m->type : "-",
		*m->status ? ", " : "", m->status);
	if (*m->window_start || *m->window_end)
		fprintf(f, ", window %s to %s",
			*m->window_start ? m->window_start : "-",
			*m->window_end ? m->window_end : "-");
	if (m->can_reschedule)
		fprintf(f, ", can be rescheduled%s%s",
			*m->latest_start ? " to start by " : "",
			m->latest_start);
	else
		fputs(", cannot be rescheduled", f);
	fputc('\n', f);
}

void tpu_print_schedule(FILE *f, const struct tpu_qr *q,
			const struct tpu_node *nodes, size_t nnodes)
{
	print_run(f, q);
	/* nodes[i] is slice i's node (empty when it does not exist). */
	for (size_t i = 0; i < nnodes && i < q->nnodes; i++)
		if (nodes[i].maintenance.announced)
			print_maintenance(f, q->node_ids[i],
					  &nodes[i].maintenance);
}
