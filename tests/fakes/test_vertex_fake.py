#!/usr/bin/env python3
"""test_vertex_fake.py: the 'vertex-fake' test. Starts vertex_fake.py on
loopback and checks its custom jobs: the calls, body checks and errors;
replicas as processes with CLUSTER_SPEC; restarts, VM loss, maintenance,
Spot preemption, FLEX_START waits and cancel as Vertex documents them.
Every replica is a short shell script; the fake kills what is left when
it stops."""

import http.client
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_testing import FakeProcess  # noqa: E402

PARENT = "/v1/projects/p/locations/us-central1"
TOKEN = "tok"


class VertexFake(FakeProcess):
	def __init__(self, *args):
		super().__init__()
		self.port, = self.start("vertex_fake.py", list(args))

	def call(self, method, path, body=None, token=TOKEN):
		h = {"Content-Type": "application/json"}
		if token:
			h["Authorization"] = "Bearer " + token
		r, data = self.exchange(http.client.HTTPConnection(
			"127.0.0.1", self.port, timeout=30), method, path, body, h)
		return r.status, json.loads(data) if data else None


def pool(script, replicas=1, env=None):
	c = {"imageUri": "us-docker.pkg.dev/p/r/trainer:1",
	     "command": ["/bin/sh", "-c", script]}
	if env:
		c["env"] = [{"name": k, "value": v} for k, v in env.items()]
	return {"machineSpec": {"machineType": "n1-standard-4"},
		"replicaCount": str(replicas), "containerSpec": c}


def job(*pools, **scheduling):
	spec = {"workerPoolSpecs": list(pools)}
	if scheduling:
		spec["scheduling"] = scheduling
	return {"displayName": "t", "jobSpec": spec}


class VertexFakeTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.fake = VertexFake("--delay", "0.05")

	@classmethod
	def tearDownClass(cls):
		cls.fake.stop()

	def setUp(self):
		self.fake.call("POST", "/_fake/reset")
		self.fake.call("POST", "/_fake/config", {"grace": 0.3})

	def create(self, body):
		status, doc = self.fake.call("POST", PARENT + "/customJobs", body)
		self.assertEqual(status, 200, doc)
		self.assertEqual(doc["state"], "JOB_STATE_QUEUED")
		return doc["name"]

	def wait(self, name, states, seconds=20):
		end = time.monotonic() + seconds
		while True:
			status, doc = self.fake.call("GET", "/v1/" + name)
			self.assertEqual(status, 200, doc)
			if doc["state"] in states:
				return doc
			if time.monotonic() > end:
				self.fail("%s stayed %s" % (name, doc["state"]))
			time.sleep(0.05)

	def replicas(self, name):
		_, st = self.fake.call("GET", "/_fake/state")
		for j in st["jobs"]:
			if j["name"] == name:
				return j["replicas"]
		self.fail("no %s in the state" % name)

	def wait_replica(self, name, cond, seconds=20):
		end = time.monotonic() + seconds
		while time.monotonic() < end:
			rs = self.replicas(name)
			if rs and cond(rs):
				return rs
			time.sleep(0.05)
		self.fail("replicas of %s: %s" % (name, self.replicas(name)))

	def log(self, replica):
		with open(replica["log"]) as f:
			return f.read()

	# ---- the calls

	def test_create_get_list_cancel_delete(self):
		name = self.create(job(pool("sleep 30")))
		self.assertRegex(name, r"^projects/p/locations/us-central1/"
				 r"customJobs/\d{19}$")
		doc = self.wait(name, ("JOB_STATE_RUNNING",))
		self.assertIn("startTime", doc)
		other = self.create(job(pool("exit 0")))
		self.wait(other, ("JOB_STATE_SUCCEEDED",))
		status, page = self.fake.call("GET", PARENT +
					      "/customJobs?pageSize=1")
		self.assertEqual(status, 200, page)
		self.assertEqual(len(page["customJobs"]), 1)
		status, rest = self.fake.call("GET", PARENT + "/customJobs?"
					      "pageToken=" + page["nextPageToken"])
		self.assertEqual([j["name"] for j in page["customJobs"] +
				  rest["customJobs"]], sorted([name, other]))
		status, running = self.fake.call(
			"GET", PARENT + '/customJobs?filter=state%3D'
			'%22JOB_STATE_RUNNING%22')
		self.assertEqual([j["name"] for j in running["customJobs"]],
				 [name])
		status, err = self.fake.call("DELETE", "/v1/" + name)
		self.assertEqual((status, err["error"]["status"]),
				 (400, "FAILED_PRECONDITION"))
		status, doc = self.fake.call("POST", "/v1/" + name + ":cancel", {})
		self.assertEqual((status, doc), (200, {}))
		doc = self.wait(name, ("JOB_STATE_CANCELLED",))
		self.assertEqual(doc["error"], {"code": 1, "message": "CANCELED"})
		self.assertFalse(self.replicas(name)[0]["running"])
		status, op = self.fake.call("DELETE", "/v1/" + name)
		self.assertEqual(status, 200, op)
		self.assertTrue(op["done"])
		status, again = self.fake.call("GET", "/v1/" + op["name"])
		self.assertEqual(again, op)
		status, err = self.fake.call("GET", "/v1/" + name)
		self.assertEqual((status, err["error"]["status"]),
				 (404, "NOT_FOUND"))

	def test_bodies(self):
		status, err = self.fake.call("POST", PARENT + "/customJobs",
					     dict(job(pool("true")), bogus=1))
		self.assertEqual(status, 400)
		self.assertEqual(err["error"]["message"], "Invalid JSON payload "
				 "received. Unknown name \"bogus\" at "
				 "'custom_job': Cannot find field.")
		self.assertEqual(err["error"]["status"], "INVALID_ARGUMENT")
		bad = job(pool("true"), strategy="CHEAP")
		status, err = self.fake.call("POST", PARENT + "/customJobs", bad)
		self.assertIn("(type.googleapis.com/google.cloud.aiplatform.v1."
			      "Scheduling.Strategy), \"CHEAP\"",
			      err["error"]["message"])
		status, err = self.fake.call("POST", PARENT + "/customJobs",
					     {"jobSpec": {"workerPoolSpecs": [
						     {"replicaCount": "1"}]}})
		self.assertEqual(status, 400)
		self.assertTrue(err["error"]["message"].startswith(
			"List of found errors:\t1.Field: custom_job.display_name; "
			"Message: Required field is not set.\t"), err)
		two = job(pool("true", replicas=2))
		status, err = self.fake.call("POST", PARENT + "/customJobs", two)
		self.assertEqual(status, 400, err)
		# Output-only fields are dropped, not refused.
		status, doc = self.fake.call("POST", PARENT + "/customJobs", dict(
			job(pool("true")), state="JOB_STATE_SUCCEEDED",
			name="x"))
		self.assertEqual(status, 200, doc)
		self.assertEqual(doc["state"], "JOB_STATE_QUEUED")
		status, err = self.fake.call("POST", PARENT + "/customJobs",
					     job(pool("true")), token=None)
		self.assertEqual((status, err["error"]["status"]),
				 (401, "UNAUTHENTICATED"))
		status, err = self.fake.call("GET", PARENT + "/customJobs?x=1")
		self.assertEqual(status, 400, err)

	# ---- replicas

	def test_cluster_spec_and_success(self):
		dump = 'printf "%s\\n" "$CLUSTER_SPEC"; echo "AIP=$AIP_MODEL_DIR ' \
			'M=$MASTER_ADDR:$MASTER_PORT R=$RANK W=$WORLD_SIZE ' \
			'X=$X"; '
		body = job(pool(dump + "sleep 0.5", env={"X": "y"}),
			   pool(dump + "sleep 30", replicas=2))
		body["jobSpec"]["baseOutputDirectory"] = {
			"outputUriPrefix": "gs://b/out"}
		name = self.create(body)
		doc = self.wait(name, ("JOB_STATE_SUCCEEDED",))
		self.assertIn("endTime", doc)
		rs = self.replicas(name)
		self.assertEqual([(r["pool"], r["index"]) for r in rs],
				 [(0, 0), (1, 0), (1, 1)])
		self.assertEqual(len({r["port"] for r in rs}), 3)
		self.assertFalse(any(r["running"] for r in rs))
		lines = self.log(rs[2]).splitlines()
		spec = json.loads(lines[0])
		self.assertEqual(spec["cluster"], {
			"workerpool0": ["127.0.0.1:%d" % rs[0]["port"]],
			"workerpool1": ["127.0.0.1:%d" % r["port"] for r in rs[1:]]})
		self.assertEqual(spec["task"], {"type": "workerpool1", "index": 1})
		self.assertEqual(spec["environment"], "cloud")
		self.assertEqual(spec["job"]["baseOutputDirectory"],
				 {"outputUriPrefix": "gs://b/out"})
		self.assertEqual(lines[1], "AIP=gs://b/out/model/ M=127.0.0.1:%d "
				 "R=2 W=3 X=" % rs[0]["port"])
		self.assertTrue(self.log(rs[0]).splitlines()[1].endswith(" X=y"))

	def test_worker_restarts_then_job_retries_then_failure(self):
		self.fake.call("POST", "/_fake/config", {"worker_restarts": 2,
							 "job_retries": 1})
		name = self.create(job(pool("sleep 30"), pool("exit 3")))
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertEqual(doc["error"]["code"], 3)
		self.assertTrue(doc["error"]["message"].startswith(
			"The replica workerpool1-0 exited with a non-zero status "
			"of 3."), doc)
		rs = self.replicas(name)
		# 1 + 2 restarts, twice (the job's one retry).
		self.assertEqual(rs[1]["starts"], 6)
		self.assertEqual(rs[0]["starts"], 2)
		self.assertFalse(rs[0]["running"])

	def test_permanent_exit_fails_at_once(self):
		self.fake.call("POST", "/_fake/config",
			       {"permanent_exit_codes": [7]})
		name = self.create(job(pool("exit 7")))
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertIn("non-zero status of 7", doc["error"]["message"])
		self.assertEqual(self.replicas(name)[0]["starts"], 1)

	def test_restart_job_on_worker_restart(self):
		name = self.create(job(pool("sleep 30"), pool(
			'test -e again || { touch again; exit 1; }; sleep 30'),
			restartJobOnWorkerRestart=True))
		rs = self.wait_replica(name, lambda rs: rs[0]["starts"] == 2)
		self.assertEqual(rs[1]["starts"], 2)
		self.assertTrue(all(r["running"] for r in rs))

	# ---- chaos

	def test_lost_vm_and_maintenance(self):
		# Time to answer SIGTERM on a loaded machine.
		self.fake.call("POST", "/_fake/config", {"grace": 5})
		name = self.create(job(pool("sleep 30"), pool(
			"trap 'echo TERM; exit 0' TERM; echo up; sleep 30 & wait")))
		self.wait_replica(name, lambda rs: "up" in self.log(rs[1]))
		status, doc = self.fake.call("POST", "/_fake/lose_vm", {
			"name": name, "pool": 1, "replica": 0})
		self.assertEqual(status, 200, doc)
		rs = self.wait_replica(name, lambda rs: rs[1]["starts"] == 2 and
				       rs[1]["running"])
		self.assertEqual(rs[0]["starts"], 1)
		old = rs[1]["pid"]
		self.assertNotEqual(old, rs[0]["pid"])
		# SIGTERM once the new shell has its trap.
		self.wait_replica(name, lambda rs: self.log(rs[1]).count(
			"up") == 2)
		self.fake.call("POST", "/_fake/maintenance", {
			"name": name, "pool": 1, "replica": 0})
		rs = self.wait_replica(name, lambda rs: rs[1]["starts"] == 3 and
				       rs[1]["running"])
		self.assertIn("TERM", self.log(rs[1]))
		self.assertEqual(self.wait(name, ("JOB_STATE_RUNNING",))["state"],
				 "JOB_STATE_RUNNING")

	def test_lost_vm_without_retries_fails(self):
		name = self.create(job(pool("sleep 30"), disableRetries=True))
		self.wait(name, ("JOB_STATE_RUNNING",))
		self.fake.call("POST", "/_fake/lose_vm", {"name": name})
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertEqual(doc["error"]["code"], 13)

	def test_spot_preemption(self):
		# Time to answer SIGTERM on a loaded machine.
		self.fake.call("POST", "/_fake/config", {"grace": 5})
		# Each replica exits 143 after its emergency checkpoint, the
		# worker later than the primary: neither exit is a worker
		# failure, so nothing restarts, though every worker restart
		# would restart both.
		trap = "trap 'echo TERM; %sexit 143' TERM; echo up; " \
			"sleep 30 & wait"
		name = self.create(job(pool(trap % ""), pool(trap % "sleep 0.5; "),
				       strategy="SPOT",
				       restartJobOnWorkerRestart=True))
		self.wait_replica(name, lambda rs: all(
			"up" in self.log(r) for r in rs))
		status, doc = self.fake.call("POST", "/_fake/preempt",
					     {"name": name})
		self.assertEqual(status, 200, doc)
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertEqual(doc["error"], {"code": 14, "message": "The "
				 "job's Spot VMs were preempted (STOCKOUT)."})
		rs = self.replicas(name)
		self.assertEqual([r["starts"] for r in rs], [1, 1])
		self.assertFalse(any(r["running"] for r in rs))
		self.assertTrue(all("TERM" in self.log(r) for r in rs))
		other = self.create(job(pool("sleep 30")))
		self.wait(other, ("JOB_STATE_RUNNING",))
		status, _ = self.fake.call("POST", "/_fake/preempt",
					   {"name": other})
		self.assertEqual(status, 400)

	def test_timeout_and_faults(self):
		name = self.create(job(pool("sleep 30"), timeout="0.5s"))
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertEqual(doc["error"]["code"], 4)
		self.assertFalse(self.replicas(name)[0]["running"])
		self.fake.call("POST", "/_fake/faults", {
			"method": "GET", "path": "/customJobs/", "status": 503})
		status, err = self.fake.call("GET", "/v1/" + name)
		self.assertEqual((status, err["error"]["status"]),
				 (503, "UNAVAILABLE"))
		status, doc = self.fake.call("GET", "/v1/" + name)
		self.assertEqual(status, 200, doc)
		self.fake.call("DELETE", "/_fake/faults")

	def test_flex_start_waits_then_fails(self):
		self.fake.call("POST", "/_fake/config", {"hold": True})
		name = self.create(job(pool("exit 0"), strategy="FLEX_START",
				       maxWaitDuration="0.5s"))
		held = self.create(job(pool("exit 0"), strategy="FLEX_START",
				       maxWaitDuration="0s"))
		doc = self.wait(name, ("JOB_STATE_FAILED",))
		self.assertEqual(doc["error"]["code"], 8)
		_, doc = self.fake.call("GET", "/v1/" + held)
		self.assertEqual(doc["state"], "JOB_STATE_PENDING")
		self.fake.call("POST", "/_fake/config", {"hold": False})
		self.wait(held, ("JOB_STATE_SUCCEEDED",))


if __name__ == "__main__":
	unittest.main(verbosity=2)
