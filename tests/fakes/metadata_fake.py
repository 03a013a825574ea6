#!/usr/bin/env python3
"""A fake GCE metadata server for slicectl's tests: what each worker of a
TPU VM slice sees at http://metadata.google.internal/computeMetadata/v1/.

It serves N workers, one listening socket each, so every worker has its
own view (agent-worker-number, tpu-env's WORKER_ID, its own preemption
and maintenance notices), and it promises the real server's rules for
the calls slicectl makes:

- requests without "Metadata-Flavor: Google" are refused (403), and so
  are requests with an X-Forwarded-For header (the server's guard against
  being reached through a proxy); every answer, errors included, carries
  "Metadata-Flavor: Google";
- a value answers as text/plain with an ETag (a hash of the value, so an
  equal value has an equal ETag); "?alt=json" answers it as a JSON string
  (application/json); the token answers JSON;
- a directory (a path ending in "/") answers a listing, one key a line,
  subdirectories with a trailing "/" (text/plain); "?alt=json" answers
  that list as JSON, "?recursive=true" the whole subtree as a JSON object
  (built-in keys in camelCase, attribute names as they are; with
  "alt=text", "path value" lines). A directory named without its "/"
  answers 301 to it, as the real server does; unknown paths answer 404;
  methods other than GET and HEAD, 405;
- "?wait_for_change=true[&last_etag=E][&timeout_sec=N]": answers at once
  when the current ETag differs from E; else holds the request until the
  value changes or N seconds pass, then answers the (unchanged) value
  with its (unchanged) ETag. Without last_etag it waits for the next
  change. Many requests may wait at once (a thread each). A directory's
  ETag covers everything below it. Bad timeout_sec, wait_for_change,
  recursive or alt values answer 400.

Each worker W's values, as on a TPU VM:
  instance/attributes/agent-worker-number    W
  instance/attributes/worker-network-endpoints
                        "UID:0:IP0,UID:1:IP1,..." (the same on every
                        worker: one entry per worker of the slice)
  instance/attributes/tpu-env    "KEY: 'value'" lines, sorted: ACCELERATOR_
                        TYPE, CONSUMER_PROJECT_ID, CONSUMER_PROJECT_NUMBER,
                        NODE_ID, WORKER_ID (W), ZONE, and every "tpu_env"
                        entry of the config (MEGASCALE_COORDINATOR_ADDRESS,
                        MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID...)
  instance/attributes/accelerator-type
  instance/preempted            FALSE (TRUE once preempted)
  instance/maintenance-event    NONE (or TERMINATE_ON_HOST_MAINTENANCE...)
  instance/id, instance/name, instance/hostname,
  instance/zone                 projects/NUMBER/zones/ZONE
  instance/network-interfaces/0/ip
  instance/service-accounts/default/{email,scopes,token}
                        token: {"access_token", "expires_in", "token_type"}
                        (a new access_token per worker each expiry)
  project/project-id, project/numeric-project-id
and any attribute set through /_fake/set.

Control endpoints (any worker's port; no Metadata-Flavor needed; JSON in
and out; errors {"error": {"code", "message"}}):
  POST /_fake/set     {"worker": W or "all" (default), "path":
                      "instance/preempted", "value": "TRUE"} sets a value
                      (a string; null deletes it) and wakes its watchers;
                      a path that is a directory, or below a value, or the
                      token, is refused (400). Answers {"etags": [...]}
                      per worker set.
  POST /_fake/config  merges settings, answers the whole config; derived
                      values (above) are rendered again from it, replacing
                      what /_fake/set put there, and watchers are woken:
      "project": ID, "project_number": N, "zone": Z,
      "node_id": NAME (NODE_ID; instance names NAME-w-W),
      "node_uid": UID (the first field of worker-network-endpoints),
      "accelerator_type": TYPE,
      "worker_ips": [IP...] (default 10.130.0.2 + W; one per worker of
                      the slice, may be more than the fake serves),
      "worker_network_endpoints": a string served as it is (null: from
                      node_uid and worker_ips),
      "tpu_env": {KEY: VALUE} merged key by key (a null value deletes),
      "token_expires_in": S
  GET  /_fake/config
  POST /_fake/faults  a rule or a list: {"method", "path" (regex searched
                      in path?query), "worker" (default any), "count"
                      (default 1, < 0: always), then "status" (+
                      "message", "retry_after"), "reset": true or "stall":
                      S (may go with status or reset); "processed": true
                      acts after the answer is ready (after a long poll's
                      wait)}; GET lists them (count left), DELETE clears
  GET  /_fake/requests  [{"worker", "method", "path", "query", "headers"
                      (metadata-flavor, x-forwarded-for, user-agent),
                      "status" (or "reset"), "fault" (the rule or null),
                      "time"}]; DELETE clears it
  GET  /_fake/state   {"config", "workers": [{PATH: VALUE}]}
  POST /_fake/reset   forgets everything: values, config, faults, log

Python standard library only (and fake_common.py, next to it, for the
fault rules, the request plumbing and the server class).

Usage: metadata_fake.py --port-file FILE [--workers N] [--verbose]
Serves worker W at http://127.0.0.1:PORT_W until SIGTERM; the ports, one
a line, worker 0 first, are written to FILE (by rename, so a reader never
sees half of it) once every socket listens.
"""

import argparse
import hashlib
import json
import re
import sys
import threading
import time
import urllib.parse

import fake_common

ROOT = "/computeMetadata/v1/"
TOKEN_PATH = "instance/service-accounts/default/token"
# Without timeout_sec a wait lasts until the next change; held requests
# end here at the latest all the same.
WAIT_MAX = 3600.0
DERIVED = (
	"instance/attributes/agent-worker-number",
	"instance/attributes/worker-network-endpoints",
	"instance/attributes/tpu-env",
	"instance/attributes/accelerator-type",
	"instance/id", "instance/name", "instance/hostname", "instance/zone",
	"instance/network-interfaces/0/ip",
	"instance/service-accounts/default/email",
	"instance/service-accounts/default/scopes",
	"project/project-id", "project/numeric-project-id",
)
ATTR_NAME = re.compile(r"[A-Za-z0-9._~-]+")
ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")

# ---------------------------------------------------------------- values


def default_config():
	return {
		"project": "fake-project",
		"project_number": 123456789012,
		"zone": "us-central2-b",
		"node_id": "t1v-n-5f0c0b3a",
		"node_uid": "4305129512438721739",
		"accelerator_type": "v4-16",
		"worker_ips": None,
		"worker_network_endpoints": None,
		"tpu_env": {},
		"token_expires_in": 3599,
	}


def worker_ips(config, nworkers):
	ips = config["worker_ips"]
	if ips is None:
		ips = ["10.130.0.%d" % (2 + w) for w in range(nworkers)]
	return ips


def yaml_quote(value):
	return "'" + str(value).replace("'", "''") + "'"


def derived_values(config, nworkers, w):
	"""The values of DERIVED for worker w, rendered from config."""
	ips = worker_ips(config, nworkers)
	wne = config["worker_network_endpoints"]
	if wne is None:
		wne = ",".join("%s:%d:%s" % (config["node_uid"], i, ip)
			       for i, ip in enumerate(ips))
	env = {
		"ACCELERATOR_TYPE": config["accelerator_type"],
		"CONSUMER_PROJECT_ID": config["project"],
		"CONSUMER_PROJECT_NUMBER": str(config["project_number"]),
		"NODE_ID": config["node_id"],
		"WORKER_ID": str(w),
		"ZONE": config["zone"],
	}
	env.update(config["tpu_env"])
	tpu_env = "".join("%s: %s\n" % (k, yaml_quote(env[k]))
			  for k in sorted(env))
	name = "%s-w-%d" % (config["node_id"], w)
	num = config["project_number"]
	return {
		"instance/attributes/agent-worker-number": str(w),
		"instance/attributes/worker-network-endpoints": wne,
		"instance/attributes/tpu-env": tpu_env,
		"instance/attributes/accelerator-type":
			config["accelerator_type"],
		"instance/id": str(7203456178901234000 + w),
		"instance/name": name,
		"instance/hostname": "%s.%s.c.%s.internal" % (
			name, config["zone"], config["project"]),
		"instance/zone": "projects/%d/zones/%s" % (num, config["zone"]),
		"instance/network-interfaces/0/ip":
			ips[w] if w < len(ips) else "10.130.1.%d" % (2 + w),
		"instance/service-accounts/default/email":
			"%d-compute@developer.gserviceaccount.com" % num,
		"instance/service-accounts/default/scopes":
			"https://www.googleapis.com/auth/cloud-platform\n",
		"project/project-id": config["project"],
		"project/numeric-project-id": str(num),
	}


def etag_of(text):
	return hashlib.sha256(text.encode()).hexdigest()[:16]


def camel(key):
	return re.sub(r"-([a-z0-9])", lambda m: m.group(1).upper(), key)


BadRequest = fake_common.BadRequest


class Store:
	"""Every worker's values, the config, faults and the request log,
	under one lock; `changed` (on that lock) wakes long polls."""

	def __init__(self, nworkers):
		self.nworkers = nworkers
		self.lock = threading.Lock()
		self.changed = threading.Condition(self.lock)
		self.reset()

	def reset(self):
		with self.lock:
			self.config = default_config()
			self.values = [{"instance/preempted": "FALSE",
					"instance/maintenance-event": "NONE"}
				       for _ in range(self.nworkers)]
			self.tokens = [None] * self.nworkers
			self.token_serial = 0
			self.faults = []
			self.requests = []
			self.render()
			self.changed.notify_all()

	def render(self):
		for w in range(self.nworkers):
			self.values[w].update(derived_values(
				self.config, self.nworkers, w))

	# ---- lookups (lock held)

	def token(self, w):
		now = time.monotonic()
		t = self.tokens[w]
		if t is None or t[1] - now < 1:
			self.token_serial += 1
			t = ("ya29.fake-metadata-token-w%d-%d" % (
				w, self.token_serial),
			     now + self.config["token_expires_in"])
			self.tokens[w] = t
		return t

	def leaves(self, w):
		d = dict(self.values[w])
		d[TOKEN_PATH] = None  # rendered on demand
		return d

	def lookup(self, w, path):
		"""("value", text, etag) or ("dir", {name: subtree}, etag) or
		("redirect", None, None) or None (no such path)."""
		leaves = self.leaves(w)
		if path in leaves:
			if path == TOKEN_PATH:
				tok, expiry = self.token(w)
				text = json.dumps({
					"access_token": tok,
					"expires_in": max(1, int(
						expiry - time.monotonic())),
					"token_type": "Bearer"})
				return "token", text, etag_of(tok)
			return "value", leaves[path], etag_of(leaves[path])
		if path.endswith("/") or path == "":
			tree = {}
			for p, v in leaves.items():
				if not p.startswith(path):
					continue
				node = tree
				parts = p[len(path):].split("/")
				for part in parts[:-1]:
					node = node.setdefault(part + "/", {})
				node[parts[-1]] = v
			if not tree and path:
				return None
			return "dir", tree, etag_of(json.dumps(
				tree, sort_keys=True))
		if any(p.startswith(path + "/") for p in leaves):
			return "redirect", None, None
		return None

	def set_value(self, w, path, value):
		leaves = self.leaves(w)
		if path == TOKEN_PATH:
			raise BadRequest("the token is generated; it cannot be "
					 "set")
		if not path or path.endswith("/") or path.startswith("/") or \
				"//" in path:
			raise BadRequest("path %r: a value's path, like "
					 "instance/attributes/NAME" % path)
		if not all(ATTR_NAME.fullmatch(p) for p in path.split("/")):
			raise BadRequest("path %r: names are letters, digits, "
					 ". _ ~ -" % path)
		if any(p.startswith(path + "/") for p in leaves):
			raise BadRequest("path %r is a directory" % path)
		parts = path.split("/")
		for i in range(1, len(parts)):
			if "/".join(parts[:i]) in leaves:
				raise BadRequest("path %r is below the value %r" %
						 (path, "/".join(parts[:i])))
		if value is None:
			self.values[w].pop(path, None)
		else:
			self.values[w][path] = value
		return etag_of(value) if value is not None else None

	def configure(self, doc):
		c = dict(self.config)
		for k, v in doc.items():
			if k not in c:
				raise BadRequest("unknown config key %r; keys are %s"
						 % (k, ", ".join(sorted(c))))
			if k == "tpu_env":
				if not isinstance(v, dict):
					raise BadRequest("tpu_env: {KEY: VALUE}")
				env = dict(c["tpu_env"])
				for ek, ev in v.items():
					if not ENV_KEY.fullmatch(ek):
						raise BadRequest("tpu_env: bad key %r"
								 % ek)
					if ev is None:
						env.pop(ek, None)
					elif isinstance(ev, (str, int)) and \
							not isinstance(ev, bool):
						env[ek] = str(ev)
					else:
						raise BadRequest("tpu_env: %s: a "
								 "string" % ek)
				c["tpu_env"] = env
			elif k == "worker_ips":
				if v is not None and (not isinstance(v, list) or
						      not v or not all(
							isinstance(i, str)
							for i in v)):
					raise BadRequest("worker_ips: [IP...] or "
							 "null")
				c[k] = v
			elif k == "worker_network_endpoints":
				if v is not None and not isinstance(v, str):
					raise BadRequest("worker_network_endpoints:"
							 " a string or null")
				c[k] = v
			elif k in ("project_number", "token_expires_in"):
				if not isinstance(v, int) or isinstance(v, bool) \
						or v <= 0:
					raise BadRequest("%s: a positive integer"
							 % k)
				c[k] = v
			else:
				if not isinstance(v, str) or not v:
					raise BadRequest("%s: a string" % k)
				c[k] = v
		self.config = c
		self.render()
		if "token_expires_in" in doc:
			self.tokens = [None] * self.nworkers
		self.changed.notify_all()
		return c

# ---------------------------------------------------------------- faults


class Fault(fake_common.Fault):
	"""fake_common.Fault's rule, and "worker" (default any)."""

	KEYS = ("method", "path", "worker", "count", "status", "message",
		"retry_after", "reset", "stall", "processed")

	def __init__(self, rule, nworkers):
		self.nworkers = nworkers
		super().__init__(rule)
		if self.status is None and not self.reset and not self.stall:
			raise ValueError("a rule has one of status, reset, stall")
		if self.status is not None and self.reset:
			raise ValueError("status and reset exclude each other")
		if self.status is not None and not 400 <= self.status <= 599:
			raise ValueError("status: 400 to 599")

	def parse_scope(self, rule):
		super().parse_scope(rule)
		self.worker = rule.get("worker")
		if self.worker is not None and (
				not isinstance(self.worker, int) or
				isinstance(self.worker, bool) or
				not 0 <= self.worker < self.nworkers):
			raise ValueError("worker: 0 to %d" % (self.nworkers - 1))

	def matches(self, handler):
		if self.worker is not None and self.worker != handler.worker:
			return False
		return super().matches(handler)

# ---------------------------------------------------------------- HTTP

REASONS = {301: "Moved Permanently", 400: "Bad Request", 403: "Forbidden",
	   404: "Not Found", 405: "Method Not Allowed",
	   429: "Too Many Requests", 500: "Internal Server Error",
	   502: "Bad Gateway", 503: "Service Unavailable",
	   504: "Gateway Timeout"}


def error_page(status, text):
	return ("<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n"
		"  <title>Error %d (%s)!!1</title>\n  <p><b>%d.</b> <ins>"
		"That\u2019s an error.</ins>\n  <p>%s  <ins>That\u2019s all we "
		"know.</ins>\n" % (status, REASONS.get(status, "Error"), status,
				   text))


class Handler(fake_common.Handler):
	"""One connection to one worker's port (self.server.worker)."""
	server_version = "Metadata Server for VM"

	@property
	def worker(self):
		return self.server.worker

	def version_string(self):
		return self.server_version

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("metadata-fake[%d]: %s\n" % (
				self.worker, fmt % args))

	def send(self, status, ctype, body, headers=()):
		data = body.encode() if isinstance(body, str) else body
		if self.log_entry is not None:
			self.log_entry["status"] = status
		self.send_response(status)
		self.send_header("Content-Type", ctype)
		for k, v in headers:
			self.send_header(k, v)
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		if self.command != "HEAD":
			self.wfile.write(data)

	# ---- the metadata server

	def meta_send(self, status, ctype, body, etag=None, extra=()):
		h = [("Metadata-Flavor", "Google")]
		if etag:
			h.append(("ETag", etag))
		h += [("X-XSS-Protection", "0"),
		      ("X-Frame-Options", "SAMEORIGIN")]
		h += list(extra)
		self.send(status, ctype, body, h)

	def meta_error(self, status, text):
		self.meta_send(status, "text/html; charset=UTF-8",
			       error_page(status, text))

	def api_request(self):
		keep = ("metadata-flavor", "x-forwarded-for", "user-agent")
		entry = {"worker": self.worker, "method": self.command,
			 "path": self.raw_path, "query": dict(self.query),
			 "headers": {k.lower(): v for k, v in self.headers.items()
				     if k.lower() in keep},
			 "status": None, "fault": None, "time": time.time()}
		self.meta_send(*self.with_faults(entry, self.answer))

	def send_fault(self, fault):
		extra = []
		if fault.retry_after is not None:
			extra.append(("Retry-After", str(fault.retry_after)))
		text = fault.rule.get("message") or \
			"Injected fault: HTTP %d" % fault.status
		self.meta_send(fault.status, "text/html; charset=UTF-8",
			       error_page(fault.status, text), None, extra)

	def answer(self):
		"""(status, content type, body, etag, extra headers) of a
		metadata request."""
		def error(status, text):
			return (status, "text/html; charset=UTF-8",
				error_page(status, text), None, ())
		url = self.raw_path
		flavor = self.headers.get_all("Metadata-Flavor") or []
		if self.headers.get("X-Forwarded-For") is not None:
			return error(403, "Your client does not have permission "
				     "to get URL <code>%s</code> from this "
				     "server. Request had an X-Forwarded-For "
				     "header and was rejected." % url)
		if flavor != ["Google"]:
			return error(403, "Your client does not have permission "
				     "to get URL <code>%s</code> from this "
				     "server. Missing Metadata-Flavor:Google "
				     "header." % url)
		if self.command not in ("GET", "HEAD"):
			return error(405, "The request method <code>%s</code> is "
				     "inappropriate for the URL <code>%s</code>."
				     % (self.command, url))
		if url == ROOT[:-1]:
			return self.redirect(ROOT)
		if not url.startswith(ROOT):
			return error(404, "The requested URL <code>%s</code> was "
				     "not found on this server." % url)
		path = urllib.parse.unquote(url[len(ROOT):])
		try:
			q = self.parse_query()
		except BadRequest as err:
			return error(400, "Invalid request: %s" % err)
		st = self.store
		with st.lock:
			found = st.lookup(self.worker, path)
			if found is None:
				return error(404, "The requested URL <code>%s"
					     "</code> was not found on this "
					     "server." % url)
			if found[0] == "redirect":
				return self.redirect(url + "/")
			if q["wait"]:
				found = self.wait(path, found, q)
				if found is None:
					return error(404, "The requested URL "
						     "<code>%s</code> was not "
						     "found on this server." % url)
		return self.render(found, q)

	def redirect(self, location):
		if self.raw_query:
			location += "?" + self.raw_query
		return (301, "text/html; charset=UTF-8",
			error_page(301, "The document has moved <a href=\"%s\">"
				   "here</a>." % location), None,
			(("Location", location),))

	def parse_query(self):
		q = self.query

		def flag(name):
			v = q.get(name, "false").lower()
			if v not in ("true", "false"):
				raise BadRequest("%s must be true or false, not "
						 "%r" % (name, q[name]))
			return v == "true"
		out = {"wait": flag("wait_for_change"),
		       "recursive": flag("recursive"),
		       "alt": q.get("alt"),
		       "last_etag": q.get("last_etag"),
		       "timeout": WAIT_MAX}
		if out["alt"] not in (None, "json", "text"):
			raise BadRequest("alt must be json or text, not %r" %
					 out["alt"])
		if "timeout_sec" in q:
			t = q["timeout_sec"]
			if not re.fullmatch(r"[0-9]{1,9}", t) or int(t) < 1:
				raise BadRequest("timeout_sec must be a positive "
						 "integer, not %r" % t)
			out["timeout"] = min(float(t), WAIT_MAX)
		return out

	def wait(self, path, found, q):
		"""Holds until path's ETag differs from last_etag (or from the
		current one, without it) or the timeout passes (lock held)."""
		st = self.store
		base = q["last_etag"] if q["last_etag"] is not None \
			else found[2]
		deadline = time.monotonic() + q["timeout"]
		while found is not None and found[2] == base:
			left = deadline - time.monotonic()
			if left <= 0:
				break
			st.changed.wait(left)
			found = st.lookup(self.worker, path)
			if found is not None and found[0] == "redirect":
				found = None
		return found

	def render(self, found, q):
		kind, value, etag = found
		alt = q["alt"]
		if kind == "token":
			return 200, "application/json", value, etag, ()
		if kind == "value":
			if alt == "json":
				return (200, "application/json",
					json.dumps(value), etag, ())
			return 200, "text/plain", value, etag, ()
		if q["recursive"]:
			if alt == "text":
				lines = []

				def walk(prefix, node):
					for k in sorted(node):
						v = node[k]
						if k.endswith("/"):
							walk(prefix + k, v)
							continue
						if isinstance(v, dict):
							v = json.dumps(v)
						lines.append("%s%s %s\n" % (
							prefix, k, v))
				walk("", self.with_token(value))
				return (200, "text/plain", "".join(lines), etag,
					())
			return (200, "application/json", json.dumps(
				self.as_json(self.with_token(value), False),
				sort_keys=True), etag, ())
		names = sorted(value)
		if alt == "json":
			return (200, "application/json", json.dumps(names), etag,
				())
		return (200, "text/plain", "".join(n + "\n" for n in names),
			etag, ())

	def with_token(self, tree):
		"""tree with the token (None in it) filled in."""
		out = {}
		for k, v in tree.items():
			if isinstance(v, dict):
				out[k] = self.with_token(v)
			elif v is None:
				with self.store.lock:
					tok, expiry = self.store.token(self.worker)
				out[k] = {"access_token": tok, "expires_in": max(
					1, int(expiry - time.monotonic())),
					  "token_type": "Bearer"}
			else:
				out[k] = v
		return out

	def as_json(self, tree, verbatim):
		"""The recursive JSON form: keys without "/", in camelCase
		except attribute names."""
		out = {}
		for k, v in tree.items():
			name = k.rstrip("/")
			key = name if verbatim else camel(name)
			if isinstance(v, dict) and not (k.endswith("/")):
				out[key] = v  # the token's JSON
			elif isinstance(v, dict):
				out[key] = self.as_json(
					v, verbatim or name == "attributes")
			else:
				out[key] = v
		return out

	# ---- /_fake control endpoints

	def workers_of(self, w):
		n = self.store.nworkers
		if w == "all":
			return list(range(n))
		if isinstance(w, int) and not isinstance(w, bool) and \
				0 <= w < n:
			return [w]
		raise BadRequest("worker: 0 to %d, or \"all\"; not %r" %
				 (n - 1, w))

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.store
		if p == "/_fake/set" and m == "POST":
			doc = self.json_body()
			if not isinstance(doc, dict) or "path" not in doc or \
					"value" not in doc:
				raise BadRequest("{\"worker\": W or \"all\", "
						 "\"path\": P, \"value\": V or null}")
			path, value = doc["path"], doc["value"]
			if not isinstance(path, str) or not (
					value is None or isinstance(value, str)):
				raise BadRequest("path and value are strings "
						 "(value null deletes)")
			workers = self.workers_of(doc.get("worker", "all"))
			with st.lock:
				etags = [st.set_value(w, path, value)
					 for w in workers]
				st.changed.notify_all()
			return 200, {"etags": etags}
		if p == "/_fake/config" and m == "POST":
			doc = self.json_body()
			if not isinstance(doc, dict):
				raise BadRequest("config: a JSON object")
			with st.lock:
				return 200, st.configure(doc)
		if p == "/_fake/config" and m == "GET":
			with st.lock:
				return 200, dict(st.config)
		common = self.faults_and_log(
			lambda rule: Fault(rule, st.nworkers))
		if common is not None:
			return common
		if p == "/_fake/state" and m == "GET":
			with st.lock:
				return 200, {"config": dict(st.config),
					     "workers": [dict(v) for v in st.values]}
		if p == "/_fake/reset" and m == "POST":
			st.reset()
			return 200, {}
		return 404, {"error": {"code": 404, "message": "no control "
				       "endpoint %s %s" % (m, p)}}


def main():
	ap = argparse.ArgumentParser(description="Fake GCE metadata server "
				     "for tests: one port per TPU VM worker")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--workers", type=int, default=1)
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()
	if not 1 <= args.workers <= 4096:
		ap.error("--workers: 1 to 4096")

	store = Store(args.workers)
	servers = []
	for w in range(args.workers):
		srv = fake_common.Server(("127.0.0.1", 0), Handler)
		srv.store = store
		srv.worker = w
		srv.verbose = args.verbose
		servers.append(srv)

	banner = None
	if args.verbose:
		ports = [srv.server_address[1] for srv in servers]
		banner = "metadata-fake: %d worker%s on 127.0.0.1:%s\n" % (
			len(ports), "" if len(ports) == 1 else "s",
			",".join(map(str, ports)))
	fake_common.serve(servers, args.port_file, banner)


if __name__ == "__main__":
	main()
