#!/usr/bin/env python3
"""A fake Google Cloud Storage JSON API server for slicectl's tests.

It promises GCS's own rules for the calls slicectl makes, so that a client
that works against it works against GCS: resumable uploads (started under
/upload/storage/v1/ or /resumable/upload/storage/v1/; session URI in
Location, 308 with a Range header naming the persisted bytes, non-final
chunks of at least 256 KiB persisted in whole 256 KiB units, status queries
with "bytes */N"), simple and multipart uploads, generation-pinned ranged
downloads with x-goog-hash, listing with prefix, delimiter and pagination,
delete, compose, the ifGeneration/ifMetageneration preconditions (412), and
CRC32C and MD5 checked on upload when the client sends them. It also serves
an OAuth token endpoint that checks JWT assertions, and per-request fault
injection (status codes, resets, cut streams, stalls) driven over HTTP.

Python standard library only. Everything lives in memory; an object costs
about its size once (uploads are appended in place, downloads are served
from memoryviews). CRC32C uses the C implementation in libext2fs through
ctypes when the library is present (over 1 GB/s) and a table-driven Python
fallback otherwise (a few MB/s); see crc32c_backend in --help output.

A bandwidth model reproduces GCS's per-stream ceiling on loopback: every
connection moves request and response bodies at most --bandwidth-per-
connection bytes a second (env GCS_FAKE_BANDWIDTH_PER_CONNECTION), and all
connections together at most --bandwidth-total (env GCS_FAKE_BANDWIDTH_TOTAL);
values take a K, M or G suffix (powers of 1024), 0 is no limit. POST
/_fake/bandwidth {"per_connection": N, "total": N} changes them (a new
per-connection limit applies to connections opened afterwards). The request
log names each request's connection (its client port), so a test can see
how many connections a transfer used.

Usage: gcs_fake.py --port-file FILE [--port N] [--require-token T]
                   [--jwt-public-key PEM] [--token-expires-in S] [--verbose]
                   [--bandwidth-per-connection B] [--bandwidth-total B]
Serves http://127.0.0.1:PORT until SIGTERM; PORT is written to FILE (by
rename, so a reader never sees half of it) once the socket listens.
"""

import argparse
import base64
import binascii
import ctypes
import ctypes.util
import hashlib
import http.server
import json
import os
import re
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

import fake_common

CHUNK_UNIT = 256 * 1024
MAX_COMPOSE_SOURCES = 32
MAX_COMPONENTS = 1024
READ_PIECE = 1 << 20
# Bodies move in smaller pieces under a bandwidth limit, for even pacing.
THROTTLED_PIECE = 64 * 1024

# ---------------------------------------------------------------- CRC32C


def _crc32c_table():
	table = []
	for i in range(256):
		c = i
		for _ in range(8):
			c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
		table.append(c)
	return table


_TABLE0 = _crc32c_table()
# Slicing-by-8: eight tables let the Python loop advance 8 bytes a step.
_TABLES = [_TABLE0]
for _k in range(1, 8):
	_prev = _TABLES[-1]
	_TABLES.append([(_prev[i] >> 8) ^ _TABLE0[_prev[i] & 0xFF]
			for i in range(256)])
del _k, _prev


def _raw_update_python(crc, data):
	"""Raw (uninverted) CRC-32C register update over a buffer."""
	mv = memoryview(data).cast("B")
	n = len(mv)
	t0, t1, t2, t3, t4, t5, t6, t7 = _TABLES
	whole = n - n % 8
	if whole:
		for lo, hi in struct.iter_unpack("<II", mv[:whole]):
			lo ^= crc
			crc = (t7[lo & 0xFF] ^ t6[(lo >> 8) & 0xFF] ^
			       t5[(lo >> 16) & 0xFF] ^ t4[lo >> 24] ^
			       t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^
			       t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24])
	for b in mv[whole:]:
		crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
	return crc


def _load_ext2fs():
	for name in ("libext2fs.so.2", ctypes.util.find_library("ext2fs")):
		if not name:
			continue
		try:
			lib = ctypes.CDLL(name)
			fn = lib.ext2fs_crc32c_le
		except (OSError, AttributeError):
			continue
		fn.restype = ctypes.c_uint32
		fn.argtypes = [ctypes.c_uint32, ctypes.c_void_p,
			       ctypes.c_size_t]
		# Check it computes what we mean before trusting it.
		if fn(0xFFFFFFFF, b"123456789", 9) ^ 0xFFFFFFFF == 0xE3069283:
			return fn
	return None


_EXT2FS_CRC = _load_ext2fs()


def _raw_update(crc, data):
	if _EXT2FS_CRC is None:
		return _raw_update_python(crc, data)
	mv = memoryview(data).cast("B")
	if not len(mv):
		return crc
	if isinstance(data, bytes):
		return _EXT2FS_CRC(crc, data, len(data))
	if mv.readonly:
		mv = bytes(mv)
		return _EXT2FS_CRC(crc, mv, len(mv))
	# A writable buffer (bytearray or a view of one): pass its address
	# without copying; the ctypes view is dropped before returning so
	# the bytearray can grow again.
	view = (ctypes.c_char * len(mv)).from_buffer(mv)
	try:
		return _EXT2FS_CRC(crc, ctypes.addressof(view), len(mv))
	finally:
		del view


def crc32c(data, crc=0):
	"""CRC-32C (Castagnoli) as GCS reports it; crc continues a value."""
	return _raw_update(crc ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF


def _gf2_times(mat, vec):
	s = 0
	i = 0
	while vec:
		if vec & 1:
			s ^= mat[i]
		vec >>= 1
		i += 1
	return s


def _gf2_square(mat):
	return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32c_combine(crc1, crc2, len2):
	"""CRC-32C of A+B from crc(A), crc(B) and len(B) (zlib's method)."""
	if len2 <= 0:
		return crc1
	odd = [0x82F63B78] + [1 << n for n in range(31)]
	even = _gf2_square(odd)
	odd = _gf2_square(even)
	while True:
		even = _gf2_square(odd)
		if len2 & 1:
			crc1 = _gf2_times(even, crc1)
		len2 >>= 1
		if not len2:
			break
		odd = _gf2_square(even)
		if len2 & 1:
			crc1 = _gf2_times(odd, crc1)
		len2 >>= 1
		if not len2:
			break
	return crc1 ^ crc2


def crc32c_b64(value):
	return base64.b64encode(struct.pack(">I", value)).decode()


def crc32c_backend():
	return "libext2fs" if _EXT2FS_CRC is not None else "python"

# ---------------------------------------------------------------- state


class ApiError(Exception):
	"""An error answered as GCS does: JSON with code, message, errors."""

	def __init__(self, code, message, reason, extra=None, headers=None):
		super().__init__(message)
		self.code = code
		self.message = message
		self.reason = reason
		self.extra = extra or {}
		self.headers = headers or {}

	def body(self):
		err = {"message": self.message, "domain": "global",
		       "reason": self.reason}
		err.update(self.extra)
		return {"error": {"code": self.code, "message": self.message,
				  "errors": [err]}}


def not_found(bucket, name):
	return ApiError(404, "No such object: %s/%s" % (bucket, name),
			"notFound")


def precondition_failed(header="If-Match"):
	return ApiError(412, "At least one of the pre-conditions you specified "
			"did not hold.", "conditionNotMet",
			{"locationType": "header", "location": header})


def bad_request(message, reason="invalid"):
	return ApiError(400, message, reason)


class StoredObject:
	"""One generation of an object; data is never changed once stored."""

	def __init__(self, bucket, name, data, generation, content_type,
		     crc, md5, components, now):
		self.bucket = bucket
		self.name = name
		self.data = data
		self.generation = generation
		self.metageneration = 1
		self.content_type = content_type
		self.crc = crc
		self.md5 = md5          # None for composite objects, as GCS
		self.components = components
		self.created = now
		self.updated = now
		self.metadata = None

	def resource(self, base):
		quoted = urllib.parse.quote(self.name, safe="")
		r = {
			"kind": "storage#object",
			"id": "%s/%s/%d" % (self.bucket, self.name,
					    self.generation),
			"selfLink": "%s/storage/v1/b/%s/o/%s" % (
				base, self.bucket, quoted),
			"mediaLink": "%s/download/storage/v1/b/%s/o/%s"
				     "?generation=%d&alt=media" % (
					     base, self.bucket, quoted,
					     self.generation),
			"name": self.name,
			"bucket": self.bucket,
			"generation": str(self.generation),
			"metageneration": str(self.metageneration),
			"contentType": self.content_type,
			"storageClass": "STANDARD",
			"size": str(len(self.data)),
			"crc32c": crc32c_b64(self.crc),
			"etag": self.etag(),
			"timeCreated": fake_common.rfc3339(self.created),
			"updated": fake_common.rfc3339(self.updated),
			"timeStorageClassUpdated": fake_common.rfc3339(self.created),
		}
		if self.md5 is not None:
			r["md5Hash"] = base64.b64encode(self.md5).decode()
		if self.components:
			r["componentCount"] = self.components
		if self.metadata:
			r["metadata"] = dict(self.metadata)
		return r

	def etag(self):
		return base64.b64encode(("%d/%d" % (
			self.generation, self.metageneration)).encode()).decode()

	def hash_headers(self):
		h = [("x-goog-hash", "crc32c=" + crc32c_b64(self.crc))]
		if self.md5 is not None:
			h.append(("x-goog-hash", "md5=" +
				  base64.b64encode(self.md5).decode()))
		return h


class UploadSession:
	"""A resumable upload; data holds exactly the persisted bytes."""

	def __init__(self, upload_id, bucket, name, content_type, preconds,
		     expect_crc, expect_md5, metadata):
		self.id = upload_id
		self.bucket = bucket
		self.name = name
		self.content_type = content_type
		self.preconds = preconds
		self.expect_crc = expect_crc
		self.expect_md5 = expect_md5
		self.metadata = metadata
		self.data = bytearray()
		self.crc_len = 0         # how much of data is hashed
		self.crc = 0
		self.md5 = hashlib.md5()
		self.total = None
		self.result = None       # the object's resource once final
		self.error = None        # the ApiError that ended it
		self.cancelled = False
		self.lock = threading.Lock()

	def persist_to(self, end):
		"""Keeps data[:end]; hashes what became persisted."""
		old = self.crc_len
		if end < len(self.data):
			del self.data[end:]
		if end > old:
			view = memoryview(self.data)[old:end]
			self.crc = crc32c(view, self.crc)
			self.md5.update(view)
			view.release()
			self.crc_len = end


# ---------------------------------------------------------------- bandwidth


class Throttle:
	"""A rate limit shared by whoever calls take(): each call waits
	until its bytes would have gone through at rate bytes a second,
	with no burst saved up while idle."""

	def __init__(self, rate):
		self.rate = float(rate)
		self.lock = threading.Lock()
		self.next = time.monotonic()

	def take(self, n):
		with self.lock:
			now = time.monotonic()
			self.next = max(now, self.next) + n / self.rate
			wait = self.next - now
		if wait > 0:
			time.sleep(wait)


def parse_rate(value):
	"""Bytes a second from "123", "8K", "4M" or "1G"; 0 is no limit."""
	v = str(value).strip().upper()
	mult = 1
	if v and v[-1] in "KMG":
		mult = 1024 ** ("KMG".index(v[-1]) + 1)
		v = v[:-1]
	rate = int(float(v) * mult)
	if rate < 0:
		raise ValueError("a bandwidth is >= 0")
	return rate


class State:
	def __init__(self):
		self.lock = threading.Lock()
		self.reset()

	def reset(self):
		with self.lock:
			self.buckets = {}       # bucket -> {name: StoredObject}
			self.bucket_meta = {}   # bucket -> created time
			self.sessions = {}      # upload_id -> UploadSession
			self.faults = []
			self.requests = []
			self.last_generation = 0

	def bucket(self, name):
		"""The bucket's objects; buckets exist on first use."""
		if name not in self.buckets:
			self.buckets[name] = {}
			self.bucket_meta[name] = time.time()
		return self.buckets[name]

	def next_generation(self):
		# GCS generations are microsecond timestamps: large, increasing.
		g = max(self.last_generation + 1, time.time_ns() // 1000)
		self.last_generation = g
		return g


def parse_int(value, what):
	if value is None:
		return None
	try:
		return int(value)
	except ValueError:
		raise bad_request("Invalid value for %s: %s" % (what, value))


def check_preconditions(obj, q, header_for_generation="If-Match"):
	"""The ifGeneration*/ifMetageneration* rules of GCS; obj may be None."""
	gm = parse_int(q.get("ifGenerationMatch"), "ifGenerationMatch")
	gnm = parse_int(q.get("ifGenerationNotMatch"), "ifGenerationNotMatch")
	mm = parse_int(q.get("ifMetagenerationMatch"), "ifMetagenerationMatch")
	mnm = parse_int(q.get("ifMetagenerationNotMatch"),
			"ifMetagenerationNotMatch")
	current = obj.generation if obj is not None else 0
	if gm is not None and gm != current:
		raise precondition_failed(header_for_generation)
	if gnm is not None and gnm == current:
		# GCS answers 304 for reads and 412 for writes; slicectl only
		# uses it nowhere, so 412 keeps the rule simple and strict.
		raise precondition_failed(header_for_generation)
	if obj is None:
		if mm is not None or mnm is not None:
			raise precondition_failed("If-Metageneration-Match")
		return
	if mm is not None and mm != obj.metageneration:
		raise precondition_failed("If-Metageneration-Match")
	if mnm is not None and mnm == obj.metageneration:
		raise precondition_failed("If-Metageneration-Not-Match")


def parse_goog_hash(values):
	"""{'crc32c': int, 'md5': bytes} from x-goog-hash header values."""
	out = {}
	for value in values:
		for part in value.split(","):
			k, _, v = part.strip().partition("=")
			try:
				raw = base64.b64decode(v, validate=True)
			except binascii.Error:
				raise bad_request("Invalid x-goog-hash: " + value)
			if k == "crc32c" and len(raw) == 4:
				out["crc32c"] = struct.unpack(">I", raw)[0]
			elif k == "md5" and len(raw) == 16:
				out["md5"] = raw
	return out


def expected_hashes(meta, headers):
	exp = parse_goog_hash(headers)
	if meta.get("crc32c"):
		exp.update(parse_goog_hash(["crc32c=" + meta["crc32c"]]))
	if meta.get("md5Hash"):
		exp.update(parse_goog_hash(["md5=" + meta["md5Hash"]]))
	return exp.get("crc32c"), exp.get("md5")


def verify_hashes(crc, md5, expect_crc, expect_md5):
	if expect_crc is not None and expect_crc != crc:
		raise bad_request(
			"Provided CRC32C \"%s\" doesn't match calculated CRC32C "
			"\"%s\"." % (crc32c_b64(expect_crc), crc32c_b64(crc)))
	if expect_md5 is not None and expect_md5 != md5:
		raise bad_request(
			"Provided MD5 hash \"%s\" doesn't match calculated MD5 "
			"hash \"%s\"." % (base64.b64encode(expect_md5).decode(),
					  base64.b64encode(md5).decode()))

# ---------------------------------------------------------------- faults

FAULT_ACTIONS = ("status", "reset", "cut", "stall", "corrupt")


class Fault:
	def __init__(self, rule):
		if not isinstance(rule, dict):
			raise ValueError("a fault rule is a JSON object")
		self.rule = dict(rule)
		self.method = rule.get("method")
		self.path = re.compile(rule.get("path", ""))
		self.action = rule.get("action")
		if self.action not in FAULT_ACTIONS:
			raise ValueError("action must be one of " +
					 ", ".join(FAULT_ACTIONS))
		self.status = int(rule.get("status", 503))
		self.after_bytes = int(rule.get("after_bytes", 0))
		self.seconds = float(rule.get("seconds", 0))
		self.times = int(rule.get("times", 1))
		# Requests that match pass untouched this many times first:
		# a rule for the second stat of one name, say.
		self.skip = int(rule.get("skip", 0))
		self.processed = bool(rule.get("processed", False))

	def matches(self, method, target):
		return fake_common.rule_matches(self, method, target)


class _CutRequest(Exception):
	"""A request body was cut after the fault's byte count."""

# ---------------------------------------------------------------- HTTP


class Handler(fake_common.TokenChecks,
	      http.server.BaseHTTPRequestHandler):
	# Small answers on a kept-alive connection must not wait for a
	# delayed ACK (Nagle): 40 ms a request otherwise.
	disable_nagle_algorithm = True
	protocol_version = "HTTP/1.1"
	server_version = "gcs-fake/1"
	# A client that vanished without closing must not pin a thread.
	timeout = 300

	def setup(self):
		super().setup()
		rate = self.server.conn_rate
		self.conn_throttle = Throttle(rate) if rate else None

	def throttle(self, n):
		"""Waits until n more body bytes may move on this connection."""
		if self.conn_throttle is not None:
			self.conn_throttle.take(n)
		total = self.server.total_throttle
		if total is not None:
			total.take(n)

	def piece_size(self):
		if self.conn_throttle is not None or \
				self.server.total_throttle is not None:
			return THROTTLED_PIECE
		return READ_PIECE

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("gcs-fake: " + (fmt % args) + "\n")

	def do_GET(self):
		self.dispatch()

	def do_HEAD(self):
		self.dispatch()

	def do_POST(self):
		self.dispatch()

	def do_PUT(self):
		self.dispatch()

	def do_DELETE(self):
		self.dispatch()

	def do_PATCH(self):
		self.dispatch()

	# ---- plumbing

	@property
	def state(self):
		return self.server.state

	def dispatch(self):
		self.fault = None
		self.log_entry = {}
		self.body_read = 0
		self.body_done = False
		self.resp_status = None
		split = urllib.parse.urlsplit(self.path)
		self.raw_path = split.path
		self.query = {k: v[-1] for k, v in urllib.parse.parse_qs(
			split.query, keep_blank_values=True).items()}
		self.has_body = self._has_body()
		if self.raw_path.startswith("/_fake/"):
			self.run(self.route_fake)
			return
		self.fault = self.take_fault()
		entry = self.log_request_entry()
		try:
			self.apply_fault_before()
			self.run(self.route)
		except fake_common.Dropped:
			pass
		finally:
			entry["status"] = self.resp_status

	def _has_body(self):
		if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
			return True
		try:
			return int(self.headers.get("Content-Length", "0")) > 0
		except ValueError:
			return False

	def take_fault(self):
		target = self.path
		with self.state.lock:
			for f in self.state.faults:
				if f.matches(self.command, target):
					if f.skip > 0:
						f.skip -= 1
						continue
					if f.times > 0:
						f.times -= 1
					return f
		return None

	def log_request_entry(self):
		keep = ("content-type", "content-length", "content-range",
			"range", "authorization", "x-goog-hash",
			"x-upload-content-length", "x-upload-content-type",
			"transfer-encoding", "if-match", "if-none-match",
			"user-agent")
		entry = {
			"method": self.command,
			"path": self.raw_path,
			"query": dict(self.query),
			"headers": {k.lower(): v for k, v in self.headers.items()
				    if k.lower() in keep},
			"body_length": 0,
			"status": None,
			"fault": self.fault.action if self.fault else None,
			"connection": self.client_address[1],
		}
		self.log_entry = entry
		with self.state.lock:
			self.state.requests.append(entry)
		return entry

	def run(self, fn):
		try:
			fn()
		except ApiError as err:
			self.drain_body()
			self.send_json(err.code, err.body(), err.headers)
		except _CutRequest:
			self.reset_connection()
		except (BrokenPipeError, ConnectionResetError):
			self.close_connection = True
			raise fake_common.Dropped()

	def apply_fault_before(self):
		f = self.fault
		if f is None or f.processed:
			return
		if f.action == "stall" and not f.after_bytes:
			time.sleep(f.seconds)
		elif f.action == "reset":
			self.reset_connection()
		elif f.action == "status":
			self.drain_body()
			self.send_injected_status(f)
			raise fake_common.Dropped()

	def send_injected_status(self, f):
		"""Answers f's status instead of what the request got: before
		acting, or (processed) after it took effect, as GCS may."""
		self.fault = None
		err = ApiError(f.status, "Injected fault: HTTP %d" % f.status,
			       "backendError" if f.status >= 500 else
			       "rateLimitExceeded" if f.status == 429 else
			       "injected")
		self.send_json(f.status, err.body())

	reset_connection = fake_common.reset_connection

	# ---- request bodies

	def body_pieces(self):
		"""Yields the request body in pieces (Content-Length or
		chunked); a request-side "cut" fault stops it after N bytes."""
		cut = None
		f = self.fault
		if f is not None and f.action == "cut" and self.has_body:
			cut = f.after_bytes
		for piece in self._raw_pieces():
			if cut is not None and self.body_read + len(piece) >= cut:
				keep = cut - self.body_read
				self.body_read += keep
				self.log_entry["body_length"] = self.body_read
				if keep:
					yield piece[:keep]
				raise _CutRequest()
			self.body_read += len(piece)
			self.log_entry["body_length"] = self.body_read
			yield piece
		if cut is not None:
			raise _CutRequest()

	def _raw_pieces(self):
		if self.body_done:
			return
		self.body_done = True
		if "chunked" in self.headers.get("Transfer-Encoding",
						 "").lower():
			while True:
				line = self.rfile.readline(65537)
				if not line:
					raise ConnectionResetError()
				size = int(line.split(b";")[0].strip(), 16)
				if size == 0:
					while self.rfile.readline(65537) not in (
							b"\r\n", b"\n", b""):
						pass
					return
				while size:
					piece = self.rfile.read(min(
						size, self.piece_size()))
					if not piece:
						raise ConnectionResetError()
					self.throttle(len(piece))
					size -= len(piece)
					yield piece
				self.rfile.readline(65537)
		else:
			try:
				left = int(self.headers.get("Content-Length",
							    "0"))
			except ValueError:
				raise bad_request("Invalid Content-Length")
			while left > 0:
				piece = self.rfile.read(min(left,
							    self.piece_size()))
				if not piece:
					raise ConnectionResetError()
				self.throttle(len(piece))
				left -= len(piece)
				yield piece

	def read_body(self):
		buf = bytearray()
		for piece in self.body_pieces():
			buf += piece
		return buf

	def drain_body(self):
		if self.body_done:
			return
		try:
			for _ in self._raw_pieces():
				pass
		except (OSError, ValueError):
			self.close_connection = True

	def read_json(self):
		body = self.read_body()
		if not body:
			return {}
		try:
			doc = json.loads(body)
		except ValueError:
			raise bad_request("Parse Error", "parseError")
		if not isinstance(doc, dict):
			raise bad_request("Invalid JSON payload", "parseError")
		return doc

	# ---- responses

	def send_json(self, status, doc, headers=None):
		body = json.dumps(doc, indent=1).encode()
		h = [("Content-Type", "application/json; charset=UTF-8")]
		h += list((headers or {}).items())
		self.send(status, h, body)

	def send(self, status, headers, body=b""):
		"""Sends a whole response, applying this request's response-side
		fault (cut, corrupt, mid-body stall, processed reset, stall or
		status)."""
		self.drain_body()
		f = self.fault
		if f is not None and f.processed:
			if f.action == "reset":
				self.reset_connection()
			if f.action == "stall":
				time.sleep(f.seconds)
			if f.action == "status":
				return self.send_injected_status(f)
		self.resp_status = status
		# Logged before the answer goes out: a client that reads the
		# log as soon as it has the answer must find the status there.
		self.log_entry["status"] = status
		self.send_response(status)
		length = len(body)
		for k, v in headers:
			self.send_header(k, v)
		self.send_header("Content-Length", str(length))
		if self.close_connection:
			self.send_header("Connection", "close")
		self.end_headers()
		if self.command == "HEAD" or not length:
			if f is not None and f.action == "cut" and \
					not self.has_body:
				self.close_after_cut()
			return
		mv = memoryview(body)
		stop = length
		if f is not None and f.action == "cut" and not self.has_body:
			stop = min(length, f.after_bytes)
		pause_at = None
		if f is not None and f.action == "stall" and f.after_bytes and \
				not f.processed:
			pause_at = min(f.after_bytes, length)
		flip_at = None
		if f is not None and f.action == "corrupt" and \
				f.after_bytes < length:
			flip_at = f.after_bytes
		pos = 0
		step = self.piece_size()
		while pos < stop:
			end = min(stop, pos + step)
			if pause_at is not None and pos < pause_at < end:
				end = pause_at
			if flip_at is not None and pos <= flip_at < end:
				piece = bytearray(mv[pos:end])
				piece[flip_at - pos] ^= 0x01
				self.wfile.write(piece)
			else:
				self.wfile.write(mv[pos:end])
			self.throttle(end - pos)
			pos = end
			if pause_at is not None and pos == pause_at:
				time.sleep(f.seconds)
				pause_at = None
		mv.release()
		if stop < length:
			self.close_after_cut()

	def close_after_cut(self):
		"""Ends the connection cleanly (FIN) short of Content-Length."""
		self.close_connection = True
		try:
			self.connection.shutdown(socket.SHUT_RDWR)
		except OSError:
			pass
		raise fake_common.Dropped()

	def require_auth(self):
		want = self.server.require_token
		if want is None:
			return
		got = self.headers.get("Authorization")
		if got == "Bearer " + want:
			return
		if got is None:
			msg = ("Anonymous caller does not have storage.objects "
			       "access to the Google Cloud Storage bucket.")
			reason = "required"
		else:
			msg = "Invalid Credentials"
			reason = "authError"
		raise ApiError(401, msg, reason,
			       {"locationType": "header",
				"location": "Authorization"},
			       {"WWW-Authenticate": 'Bearer realm='
				'"https://accounts.google.com/"'})

	# ---- routing

	def route(self):
		p = self.raw_path
		m = self.command
		# GCS also takes uploads under /resumable/upload/..., where
		# gcloud's JSON API client (apitools) starts its resumable
		# uploads; they are the same uploads.
		if p.startswith("/resumable/upload/storage/v1/"):
			p = p[len("/resumable"):]
		if p == "/token" and m == "POST":
			return self.token()
		if p.startswith("/storage/v1/") or p.startswith(
				"/upload/storage/v1/") or p.startswith(
				"/download/storage/v1/"):
			self.require_auth()
		mo = re.fullmatch(r"/upload/storage/v1/b/([^/]+)/o", p)
		if mo:
			bucket = urllib.parse.unquote(mo.group(1))
			if m == "POST":
				return self.upload_start(bucket)
			if m == "PUT" and "upload_id" in self.query:
				return self.upload_put(bucket)
			if m == "DELETE" and "upload_id" in self.query:
				return self.upload_cancel()
		if p == "/storage/v1/b" and m == "POST":
			return self.bucket_insert()
		mo = re.fullmatch(r"/storage/v1/b/([^/]+)", p)
		if mo and m == "GET":
			return self.bucket_get(urllib.parse.unquote(mo.group(1)))
		mo = re.fullmatch(r"/storage/v1/b/([^/]+)/o", p)
		if mo and m == "GET":
			return self.list_objects(urllib.parse.unquote(
				mo.group(1)))
		mo = re.fullmatch(r"/storage/v1/b/([^/]+)/o/(.+)/compose", p)
		if mo and m == "POST":
			return self.compose(urllib.parse.unquote(mo.group(1)),
					    urllib.parse.unquote(mo.group(2)))
		mo = re.fullmatch(r"/(storage|download/storage)/v1/b/([^/]+)/o/"
				  r"(.+)", p)
		if mo:
			bucket = urllib.parse.unquote(mo.group(2))
			name = urllib.parse.unquote(mo.group(3))
			media = self.query.get("alt") == "media" or \
				mo.group(1) != "storage"
			if m in ("GET", "HEAD") and media:
				return self.download(bucket, name)
			if m in ("GET", "HEAD"):
				return self.get_metadata(bucket, name)
			if m == "DELETE":
				return self.delete(bucket, name)
			if m == "PATCH":
				return self.patch(bucket, name)
		raise ApiError(404, "Not Found: %s %s" % (m, p), "notFound")

	# ---- buckets

	def bucket_resource(self, name):
		created = self.state.bucket_meta[name]
		return {"kind": "storage#bucket", "id": name, "name": name,
			"location": "US", "storageClass": "STANDARD",
			"metageneration": "1", "timeCreated": fake_common.rfc3339(created),
			"updated": fake_common.rfc3339(created)}

	def bucket_insert(self):
		doc = self.read_json()
		name = doc.get("name")
		if not isinstance(name, str) or not name:
			raise bad_request("Required", "required")
		with self.state.lock:
			if name in self.state.buckets:
				raise ApiError(409, "Your previous request to "
					       "create the named bucket "
					       "succeeded and you already own "
					       "it.", "conflict")
			self.state.bucket(name)
			res = self.bucket_resource(name)
		self.send_json(200, res)

	def bucket_get(self, name):
		with self.state.lock:
			self.state.bucket(name)
			res = self.bucket_resource(name)
		self.send_json(200, res)

	# ---- objects

	def lookup(self, bucket, name, generation=None):
		"""The current object, or the named generation (only the
		current one is kept: a bucket without versioning)."""
		obj = self.state.bucket(bucket).get(name)
		if obj is None:
			raise not_found(bucket, name)
		if generation is not None and generation != obj.generation:
			raise not_found(bucket, name)
		return obj

	def get_metadata(self, bucket, name):
		gen = parse_int(self.query.get("generation"), "generation")
		with self.state.lock:
			obj = self.lookup(bucket, name, gen)
			check_preconditions(obj, self.query)
			res = obj.resource(self.base_url())
		self.send_json(200, res)

	def download(self, bucket, name):
		gen = parse_int(self.query.get("generation"), "generation")
		with self.state.lock:
			obj = self.lookup(bucket, name, gen)
			check_preconditions(obj, self.query)
		data = obj.data
		size = len(data)
		headers = [("Content-Type", obj.content_type),
			   ("Accept-Ranges", "bytes"),
			   ("Cache-Control", "no-cache, no-store, max-age=0, "
			    "must-revalidate"),
			   ("ETag", '"%s"' % obj.etag()),
			   ("Last-Modified", time.strftime(
				   "%a, %d %b %Y %H:%M:%S GMT",
				   time.gmtime(obj.updated))),
			   ("x-goog-generation", str(obj.generation)),
			   ("x-goog-metageneration", str(obj.metageneration)),
			   ("x-goog-stored-content-encoding", "identity"),
			   ("x-goog-stored-content-length", str(size)),
			   ("x-goog-storage-class", "STANDARD")]
		headers += obj.hash_headers()
		if obj.components:
			headers.append(("x-goog-component-count",
					str(obj.components)))
		rng = self.headers.get("Range")
		if rng is None:
			return self.send(200, headers, memoryview(data))
		first, last = self.parse_range(rng, size)
		if first is None:
			return self.send(200, headers, memoryview(data))
		if first >= size or first > last:
			headers = [("Content-Range", "bytes */%d" % size)]
			err = ApiError(416, "Request range not satisfiable",
				       "requestedRangeNotSatisfiable")
			return self.send(416, headers + [
				("Content-Type", "application/json; "
				 "charset=UTF-8")],
				json.dumps(err.body()).encode())
		last = min(last, size - 1)
		headers.append(("Content-Range", "bytes %d-%d/%d" % (
			first, last, size)))
		self.send(206, headers, memoryview(data)[first:last + 1])

	@staticmethod
	def parse_range(value, size):
		"""(first, last) of a single "bytes=" range; (None, None) when
		the header is not one GCS honours (it then sends it all)."""
		mo = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value)
		if not mo or (not mo.group(1) and not mo.group(2)):
			return None, None
		if not mo.group(1):
			n = int(mo.group(2))
			if n == 0:
				return size, size
			return max(0, size - n), size - 1
		first = int(mo.group(1))
		last = int(mo.group(2)) if mo.group(2) else size - 1
		return first, last

	def delete(self, bucket, name):
		gen = parse_int(self.query.get("generation"), "generation")
		self.read_body()
		with self.state.lock:
			obj = self.lookup(bucket, name, gen)
			check_preconditions(obj, self.query)
			del self.state.bucket(bucket)[name]
		self.send(204, [])

	def patch(self, bucket, name):
		doc = self.read_json()
		with self.state.lock:
			obj = self.lookup(bucket, name)
			check_preconditions(obj, self.query)
			if "contentType" in doc:
				obj.content_type = doc["contentType"]
			if "metadata" in doc:
				obj.metadata = dict(obj.metadata or {})
				for k, v in (doc["metadata"] or {}).items():
					if v is None:
						obj.metadata.pop(k, None)
					else:
						obj.metadata[k] = str(v)
			obj.metageneration += 1
			obj.updated = time.time()
			res = obj.resource(self.base_url())
		self.send_json(200, res)

	def store(self, bucket, name, data, content_type, crc, md5,
		  preconds, components=0, metadata=None):
		"""Makes data the new generation of name if the preconditions
		hold at this instant (they are checked under the lock)."""
		with self.state.lock:
			objects = self.state.bucket(bucket)
			check_preconditions(objects.get(name), preconds)
			obj = StoredObject(bucket, name, data,
					   self.state.next_generation(),
					   content_type, crc, md5, components,
					   time.time())
			if metadata:
				obj.metadata = {k: str(v) for k, v in
						metadata.items()}
			objects[name] = obj
			return obj

	# ---- listing

	def list_objects(self, bucket):
		q = self.query
		prefix = q.get("prefix", "")
		delim = q.get("delimiter", "")
		start = q.get("startOffset", "")
		end = q.get("endOffset", "")
		trailing = q.get("includeTrailingDelimiter") == "true"
		max_results = parse_int(q.get("maxResults"), "maxResults")
		if max_results is None or max_results <= 0 or \
				max_results > 1000:
			max_results = 1000
		after = None
		if q.get("pageToken"):
			try:
				after = base64.urlsafe_b64decode(
					q["pageToken"]).decode()
			except (binascii.Error, UnicodeDecodeError):
				raise bad_request("Invalid page token")
		with self.state.lock:
			objects = self.state.bucket(bucket)
			names = sorted(n for n in objects
				       if n.startswith(prefix) and n >= start
				       and (not end or n < end))
			snapshot = {n: objects[n] for n in names}
		items, prefixes = [], []
		count = 0
		last_key = None
		next_token = None
		for n in names:
			key = n
			is_prefix = False
			if delim:
				i = n.find(delim, len(prefix))
				if i >= 0:
					key = n[:i + len(delim)]
					is_prefix = True
			if after is not None and key <= after:
				continue
			if key == last_key:
				continue
			if count == max_results:
				next_token = base64.urlsafe_b64encode(
					last_key.encode()).decode()
				break
			last_key = key
			count += 1
			if is_prefix:
				prefixes.append(key)
				if trailing and key in snapshot:
					items.append(snapshot[key])
			else:
				items.append(snapshot[n])
		base = self.base_url()
		res = {"kind": "storage#objects"}
		if next_token:
			res["nextPageToken"] = next_token
		if prefixes:
			res["prefixes"] = prefixes
		if items:
			res["items"] = [o.resource(base) for o in items]
		self.send_json(200, res)

	# ---- compose

	def compose(self, bucket, dest):
		doc = self.read_json()
		sources = doc.get("sourceObjects")
		if not isinstance(sources, list) or not sources:
			raise bad_request("Required field sourceObjects is "
					  "missing.", "required")
		if len(sources) > MAX_COMPOSE_SOURCES:
			raise bad_request(
				"The number of source components provided (%d) "
				"exceeds the maximum (%d)" % (
					len(sources), MAX_COMPOSE_SOURCES))
		parts = []
		with self.state.lock:
			objects = self.state.bucket(bucket)
			for s in sources:
				name = s.get("name") if isinstance(s, dict) \
					else None
				if not isinstance(name, str):
					raise bad_request("Required field "
							  "sourceObjects.name "
							  "is missing.",
							  "required")
				obj = objects.get(name)
				gen = parse_int(s.get("generation"),
						"generation")
				if obj is None or (gen is not None and
						   gen != obj.generation):
					raise not_found(bucket, name)
				pre = s.get("objectPreconditions") or {}
				want = parse_int(pre.get("ifGenerationMatch"),
						 "ifGenerationMatch")
				if want is not None and want != obj.generation:
					raise precondition_failed()
				parts.append(obj)
		components = sum(p.components or 1 for p in parts)
		if components > MAX_COMPONENTS:
			raise bad_request("The total component count of the "
					  "composite object would exceed %d." %
					  MAX_COMPONENTS)
		data = bytearray()
		crc = 0
		for p in parts:
			data += p.data
			crc = crc32c_combine(crc, p.crc, len(p.data))
		dest_meta = doc.get("destination") or {}
		ctype = dest_meta.get("contentType") or parts[0].content_type
		obj = self.store(bucket, dest, data, ctype, crc, None,
				 self.query, components,
				 dest_meta.get("metadata"))
		self.send_json(200, obj.resource(self.base_url()))

	# ---- uploads

	def content_type(self, meta, fallback):
		return meta.get("contentType") or fallback or \
			"application/octet-stream"

	def upload_start(self, bucket):
		kind = self.query.get("uploadType")
		if kind == "media":
			return self.upload_media(bucket)
		if kind == "multipart":
			return self.upload_multipart(bucket)
		if kind == "resumable":
			return self.upload_resumable(bucket)
		raise bad_request("Upload requests must include an uploadType "
				  "URL parameter and a URL path beginning with "
				  "/upload/", "wrongUrlForUpload")

	def object_name(self, meta):
		name = self.query.get("name") or meta.get("name")
		if not name:
			raise bad_request("Required", "required")
		return name

	def upload_media(self, bucket):
		name = self.object_name({})
		data = self.read_body()
		crc, md5 = crc32c(data), hashlib.md5(data).digest()
		verify_hashes(crc, md5, *expected_hashes(
			{}, self.headers.get_all("x-goog-hash") or []))
		obj = self.store(bucket, name, data, self.content_type(
			{}, self.headers.get("Content-Type")), crc, md5,
			self.query)
		self.send_json(200, obj.resource(self.base_url()))

	def upload_multipart(self, bucket):
		ctype = self.headers.get("Content-Type", "")
		# The boundary may be quoted with ' as well as ": gcloud's
		# apitools client quotes it so, and GCS takes it.
		mo = re.search(r"""boundary=(?:"([^"]+)"|'([^']+)'|([^;\s]+))""",
			       ctype)
		if not ctype.lower().startswith("multipart/related") or not mo:
			raise bad_request("Invalid multipart request: expected "
					  "multipart/related with a boundary")
		body = self.read_body()
		boundary = next(g for g in mo.groups() if g)
		parts = self.split_multipart(body, boundary.encode())
		if len(parts) != 2:
			raise bad_request("Invalid multipart request with %d "
					  "parts" % len(parts))
		try:
			meta = json.loads(bytes(parts[0][1]) or b"{}")
		except ValueError:
			raise bad_request("Parse Error", "parseError")
		media_headers, media = parts[1]
		data = bytearray(media)
		name = self.object_name(meta)
		crc, md5 = crc32c(data), hashlib.md5(data).digest()
		verify_hashes(crc, md5, *expected_hashes(
			meta, self.headers.get_all("x-goog-hash") or []))
		obj = self.store(bucket, name, data, self.content_type(
			meta, media_headers.get("content-type")), crc, md5,
			self.query, metadata=meta.get("metadata"))
		self.send_json(200, obj.resource(self.base_url()))

	@staticmethod
	def split_multipart(body, boundary):
		"""[(headers, content memoryview)] of a multipart body. Lines
		may end in CRLF or LF alone: gcloud's apitools client writes
		its body with Python's email generator, which uses LF, and GCS
		takes it."""
		mv = memoryview(body)
		delim = b"--" + boundary
		parts = []
		pos = body.find(delim)
		if pos < 0:
			raise bad_request("Invalid multipart request: no "
					  "boundary")
		head_end_rx = re.compile(rb"\r?\n\r?\n")
		next_rx = re.compile(rb"\r?\n" + re.escape(delim))
		while True:
			pos += len(delim)
			if body[pos:pos + 2] == b"--":
				break
			if body[pos:pos + 2] == b"\r\n":
				pos += 2
			elif body[pos:pos + 1] == b"\n":
				pos += 1
			mo = head_end_rx.search(body, pos)
			if not mo:
				raise bad_request("Invalid multipart request")
			headers = {}
			for line in re.split(rb"\r?\n", bytes(body[pos:mo.start()])):
				k, _, v = line.decode("latin-1").partition(":")
				if k:
					headers[k.strip().lower()] = v.strip()
			start = mo.end()
			mo = next_rx.search(body, start)
			if not mo:
				raise bad_request("Invalid multipart request: "
						  "no closing boundary")
			parts.append((headers, mv[start:mo.start()]))
			pos = mo.end() - len(delim)
		return parts

	def upload_resumable(self, bucket):
		meta = self.read_json()
		name = self.object_name(meta)
		with self.state.lock:
			# GCS checks the preconditions when the session opens
			# as well as when the object is finalized.
			check_preconditions(self.state.bucket(bucket).get(name),
					    self.query)
		preconds = {k: v for k, v in self.query.items()
			    if k.startswith("if")}
		exp_crc, exp_md5 = expected_hashes(meta, [])
		s = UploadSession(secrets.token_urlsafe(24), bucket, name,
				  self.content_type(
					  meta, self.headers.get(
						  "X-Upload-Content-Type")),
				  preconds, exp_crc, exp_md5,
				  meta.get("metadata"))
		declared = self.headers.get("X-Upload-Content-Length")
		if declared is not None:
			s.total = parse_int(declared, "X-Upload-Content-Length")
		with self.state.lock:
			self.state.sessions[s.id] = s
		loc = "%s/upload/storage/v1/b/%s/o?%s" % (
			self.base_url(), urllib.parse.quote(bucket, safe=""),
			urllib.parse.urlencode({"uploadType": "resumable",
						"name": name,
						"upload_id": s.id}))
		self.send(200, [("Location", loc),
				("X-GUploader-UploadID", s.id),
				("Content-Type", "text/plain; charset=utf-8")])

	def session(self):
		with self.state.lock:
			s = self.state.sessions.get(self.query["upload_id"])
		if s is None:
			raise ApiError(404, "No such upload session.",
				       "notFound")
		return s

	def upload_cancel(self):
		s = self.session()
		with s.lock:
			s.cancelled = True
		with self.state.lock:
			self.state.sessions.pop(s.id, None)
		self.send(499, [("Content-Type", "text/plain")])

	@staticmethod
	def parse_content_range(value):
		"""(first, last, total) with None for '*'; first is None for
		a status query ("bytes */T")."""
		mo = re.fullmatch(r"\s*bytes\s+(?:(\d+)-(\d+|\*)|\*)/(\d+|\*)"
				  r"\s*", value)
		if not mo:
			raise bad_request("Failed to parse Content-Range header.")
		first = int(mo.group(1)) if mo.group(1) else None
		last = mo.group(2)
		last = None if last in (None, "*") else int(last)
		total = None if mo.group(3) == "*" else int(mo.group(3))
		if first is not None and last is not None and last < first:
			raise bad_request("Failed to parse Content-Range header.")
		return first, last, total

	def upload_put(self, bucket):
		s = self.session()
		with s.lock:
			if s.cancelled:
				raise ApiError(404, "No such upload session.",
					       "notFound")
			if s.result is not None or s.error is not None:
				self.drain_body()
				return self.upload_done(s)
			cr = self.headers.get("Content-Range")
			if cr is None:
				first, last, total = 0, None, None
				whole = True
			else:
				first, last, total = self.parse_content_range(cr)
				whole = False
			if total is not None and s.total is not None and \
					total != s.total:
				raise bad_request(
					"The provided Content-Range total %d "
					"differs from the declared upload length "
					"%d." % (total, s.total))
			if first is None:
				self.drain_body()
				if total is not None and len(s.data) == total:
					return self.finalize(s)
				return self.send_incomplete(s)
			return self.upload_chunk(s, first, last, total, whole)

	def upload_chunk(self, s, first, last, total, whole):
		have = len(s.data)
		if first > have:
			raise bad_request(
				"Invalid request. According to the Content-Range "
				"header, the upload offset is %d byte(s), which "
				"exceeds already uploaded size of %d byte(s)." % (
					first, have))
		received = 0
		try:
			for piece in self.body_pieces():
				# Bytes before `have` are a resend of what is
				# already persisted: GCS ignores them.
				pos = first + received
				received += len(piece)
				if pos + len(piece) <= have:
					continue
				skip = max(0, have - pos)
				s.data += memoryview(piece)[skip:]
		except (_CutRequest, OSError):
			self.persist_partial(s, have)
			raise
		end = first + received
		if last is not None and received != last - first + 1:
			s.persist_to(have)
			raise bad_request(
				"Invalid request. The Content-Range header says "
				"%d byte(s) but the body has %d." % (
					last - first + 1, received))
		if whole:
			total = end
		if last is None and total is None:
			# "bytes N-*/*": the stream's end is the object's end.
			total = end
		if total is not None and end > total:
			s.persist_to(have)
			raise bad_request("Invalid request. The upload extends "
					  "past the declared total size.")
		if total is not None and end == total:
			s.total = total
			s.persist_to(end)
			return self.finalize(s)
		if received < CHUNK_UNIT:
			s.persist_to(have)
			raise bad_request(
				"Invalid request.  The number of bytes uploaded "
				"is required to be equal or greater than 262144, "
				"except for the final request (it's recommended "
				"to be the exact multiple of 262144).  The "
				"received request contained %d bytes, which does "
				"not meet this requirement." % received)
		s.persist_to(max(have, end - end % CHUNK_UNIT))
		self.send_incomplete(s)

	def persist_partial(self, s, have):
		"""After a broken chunk GCS keeps whole 256 KiB units."""
		got = len(s.data)
		s.persist_to(max(have, got - got % CHUNK_UNIT))

	def send_incomplete(self, s):
		headers = [("X-GUploader-UploadID", s.id),
			   ("Content-Type", "text/plain; charset=utf-8")]
		if s.data:
			headers.append(("Range", "bytes=0-%d" % (
				len(s.data) - 1)))
		self.send(308, headers)

	def finalize(self, s):
		md5 = s.md5.digest()
		try:
			verify_hashes(s.crc, md5, *expected_hashes(
				{}, self.headers.get_all("x-goog-hash") or []))
			verify_hashes(s.crc, md5, s.expect_crc, s.expect_md5)
			s.result = self.store(s.bucket, s.name, s.data,
					      s.content_type, s.crc, md5,
					      s.preconds,
					      metadata=s.metadata)
			s.result = s.result.resource(self.base_url())
		except ApiError as err:
			s.error = err
		# The stored object owns the bytes now; a session outliving
		# an overwrite must not keep them alive.
		s.data = bytearray()
		return self.upload_done(s)

	def upload_done(self, s):
		if s.error is not None:
			raise s.error
		self.send_json(200, s.result)

	# ---- OAuth token endpoint

	def token(self):
		body = self.read_body().decode("utf-8", "replace")
		form = {k: v[-1] for k, v in urllib.parse.parse_qs(
			body, keep_blank_values=True).items()}
		grant = form.get("grant_type")
		if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
			try:
				self.check_jwt(form.get("assertion", ""))
			except fake_common.OAuthError as err:
				return self.oauth_error(400, "invalid_grant",
							str(err))
		elif grant == "refresh_token":
			for k in ("client_id", "client_secret",
				  "refresh_token"):
				if not form.get(k):
					return self.oauth_error(
						400, "invalid_request",
						"Missing required parameter: "
						+ k)
			if form["refresh_token"] == "revoked":
				return self.oauth_error(
					400, "invalid_grant",
					"Token has been expired or revoked.")
		else:
			return self.oauth_error(400, "unsupported_grant_type",
						"Invalid grant_type: %s" % grant)
		tok = self.server.require_token or \
			"ya29.fake-" + secrets.token_urlsafe(24)
		self.send_json(200, {"access_token": tok,
				     "expires_in": self.server.expires_in,
				     "token_type": "Bearer"})

	def oauth_error(self, status, error, description):
		self.send_json(status, {"error": error,
					"error_description": description})

	# ---- /_fake control endpoints

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.state
		if p == "/_fake/faults" and m == "POST":
			doc = self.read_body()
			try:
				rules = json.loads(doc)
				if isinstance(rules, dict):
					rules = [rules]
				faults = [Fault(r) for r in rules]
			except (ValueError, TypeError, re.error) as err:
				raise bad_request("Bad fault rules: %s" % err)
			with st.lock:
				st.faults.extend(faults)
				n = len(st.faults)
			return self.send_json(200, {"rules": n})
		if p == "/_fake/faults" and m == "DELETE":
			self.read_body()
			with st.lock:
				st.faults = []
			return self.send_json(200, {"rules": 0})
		if p == "/_fake/faults" and m == "GET":
			with st.lock:
				rules = [dict(f.rule, times=f.times, skip=f.skip)
					 for f in st.faults]
			return self.send_json(200, rules)
		if p == "/_fake/requests" and m == "GET":
			with st.lock:
				log = [dict(e) for e in st.requests]
			return self.send_json(200, log)
		if p == "/_fake/requests" and m == "DELETE":
			self.read_body()
			with st.lock:
				st.requests = []
			return self.send_json(200, {})
		if p == "/_fake/bandwidth" and m == "POST":
			doc = self.read_json()
			try:
				if "per_connection" in doc:
					self.server.conn_rate = parse_rate(
						doc["per_connection"])
				if "total" in doc:
					rate = parse_rate(doc["total"])
					self.server.total_throttle = \
						Throttle(rate) if rate else None
			except (ValueError, TypeError) as err:
				raise bad_request("Bad bandwidth: %s" % err)
			return self.send_json(200, {
				"per_connection": self.server.conn_rate,
				"total": int(self.server.total_throttle.rate)
				if self.server.total_throttle else 0})
		if p == "/_fake/reset" and m == "POST":
			self.read_body()
			st.reset()
			return self.send_json(200, {})
		raise ApiError(404, "Not Found: %s %s" % (m, p), "notFound")


def main():
	ap = argparse.ArgumentParser(
		description="Fake GCS JSON API for tests (crc32c backend: %s)"
		% crc32c_backend())
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--port", type=int, default=0)
	ap.add_argument("--require-token")
	ap.add_argument("--jwt-public-key")
	ap.add_argument("--token-expires-in", type=int, default=3600)
	ap.add_argument("--verbose", action="store_true")
	ap.add_argument("--bandwidth-per-connection", type=parse_rate,
			default=os.environ.get(
				"GCS_FAKE_BANDWIDTH_PER_CONNECTION", "0"),
			help="bytes a second per connection (K, M, G suffixes; "
			"0: no limit)")
	ap.add_argument("--bandwidth-total", type=parse_rate,
			default=os.environ.get("GCS_FAKE_BANDWIDTH_TOTAL", "0"),
			help="bytes a second over all connections")
	args = ap.parse_args()

	srv = fake_common.Server(("127.0.0.1", args.port), Handler)
	srv.state = State()
	srv.verbose = args.verbose
	srv.require_token = args.require_token
	srv.jwt_public_key = args.jwt_public_key
	srv.expires_in = args.token_expires_in
	srv.conn_rate = args.bandwidth_per_connection
	srv.total_throttle = Throttle(args.bandwidth_total) \
		if args.bandwidth_total else None

	def stop(signum, frame):
		raise SystemExit(0)
	signal.signal(signal.SIGTERM, stop)
	signal.signal(signal.SIGINT, stop)

	tmp = args.port_file + ".tmp"
	with open(tmp, "w") as f:
		f.write("%d\n" % srv.server_address[1])
	os.replace(tmp, args.port_file)
	if args.verbose:
		sys.stderr.write("gcs-fake: listening on 127.0.0.1:%d "
				 "(crc32c: %s)\n" % (srv.server_address[1],
						     crc32c_backend()))
	try:
		srv.serve_forever(poll_interval=0.2)
	except SystemExit:
		pass
	finally:
		srv.socket.close()
		sys.stdout.flush()
		sys.stderr.flush()
		# Handler threads may be stalled on purpose; do not wait.
		os._exit(0)


if __name__ == "__main__":
	main()
