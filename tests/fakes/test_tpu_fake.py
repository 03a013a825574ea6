#!/usr/bin/env python3
"""test_tpu_fake.py: the 'tpu-fake' test. Starts tpu_fake.py on loopback
and checks that it keeps the Cloud TPU API's contract as slicectl relies
on it: the queued resource's walk through its states, node naming and
worker endpoints, 404/409 and idempotent retries, delete, reset, suspend
and failures, guest attributes, maintenance events, faults and the
request log, pagination, auth and zones. Intermediate states are held (a
negative delay) while they are checked, so nothing depends on timing
luck. Request bodies and the API as gcloud knows it are
test_tpu_fake_bodies.py's; the fake and the helpers are fake_testing.py's.
"""

import base64
import http.client
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tpu_fake  # noqa: E402  (its tables: workers_for)
from fake_testing import (  # noqa: E402
	API, PARENT, UUID1, UUID2, UUID3, TpuFakeCase, qr_body)
from fake_testing import TPU_TOKEN as TOKEN  # noqa: E402


class TpuFakeTest(TpuFakeCase):
	# ---- states

	def test_state_walk(self):
		self.hold("CREATING")
		op = self.create("walk", qr_body(node_id="walk", spot={}))
		self.assertRegex(op["name"], r"^projects/p/locations/z/operations/"
				 r"operation-\d+-[0-9a-f]+$")
		self.assertNotIn("done", op)
		self.assertEqual(op["metadata"], {
			"@type": "type.googleapis.com/google.cloud.tpu.v2alpha1."
				 "OperationMetadata",
			"createTime": op["metadata"]["createTime"],
			"target": PARENT + "/queuedResources/walk",
			"verb": "create", "apiVersion": "v2alpha1"})
		qr = self.get("queuedResources", "walk")
		self.assertEqual(qr["state"], {"state": "CREATING",
					       "stateInitiator": "USER",
					       "creatingData": {}})
		self.assertEqual(qr["name"], PARENT + "/queuedResources/walk")
		self.assertEqual(qr["spot"], {})
		self.assertEqual(qr["tpu"], qr_body(node_id="walk")["tpu"])
		self.assertRegex(qr["createTime"],
				 r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")
		status, again, _ = self.call("GET", "/v2alpha1/" + op["name"])
		self.assertNotIn("done", again)
		# Each state in turn, held while it is looked at.
		seen = {"ACCEPTED": "acceptedData", "WAITING_FOR_RESOURCES": None,
			"PROVISIONING": "provisioningData"}
		prev = "CREATING"
		for state, data in seen.items():
			self.config(delays={state: -1, prev: None})
			self.wait_state("walk", state)
			st = self.state("walk")
			self.assertEqual(st["state"], state)
			want = {"state": state, "stateInitiator": "USER"}
			if data:
				want[data] = {}
			self.assertEqual(st, want)
			prev = state
			if state == "ACCEPTED":
				done = self.wait_op(op["name"])
				resp = done["response"]
				self.assertEqual(resp["@type"], "type.googleapis.com/"
						 "google.cloud.tpu.v2alpha1."
						 "QueuedResource")
				self.assertEqual(resp["state"]["state"], "ACCEPTED")
				self.assertIn("endTime", done["metadata"])
			if state != "PROVISIONING":
				self.get("nodes", "walk", want=404)
		node = self.get("nodes", "walk")
		self.assertEqual(node["state"], "CREATING")
		self.assertNotIn("health", node)
		self.release("PROVISIONING")
		qr = self.wait_state("walk", "ACTIVE")
		self.assertEqual(qr["state"], {"state": "ACTIVE",
					       "stateInitiator": "USER",
					       "activeData": {}})
		node = self.get("nodes", "walk")
		self.assertEqual((node["state"], node["health"]),
				 ("READY", "HEALTHY"))
		self.assertEqual(node["name"], PARENT + "/nodes/walk")
		self.assertEqual(node["queuedResource"], qr["name"])
		self.assertEqual(node["apiVersion"], "V2_ALPHA1")
		self.assertRegex(node["id"], r"^\d+$")
		self.assertNotIn("multisliceNode", node)
		self.assertEqual(node["networkEndpoints"], [
			{"ipAddress": "127.0.1.1", "port": 8470}])

	def test_lazy_walk_keeps_scheduled_times(self):
		# Nobody looks while the walk runs: the states still end at
		# their own times, so the nodes' createTime is the moment
		# PROVISIONING began, not the moment someone asked.
		self.config(delays={"CREATING": 0.1, "ACCEPTED": 0.1,
				    "WAITING_FOR_RESOURCES": 0.1,
				    "PROVISIONING": 0.1})
		self.create("lazy")
		time.sleep(0.7)
		qr = self.get("queuedResources", "lazy")
		node = self.get("nodes", "lazy")
		self.assertEqual(qr["state"]["state"], "ACTIVE")

		def when(text):
			return time.mktime(time.strptime(text[:19],
							 "%Y-%m-%dT%H:%M:%S")) + \
				float("0" + text[19:-1])
		gap = when(node["createTime"]) - when(qr["createTime"])
		self.assertAlmostEqual(gap, 0.3, delta=0.01)

	# ---- nodes and workers

	def test_multi_node_naming_and_endpoints(self):
		body = qr_body(acc="v4-32", count=3)
		body["tpu"]["nodeSpec"][0]["node"]["networkConfig"] = {
			"enableExternalIps": True}
		self.active("ms", body)
		ips = []
		for i in range(3):
			node = self.get("nodes", "ms-%d" % i)
			self.assertTrue(node["multisliceNode"])
			self.assertEqual(node["networkConfig"],
					 {"enableExternalIps": True})
			eps = node["networkEndpoints"]
			self.assertEqual(len(eps), 4)  # v4-32: 4 hosts
			for ep in eps:
				self.assertEqual(ep["port"], 8470)
				ips.append((ep["ipAddress"],
					    ep["accessConfig"]["externalIp"]))
		self.assertEqual(ips, [("127.0.1.%d" % i, "127.1.0.%d" % i)
				       for i in range(1, 13)])
		self.get("nodes", "ms-3", want=404)
		# An explicit prefix, and no external addresses.
		self.active("px", qr_body(acc="v5litepod-16", count=2,
					  prefix="slice"))
		eps = self.get("nodes", "slice-1")["networkEndpoints"]
		self.assertEqual(eps, [{"ipAddress": "127.0.1.%d" % i,
					"port": 8470} for i in range(17, 21)])

	def test_workers_per_accelerator_type(self):
		cases = {"v2-8": 1, "v3-32": 4, "v4-8": 1, "v4-16": 2,
			 "v5p-128": 16, "v5litepod-4": 1, "v5litepod-8": 1,
			 "v5litepod-16": 4, "v6e-256": 64}
		for acc, n in cases.items():
			self.assertEqual(tpu_fake.workers_for(
				{"acceleratorType": acc}, None), n, acc)
		self.assertEqual(tpu_fake.workers_for({"acceleratorConfig": {
			"type": "V4", "topology": "2x2x4"}}, None), 4)
		self.config(workers_per_node=3)
		self.active("w3")
		self.assertEqual(len(self.get("nodes", "w3")[
			"networkEndpoints"]), 3)

	def test_address_pool_skips_and_reuses(self):
		self.config(ip_base="127.0.1.253", workers_per_node=4)
		self.active("pool")
		ips = [e["ipAddress"] for e in self.get("nodes", "pool")[
			"networkEndpoints"]]
		self.assertEqual(ips, ["127.0.1.253", "127.0.1.254",
				       "127.0.2.1", "127.0.2.2"])
		self.call("DELETE", API + "/queuedResources/pool?force=true")
		self.wait_state("pool", 404)
		self.active("again")
		ips2 = [e["ipAddress"] for e in self.get("nodes", "again")[
			"networkEndpoints"]]
		self.assertEqual(ips2, ips)

	# ---- existence and idempotence

	def test_not_found_conflict_and_request_id(self):
		self.error("GET", API + "/queuedResources/nope", None, 404,
			   "Resource 'projects/p/locations/z/queuedResources/"
			   "nope' was not found", grpc="NOT_FOUND")
		self.error("GET", API + "/nodes/nope", None, 404,
			   "Resource 'projects/p/locations/z/nodes/nope' was not "
			   "found", grpc="NOT_FOUND")
		self.error("GET", API + "/operations/operation-1-ab", None, 404,
			   "Resource 'projects/p/locations/z/operations/"
			   "operation-1-ab' was not found", grpc="NOT_FOUND")
		op1 = self.create("dup", request_id=UUID1)
		op2 = self.create("dup", request_id=UUID1)
		self.assertEqual(op1["name"], op2["name"])
		self.error("POST", API + "/queuedResources?queuedResourceId=dup&"
			   "requestId=" + UUID2, qr_body(node_id="dup"), 409,
			   "Resource 'projects/p/locations/z/queuedResources/dup' "
			   "already exists", grpc="ALREADY_EXISTS")
		self.error("POST", API + "/queuedResources?queuedResourceId=x",
			   qr_body(node_id="dup"), 409, "Resource 'projects/p/"
			   "locations/z/nodes/dup' already exists",
			   grpc="ALREADY_EXISTS")
		names = [q["name"] for q in self.call(
			"GET", API + "/queuedResources")[1]["queuedResources"]]
		self.assertEqual(names, [PARENT + "/queuedResources/dup"])
		# Another project or zone is another namespace.
		status, _, _ = self.call("POST", "/v2alpha1/projects/p/locations/"
					 "z2/queuedResources?queuedResourceId=dup",
					 qr_body(node_id="dup",
						 parent="projects/p/locations/z2"))
		self.assertEqual(status, 200)

	# ---- delete, reset, suspend, fail

	def test_delete_needs_force_while_nodes_run(self):
		self.active("del")
		err = self.error("DELETE", API + "/queuedResources/del", None, 400,
				 None, grpc="FAILED_PRECONDITION")
		self.assertIn("nodes exist", err["message"])
		self.assertIn("force=true", err["message"])
		self.hold("DELETING")
		status, op, _ = self.call("DELETE", API + "/queuedResources/del?"
					  "force=true&requestId=" + UUID3)
		self.assertEqual(status, 200, op)
		self.assertEqual(op["metadata"]["verb"], "delete")
		st = self.state("del")
		self.assertEqual(st, {"state": "DELETING", "stateInitiator": "USER",
				      "deletingData": {}})
		self.assertEqual(self.get("nodes", "del")["state"], "DELETING")
		status, again, _ = self.call("DELETE", API + "/queuedResources/"
					     "del?force=true&requestId=" + UUID3)
		self.assertEqual(again["name"], op["name"])
		self.error("DELETE", API + "/queuedResources/del?force=true",
			   None, 400, "The queued resource projects/p/locations/z/"
			   "queuedResources/del is already being deleted.",
			   grpc="FAILED_PRECONDITION")
		self.release("DELETING")
		done = self.wait_op(op["name"])
		self.assertEqual(done["response"], {
			"@type": "type.googleapis.com/google.protobuf.Empty"})
		self.get("queuedResources", "del", want=404)
		self.get("nodes", "del", want=404)

	def test_delete_without_force_when_allowed(self):
		self.hold("WAITING_FOR_RESOURCES")
		self.create("wfr")
		self.wait_state("wfr", "WAITING_FOR_RESOURCES")
		status, _, _ = self.call("DELETE", API + "/queuedResources/wfr")
		self.assertEqual(status, 200)
		self.release("WAITING_FOR_RESOURCES")
		self.active("sus", qr_body(node_id="sus", spot={}))
		self.control("POST", "/_fake/suspend", {"name": "sus"})
		self.wait_state("sus", "SUSPENDED")
		status, op, _ = self.call("DELETE", API + "/queuedResources/sus")
		self.assertEqual(status, 200, op)
		self.wait_op(op["name"])
		self.wait_state("wfr", 404)

	def test_reset_walk(self):
		self.hold("PROVISIONING")
		self.create("rs")
		self.wait_state("rs", "PROVISIONING")
		self.error("POST", API + "/queuedResources/rs:reset", {}, 400,
			   "Queued resource projects/p/locations/z/queuedResources/"
			   "rs cannot be reset in state PROVISIONING; only an "
			   "ACTIVE one can.", grpc="FAILED_PRECONDITION")
		self.config(delays={"PROVISIONING": None, "RESTARTING": -1})
		self.wait_state("rs", "ACTIVE")
		status, op, _ = self.call("POST", API + "/queuedResources/rs:reset",
					  {})
		self.assertEqual(status, 200, op)
		self.assertEqual(op["metadata"]["verb"], "reset")
		self.assertEqual(self.state("rs")["state"], "ACTIVE")
		node = self.get("nodes", "rs")
		self.assertEqual(node["state"], "RESTARTING")
		self.assertNotIn("health", node)
		status, op2, _ = self.call("GET", "/v2alpha1/" + op["name"])
		self.assertNotIn("done", op2)
		self.release("RESTARTING")
		done = self.wait_op(op["name"])
		self.assertEqual(done["response"]["state"]["state"], "ACTIVE")
		self.assertEqual(self.get("nodes", "rs")["state"], "READY")

	def test_suspend(self):
		self.active("sp", qr_body(node_id="sp", spot={}))
		self.hold("SUSPENDING")
		qr = self.control("POST", "/_fake/suspend", {"name": "sp"})
		self.assertEqual(qr["state"], {"state": "SUSPENDING",
					       "stateInitiator": "SERVICE",
					       "suspendingData": {}})
		self.assertEqual(self.get("nodes", "sp")["state"], "PREEMPTED")
		self.release("SUSPENDING")
		qr = self.wait_state("sp", "SUSPENDED")
		self.assertEqual(qr["state"], {"state": "SUSPENDED",
					       "stateInitiator": "SERVICE",
					       "suspendedData": {}})
		self.active("ondemand")
		self.control("POST", "/_fake/suspend", {"name": "ondemand"},
			     want=400)

	def test_fail_and_fail_at(self):
		self.active("f1")
		qr = self.control("POST", "/_fake/fail", {
			"name": "f1", "code": 8, "message": "Out of capacity"})
		want = {"state": "FAILED", "stateInitiator": "SERVICE",
			"failedData": {"error": {"code": 8,
						 "message": "Out of capacity"}}}
		self.assertEqual(qr["state"], want)
		self.assertEqual(self.state("f1"), want)
		self.get("nodes", "f1", want=404)
		self.config(fail_at={"f2": {"state": "PROVISIONING", "code": 9,
					    "message": "no"}})
		self.create("f2")
		qr = self.wait_state("f2", "FAILED")
		self.assertEqual(qr["state"]["failedData"],
				 {"error": {"code": 9, "message": "no"}})
		self.get("nodes", "f2", want=404)
		# Failing before the create operation is done fails it too.
		self.config(fail_at={"f3": {"state": "ACCEPTED", "code": 8,
					    "message": "quota"}})
		op = self.create("f3")
		done = self.wait_op(op["name"])
		self.assertEqual(done["error"], {"code": 8, "message": "quota"})
		self.assertNotIn("response", done)
		# A FAILED one is deleted without force.
		status, _, _ = self.call("DELETE", API + "/queuedResources/f1")
		self.assertEqual(status, 200)

	# ---- guest attributes and maintenance

	def guest(self, node, body):
		status, doc, _ = self.call("POST", API + "/nodes/%s:"
					   "getGuestAttributes" % node, body)
		self.assertEqual(status, 200, doc)
		return doc["guestAttributes"]

	def test_guest_attributes(self):
		self.config(workers_per_node=3)
		self.active("gk")
		ga = self.guest("gk", {"queryPath": "hostkeys/"})
		self.assertEqual(len(ga), 3)
		blobs = []
		for g in ga:
			self.assertEqual(g["queryPath"], "hostkeys/")
			(item,) = g["queryValue"]["items"]
			self.assertEqual((item["namespace"], item["key"]),
					 ("hostkeys", "ssh-ed25519"))
			raw = base64.b64decode(item["value"])
			self.assertEqual(raw[:15], b"\0\0\0\x0bssh-ed25519")
			self.assertEqual(len(raw), 51)
			blobs.append(item["value"])
		self.assertEqual(len(set(blobs)), 3)
		keys = {"ssh-ed25519": "AAAAC3NzaC1lZDI1NTE5AAAAIE",
			"ecdsa-sha2-nistp256": "AAAAE2VjZHNh"}
		self.config(hostkeys=keys, hostkey_overrides={
			"gk/2": {"ssh-ed25519": "OVERRIDE"}})
		ga = self.guest("gk", {"queryPath": "hostkeys/"})
		items = [[(i["key"], i["value"]) for i in g["queryValue"][
			"items"]] for g in ga]
		self.assertEqual(items, [list(keys.items())] * 2 +
				 [[("ssh-ed25519", "OVERRIDE")]])
		ga = self.guest("gk", {"queryPath": "hostkeys/",
				       "workerIds": ["2", "0"]})
		self.assertEqual([g["queryValue"]["items"][0]["value"]
				  for g in ga], [keys["ssh-ed25519"], "OVERRIDE"])
		self.error("POST", API + "/nodes/gk:getGuestAttributes",
			   {"workerIds": ["3"]}, 400, "Invalid value for field "
			   "'worker_ids[0]': \"3\" is not a worker of projects/p/"
			   "locations/z/nodes/gk (workers 0 to 2).",
			   "worker_ids[0]")
		ga = self.guest("gk", {"queryPath": "other/"})
		self.assertEqual([g["queryValue"] for g in ga], [{}] * 3)
		self.config(publish_hostkeys=False)
		ga = self.guest("gk", {"queryPath": "hostkeys/"})
		self.assertEqual([g["queryValue"] for g in ga], [{}] * 3)
		# Not READY: nothing published.
		self.config(publish_hostkeys=True, delays={"RESTARTING": -1})
		self.call("POST", API + "/queuedResources/gk:reset", {})
		ga = self.guest("gk", {"queryPath": "hostkeys/"})
		self.assertEqual([g["queryValue"] for g in ga], [{}] * 3)

	def test_maintenance_event(self):
		self.config(workers_per_node=2)
		self.active("mt")
		self.hold("MAINTENANCE")
		status, op, _ = self.call("POST", API + "/nodes/mt:"
					  "simulateMaintenanceEvent",
					  {"workerIds": ["1"]})
		self.assertEqual(status, 200, op)
		self.assertNotIn("done", op)
		self.assertEqual(op["metadata"]["target"], PARENT + "/nodes/mt")
		events = self.control("GET", "/_fake/maintenance")
		self.assertEqual([(e["node"], e["workerIds"]) for e in events],
				 [("mt", ["1"])])
		self.release("MAINTENANCE")
		done = self.wait_op(op["name"])
		self.assertEqual(done["response"]["name"], PARENT + "/nodes/mt")
		self.error("POST", API + "/nodes/nope:simulateMaintenanceEvent",
			   {}, 404, "Resource 'projects/p/locations/z/nodes/nope' "
			   "was not found", grpc="NOT_FOUND")

	# ---- faults and the request log

	def test_fault_status_then_normal(self):
		self.control("POST", "/_fake/faults", {
			"method": "GET", "path": "/queuedResources$", "count": 2,
			"status": 503, "message": "try later", "retry_after": 1})
		for _ in range(2):
			status, doc, r = self.call("GET", API + "/queuedResources")
			self.assertEqual(status, 503)
			self.assertEqual(r.getheader("Retry-After"), "1")
			self.assertEqual((doc["error"]["status"],
					  doc["error"]["message"]),
					 ("UNAVAILABLE", "try later"))
		status, _, _ = self.call("GET", API + "/queuedResources")
		self.assertEqual(status, 200)
		self.control("POST", "/_fake/faults", {"status": 429})
		_, doc, _ = self.call("GET", API + "/queuedResources")
		self.assertEqual(doc["error"]["status"], "RESOURCE_EXHAUSTED")
		log = self.requests()
		self.assertEqual([e["status"] for e in log], [503, 503, 200, 429])
		self.assertEqual(log[0]["fault"]["status"], 503)
		self.assertIsNone(log[2]["fault"])

	def test_fault_reset_and_stall(self):
		self.control("POST", "/_fake/faults", [
			{"method": "GET", "path": "nodes", "reset": True},
			{"method": "GET", "path": "operations", "stall": 0.4}])
		with self.assertRaises((ConnectionError, http.client.HTTPException)):
			self.call("GET", API + "/nodes")
		status, _, _ = self.call("GET", API + "/nodes")
		self.assertEqual(status, 200)
		t0 = time.monotonic()
		status, _, _ = self.call("GET", API + "/operations")
		self.assertGreaterEqual(time.monotonic() - t0, 0.4)
		self.assertEqual(status, 200)
		self.assertEqual(self.control("GET", "/_fake/faults"), [
			{"method": "GET", "path": "nodes", "reset": True,
			 "count": 0},
			{"method": "GET", "path": "operations", "stall": 0.4,
			 "count": 0}])

	def test_processed_reset_then_retry_with_request_id(self):
		# The create happens but its answer is lost; the retry with
		# the same requestId gets the same operation, not a 409.
		self.control("POST", "/_fake/faults", {
			"method": "POST", "path": "queuedResources", "reset": True,
			"processed": True})
		with self.assertRaises((ConnectionError, http.client.HTTPException)):
			self.create("lost", request_id=UUID1)
		op = self.create("lost", request_id=UUID1)
		log = self.requests()
		self.assertEqual([(e["method"], e["query"], e["status"])
				  for e in log], [
			("POST", {"queuedResourceId": "lost", "requestId": UUID1},
			 "reset"),
			("POST", {"queuedResourceId": "lost", "requestId": UUID1},
			 200)])
		self.assertEqual(log[1]["body"], qr_body(node_id="lost"))
		self.assertEqual(log[1]["headers"]["authorization"],
				 "Bearer " + TOKEN)
		ops = self.control("GET", "/_fake/state")["operations"]
		self.assertEqual([o["name"] for o in ops], [op["name"]])
		self.control("DELETE", "/_fake/requests")
		self.assertEqual(self.requests(), [])

	# ---- lists

	def test_pagination(self):
		self.assertEqual(self.call("GET", API + "/queuedResources")[1], {})
		ids = ["q%d" % i for i in (3, 1, 4, 5, 2)]
		for qid in ids:
			self.create(qid)
		got, token, pages = [], None, 0
		while True:
			q = "?pageSize=2" + ("&pageToken=" + token if token else "")
			status, doc, _ = self.call("GET", API + "/queuedResources" + q)
			self.assertEqual(status, 200, doc)
			got += [x["name"].rsplit("/", 1)[1] for x in
				doc["queuedResources"]]
			pages += 1
			token = doc.get("nextPageToken")
			if not token:
				break
		self.assertEqual((got, pages), (sorted(ids), 3))
		doc = self.call("GET", API + "/queuedResources")[1]
		self.assertEqual(len(doc["queuedResources"]), 5)
		self.assertNotIn("nextPageToken", doc)
		self.error("GET", API + "/queuedResources?pageToken=%%%", None,
			   400, None, "page_token")
		self.wait_state("q2", "ACTIVE")
		doc = self.call("GET", API + "/nodes?pageSize=4")[1]
		self.assertEqual(len(doc["nodes"]), 4)
		doc = self.call("GET", API + "/nodes?pageSize=4&pageToken=" +
				doc["nextPageToken"])[1]
		self.assertEqual([n["name"] for n in doc["nodes"]],
				 [PARENT + "/nodes/q5"])
		ops = self.call("GET", API + "/operations")[1]["operations"]
		self.assertEqual(len(ops), 5)

	# ---- auth, zones and routes

	def test_auth(self):
		status, doc, r = self.call("GET", API + "/queuedResources",
					   token=None)
		self.assertEqual(status, 401)
		self.assertEqual(doc["error"]["status"], "UNAUTHENTICATED")
		self.assertEqual(doc["error"]["details"][0]["reason"],
				 "CREDENTIALS_MISSING")
		self.assertIn("Bearer", r.getheader("WWW-Authenticate"))
		status, _, _ = self.call("GET", API + "/queuedResources",
					 token="")
		self.assertEqual(status, 401)
		status, _, _ = self.call("GET", API + "/queuedResources",
					 headers={"Authorization": "Basic eDp5"})
		self.assertEqual(status, 401)

	def test_zones_and_unknown_paths(self):
		self.config(zones=["z", "us-central2-b"])
		self.error("GET", "/v2alpha1/projects/p/locations/zz/"
			   "queuedResources", None, 404, "Location projects/p/"
			   "locations/zz not found", grpc="NOT_FOUND")
		status, _, _ = self.call("GET", API + "/queuedResources")
		self.assertEqual(status, 200)
		for method, path in (("GET", "/v2alpha1/nothing"),
				     ("GET", "/v1/" + PARENT + "/queuedResources"),
				     ("PUT", API + "/queuedResources/x"),
				     ("POST", API + "/queuedResources/x:bogus")):
			status, doc, _ = self.call(method, path, {})
			self.assertEqual((status, doc["error"]["status"]),
					 (404, "NOT_FOUND"), (method, path))

if __name__ == "__main__":
	unittest.main(verbosity=2)
