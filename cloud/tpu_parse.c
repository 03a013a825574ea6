/*
 * tpu_parse.c: queued resources, nodes, operations and guest attributes as
 * the TPU API sends them. Absent optional fields become "" (or nothing); a field of the
 * wrong type is CLOUD_ECORRUPT naming it, so a server's odd answer is
 * reported, never trusted and never a crash.
 */
#include "cloud/tpu.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
	const char *what; /* "queued resource", for messages */
	struct err *e;
};

static int bad(struct ctx *c, const char *path, const char *want)
{
	return err_set(c->e, CLOUD_ECORRUPT,
		       "malformed %s from the TPU API: \"%s\" is %s", c->what,
		       path, want);
}

static int nomem(struct ctx *c)
{
	return err_set(c->e, CLOUD_ENOMEM, "out of memory");
}

/* o[key], or NULL when absent or null (as proto3 JSON allows). */
static json_t *field(json_t *o, const char *key)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	return json_is_null(v) ? NULL : v;
}

static int get_object(struct ctx *c, json_t *o, const char *key,
		      const char *path, json_t **out)
{
	*out = field(o, key);
	if (*out && !json_is_object(*out))
		return bad(c, path, "not an object");
	return 0;
}

static int get_array(struct ctx *c, json_t *o, const char *key,
		     const char *path, json_t **out)
{
	*out = field(o, key);
	if (*out && !json_is_array(*out))
		return bad(c, path, "not an array");
	return 0;
}

/* A malloc'd copy of o[key], "" when absent. */
static int dup_string(struct ctx *c, json_t *o, const char *key,
		      const char *path, char **out)
{
	json_t *v = field(o, key);

	*out = NULL;
	if (v && !json_is_string(v))
		return bad(c, path, "not a string");
	*out = strdup(v ? json_string_value(v) : "");
	return *out ? 0 : nomem(c);
}

/* o[key] as an integer in [min, max]; *out untouched when absent. */
static int get_int(struct ctx *c, json_t *o, const char *key,
		   const char *path, json_int_t min, json_int_t max,
		   json_int_t *out)
{
	json_t *v = field(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return bad(c, path, "not an integer in range");
	*out = json_integer_value(v);
	return 0;
}

/* The last segment of a resource name. */
static const char *last_segment(const char *name)
{
	const char *slash = strrchr(name, '/');

	return slash ? slash + 1 : name;
}

/* Every resource has a name; its last segment is the id. */
static int resource_name(struct ctx *c, json_t *o, char **name, char **id)
{
	json_t *v;

	if (!json_is_object(o))
		return bad(c, "(the resource)", "not a JSON object");
	v = field(o, "name");
	if (!v)
		return bad(c, "name", "missing");
	if (!json_is_string(v) || !*json_string_value(v))
		return bad(c, "name", "not a resource name");
	*name = strdup(json_string_value(v));
	*id = *name ? strdup(last_segment(*name)) : NULL;
	return *id ? 0 : nomem(c);
}

/* Every answer is loaded the same way, so "not JSON" reads alike for each;
 * from fills out from the root. */
typedef int (*from_json_fn)(struct ctx *c, json_t *root, const char *text,
			    size_t len, void *out);

static int parse_doc(const char *what, const char *json, size_t len,
		     from_json_fn from, void *out, struct err *e)
{
	struct ctx c = { what, e };
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", json ? len : 0, 0, &jerr);
	int rc;

	if (!root)
		return err_set(e, CLOUD_ECORRUPT,
			       "malformed %s from the TPU API: not JSON (%s)",
			       what, jerr.text);
	rc = from(&c, root, json, len, out);
	json_decref(root);
	return rc;
}

static int dup_json(struct ctx *c, json_t *o, const char *text, size_t len,
		    char **out)
{
	if (text) {
		*out = strndup(text, len);
	} else {
		*out = json_dumps(o, JSON_COMPACT);
	}
	return *out ? 0 : nomem(c);
}

/* ---- queued resources ---- */

void tpu_qr_release(struct tpu_qr *q)
{
	free(q->name);
	free(q->id);
	free(q->state);
	free(q->state_initiator);
	free(q->create_time);
	free(q->accelerator_type);
	free(q->runtime_version);
	free(q->reservation);
	free(q->max_run_duration);
	free(q->termination_time);
	free(q->error_message);
	for (size_t i = 0; i < q->nnodes; i++)
		free(q->node_ids[i]);
	free(q->node_ids);
	free(q->json);
	memset(q, 0, sizeof(*q));
}

/* Room for n more node ids, made at once: a slice of many hosts grown one
 * id at a time costs time quadratic in its size. The bound is on all the
 * node specs together, each of which may name TPU_NODE_COUNT_MAX. */
static int reserve_node_ids(struct ctx *c, struct tpu_qr *q, size_t n)
{
	char **v;

	if (n > TPU_NODE_COUNT_MAX - q->nnodes)
		return bad(c, "tpu.nodeSpec", "more nodes in all than a slice "
			   "has");
	v = realloc(q->node_ids, (q->nnodes + n) * sizeof(*v));
	if (!v)
		return nomem(c);
	q->node_ids = v;
	return 0;
}

/* After reserve_node_ids. */
static int push_node_id(struct ctx *c, struct tpu_qr *q, const char *id)
{
	q->node_ids[q->nnodes] = strdup(id);
	if (!q->node_ids[q->nnodes])
		return nomem(c);
	q->nnodes++;
	return 0;
}

static int qr_state(struct ctx *c, json_t *o, struct tpu_qr *q)
{
	json_t *st, *failed = NULL, *error = NULL;
	json_int_t code = 0;
	int rc;

	rc = get_object(c, o, "state", "state", &st);
	if (!rc)
		rc = dup_string(c, st, "state", "state.state", &q->state);
	if (!rc)
		rc = dup_string(c, st, "stateInitiator", "state.stateInitiator",
				&q->state_initiator);
	if (!rc)
		rc = get_object(c, st, "failedData", "state.failedData",
				&failed);
	if (!rc)
		rc = get_object(c, failed, "error", "state.failedData.error",
				&error);
	if (!rc)
		rc = get_int(c, error, "code", "state.failedData.error.code",
			     INT32_MIN, INT32_MAX, &code);
	if (!rc)
		rc = dup_string(c, error, "message",
				"state.failedData.error.message",
				&q->error_message);
	q->error_code = (int)code;
	return rc;
}

/* The nodes of one nodeSpec: nodeId, or PREFIX-0 .. PREFIX-(N-1). */
static int qr_spec_nodes(struct ctx *c, json_t *spec, size_t i,
			 struct tpu_qr *q)
{
	char path[96];
	json_t *multi, *id;
	json_int_t count = 1;
	const char *prefix;
	int rc;

	if (!json_is_object(spec)) {
		snprintf(path, sizeof(path), "tpu.nodeSpec[%zu]", i);
		return bad(c, path, "not an object");
	}
	snprintf(path, sizeof(path), "tpu.nodeSpec[%zu].multiNodeParams", i);
	rc = get_object(c, spec, "multiNodeParams", path, &multi);
	if (rc)
		return rc;
	id = field(spec, "nodeId");
	if (id && !json_is_string(id)) {
		snprintf(path, sizeof(path), "tpu.nodeSpec[%zu].nodeId", i);
		return bad(c, path, "not a string");
	}
	if (!multi) {
		if (!id)
			return 0;
		rc = reserve_node_ids(c, q, 1);
		return rc ? rc : push_node_id(c, q, json_string_value(id));
	}
	snprintf(path, sizeof(path),
		 "tpu.nodeSpec[%zu].multiNodeParams.nodeCount", i);
	rc = get_int(c, multi, "nodeCount", path, 1, TPU_NODE_COUNT_MAX,
		     &count);
	if (rc)
		return rc;
	id = field(multi, "nodeIdPrefix");
	if (id && !json_is_string(id)) {
		snprintf(path, sizeof(path),
			 "tpu.nodeSpec[%zu].multiNodeParams.nodeIdPrefix", i);
		return bad(c, path, "not a string");
	}
	prefix = id && *json_string_value(id) ? json_string_value(id) : q->id;
	rc = reserve_node_ids(c, q, (size_t)count);
	for (json_int_t k = 0; !rc && k < count; k++) {
		struct buf b;

		buf_init(&b);
		if (buf_appendf(&b, "%s-%lld", prefix, (long long)k)) {
			buf_release(&b);
			return nomem(c);
		}
		rc = push_node_id(c, q, b.data);
		buf_release(&b);
	}
	return rc;
}

static int qr_tpu(struct ctx *c, json_t *o, struct tpu_qr *q)
{
	json_t *tpu, *specs = NULL, *first = NULL, *node = NULL;
	int rc;

	rc = get_object(c, o, "tpu", "tpu", &tpu);
	if (!rc)
		rc = get_array(c, tpu, "nodeSpec", "tpu.nodeSpec", &specs);
	for (size_t i = 0; !rc && specs && i < json_array_size(specs); i++)
		rc = qr_spec_nodes(c, json_array_get(specs, i), i, q);
	if (!rc && specs)
		first = json_array_get(specs, 0);
	if (!rc)
		rc = get_object(c, first, "node", "tpu.nodeSpec[0].node",
				&node);
	if (!rc)
		rc = dup_string(c, node, "acceleratorType",
				"tpu.nodeSpec[0].node.acceleratorType",
				&q->accelerator_type);
	if (!rc)
		rc = dup_string(c, node, "runtimeVersion",
				"tpu.nodeSpec[0].node.runtimeVersion",
				&q->runtime_version);
	return rc;
}

static int qr_capacity(struct ctx *c, json_t *o, struct tpu_qr *q)
{
	json_t *spot, *guaranteed, *best, *reserved, *run;
	char *model = NULL;
	bool flex;
	int rc;

	rc = dup_string(c, o, "provisioningModel", "provisioningModel",
			&model);
	if (rc)
		return rc;
	flex = !strcmp(model, "FLEX_START");
	free(model);
	rc = get_object(c, o, "runDuration", "runDuration", &run);
	if (!rc)
		rc = dup_string(c, run, "maxRunDuration",
				"runDuration.maxRunDuration",
				&q->max_run_duration);
	if (!rc)
		rc = dup_string(c, run, "terminationTime",
				"runDuration.terminationTime",
				&q->termination_time);
	if (!rc)
		rc = get_object(c, o, "spot", "spot", &spot);
	if (!rc)
		rc = get_object(c, o, "guaranteed", "guaranteed", &guaranteed);
	if (!rc)
		rc = get_object(c, o, "bestEffort", "bestEffort", &best);
	if (!rc)
		rc = dup_string(c, o, "reservationName", "reservationName",
				&q->reservation);
	if (rc)
		return rc;
	reserved = field(guaranteed, "reserved");
	if (reserved && !json_is_boolean(reserved))
		return bad(c, "guaranteed.reserved", "not a boolean");
	if (flex)
		q->capacity = "flex-start";
	else if (spot)
		q->capacity = "spot";
	else if (json_is_true(reserved) || *q->reservation)
		q->capacity = "reserved";
	else if (best)
		q->capacity = "best-effort";
	else
		q->capacity = "on-demand";
	return 0;
}

int tpu_qr_from_json(json_t *o, const char *text, size_t len,
		     struct tpu_qr *out, struct err *e)
{
	struct ctx c = { "queued resource", e };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = resource_name(&c, o, &out->name, &out->id);
	if (!rc)
		rc = qr_state(&c, o, out);
	if (!rc)
		rc = dup_string(&c, o, "createTime", "createTime",
				&out->create_time);
	if (!rc)
		rc = qr_tpu(&c, o, out);
	if (!rc)
		rc = qr_capacity(&c, o, out);
	if (!rc)
		rc = dup_json(&c, o, text, len, &out->json);
	if (rc)
		tpu_qr_release(out);
	return rc;
}

static int qr_from_root(struct ctx *c, json_t *root, const char *text,
			size_t len, void *out)
{
	return tpu_qr_from_json(root, text, len, out, c->e);
}

int tpu_qr_parse(const char *json, size_t len, struct tpu_qr *out,
		 struct err *e)
{
	memset(out, 0, sizeof(*out));
	return parse_doc("queued resource", json, len, qr_from_root, out, e);
}

/* ---- nodes ---- */

void tpu_node_release(struct tpu_node *n)
{
	free(n->name);
	free(n->id);
	free(n->uid);
	free(n->state);
	free(n->health);
	free(n->accelerator_type);
	for (size_t i = 0; i < n->nendpoints; i++) {
		free(n->endpoints[i].ip);
		free(n->endpoints[i].external_ip);
	}
	free(n->endpoints);
	free(n->maintenance.type);
	free(n->maintenance.status);
	free(n->maintenance.window_start);
	free(n->maintenance.window_end);
	free(n->maintenance.latest_start);
	free(n->json);
	memset(n, 0, sizeof(*n));
}

static int node_endpoint(struct ctx *c, json_t *ep, size_t i,
			 struct tpu_endpoint *out)
{
	char path[96];
	json_t *access;
	json_int_t port = 0;
	int rc;

	if (!json_is_object(ep)) {
		snprintf(path, sizeof(path), "networkEndpoints[%zu]", i);
		return bad(c, path, "not an object");
	}
	snprintf(path, sizeof(path), "networkEndpoints[%zu].ipAddress", i);
	rc = dup_string(c, ep, "ipAddress", path, &out->ip);
	if (!rc) {
		snprintf(path, sizeof(path), "networkEndpoints[%zu].port", i);
		rc = get_int(c, ep, "port", path, 0, 65535, &port);
	}
	if (!rc) {
		snprintf(path, sizeof(path),
			 "networkEndpoints[%zu].accessConfig", i);
		rc = get_object(c, ep, "accessConfig", path, &access);
	}
	if (!rc) {
		snprintf(path, sizeof(path),
			 "networkEndpoints[%zu].accessConfig.externalIp", i);
		rc = dup_string(c, access, "externalIp", path,
				&out->external_ip);
	}
	out->port = (unsigned)port;
	return rc;
}

/* Node.upcomingMaintenance; every string is "" when absent, so a node
 * without it has them all "" and announced false. */
static int node_maintenance(struct ctx *c, json_t *o,
			    struct tpu_maintenance *m)
{
	static const struct {
		const char *key;
		size_t off;
	} strings[] = {
		{ "type", offsetof(struct tpu_maintenance, type) },
		{ "maintenanceStatus", offsetof(struct tpu_maintenance, status) },
		{ "windowStartTime",
		  offsetof(struct tpu_maintenance, window_start) },
		{ "windowEndTime", offsetof(struct tpu_maintenance, window_end) },
		{ "latestWindowStartTime",
		  offsetof(struct tpu_maintenance, latest_start) },
	};
	json_t *um, *can;
	char path[64];
	int rc = get_object(c, o, "upcomingMaintenance", "upcomingMaintenance",
			    &um);

	for (size_t i = 0; !rc && i < sizeof(strings) / sizeof(strings[0]);
	     i++) {
		snprintf(path, sizeof(path), "upcomingMaintenance.%s",
			 strings[i].key);
		rc = dup_string(c, um, strings[i].key, path,
				(char **)((char *)m + strings[i].off));
	}
	if (rc)
		return rc;
	can = field(um, "canReschedule");
	if (can && !json_is_boolean(can))
		return bad(c, "upcomingMaintenance.canReschedule",
			   "not a boolean");
	m->announced = um != NULL;
	m->can_reschedule = json_is_true(can);
	return 0;
}

static int node_from_json(struct ctx *c, json_t *o, const char *text,
			  size_t len, void *node)
{
	struct tpu_node *out = node;
	json_t *uid, *eps;
	int rc;

	rc = resource_name(c, o, &out->name, &out->id);
	if (rc)
		return rc;
	/* An int64, which proto3 JSON sends as a string. */
	uid = field(o, "id");
	if (json_is_integer(uid)) {
		char num[32];

		snprintf(num, sizeof(num), "%lld",
			 (long long)json_integer_value(uid));
		out->uid = strdup(num);
		if (!out->uid)
			return nomem(c);
	} else if ((rc = dup_string(c, o, "id", "id", &out->uid))) {
		return rc;
	}
	rc = dup_string(c, o, "state", "state", &out->state);
	if (!rc)
		rc = dup_string(c, o, "health", "health", &out->health);
	if (!rc)
		rc = dup_string(c, o, "acceleratorType", "acceleratorType",
				&out->accelerator_type);
	if (!rc)
		rc = node_maintenance(c, o, &out->maintenance);
	if (!rc)
		rc = get_array(c, o, "networkEndpoints", "networkEndpoints",
			       &eps);
	if (!rc && eps && json_array_size(eps)) {
		out->endpoints = calloc(json_array_size(eps),
					sizeof(*out->endpoints));
		if (!out->endpoints)
			return nomem(c);
		for (size_t i = 0; !rc && i < json_array_size(eps); i++) {
			out->nendpoints = i + 1;
			rc = node_endpoint(c, json_array_get(eps, i), i,
					   &out->endpoints[i]);
		}
	}
	if (!rc)
		rc = dup_json(c, o, text, len, &out->json);
	return rc;
}

int tpu_node_parse(const char *json, size_t len, struct tpu_node *out,
		   struct err *e)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = parse_doc("node", json, len, node_from_json, out, e);
	if (rc)
		tpu_node_release(out);
	return rc;
}

/* ---- operations ---- */

static int op_from_json(struct ctx *c, json_t *root, const char *text,
			size_t len, void *operation)
{
	struct tpu_operation *op = operation;
	json_t *name, *done, *error, *code = NULL, *msg = NULL;
	const char *s;

	(void)text;
	(void)len;
	if (!json_is_object(root))
		return bad(c, "(the operation)", "not a JSON object");
	name = json_object_get(root, "name");
	done = field(root, "done");
	error = field(root, "error");
	if (name && !json_is_string(name))
		return bad(c, "name", "not a string");
	if (done && !json_is_boolean(done))
		return bad(c, "done", "not a boolean");
	if (error && !json_is_object(error))
		return bad(c, "error", "not an object");
	if (error) {
		code = json_object_get(error, "code");
		msg = json_object_get(error, "message");
	}
	if (code && !json_is_integer(code))
		return bad(c, "error.code", "not an integer");
	if (msg && !json_is_string(msg))
		return bad(c, "error.message", "not a string");
	op->done = json_is_true(done);
	s = json_string_value(name);
	if (!op->done && !(s && *s))
		return bad(c, "name", "missing from an operation not yet done");
	if (error) {
		op->failed = true;
		op->code = code ? (int)json_integer_value(code) : 0;
		snprintf(op->message, sizeof(op->message), "%s",
			 msg ? json_string_value(msg) : "no message");
	}
	if (s && !(op->name = strdup(s)))
		return nomem(c);
	return 0;
}

int tpu_operation_parse(const char *json, size_t len,
			struct tpu_operation *op, struct err *e)
{
	free(op->name);
	memset(op, 0, sizeof(*op));
	return parse_doc("operation", json, len, op_from_json, op, e);
}

/* ---- guest attributes: SSH host keys ---- */

bool tpu_ssh_key_type(const char *key)
{
	static const char *const types[] = {
		"ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
		"ecdsa-sha2-nistp521", "ssh-rsa", NULL,
	};

	for (size_t i = 0; types[i]; i++)
		if (strcmp(key, types[i]) == 0)
			return true;
	return false;
}

/* Plain base64 (no blanks, padding only at the end) of a non-empty blob. */
static bool base64_blob(const char *v)
{
	size_t n = strlen(v), got = 0;
	unsigned char *raw;
	bool ok;

	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = v[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || ch == '+' || ch == '/' ||
		      ch == '='))
			return false;
	}
	raw = malloc(n);
	if (!raw)
		return false;
	ok = base64_decode(v, n, raw, n, &got) == 0 && got > 0;
	free(raw);
	return ok;
}

void tpu_hostkeys_release(struct tpu_hostkeys *h, size_t n)
{
	if (!h)
		return;
	for (size_t i = 0; i < n; i++)
		strlist_release(&h[i].keys);
	free(h);
}

static int worker_keys(struct ctx *c, json_t *ga, size_t w,
		       struct tpu_hostkeys *out)
{
	char path[96];
	json_t *value, *items;
	int rc;

	if (!json_is_object(ga)) {
		snprintf(path, sizeof(path), "guestAttributes[%zu]", w);
		return bad(c, path, "not an object");
	}
	snprintf(path, sizeof(path), "guestAttributes[%zu].queryValue", w);
	rc = get_object(c, ga, "queryValue", path, &value);
	if (!rc) {
		snprintf(path, sizeof(path),
			 "guestAttributes[%zu].queryValue.items", w);
		rc = get_array(c, value, "items", path, &items);
	}
	for (size_t i = 0; !rc && items && i < json_array_size(items); i++) {
		json_t *item = json_array_get(items, i);
		json_t *key = field(item, "key"), *val = field(item, "value");
		struct buf line;

		snprintf(path, sizeof(path),
			 "guestAttributes[%zu].queryValue.items[%zu]", w, i);
		if (!json_is_object(item))
			return bad(c, path, "not an object");
		if ((key && !json_is_string(key)) ||
		    (val && !json_is_string(val))) {
			size_t l = strlen(path);

			snprintf(path + l, sizeof(path) - l, ".%s",
				 key && !json_is_string(key) ? "key"
							     : "value");
			return bad(c, path, "not a string");
		}
		if (!key || !val ||
		    !tpu_ssh_key_type(json_string_value(key)) ||
		    !base64_blob(json_string_value(val)))
			continue;
		buf_init(&line);
		if (buf_appendf(&line, "%s %s", json_string_value(key),
				json_string_value(val)) ||
		    strlist_push(&out->keys, line.data))
			rc = nomem(c);
		buf_release(&line);
	}
	return rc;
}

/* Handed back to the caller only when the whole answer parsed. */
struct hostkeys {
	struct tpu_hostkeys *h;
	size_t count;
};

static int hostkeys_from_json(struct ctx *c, json_t *root, const char *text,
			      size_t len, void *keys)
{
	struct hostkeys *k = keys;
	json_t *gas = NULL;
	int rc;

	(void)text;
	(void)len;
	if (!json_is_object(root))
		rc = bad(c, "(the answer)", "not a JSON object");
	else
		rc = get_array(c, root, "guestAttributes", "guestAttributes",
			       &gas);
	if (!rc && gas && json_array_size(gas)) {
		k->count = json_array_size(gas);
		k->h = calloc(k->count, sizeof(*k->h));
		if (!k->h)
			rc = nomem(c);
		for (size_t i = 0; k->h && i < k->count; i++)
			strlist_init(&k->h[i].keys);
		for (size_t i = 0; !rc && i < k->count; i++)
			rc = worker_keys(c, json_array_get(gas, i), i,
					 &k->h[i]);
	}
	return rc;
}

int tpu_hostkeys_parse(const char *json, size_t len,
		       struct tpu_hostkeys **out, size_t *n, struct err *e)
{
	struct hostkeys k = { NULL, 0 };
	int rc;

	*out = NULL;
	*n = 0;
	rc = parse_doc("guest attributes answer", json, len,
		       hostkeys_from_json, &k, e);
	if (rc) {
		tpu_hostkeys_release(k.h, k.h ? k.count : 0);
		return rc;
	}
	*out = k.h;
	*n = k.count;
	return 0;
}
