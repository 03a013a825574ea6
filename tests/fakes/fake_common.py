"""The base of every fake in this folder (the fakes of Google's JSON APIs,
tpu_fake.py and vertex_fake.py, share fake_api.py too, which builds on
this): the server class, a connection dropped on purpose
(TCP reset), fault rule matching, the OAuth JWT check, the timestamp
format; and for the metadata server fake (metadata_fake.py), the TPU API
fake (tpu_fake.py) and the STS fake (sts_fake.py), one rule language for
injected faults, a request handler that logs each request and applies
the first rule it matches, and serving until SIGTERM once the ports are
published. The fakes promise the same fault semantics and refuse the
same assertions, so the code that keeps those promises is written once.

Python standard library only.
"""

import base64
import datetime
import http.server
import io
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

TOKEN_AUDIENCES = ("https://oauth2.googleapis.com/token",
		   "https://www.googleapis.com/oauth2/v4/token")


def rfc3339(t):
	d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
	return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (d.microsecond //
							    1000)


class Dropped(Exception):
	"""The connection was closed on purpose; nothing more to send."""


class OAuthError(Exception):
	"""A token request refused; the text says why."""


class Server(http.server.ThreadingHTTPServer):
	daemon_threads = True
	request_queue_size = 128

	def handle_error(self, request, client_address):
		# A client that went away mid-request is part of the tests.
		exc = sys.exc_info()[1]
		if isinstance(exc, (ConnectionError, Dropped, OSError)):
			return
		super().handle_error(request, client_address)


def rule_matches(rule, method, target):
	"""Whether a fault rule with "times" left, a method (or None) and a
	compiled path regex takes the request method target."""
	if rule.times == 0:
		return False
	if rule.method and rule.method.upper() != method:
		return False
	return rule.path.search(target) is not None


def reset_connection(handler):
	"""Closes handler's connection with a TCP reset, answering nothing."""
	try:
		handler.connection.setsockopt(socket.SOL_SOCKET,
					      socket.SO_LINGER,
					      struct.pack("ii", 1, 0))
	except OSError:
		pass
	handler.close_connection = True
	for f in (handler.wfile, handler.rfile, handler.connection):
		try:
			f.close()
		except OSError:
			pass
	# The server flushes and closes these after the handler.
	handler.wfile, handler.rfile = io.BytesIO(), io.BytesIO()
	raise Dropped()


class TokenChecks:
	"""An OAuth token endpoint's check of JWT bearer assertions, mixed
	into a fake's handler: GCS's and STS's fakes refuse the same
	assertions. The server's jwt_public_key (a PEM file, or None: no
	signature check) verifies the RS256 signature."""

	def base_url(self):
		host = self.headers.get("Host") or "127.0.0.1:%d" % (
			self.server.server_address[1])
		return "http://" + host

	def check_jwt(self, assertion):
		def fail(why):
			raise OAuthError(why)

		try:
			parts = assertion.split(".")
			if len(parts) != 3 or not all(parts):
				fail("Invalid JWT: not three base64url parts.")

			def b64(s):
				if re.search(r"[^A-Za-z0-9_-]", s):
					fail("Invalid JWT: not base64url.")
				return base64.urlsafe_b64decode(
					s + "=" * (-len(s) % 4))
			try:
				header = json.loads(b64(parts[0]))
				claims = json.loads(b64(parts[1]))
			except ValueError:
				fail("Invalid JWT: header or claims are not "
				     "JSON.")
			if not isinstance(header, dict) or \
					header.get("alg") != "RS256":
				fail("Invalid JWT: alg must be RS256.")
			if not isinstance(claims, dict):
				fail("Invalid JWT: claims are not an object.")
			for k in ("iss", "scope", "aud", "exp", "iat"):
				if k not in claims:
					fail("Invalid JWT: missing claim %s." % k)
			now = time.time()
			exp, iat = claims["exp"], claims["iat"]
			if not isinstance(exp, int) or \
					not isinstance(iat, int):
				fail("Invalid JWT: exp and iat must be "
				     "integers.")
			if iat > now + 300 or exp < now or exp - iat > 3600:
				fail("Invalid JWT: Token must be a short-lived "
				     "token (60 minutes) and in a reasonable "
				     "timeframe. Check your iat and exp values "
				     "in the JWT claim.")
			auds = TOKEN_AUDIENCES + (self.base_url() + "/token",)
			if claims["aud"] not in auds:
				fail("Invalid JWT: aud must be the token "
				     "endpoint, one of " + ", ".join(auds))
			self.check_signature(parts, b64(parts[2]))
		except (OAuthError, ValueError, TypeError) as err:
			raise OAuthError(str(err)) from None

	def check_signature(self, parts, sig):
		key = self.server.jwt_public_key
		if key is None:
			return
		with tempfile.TemporaryDirectory() as d:
			data, sigf = os.path.join(d, "data"), os.path.join(d,
									   "sig")
			with open(data, "wb") as f:
				f.write((parts[0] + "." + parts[1]).encode())
			with open(sigf, "wb") as f:
				f.write(sig)
			r = subprocess.run(["openssl", "dgst", "-sha256",
					    "-verify", key, "-signature", sigf,
					    data], capture_output=True)
		if r.returncode != 0:
			raise OAuthError("Invalid JWT Signature.")


class BadRequest(Exception):
	"""A control request the fake refuses (400, the text says why)."""


class Fault:
	"""{"method", "path" (regex on path?query), "count" (< 0: always),
	and "status" (+ "message", "retry_after"), "reset": true or "stall":
	seconds; "processed": true acts once the answer is ready}. A fake
	adds its own keys to KEYS, and its checks of the actions after
	__init__: which combinations it refuses differs between the fakes."""

	KEYS = ("method", "path", "count", "status", "message", "retry_after",
		"reset", "stall", "processed")

	def __init__(self, rule):
		if not isinstance(rule, dict):
			raise ValueError("a fault rule is a JSON object")
		for k in rule:
			if k not in self.KEYS:
				raise ValueError("unknown key %r; keys are %s" %
						 (k, ", ".join(self.KEYS)))
		self.rule = dict(rule)
		self.parse_scope(rule)
		# "count" is what gcs_fake.py calls "times" (rule_matches).
		self.times = int(rule.get("count", 1))
		self.status = int(rule["status"]) if "status" in rule else None
		self.reset = bool(rule.get("reset", False))
		self.stall = float(rule.get("stall", 0))
		self.processed = bool(rule.get("processed", False))
		self.retry_after = rule.get("retry_after")

	def parse_scope(self, rule):
		"""The requests the rule is for; a fake that serves more than
		one view narrows it further."""
		self.method = rule.get("method")
		self.path = re.compile(rule.get("path", ""))

	def matches(self, handler):
		return rule_matches(self, handler.command, handler.path)


class Handler(http.server.BaseHTTPRequestHandler):
	"""One connection: control requests under /_fake/ go to control(),
	the others to api_request(); every do_VERB is dispatch (set below
	the class). The fake's store (self.server.store) has a lock, a list
	of faults and a list of requests."""
	protocol_version = "HTTP/1.1"
	# Small answers on kept-alive connections: no Nagle delay; and a
	# client that vanished must not pin a thread for long.
	disable_nagle_algorithm, timeout = True, 300

	@property
	def store(self):
		return self.server.store

	def dispatch(self):
		split = urllib.parse.urlsplit(self.path)
		self.raw_path = split.path
		self.raw_query = split.query
		self.query = dict(urllib.parse.parse_qsl(split.query,
							 keep_blank_values=True))
		self.log_entry = None
		try:
			self.body = self.read_body()
			if self.raw_path.startswith("/_fake/"):
				self.control()
			else:
				self.api_request()
		except Dropped:
			pass
		except (BrokenPipeError, ConnectionResetError):
			self.close_connection = True

	def read_body(self):
		if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
			data = bytearray()
			while True:
				size = int(self.rfile.readline(65537).split(
					b";")[0].strip() or b"0", 16)
				if size == 0:
					while self.rfile.readline(65537) not in (
							b"\r\n", b"\n", b""):
						pass
					return bytes(data)
				data += self.rfile.read(size)
				self.rfile.readline(65537)
		n = int(self.headers.get("Content-Length") or 0)
		return self.rfile.read(n) if n else b""

	def reset_connection(self):
		if self.log_entry is not None:
			self.log_entry["status"] = "reset"
		reset_connection(self)

	def with_faults(self, entry, answer):
		"""Logs entry, takes the first fault rule that matches this
		request and answers answer(), acting on the rule before it or,
		for a "processed" rule, after it."""
		st = self.store
		fault = None
		with st.lock:
			st.requests.append(entry)
			for f in st.faults:
				if f.matches(self):
					if f.times > 0:
						f.times -= 1
					fault = f
					entry["fault"] = f.rule
					break
		self.log_entry = entry
		if fault and not fault.processed:
			self.act(fault)
		result = answer()
		if fault and fault.processed:
			self.act(fault)
		return result

	def act(self, fault):
		"""Applies a fault: stall, then drop the connection or answer
		the injected error (send_fault)."""
		if fault.stall:
			time.sleep(fault.stall)
		if fault.reset:
			self.reset_connection()
		if fault.status is not None:
			self.send_fault(fault)
			raise Dropped()


	def control(self):
		"""Answers a /_fake/ request with the fake's route_fake():
		(status, doc) as JSON; BadRequest answers 400, any other
		exception (a bug of the fake) 500 rather than a dropped
		line."""
		try:
			status, doc = self.route_fake()
		except BadRequest as err:
			status, doc = 400, {"error": {"code": 400,
						      "message": str(err)}}
		except Exception as err:
			traceback.print_exc()
			status, doc = 500, {"error": {"code": 500, "message":
				"%s: %r" % (os.path.basename(sys.argv[0]), err)}}
		data = (json.dumps(doc, indent=1) + "\n").encode()
		self.send_response(status)
		self.send_header("Content-Type", "application/json; charset=UTF-8")
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		self.wfile.write(data)

	def json_body(self):
		"""The control request's JSON ({} when empty)."""
		try:
			return json.loads(self.body or b"{}")
		except ValueError as err:
			raise BadRequest("not JSON: %s" % err)

	def faults_and_log(self, make_fault):
		"""The control endpoints that are the same in every fake:
		/_fake/faults (POST a rule or a list, each made by
		make_fault(rule); GET them with the count left; DELETE) and
		/_fake/requests (GET the log, DELETE it). Answers (status,
		doc), or None for any other path."""
		p, m = self.raw_path, self.command
		st = self.store
		if p == "/_fake/faults" and m == "POST":
			try:
				rules = json.loads(self.body or b"null")
				if isinstance(rules, dict):
					rules = [rules]
				if not isinstance(rules, list):
					raise ValueError("a rule or a list of rules")
				faults = [make_fault(r) for r in rules]
			except (ValueError, TypeError, re.error) as err:
				raise BadRequest("bad fault rules: %s" % err)
			with st.lock:
				st.faults.extend(faults)
				return 200, {"rules": len(st.faults)}
		if p == "/_fake/faults" and m == "GET":
			with st.lock:
				return 200, [dict(f.rule, count=f.times)
					     for f in st.faults]
		if p == "/_fake/faults" and m == "DELETE":
			with st.lock:
				st.faults = []
			return 200, {"rules": 0}
		if p == "/_fake/requests" and m == "GET":
			with st.lock:
				return 200, [dict(e) for e in st.requests]
		if p == "/_fake/requests" and m == "DELETE":
			with st.lock:
				st.requests = []
			return 200, {}
		return None


for _verb in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
	setattr(Handler, "do_" + _verb, Handler.dispatch)


def serve(servers, port_file, banner=None, on_stop=None):
	"""Serves every server until SIGTERM or SIGINT. Their ports, one a
	line in the order of servers, are written to port_file by rename,
	so a reader never sees half of it; banner, if any, then goes to
	stderr. on_stop, if any, runs first when the fake stops (a fake
	that runs processes kills them there)."""
	def stop(signum, frame):
		if on_stop:
			on_stop()
		# Handler threads may be held or stalled on purpose: do not
		# wait for them, nor for anything else.
		sys.stderr.flush()
		os._exit(0)
	for sig in (signal.SIGTERM, signal.SIGINT):
		signal.signal(sig, stop)
	for srv in servers:
		threading.Thread(target=srv.serve_forever, args=(0.2,),
				 daemon=True).start()
	with open(port_file + ".tmp", "w") as f:
		f.write("".join("%d\n" % srv.server_address[1]
				for srv in servers))
	os.replace(port_file + ".tmp", port_file)
	if banner:
		sys.stderr.write(banner)
	while True:
		signal.pause()
