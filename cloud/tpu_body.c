/*
 * tpu_body.c: the queuedResources.create request body, with exactly the
 * fields a tpu_qr_spec asks for, named and typed as the v2alpha1 API has
 * them as Google Cloud CLI 528 knows it (api/tpu.v2alpha1.gcloud-528.json),
 * and the checks the API would otherwise make after a round trip (labels,
 * metadata sizes, capacity combinations) made here with a message naming
 * the entry at fault.
 *
 * Spot capacity is "spot": {} alone, without a provisioningModel: that is
 * what the API has always taken and what gcloud's GA (v2) command sends.
 * gcloud 528's alpha command sends "provisioningModel": "STANDARD" beside
 * it (its SetProvisioningModel overwrites SPOT), which contradicts itself,
 * and SPOT beside "spot" says nothing more. Flex-start has no tier, so it
 * can only be asked for by provisioningModel FLEX_START.
 */
#include "cloud/tpu.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX 63

void tpu_qr_spec_init(struct tpu_qr_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->node_count = 1;
	strlist_init(&s->scopes);
	strlist_init(&s->tags);
	strlist_init(&s->labels);
	strlist_init(&s->metadata);
}

void tpu_qr_spec_release(struct tpu_qr_spec *s)
{
	strlist_release(&s->scopes);
	strlist_release(&s->tags);
	strlist_release(&s->labels);
	strlist_release(&s->metadata);
	tpu_qr_spec_init(s);
}

static bool given(const char *s)
{
	return s && *s;
}

static int nomem(struct err *e)
{
	return err_set(e, CLOUD_ENOMEM, "out of memory");
}

/* A JSON string of v; CLOUD_EINVAL naming what when v is not UTF-8 (the
 * API takes nothing else). */
static int string(const char *v, const char *what, json_t **out,
		  struct err *e)
{
	json_t *probe;

	*out = json_string(v);
	if (*out)
		return 0;
	probe = json_string_nocheck(v);
	if (!probe)
		return nomem(e);
	json_decref(probe);
	return err_set(e, CLOUD_EINVAL, "%s is not UTF-8 text", what);
}

/* Sets obj[key] to the string v. */
static int put_string(json_t *obj, const char *key, const char *v,
		      const char *what, struct err *e)
{
	json_t *s;
	int rc = string(v, what, &s, e);

	if (rc)
		return rc;
	if (json_object_set_new(obj, key, s))
		return nomem(e);
	return 0;
}

/* Sets obj[key] to v, which the caller no longer owns (NULL: no memory). */
static int put(json_t *obj, const char *key, json_t *v, struct err *e)
{
	if (!v || json_object_set_new(obj, key, v))
		return nomem(e);
	return 0;
}

static int put_strings(json_t *obj, const char *key,
		       const struct strlist *l, const char *what,
		       struct err *e)
{
	json_t *a = json_array();

	if (!a)
		return nomem(e);
	for (size_t i = 0; i < l->n; i++) {
		json_t *s;
		int rc = string(l->v[i], what, &s, e);

		if (!rc && json_array_append_new(a, s))
			rc = nomem(e);
		if (rc) {
			json_decref(a);
			return rc;
		}
	}
	return put(obj, key, a, e);
}

static int put_duration(json_t *obj, const char *key, uint64_t s,
			struct err *e)
{
	char v[32];

	snprintf(v, sizeof(v), "%" PRIu64 "s", s);
	return put(obj, key, json_string(v), e);
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-';
}

static bool label_word(const char *s, size_t n)
{
	if (n > LABEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!label_char(s[i]))
			return false;
	return true;
}

/* Labels and metadata split and refuse entries alike; only the checks of
 * a key and value, and what goes into o, differ. */
typedef int (*entry_fn)(json_t *o, const char *kv, const char *key,
			const char *value, struct err *e);

/* An object of l's KEY=VALUE entries (split at the first '='); what
 * ("label") names a bad one. */
static int kv_object(const struct strlist *l, const char *what,
		     entry_fn entry, json_t **out, struct err *e)
{
	json_t *o = json_object();

	*out = NULL;
	if (!o)
		return nomem(e);
	for (size_t i = 0; i < l->n; i++) {
		const char *kv = l->v[i];
		const char *eq = strchr(kv, '=');
		char *key = NULL;
		int rc;

		if (!eq)
			rc = err_set(e, CLOUD_EINVAL,
				     "%s \"%.80s\" is not KEY=VALUE", what, kv);
		else if (eq == kv)
			rc = err_set(e, CLOUD_EINVAL,
				     "%s \"%.80s\" has an empty key", what, kv);
		else if (!(key = strndup(kv, (size_t)(eq - kv))))
			rc = nomem(e);
		else
			rc = entry(o, kv, key, eq + 1, e);
		free(key);
		if (rc) {
			json_decref(o);
			return rc;
		}
	}
	*out = o;
	return 0;
}

static int label_entry(json_t *o, const char *kv, const char *key,
		       const char *value, struct err *e)
{
	if (!(key[0] >= 'a' && key[0] <= 'z') ||
	    !label_word(key, strlen(key)))
		return err_set(e, CLOUD_EINVAL,
			       "label \"%.80s\": a key is 1 to %d lowercase "
			       "letters, digits, _ and -, starting with a "
			       "letter", kv, LABEL_MAX);
	if (!label_word(value, strlen(value)))
		return err_set(e, CLOUD_EINVAL,
			       "label \"%.80s\": a value is at most %d "
			       "lowercase letters, digits, _ and -", kv,
			       LABEL_MAX);
	/* The last of a repeated key wins. */
	if (json_object_set_new(o, key, json_string(value)))
		return nomem(e);
	return 0;
}

static int put_labels(json_t *node, const struct strlist *l, struct err *e)
{
	json_t *o;
	int rc = kv_object(l, "label", label_entry, &o, e);

	return rc ? rc : put(node, "labels", o, e);
}

static int metadata_entry(json_t *o, const char *kv, const char *key,
			  const char *value, struct err *e)
{
	size_t vlen = strlen(value);
	char what[128];
	json_t *s;
	int rc;

	(void)kv;
	if (vlen > TPU_METADATA_VALUE_MAX)
		return err_set(e, CLOUD_EINVAL,
			       "metadata \"%.80s\": the value is %zu bytes, "
			       "over the limit of %u KiB for one value", key,
			       vlen, TPU_METADATA_VALUE_MAX / 1024);
	rc = string(key, "a metadata key", &s, e);
	if (rc)
		return rc;
	json_decref(s);
	snprintf(what, sizeof(what), "the value of metadata \"%.80s\"", key);
	rc = string(value, what, &s, e);
	if (!rc && json_object_set_new(o, key, s))
		rc = nomem(e);
	return rc;
}

static int put_metadata(json_t *node, const struct strlist *l, struct err *e)
{
	const char *key;
	json_t *o, *v;
	size_t total = 0;
	int rc = kv_object(l, "metadata", metadata_entry, &o, e);

	if (rc)
		return rc;
	/* Counted once every repeated key has its last value. */
	json_object_foreach(o, key, v) {
		total += strlen(key) + json_string_length(v);
		if (total > TPU_METADATA_TOTAL_MAX) {
			rc = err_set(e, CLOUD_EINVAL,
				     "metadata \"%.80s\": the entries up to "
				     "this one are %zu bytes, over the limit "
				     "of %u KiB for all metadata", key, total,
				     TPU_METADATA_TOTAL_MAX / 1024);
			json_decref(o);
			return rc;
		}
	}
	return put(node, "metadata", o, e);
}

static int node_body(const struct tpu_qr_spec *s, json_t *node,
		     struct err *e)
{
	int rc = 0;

	if (given(s->accelerator_type))
		rc = put_string(node, "acceleratorType", s->accelerator_type,
				"the accelerator type", e);
	if (!rc && given(s->runtime_version))
		rc = put_string(node, "runtimeVersion", s->runtime_version,
				"the runtime version", e);
	if (!rc && given(s->description))
		rc = put_string(node, "description", s->description,
				"the description", e);
	if (!rc && (given(s->network) || given(s->subnetwork) ||
		    s->external_ips)) {
		json_t *net = json_object();

		rc = put(node, "networkConfig", net, e);
		if (!rc && given(s->network))
			rc = put_string(net, "network", s->network,
					"the network", e);
		if (!rc && given(s->subnetwork))
			rc = put_string(net, "subnetwork", s->subnetwork,
					"the subnetwork", e);
		if (!rc && s->external_ips)
			rc = put(net, "enableExternalIps", json_true(), e);
	}
	if (!rc && (given(s->service_account) || s->scopes.n)) {
		json_t *sa = json_object();

		rc = put(node, "serviceAccount", sa, e);
		if (!rc && given(s->service_account))
			rc = put_string(sa, "email", s->service_account,
					"the service account", e);
		if (!rc && s->scopes.n)
			rc = put_strings(sa, "scope", &s->scopes,
					 "a service account scope", e);
	}
	if (!rc && s->tags.n)
		rc = put_strings(node, "tags", &s->tags, "a network tag", e);
	if (!rc && s->labels.n)
		rc = put_labels(node, &s->labels, e);
	if (!rc && s->metadata.n)
		rc = put_metadata(node, &s->metadata, e);
	return rc;
}

int tpu_provisioning_model(const char *name, enum tpu_capacity *out,
			   struct err *e)
{
	static const struct {
		const char *name;
		enum tpu_capacity capacity;
	} models[] = {
		{ "standard", TPU_CAPACITY_ON_DEMAND },
		{ "spot", TPU_CAPACITY_SPOT },
		{ "reservation-bound", TPU_CAPACITY_RESERVED },
		{ "flex-start", TPU_CAPACITY_FLEX_START },
	};

	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		if (name && !strcmp(name, models[i].name)) {
			*out = models[i].capacity;
			return 0;
		}
	}
	return err_set(e, CLOUD_EINVAL,
		       "provisioning model '%.40s' is none of standard, spot, "
		       "reservation-bound and flex-start", name ? name : "");
}

int tpu_capacity_choose(const char *model, enum tpu_capacity chosen,
			const char *flag, enum tpu_capacity *out,
			struct err *e)
{
	enum tpu_capacity named;

	*out = chosen;
	if (!model)
		return 0;
	if (tpu_provisioning_model(model, &named, e)) {
		err_prefix(e, "--provisioning-model");
		return CLOUD_EINVAL;
	}
	if (flag && named != chosen)
		return err_set(e, CLOUD_EINVAL,
			       "%s contradicts --provisioning-model %s; give "
			       "one of them", flag, model);
	*out = named;
	return 0;
}

int tpu_qr_spec_check(const struct tpu_qr_spec *s, struct err *e)
{
	if (!given(s->id))
		return err_set(e, CLOUD_EINVAL,
			       "the queued resource has no name");
	if (s->node_count == 0)
		return err_set(e, CLOUD_EINVAL,
			       "queued resource %s: a node count of 0; it "
			       "needs at least one node", s->id);
	if (s->node_count > INT32_MAX)
		return err_set(e, CLOUD_EINVAL,
			       "queued resource %s: a node count of %u is more "
			       "than the API takes", s->id, s->node_count);
	if (given(s->reservation) && (s->capacity == TPU_CAPACITY_SPOT ||
				      s->capacity ==
					      TPU_CAPACITY_BEST_EFFORT))
		return err_set(e, CLOUD_EINVAL,
			       "queued resource %s: reservation %s is reserved "
			       "capacity; it cannot also be %s", s->id,
			       s->reservation,
			       s->capacity == TPU_CAPACITY_SPOT ? "spot"
								: "best-effort");
	if (s->capacity == TPU_CAPACITY_FLEX_START) {
		if (given(s->reservation))
			return err_set(e, CLOUD_EINVAL,
				       "queued resource %s: flex-start capacity "
				       "comes from no reservation; drop "
				       "reservation %s or use the "
				       "reservation-bound model", s->id,
				       s->reservation);
		if (!s->max_run_duration_s)
			return err_set(e, CLOUD_EINVAL,
				       "queued resource %s: flex-start capacity "
				       "needs a maximum run duration "
				       "(--max-run-duration, up to 7d)", s->id);
		if (s->max_run_duration_s > TPU_MAX_RUN_DURATION_S)
			return err_set(e, CLOUD_EINVAL,
				       "queued resource %s: a run duration of "
				       "%" PRIu64 "s is longer than the 7 days "
				       "(%us) flex-start capacity is sold for",
				       s->id, s->max_run_duration_s,
				       TPU_MAX_RUN_DURATION_S);
	} else if (s->max_run_duration_s) {
		return err_set(e, CLOUD_EINVAL,
			       "queued resource %s: a maximum run duration is "
			       "for flex-start capacity only "
			       "(--provisioning-model flex-start)", s->id);
	}
	return 0;
}

static int check_spec(const struct tpu_qr_spec *s, const char *parent,
		      struct err *e)
{
	int rc = tpu_qr_spec_check(s, e);

	if (!rc && !given(parent))
		rc = err_set(e, CLOUD_EINVAL,
			     "no parent (projects/P/locations/Z) for queued "
			     "resource %s", s->id);
	return rc;
}

static int capacity_body(const struct tpu_qr_spec *s, const char *parent,
			 json_t *root, struct err *e)
{
	enum tpu_capacity cap = s->capacity;
	int rc = 0;

	if (given(s->reservation))
		cap = TPU_CAPACITY_RESERVED;
	switch (cap) {
	case TPU_CAPACITY_SPOT:
		rc = put(root, "spot", json_object(), e);
		break;
	case TPU_CAPACITY_RESERVED: {
		json_t *g = json_object();

		rc = put(root, "guaranteed", g, e);
		if (!rc)
			rc = put(g, "reserved", json_true(), e);
		break;
	}
	case TPU_CAPACITY_BEST_EFFORT:
		rc = put(root, "bestEffort", json_object(), e);
		break;
	case TPU_CAPACITY_FLEX_START: {
		json_t *run = json_object();

		rc = put_string(root, "provisioningModel", "FLEX_START",
				"the provisioning model", e);
		if (!rc)
			rc = put(root, "runDuration", run, e);
		else
			json_decref(run);
		if (!rc)
			rc = put_duration(run, "maxRunDuration",
					  s->max_run_duration_s, e);
		break;
	}
	case TPU_CAPACITY_ON_DEMAND:
	default:
		break;
	}
	if (!rc && given(s->reservation)) {
		struct buf r;

		buf_init(&r);
		if (strchr(s->reservation, '/')
			    ? buf_appends(&r, s->reservation)
			    : buf_appendf(&r, "%s/reservations/%s", parent,
					  s->reservation))
			rc = nomem(e);
		else
			rc = put_string(root, "reservationName", r.data,
					"the reservation", e);
		buf_release(&r);
	}
	if (!rc && (s->valid_until_s || s->valid_after_s)) {
		json_t *q = json_object();

		rc = put(root, "queueingPolicy", q, e);
		if (!rc && s->valid_until_s)
			rc = put_duration(q, "validUntilDuration",
					  s->valid_until_s, e);
		if (!rc && s->valid_after_s)
			rc = put_duration(q, "validAfterDuration",
					  s->valid_after_s, e);
	}
	return rc;
}

int tpu_qr_body(const struct tpu_qr_spec *s, const char *parent, char **out,
		struct err *e)
{
	json_t *root, *tpu, *specs = NULL, *spec = NULL, *node = NULL;
	int rc;

	*out = NULL;
	rc = check_spec(s, parent, e);
	if (rc)
		return rc;
	root = json_object();
	if (!root)
		return nomem(e);
	/* Each value belongs to root as soon as it is put in (put and
	 * json_array_append_new take it even when they fail). */
	tpu = json_object();
	rc = put(root, "tpu", tpu, e);
	if (!rc) {
		specs = json_array();
		rc = put(tpu, "nodeSpec", specs, e);
	}
	if (!rc) {
		spec = json_object();
		if (!spec || json_array_append_new(specs, spec))
			rc = nomem(e);
	}
	if (!rc)
		rc = put_string(spec, "parent", parent, "the parent", e);
	if (!rc && s->node_count == 1) {
		rc = put_string(spec, "nodeId", s->id, "the name", e);
	} else if (!rc) {
		json_t *multi = json_object();

		rc = put(spec, "multiNodeParams", multi, e);
		if (!rc)
			rc = put(multi, "nodeCount",
				 json_integer(s->node_count), e);
		if (!rc)
			rc = put_string(multi, "nodeIdPrefix", s->id,
					"the name", e);
	}
	if (!rc) {
		node = json_object();
		rc = put(spec, "node", node, e);
	}
	if (!rc)
		rc = node_body(s, node, e);
	if (!rc)
		rc = capacity_body(s, parent, root, e);
	if (!rc) {
		*out = json_dumps(root, JSON_COMPACT);
		if (!*out)
			rc = nomem(e);
	}
	json_decref(root);
	return rc;
}
