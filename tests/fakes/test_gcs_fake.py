#!/usr/bin/env python3
"""test_gcs_fake.py: the 'gcs-fake-faults' test. Starts gcs_fake.py on
loopback and checks that each fault action does what the contract says
(status, reset, cut, stall, corrupt, and the "processed" variants), and the
resumable-upload rules the C client's recovery depends on (chunk alignment,
what a broken chunk leaves persisted, 308 and Range). Stops the fake by pid.
"""

import base64
import hashlib
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_start  # noqa: E402
import gcs_fake  # noqa: E402  (for its CRC32C, checked against known values)

KIB = 1024
UNIT = 256 * KIB


class FakeTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.TemporaryDirectory()
		port_file = os.path.join(cls.tmp.name, "port")
		cls.proc = fake_start.start("gcs_fake.py", port_file)
		with open(port_file) as f:
			cls.port = int(f.read())

	@classmethod
	def tearDownClass(cls):
		cls.proc.terminate()
		cls.proc.wait(10)
		cls.tmp.cleanup()

	def setUp(self):
		self.call("POST", "/_fake/reset")

	# ---- helpers

	def conn(self, timeout=30):
		return http.client.HTTPConnection("127.0.0.1", self.port,
						  timeout=timeout)

	def call(self, method, path, body=None, headers=None, conn=None):
		c = conn or self.conn()
		try:
			c.request(method, path, body=body,
				  headers=headers or {})
			r = c.getresponse()
			data = r.read()
		except BaseException:
			c.close()
			raise
		if conn is None:
			c.close()
		return r, data

	def faults(self, *rules):
		r, _ = self.call("POST", "/_fake/faults",
				 json.dumps(list(rules)))
		self.assertEqual(r.status, 200)

	def put_object(self, name, data):
		r, body = self.call("POST", "/upload/storage/v1/b/bk/o?" +
				    urllib.parse.urlencode({
					    "uploadType": "media",
					    "name": name}), data)
		self.assertEqual(r.status, 200, body)
		return json.loads(body)

	def media_path(self, name):
		return "/storage/v1/b/bk/o/%s?alt=media" % urllib.parse.quote(
			name, safe="")

	def start_session(self, name, query=""):
		r, body = self.call("POST", "/upload/storage/v1/b/bk/o?"
				    "uploadType=resumable&name=" + name + query,
				    b"{}", {"Content-Type": "application/json"})
		self.assertEqual(r.status, 200, body)
		loc = urllib.parse.urlsplit(r.getheader("Location"))
		return loc.path + "?" + loc.query

	def put_chunk(self, session, data, first, total="*"):
		last = first + len(data) - 1
		return self.call("PUT", session, data, {
			"Content-Range": "bytes %d-%d/%s" % (first, last, total)})

	def query_session(self, session):
		return self.call("PUT", session, b"",
				 {"Content-Range": "bytes */*"})

	def requests(self):
		_, body = self.call("GET", "/_fake/requests")
		return json.loads(body)

	# ---- CRC32C

	def test_crc32c_known_values(self):
		self.assertEqual(gcs_fake.crc32c(b"123456789"), 0xE3069283)
		self.assertEqual(gcs_fake.crc32c_b64(gcs_fake.crc32c(
			b"hello world")), "yZRlqg==")
		self.assertEqual(gcs_fake._raw_update_python(
			0xFFFFFFFF, b"123456789") ^ 0xFFFFFFFF, 0xE3069283)
		a, b = os.urandom(1001), os.urandom(333)
		self.assertEqual(gcs_fake.crc32c_combine(
			gcs_fake.crc32c(a), gcs_fake.crc32c(b), len(b)),
			gcs_fake.crc32c(a + b))

	# ---- status

	def test_status_applies_times_then_stops(self):
		self.put_object("s", b"data")
		self.faults({"method": "GET", "path": "/o/s", "action": "status",
			     "status": 503, "times": 2})
		c = self.conn()
		for want in (503, 503, 200):
			r, body = self.call("GET", "/storage/v1/b/bk/o/s",
					    conn=c)
			self.assertEqual(r.status, want)
		c.close()
		err = json.loads(self.call("GET", "/storage/v1/b/bk/o/nope")[1])
		self.assertEqual(err["error"]["code"], 404)
		self.assertEqual(err["error"]["errors"][0]["reason"],
				 "notFound")

	def test_skip_lets_the_first_matches_through(self):
		self.put_object("k", b"data")
		self.faults({"method": "GET", "path": "/o/k$",
			     "action": "status", "status": 503, "skip": 2})
		got = [self.call("GET", "/storage/v1/b/bk/o/k")[0].status
		       for _ in range(4)]
		self.assertEqual(got, [200, 200, 503, 200])
		rules = json.loads(self.call("GET", "/_fake/faults")[1])
		self.assertEqual((rules[0]["skip"], rules[0]["times"]), (0, 0))

	def test_status_on_upload_leaves_nothing(self):
		self.faults({"method": "POST", "path": "uploadType=media",
			     "action": "status", "status": 429})
		r, body = self.call("POST", "/upload/storage/v1/b/bk/o?"
				    "uploadType=media&name=x", b"x" * 5000)
		self.assertEqual(r.status, 429)
		r, _ = self.call("GET", "/storage/v1/b/bk/o/x")
		self.assertEqual(r.status, 404)

	def test_processed_status_acts_then_answers_the_status(self):
		self.faults({"method": "POST", "path": "name=ps&",
			     "action": "status", "status": 503,
			     "processed": True})
		r, body = self.call("POST", "/upload/storage/v1/b/bk/o?"
				    "uploadType=media&name=ps&ifGenerationMatch=0",
				    b"abc")
		self.assertEqual(r.status, 503)
		self.assertEqual(json.loads(body)["error"]["code"], 503)
		r, body = self.call("GET", self.media_path("ps"))
		self.assertEqual((r.status, body), (200, b"abc"))
		# The retry a client makes finds its first attempt there.
		r, _ = self.call("POST", "/upload/storage/v1/b/bk/o?"
				 "uploadType=media&name=ps&ifGenerationMatch=0",
				 b"abc")
		self.assertEqual(r.status, 412)
		log = self.requests()
		self.assertEqual([e["status"] for e in log[-3:]],
				 [503, 200, 412])
		self.assertEqual(log[-3]["fault"], "status")

	# ---- reset

	def test_reset_drops_the_connection_before_acting(self):
		self.faults({"method": "POST", "path": "name=r$",
			     "action": "reset"})
		with self.assertRaises((ConnectionError,
					http.client.RemoteDisconnected)):
			self.call("POST", "/upload/storage/v1/b/bk/o?"
				  "uploadType=media&name=r", b"abc")
		r, _ = self.call("GET", "/storage/v1/b/bk/o/r")
		self.assertEqual(r.status, 404)
		log = self.requests()
		self.assertEqual(log[0]["fault"], "reset")
		self.assertIsNone(log[0]["status"])

	def test_processed_reset_acts_then_drops_the_answer(self):
		self.faults({"method": "POST", "path": "name=p$",
			     "action": "reset", "processed": True})
		with self.assertRaises((ConnectionError,
					http.client.RemoteDisconnected)):
			self.call("POST", "/upload/storage/v1/b/bk/o?"
				  "uploadType=media&name=p", b"abc")
		r, body = self.call("GET", self.media_path("p"))
		self.assertEqual((r.status, body), (200, b"abc"))

	# ---- cut

	def test_cut_download_sends_headers_and_n_bytes(self):
		data = os.urandom(1 << 20)
		self.put_object("big", data)
		self.faults({"method": "GET", "path": "alt=media",
			     "action": "cut", "after_bytes": 1000})
		c = self.conn()
		c.request("GET", self.media_path("big"))
		r = c.getresponse()
		self.assertEqual(r.status, 200)
		self.assertEqual(int(r.getheader("Content-Length")), len(data))
		with self.assertRaises(http.client.IncompleteRead) as cm:
			r.read()
		self.assertEqual(cm.exception.partial, data[:1000])
		c.close()
		# Resuming with a Range gets the rest, same generation.
		gen = r.getheader("x-goog-generation")
		r, rest = self.call("GET", self.media_path("big") +
				    "&generation=" + gen,
				    headers={"Range": "bytes=1000-"})
		self.assertEqual(r.status, 206)
		self.assertEqual(r.getheader("Content-Range"),
				 "bytes 1000-%d/%d" % (len(data) - 1, len(data)))
		self.assertEqual(rest, data[1000:])

	def test_cut_chunk_keeps_whole_units_and_resumes(self):
		data = os.urandom(3 * UNIT + 1234)
		s = self.start_session("cut", "&ifGenerationMatch=0")
		self.faults({"method": "PUT", "path": "upload_id=",
			     "action": "cut", "after_bytes": 2 * UNIT + 5000})
		with self.assertRaises((ConnectionError,
					http.client.RemoteDisconnected)):
			self.put_chunk(s, data[:3 * UNIT], 0)
		r, _ = self.query_session(s)
		self.assertEqual(r.status, 308)
		self.assertEqual(r.getheader("Range"), "bytes=0-%d" % (
			2 * UNIT - 1))
		r, body = self.put_chunk(s, data[2 * UNIT:], 2 * UNIT,
					 len(data))
		self.assertEqual(r.status, 200, body)
		meta = json.loads(body)
		self.assertEqual(int(meta["size"]), len(data))
		self.assertEqual(meta["crc32c"], gcs_fake.crc32c_b64(
			gcs_fake.crc32c(data)))
		self.assertEqual(base64.b64decode(meta["md5Hash"]),
				 hashlib.md5(data).digest())
		r, got = self.call("GET", self.media_path("cut"))
		self.assertEqual(got, data)

	def test_cut_response_of_json_call(self):
		self.put_object("j", b"x")
		self.faults({"method": "GET", "path": "/o/j$", "action": "cut",
			     "after_bytes": 10})
		c = self.conn()
		c.request("GET", "/storage/v1/b/bk/o/j")
		r = c.getresponse()
		with self.assertRaises(http.client.IncompleteRead) as cm:
			r.read()
		self.assertEqual(len(cm.exception.partial), 10)
		c.close()

	# ---- stall

	def test_stall_delays_the_answer(self):
		self.put_object("st", b"slow")
		self.faults({"method": "GET", "path": "/o/st", "action": "stall",
			     "seconds": 5})
		with self.assertRaises(socket.timeout):
			self.call("GET", "/storage/v1/b/bk/o/st",
				  conn=self.conn(timeout=0.5))
		r, _ = self.call("GET", "/storage/v1/b/bk/o/st")
		self.assertEqual(r.status, 200)

	def test_stall_mid_body(self):
		data = os.urandom(100000)
		self.put_object("sb", data)
		self.faults({"method": "GET", "path": "alt=media",
			     "action": "stall", "after_bytes": 5000,
			     "seconds": 5})
		c = self.conn(timeout=1)
		c.request("GET", self.media_path("sb"))
		r = c.getresponse()
		self.assertEqual(r.status, 200)
		self.assertEqual(r.read(5000), data[:5000])
		with self.assertRaises(socket.timeout):
			r.read(1)
		c.close()

	# ---- corrupt

	def test_corrupt_flips_one_byte_and_keeps_the_true_hash(self):
		data = os.urandom(10000)
		self.put_object("c", data)
		self.faults({"method": "GET", "path": "alt=media",
			     "action": "corrupt", "after_bytes": 7})
		r, got = self.call("GET", self.media_path("c"))
		self.assertEqual(len(got), len(data))
		self.assertNotEqual(got[7], data[7])
		self.assertEqual(got[:7] + got[8:], data[:7] + data[8:])
		hashes = r.headers.get_all("x-goog-hash")
		self.assertIn("crc32c=" + gcs_fake.crc32c_b64(
			gcs_fake.crc32c(data)), hashes)

	# ---- resumable rules

	def test_chunk_rules(self):
		data = os.urandom(2 * UNIT)
		s = self.start_session("rules")
		r, body = self.put_chunk(s, data[:100 * KIB], 0)
		self.assertEqual(r.status, 400)
		self.assertIn(b"262144", body)
		r, _ = self.query_session(s)
		self.assertEqual((r.status, r.getheader("Range")), (308, None))
		r, _ = self.put_chunk(s, data[:UNIT + 100], 0)
		self.assertEqual(r.status, 308)
		self.assertEqual(r.getheader("Range"), "bytes=0-%d" % (UNIT - 1))
		r, body = self.put_chunk(s, data[UNIT + 100:], UNIT + 100)
		self.assertEqual(r.status, 400, body)
		r, body = self.put_chunk(s, data[UNIT:], UNIT, 2 * UNIT)
		self.assertEqual(r.status, 200, body)
		r, body = self.query_session(s)
		self.assertEqual(r.status, 200)
		self.assertEqual(json.loads(body)["size"], str(2 * UNIT))

	def test_create_only_fails_at_finalize(self):
		s = self.start_session("once", "&ifGenerationMatch=0")
		self.put_object("once", b"first")
		r, body = self.put_chunk(s, b"second", 0, 6)
		self.assertEqual(r.status, 412)
		self.assertEqual(json.loads(body)["error"]["errors"][0]["reason"],
				 "conditionNotMet")
		r, body = self.call("GET", self.media_path("once"))
		self.assertEqual(body, b"first")

	def test_request_log(self):
		self.call("GET", "/storage/v1/b/bk/o?prefix=a%2F&maxResults=2",
			  headers={"Authorization": "Bearer t"})
		log = self.requests()
		self.assertEqual(len(log), 1)
		e = log[0]
		self.assertEqual((e["method"], e["path"], e["status"]),
				 ("GET", "/storage/v1/b/bk/o", 200))
		self.assertEqual(e["query"], {"prefix": "a/", "maxResults": "2"})
		self.assertEqual(e["headers"]["authorization"], "Bearer t")
		self.assertEqual(e["body_length"], 0)

	# ---- compose

	def compose(self, dest, sources, query=""):
		return self.call(
			"POST", "/storage/v1/b/bk/o/%s/compose%s" % (
				urllib.parse.quote(dest, safe=""), query),
			json.dumps({"sourceObjects": sources}),
			{"Content-Type": "application/json"})

	def test_compose_semantics(self):
		a = self.put_object("a", b"hello ")
		self.put_object("b", b"world")
		r, body = self.compose("ab", [{"name": "a"}, {"name": "b"}])
		self.assertEqual(r.status, 200, body)
		o = json.loads(body)
		self.assertEqual(o["size"], "11")
		self.assertEqual(o["componentCount"], 2)
		self.assertEqual(o["crc32c"], gcs_fake.crc32c_b64(
			gcs_fake.crc32c(b"hello world")))
		# A composite of composites counts every component.
		r, body = self.compose("abab", [{"name": "ab"}, {"name": "ab"}])
		self.assertEqual(json.loads(body)["componentCount"], 4)
		r, _ = self.compose("x", [{"name": "a"}, {"name": "nope"}])
		self.assertEqual(r.status, 404)
		r, _ = self.compose("x", [{"name": "a"}] * 33)
		self.assertEqual(r.status, 400)
		r, _ = self.compose("ab", [{"name": "a"}], "?ifGenerationMatch=0")
		self.assertEqual(r.status, 412)
		r, _ = self.compose("y", [{"name": "a", "generation":
					    int(a["generation"]) + 1}])
		self.assertEqual(r.status, 404)
		r, _ = self.compose("y", [{"name": "a", "objectPreconditions": {
			"ifGenerationMatch": int(a["generation"]) + 1}}])
		self.assertEqual(r.status, 412)

	# ---- bandwidth

	def timed_puts(self, n, size):
		"""Seconds for n uploads of size bytes at once, each on its
		own connection."""
		errors = []

		def one(k):
			try:
				self.put_object("bw%d" % k, b"x" * size)
			except BaseException as err:
				errors.append(err)
		threads = [threading.Thread(target=one, args=(k,))
			   for k in range(n)]
		t0 = time.monotonic()
		for t in threads:
			t.start()
		for t in threads:
			t.join()
		self.assertEqual(errors, [])
		return time.monotonic() - t0

	def test_bandwidth_per_connection_and_total(self):
		size = 256 * 1024
		try:
			r, body = self.call("POST", "/_fake/bandwidth", json.dumps(
				{"per_connection": "1M"}))
			self.assertEqual(r.status, 200, body)
			# A quarter second each, whether alone or with others.
			self.assertGreater(self.timed_puts(1, size), 0.2)
			self.assertLess(self.timed_puts(3, size), 0.6)
			self.call("POST", "/_fake/bandwidth", json.dumps(
				{"per_connection": 0, "total": "1M"}))
			# Three share the total: three quarters of a second.
			self.assertGreater(self.timed_puts(3, size), 0.6)
		finally:
			self.call("POST", "/_fake/bandwidth", json.dumps(
				{"per_connection": 0, "total": 0}))
		r, _ = self.call("POST", "/_fake/bandwidth", json.dumps(
			{"total": "fast"}))
		self.assertEqual(r.status, 400)

	def test_request_log_names_the_connection(self):
		c = self.conn()
		self.call("GET", "/storage/v1/b/bk/o", conn=c)
		self.call("GET", "/storage/v1/b/bk/o", conn=c)
		self.call("GET", "/storage/v1/b/bk/o")
		ports = [e["connection"] for e in self.requests()]
		c.close()
		self.assertEqual(ports[0], ports[1])
		self.assertNotEqual(ports[0], ports[2])


class TokenTest(unittest.TestCase):
	"""--require-token and the /token endpoint."""

	@classmethod
	def setUpClass(cls):
		cls.tmp = tempfile.TemporaryDirectory()
		port_file = os.path.join(cls.tmp.name, "port")
		cls.proc = fake_start.start("gcs_fake.py", port_file,
					    ["--require-token", "T0K"])
		with open(port_file) as f:
			cls.port = int(f.read())

	@classmethod
	def tearDownClass(cls):
		cls.proc.terminate()
		cls.proc.wait(10)
		cls.tmp.cleanup()

	def call(self, method, path, body=None, headers=None):
		c = http.client.HTTPConnection("127.0.0.1", self.port,
					       timeout=30)
		c.request(method, path, body=body, headers=headers or {})
		r = c.getresponse()
		data = r.read()
		c.close()
		return r, data

	def test_require_token(self):
		r, _ = self.call("GET", "/storage/v1/b/bk/o")
		self.assertEqual(r.status, 401)
		r, _ = self.call("GET", "/storage/v1/b/bk/o",
				 headers={"Authorization": "Bearer nope"})
		self.assertEqual(r.status, 401)
		r, _ = self.call("GET", "/storage/v1/b/bk/o",
				 headers={"Authorization": "Bearer T0K"})
		self.assertEqual(r.status, 200)

	def jwt(self, claims, alg="RS256"):
		def b64(d):
			return base64.urlsafe_b64encode(json.dumps(d).encode()) \
				.rstrip(b"=").decode()
		return "%s.%s.%s" % (b64({"alg": alg, "typ": "JWT"}),
				     b64(claims), "c2ln")

	def token(self, form):
		return self.call("POST", "/token",
				 urllib.parse.urlencode(form).encode(),
				 {"Content-Type":
				  "application/x-www-form-urlencoded"})

	def test_jwt_bearer(self):
		now = int(time.time())
		claims = {"iss": "sa@p.iam.gserviceaccount.com",
			  "scope": "https://www.googleapis.com/auth/"
				   "devstorage.read_write",
			  "aud": "https://oauth2.googleapis.com/token",
			  "iat": now, "exp": now + 3600}
		grant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
		r, body = self.token({"grant_type": grant,
				      "assertion": self.jwt(claims)})
		self.assertEqual(r.status, 200, body)
		doc = json.loads(body)
		self.assertEqual((doc["access_token"], doc["token_type"],
				  doc["expires_in"]), ("T0K", "Bearer", 3600))
		bad = dict(claims)
		del bad["scope"]
		r, body = self.token({"grant_type": grant,
				      "assertion": self.jwt(bad)})
		self.assertEqual(r.status, 400)
		self.assertEqual(json.loads(body)["error"], "invalid_grant")
		r, body = self.token({"grant_type": grant,
				      "assertion": self.jwt(claims, "HS256")})
		self.assertEqual(r.status, 400)
		r, body = self.token({"grant_type": grant, "assertion": "a.b"})
		self.assertEqual(r.status, 400)

	def test_refresh_token(self):
		r, body = self.token({"grant_type": "refresh_token",
				      "client_id": "c", "client_secret": "s",
				      "refresh_token": "r"})
		self.assertEqual(r.status, 200, body)
		r, body = self.token({"grant_type": "refresh_token",
				      "client_id": "c", "refresh_token": "r"})
		self.assertEqual(r.status, 400)
		self.assertEqual(json.loads(body)["error"], "invalid_request")


if __name__ == "__main__":
	unittest.main(verbosity=2)
