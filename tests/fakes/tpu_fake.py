#!/usr/bin/env python3
"""A fake Cloud TPU API (v2alpha1) server for slicectl's tests.

It promises the real API's rules for the calls slicectl makes, so that a
client that works against it works against tpu.googleapis.com:

- queued resources: create (idempotent by requestId, 409 for a taken id),
  get, list with pagination, delete (refused without force while nodes
  exist, as the API does), reset; each walks through the API's states
  CREATING, ACCEPTED, WAITING_FOR_RESOURCES, PROVISIONING, ACTIVE (and
  DELETING, SUSPENDING, SUSPENDED, FAILED), each transitional state lasting
  a configurable delay; nodes appear at PROVISIONING and are READY at
  ACTIVE, one loopback address per worker;
- flex-start (provisioningModel FLEX_START + runDuration.maxRunDuration,
  no tier): once ACTIVE, runDuration.terminationTime is set to the end of
  the run; at that time, as Google documents it, the nodes are deleted and
  the queued resource goes SUSPENDING then SUSPENDED (stateInitiator
  SERVICE);
- performMaintenanceQueuedResource (optionally for some nodeNames): the
  maintenance announced in Node.upcomingMaintenance goes ONGOING for the
  MAINTENANCE delay, then is gone;
- nodes: get, list, getGuestAttributes (the SSH host keys that Google's
  guest agent publishes under "hostkeys/"), simulateMaintenanceEvent;
- long-running operations, named and shaped as the API names them;
- every request body checked against the newest schemas (Google Cloud
  CLI 528's, api/tpu.v2alpha1.gcloud-528.json, with the discovery
  document's formats and output-only marks where they say more)
  (unknown fields, JSON types, enums, durations, timestamps, maps), with
  Google's error messages and field paths; output-only fields are dropped
  and recorded; query parameters are bound as Google binds them;
- errors in Google's shape: {"error": {"code", "message", "status",
  "details"}}.

The routes come from the discovery document (and the two maintenance
methods gcloud 528 knows), loaded at start.
Methods it declares that the fake does not serve answer 501 UNIMPLEMENTED.
State advances lazily: timed transitions are kept in a queue and run, in
time order and at their exact scheduled times, before anything is read or
changed, so the outcome is what a clock-driven thread would produce.

As the real API does: an operation has no "done" until it is done;
empty lists and messages are left out ({} for an empty list answer,
"queryValue": {} for a worker with no attributes); multiNodeParams.
nodeCount must be > 1 (the discovery document says so; one node is
nodeId); a non-JSON Content-Type on a body is read as form fields (an
error); unknown query parameters are refused. Stricter than the real API:
requestId must be a UUID, enum values must be names (not numbers), bools
in bodies true or false (in queries also True and False, which gcloud
sends and the API takes). Looser: "fields" (partial responses) is accepted and
ignored.

Control endpoints (no auth; JSON in and out; errors in Google's shape):
  POST /_fake/config    merges settings, answers the whole config:
      "delay": S             every timed state without its own delay
      "delays": {STATE: S}   CREATING, ACCEPTED, WAITING_FOR_RESOURCES,
                             PROVISIONING, DELETING, SUSPENDING, RESTARTING
                             (a reset's nodes), MAINTENANCE; S < 0 holds the
                             state until a delay is set; null: back to delay
      "workers_per_node": N  (null: from the accelerator type)
      "zones": [Z...]        other zones are 404 (null: any zone)
      "ip_base", "external_ip_base": first address of each /16 pool
      "hostkeys": {TYPE: BASE64}            every worker (null: a distinct
                                            ssh-ed25519 key per worker)
      "hostkey_overrides": {"NODE/W": {TYPE: BASE64}}
      "publish_hostkeys": bool
      "fail_at": {QRID: {"state": S, "code": N, "message": M}}: FAILED
                             instead of entering S (ACCEPTED ... ACTIVE)
      Object settings merge key by key; a null value deletes the key.
  GET  /_fake/config
  POST /_fake/fail      {"name": QRID, "code": N, "message": M} (+ optional
                        "project", "zone"): FAILED now, nodes gone
  POST /_fake/suspend   {"name": QRID}: a spot, best-effort or flex-start
                        QR, ACTIVE or PROVISIONING, goes SUSPENDING then
                        SUSPENDED
  POST /_fake/end_run   {"name": QRID}: an ACTIVE flex-start QR's run ends
                        now (as at runDuration.terminationTime)
  POST /_fake/node      {"name": NODEID, "upcomingMaintenance": {...},
                        "state": S, "health": H} (+ "project", "zone"):
                        what the walk never gives a node (state UNKNOWN,
                        announced maintenance); null clears; answers the
                        node
  POST /_fake/faults    a rule or a list: {"method", "path" (regex searched
                        in path?query), "count" (default 1, < 0: always),
                        then "status" (+ "message", "retry_after",
                        "status_name"), "reset": true or "stall": S;
                        "processed": true acts on the request first};
                        GET lists them (count left), DELETE clears them
  GET  /_fake/requests  [{"method", "path", "query", "body" (parsed or
                        null), "ignored" (output-only fields sent, as field
                        paths), "headers" (authorization, content-type),
                        "status" (or "reset"), "fault" (the rule or
                        null)}]; DELETE clears it
  GET  /_fake/maintenance  [{"node", "name", "workerIds", "worker", "time"}
                        (+ "kind": "performMaintenance" for those)]
  GET  /_fake/state     {"queuedResources", "nodes", "operations",
                        "addressesInUse", "config"}
  POST /_fake/reset     forgets everything, config included

Python standard library only (and, next to it, fake_common.py for the
fault rules, the request plumbing, the server class and the timestamp
format; fake_api.py for Google's errors, the body checker, query binding
and the API's request handler, which vertex_fake.py shares).

Usage: tpu_fake.py --port-file FILE [--port N] [--discovery PATH]
                   [--schemas PATH]
                   [--require-token T] [--delay S] [--verbose]
Serves http://127.0.0.1:PORT until SIGTERM; PORT is written to FILE (by
rename, so a reader never sees half of it) once the socket listens.
"""

import argparse
import base64
import copy
import hashlib
import heapq
import itertools
import json
import os
import re
import secrets
import threading
import time

import fake_api
import fake_common
from fake_api import (ApiError, Checker, Fault, STATUSES, _json_text,
		      check_query, invalid_field, missing_field, snake)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DISCOVERY = os.path.join(HERE, "..", "..", "api",
				 "tpu.v2alpha1.json")
# The API as Google Cloud CLI 528 (June 2025) knows it: the schemas the
# bodies are checked against (see api/README.md).
DEFAULT_SCHEMAS = os.path.join(HERE, "..", "..", "api",
			       "tpu.v2alpha1.gcloud-528.json")

# What the gcloud-528 schemas cannot say (they come from apitools classes,
# which carry neither formats nor field behaviours) about fields the 2024
# discovery document lacks; from the v2alpha1 proto
# (google/cloud/tpu/v2alpha1/cloud_tpu.proto): RunDuration's fields are a
# Duration and an output-only Timestamp, SchedulingConfig's
# termination_timestamp an output-only Timestamp, Node.upcoming_maintenance
# output only (its times are plain strings in the proto).
NEWER_FIELDS = {
	("RunDuration", "maxRunDuration"): {"format": "google-duration"},
	("RunDuration", "terminationTime"): {"format": "google-datetime",
					     "readOnly": True},
	("SchedulingConfig", "terminationTimestamp"): {
		"format": "google-datetime", "readOnly": True},
	("Node", "upcomingMaintenance"): {"readOnly": True},
}

# Methods gcloud 528's v2alpha1 client calls that the 2024 discovery
# document does not list (tpu_v2alpha1_client.py: flat_path, http_method,
# request_type_name's body field).
NEWER_METHODS = [
	{"id": "tpu.projects.locations.queuedResources."
	       "performMaintenanceQueuedResource",
	 "flatPath": "v2alpha1/projects/{projectsId}/locations/{locationsId}/"
		     "queuedResources/{queuedResourcesId}:"
		     "performMaintenanceQueuedResource",
	 "httpMethod": "POST",
	 "request": {"$ref": "PerformMaintenanceQueuedResourceRequest"}},
	{"id": "tpu.projects.locations.nodes.performMaintenance",
	 "flatPath": "v2alpha1/projects/{projectsId}/locations/{locationsId}/"
		     "nodes/{nodesId}:performMaintenance",
	 "httpMethod": "POST",
	 "request": {"$ref": "PerformMaintenanceRequest"}},
]

RESOURCE_ID = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
ACCELERATOR_TYPE = re.compile(r"(v2|v3|v4|v5p|v5litepod|v6e|tpu7x)-([0-9]+)")
RESERVATION = re.compile(r"projects/[^/]+/locations/[^/]+/reservations/[^/]+")
TOPOLOGY = re.compile(r"[1-9][0-9]*(x[1-9][0-9]*){1,2}")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
		  r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
METADATA_VALUE_MAX = 256 * 1024
METADATA_TOTAL_MAX = 512 * 1024
WORKER_PORT = 8470

# The walk of a created queued resource, and the states that end on a
# timer (each lasts its delay). RESTARTING is a reset's node restart and
# MAINTENANCE a simulated maintenance event.
WALK = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING",
	"ACTIVE")
TIMED = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING",
	 "DELETING", "SUSPENDING", "RESTARTING", "MAINTENANCE")
# Without force=true, delete is refused while nodes exist, except here.
DELETABLE = ("ACCEPTED", "WAITING_FOR_RESOURCES", "FAILED", "SUSPENDED")


def rfc3339(t):
	return fake_common.rfc3339(t)


def ip_text(n):
	return "%d.%d.%d.%d" % (n >> 24, (n >> 16) & 255, (n >> 8) & 255,
				n & 255)


def ip_number(text):
	parts = [int(p) for p in text.split(".")]
	if len(parts) != 4 or any(p < 0 or p > 255 for p in parts) or \
			parts[0] != 127:
		raise ValueError("not a 127.0.0.0/8 address: %s" % text)
	return (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]

# ---------------------------------------------------------------- errors


def not_found(name):
	return ApiError("NOT_FOUND", "Resource '%s' was not found" % name,
			[resource_info(name)])


def already_exists(name):
	return ApiError("ALREADY_EXISTS", "Resource '%s' already exists" % name,
			[resource_info(name)])


def resource_info(name):
	kind = name.split("/")[-2] if "/" in name else ""
	return {"@type": "type.googleapis.com/google.rpc.ResourceInfo",
		"resourceType": "tpu.googleapis.com/" + kind, "resourceName": name}


def failed_precondition(subject, message):
	return ApiError("FAILED_PRECONDITION", message, [{
		"@type": "type.googleapis.com/google.rpc.PreconditionFailure",
		"violations": [{"type": "STATE", "subject": subject,
				"description": message}]}])


def rpc_status(code, message):
	"""A google.rpc.Status; code is a number or a status name."""
	if isinstance(code, str):
		code = STATUSES[code][1]
	return {"code": code, "message": message}

# ---------------------------------------------------------------- discovery


class Method:
	"""One method of the discovery document, with its route."""

	def __init__(self, doc):
		self.id = doc["id"]
		self.http = doc["httpMethod"]
		self.doc = doc
		self.params = doc.get("parameters", {})
		self.request = doc.get("request", {}).get("$ref")
		parts = re.split(r"\{([^}]+)\}", doc["flatPath"])
		rx = ""
		for i, part in enumerate(parts):
			rx += "(?P<%s>[^/:]+)" % part if i % 2 else re.escape(part)
		self.route = re.compile("/" + rx)

	@property
	def short(self):
		"""queuedResources.create for tpu.projects.locations.
		queuedResources.create."""
		return self.id.split(".", 3)[-1]

	def body_root(self):
		"""Where Google roots field paths of the body: the request field
		("queued_resource") when the body is a resource, nothing when it
		is the whole request message (body "*": a *Request schema)."""
		if self.request is None or self.request.endswith("Request"):
			return ""
		return snake(self.request[0].lower() + self.request[1:])


class Discovery:
	"""Routes from the discovery document (and NEWER_METHODS); schemas
	from the newer schema file when given, each field keeping the
	discovery document's format and output-only mark where the newer file
	has none."""

	def __init__(self, path, schemas_path=None):
		with open(path) as f:
			doc = json.load(f)
		self.schemas = doc["schemas"]
		if schemas_path:
			with open(schemas_path) as f:
				self.schemas = merge_schemas(json.load(f)["schemas"],
							     doc["schemas"])
		self.version = doc["version"]
		self.package = "google.cloud.%s.%s" % (doc["name"], doc["version"])
		self.global_params = doc.get("parameters", {})
		self.methods = []
		self._collect(doc.get("resources", {}))
		if schemas_path:
			known = {m.id for m in self.methods}
			self.methods += [Method(m) for m in NEWER_METHODS
					 if m["id"] not in known]

	def _collect(self, resources):
		for res in resources.values():
			for m in res.get("methods", {}).values():
				self.methods.append(Method(m))
			self._collect(res.get("resources", {}))

	def route(self, http_method, path):
		"""(Method, path parameters), or an ApiError for no route."""
		return fake_api.find_route(self.methods, http_method, path)

	def type_url(self, schema):
		return "type.googleapis.com/%s.%s" % (self.package, schema)

	def enum_type(self, schema, field, values):
		return fake_api.enum_type(self.type_url, schema, field, values)

def merge_schemas(newer, older):
	"""newer's schemas, each field with older's "format" and "readOnly"
	(and NEWER_FIELDS') where newer says nothing of them."""
	out = copy.deepcopy(newer)
	for name, schema in out.items():
		old_props = older.get(name, {}).get("properties", {})
		for field, prop in schema.get("properties", {}).items():
			extra = {}
			old = old_props.get(field, {})
			if old.get("type") == prop.get("type"):
				for k in ("format", "readOnly"):
					if k in old:
						extra[k] = old[k]
				if "format" in old.get("items", {}) and \
						"items" in prop:
					prop["items"].setdefault(
						"format", old["items"]["format"])
			extra.update(NEWER_FIELDS.get((name, field), {}))
			for k, v in extra.items():
				prop.setdefault(k, v)
	return out

# ---------------------------------------------------------------- bodies


# ---------------------------------------------------------------- state


def default_config(delay):
	return {
		"delay": delay,             # any timed state without its own
		"delays": {},               # STATE -> seconds (< 0: hold)
		"workers_per_node": None,   # None: from the accelerator type
		"zones": None,              # None: every zone exists
		"ip_base": "127.0.1.1",
		"external_ip_base": "127.1.0.1",
		"hostkeys": None,           # None: one ed25519 key per worker
		"hostkey_overrides": {},    # "NODE/W" -> {type: base64}
		"publish_hostkeys": True,
		"fail_at": {},              # QRID -> {state, code, message}
	}


def workers_for(node, override):
	"""Hosts per node, from the accelerator type or config."""
	if override:
		return override
	acc = node.get("acceleratorType")
	if acc:
		mo = ACCELERATOR_TYPE.fullmatch(acc)
		gen, n = mo.group(1), int(mo.group(2))
		if gen in ("v5litepod", "v6e"):
			return 1 if n <= 8 else n // 4
		return max(1, n // 8)
	cfg = node.get("acceleratorConfig", {})
	chips = 1
	for d in cfg.get("topology", "1").split("x"):
		chips *= int(d)
	if cfg.get("type") in ("V5LITE_POD", "V6E") and chips <= 8:
		return 1
	return max(1, chips // 4)


def accelerator_type_of(node):
	if node.get("acceleratorType"):
		return node["acceleratorType"]
	cfg = node.get("acceleratorConfig", {})
	chips = 1
	for d in cfg.get("topology", "1").split("x"):
		chips *= int(d)
	kind = cfg.get("type", "")
	# v5e and v6e names count chips; the others TensorCores (2 a chip).
	if kind == "V5LITE_POD":
		return "v5litepod-%d" % chips
	if kind == "V6E":
		return "v6e-%d" % chips
	return "%s-%d" % (kind.lower(), chips * 2)


def default_hostkey(project, zone, node, worker):
	"""A well-formed ssh-ed25519 public key blob, fixed per worker."""
	raw = hashlib.sha256(("%s/%s/%s/%d" % (project, zone, node,
					       worker)).encode()).digest()
	kind = b"ssh-ed25519"
	blob = (len(kind).to_bytes(4, "big") + kind + len(raw).to_bytes(4, "big")
		+ raw)
	return {"ssh-ed25519": base64.b64encode(blob).decode()}


class Operation:
	def __init__(self, parent, verb, target, now, serial, version):
		self.name = "%s/operations/operation-%d-%s" % (
			parent, int(now * 1000), "%05x%s" % (
				serial, secrets.token_hex(5)))
		self.verb, self.target, self.version = verb, target, version
		self.created = now
		# Once done: when, and the response or the error (a Status).
		self.done, self.ended = False, None
		self.response = self.error = None

	def finish(self, t, response=None, error=None):
		if self.done:
			return
		self.done = True
		self.ended = t
		self.response = response
		self.error = error

	def resource(self, package):
		meta = {"@type": "type.googleapis.com/%s.OperationMetadata" %
			package, "createTime": rfc3339(self.created),
			"target": self.target, "verb": self.verb,
			"apiVersion": self.version}
		doc = {"name": self.name, "metadata": meta}
		if self.done:
			meta["endTime"] = rfc3339(self.ended)
			doc["done"] = True
			if self.error is not None:
				doc["error"] = dict(self.error)
			else:
				doc["response"] = copy.deepcopy(self.response)
		return doc


class QueuedResource:
	def __init__(self, project, zone, qid, body, node_ids, now):
		self.project = project
		self.zone = zone
		self.id = qid
		self.body = body        # the checked request (JSON names)
		self.node_ids = node_ids
		self.created = now
		self.state = None
		self.since = now
		self.initiator = "USER"
		self.error = None       # failedData.error once FAILED
		self.nodes = []         # Node, in slice order
		self.epoch = 0          # bumped on every change: stale timers
		self.pending = []       # create and reset operations
		self.delete_ops = []
		self.gone = False
		self.terminate_at = None  # a flex-start run's end, once ACTIVE
		self.run_ended = False    # SUSPENDING because the run ended

	@property
	def parent(self):
		return "projects/%s/locations/%s" % (self.project, self.zone)

	@property
	def name(self):
		return "%s/queuedResources/%s" % (self.parent, self.id)

	@property
	def node(self):
		return self.body["tpu"]["nodeSpec"][0]["node"]

	@property
	def flex_start(self):
		return self.body.get("provisioningModel") == "FLEX_START"

	@property
	def preemptible(self):
		"""Spot, best-effort and flex-start capacity can be taken back
		(flex-start uses preemptible quota)."""
		return "spot" in self.body or "bestEffort" in self.body or \
			self.body.get("provisioningModel") in ("SPOT",
							       "FLEX_START")

	def resource(self, disco):
		doc = {"name": self.name}
		for k in ("tpu", "spot", "guaranteed", "bestEffort",
			  "queueingPolicy", "reservationName",
			  "provisioningModel", "runDuration", "trafficConfig"):
			if k in self.body:
				doc[k] = copy.deepcopy(self.body[k])
		if self.terminate_at is not None:
			doc["runDuration"]["terminationTime"] = rfc3339(
				self.terminate_at)
		doc["createTime"] = rfc3339(self.created)
		st = {"state": self.state, "stateInitiator": self.initiator}
		data = "".join(w.capitalize() for w in self.state.split("_"))
		data = data[0].lower() + data[1:] + "Data"
		if data in disco.schemas["QueuedResourceState"]["properties"]:
			st[data] = {"error": dict(self.error)} if \
				self.state == "FAILED" else {}
		doc["state"] = st
		return doc


class Node:
	def __init__(self, qr, node_id, workers, serial, now):
		self.qr = qr
		self.id = node_id
		self.workers = workers
		self.uid = str(6000000000000000000 + serial)
		self.created = now
		self.state = "CREATING"
		self.internal = []
		self.external = None
		# Set through /_fake/node: a state the walk never gives (such
		# as UNKNOWN) and the announced maintenance.
		self.state_override = None
		self.health_override = None
		self.upcoming = None

	@property
	def name(self):
		return "%s/nodes/%s" % (self.qr.parent, self.id)

	def resource(self):
		doc = {"name": self.name}
		doc.update(copy.deepcopy(self.qr.node))
		doc.pop("health", None)
		doc.update({
			"acceleratorType": accelerator_type_of(self.qr.node),
			"state": self.state_override or self.state,
			"id": self.uid,
			"queuedResource": self.qr.name,
			"createTime": rfc3339(self.created),
			"apiVersion": "V2_ALPHA1",
		})
		if self.health_override:
			doc["health"] = self.health_override
		elif self.state == "READY" and not self.state_override:
			doc["health"] = "HEALTHY"
		if self.upcoming:
			doc["upcomingMaintenance"] = copy.deepcopy(self.upcoming)
		if len(self.qr.node_ids) > 1:
			doc["multisliceNode"] = True
		eps = []
		for w, ip in enumerate(self.internal):
			ep = {"ipAddress": ip_text(ip), "port": WORKER_PORT}
			if self.external:
				ep["accessConfig"] = {
					"externalIp": ip_text(self.external[w])}
			eps.append(ep)
		doc["networkEndpoints"] = eps
		return doc


class Store:
	"""Everything the fake knows, behind one lock. Timed transitions sit
	in a queue of (time, sequence, action) and run in order, at their
	scheduled time, from advance(); a state whose delay is negative is
	held (kept aside) until a new delay is configured."""

	def __init__(self, disco, delay):
		self.disco = disco
		self.cli_delay = delay
		self.lock = threading.RLock()
		self.reset()

	def reset(self):
		with self.lock:
			self.config = default_config(self.cli_delay)
			self.qrs = {}           # (project, zone, id) -> QR
			self.nodes = {}         # (project, zone, id) -> Node
			self.ops = {}           # name -> Operation
			self.request_ids = {}   # (parent, requestId) -> Operation
			self.timers = []
			self.held = []
			self.seq = itertools.count()
			self.serial = itertools.count(1)
			self.used = set()       # allocated addresses (ints)
			self.faults = []
			self.requests = []
			self.maintenance = []

	# ---- time

	def delay(self, state):
		d = self.config["delays"].get(state, self.config["delay"])
		return None if d < 0 else d

	def schedule(self, state, since, action):
		"""action(t) runs when `state`, entered at `since`, ends."""
		d = self.delay(state)
		if d is None:
			self.held.append((state, since, action))
		else:
			heapq.heappush(self.timers, (since + d, next(self.seq),
						     action))

	def advance(self, now=None):
		now = time.time() if now is None else now
		while self.timers and self.timers[0][0] <= now:
			t, _, action = heapq.heappop(self.timers)
			action(t)
		return now

	def rearm(self, now):
		"""After a delay changed: held states get their end time."""
		held, self.held = self.held, []
		for state, since, action in held:
			d = self.delay(state)
			if d is None:
				self.held.append((state, since, action))
			else:
				heapq.heappush(self.timers, (max(now, since + d),
							     next(self.seq), action))

	# ---- addresses

	def allocate(self, base, n):
		"""n free addresses from base upwards in base's /16, skipping
		.0 and .255; None when the pool has too few."""
		out = []
		x, top = base, base | 0xFFFF
		while len(out) < n:
			if x > top:
				return None
			if x & 255 not in (0, 255) and x not in self.used:
				out.append(x)
			x += 1
		self.used.update(out)
		return out

	# ---- queued resources

	def new_op(self, parent, verb, target, now):
		op = Operation(parent, verb, target, now, next(self.serial),
			       self.disco.version)
		self.ops[op.name] = op
		return op

	def qr_response(self, qr):
		doc = {"@type": self.disco.type_url("QueuedResource")}
		doc.update(qr.resource(self.disco))
		return doc

	def enter(self, qr, state, t, initiator=None):
		"""qr enters state at t (or FAILED, when fail_at says so)."""
		rule = self.config["fail_at"].get(qr.id)
		if rule and rule.get("state") == state:
			return self.fail(qr, t, rule.get("code", 8),
					 rule.get("message", "Injected failure "
						  "entering " + state))
		if state == "PROVISIONING" and not self.make_nodes(qr, t):
			return self.fail(qr, t, 8, "There are not enough free "
					 "addresses for the nodes of %s." %
					 qr.name)
		qr.state, qr.since = state, t
		qr.epoch += 1
		if initiator:
			qr.initiator = initiator
		if state == "ACTIVE":
			for n in qr.nodes:
				n.state = "READY"
			if qr.flex_start and qr.terminate_at is None:
				self.start_run(qr, t)
		if state in TIMED:
			epoch = qr.epoch
			self.schedule(state, t, lambda when: self.leave(
				qr, epoch, when))

	def leave(self, qr, epoch, t):
		if qr.epoch != epoch or qr.gone:
			return
		if qr.state == "DELETING":
			return self.remove(qr, t)
		if qr.state == "SUSPENDING":
			if qr.run_ended:
				# The run's VMs are deleted, not kept preempted.
				self.drop_nodes(qr)
			return self.enter(qr, "SUSPENDED", t)
		was = qr.state
		self.enter(qr, WALK[WALK.index(was) + 1], t)
		if was == "CREATING":
			# The create operation is done once the request is
			# accepted (unless the resource failed already).
			for op in [o for o in qr.pending if o.verb == "create"]:
				op.finish(t, response=self.qr_response(qr))
				qr.pending.remove(op)

	def make_nodes(self, qr, t):
		spec = qr.node
		per_node = workers_for(spec, self.config["workers_per_node"])
		total = per_node * len(qr.node_ids)
		internal = self.allocate(ip_number(self.config["ip_base"]),
					 total)
		if internal is None:
			return False
		external = None
		if spec.get("networkConfig", {}).get("enableExternalIps"):
			external = self.allocate(ip_number(
				self.config["external_ip_base"]), total)
			if external is None:
				self.used.difference_update(internal)
				return False
		for i, nid in enumerate(qr.node_ids):
			n = Node(qr, nid, per_node, next(self.serial), t)
			n.internal = internal[i * per_node:(i + 1) * per_node]
			if external:
				n.external = external[i * per_node:
						      (i + 1) * per_node]
			qr.nodes.append(n)
			self.nodes[(qr.project, qr.zone, nid)] = n
		return True

	def drop_nodes(self, qr):
		for n in qr.nodes:
			self.used.difference_update(n.internal)
			self.used.difference_update(n.external or [])
			self.nodes.pop((qr.project, qr.zone, n.id), None)
		qr.nodes = []

	def end_pending(self, qr, t, error):
		for op in qr.pending:
			op.finish(t, error=error)
		qr.pending = []

	def fail(self, qr, t, code, message):
		qr.epoch += 1
		qr.state, qr.since, qr.initiator = "FAILED", t, "SERVICE"
		qr.error = rpc_status(code, message)
		self.drop_nodes(qr)
		self.end_pending(qr, t, qr.error)

	def interrupt(self, qr, t, why, state, node_state, initiator):
		"""qr stops what it was doing (its create or reset operations
		end ABORTED) and enters state; its nodes go node_state."""
		self.end_pending(qr, t, rpc_status(
			"ABORTED", "The queued resource %s %s." % (qr.name, why)))
		for n in qr.nodes:
			n.state = node_state
		self.enter(qr, state, t, initiator)

	def delete(self, qr, t, op):
		qr.delete_ops.append(op)
		self.interrupt(qr, t, "is being deleted", "DELETING", "DELETING",
			       "USER")

	def remove(self, qr, t):
		qr.gone = True
		qr.epoch += 1
		self.drop_nodes(qr)
		self.qrs.pop((qr.project, qr.zone, qr.id), None)
		for op in qr.delete_ops:
			op.finish(t, response={
				"@type": "type.googleapis.com/"
					 "google.protobuf.Empty"})

	def reset_nodes(self, qr, t, op):
		qr.epoch += 1
		epoch = qr.epoch
		qr.pending.append(op)
		for n in qr.nodes:
			n.state = "RESTARTING"

		def ready(when):
			if qr.epoch != epoch or qr.gone:
				return
			for n in qr.nodes:
				n.state = "READY"
			for o in [o for o in qr.pending if o.verb == "reset"]:
				o.finish(when, response=self.qr_response(qr))
				qr.pending.remove(o)
		self.schedule("RESTARTING", t, ready)

	def suspend(self, qr, t):
		self.interrupt(qr, t, "was preempted", "SUSPENDING", "PREEMPTED",
			       "SERVICE")

	def start_run(self, qr, t):
		"""A flex-start queued resource's run starts when it is ACTIVE
		and lasts runDuration.maxRunDuration: then, as Google documents
		(tpu/docs/request-using-flex-start), its VMs are deleted and it
		moves to SUSPENDED, initiated by the service."""
		end = t + float(qr.body["runDuration"]["maxRunDuration"][:-1])
		qr.terminate_at = end

		def over(when):
			if qr.gone or qr.terminate_at != end or \
					qr.state != "ACTIVE":
				return
			self.end_run(qr, when)
		heapq.heappush(self.timers, (end, next(self.seq), over))

	def end_run(self, qr, t):
		qr.run_ended = True
		self.interrupt(qr, t, "reached the end of its run duration",
			       "SUSPENDING", "DELETING", "SERVICE")

	def perform_maintenance(self, qr, nodes, t, op):
		"""Announced maintenance on nodes, now: each is ONGOING (and
		unhealthy) for the MAINTENANCE delay, then done and no longer
		announced."""
		for n in nodes:
			n.upcoming["maintenanceStatus"] = "ONGOING"
			n.health_override = "UNHEALTHY_MAINTENANCE"
			self.maintenance.append({
				"node": n.id, "name": n.name, "workerIds": [],
				"worker": 0, "time": rfc3339(t),
				"kind": "performMaintenance"})
		epoch = qr.epoch

		def done(when):
			for n in nodes:
				n.upcoming = None
				n.health_override = None
			if qr.epoch == epoch and not qr.gone:
				op.finish(when, response=self.qr_response(qr))
			else:
				op.finish(when, error=rpc_status(
					"ABORTED", "The queued resource %s changed "
					"during maintenance." % qr.name))
		self.schedule("MAINTENANCE", t, done)

	# ---- lookups

	def find_qr(self, project, zone, qid):
		qr = self.qrs.get((project, zone, qid))
		if qr is None:
			raise not_found("projects/%s/locations/%s/queuedResources/"
					"%s" % (project, zone, qid))
		return qr

	def find_node(self, project, zone, nid):
		n = self.nodes.get((project, zone, nid))
		if n is None:
			raise not_found("projects/%s/locations/%s/nodes/%s" %
					(project, zone, nid))
		return n

	def qr_by_id(self, doc):
		"""The QR a control request names: {"name": ID} with optional
		"project" and "zone" when the id alone is ambiguous."""
		qid = doc.get("name")
		hits = [qr for (p, z, i), qr in self.qrs.items() if i == qid and
			doc.get("project", p) == p and doc.get("zone", z) == z]
		if len(hits) != 1:
			raise ApiError("INVALID_ARGUMENT", "%d queued resources "
				       "match %s" % (len(hits), _json_text(doc)))
		return hits[0]

	def hostkeys(self, node, worker):
		cfg = self.config
		over = cfg["hostkey_overrides"].get("%s/%d" % (node.id, worker))
		if over is not None:
			return over
		if cfg["hostkeys"] is not None:
			return cfg["hostkeys"]
		return default_hostkey(node.qr.project, node.qr.zone, node.id,
				       worker)

	def snapshot(self):
		return {
			"queuedResources": [qr.resource(self.disco) for qr in
					    self.qrs.values()],
			"nodes": [n.resource() for n in self.nodes.values()],
			"operations": [op.resource(self.disco.package) for op in
				       self.ops.values()],
			"addressesInUse": len(self.used),
			"config": copy.deepcopy(self.config),
		}

	# ---- config

	def configure(self, doc, now):
		"""Merges doc into the config (dict settings key by key, null
		deleting a key); checks everything before changing anything."""
		if not isinstance(doc, dict):
			raise ValueError("config is a JSON object")
		new = copy.deepcopy(self.config)
		for k, v in doc.items():
			if k not in new:
				raise ValueError("unknown setting %r" % k)
			if k in ("delays", "hostkey_overrides", "fail_at"):
				if not isinstance(v, dict):
					raise ValueError("%s is an object" % k)
				for kk, vv in v.items():
					if vv is None:
						new[k].pop(kk, None)
					else:
						new[k][kk] = vv
			else:
				new[k] = v
		_check_config(new)
		self.config = new
		self.rearm(now)
		return copy.deepcopy(new)


def _check_config(c):
	def number(v):
		return isinstance(v, (int, float)) and not isinstance(v, bool)
	if not number(c["delay"]) or c["delay"] < 0:
		raise ValueError("delay is a number of seconds >= 0")
	for k, v in c["delays"].items():
		if k not in TIMED or not number(v):
			raise ValueError("delays: %r: states are %s, values "
					 "seconds (< 0: hold)" % (k, TIMED))
	w = c["workers_per_node"]
	if w is not None and (not isinstance(w, int) or isinstance(w, bool)
			      or w < 1):
		raise ValueError("workers_per_node is an integer >= 1 or null")
	if c["zones"] is not None and (not isinstance(c["zones"], list) or
				       not all(isinstance(z, str)
					       for z in c["zones"])):
		raise ValueError("zones is a list of zone names or null")
	for k in ("ip_base", "external_ip_base"):
		if not isinstance(c[k], str):
			raise ValueError("%s is an address" % k)
		ip_number(c[k])
	keysets = list(c["hostkey_overrides"].values())
	if c["hostkeys"] is not None:
		keysets.append(c["hostkeys"])
	for ks in keysets:
		if not isinstance(ks, dict) or not all(
				isinstance(v, str) for v in ks.values()):
			raise ValueError("host keys are {type: base64}")
	if not isinstance(c["publish_hostkeys"], bool):
		raise ValueError("publish_hostkeys is true or false")
	for qid, rule in c["fail_at"].items():
		if not isinstance(rule, dict) or rule.get("state") not in \
				WALK[1:] or not isinstance(rule.get("code", 8),
							   int):
			raise ValueError("fail_at: %r: {\"state\": one of %s, "
					 "\"code\": N, \"message\": \"...\"}" %
					 (qid, ", ".join(WALK[1:])))

# ---------------------------------------------------------------- faults


# ---------------------------------------------------------------- HTTP


class Handler(fake_api.Handler):
	"""One connection: the API under /v2alpha1/, control under
	/_fake/."""
	server_version = "tpu-fake/1"
	service = "tpu.googleapis.com"

	# ---- the API

	def api_call(self):
		disco = self.disco
		method, params = disco.route(self.command, self.raw_path)
		self.require_auth()
		zones = self.store.config["zones"]
		zone = params.get("locationsId")
		if zone is not None and zones is not None and zone not in zones:
			raise ApiError("NOT_FOUND", "Location projects/%s/locations/"
				       "%s not found" % (params["projectsId"], zone))
		check_query(disco, method, self.query)
		body = None
		if method.request:
			body = self.request_body(method)
		handler = SERVED.get(method.short)
		if handler is None:
			raise ApiError("UNIMPLEMENTED", "The TPU fake does not "
				       "serve %s." % method.id)
		with self.store.lock:
			now = self.store.advance()
			return handler(self, params, body, now)

	# ---- queued resources

	def retried(self, p):
		"""(parent, requestId, the operation that requestId already
		started or None): a retry gets that operation again."""
		parent = "projects/%s/locations/%s" % (p["projectsId"],
						       p["locationsId"])
		rid = self.request_id()
		return parent, rid, self.store.request_ids.get((parent, rid))

	def qr_create(self, p, body, now):
		st = self.store
		parent, rid, op = self.retried(p)
		if op:
			return 200, op.resource(self.disco.package), None
		qid = self.query.get("queuedResourceId", "")
		if not qid:
			raise missing_field("queued_resource_id")
		if len(qid) > 63 or not RESOURCE_ID.fullmatch(qid):
			raise invalid_field("queued_resource_id", "\"%s\" must be 1 "
					    "to 63 lowercase letters, digits or "
					    "hyphens, start with a letter and not "
					    "end with a hyphen." % qid)
		node_ids = check_create(body, parent, qid)
		key = (p["projectsId"], p["locationsId"], qid)
		if key in st.qrs:
			raise already_exists(parent + "/queuedResources/" + qid)
		taken = {nid for (pp, z, _), qr in st.qrs.items()
			 if (pp, z) == key[:2] for nid in qr.node_ids}
		for nid in node_ids:
			if nid in taken:
				raise already_exists(parent + "/nodes/" + nid)
		qr = QueuedResource(key[0], key[1], qid, body, node_ids, now)
		st.qrs[key] = qr
		op = st.new_op(parent, "create", qr.name, now)
		qr.pending.append(op)
		st.enter(qr, "CREATING", now, "USER")
		if rid:
			st.request_ids[(parent, rid)] = op
		return 200, op.resource(self.disco.package), None

	def request_id(self):
		rid = self.query.get("requestId")
		if rid is not None and not UUID.fullmatch(rid):
			raise invalid_field("request_id", "\"%s\" is not a UUID." %
					    rid)
		return rid

	def qr_get(self, p, body, now):
		qr = self.store.find_qr(p["projectsId"], p["locationsId"],
					p["queuedResourcesId"])
		return 200, qr.resource(self.disco), None

	def qr_list(self, p, body, now):
		items = [qr for (pp, z, _), qr in self.store.qrs.items()
			 if (pp, z) == (p["projectsId"], p["locationsId"])]
		return self.page(items, "queuedResources",
				 lambda qr: qr.resource(self.disco))

	def qr_delete(self, p, body, now):
		st = self.store
		parent, rid, op = self.retried(p)
		if op:
			return 200, op.resource(self.disco.package), None
		qr = st.find_qr(p["projectsId"], p["locationsId"],
				p["queuedResourcesId"])
		if qr.state == "DELETING":
			raise failed_precondition(qr.name, "The queued resource "
						  "%s is already being deleted." %
						  qr.name)
		force = self.query.get("force", "").lower() == "true"
		if not force and qr.nodes and qr.state not in DELETABLE:
			raise failed_precondition(qr.name, (
				"Cannot delete queued resource %s in state %s: its "
				"nodes exist (%s). Delete the nodes first, or set "
				"force=true to delete them with the queued "
				"resource.") % (qr.name, qr.state, ", ".join(
					n.id for n in qr.nodes)))
		op = st.new_op(parent, "delete", qr.name, now)
		st.delete(qr, now, op)
		if rid:
			st.request_ids[(parent, rid)] = op
		return 200, op.resource(self.disco.package), None

	def active_qr(self, p, what):
		"""The queued resource of the path, which must be ACTIVE for
		what ("reset") to be done to it."""
		qr = self.store.find_qr(p["projectsId"], p["locationsId"],
					p["queuedResourcesId"])
		if qr.state != "ACTIVE":
			raise failed_precondition(qr.name, "Queued resource %s "
						  "cannot be %s in state %s; "
						  "only an ACTIVE one can." %
						  (qr.name, what, qr.state))
		return qr

	def qr_reset(self, p, body, now):
		st = self.store
		qr = self.active_qr(p, "reset")
		op = st.new_op(qr.parent, "reset", qr.name, now)
		st.reset_nodes(qr, now, op)
		return 200, op.resource(self.disco.package), None

	def qr_perform_maintenance(self, p, body, now):
		"""Starts the maintenance announced on the named nodes (every
		node of the queued resource with maintenance announced, when
		none is named). Node names may be full names or ids."""
		st = self.store
		qr = self.active_qr(p, "maintained")
		by_id = {n.id: n for n in qr.nodes}
		names = body.get("nodeNames", [])
		nodes = []
		for i, name in enumerate(names):
			nid = name.rsplit("/", 1)[-1]
			n = by_id.get(nid)
			if n is None or ("/" in name and name != n.name):
				raise invalid_field("node_names[%d]" % i, "\"%s\" is "
						    "not a node of %s." % (name,
									  qr.name))
			if n not in nodes:
				nodes.append(n)
		if not names:
			nodes = [n for n in qr.nodes if n.upcoming]
		idle = [n.id for n in nodes if not n.upcoming or
			n.upcoming.get("maintenanceStatus") == "ONGOING"]
		if idle or not nodes:
			raise failed_precondition(qr.name, "No maintenance is "
						  "pending on %s." % (
							  ", ".join(idle) or
							  "the nodes of " + qr.name))
		op = st.new_op(qr.parent, "performMaintenanceQueuedResource",
			       qr.name, now)
		st.perform_maintenance(qr, nodes, now, op)
		return 200, op.resource(self.disco.package), None

	# ---- nodes

	def node_get(self, p, body, now):
		n = self.store.find_node(p["projectsId"], p["locationsId"],
					 p["nodesId"])
		return 200, n.resource(), None

	def node_list(self, p, body, now):
		items = [n for (pp, z, _), n in self.store.nodes.items()
			 if (pp, z) == (p["projectsId"], p["locationsId"])]
		return self.page(items, "nodes", lambda n: n.resource())

	def worker_ids(self, n, ids, field):
		out = []
		for i, w in enumerate(ids):
			if not re.fullmatch(r"\d+", w) or int(w) >= n.workers:
				raise invalid_field("%s[%d]" % (field, i), "\"%s\" is "
						    "not a worker of %s (workers "
						    "0 to %d)." % (w, n.name,
								   n.workers - 1))
			out.append(int(w))
		return out

	def node_guest_attributes(self, p, body, now):
		st = self.store
		n = st.find_node(p["projectsId"], p["locationsId"],
				 p["nodesId"])
		want = set(self.worker_ids(n, body.get("workerIds", []),
					   "worker_ids"))
		qpath = body.get("queryPath", "")
		out = []
		for w in range(n.workers):
			if want and w not in want:
				continue
			items = []
			if n.state == "READY" and st.config["publish_hostkeys"]:
				for kind, blob in st.hostkeys(n, w).items():
					if _query_matches(qpath, kind):
						items.append({"namespace": "hostkeys",
							      "key": kind,
							      "value": blob})
			value = {"items": items} if items else {}
			out.append({"queryPath": qpath, "queryValue": value})
		return 200, {"guestAttributes": out}, None

	def node_maintenance(self, p, body, now):
		st = self.store
		n = st.find_node(p["projectsId"], p["locationsId"],
				 p["nodesId"])
		ids = body.get("workerIds", [])
		self.worker_ids(n, ids, "worker_ids")
		if n.state != "READY":
			raise failed_precondition(n.name, "Node %s is %s; a "
						  "maintenance event needs it "
						  "READY." % (n.name, n.state))
		op = st.new_op(n.qr.parent, "simulateMaintenanceEvent", n.name,
			       now)
		st.maintenance.append({"node": n.id, "name": n.name,
				       "workerIds": list(ids),
				       "worker": int(ids[0]) if ids else 0,
				       "time": rfc3339(now)})

		def done(when):
			op.finish(when, response=dict(
				{"@type": self.disco.type_url("Node")},
				**n.resource()))
		st.schedule("MAINTENANCE", now, done)
		return 200, op.resource(self.disco.package), None

	# ---- operations

	def op_get(self, p, body, now):
		name = "projects/%s/locations/%s/operations/%s" % (
			p["projectsId"], p["locationsId"], p["operationsId"])
		op = self.store.ops.get(name)
		if op is None:
			raise not_found(name)
		return 200, op.resource(self.disco.package), None

	def op_list(self, p, body, now):
		prefix = "projects/%s/locations/%s/operations/" % (
			p["projectsId"], p["locationsId"])
		items = [op for name, op in self.store.ops.items()
			 if name.startswith(prefix)]
		return self.page(items, "operations",
				 lambda op: op.resource(self.disco.package))

	# ---- /_fake control endpoints

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.store
		with st.lock:
			now = st.advance()
			if (p, m) == ("/_fake/config", "POST"):
				try:
					return 200, st.configure(self.fake_json(),
								 now), None
				except ValueError as err:
					raise ApiError("INVALID_ARGUMENT", str(err))
			if (p, m) == ("/_fake/config", "GET"):
				return 200, st.config, None
			if (p, m) == ("/_fake/fail", "POST"):
				doc = self.fake_json()
				qr = st.qr_by_id(doc)
				if qr.state in ("DELETING", "FAILED"):
					raise ApiError("FAILED_PRECONDITION",
						       "%s is %s" % (qr.name, qr.state))
				st.fail(qr, now, doc.get("code", 13),
					doc.get("message", "Injected failure."))
				return 200, qr.resource(self.disco), None
			if (p, m) == ("/_fake/suspend", "POST"):
				qr = st.qr_by_id(self.fake_json())
				if not qr.preemptible:
					raise ApiError("FAILED_PRECONDITION", "%s is "
						       "neither spot, best-effort nor "
						       "flex-start" % qr.name)
				if qr.state not in ("ACTIVE", "PROVISIONING"):
					raise ApiError("FAILED_PRECONDITION", "%s is "
						       "%s; only ACTIVE or PROVISIONING "
						       "ones are preempted" %
						       (qr.name, qr.state))
				st.suspend(qr, now)
				return 200, qr.resource(self.disco), None
			if (p, m) == ("/_fake/end_run", "POST"):
				qr = st.qr_by_id(self.fake_json())
				if not qr.flex_start or qr.state != "ACTIVE":
					raise ApiError("FAILED_PRECONDITION", "%s is "
						       "not an ACTIVE flex-start queued "
						       "resource" % qr.name)
				qr.terminate_at = now
				st.end_run(qr, now)
				return 200, qr.resource(self.disco), None
			if (p, m) == ("/_fake/node", "POST"):
				return 200, self.fake_node(self.fake_json()), None
			if p == "/_fake/faults":
				return self.fake_faults(m)
			if (p, m) == ("/_fake/requests", "GET"):
				return 200, copy.deepcopy(st.requests), None
			if (p, m) == ("/_fake/requests", "DELETE"):
				st.requests = []
				return 200, {}, None
			if (p, m) == ("/_fake/maintenance", "GET"):
				return 200, list(st.maintenance), None
			if (p, m) == ("/_fake/state", "GET"):
				return 200, st.snapshot(), None
			if (p, m) == ("/_fake/reset", "POST"):
				st.reset()
				return 200, {}, None
		raise ApiError("NOT_FOUND", "No control endpoint %s %s" % (m, p))

	def fake_node(self, doc):
		"""Sets what the walk never gives a node: "state" (UNKNOWN,
		say), "health", "upcomingMaintenance" (checked against its
		schema); null clears a setting."""
		st = self.store
		hits = [n for (p, z, i), n in st.nodes.items()
			if i == doc.get("name") and doc.get("project", p) == p and
			doc.get("zone", z) == z]
		if len(hits) != 1:
			raise ApiError("INVALID_ARGUMENT", "%d nodes match %s" %
				       (len(hits), _json_text(doc)))
		n = hits[0]
		props = self.disco.schemas["Node"]["properties"]
		for key in doc:
			if key in ("name", "project", "zone"):
				continue
			if key not in ("state", "health", "upcomingMaintenance"):
				raise ApiError("INVALID_ARGUMENT", "unknown node "
					       "setting %r" % key)
			v = doc[key]
			if key == "upcomingMaintenance":
				n.upcoming = None if v is None else Checker(
					self.disco).check("UpcomingMaintenance", v,
							  "upcoming_maintenance")
				continue
			if v is not None and v not in props[key]["enum"]:
				raise ApiError("INVALID_ARGUMENT", "%s: one of %s" %
					       (key, ", ".join(props[key]["enum"])))
			if key == "state":
				n.state_override = v
			else:
				n.health_override = v
		return n.resource()

	def fake_faults(self, m):
		st = self.store
		if m == "POST":
			rules = self.fake_json()
			try:
				faults = [Fault(r) for r in (
					[rules] if isinstance(rules, dict) else rules)]
			except (ValueError, TypeError, re.error) as err:
				raise ApiError("INVALID_ARGUMENT",
					       "Bad fault rules: %s" % err)
			st.faults.extend(faults)
			return 200, {"rules": len(st.faults)}, None
		if m == "DELETE":
			st.faults = []
			return 200, {"rules": 0}, None
		if m == "GET":
			return 200, [dict(f.rule, count=f.times)
				     for f in st.faults], None
		raise ApiError("NOT_FOUND", "No control endpoint %s /_fake/faults"
			       % m)


def _query_matches(qpath, key):
	"""Guest attribute paths: "" (everything), "hostkeys/" (the
	namespace) or "hostkeys/KEY" (one key)."""
	if qpath in ("", "/", "hostkeys", "hostkeys/"):
		return True
	return qpath == "hostkeys/" + key


def check_create(body, parent, qid):
	"""The API's own checks of a queued resource, after the schema's;
	gives the ids of its nodes."""
	root = "queued_resource"
	tpu = body.get("tpu")
	if tpu is None:
		raise missing_field(root + ".tpu")
	specs = tpu.get("nodeSpec", [])
	if len(specs) != 1:
		raise invalid_field(root + ".tpu.node_spec", "exactly one node "
				    "spec is required, got %d." % len(specs))
	spec = specs[0]
	sp = root + ".tpu.node_spec[0]"
	if not spec.get("parent"):
		raise missing_field(sp + ".parent")
	if spec["parent"] != parent:
		raise invalid_field(sp + ".parent", "\"%s\" is not the parent of "
				    "the request, \"%s\"." % (spec["parent"],
							      parent))
	if ("nodeId" in spec) == ("multiNodeParams" in spec):
		raise invalid_field(sp, "exactly one of node_id and "
				    "multi_node_params must be set.")
	if "nodeId" in spec:
		ids = [spec["nodeId"]]
		check_node_id(sp + ".node_id", spec["nodeId"])
	else:
		mp = spec["multiNodeParams"]
		count = mp.get("nodeCount", 0)
		if count < 2:
			# The discovery document: "This needs to be > 1."
			raise invalid_field(sp + ".multi_node_params.node_count",
					    "%d is not a node count of a multi-"
					    "node request; it needs to be > 1 "
					    "(use node_id for one node)." % count)
		prefix = mp.get("nodeIdPrefix") or qid
		ids = ["%s-%d" % (prefix, i) for i in range(count)]
		for nid in (ids[0], ids[-1]):
			check_node_id(sp + ".multi_node_params.node_id_prefix", nid)
	node = spec.get("node")
	if node is None:
		raise missing_field(sp + ".node")
	check_node(node, sp + ".node")
	tiers = [k for k in ("spot", "guaranteed", "bestEffort") if k in body]
	if len(tiers) > 1:
		raise invalid_field(root + "." + snake(tiers[1]), "at most one of "
				    "spot, guaranteed and best_effort may be "
				    "set, got %s." % " and ".join(
					    snake(t) for t in tiers))
	check_provisioning(body, root, tiers)
	res = body.get("reservationName")
	if res is not None and not RESERVATION.fullmatch(res):
		raise invalid_field(root + ".reservation_name", "\"%s\" is not "
				    "projects/{project}/locations/{zone}/"
				    "reservations/{reservation}." % res)
	return ids


# Flex-start runs last at most 7 days (tpu/docs/request-using-flex-start).
MAX_RUN_DURATION = 7 * 86400


def check_provisioning(body, root, tiers):
	"""provisioningModel against the tier and runDuration: FLEX_START
	needs runDuration.maxRunDuration (> 0, at most 7 days) and no tier or
	reservation; runDuration is flex-start's alone; SPOT and
	RESERVATION_BOUND exclude the other tiers. STANDARD with spot is
	accepted: gcloud 528 alpha sends exactly that for --spot."""
	model = body.get("provisioningModel", "PROVISIONING_MODEL_UNSPECIFIED")
	field = root + ".provisioning_model"
	run = body.get("runDuration")
	if model == "FLEX_START":
		if tiers or "reservationName" in body:
			taken = tiers[0] if tiers else "reservationName"
			raise invalid_field(root + "." + snake(taken), "FLEX_START "
					    "capacity takes no %s." % snake(taken))
		if not run or "maxRunDuration" not in run:
			raise missing_field(root + ".run_duration.max_run_duration")
		secs = float(run["maxRunDuration"][:-1])
		if not 0 < secs <= MAX_RUN_DURATION:
			raise invalid_field(root + ".run_duration.max_run_duration",
					    "%s is not a run duration from 1s to "
					    "%ds (7 days)." % (run["maxRunDuration"],
							      MAX_RUN_DURATION))
	elif run:
		raise invalid_field(root + ".run_duration", "a run duration is "
				    "for FLEX_START queued resources only, not %s."
				    % model)
	if model == "SPOT" and [t for t in tiers if t != "spot"]:
		raise invalid_field(field, "SPOT does not go with %s." %
				    snake(tiers[0]))
	if model == "RESERVATION_BOUND" and ("spot" in tiers or
					     "bestEffort" in tiers):
		raise invalid_field(field, "RESERVATION_BOUND does not go with "
				    "%s." % snake(tiers[0]))


def check_node_id(field, nid):
	if len(nid) > 63 or not RESOURCE_ID.fullmatch(nid):
		raise invalid_field(field, "node id \"%s\" must be 1 to 63 "
				    "lowercase letters, digits or hyphens, start "
				    "with a letter and not end with a hyphen." %
				    nid)


def check_node(node, np):
	acc, cfg = node.get("acceleratorType"), node.get("acceleratorConfig")
	if acc is None and cfg is None:
		raise missing_field(np + ".accelerator_type")
	if acc is not None and cfg is not None:
		raise invalid_field(np + ".accelerator_config", "set "
				    "accelerator_type or accelerator_config, not "
				    "both.")
	if acc is not None and not ACCELERATOR_TYPE.fullmatch(acc):
		raise invalid_field(np + ".accelerator_type", "\"%s\" is not an "
				    "accelerator type (v2-8, v4-16, v5p-8, "
				    "v5litepod-16, v6e-8...)." % acc)
	if cfg is not None:
		if cfg.get("type", "TYPE_UNSPECIFIED") == "TYPE_UNSPECIFIED":
			raise missing_field(np + ".accelerator_config.type")
		if not TOPOLOGY.fullmatch(cfg.get("topology", "")):
			raise invalid_field(np + ".accelerator_config.topology",
					    "\"%s\" is not a topology like 2x2x1."
					    % cfg.get("topology", ""))
	if not node.get("runtimeVersion"):
		raise missing_field(np + ".runtime_version")
	for i, (k, v) in enumerate(node.get("labels", {}).items()):
		if not LABEL_KEY.fullmatch(k) or not LABEL_VALUE.fullmatch(v):
			raise invalid_field("%s.labels[%d]" % (np, i), "label "
					    "\"%s\": \"%s\": keys are 1 to 63 "
					    "lowercase letters, digits, _ or -, "
					    "starting with a letter; values up to "
					    "63 of the same." % (k, v))
	total = 0
	for i, (k, v) in enumerate(node.get("metadata", {}).items()):
		size = len(k.encode()) + len(v.encode())
		total += size
		if len(v.encode()) > METADATA_VALUE_MAX:
			raise invalid_field("%s.metadata[%d]" % (np, i), "the "
					    "value of \"%s\" is %d bytes, over the "
					    "limit of %d." % (k, len(v.encode()),
							      METADATA_VALUE_MAX))
	if total > METADATA_TOTAL_MAX:
		raise invalid_field(np + ".metadata", "%d bytes in all, over the "
				    "limit of %d." % (total, METADATA_TOTAL_MAX))


# The methods the fake serves, by their id after "tpu.projects.locations.";
# every other method of the discovery document answers 501.
SERVED = {
	"queuedResources.create": Handler.qr_create,
	"queuedResources.get": Handler.qr_get,
	"queuedResources.list": Handler.qr_list,
	"queuedResources.delete": Handler.qr_delete,
	"queuedResources.reset": Handler.qr_reset,
	"queuedResources.performMaintenanceQueuedResource":
		Handler.qr_perform_maintenance,
	"nodes.get": Handler.node_get,
	"nodes.list": Handler.node_list,
	"nodes.getGuestAttributes": Handler.node_guest_attributes,
	"nodes.simulateMaintenanceEvent": Handler.node_maintenance,
	"operations.get": Handler.op_get,
	"operations.list": Handler.op_list,
}


def main():
	ap = argparse.ArgumentParser(description="Fake Cloud TPU API "
				     "(v2alpha1) for tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--port", type=int, default=0)
	ap.add_argument("--discovery", default=DEFAULT_DISCOVERY,
			help="the discovery document: routes, and schemas "
			"where --schemas has none")
	ap.add_argument("--schemas", default=DEFAULT_SCHEMAS,
			help="the newer schemas bodies are checked against "
			"('' for the discovery document's alone)")
	ap.add_argument("--require-token")
	ap.add_argument("--delay", type=float, default=0.2,
			help="seconds each transitional state lasts")
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	disco = Discovery(args.discovery, args.schemas or None)
	srv = fake_common.Server(("127.0.0.1", args.port), Handler)
	srv.disco = disco
	srv.store = Store(disco, args.delay)
	srv.verbose = args.verbose
	srv.require_token = args.require_token
	fake_common.serve([srv], args.port_file,
			  "tpu-fake: listening on 127.0.0.1:%d\n" %
			  srv.server_address[1] if args.verbose else None)


if __name__ == "__main__":
	main()
