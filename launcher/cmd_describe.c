/*
 * cmd_describe.c: `slicectl describe NAME`: a queued resource, its state
 * and the nodes of its slices with their workers' addresses.
 */
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdlib.h>

static const char usage[] =
	"usage: slicectl describe NAME [--project P] [--zone Z] "
	"[--format text|json]\n"
	"\n"
	"Shows the queued resource NAME: its state (with the API's error when\n"
	"it FAILED), capacity, and each slice's node with its workers'\n"
	"addresses. --format json prints {\"queuedResource\": ..., \"nodes\":\n"
	"[...]} as the API gave them.\n"
	"\n"
	"Exit status: 0 shown; 1 the API failed; 2 bad arguments; 4 no such\n"
	"queued resource.";

/* Nodes that do not exist yet (a queued resource still waiting) are left
 * empty; any other failure ends the command. */
static int get_nodes(struct tpu_client *c, const struct tpu_qr *q,
		     struct tpu_node *nodes, struct err *e)
{
	for (size_t i = 0; i < q->nnodes; i++) {
		int rc = tpu_node_get(c, q->node_ids[i], &nodes[i], e);

		if (rc == CLOUD_ENOTFOUND)
			tpu_node_release(&nodes[i]);
		else if (rc)
			return rc;
	}
	return 0;
}

static void print_json(const struct tpu_qr *q, const struct tpu_node *nodes)
{
	bool first = true;

	printf("{\"queuedResource\": %s, \"nodes\": [", q->json);
	for (size_t i = 0; i < q->nnodes; i++) {
		if (!nodes[i].json)
			continue;
		printf("%s%s", first ? "" : ", ", nodes[i].json);
		first = false;
	}
	printf("]}\n");
}

int cmd_describe(int argc, char **argv)
{
	struct tpu_options to = { 0 };
	struct opt opts[TPU_OPTIONS_COUNT + 1] = { 0 };
	struct tpu_client *c = NULL;
	struct tpu_qr q = { 0 };
	struct tpu_node *nodes = NULL;
	struct strlist pos;
	struct err e;
	int rc, status;

	strlist_init(&pos);
	err_init(&e);
	tpu_options_table(&to, opts, TPU_WITH_FORMAT);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 1, &to, &c);
	if (status >= 0)
		goto out;
	status = 0;
	rc = tpu_qr_get(c, pos.v[0], &q, &e);
	if (!rc && !(nodes = calloc(q.nnodes + 1, sizeof(*nodes))))
		rc = err_set(&e, CLOUD_ENOMEM, "out of memory");
	if (!rc)
		rc = get_nodes(c, &q, nodes, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (to.format == 1)
		print_json(&q, nodes);
	else {
		tpu_print_qr(stdout, &q, nodes, q.nnodes);
		tpu_print_schedule(stdout, &q, nodes, q.nnodes);
	}
out:
	for (size_t i = 0; nodes && i < q.nnodes; i++)
		tpu_node_release(&nodes[i]);
	free(nodes);
	tpu_qr_release(&q);
	tpu_close(c);
	strlist_release(&pos);
	return status;
}
