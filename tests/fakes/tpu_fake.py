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

Python standard library only (and fake_common.py, next to it, for the
fault rules, the request plumbing, the server class and the timestamp
format).

Usage: tpu_fake.py --port-file FILE [--port N] [--discovery PATH]
                   [--schemas PATH]
                   [--require-token T] [--delay S] [--verbose]
Serves http://127.0.0.1:PORT until SIGTERM; PORT is written to FILE (by
rename, so a reader never sees half of it) once the socket listens.
"""

import argparse
import base64
import copy
import datetime
import hashlib
import heapq
import itertools
import json
import os
import re
import secrets
import sys
import threading
import time
import traceback
import urllib.parse

import fake_common

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

# Google's canonical error codes: name -> (HTTP status, google.rpc.Code).
STATUSES = {
	"CANCELLED": (499, 1), "UNKNOWN": (500, 2),
	"INVALID_ARGUMENT": (400, 3), "DEADLINE_EXCEEDED": (504, 4),
	"NOT_FOUND": (404, 5), "ALREADY_EXISTS": (409, 6),
	"PERMISSION_DENIED": (403, 7), "RESOURCE_EXHAUSTED": (429, 8),
	"FAILED_PRECONDITION": (400, 9), "ABORTED": (409, 10),
	"OUT_OF_RANGE": (400, 11), "UNIMPLEMENTED": (501, 12),
	"INTERNAL": (500, 13), "UNAVAILABLE": (503, 14),
	"DATA_LOSS": (500, 15), "UNAUTHENTICATED": (401, 16),
}
# The status an HTTP code stands for when only the code is known.
HTTP_STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED",
		     403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		     409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED",
		     499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
		     503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

RESOURCE_ID = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
ACCELERATOR_TYPE = re.compile(r"(v2|v3|v4|v5p|v5litepod|v6e|tpu7x)-([0-9]+)")
RESERVATION = re.compile(r"projects/[^/]+/locations/[^/]+/reservations/[^/]+")
TOPOLOGY = re.compile(r"[1-9][0-9]*(x[1-9][0-9]*){1,2}")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
		  r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
DURATION = re.compile(r"-?\d+(\.\d{1,9})?s")
TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})"
		       r"(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
METADATA_VALUE_MAX = 256 * 1024
METADATA_TOTAL_MAX = 512 * 1024
INT32 = (-2 ** 31, 2 ** 31 - 1)
UINT32 = (0, 2 ** 32 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
UINT64 = (0, 2 ** 64 - 1)
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


def snake(name):
	"""The proto field name of a JSON name: nodeSpec -> node_spec."""
	return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def camel(name):
	"""The JSON name of a proto field name: node_spec -> nodeSpec."""
	return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


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


class ApiError(Exception):
	"""An error answered as Google's APIs answer: {"error": {...}}."""

	def __init__(self, status, message, details=None, headers=None,
		     http_code=None):
		super().__init__(message)
		self.status = status
		self.message = message
		self.code = http_code or STATUSES[status][0]
		self.details = details or []
		self.headers = headers or {}

	def body(self):
		err = {"code": self.code, "message": self.message,
		       "status": self.status}
		if self.details:
			err["details"] = self.details
		return {"error": err}


def bad_request(violations):
	"""INVALID_ARGUMENT from [(field, description)]; field may be ""."""
	details = []
	for field, desc in violations:
		v = {"field": field} if field else {}
		v["description"] = desc
		details.append(v)
	return ApiError("INVALID_ARGUMENT", "\n".join(d for _, d in violations),
			[{"@type": "type.googleapis.com/google.rpc.BadRequest",
			  "fieldViolations": details}])


def invalid_field(field, why):
	return bad_request([(field, "Invalid value for field '%s': %s" %
			     (field, why))])


def missing_field(field):
	return bad_request([(field, "Field '%s' is required." % field)])


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
		known_path = False
		for m in self.methods:
			mo = m.route.fullmatch(path)
			if not mo:
				continue
			if m.http == http_method:
				return m, {k: urllib.parse.unquote(v)
					   for k, v in mo.groupdict().items()}
			known_path = True
		if known_path:
			raise ApiError("NOT_FOUND", "Method %s is not allowed on %s "
				       "(no such method in the API)." %
				       (http_method, path))
		raise ApiError("NOT_FOUND", "The requested URL %s was not found "
			       "on this server." % path)

	def type_url(self, schema):
		return "type.googleapis.com/%s.%s" % (self.package, schema)

	def enum_type(self, schema, field, values):
		"""The enum's proto type, named from its zero value as protoc
		names them (DISK_MODE_UNSPECIFIED -> AttachedDisk.DiskMode)."""
		first = values[0] if values else ""
		if first.endswith("_UNSPECIFIED"):
			name = "".join(w.capitalize() for w in
				       first[:-len("_UNSPECIFIED")].split("_"))
		else:
			name = field[0].upper() + field[1:]
		return self.type_url(schema + "." + name)

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


def _json_text(value):
	return json.dumps(value, ensure_ascii=False)


class Checker:
	"""Reads a JSON body into a message as Google's JSON-to-proto parser
	does: unknown names, JSON types, int32/int64 ranges, enums, durations,
	timestamps and maps, every error with its field path. Gives back the
	body with JSON names (snake_case names accepted, as proto parsers do),
	nulls and output-only fields dropped; the output-only ones sent are
	listed in .ignored."""

	def __init__(self, disco):
		self.disco = disco
		self.errors = []
		self.ignored = []

	def check(self, schema, doc, root):
		if not isinstance(doc, dict):
			raise bad_request([("", "Invalid JSON payload received. "
					    "Unknown name \"\": Root element must "
					    "be a message.")])
		out = self.message(schema, doc, root)
		if self.errors:
			raise bad_request(self.errors)
		return out

	@staticmethod
	def join(path, name):
		return path + "." + name if path else name

	def unknown(self, key, parent, why):
		at = " at '%s'" % parent if parent else ""
		self.errors.append((parent, "Invalid JSON payload received. "
				    "Unknown name \"%s\"%s: %s" % (key, at, why)))

	def invalid(self, path, type_name, shown):
		self.errors.append((path, "Invalid value at '%s' (%s), %s" %
				    (path, type_name, shown)))

	def message(self, schema, obj, path):
		props = self.disco.schemas[schema].get("properties", {})
		out = {}
		for key, value in obj.items():
			name = key
			if name not in props and camel(key) in props and \
					"_" in key:
				name = camel(key)
			if name not in props:
				self.unknown(key, path, "Cannot find field.")
				continue
			if value is None:
				continue
			prop = props[name]
			fpath = self.join(path, snake(name))
			ok, clean = self.field(schema, name, prop, value, fpath,
					       key, path)
			if not ok:
				continue
			if prop.get("readOnly"):
				self.ignored.append(fpath)
				continue
			out[name] = clean
		return out

	def field(self, schema, name, prop, value, fpath, key, parent):
		"""(ok, value) for one field: a list, a map, or one value."""
		t = prop.get("type")
		if t == "array":
			if isinstance(value, dict):
				self.unknown(key, parent, "Proto field is repeated, "
					     "cannot start object.")
				return False, None
			if not isinstance(value, list):
				self.invalid(fpath, self.type_name(schema, name,
								   prop["items"]),
					     _json_text(value))
				return False, None
			out = []
			for i, item in enumerate(value):
				ok, clean = self.single(schema, name, prop["items"],
							item, "%s[%d]" % (fpath, i),
							key, parent)
				if ok:
					out.append(clean)
			return True, out
		if t == "object" and "additionalProperties" in prop:
			return self.map(schema, name, prop, value, fpath, key,
					parent)
		if isinstance(value, list):
			self.unknown(key, parent, "Proto field is not repeating, "
				     "cannot start list.")
			return False, None
		return self.single(schema, name, prop, value, fpath, key, parent)

	def map(self, schema, name, prop, value, fpath, key, parent):
		vprop = prop["additionalProperties"]
		if vprop.get("type") == "any":
			if not isinstance(value, dict):
				self.invalid(fpath, "google.protobuf.Struct",
					     _json_text(value))
				return False, None
			return True, copy.deepcopy(value)
		if isinstance(value, list):
			self.unknown(key, parent, "Proto field is not repeating, "
				     "cannot start list.")
			return False, None
		if not isinstance(value, dict):
			self.invalid(fpath, "map", _json_text(value))
			return False, None
		out = {}
		# Google reports a map entry as the i-th entry's value.
		for i, (k, v) in enumerate(value.items()):
			ok, clean = self.single(schema, name, vprop, v,
						"%s[%d].value" % (fpath, i), key,
						parent)
			if ok:
				out[k] = clean
		return True, out

	def type_name(self, schema, name, prop):
		if "$ref" in prop:
			return self.disco.type_url(prop["$ref"])
		if "enum" in prop:
			return self.disco.enum_type(schema, name, prop["enum"])
		fmt = prop.get("format")
		t = prop.get("type")
		if fmt == "google-duration":
			return "type.googleapis.com/google.protobuf.Duration"
		if fmt == "google-datetime":
			return "type.googleapis.com/google.protobuf.Timestamp"
		if fmt in ("int32", "uint32", "int64", "uint64", "float",
			   "double"):
			return "TYPE_" + fmt.upper()
		if fmt == "byte":
			return "TYPE_BYTES"
		return {"string": "TYPE_STRING", "boolean": "TYPE_BOOL",
			"integer": "TYPE_INT32", "number": "TYPE_DOUBLE"}.get(
				t, "TYPE_MESSAGE")

	def single(self, schema, name, prop, value, path, key, parent):
		"""(ok, value) for one value of a field (a list item, a map
		value, or the field's own value)."""
		type_name = self.type_name(schema, name, prop)
		if prop.get("type") == "object" and \
				"additionalProperties" in prop:
			return self.map(schema, name, prop, value, path, key,
					parent)
		if "$ref" in prop:
			if not isinstance(value, dict):
				self.invalid(path, type_name, _json_text(value))
				return False, None
			return True, self.message(prop["$ref"], value, path)
		if prop.get("type") == "any":
			return True, copy.deepcopy(value)
		if isinstance(value, dict):
			self.invalid(path, type_name,
				     "Starting an object on a scalar field")
			return False, None
		if isinstance(value, list):
			self.unknown(key, parent, "Proto field is not repeating, "
				     "cannot start list.")
			return False, None
		clean = self.scalar(prop, value)
		if clean is None:
			self.invalid(path, type_name, _json_text(value))
			return False, None
		return True, clean

	@staticmethod
	def scalar(prop, value):
		"""The value as stored, or None when the JSON does not fit."""
		t, fmt = prop.get("type"), prop.get("format")
		if "enum" in prop:
			return value if isinstance(value, str) and \
				value in prop["enum"] else None
		if t == "boolean":
			return value if isinstance(value, bool) else None
		if t == "integer" or fmt in ("int64", "uint64"):
			lo, hi = {"uint32": UINT32, "int64": INT64,
				  "uint64": UINT64}.get(fmt, INT32)
			n = _integer(value)
			if n is None or not lo <= n <= hi:
				return None
			# proto3 JSON writes 64-bit integers as strings.
			return str(n) if fmt in ("int64", "uint64") else n
		if t == "number":
			if isinstance(value, bool):
				return None
			if isinstance(value, (int, float)):
				return value
			return value if value in ("NaN", "Infinity",
						  "-Infinity") else None
		if not isinstance(value, str):
			return None
		if fmt == "google-duration":
			return value if _duration_ok(value) else None
		if fmt == "google-datetime":
			return value if _timestamp_ok(value) else None
		if fmt == "byte":
			try:
				base64.b64decode(value.replace("-", "+").replace(
					"_", "/") + "=" * (-len(value) % 4),
					validate=True)
			except ValueError:
				return None
		return value


def _integer(value):
	"""An integer from a JSON number or decimal string, else None."""
	if isinstance(value, bool):
		return None
	if isinstance(value, int):
		return value
	if isinstance(value, float):
		return int(value) if value.is_integer() else None
	if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
		return int(value)
	return None


def _duration_ok(value):
	if not DURATION.fullmatch(value):
		return False
	return abs(float(value[:-1])) <= 315576000000


def _timestamp_ok(value):
	mo = TIMESTAMP.fullmatch(value)
	if not mo:
		return False
	y, mon, d, h, mi, s = (int(mo.group(i)) for i in range(1, 7))
	try:
		datetime.datetime(y, mon, d, h, mi, s)
	except ValueError:
		return False
	off = mo.group(8)
	return off == "Z" or (int(off[1:3]) <= 23 and int(off[4:6]) <= 59)


def check_query(disco, method, query):
	"""Binds the query string as Google does: every name must be a
	query parameter of the method (or a global one), of its type."""
	errors = []
	for k, v in query.items():
		if k == "$alt":
			# The system parameter Google's REST clients send
			# (google-gax: "json;enum-encoding=int"). The fake
			# still answers enums by name, which those clients
			# read as well.
			if v not in ("json", "json;enum-encoding=int"):
				errors.append(("", "Invalid $alt: \"%s\"" % v))
			continue
		p = method.params.get(k)
		if p is None or p.get("location") != "query":
			p = None
		gp = None if p else disco.global_params.get(k)
		if p is None and gp is None:
			errors.append(("", "Invalid JSON payload received. Unknown "
				       "name \"%s\": Cannot bind query parameter. "
				       "Field '%s' could not be found in request "
				       "message." % (k, k)))
			continue
		spec = p or gp
		t = spec.get("type")
		bad = None
		# Google binds "True" too: gcloud (apitools) sends str(bool).
		if t == "boolean" and v.lower() not in ("true", "false"):
			bad = "TYPE_BOOL"
		elif t == "integer" and _integer(v) is None:
			bad = "TYPE_INT32"
		elif t == "integer" and not INT32[0] <= int(v) <= INT32[1]:
			bad = "TYPE_INT32"
		elif p is None and "enum" in spec and v not in spec["enum"]:
			bad = "TYPE_ENUM"
		if bad:
			field = snake(k)
			errors.append((field, "Invalid value at '%s' (%s), \"%s\"" %
				       (field, bad, v)))
	if errors:
		raise bad_request(errors)


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


class Fault(fake_common.Fault):
	"""fake_common.Fault's rule, and "status_name" (the error's status;
	default: the one Google gives the HTTP status)."""

	KEYS = ("method", "path", "count", "status", "message", "retry_after",
		"status_name", "reset", "stall", "processed")

	def __init__(self, rule):
		super().__init__(rule)
		self.status_name = rule.get("status_name") or \
			HTTP_STATUS_NAMES.get(self.status, "UNKNOWN")
		if self.status_name not in STATUSES:
			raise ValueError("unknown status_name %r" % self.status_name)
		if (self.status is not None) + self.reset != 1 and not self.stall:
			raise ValueError("a rule has one of status, reset, stall")
		if self.status is not None and self.reset:
			raise ValueError("status and reset exclude each other")

	def error(self):
		msg = self.rule.get("message") or "Injected fault: HTTP %d" % \
			self.status
		headers, details = {}, []
		if self.retry_after is not None:
			headers["Retry-After"] = str(self.retry_after)
			details.append({"@type": "type.googleapis.com/"
					"google.rpc.RetryInfo", "retryDelay":
					"%gs" % float(self.retry_after)})
		return ApiError(self.status_name, msg, details, headers,
				http_code=self.status)

# ---------------------------------------------------------------- HTTP


class Handler(fake_common.Handler):
	"""One connection: the API under /v2alpha1/, control under
	/_fake/."""
	server_version = "tpu-fake/1"
	# The service named in an authentication error's ErrorInfo.
	service = "tpu.googleapis.com"

	@property
	def disco(self):
		return self.server.disco

	def control(self):
		self.answer(*self.guard(self.route_fake))

	def guard(self, fn):
		"""(status, doc, headers) from fn, or from the ApiError it
		raised."""
		try:
			return fn()
		except ApiError as err:
			return err.code, err.body(), err.headers
		except (fake_common.Dropped, OSError):
			raise
		except Exception as err:
			# A bug of the fake: say so rather than drop the line.
			traceback.print_exc()
			return 500, ApiError("INTERNAL", "%s: %r" % (
				os.path.basename(sys.argv[0]), err)).body(), None

	def answer(self, status, doc, headers=None):
		body = json.dumps(doc, indent=2).encode() + b"\n"
		self.send_response(status)
		self.send_header("Content-Type", "application/json; charset=UTF-8")
		for k, v in (headers or {}).items():
			self.send_header(k, v)
		self.send_header("Content-Length", str(len(body)))
		self.end_headers()
		if self.command != "HEAD":
			self.wfile.write(body)

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("tpu-fake: %s\n" % (fmt % args))

	# ---- the API

	def api_request(self):
		entry = {"method": self.command, "path": self.raw_path,
			 "query": dict(self.query), "body": None, "ignored": [],
			 "headers": {k.lower(): v for k, v in self.headers.items()
				     if k.lower() in ("authorization",
						      "content-type")},
			 "status": None, "fault": None}
		try:
			entry["body"] = json.loads(self.body) if self.body else None
		except ValueError:
			entry["raw_body"] = self.body.decode("utf-8", "replace")
		status, doc, headers = self.with_faults(
			entry, lambda: self.guard(self.api_call))
		entry["status"] = status
		self.answer(status, doc, headers)

	def send_fault(self, fault):
		err = fault.error()
		self.log_entry["status"] = err.code
		self.answer(err.code, err.body(), err.headers)

	def require_auth(self):
		got = self.headers.get("Authorization", "")
		want = self.server.require_token
		token = got[len("Bearer "):] if got.startswith("Bearer ") else ""
		if token and (want is None or token == want):
			return
		reason = "CREDENTIALS_MISSING" if not got else \
			"ACCESS_TOKEN_TYPE_UNSUPPORTED"
		raise ApiError(
			"UNAUTHENTICATED", "Request had invalid authentication "
			"credentials. Expected OAuth 2 access token, login cookie "
			"or other valid authentication credential. See https://"
			"developers.google.com/identity/sign-in/web/"
			"devconsole-project.",
			[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
			  "reason": reason, "domain": "googleapis.com",
			  "metadata": {"service": self.service}}],
			{"WWW-Authenticate": 'Bearer realm='
			 '"https://accounts.google.com/"'})

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

	def request_body(self, method):
		ctype = self.headers.get("Content-Type", "")
		text = self.body.decode("utf-8", "replace")
		if text.strip() and not ctype.lower().startswith(
				"application/json"):
			# Google reads any other body as form fields, as if
			# they were query parameters.
			name = urllib.parse.unquote_plus(text.split("=")[0][:200])
			raise bad_request([("", "Invalid JSON payload received. "
					    "Unknown name \"%s\": Cannot bind query "
					    "parameter. Field '%s' could not be "
					    "found in request message." %
					    (name, name))])
		if not text.strip():
			doc = {}
		else:
			try:
				doc = json.loads(text, parse_constant=_no_constant)
			except ValueError as err:
				raise bad_request([("", "Invalid JSON payload "
						    "received. Unexpected token. "
						    "(%s)" % err)])
		checker = Checker(self.disco)
		try:
			return checker.check(method.request, doc,
					     method.body_root())
		finally:
			self.log_entry["ignored"] = checker.ignored

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

	def page(self, items, field, render):
		"""One page of items, sorted by name; the token names the last
		item given."""
		items = sorted(items, key=lambda x: x.name)
		size = int(self.query.get("pageSize") or 0)
		if size < 0:
			raise invalid_field("page_size", "must not be negative.")
		token = self.query.get("pageToken")
		if token:
			after = _page_after(token)
			if after is None:
				raise invalid_field("page_token", "\"%s\" is not a "
						    "page token of this list." %
						    token)
			items = [x for x in items if x.name > after]
		doc = {}
		if size and len(items) > size:
			items = items[:size]
			doc["nextPageToken"] = base64.urlsafe_b64encode(
				items[-1].name.encode()).decode()
		if items:
			doc[field] = [render(x) for x in items]
		return 200, dict(sorted(doc.items())), None

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

	def fake_json(self):
		try:
			return json.loads(self.body) if self.body.strip() else {}
		except ValueError as err:
			raise ApiError("INVALID_ARGUMENT", "Bad JSON: %s" % err)

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


def _page_after(token):
	"""The name a page token was made from, or None for a bad one."""
	if not re.fullmatch(r"[A-Za-z0-9_-]+=*", token):
		return None
	try:
		name = base64.urlsafe_b64decode(token).decode()
	except ValueError:
		return None
	return name if name.startswith("projects/") else None


def _no_constant(name):
	raise ValueError("%s is not JSON" % name)


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
