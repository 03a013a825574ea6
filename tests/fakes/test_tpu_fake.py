#!/usr/bin/env python3
"""test_tpu_fake.py: the 'tpu-fake' test. Starts tpu_fake.py on loopback
and checks that it keeps the Cloud TPU API's contract as slicectl relies
on it: the queued resource's walk through its states, node naming and
worker endpoints, every kind of request-body error with Google's exact
message and field path, 404/409 and idempotent retries, delete, reset,
suspend and failures, guest attributes, maintenance events, faults and
the request log, pagination, auth, and that every method of the discovery
document it serves is routed. Intermediate states are held (a negative
delay) while they are checked, so nothing depends on timing luck.
"""

import base64
import datetime
import http.client
import json
import os
import re
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_start  # noqa: E402
import tpu_fake  # noqa: E402  (its tables: SERVED, workers_for)

DISCOVERY = tpu_fake.DEFAULT_DISCOVERY
PARENT = "projects/p/locations/z"
API = "/v2alpha1/" + PARENT
UUID1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
UUID2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
UUID3 = "9b2f4a4e-2d1c-4d5c-8d1e-4b8b0d6a1f00"
TOKEN = "tok"


class Fake:
	"""One tpu_fake.py process on loopback."""

	def __init__(self, *args):
		self.tmp = tempfile.TemporaryDirectory()
		port_file = os.path.join(self.tmp.name, "port")
		self.proc = fake_start.start("tpu_fake.py", port_file, args)
		with open(port_file) as f:
			self.port = int(f.read())

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.tmp.cleanup()

	def call(self, method, path, body=None, token=TOKEN, headers=None,
		 timeout=30):
		"""(status, parsed answer, response) of one request."""
		h = {"Content-Type": "application/json"}
		if token is not None:
			h["Authorization"] = "Bearer " + token
		h.update(headers or {})
		if body is not None and not isinstance(body, (str, bytes)):
			body = json.dumps(body)
		c = http.client.HTTPConnection("127.0.0.1", self.port,
					       timeout=timeout)
		try:
			c.request(method, path, body=body, headers=h)
			r = c.getresponse()
			data = r.read()
		finally:
			c.close()
		return r.status, json.loads(data) if data else None, r


def qr_body(node_id="n1", acc="v4-8", parent=PARENT, count=None,
	    prefix=None, **extra):
	spec = {"parent": parent, "node": {"acceleratorType": acc,
					   "runtimeVersion": "tpu-vm-base"}}
	if count is None:
		spec["nodeId"] = node_id
	else:
		spec["multiNodeParams"] = {"nodeCount": count}
		if prefix:
			spec["multiNodeParams"]["nodeIdPrefix"] = prefix
	body = {"tpu": {"nodeSpec": [spec]}}
	body.update(extra)
	return body


class TpuFakeTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.fake = Fake("--delay", "0.05")

	@classmethod
	def tearDownClass(cls):
		cls.fake.stop()

	def setUp(self):
		self.control("POST", "/_fake/reset")

	# ---- helpers

	def call(self, method, path, body=None, **kw):
		return self.fake.call(method, path, body, **kw)

	def control(self, method, path, body=None, want=200):
		status, doc, _ = self.fake.call(method, path, body, token=None)
		self.assertEqual(status, want, doc)
		return doc

	def config(self, **settings):
		return self.control("POST", "/_fake/config", settings)

	def hold(self, *states):
		self.config(delays={s: -1 for s in states})

	def release(self, *states):
		self.config(delays={s: None for s in states})

	def create(self, qid, body=None, request_id=None, want=200):
		q = "?queuedResourceId=" + qid
		if request_id:
			q += "&requestId=" + request_id
		status, doc, _ = self.call("POST", API + "/queuedResources" + q,
					   body if body is not None else
					   qr_body(node_id=qid))
		self.assertEqual(status, want, doc)
		return doc

	def get(self, kind, ident, want=200):
		status, doc, _ = self.call("GET", "%s/%s/%s" % (API, kind, ident))
		self.assertEqual(status, want, doc)
		return doc

	def state(self, qid):
		return self.get("queuedResources", qid)["state"]

	def wait_state(self, qid, state, timeout=5):
		deadline = time.monotonic() + timeout
		while True:
			status, doc, _ = self.call("GET", API +
						   "/queuedResources/" + qid)
			got = doc["state"]["state"] if status == 200 else status
			if got == state:
				return doc
			if time.monotonic() > deadline:
				self.fail("%s: %s, not %s" % (qid, got, state))
			time.sleep(0.01)

	def wait_op(self, name, timeout=5):
		deadline = time.monotonic() + timeout
		while True:
			status, op, _ = self.call("GET", "/v2alpha1/" + name)
			self.assertEqual(status, 200, op)
			if op.get("done"):
				return op
			if time.monotonic() > deadline:
				self.fail("operation %s not done" % name)
			time.sleep(0.01)

	def active(self, qid, body=None):
		self.create(qid, body)
		return self.wait_state(qid, "ACTIVE")

	def error(self, method, path, body, status, message, field=None,
		  grpc="INVALID_ARGUMENT"):
		"""Checks an error answer (message None: any message) and
		gives its "error" object."""
		got, doc, _ = self.call(method, path, body)
		self.assertEqual(got, status, doc)
		err = doc["error"]
		self.assertEqual((err["code"], err["status"]), (status, grpc))
		if message is not None:
			self.assertEqual(err["message"], message)
		if field is not None:
			bad = err["details"][0]
			self.assertEqual(bad["@type"], "type.googleapis.com/"
					 "google.rpc.BadRequest")
			self.assertEqual(bad["fieldViolations"], [
				{"field": field, "description": err["message"]}])
		return err

	def create_error(self, body, message, field, qid="q", query=""):
		return self.error("POST", API + "/queuedResources?"
				  "queuedResourceId=" + qid + query, body, 400,
				  message, field)

	def requests(self):
		return self.control("GET", "/_fake/requests")

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

	# ---- request bodies

	def test_unknown_field_at_depth(self):
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["fooBar"] = 1
		self.create_error(body, "Invalid JSON payload received. Unknown "
				  "name \"fooBar\" at 'queued_resource.tpu."
				  "node_spec[0].node': Cannot find field.",
				  "queued_resource.tpu.node_spec[0].node")
		self.create_error({"tpuu": {}}, "Invalid JSON payload received. "
				  "Unknown name \"tpuu\" at 'queued_resource': "
				  "Cannot find field.", "queued_resource")

	def test_wrong_types(self):
		body = qr_body(count=2)
		body["tpu"]["nodeSpec"][0]["multiNodeParams"]["nodeCount"] = "abc"
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].multi_node_params.node_count' "
				  "(TYPE_INT32), \"abc\"", "queued_resource.tpu."
				  "node_spec[0].multi_node_params.node_count")
		body["tpu"]["nodeSpec"][0]["multiNodeParams"]["nodeCount"] = \
			2 ** 31
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].multi_node_params.node_count' "
				  "(TYPE_INT32), 2147483648", "queued_resource."
				  "tpu.node_spec[0].multi_node_params.node_count")
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["networkConfig"] = {
			"enableExternalIps": "yes"}
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.network_config."
				  "enable_external_ips' (TYPE_BOOL), \"yes\"",
				  "queued_resource.tpu.node_spec[0].node."
				  "network_config.enable_external_ips")
		self.create_error(qr_body(reservationName=5),
				  "Invalid value at 'queued_resource."
				  "reservation_name' (TYPE_STRING), 5",
				  "queued_resource.reservation_name")
		self.create_error(qr_body(reservationName={"a": 1}),
				  "Invalid value at 'queued_resource."
				  "reservation_name' (TYPE_STRING), Starting an "
				  "object on a scalar field",
				  "queued_resource.reservation_name")
		self.create_error(qr_body(spot="x"), "Invalid value at "
				  "'queued_resource.spot' (type.googleapis.com/"
				  "google.cloud.tpu.v2alpha1.Spot), \"x\"",
				  "queued_resource.spot")
		self.create_error(qr_body(reservationName=["a"]),
				  "Invalid JSON payload received. Unknown name "
				  "\"reservationName\" at 'queued_resource': "
				  "Proto field is not repeating, cannot start "
				  "list.", "queued_resource")
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["tags"] = ["a", 7]
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.tags[1]' (TYPE_STRING), 7",
				  "queued_resource.tpu.node_spec[0].node.tags[1]")
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["labels"] = {"a": "b",
								"c": 5}
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.labels[1].value' "
				  "(TYPE_STRING), 5", "queued_resource.tpu."
				  "node_spec[0].node.labels[1].value")

	def test_accepted_spellings(self):
		# int32 as a decimal string, snake_case names, int64 as a
		# string, nulls: all as the real API takes them.
		body = qr_body(count=2)
		spec = body["tpu"]["nodeSpec"][0]
		spec["multi_node_params"] = spec.pop("multiNodeParams")
		spec["multi_node_params"]["node_count"] = "2"
		del spec["multi_node_params"]["nodeCount"]
		spec["node"]["description"] = None
		spec["node"]["networkConfig"] = {"queueCount": 2.0}
		body["queueingPolicy"] = {
			"validUntilDuration": "3600s",
			"validAfterTime": "2030-01-02T03:04:05.123456789+01:00"}
		self.create("spell", body)
		qr = self.get("queuedResources", "spell")
		spec = qr["tpu"]["nodeSpec"][0]
		self.assertEqual(spec["multiNodeParams"], {"nodeCount": 2})
		self.assertNotIn("description", spec["node"])
		self.assertEqual(spec["node"]["networkConfig"], {"queueCount": 2})
		self.assertEqual(qr["queueingPolicy"]["validUntilDuration"],
				 "3600s")

	def test_bad_enum_duration_and_time(self):
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["health"] = "FOO"
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.health' (type.googleapis.com/"
				  "google.cloud.tpu.v2alpha1.Node.Health), \"FOO\"",
				  "queued_resource.tpu.node_spec[0].node.health")
		body = qr_body()
		body["tpu"]["nodeSpec"][0]["node"]["dataDisks"] = [{"mode": "RW"}]
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.data_disks[0].mode' "
				  "(type.googleapis.com/google.cloud.tpu.v2alpha1."
				  "AttachedDisk.DiskMode), \"RW\"",
				  "queued_resource.tpu.node_spec[0].node."
				  "data_disks[0].mode")
		for bad in ("5m", "1.5", "s", "1.0123456789s"):
			self.create_error(qr_body(guaranteed={"minDuration": bad}),
					  "Invalid value at 'queued_resource."
					  "guaranteed.min_duration' (type."
					  "googleapis.com/google.protobuf."
					  "Duration), \"%s\"" % bad,
					  "queued_resource.guaranteed.min_duration")
		for bad in ("2030-01-02 03:04:05Z", "2030-02-30T00:00:00Z",
			    "2030-01-02T03:04:05"):
			self.create_error(qr_body(queueingPolicy={
				"validUntilTime": bad}), "Invalid value at "
				"'queued_resource.queueing_policy."
				"valid_until_time' (type.googleapis.com/"
				"google.protobuf.Timestamp), \"%s\"" % bad,
				"queued_resource.queueing_policy.valid_until_time")

	def test_several_errors_at_once(self):
		body = qr_body()
		body["x"] = 1
		body["spot"] = 2
		_, doc, _ = self.call("POST", API + "/queuedResources?"
				      "queuedResourceId=q", body)
		v = doc["error"]["details"][0]["fieldViolations"]
		self.assertEqual([f["field"] for f in v],
				 ["queued_resource", "queued_resource.spot"])
		self.assertEqual(doc["error"]["message"], "\n".join(
			f["description"] for f in v))

	def test_read_only_fields_ignored_and_recorded(self):
		body = qr_body(name="projects/x/locations/y/queuedResources/z",
			       state={"state": "ACTIVE"})
		node = body["tpu"]["nodeSpec"][0]["node"]
		node["networkEndpoints"] = [{"ipAddress": "10.0.0.1"}]
		node["state"] = "READY"
		self.create("ro", body)
		log = self.requests()[-1]
		self.assertEqual(sorted(log["ignored"]), [
			"queued_resource.name", "queued_resource.state",
			"queued_resource.tpu.node_spec[0].node.network_endpoints",
			"queued_resource.tpu.node_spec[0].node.state"])
		self.assertEqual(log["body"], body)
		qr = self.get("queuedResources", "ro")
		self.assertEqual(qr["name"], PARENT + "/queuedResources/ro")
		self.assertEqual(qr["tpu"], qr_body()["tpu"])
		# A read-only field of the wrong type is still an error.
		node["id"] = str(2 ** 63)
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.id' (TYPE_INT64), "
				  "\"9223372036854775808\"", "queued_resource.tpu."
				  "node_spec[0].node.id", qid="ro2")
		ok = qr_body(node_id="n3")
		ok["tpu"]["nodeSpec"][0]["node"]["id"] = 2 ** 63 - 1
		self.create("ro3", ok)
		self.assertEqual(self.requests()[-1]["ignored"], [
			"queued_resource.tpu.node_spec[0].node.id"])
		del node["id"]
		node["state"] = "BOGUS"
		self.create_error(body, "Invalid value at 'queued_resource.tpu."
				  "node_spec[0].node.state' (type.googleapis.com/"
				  "google.cloud.tpu.v2alpha1.Node.State), "
				  "\"BOGUS\"", "queued_resource.tpu.node_spec[0]."
				  "node.state", qid="ro2")

	def test_whole_request_bodies_and_binding(self):
		# A body that is the whole request message (body "*") roots
		# its paths at nothing, as Google's parser does.
		self.active("ga")
		path = API + "/nodes/ga:getGuestAttributes"
		self.error("POST", path, {"workerIds": [1]}, 400,
			   "Invalid value at 'worker_ids[0]' (TYPE_STRING), 1",
			   "worker_ids[0]")
		self.error("POST", path, {"queryPaht": "x"}, 400,
			   "Invalid JSON payload received. Unknown name "
			   "\"queryPaht\": Cannot find field.")
		self.error("POST", path, "[1]", 400, "Invalid JSON payload "
			   "received. Unknown name \"\": Root element must be a "
			   "message.")
		err = self.error("POST", path, "{bad", 400, None)
		self.assertTrue(err["message"].startswith(
			"Invalid JSON payload received. Unexpected token."))
		self.error("GET", API + "/queuedResources?foo=1", None, 400,
			   "Invalid JSON payload received. Unknown name \"foo\": "
			   "Cannot bind query parameter. Field 'foo' could not "
			   "be found in request message.")
		self.error("GET", API + "/queuedResources?pageSize=x", None, 400,
			   "Invalid value at 'page_size' (TYPE_INT32), \"x\"",
			   "page_size")
		self.error("DELETE", API + "/queuedResources/ga?force=yes", None,
			   400, "Invalid value at 'force' (TYPE_BOOL), \"yes\"",
			   "force")
		# A JSON body sent as a form (curl's default content type).
		status, doc, _ = self.call(
			"POST", API + "/queuedResources?queuedResourceId=f",
			json.dumps(qr_body()), headers={
				"Content-Type": "application/x-www-form-urlencoded"})
		self.assertEqual(status, 400)
		self.assertIn("Cannot bind query parameter",
			      doc["error"]["message"])
		# Global parameters are bound too.
		status, _, _ = self.call("GET", API + "/queuedResources?"
					 "alt=json&prettyPrint=false")
		self.assertEqual(status, 200)

	def test_create_semantics(self):
		def spec(body):
			return body["tpu"]["nodeSpec"][0]
		sp = "queued_resource.tpu.node_spec[0]"
		cases = []
		cases.append(({}, "queued_resource.tpu",
			      "Field 'queued_resource.tpu' is required."))
		b = qr_body()
		b["tpu"]["nodeSpec"].append(spec(qr_body(node_id="n2")))
		cases.append((b, "queued_resource.tpu.node_spec", None))
		cases.append((qr_body(parent="projects/p/locations/other"),
			      sp + ".parent", None))
		b = qr_body()
		spec(b)["multiNodeParams"] = {"nodeCount": 2}
		cases.append((b, sp, "Invalid value for field '%s': exactly "
			      "one of node_id and multi_node_params must be "
			      "set." % sp))
		cases.append((qr_body(count=1), sp + ".multi_node_params."
			      "node_count", None))
		cases.append((qr_body(node_id="Bad_Id"), sp + ".node_id", None))
		b = qr_body()
		del spec(b)["node"]
		cases.append((b, sp + ".node", None))
		b = qr_body()
		del spec(b)["node"]["acceleratorType"]
		cases.append((b, sp + ".node.accelerator_type", None))
		cases.append((qr_body(acc="v9-8"), sp + ".node.accelerator_type",
			      None))
		b = qr_body()
		del spec(b)["node"]["runtimeVersion"]
		cases.append((b, sp + ".node.runtime_version", None))
		cases.append((qr_body(spot={}, bestEffort={}),
			      "queued_resource.best_effort", None))
		cases.append((qr_body(reservationName="r1"),
			      "queued_resource.reservation_name", None))
		b = qr_body()
		spec(b)["node"]["labels"] = {"Bad": "x"}
		cases.append((b, sp + ".node.labels[0]", None))
		b = qr_body()
		spec(b)["node"]["metadata"] = {"startup-script": "x" * 300000}
		cases.append((b, sp + ".node.metadata[0]", None))
		for body, field, message in cases:
			status, doc, _ = self.call("POST", API + "/queuedResources"
						   "?queuedResourceId=q", body)
			self.assertEqual(status, 400, (field, doc))
			err = doc["error"]
			self.assertEqual(err["status"], "INVALID_ARGUMENT")
			self.assertIn("'%s'" % field, err["message"])
			self.assertEqual(err["details"][0]["fieldViolations"][0][
				"field"], field)
			if message:
				self.assertEqual(err["message"], message)
		for qid in ("Upper", "trailing-", "9digit", "a" * 64):
			status, doc, _ = self.call("POST", API + "/queuedResources"
						   "?queuedResourceId=" + qid,
						   qr_body())
			self.assertEqual(status, 400, qid)
			self.assertEqual(doc["error"]["details"][0][
				"fieldViolations"][0]["field"],
				"queued_resource_id")
		self.create("a" * 63, qr_body())
		self.create_error(qr_body(node_id="n9"), "Invalid value for "
				  "field 'request_id': \"nope\" is not a UUID.",
				  "request_id", qid="q9", query="&requestId=nope")

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

	# ---- the API as gcloud 528 knows it

	def test_gcloud_528_bodies(self):
		"""The bodies gcloud 528 sends (research/gke.md 4.1, captured
		from it) and the ones slicectl renders for each provisioning
		model are accepted as they are."""
		node = {"acceleratorType": "v6e-16", "autocheckpointEnabled":
			False, "metadata": {}, "networkConfig": {
				"enableExternalIps": True, "network": "default"},
			"runtimeVersion": "v2-alpha-tpuv6e", "serviceAccount": {}}
		spec = {"multiNodeParams": {"nodeCount": 2, "nodeIdPrefix": "ms"},
			"node": node, "parent": PARENT}
		flex = {"provisioningModel": "FLEX_START", "queueingPolicy": {
			"validUntilDuration": "21600s"}, "runDuration": {
				"maxRunDuration": "259200s"}, "tpu": {"nodeSpec": [spec]}}
		self.create("qr-flex", flex)
		qr = self.get("queuedResources", "qr-flex")
		self.assertEqual((qr["provisioningModel"], qr["runDuration"]),
				 ("FLEX_START", {"maxRunDuration": "259200s"}))
		alpha_spot = dict(qr_body("as"), provisioningModel="STANDARD",
				  spot={})
		self.create("as", alpha_spot)
		self.create("gs", qr_body("gs", spot={}))
		for qid, extra in (
				("std", {"provisioningModel": "STANDARD"}),
				("sp", {"provisioningModel": "SPOT", "spot": {}}),
				("rb", {"provisioningModel": "RESERVATION_BOUND",
					"guaranteed": {"reserved": True},
					"reservationName": PARENT +
					"/reservations/r"})):
			self.create(qid, qr_body(qid, **extra))
		for acc in ("v6e-8", "tpu7x-16", "v5p-8"):
			qid = acc.replace("-", "x")
			self.create(qid, qr_body(qid, acc=acc))
		body = qr_body("cfg")
		del body["tpu"]["nodeSpec"][0]["node"]["acceleratorType"]
		body["tpu"]["nodeSpec"][0]["node"]["acceleratorConfig"] = {
			"type": "V6E", "topology": "4x4"}
		self.create("cfg", body)
		self.wait_state("cfg", "ACTIVE")
		n = self.get("nodes", "cfg")
		self.assertEqual((n["acceleratorType"],
				  len(n["networkEndpoints"])), ("v6e-16", 4))

	def test_provisioning_refusals(self):
		run = {"maxRunDuration": "3600s"}
		root = "queued_resource"
		self.create_error(qr_body(provisioningModel="FLEX_START"),
				  "Field '%s.run_duration.max_run_duration' is "
				  "required." % root,
				  root + ".run_duration.max_run_duration")
		self.create_error(qr_body(provisioningModel="FLEX_START",
					  runDuration=run, spot={}),
				  "Invalid value for field '%s.spot': FLEX_START "
				  "capacity takes no spot." % root, root + ".spot")
		self.create_error(qr_body(provisioningModel="FLEX_START",
					  runDuration=run, reservationName=PARENT +
					  "/reservations/r"), None,
				  root + ".reservation_name")
		self.create_error(qr_body(runDuration=run), None,
				  root + ".run_duration")
		self.create_error(qr_body(provisioningModel="FLEX_START",
					  runDuration={"maxRunDuration": "604801s"}),
				  None, root + ".run_duration.max_run_duration")
		self.create_error(qr_body(provisioningModel="SPOT",
					  guaranteed={"reserved": True}), None,
				  root + ".provisioning_model")
		self.create_error(qr_body(provisioningModel="RESERVATION_BOUND",
					  spot={}), None, root + ".provisioning_model")
		# A duration is "Ns", as proto3 JSON writes it, never "72h".
		self.create_error(qr_body(provisioningModel="FLEX_START",
					  runDuration={"maxRunDuration": "72h"}),
				  "Invalid value at '%s.run_duration.max_run_"
				  "duration' (type.googleapis.com/google.protobuf."
				  "Duration), \"72h\"" % root,
				  root + ".run_duration.max_run_duration")
		self.create_error(qr_body(provisioningModel="FLEX"), None,
				  root + ".provisioning_model")

	def test_flex_start_run_ends(self):
		self.hold("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES",
			  "PROVISIONING", "SUSPENDING")
		body = qr_body("fx", count=2, provisioningModel="FLEX_START",
			       runDuration={"maxRunDuration": "600s",
					    "terminationTime":
					    "2030-01-01T00:00:00Z"})
		self.create("fx", body)
		# terminationTime is output only: dropped and recorded.
		self.assertEqual(self.requests()[-1]["ignored"], [
			"queued_resource.run_duration.termination_time"])
		for state in ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"):
			qr = self.wait_state("fx", state)
			self.assertEqual(qr["runDuration"],
					 {"maxRunDuration": "600s"})
			self.release(state)
		self.wait_state("fx", "PROVISIONING")
		t0 = time.time()
		self.release("PROVISIONING")
		qr = self.wait_state("fx", "ACTIVE")
		end = datetime.datetime.fromisoformat(qr["runDuration"][
			"terminationTime"].replace("Z", "+00:00")).timestamp()
		self.assertAlmostEqual(end, t0 + 600, delta=5)
		# A reset keeps the run's end.
		self.call("POST", API + "/queuedResources/fx:reset", {})
		qr = self.control("POST", "/_fake/end_run", {"name": "fx"})
		self.assertEqual(qr["state"], {"state": "SUSPENDING",
					       "stateInitiator": "SERVICE",
					       "suspendingData": {}})
		self.assertEqual(self.get("nodes", "fx-0")["state"], "DELETING")
		self.release("SUSPENDING")
		qr = self.wait_state("fx", "SUSPENDED")
		self.assertEqual(qr["state"]["stateInitiator"], "SERVICE")
		self.assertIn("terminationTime", qr["runDuration"])
		self.get("nodes", "fx-0", want=404)
		self.get("nodes", "fx-1", want=404)
		# SUSPENDED: deletable without force.
		status, _, _ = self.call("DELETE", API + "/queuedResources/fx")
		self.assertEqual(status, 200)

	def test_flex_start_run_ends_on_time(self):
		self.create("ft", qr_body("ft", provisioningModel="FLEX_START",
					  runDuration={"maxRunDuration": "1s"}))
		qr = self.wait_state("ft", "ACTIVE")
		self.assertIn("terminationTime", qr["runDuration"])
		self.wait_state("ft", "SUSPENDED", timeout=10)
		self.get("nodes", "ft", want=404)

	def test_upcoming_and_perform_maintenance(self):
		self.active("mq", qr_body("mq", count=2))
		window = {"type": "SCHEDULED", "canReschedule": True,
			  "windowStartTime": "2030-01-01T00:00:00Z",
			  "windowEndTime": "2030-01-01T06:00:00Z",
			  "latestWindowStartTime": "2030-01-03T00:00:00Z",
			  "maintenanceStatus": "PENDING"}
		path = API + "/queuedResources/mq:performMaintenanceQueuedResource"
		self.error("POST", path, {}, 400, None,
			   grpc="FAILED_PRECONDITION")
		node = self.control("POST", "/_fake/node", {
			"name": "mq-1", "upcomingMaintenance": window})
		self.assertEqual(node["upcomingMaintenance"], window)
		self.assertEqual(self.get("nodes", "mq-1")["upcomingMaintenance"],
				 window)
		self.assertNotIn("upcomingMaintenance", self.get("nodes", "mq-0"))
		self.control("POST", "/_fake/node", {
			"name": "mq-1", "upcomingMaintenance": {"type": "X"}},
			want=400)
		self.error("POST", path, {"nodeNames": ["mq-9"]}, 400, None,
			   "node_names[0]")
		self.error("POST", path, {"nodeNames": ["mq-0"]}, 400, None,
			   grpc="FAILED_PRECONDITION")
		self.error("POST", path, {"nodeNames": "mq-1"}, 400, None)
		self.hold("MAINTENANCE")
		status, op, _ = self.call("POST", path, {"nodeNames": [
			PARENT + "/nodes/mq-1"]})
		self.assertEqual(status, 200, op)
		self.assertEqual(op["metadata"]["verb"],
				 "performMaintenanceQueuedResource")
		n = self.get("nodes", "mq-1")
		self.assertEqual((n["upcomingMaintenance"]["maintenanceStatus"],
				  n["health"]), ("ONGOING", "UNHEALTHY_MAINTENANCE"))
		self.assertEqual(self.control("GET", "/_fake/maintenance")[-1][
			"kind"], "performMaintenance")
		self.release("MAINTENANCE")
		done = self.wait_op(op["name"])
		self.assertEqual(done["response"]["name"], PARENT +
				 "/queuedResources/mq")
		n = self.get("nodes", "mq-1")
		self.assertNotIn("upcomingMaintenance", n)
		self.assertEqual(n["health"], "HEALTHY")

	def test_node_state_unknown(self):
		self.active("un", qr_body("un"))
		self.control("POST", "/_fake/node", {"name": "un",
						     "state": "UNKNOWN"})
		n = self.get("nodes", "un")
		self.assertEqual(n["state"], "UNKNOWN")
		self.assertNotIn("health", n)
		self.control("POST", "/_fake/node", {"name": "un", "state": "BAD"},
			     want=400)
		self.control("POST", "/_fake/node", {"name": "un", "state": None})
		self.assertEqual(self.get("nodes", "un")["state"], "READY")

	def test_rest_client_query_parameters(self):
		"""What Google's REST clients put in the query: google-gax's
		$alt (enum encoding) and apitools' bools as "True"."""
		self.create("ra", qr_body("ra"), want=200)
		status, doc, _ = self.call("POST", API + "/queuedResources?"
					   "queuedResourceId=rb&%24alt=json%3B"
					   "enum-encoding%3Dint", qr_body("rb"))
		self.assertEqual(status, 200, doc)
		status, doc, _ = self.call("GET", API + "/queuedResources?"
					   "%24alt=xml")
		self.assertEqual(status, 400, doc)
		self.wait_state("ra", "ACTIVE")
		status, doc, _ = self.call("DELETE", API + "/queuedResources/ra?"
					   "force=True")
		self.assertEqual(status, 200, doc)

	def test_every_served_method_is_routed(self):
		disco = tpu_fake.Discovery(DISCOVERY, tpu_fake.DEFAULT_SCHEMAS)
		seen = set()
		for m in [m.doc for m in disco.methods]:
			if m["id"].split(".")[3] in ("queuedResources", "nodes",
						     "operations"):
				short = m["id"].split(".", 3)[-1]
				path = "/" + re.sub(r"\{(\w+)\}", lambda mo: {
					"projectsId": "p", "locationsId": "z"}.get(
						mo.group(1), "x"), m["flatPath"])
				body = {} if "request" in m else None
				status, doc, _ = self.call(m["httpMethod"], path, body)
				if short in tpu_fake.SERVED:
					seen.add(short)
					self.assertNotEqual(status, 501, short)
					if status == 404:
						self.assertIn("Resource '", doc["error"][
							"message"], short)
				else:
					self.assertEqual(status, 501, (short, doc))
					self.assertEqual(doc["error"]["status"],
							 "UNIMPLEMENTED")
		self.assertEqual(seen, set(tpu_fake.SERVED))


class SecondFakeTest(unittest.TestCase):
	"""A fake started with --require-token and its own discovery
	document (and no newer schemas): the token is checked, and the schema
	is the document's."""

	def test_token_and_discovery(self):
		with open(DISCOVERY) as f:
			doc = json.load(f)
		doc["schemas"]["Node"]["properties"]["fooBar"] = {
			"type": "integer", "format": "int32"}
		with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
			json.dump(doc, f)
			f.flush()
			fake = Fake("--require-token", "secret", "--discovery", f.name,
				    "--schemas", "", "--delay", "0")
			try:
				status, _, _ = fake.call("GET", API + "/nodes",
							 token="other")
				self.assertEqual(status, 401)
				body = qr_body()
				body["tpu"]["nodeSpec"][0]["node"]["fooBar"] = 3
				status, doc, _ = fake.call(
					"POST", API + "/queuedResources?"
					"queuedResourceId=q", body, token="secret")
				self.assertEqual(status, 200, doc)
				body["tpu"]["nodeSpec"][0]["node"]["fooBar"] = "x"
				status, doc, _ = fake.call(
					"POST", API + "/queuedResources?"
					"queuedResourceId=q2", body, token="secret")
				self.assertEqual(status, 400)
				self.assertIn("node.foo_bar' (TYPE_INT32)",
					      doc["error"]["message"])
			finally:
				fake.stop()


if __name__ == "__main__":
	unittest.main(verbosity=2)
