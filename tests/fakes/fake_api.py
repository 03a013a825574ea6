"""What the fakes of Google's JSON APIs (tpu_fake.py, vertex_fake.py)
share, beside fake_common.py: Google's canonical error codes and error
shape, the reading of a JSON body into a message as Google's
JSON-to-proto parser does it (Checker: unknown names, types, enums,
durations, timestamps, maps, with Google's messages and field paths),
query parameters bound as Google binds them, routes, and a request
handler with the request log, faults, the bearer-token check and pages.
Both fakes promise the API's protocol; the code that keeps that promise
is written once.

A fake's server has a "disco": schemas (discovery-document shaped),
global_params, route(http_method, path) -> (method, parameters),
type_url(schema) and enum_type(schema, field, values); a method has
params, request (its body's schema or None) and body_root().

Python standard library only.
"""

import base64
import copy
import datetime
import json
import os
import re
import sys
import traceback
import urllib.parse

import fake_common

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


DURATION = re.compile(r"-?\d+(\.\d{1,9})?s")
TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})"
		       r"(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")

INT32 = (-2 ** 31, 2 ** 31 - 1)
UINT32 = (0, 2 ** 32 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
UINT64 = (0, 2 ** 64 - 1)

def snake(name):
	"""The proto field name of a JSON name: nodeSpec -> node_spec."""
	return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def camel(name):
	"""The JSON name of a proto field name: node_spec -> nodeSpec."""
	return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)



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
			# proto3 JSON takes an enum's number as well; a schema
			# that knows the numbers ("enumNumbers") takes them
			# (Google's REST clients send numbers).
			numbers = prop.get("enumNumbers", {})
			if type(value) is int and value in numbers:
				return numbers[value]
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


def find_route(methods, http_method, path):
	"""(method, path parameters) of the first of methods whose route
	matches path, or an ApiError as Google answers a wrong method or an
	unknown URL."""
	known_path = False
	for m in methods:
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


def enum_type(type_url, schema, field, values):
	"""The enum's proto type URL, named from its zero value as protoc
	names them (DISK_MODE_UNSPECIFIED -> AttachedDisk.DiskMode)."""
	first = values[0] if values else ""
	if first.endswith("_UNSPECIFIED"):
		name = "".join(w.capitalize() for w in
			       first[:-len("_UNSPECIFIED")].split("_"))
	else:
		name = field[0].upper() + field[1:]
	return type_url(schema + "." + name)


class Handler(fake_common.Handler):
	"""One connection of a Google API fake: the API (the fake's
	api_call(), answering (status, doc, headers)) logged and under the
	fault rules, control under /_fake/ (its route_fake()). service: the
	API's host name, for authentication errors."""
	service = "googleapis.com"

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
			sys.stderr.write("%s: %s\n" % (
				self.server_version.split("/")[0], fmt % args))

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

	def fake_json(self):
		try:
			return json.loads(self.body) if self.body.strip() else {}
		except ValueError as err:
			raise ApiError("INVALID_ARGUMENT", "Bad JSON: %s" % err)
