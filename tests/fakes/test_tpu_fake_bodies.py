#!/usr/bin/env python3
"""test_tpu_fake_bodies.py: the 'tpu-fake-bodies' test. Starts
tpu_fake.py on loopback and checks its request bodies as the Cloud TPU
API checks them: every kind of error with Google's exact message and field
path, accepted spellings, read-only fields, whole bodies and their
binding; the API as gcloud 528 knows it (provisioning, flex-start, node
states, maintenance, the REST client's query parameters), that every
method of the discovery document it serves is routed, and a fake with its
own discovery document and a required token. The fake and the helpers
are fake_testing.py's.
"""

import datetime
import json
import os
import re
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tpu_fake  # noqa: E402  (its tables: SERVED, Discovery)
from fake_testing import (  # noqa: E402
	API, DISCOVERY, PARENT, TpuFakeCase, qr_body)
from fake_testing import TpuFake as Fake  # noqa: E402


class TpuFakeBodiesTest(TpuFakeCase):
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
