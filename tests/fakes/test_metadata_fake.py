#!/usr/bin/env python3
"""test_metadata_fake.py: the 'metadata-fake' test. Starts metadata_fake.py
with three workers on loopback and checks that it keeps the GCE metadata
server's contract as slicectl relies on it: each worker's own values (its
number, tpu-env, the slice's worker-network-endpoints, preemption and
maintenance notices, the token), directory listings, alt=json and
recursive answers, the Metadata-Flavor and X-Forwarded-For rules, ETags,
wait_for_change with and without last_etag, timeout_sec answering the
unchanged value, many watchers woken by one change, the control endpoints,
faults per worker, and the request log. Long polls are started before the
change they wait for and checked against generous time bounds, so nothing
depends on timing luck; the whole test takes a few seconds.
"""

import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_start  # noqa: E402
ROOT = "/computeMetadata/v1/"
FLAVOR = {"Metadata-Flavor": "Google"}
WORKERS = 3


class Fake:
	"""One metadata_fake.py process on loopback."""

	def __init__(self, *args):
		self.tmp = tempfile.TemporaryDirectory()
		self.port_file = os.path.join(self.tmp.name, "ports")
		self.proc = fake_start.start("metadata_fake.py", self.port_file,
					     args)
		with open(self.port_file) as f:
			self.ports = [int(line) for line in f.read().split()]

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.tmp.cleanup()

	def call(self, method, path, body=None, headers=None, worker=0,
		 timeout=30):
		"""(status, body text, response) of one request."""
		if body is not None and not isinstance(body, (str, bytes)):
			body = json.dumps(body)
		c = http.client.HTTPConnection("127.0.0.1", self.ports[worker],
					       timeout=timeout)
		try:
			c.request(method, path, body=body, headers=headers or {})
			r = c.getresponse()
			data = r.read().decode()
		finally:
			c.close()
		return r.status, data, r


class MetadataFakeTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.fake = Fake("--workers", str(WORKERS))

	@classmethod
	def tearDownClass(cls):
		cls.fake.stop()

	def setUp(self):
		self.control("POST", "/_fake/reset")

	# ---- helpers

	def control(self, method, path, body=None, want=200, worker=0):
		status, data, _ = self.fake.call(method, path, body,
						 worker=worker)
		self.assertEqual(status, want, data)
		return json.loads(data)

	def set(self, path, value, worker="all"):
		return self.control("POST", "/_fake/set", {
			"worker": worker, "path": path, "value": value})

	def get(self, path, worker=0, want=200, headers=FLAVOR, query=""):
		"""(body, response) of a metadata GET."""
		status, data, r = self.fake.call("GET", ROOT + path + query,
						 headers=headers, worker=worker)
		self.assertEqual(status, want, data)
		self.assertEqual(r.getheader("Metadata-Flavor"), "Google")
		return data, r

	def value(self, path, worker=0):
		return self.get(path, worker)[0]

	def etag(self, path, worker=0):
		return self.get(path, worker)[1].getheader("ETag")

	def watch(self, path, worker=0, last_etag=None, timeout_sec=None):
		q = "?wait_for_change=true"
		if last_etag is not None:
			q += "&last_etag=" + last_etag
		if timeout_sec is not None:
			q += "&timeout_sec=%d" % timeout_sec
		t0 = time.monotonic()
		data, r = self.get(path, worker, query=q)
		return data, r.getheader("ETag"), time.monotonic() - t0

	def watch_async(self, *args, **kw):
		"""Starts watch(...) in a thread; join() gives its result."""
		out = {}

		def run():
			try:
				out["result"] = self.watch(*args, **kw)
			except Exception as err:  # reported by join()
				out["error"] = err
		t = threading.Thread(target=run, daemon=True)
		t.start()

		def join(timeout=15):
			t.join(timeout)
			self.assertFalse(t.is_alive(), "the watch did not return")
			if "error" in out:
				raise out["error"]
			return out["result"]
		return join

	def wait_held(self, n, path="instance/preempted"):
		"""Until n long polls of path have reached the fake."""
		deadline = time.monotonic() + 10
		while True:
			log = self.control("GET", "/_fake/requests")
			held = [e for e in log if e["path"] == ROOT + path and
				e["query"].get("wait_for_change") == "true" and
				e["status"] is None]
			if len(held) >= n:
				return
			self.assertLess(time.monotonic(), deadline,
					"%d of %d watches arrived" % (len(held), n))
			time.sleep(0.02)

	# ---- values

	def test_port_file_lists_every_worker(self):
		self.assertEqual(len(self.fake.ports), WORKERS)
		self.assertEqual(len(set(self.fake.ports)), WORKERS)

	def test_values_per_worker(self):
		ids, names = set(), set()
		wne = self.value("instance/attributes/worker-network-endpoints")
		entries = wne.split(",")
		self.assertEqual(len(entries), WORKERS)
		for w in range(WORKERS):
			uid, num, ip = entries[w].split(":")
			self.assertEqual((int(num), ip), (w, "10.130.0.%d" % (2 + w)))
			self.assertEqual(self.value(
				"instance/attributes/agent-worker-number", w), str(w))
			self.assertEqual(self.value(
				"instance/attributes/worker-network-endpoints", w), wne)
			env = self.value("instance/attributes/tpu-env", w)
			self.assertIn("WORKER_ID: '%d'\n" % w, env)
			self.assertIn("ZONE: 'us-central2-b'\n", env)
			self.assertNotIn("MEGASCALE", env)
			self.assertEqual(self.value("instance/preempted", w), "FALSE")
			self.assertEqual(self.value("instance/maintenance-event", w),
					 "NONE")
			self.assertEqual(self.value("instance/network-interfaces/0/ip",
						    w), ip)
			ids.add(self.value("instance/id", w))
			names.add(self.value("instance/hostname", w))
			self.assertEqual(self.value("instance/zone", w),
					 "projects/123456789012/zones/us-central2-b")
			self.assertEqual(self.value("project/project-id", w),
					 "fake-project")
			tok, r = self.get("instance/service-accounts/default/token",
					  w)
			self.assertEqual(r.getheader("Content-Type"),
					 "application/json")
			doc = json.loads(tok)
			self.assertEqual(sorted(doc), ["access_token", "expires_in",
						       "token_type"])
			self.assertEqual(doc["token_type"], "Bearer")
			self.assertGreater(doc["expires_in"], 3000)
		self.assertEqual((len(ids), len(names)), (WORKERS, WORKERS))

	def test_answers_carry_flavor_etag_and_type(self):
		data, r = self.get("instance/preempted")
		self.assertEqual(r.getheader("Content-Type"), "text/plain")
		self.assertEqual(len(r.getheader("ETag")), 16)
		# The ETag is a hash of the value: stable, and equal for equal
		# values (every worker's "FALSE").
		self.assertEqual(self.etag("instance/preempted"),
				 r.getheader("ETag"))
		self.assertEqual(self.etag("instance/preempted", 2),
				 r.getheader("ETag"))
		self.assertNotEqual(self.etag("instance/maintenance-event"),
				    r.getheader("ETag"))
		_, r = self.get("instance/attributes/nope", want=404)
		self.assertIsNone(r.getheader("ETag"))

	def test_directory_listing(self):
		data, r = self.get("instance/")
		lines = data.splitlines()
		self.assertEqual(lines, sorted(lines))
		for want in ("attributes/", "preempted", "maintenance-event",
			     "service-accounts/", "zone", "id", "hostname"):
			self.assertIn(want, lines)
		attrs = self.get("instance/attributes/")[0].splitlines()
		self.assertEqual(attrs, ["accelerator-type",
					 "agent-worker-number", "tpu-env",
					 "worker-network-endpoints"])
		self.assertEqual(self.get("")[0], "instance/\nproject/\n")
		# A directory named without its "/" moves there.
		status, _, r = self.fake.call("GET", ROOT + "instance/attributes"
					      "?alt=json", headers=FLAVOR)
		self.assertEqual(status, 301)
		self.assertEqual(r.getheader("Location"), ROOT +
				 "instance/attributes/?alt=json")
		self.get("instance/id/", want=404)
		self.get("instance/nothing/", want=404)
		self.get("nothing", want=404)

	def test_alt_json_and_recursive(self):
		data, r = self.get("instance/preempted", query="?alt=json")
		self.assertEqual(r.getheader("Content-Type"), "application/json")
		self.assertEqual(json.loads(data), "FALSE")
		data, r = self.get("instance/attributes/", query="?alt=json")
		self.assertEqual(r.getheader("Content-Type"), "application/json")
		self.assertIn("tpu-env", json.loads(data))
		data, r = self.get("instance/", query="?recursive=true")
		self.assertEqual(r.getheader("Content-Type"), "application/json")
		doc = json.loads(data)
		self.assertEqual(doc["maintenanceEvent"], "NONE")
		self.assertEqual(doc["attributes"]["agent-worker-number"], "0")
		self.assertEqual(doc["serviceAccounts"]["default"]["token"]
				 ["token_type"], "Bearer")
		data, _ = self.get("instance/attributes/",
				   query="?recursive=true&alt=text")
		self.assertIn("agent-worker-number 0\n", data)
		self.get("instance/preempted", query="?alt=xml", want=400)
		self.get("instance/", query="?recursive=maybe", want=400)

	def test_flavor_enforced(self):
		path = "instance/attributes/agent-worker-number"
		data, r = self.get(path, headers={}, want=403)
		self.assertIn("Missing Metadata-Flavor:Google header", data)
		self.get(path, headers={"Metadata-Flavor": "google-ish"},
			 want=403)
		data, _ = self.get(path, headers=dict(
			FLAVOR, **{"X-Forwarded-For": "10.0.0.1"}), want=403)
		self.assertIn("X-Forwarded-For", data)
		# The legacy header alone is not enough either.
		self.get(path, headers={"X-Google-Metadata-Request": "True"},
			 want=403)
		status, _, _ = self.fake.call("POST", ROOT + path, "x",
					      headers=FLAVOR)
		self.assertEqual(status, 405)
		log = self.control("GET", "/_fake/requests")
		self.assertEqual([e["status"] for e in log],
				 [403, 403, 403, 403, 405])
		self.assertEqual(log[2]["headers"]["x-forwarded-for"],
				 "10.0.0.1")
		self.assertNotIn("metadata-flavor", log[0]["headers"])

	# ---- set and config

	def test_set_per_worker_and_all(self):
		self.set("instance/preempted", "TRUE", worker=1)
		self.assertEqual([self.value("instance/preempted", w)
				  for w in range(WORKERS)], ["FALSE", "TRUE",
							     "FALSE"])
		out = self.set("instance/maintenance-event",
			       "TERMINATE_ON_HOST_MAINTENANCE")
		self.assertEqual(len(out["etags"]), WORKERS)
		for w in range(WORKERS):
			self.assertEqual(self.value("instance/maintenance-event",
						    w),
					 "TERMINATE_ON_HOST_MAINTENANCE")
		self.set("instance/attributes/slice-run", "run-7", worker=2)
		self.assertEqual(self.value("instance/attributes/slice-run", 2),
				 "run-7")
		self.get("instance/attributes/slice-run", worker=0, want=404)
		self.assertIn("slice-run", self.get(
			"instance/attributes/", 2)[0].splitlines())
		self.set("instance/attributes/slice-run", None)
		self.get("instance/attributes/slice-run", worker=2, want=404)
		for bad in ({"path": "instance/attributes", "value": "x"},
			    {"path": "instance/id/x", "value": "x"},
			    {"path": "instance/attributes/", "value": "x"},
			    {"path": "instance/service-accounts/default/token",
			     "value": "x"},
			    {"path": "instance/preempted", "value": "x",
			     "worker": WORKERS},
			    {"path": "instance/preempted", "value": 1},
			    {"path": "instance/preempted"}):
			self.control("POST", "/_fake/set", bad, want=400)

	def test_config(self):
		cfg = self.control("POST", "/_fake/config", {
			"project": "proj-x", "project_number": 42,
			"zone": "us-east5-a", "worker_ips": ["10.0.0.5", "10.0.0.6",
							     "10.0.0.7", "10.0.0.8"],
			"node_uid": "uid",
			"tpu_env": {"MEGASCALE_COORDINATOR_ADDRESS": "10.0.0.5:8080",
				    "MEGASCALE_NUM_SLICES": "2",
				    "MEGASCALE_SLICE_ID": 1}})
		self.assertEqual(cfg["zone"], "us-east5-a")
		self.assertEqual(self.value("project/project-id", 1), "proj-x")
		self.assertEqual(self.value("instance/zone", 1),
				 "projects/42/zones/us-east5-a")
		self.assertEqual(self.value(
			"instance/attributes/worker-network-endpoints", 2),
			"uid:0:10.0.0.5,uid:1:10.0.0.6,uid:2:10.0.0.7,"
			"uid:3:10.0.0.8")
		env = self.value("instance/attributes/tpu-env", 1)
		for line in ("MEGASCALE_COORDINATOR_ADDRESS: '10.0.0.5:8080'",
			     "MEGASCALE_NUM_SLICES: '2'",
			     "MEGASCALE_SLICE_ID: '1'", "WORKER_ID: '1'",
			     "CONSUMER_PROJECT_ID: 'proj-x'"):
			self.assertIn(line + "\n", env)
		self.control("POST", "/_fake/config", {
			"tpu_env": {"MEGASCALE_SLICE_ID": None},
			"worker_network_endpoints": "a:0:1.2.3.4"})
		self.assertNotIn("MEGASCALE_SLICE_ID",
				 self.value("instance/attributes/tpu-env"))
		self.assertEqual(self.value(
			"instance/attributes/worker-network-endpoints"),
			"a:0:1.2.3.4")
		self.assertEqual(self.control("GET", "/_fake/config")["project"],
				 "proj-x")
		for bad in ({"nope": 1}, {"project_number": "x"},
			    {"worker_ips": "10.0.0.1"}, {"tpu_env": {"a b": "x"}},
			    {"zone": ""}):
			self.control("POST", "/_fake/config", bad, want=400)
		self.control("POST", "/_fake/reset")
		self.assertEqual(self.value("project/project-id"),
				 "fake-project")

	# ---- wait_for_change

	def test_wait_answers_at_once_when_etag_differs(self):
		data, etag, took = self.watch("instance/preempted",
					      last_etag="0", timeout_sec=30)
		self.assertEqual(data, "FALSE")
		self.assertEqual(etag, self.etag("instance/preempted"))
		self.assertLess(took, 2)

	def test_wait_with_last_etag_until_change(self):
		etag = self.etag("instance/preempted", 1)
		join = self.watch_async("instance/preempted", 1, etag, 30)
		self.wait_held(1)
		# Another worker's change, or an equal value, wakes nothing.
		self.set("instance/preempted", "TRUE", worker=0)
		self.set("instance/preempted", "FALSE", worker=1)
		time.sleep(0.3)
		self.set("instance/preempted", "TRUE", worker=1)
		data, new, took = join()
		self.assertEqual(data, "TRUE")
		self.assertNotEqual(new, etag)
		self.assertEqual(new, self.etag("instance/preempted", 1))
		self.assertGreater(took, 0.25)

	def test_wait_without_last_etag_waits_for_next_change(self):
		join = self.watch_async("instance/maintenance-event",
					timeout_sec=30)
		self.wait_held(1, "instance/maintenance-event")
		time.sleep(0.2)
		self.set("instance/maintenance-event",
			 "TERMINATE_ON_HOST_MAINTENANCE", worker=0)
		data, _, took = join()
		self.assertEqual(data, "TERMINATE_ON_HOST_MAINTENANCE")
		self.assertGreater(took, 0.15)

	def test_wait_timeout_answers_unchanged(self):
		etag = self.etag("instance/preempted")
		data, new, took = self.watch("instance/preempted",
					     last_etag=etag, timeout_sec=1)
		self.assertEqual((data, new), ("FALSE", etag))
		self.assertGreater(took, 0.9)
		self.assertLess(took, 3)
		self.get("instance/preempted",
			 query="?wait_for_change=true&timeout_sec=0", want=400)
		self.get("instance/preempted",
			 query="?wait_for_change=true&timeout_sec=x", want=400)
		self.get("instance/preempted",
			 query="?wait_for_change=yes", want=400)

	def test_wait_on_directory_and_config_changes(self):
		etag = self.etag("instance/attributes/")
		join = self.watch_async("instance/attributes/", 0, etag, 30)
		join_env = self.watch_async("instance/attributes/tpu-env", 2,
					    self.etag("instance/attributes/"
						      "tpu-env", 2), 30)
		self.wait_held(1, "instance/attributes/")
		self.wait_held(1, "instance/attributes/tpu-env")
		self.control("POST", "/_fake/config", {
			"tpu_env": {"MEGASCALE_NUM_SLICES": "4"}})
		data, new, _ = join()
		self.assertNotEqual(new, etag)
		self.assertIn("tpu-env", data.splitlines())
		data, _, _ = join_env()
		self.assertIn("MEGASCALE_NUM_SLICES: '4'", data)

	def test_many_watchers_woken_by_one_set(self):
		n = 60
		etag = self.etag("instance/preempted")
		joins = [self.watch_async("instance/preempted", i % WORKERS,
					  etag, 30) for i in range(n)]
		self.wait_held(n)
		t0 = time.monotonic()
		self.set("instance/preempted", "TRUE")
		for join in joins:
			data, new, _ = join()
			self.assertEqual(data, "TRUE")
			self.assertNotEqual(new, etag)
		self.assertLess(time.monotonic() - t0, 5)

	# ---- faults and the log

	def test_fault_status_count_and_worker(self):
		self.control("POST", "/_fake/faults", {
			"path": "preempted", "status": 503, "count": 2,
			"worker": 1, "retry_after": 1})
		self.get("instance/preempted", worker=0)
		_, r = self.get("instance/preempted", worker=1, want=503)
		self.assertEqual(r.getheader("Retry-After"), "1")
		self.get("instance/preempted", worker=1, want=503)
		self.get("instance/preempted", worker=1)
		self.assertEqual(self.control("GET", "/_fake/faults")[0]["count"],
				 0)
		self.control("DELETE", "/_fake/faults")
		self.assertEqual(self.control("GET", "/_fake/faults"), [])
		for bad in ({"status": 503, "reset": True}, {"path": "x"},
			    {"status": 503, "worker": 9}, {"status": 200},
			    {"status": 503, "bogus": 1}):
			self.control("POST", "/_fake/faults", bad, want=400)

	def test_fault_reset_and_stall(self):
		self.control("POST", "/_fake/faults", [
			{"path": "agent-worker-number", "reset": True},
			{"path": "instance/id", "stall": 0.5}])
		with self.assertRaises((ConnectionError, http.client.HTTPException,
					socket.error)):
			self.fake.call("GET", ROOT + "instance/attributes/"
				       "agent-worker-number", headers=FLAVOR)
		self.value("instance/attributes/agent-worker-number")
		t0 = time.monotonic()
		self.value("instance/id")
		self.assertGreater(time.monotonic() - t0, 0.45)
		log = self.control("GET", "/_fake/requests")
		self.assertEqual(log[0]["status"], "reset")
		self.assertEqual(log[0]["fault"]["reset"], True)
		self.assertIsNone(log[1]["fault"])

	def test_fault_processed_after_the_wait(self):
		etag = self.etag("instance/preempted")
		self.control("POST", "/_fake/faults", {
			"path": "wait_for_change", "status": 503,
			"processed": True})
		join = self.watch_async("instance/preempted", 0, etag, 30)
		self.wait_held(1)
		self.set("instance/preempted", "TRUE")
		with self.assertRaises(AssertionError) as caught:
			join()
		self.assertIn("503", str(caught.exception))

	def test_request_log(self):
		self.get("instance/preempted", worker=2,
			 query="?wait_for_change=true&last_etag=0&timeout_sec=5")
		log = self.control("GET", "/_fake/requests", worker=1)
		self.assertEqual(len(log), 1)
		e = log[0]
		self.assertEqual((e["worker"], e["method"], e["path"],
				  e["status"]),
				 (2, "GET", ROOT + "instance/preempted", 200))
		self.assertEqual(e["query"], {"wait_for_change": "true",
					      "last_etag": "0",
					      "timeout_sec": "5"})
		self.assertEqual(e["headers"]["metadata-flavor"], "Google")
		self.control("DELETE", "/_fake/requests")
		self.assertEqual(self.control("GET", "/_fake/requests"), [])
		self.control("GET", "/_fake/nothing", want=404)


if __name__ == "__main__":
	unittest.main(verbosity=2)
