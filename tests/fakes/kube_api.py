"""What kube_fake.py's API server answers and checks as kube-apiserver
does: Status errors, field errors (field.ErrorList) and their 422,
ObjectMeta names and labels, a custom resource against its CRD's
openAPIV3Schema (pruning, defaults, unknown fields), label and field
selectors, conditions and timestamps."""

import copy
import datetime
import json
import random
import re
import time

# ---------------------------------------------------------------- errors


def now_text(t=None):
	d = datetime.datetime.fromtimestamp(time.time() if t is None else t,
					    datetime.timezone.utc)
	return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def status_doc(code, reason, message, details=None):
	doc = {"kind": "Status", "apiVersion": "v1", "metadata": {},
	       "status": "Failure", "message": message, "reason": reason,
	       "code": code}
	if details is not None:
		doc["details"] = details
	return doc


class KubeError(Exception):
	"""An answer other than success: a Status object (or, with text, a
	plain text body as the server's mux gives for unknown paths)."""

	def __init__(self, code, reason, message, details=None, text=None,
		     headers=None):
		super().__init__(message)
		self.code, self.reason, self.message = code, reason, message
		self.details, self.text = details, text
		self.headers = headers or {}

	def body(self):
		return status_doc(self.code, self.reason, self.message,
				  self.details)


def page_not_found():
	return KubeError(404, "NotFound", "404 page not found",
			 text="404 page not found\n")


def not_found(res, name):
	return KubeError(404, "NotFound", '%s "%s" not found' %
			 (res.qualified, name),
			 {"name": name, "group": res.group, "kind": res.plural})


def already_exists(res, name):
	return KubeError(409, "AlreadyExists", '%s "%s" already exists' %
			 (res.qualified, name),
			 {"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, why="the object has been modified; please apply "
	     "your changes to the latest version and try again"):
	return KubeError(409, "Conflict", 'Operation cannot be fulfilled on '
			 '%s "%s": %s' % (res.qualified, name, why),
			 {"name": name, "group": res.group, "kind": res.plural})


def bad_request(message):
	return KubeError(400, "BadRequest", message)


def go_quote(v):
	"""A value as Go's %q / %v print it in field errors."""
	if isinstance(v, str):
		return json.dumps(v)
	if isinstance(v, bool):
		return "true" if v else "false"
	if v is None:
		return "null"
	if isinstance(v, float) and v == int(v):
		return str(int(v))
	return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


class FieldErrors:
	"""field.ErrorList: (reason, field, message) in order."""

	def __init__(self):
		self.items = []

	def add(self, reason, field, message):
		self.items.append((reason, field, message))

	def required(self, field):
		self.add("FieldValueRequired", field, "Required value")

	def invalid(self, field, value, why):
		self.add("FieldValueInvalid", field, "Invalid value: %s: %s" %
			 (go_quote(value), why))

	def type_invalid(self, field, value, why):
		self.add("FieldValueTypeInvalid", field, "Invalid value: %s: %s"
			 % (go_quote(value), why))

	def not_supported(self, field, value, allowed):
		self.add("FieldValueNotSupported", field,
			 "Unsupported value: %s: supported values: %s" %
			 (go_quote(value), ", ".join(go_quote(a)
						     for a in allowed)))

	def too_long(self, field, limit):
		self.add("FieldValueTooLong", field, "Too long: may not be more "
			 "than %d bytes" % limit)

	def too_many(self, field, n, limit):
		self.add("FieldValueTooMany", field, "Too many: %d: must have "
			 "at most %d items" % (n, limit))

	def error(self, kind_group, name):
		"""The 422 Invalid the API server answers for these."""
		kind, group = kind_group
		texts = ["%s: %s" % (f, m) if f else m for _, f, m in self.items]
		joined = texts[0] if len(texts) == 1 else \
			"[" + ", ".join(texts) + "]"
		qual = "%s.%s" % (kind, group) if group else kind
		return KubeError(422, "Invalid", '%s "%s" is invalid: %s' % (
			qual, name, joined), {
				"name": name, "group": group, "kind": kind,
				"causes": [{"reason": r, "message": m, "field": f}
					   for r, f, m in self.items]})


# ---------------------------------------------------------------- names

DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
			       r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
		 "alphanumeric characters, '-' or '.', and must start and end "
		 "with an alphanumeric character (e.g. 'example.com', regex "
		 "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z"
		 "0-9]([-a-z0-9]*[a-z0-9])?)*')")
OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid",
	       "resourceVersion", "generation", "creationTimestamp",
	       "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
	       "annotations", "ownerReferences", "finalizers", "managedFields")


def check_qualified_key(errs, field, key):
	"""A label or annotation key: [prefix/]name."""
	prefix, _, name = key.rpartition("/")
	if prefix and (len(prefix) > 253 or
		       not DNS1123_SUBDOMAIN.fullmatch(prefix)):
		errs.invalid(field, key, "prefix part " + SUBDOMAIN_MSG)
	if not name or len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
		errs.invalid(field, key, "name part must consist of alphanumeric "
			     "characters, '-', '_' or '.', and must start and "
			     "end with an alphanumeric character (e.g. 'MyName',"
			     "  or 'my.name',  or '123-abc', regex used for "
			     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
			     "[A-Za-z0-9]') and must be no more than 63 "
			     "characters")


def check_meta(errs, meta):
	"""ObjectMeta's validation (apimachinery's ValidateObjectMeta)."""
	name = meta.get("name")
	if not name and not meta.get("generateName"):
		errs.add("FieldValueRequired", "metadata.name",
			 "Required value: name or generateName is required")
	elif name and (len(name) > 253 or
		       not DNS1123_SUBDOMAIN.fullmatch(name)):
		errs.invalid("metadata.name", name, SUBDOMAIN_MSG)
	for k, v in (meta.get("labels") or {}).items():
		check_qualified_key(errs, "metadata.labels", k)
		if not isinstance(v, str) or len(v) > 63 or \
				not LABEL_VALUE.fullmatch(v):
			errs.invalid("metadata.labels", v, "a valid label must be "
				     "an empty string or consist of alphanumeric "
				     "characters, '-', '_' or '.', and must start "
				     "and end with an alphanumeric character (e.g. "
				     "'MyValue',  or 'my_value',  or '12345', regex "
				     "used for validation is '(([A-Za-z0-9][-A-Za-z0-"
				     "9_.]*)?[A-Za-z0-9])?')")
	for k in (meta.get("annotations") or {}):
		check_qualified_key(errs, "metadata.annotations", k)


# ---------------------------------------------------------------- schemas

DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?"
		       r"([Zz]|[+-]\d{2}:\d{2})")
JSON_TYPES = {"string": str, "boolean": bool, "array": list,
	      "object": dict}


def json_type(v):
	if v is None:
		return "null"
	if isinstance(v, bool):
		return "boolean"
	if isinstance(v, int):
		return "integer"
	if isinstance(v, float):
		return "number"
	if isinstance(v, str):
		return "string"
	return "array" if isinstance(v, list) else "object"


class SchemaCheck:
	"""One object against a structural openAPIV3Schema, as the API
	server handles a custom resource: nulls of non-nullable fields
	pruned, unknown fields collected (then refused or dropped),
	defaults applied, then the value validation."""

	def __init__(self):
		self.errs = FieldErrors()
		self.unknown = []

	def run(self, schema, obj):
		obj = self.walk(schema, obj, "", root=True)
		return obj

	@staticmethod
	def join(path, name):
		return name if not path else path + "." + name

	def walk(self, s, v, path, root=False):
		"""v after pruning and defaulting; errors on the way."""
		if s.get("x-kubernetes-int-or-string"):
			if not isinstance(v, (int, str)) or isinstance(v, bool):
				self.errs.type_invalid(path, json_type(v), "%s in body "
						       "must be of type integer,"
						       "string: %s" % (path, go_quote(
							       json_type(v))))
				return v
			if isinstance(v, str):
				self.string(s, v, path)
			else:
				self.number(s, v, path)
			return v
		t = s.get("type")
		if t in (None, "") and "properties" not in s:
			return v
		got = json_type(v)
		if t == "number" and got in ("integer", "number"):
			self.number(s, v, path)
			return v
		if t == "integer" and got == "integer":
			self.number(s, v, path)
			return v
		if (t == "object" or (t is None and "properties" in s)) and \
				got == "object":
			return self.object(s, v, path, root)
		if t in JSON_TYPES and t == got:
			if t == "string":
				self.string(s, v, path)
				return v
			if t == "array":
				return self.array(s, v, path)
			return self.enum(s, v, path)
		if t not in ("string", "integer", "number", "boolean", "array",
			     "object"):
			return v
		self.errs.type_invalid(path, got, "%s in body must be of type "
				       "%s: %s" % (path, t, go_quote(got)))
		return v

	def enum(self, s, v, path):
		if "enum" in s and v not in s["enum"]:
			self.errs.not_supported(path, v, s["enum"])
		return v

	def string(self, s, v, path):
		self.enum(s, v, path)
		if "maxLength" in s and len(v) > s["maxLength"]:
			self.errs.too_long(path, s["maxLength"])
		if "minLength" in s and len(v) < s["minLength"]:
			self.errs.invalid(path, v, "%s in body should be at least "
					  "%d chars long" % (path, s["minLength"]))
		if "pattern" in s and not re.search(s["pattern"], v):
			self.errs.invalid(path, v, "%s in body should match '%s'" %
					  (path, s["pattern"]))
		fmt = s.get("format")
		if fmt == "date-time" and not DATE_TIME.fullmatch(v):
			self.errs.invalid(path, v, "%s in body must be of type "
					  "date-time: %s" % (path, go_quote(v)))

	def number(self, s, v, path):
		self.enum(s, v, path)
		fmt = s.get("format")
		bits = {"int32": 31, "int64": 63}.get(fmt)
		if bits and isinstance(v, int) and not \
				-(1 << bits) <= v < (1 << bits):
			self.errs.invalid(path, v, "%s in body must be of type %s: "
					  "%s" % (path, fmt, go_quote(str(v))))
		for key, word, beyond in (("minimum", "greater", lambda x, y: x < y),
					  ("maximum", "less", lambda x, y: x > y)):
			if key not in s:
				continue
			bound = s[key]
			strict = s.get("exclusive" + key.capitalize())
			if beyond(v, bound) or (strict and v == bound):
				self.errs.invalid(path, v, "%s in body should be %s "
						  "than %s%s" % (path, word, "" if strict
								 else "or equal to ",
								 go_quote(bound)))

	def array(self, s, v, path):
		out = []
		items = s.get("items") or {}
		for i, x in enumerate(v):
			p = "%s[%d]" % (path, i)
			if x is None and not items.get("nullable"):
				# A null item is not pruned: it is a type error.
				self.errs.type_invalid(p, "null", "%s in body must be "
						       "of type %s: \"null\"" % (
							       p, items.get("type",
									    "object")))
				out.append(x)
				continue
			out.append(self.walk(items, x, p))
		if "maxItems" in s and len(out) > s["maxItems"]:
			self.errs.too_many(path, len(out), s["maxItems"])
		if "minItems" in s and len(out) < s["minItems"]:
			self.errs.invalid(path, len(out), "%s in body should have "
					  "at least %d items" % (path, s["minItems"]))
		if s.get("x-kubernetes-list-type") == "map":
			keys = s.get("x-kubernetes-list-map-keys") or []
			seen = {}
			for i, x in enumerate(out):
				if not isinstance(x, dict):
					continue
				k = tuple(json.dumps(x.get(key)) for key in keys)
				if k in seen:
					self.errs.add("FieldValueDuplicate",
						      "%s[%d]" % (path, i),
						      "Duplicate value: %s" % (
							      "{" + ", ".join(
								      '"%s":%s' % (key,
										   go_quote(
											   x.get(key)))
								      for key in keys) + "}"))
				seen[k] = i
		elif s.get("x-kubernetes-list-type") == "set":
			for i, x in enumerate(out):
				if x in out[:i]:
					self.errs.add("FieldValueDuplicate",
						      "%s[%d]" % (path, i),
						      "Duplicate value: %s" %
						      go_quote(x))
		return out

	def object(self, s, v, path, root):
		props = s.get("properties")
		addl = s.get("additionalProperties")
		keep = s.get("x-kubernetes-preserve-unknown-fields")
		out = {}
		for k, x in v.items():
			p = self.join(path, k) if props is not None or not addl \
				else "%s[%s]" % (path, k)
			sub = None
			if props is not None and k in props:
				sub = props[k]
			elif isinstance(addl, dict):
				sub = addl
				p = "%s[%s]" % (path, k)
			elif addl is True or keep:
				out[k] = x
				continue
			elif root and k in ("apiVersion", "kind", "metadata"):
				sub = {}
			else:
				self.unknown.append(self.join(path, k))
				continue
			if x is None and not sub.get("nullable"):
				continue
			if root and k == "metadata":
				out[k] = self.meta(x)
				continue
			out[k] = self.walk(sub, x, p)
		for k, sub in (props or {}).items():
			if k not in out and "default" in sub:
				out[k] = self.walk(sub, copy.deepcopy(sub["default"]),
						   self.join(path, k))
		for k in s.get("required", []):
			if k not in out:
				self.errs.required(self.join(path, k))
		if "maxProperties" in s and len(out) > s["maxProperties"]:
			self.errs.too_many(path, len(out), s["maxProperties"])
		return out

	def meta(self, m):
		"""The root metadata is ObjectMeta whatever the schema says:
		its unknown fields are unknown fields."""
		if not isinstance(m, dict):
			self.errs.type_invalid("metadata", json_type(m), "metadata "
					       "in body must be of type object: %s" %
					       go_quote(json_type(m)))
			return m
		out = {}
		for k, x in m.items():
			if k in OBJECT_META:
				out[k] = x
			else:
				self.unknown.append("metadata." + k)
		return out


# ---------------------------------------------------------------- selectors


class Selector:
	"""A label selector as kubectl and clients write it: k=v, k==v,
	k!=v, k, !k, k in (a,b), k notin (a,b), comma-separated."""

	def __init__(self, text):
		self.reqs = []
		text = (text or "").strip()
		for part in self.split(text):
			part = part.strip()
			if not part:
				continue
			m = re.fullmatch(r"([^\s=!()]+)\s+(in|notin)\s+\(([^)]*)\)",
					 part)
			if m:
				vals = {x.strip() for x in m.group(3).split(",")}
				self.reqs.append((m.group(1), m.group(2), vals))
				continue
			m = re.fullmatch(r"([^\s=!]+)\s*(==|!=|=)\s*([^\s=!]*)", part)
			if m:
				op = {"==": "=", "=": "=", "!=": "!="}[m.group(2)]
				self.reqs.append((m.group(1), op, {m.group(3)}))
				continue
			m = re.fullmatch(r"(!?)\s*([^\s=!()]+)", part)
			if m:
				self.reqs.append((m.group(2), "!" if m.group(1) else
						  "exists", set()))
				continue
			raise bad_request("unable to parse requirement: found "
					  "'%s', expected: identifier" % part)

	@staticmethod
	def split(text):
		parts, depth, cur = [], 0, ""
		for c in text:
			if c == "(":
				depth += 1
			elif c == ")":
				depth -= 1
			if c == "," and depth == 0:
				parts.append(cur)
				cur = ""
			else:
				cur += c
		parts.append(cur)
		return parts

	def matches(self, labels):
		labels = labels or {}
		for k, op, vals in self.reqs:
			have = k in labels
			if op == "exists" and not have:
				return False
			if op == "!" and have:
				return False
			if op in ("=", "in") and (not have or labels[k] not in vals):
				return False
			if op in ("!=", "notin") and have and labels[k] in vals:
				return False
		return True


FIELD_PATHS = {"metadata.name": ("metadata", "name"),
	       "metadata.namespace": ("metadata", "namespace"),
	       "spec.nodeName": ("spec", "nodeName"),
	       "status.phase": ("status", "phase")}


def field_selector(text):
	"""A predicate on objects for a field selector (=, ==, !=)."""
	reqs = []
	for part in (text or "").split(","):
		part = part.strip()
		if not part:
			continue
		m = re.fullmatch(r"([\w.]+)\s*(==|!=|=)\s*(.*)", part)
		if not m or m.group(1) not in FIELD_PATHS:
			raise bad_request('"%s" is not a known field selector: only '
					  '"%s"' % (m.group(1) if m else part,
						    '", "'.join(FIELD_PATHS)))
		reqs.append((FIELD_PATHS[m.group(1)], m.group(2) != "!=",
			     m.group(3)))

	def pred(obj):
		for (a, b), eq, want in reqs:
			got = str((obj.get(a) or {}).get(b, ""))
			if (got == want) != eq:
				return False
		return True
	return pred


def seconds_since(stamp):
	"""Seconds since an RFC 3339 time the fake wrote (now_text)."""
	t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
	return time.time() - t.replace(tzinfo=datetime.timezone.utc).timestamp()


def random_suffix(n=5):
	# The alphabet apimachinery's rand.String uses (no vowels).
	return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
		       for _ in range(n))


def set_condition(status, ctype, value, reason, message, t=None):
	"""Sets one condition; lastTransitionTime moves only on a change of
	status. Returns True when something changed."""
	conds = status.setdefault("conditions", [])
	for c in conds:
		if c["type"] == ctype:
			if (c["status"], c.get("reason"), c.get("message")) == \
					(value, reason, message):
				return False
			if c["status"] != value:
				c["lastTransitionTime"] = now_text(t)
			c.update(status=value, reason=reason, message=message)
			return True
	conds.append({"type": ctype, "status": value, "reason": reason,
		      "message": message, "lastTransitionTime": now_text(t)})
	return True


def condition(obj, ctype):
	for c in (obj.get("status") or {}).get("conditions") or []:
		if c["type"] == ctype:
			return c["status"] == "True"
	return False
