/*
 * cmd_create.c: `slicectl create`: a queued resource of one or more slices,
 * with a startup script and slicectl's SSH key in the nodes' metadata.
 */
#include "launcher/launcher.h"
#include "launcher/qr_spec.h"
#include "launcher/tpu_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GCE's limit on one metadata value. */
#define METADATA_VALUE_MAX (256u * 1024)

static const char usage[] =
	"usage: slicectl create NAME --accelerator-type T --runtime-version V "
	"[options]\n"
	"\n"
	"Creates the queued resource NAME through the TPU API (v2alpha1). One\n"
	"slice is the node NAME; with --node-count N the slices are the nodes\n"
	"NAME-0 .. NAME-(N-1). Without a capacity flag the request is on\n"
	"demand. --provisioning-model takes gcloud's models: standard (on\n"
	"demand), spot (as --spot), reservation-bound (as --reserved) and\n"
	"flex-start, which needs --max-run-duration D (up to 7d): the slices\n"
	"run for D once ACTIVE, then their VMs are deleted and the queued\n"
	"resource is SUSPENDED. Contradicting capacity flags are refused\n"
	"before any request. The public half of slicectl's own ed25519 key\n"
	"(~/.slicectl/id_ed25519, made on first use; or --identity's) goes into\n"
	"the nodes' ssh-keys metadata, so `slicectl run --tpu NAME` can log in.\n"
	"\n"
	"As in gcloud, --labels, --metadata and --metadata-from-file take\n"
	"KEY=VALUE,KEY2=VALUE2 and may be repeated. A comma starts a new entry\n"
	"only where KEY= follows it, so a value may hold commas; gcloud's\n"
	"escape ^D^KEY=VALUE...DKEY2=VALUE2 splits at D instead. --num-slices\n"
	"is --node-count; --internal-ips is the default (no enableExternalIps).\n"
	"\n"
	"Exit status: 0 created (and ACTIVE with --wait); 1 the API refused or\n"
	"could not be reached; 2 bad arguments; 3 the queued resource ended\n"
	"FAILED or SUSPENDED while waiting; 124 --timeout ran out.";

struct create_options {
	struct tpu_options to;
	struct tpu_qr_spec spec;
	struct qr_flags qf;
	const char *startup_script;
	struct strlist scopes, tags, labels, metadata, metadata_files;
	bool internal_ips;
};

static int split_commas(const struct strlist *in, struct strlist *out,
			struct err *e)
{
	for (size_t i = 0; i < in->n; i++) {
		const char *p = in->v[i];

		while (*p) {
			size_t len = strcspn(p, ",");
			char *item = strndup(p, len);
			int rc = !item || (len && strlist_push(out, item));

			free(item);
			if (rc)
				return err_set(e, COMMON_ENOMEM, "out of memory");
			p += len + (p[len] == ',');
		}
	}
	return 0;
}

/* Whether p starts "KEY=", KEY a metadata key's letters, digits, '-'
 * and '_'. */
static bool starts_key(const char *p)
{
	size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz"
			     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");

	return n && p[n] == '=';
}

/* Where the entry at p ends: at the next delimiter; a plain comma ends
 * it only where KEY= follows. */
static const char *entry_end(const char *p, const char *delim, bool escaped)
{
	const char *cut = strstr(p, delim);

	while (cut && !escaped && !starts_key(cut + 1))
		cut = strstr(cut + 1, delim);
	return cut ? cut : p + strlen(p);
}

/* gcloud's KEY=VALUE,KEY2=VALUE2 (--metadata, --metadata-from-file), one
 * entry per KEY=VALUE. A comma starts a new entry only where KEY= follows
 * it, so a value that holds commas (an ssh-keys comment, a script line)
 * stays whole as the older repeated --metadata K=V kept it. gcloud's
 * escape works too: a leading ^D^ makes D the delimiter, commas and all. */
static int split_key_values(const struct strlist *in, struct strlist *out,
			    struct err *e)
{
	for (size_t i = 0; i < in->n; i++) {
		const char *p = in->v[i];
		const char *caret = p[0] == '^' ? strchr(p + 1, '^') : NULL;
		char delim[16] = ",";
		bool escaped = caret && caret > p + 1 &&
			       (size_t)(caret - p) <= sizeof(delim);

		if (escaped) {
			snprintf(delim, sizeof(delim), "%.*s",
				 (int)(caret - p - 1), p + 1);
			p = caret + 1;
		}
		while (*p) {
			const char *cut = entry_end(p, delim, escaped);
			char *item = strndup(p, (size_t)(cut - p));
			int rc = !item || (cut > p && strlist_push(out, item));

			free(item);
			if (rc)
				return err_set(e, COMMON_ENOMEM,
					       "out of memory");
			p = *cut ? cut + strlen(delim) : cut;
		}
	}
	return 0;
}

static int read_small(const char *path, const char *what, char **out,
		      struct err *e)
{
	FILE *f = fopen(path, "rb");
	struct buf b;
	char chunk[8192];
	size_t n;

	if (!f)
		return err_errno(e, COMMON_EUSAGE, errno, "cannot read %s %s",
				 what, path);
	buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > METADATA_VALUE_MAX) {
			fclose(f);
			buf_release(&b);
			return err_set(e, COMMON_EUSAGE,
				       "%s %s is larger than the 256 KiB a "
				       "metadata value may hold; fetch the "
				       "rest from the script instead",
				       what, path);
		}
		if (buf_append(&b, chunk, n)) {
			fclose(f);
			buf_release(&b);
			return err_set(e, COMMON_ENOMEM, "out of memory");
		}
	}
	if (ferror(f)) {
		fclose(f);
		buf_release(&b);
		return err_errno(e, COMMON_EUSAGE, errno, "reading %s", path);
	}
	fclose(f);
	if (!b.data && buf_appends(&b, ""))
		return err_set(e, COMMON_ENOMEM, "out of memory");
	if (strlen(b.data) != b.len) {
		buf_release(&b);
		return err_set(e, COMMON_EUSAGE,
			       "%s %s holds a NUL byte: metadata values are "
			       "text", what, path);
	}
	*out = buf_detach(&b);
	return 0;
}

/* Appends "KEY=<contents of FILE>" to the metadata. */
static int add_metadata_file(struct tpu_qr_spec *s, const char *key,
			     const char *path, struct err *e)
{
	char *text;
	int rc;

	rc = read_small(path, key, &text, e);
	if (rc)
		return rc;
	rc = qr_spec_metadata(s, key, text, e);
	free(text);
	return rc;
}

/* --metadata-from-file's KEY=FILE,...: each FILE's text as KEY's value. */
static int add_metadata_files(struct tpu_qr_spec *s,
			      const struct strlist *given, struct err *e)
{
	struct strlist files;
	int rc;

	strlist_init(&files);
	rc = split_key_values(given, &files, e);
	for (size_t i = 0; !rc && i < files.n; i++) {
		const char *kv = files.v[i];
		const char *eq = strchr(kv, '=');
		char *key;

		if (!eq || eq == kv || !eq[1]) {
			rc = err_set(e, COMMON_EUSAGE,
				     "--metadata-from-file wants KEY=FILE, "
				     "not '%s'", kv);
			break;
		}
		key = strndup(kv, (size_t)(eq - kv));
		rc = key ? add_metadata_file(s, key, eq + 1, e)
			 : err_set(e, COMMON_ENOMEM, "out of memory");
		free(key);
	}
	strlist_release(&files);
	return rc;
}

/* From flags to the request; every check that needs no server. */
static int build_spec(struct create_options *co, const char *name,
		      struct err *e)
{
	struct tpu_qr_spec *s = &co->spec;
	char *script = NULL;
	int rc;

	s->id = name;
	if (!s->accelerator_type)
		return err_set(e, COMMON_EUSAGE,
			       "--accelerator-type is required (for example "
			       "v4-8, v5litepod-16)");
	if (!s->runtime_version)
		return err_set(e, COMMON_EUSAGE,
			       "--runtime-version is required (for example "
			       "tpu-ubuntu2204-base)");
	if (co->internal_ips && s->external_ips)
		return err_set(e, COMMON_EUSAGE,
			       "choose one of --internal-ips and "
			       "--external-ips");
	rc = qr_spec_capacity(s, &co->qf, e);
	if (!rc)
		rc = split_commas(&co->scopes, &s->scopes, e);
	if (!rc)
		rc = split_commas(&co->tags, &s->tags, e);
	if (!rc)
		rc = split_commas(&co->labels, &s->labels, e);
	if (!rc)
		rc = split_key_values(&co->metadata, &s->metadata, e);
	if (!rc)
		rc = add_metadata_files(s, &co->metadata_files, e);
	if (!rc && co->startup_script)
		rc = read_small(co->startup_script, "startup-script", &script,
				e);
	co->qf.startup_script = script;
	if (!rc)
		rc = qr_spec_build(s, &co->qf, e);
	co->qf.startup_script = NULL;
	free(script);
	return rc;
}

static void options_release(struct create_options *co)
{
	tpu_qr_spec_release(&co->spec);
	strlist_release(&co->scopes);
	strlist_release(&co->tags);
	strlist_release(&co->labels);
	strlist_release(&co->metadata);
	strlist_release(&co->metadata_files);
}

static int finish(struct create_options *co, struct tpu_client *c,
		  const char *name)
{
	struct tpu_qr q = { 0 };
	struct err e;
	int rc;

	err_init(&e);
	if (co->to.wait)
		rc = tpu_qr_wait(c, name, "ACTIVE", co->to.timeout_ms,
				 tpu_print_progress, NULL, &q, &e);
	else
		rc = tpu_qr_get(c, name, &q, &e);
	if (rc) {
		tpu_qr_release(&q);
		return tpu_exit_status(rc, &e);
	}
	if (co->to.format == 1)
		printf("%s\n", q.json);
	else if (co->to.wait)
		printf("%s is ACTIVE: slicectl run --tpu %s -- COMMAND\n", name,
		       name);
	else
		printf("%s is %s: slicectl wait %s follows it to ACTIVE\n",
		       name, *q.state ? q.state : "accepted", name);
	tpu_qr_release(&q);
	return 0;
}

int cmd_create(int argc, char **argv)
{
	struct create_options co = { 0 };
	struct tpu_qr_spec *s = &co.spec;
	struct tpu_client *c = NULL;
	struct strlist pos;
	struct err e;
	int status;

	tpu_qr_spec_init(s);
	s->node_count = 1;
	co.qf.reservation_flag = true;
	const struct opt own[] = {
		{ .name = "accelerator-type", .kind = OPT_STRING,
		  .value = &s->accelerator_type, .arg = "T",
		  .help = "each slice's type, for example v4-32 or v5litepod-16" },
		{ .name = "runtime-version", .kind = OPT_STRING,
		  .value = &s->runtime_version, .arg = "V",
		  .help = "the TPU VM image, for example tpu-ubuntu2204-base" },
		{ .name = "node-count", .kind = OPT_UINT, .value = &s->node_count,
		  .arg = "N", .min = 1, .max = 4096,
		  .help = "slices (default 1); more than 1 is multislice" },
		{ .name = "num-slices", .kind = OPT_UINT, .value = &s->node_count,
		  .arg = "N", .min = 1, .max = 4096, .help = "as --node-count" },
		{ .name = "spot", .kind = OPT_FLAG, .value = &co.qf.spot,
		  .help = "spot capacity: cheaper, may be preempted" },
		{ .name = "reserved", .kind = OPT_FLAG, .value = &co.qf.reserved,
		  .help = "the project's reserved capacity" },
		{ .name = "reservation", .kind = OPT_STRING,
		  .value = &s->reservation, .arg = "R",
		  .help = "a named reservation (implies --reserved)" },
		{ .name = "best-effort", .kind = OPT_FLAG,
		  .value = &co.qf.best_effort,
		  .help = "best-effort capacity" },
		{ .name = "provisioning-model", .kind = OPT_STRING,
		  .value = &co.qf.provisioning_model, .arg = "M",
		  .help = "standard, spot, reservation-bound or flex-start" },
		{ .name = "max-run-duration", .kind = OPT_SECONDS,
		  .value = &co.qf.max_run_ms, .arg = "D",
		  .help = "flex-start: how long the slices run (up to 7d)" },
		{ .name = "valid-until-duration", .kind = OPT_SECONDS,
		  .value = &co.qf.valid_until_ms, .arg = "D",
		  .help = "give up queueing after D (like 6h)" },
		{ .name = "valid-after-duration", .kind = OPT_SECONDS,
		  .value = &co.qf.valid_after_ms, .arg = "D",
		  .help = "start no sooner than D from now" },
		{ .name = "network", .kind = OPT_STRING, .value = &s->network,
		  .arg = "N", .help = "VPC network" },
		{ .name = "subnetwork", .kind = OPT_STRING,
		  .value = &s->subnetwork, .arg = "S", .help = "subnetwork" },
		{ .name = "internal-ips", .kind = OPT_FLAG,
		  .value = &co.internal_ips,
		  .help = "internal IPs only (the default here)" },
		{ .name = "external-ips", .kind = OPT_FLAG,
		  .value = &s->external_ips,
		  .help = "give every worker an external IP (gcloud's "
			  "default)" },
		{ .name = "service-account", .kind = OPT_STRING,
		  .value = &s->service_account, .arg = "EMAIL",
		  .help = "the workers' service account" },
		{ .name = "scopes", .kind = OPT_LIST, .value = &co.scopes,
		  .arg = "S,...", .help = "its OAuth scopes" },
		{ .name = "tags", .kind = OPT_LIST, .value = &co.tags,
		  .arg = "T,...", .help = "network tags" },
		{ .name = "labels", .kind = OPT_LIST, .value = &co.labels,
		  .arg = "K=V,...", .help = "labels (repeatable)" },
		{ .name = "metadata", .kind = OPT_LIST, .value = &co.metadata,
		  .arg = "K=V,...", .help = "metadata entries (repeatable)" },
		{ .name = "metadata-from-file", .kind = OPT_LIST,
		  .value = &co.metadata_files, .arg = "K=FILE,...",
		  .help = "metadata entries, each read from FILE "
			  "(repeatable)" },
		{ .name = "startup-script", .kind = OPT_STRING,
		  .value = &co.startup_script, .arg = "FILE",
		  .help = "run FILE on every worker at every boot" },
		{ .name = "description", .kind = OPT_STRING,
		  .value = &s->description, .arg = "TEXT",
		  .help = "the nodes' description" },
		{ .name = "user", .short_name = 'l', .kind = OPT_STRING,
		  .value = &co.qf.user, .arg = "USER",
		  .help = "login for the ssh key (default: you)" },
		{ .name = "identity", .short_name = 'i', .kind = OPT_STRING,
		  .value = &co.qf.identity, .arg = "KEY",
		  .help = "put KEY's public half in ssh-keys instead" },
		{ .name = "no-ssh-key", .kind = OPT_FLAG, .value = &co.qf.no_ssh_key,
		  .help = "add no key to ssh-keys" },
	};
	struct opt opts[OPT_COUNT(own) + TPU_OPTIONS_COUNT + 1] = { 0 };

	strlist_init(&pos);
	strlist_init(&co.scopes);
	strlist_init(&co.tags);
	strlist_init(&co.labels);
	strlist_init(&co.metadata);
	strlist_init(&co.metadata_files);
	memcpy(opts, own, sizeof(own));
	tpu_options_table(&co.to, opt_end(opts),
			  TPU_WITH_FORMAT | TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	err_init(&e);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 1, &co.to,
				   &c);
	if (status >= 0)
		goto out;
	status = 0;
	if (build_spec(&co, pos.v[0], &e)) {
		log_error("%s", e.msg);
		status = e.code == COMMON_ENOMEM ? 1 : EXIT_USAGE;
		goto out;
	}
	fprintf(stderr, "slicectl: creating %s: %u slice%s of %s in %s\n",
		s->id, s->node_count, s->node_count == 1 ? "" : "s",
		s->accelerator_type, co.to.zone);
	if (tpu_qr_create(c, s, &e))
		status = tpu_exit_status(e.code, &e);
	else
		status = finish(&co, c, pos.v[0]);
out:
	tpu_close(c);
	options_release(&co);
	strlist_release(&pos);
	return status;
}
