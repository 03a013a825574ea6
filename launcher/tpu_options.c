/*
 * tpu_options.c: see tpu_options.h.
 */
#include "launcher/tpu_options.h"
#include "launcher/hosts.h"
#include "launcher/launcher.h"

#include <string.h>
#include <unistd.h>

void tpu_options_table(struct tpu_options *to, struct opt *opts, int with)
{
	const struct opt table[TPU_OPTIONS_COUNT] = {
		{ .name = "project", .kind = OPT_STRING, .value = &to->project,
		  .arg = "PROJECT",
		  .help = "Google Cloud project (default: "
			  "$CLOUDSDK_CORE_PROJECT, else gcloud's)" },
		{ .name = "zone", .kind = OPT_STRING, .value = &to->zone,
		  .arg = "ZONE",
		  .help = "zone of the TPUs (default: "
			  "$CLOUDSDK_COMPUTE_ZONE, else gcloud's)" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &to->format,
		  .arg = "text|json", .choices = format_names,
		  .help = "json: the API's own resources, as JSON" },
		{ .name = "wait", .kind = OPT_FLAG, .value = &to->wait,
		  .help = "return only when it is done, showing each state" },
		{ .name = "timeout", .short_name = 't', .kind = OPT_SECONDS,
		  .value = &to->timeout_ms, .arg = "S",
		  .help = "stop waiting after S (default: never)" },
	};
	const bool wanted[TPU_OPTIONS_COUNT] = {
		true, true, with & TPU_WITH_FORMAT, with & TPU_WITH_WAIT,
		with & TPU_WITH_TIMEOUT,
	};
	size_t n = 0;

	for (size_t i = 0; i < TPU_OPTIONS_COUNT; i++)
		if (wanted[i])
			opts[n++] = table[i];
}

int tpu_options_resolve(struct tpu_options *to, struct err *e)
{
	if (gcloud_default(to->project, "core", "project", to->project_buf,
			   sizeof(to->project_buf), &to->project, e) ||
	    gcloud_default(to->zone, "compute", "zone", to->zone_buf,
			   sizeof(to->zone_buf), &to->zone, e))
		return COMMON_EUSAGE;
	if (!to->project)
		return err_set(e, COMMON_EUSAGE,
			       "no project: pass --project, set "
			       "CLOUDSDK_CORE_PROJECT or run `gcloud config "
			       "set project PROJECT`");
	if (!to->zone)
		return err_set(e, COMMON_EUSAGE,
			       "no zone: pass --zone (for example "
			       "us-central2-b), set CLOUDSDK_COMPUTE_ZONE or "
			       "run `gcloud config set compute/zone ZONE`");
	return 0;
}

int tpu_options_open(struct tpu_options *to, struct tpu_client **c)
{
	struct err e;
	int rc;

	err_init(&e);
	if (tpu_options_resolve(to, &e)) {
		log_error("%s", e.msg);
		return EXIT_USAGE;
	}
	rc = tpu_open(c, to->project, to->zone, &e);
	if (rc) {
		log_error("%s", e.msg);
		return rc == CLOUD_EINVAL ? EXIT_USAGE : 1;
	}
	return 0;
}

/* GENERATION-SIZE in lower case ("v4-32", "v5litepod-16", "v6e-8"): the
 * shape of every accelerator type the API has named. Anything else, a
 * shell metacharacter above all, is refused here rather than sent. */
static bool accelerator_type_valid(const char *t)
{
	size_t gen = strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789");
	size_t size;

	if (gen == 0 || gen > 24 || t[0] < 'a' || t[0] > 'z' || t[gen] != '-')
		return false;
	size = strspn(t + gen + 1, "0123456789");
	return size > 0 && size <= 6 && t[gen + 1] != '0' &&
	       t[gen + 1 + size] == '\0';
}

/* Every command's --accelerator-type, checked in one place. */
static int check_accelerator_type(const struct opt *opts)
{
	for (const struct opt *o = opts; o->name; o++) {
		const char *t;

		if (strcmp(o->name, "accelerator-type") ||
		    o->kind != OPT_STRING)
			continue;
		t = *(const char *const *)o->value;
		if (t && !accelerator_type_valid(t)) {
			log_error("--accelerator-type '%s' is not an "
				  "accelerator type: GENERATION-SIZE, such as "
				  "v4-32, v5litepod-16, v5p-8 or v6e-8", t);
			return EXIT_USAGE;
		}
	}
	return -1;
}

int tpu_command_parse(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct strlist *pos, size_t npos)
{
	char name[64];
	int status;

	snprintf(name, sizeof(name), "slicectl %s", argv[0]);
	status = opt_parse_command(opts, argc, argv, name, usage, false, pos);

	if (status >= 0)
		return status;
	status = check_accelerator_type(opts);
	if (status >= 0)
		return status;
	if (pos->n != npos) {
		log_error("%s (see slicectl %s --help)",
			  pos->n < npos ? "missing the queued resource's name"
					: "too many arguments",
			  argv[0]);
		return EXIT_USAGE;
	}
	return -1;
}

int tpu_command_start(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct strlist *pos, size_t npos,
		      struct tpu_options *to, struct tpu_client **c)
{
	int status = tpu_command_parse(opts, argc, argv, usage, pos, npos);

	if (status >= 0)
		return status;
	status = tpu_options_open(to, c);
	return status ? status : -1;
}

int tpu_exit_status(int rc, const struct err *e)
{
	log_error("%s", e->msg);
	switch (rc) {
	case CLOUD_OK:
		return 0;
	case CLOUD_EINVAL:
		return EXIT_USAGE;
	case CLOUD_EFAILED:
		return EXIT_STATE;
	case CLOUD_ENOTFOUND:
		return EXIT_NOT_FOUND;
	case CLOUD_ETIMEDOUT:
		return EXIT_TIMEOUT;
	default:
		return 1;
	}
}

void tpu_print_progress(void *ud, const struct tpu_qr *q, uint64_t elapsed_ms)
{
	(void)ud;
	fprintf(stderr, "slicectl: %s: %s%s%s (%.1f s)\n", q->id,
		*q->state ? q->state : "(no state yet)",
		*q->error_message ? ": " : "", q->error_message,
		(double)elapsed_ms / 1000.0);
	fflush(stderr);
}

static void print_node(FILE *f, size_t slice, const char *id,
		       const struct tpu_node *n)
{
	fprintf(f, "  slice %zu  %s", slice, id);
	if (!n || !n->name) {
		fprintf(f, "  (no node yet)\n");
		return;
	}
	fprintf(f, "  %s%s%s  workers:", n->state, *n->health ? " " : "",
		n->health);
	for (size_t w = 0; w < n->nendpoints; w++)
		fprintf(f, " %s%s%s%s", n->endpoints[w].ip,
			*n->endpoints[w].external_ip ? " (" : "",
			n->endpoints[w].external_ip,
			*n->endpoints[w].external_ip ? ")" : "");
	fprintf(f, "%s\n", n->nendpoints ? "" : " none yet");
}

void tpu_print_qr(FILE *f, const struct tpu_qr *q, const struct tpu_node *nodes,
		  size_t nnodes)
{
	fprintf(f, "name:         %s\n", q->id);
	fprintf(f, "state:        %s%s%s%s\n", *q->state ? q->state : "-",
		*q->state_initiator ? " (by " : "", q->state_initiator,
		*q->state_initiator ? ")" : "");
	if (*q->error_message || q->error_code)
		fprintf(f, "error:        code %d: %s\n", q->error_code,
			q->error_message);
	fprintf(f, "created:      %s\n", *q->create_time ? q->create_time : "-");
	fprintf(f, "accelerator:  %s\n", q->accelerator_type);
	fprintf(f, "runtime:      %s\n", q->runtime_version);
	fprintf(f, "capacity:     %s%s%s\n", q->capacity,
		*q->reservation ? " " : "", q->reservation);
	fprintf(f, "slices:       %zu\n", q->nnodes);
	for (size_t i = 0; i < q->nnodes; i++)
		print_node(f, i, q->node_ids[i], i < nnodes ? &nodes[i] : NULL);
}
