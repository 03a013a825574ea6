"""fake_testing.py: what the Python tests of the fakes share, imported
by them (this is no fake): for the TPU API fake (test_tpu_fake*.py) its
process, request bodies and a TestCase with its requests and checks; for
the Kubernetes API fake (test_kube_fake*.py) its process with its waits
and queues, and a JobSet rendered as slicectl renders it."""

import http.client
import json
import os
import ssl
import sys
import tempfile
import time
import unittest

import fake_start
import tpu_fake  # its discovery document

class FakeProcess:
	"""A fake's process on loopback, and a temporary directory (tmp) for
	its port file and state, removed when it stops."""

	def __init__(self):
		self.tmp = tempfile.TemporaryDirectory()

	def start(self, script, args, seconds=60):
		"""Starts script (a fake beside this file) with args; returns
		the ports it wrote."""
		port_file = os.path.join(self.tmp.name, "port")
		self.proc = fake_start.start(script, port_file, args,
					     seconds=seconds)
		with open(port_file) as f:
			return [int(x) for x in f.read().split()]

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.tmp.cleanup()

	@staticmethod
	def exchange(conn, method, path, body, headers):
		"""(response, its bytes) of one request on conn, which it
		closes; body, unless str or bytes, goes as JSON."""
		if body is not None and not isinstance(body, (str, bytes)):
			body = json.dumps(body)
		try:
			conn.request(method, path, body=body, headers=headers)
			r = conn.getresponse()
			data = r.read()
		finally:
			conn.close()
		return r, data


def main_as_root(name):
	"""unittest's main, or skips (77) the test name when not root:
	the kube fake's pods run in private mount namespaces."""
	if os.geteuid() != 0:
		print("%s: SKIP: pods run in private mount namespaces, "
		      "which needs root" % name, file=sys.stderr)
		sys.exit(77)
	unittest.main(verbosity=2)


# ---- the TPU API fake

DISCOVERY = tpu_fake.DEFAULT_DISCOVERY
PARENT = "projects/p/locations/z"
API = "/v2alpha1/" + PARENT
UUID1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
UUID2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
UUID3 = "9b2f4a4e-2d1c-4d5c-8d1e-4b8b0d6a1f00"
TPU_TOKEN = "tok"


class TpuFake(FakeProcess):
	"""One tpu_fake.py process on loopback."""

	def __init__(self, *args):
		super().__init__()
		self.port, = self.start("tpu_fake.py", args)

	def call(self, method, path, body=None, token=TPU_TOKEN,
		 headers=None, timeout=30):
		"""(status, parsed answer, response) of one request."""
		h = {"Content-Type": "application/json"}
		if token is not None:
			h["Authorization"] = "Bearer " + token
		h.update(headers or {})
		r, data = self.exchange(http.client.HTTPConnection(
			"127.0.0.1", self.port, timeout=timeout), method, path,
			body, h)
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


class TpuFakeCase(unittest.TestCase):
	"""A TpuFake for the class (--delay 0.05), reset before each test,
	and the requests and checks the tests make of it."""

	@classmethod
	def setUpClass(cls):
		cls.fake = TpuFake("--delay", "0.05")

	@classmethod
	def tearDownClass(cls):
		cls.fake.stop()

	def setUp(self):
		self.control("POST", "/_fake/reset")

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


# ---- the Kubernetes API fake

JS_API = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
KQ = "/apis/kueue.x-k8s.io/v1beta2"
PODS = "/api/v1/namespaces/default/pods"


class KubeFake(FakeProcess):
	"""One kube_fake.py process on loopback."""

	def __init__(self, *args):
		super().__init__()
		self.state = os.path.join(self.tmp.name, "state")
		self.port, self.plain = self.start("kube_fake.py", [
			"--state-dir", self.state, "--bookmark-interval",
			"0.5"] + list(args), seconds=90)
		self.tls = "--tls" in args

	def conn(self, port=None, timeout=30):
		if self.tls and port is None:
			ctx = ssl.create_default_context(cafile=os.path.join(
				self.state, "ca.pem"))
			return http.client.HTTPSConnection(
				"127.0.0.1", self.port, timeout=timeout, context=ctx)
		return http.client.HTTPConnection(
			"127.0.0.1", port or self.port, timeout=timeout)

	def call(self, method, path, body=None, headers=None, port=None,
		 ctype="application/json", token=None):
		"""(status, parsed answer or text, response)."""
		h = {"Content-Type": ctype}
		if token:
			h["Authorization"] = "Bearer " + token
		h.update(headers or {})
		r, data = self.exchange(self.conn(port), method, path, body, h)
		try:
			return r.status, json.loads(data), r
		except ValueError:
			return r.status, data.decode(), r

	def ctl(self, method, path, body=None):
		return self.call(method, path, body, port=self.plain)[:2]

	def get(self, path):
		s, doc, _ = self.call("GET", path)
		return doc if s == 200 else None

	def until(self, what, fn, timeout=30):
		deadline = time.time() + timeout
		while time.time() < deadline:
			v = fn()
			if v:
				return v
			time.sleep(0.1)
		raise AssertionError("timed out waiting for " + what)

	def pods(self, selector=""):
		q = "?labelSelector=" + selector if selector else ""
		return self.get(PODS + q)["items"]

	def jobset(self, name):
		return self.get(JS_API + "/" + name)

	def queue(self, cq, quota, preemption=None, lq="lq", flavor="tpu"):
		"""A ResourceFlavor, a ClusterQueue with quota google.com/tpu
		chips and a LocalQueue in default."""
		self.call("POST", KQ + "/resourceflavors", {
			"apiVersion": "kueue.x-k8s.io/v1beta2",
			"kind": "ResourceFlavor", "metadata": {"name": flavor},
			"spec": {"nodeLabels": {"cloud.google.com/gke-nodepool":
						"pool-" + flavor}}})
		spec = {"namespaceSelector": {}, "resourceGroups": [{
			"coveredResources": ["google.com/tpu"],
			"flavors": [{"name": flavor, "resources": [{
				"name": "google.com/tpu", "nominalQuota": quota}]}]}]}
		if preemption:
			spec["preemption"] = {"withinClusterQueue": preemption}
		s, doc, _ = self.call("POST", KQ + "/clusterqueues", {
			"apiVersion": "kueue.x-k8s.io/v1beta2",
			"kind": "ClusterQueue", "metadata": {"name": cq},
			"spec": spec}, headers=None)
		assert s == 201, doc
		s, doc, _ = self.call("POST", KQ + "/namespaces/default/"
				      "localqueues", {
					      "apiVersion": "kueue.x-k8s.io/v1beta2",
					      "kind": "LocalQueue",
					      "metadata": {"name": lq},
					      "spec": {"clusterQueue": cq}})
		assert s == 201, doc


def rendered(name, cmd, slices=2, workers=2, queue="lq", max_restarts=2,
	     grace=5, tpu=4, env=(), prio=None, mounts=(), volumes=()):
	"""A JobSet as docs/DESIGN.md "The rendered JobSet" says h-gke renders
	it, with cmd (sh) as the worker's command."""
	fr = lambda p: {"valueFrom": {"fieldRef": {"fieldPath": p}}}  # noqa
	pod = {
		"restartPolicy": "Never",
		"terminationGracePeriodSeconds": grace,
		"nodeSelector": {
			"cloud.google.com/gke-tpu-accelerator":
			"tpu-v5-lite-podslice",
			"cloud.google.com/gke-tpu-topology": "4x4"},
		"tolerations": [{"key": "google.com/tpu", "operator": "Exists"}],
		"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet",
		"volumes": [{"name": "slicectl", "emptyDir": {}}] + list(volumes),
		"initContainers": [{
			"name": "fetch-supervisor", "image": "debian",
			"command": ["/bin/sh", "-c",
				    "echo fetched > /slicectl/slice-supervisor"],
			"volumeMounts": [{"name": "slicectl",
					  "mountPath": "/slicectl"}]}],
		"containers": [{
			"name": "worker", "image": "debian",
			"command": ["/bin/sh", "-c", cmd],
			"env": [
				dict(name="SLICE_POD_SLICE", **fr(
					"metadata.labels['jobset.sigs.k8s.io/"
					"job-index']")),
				dict(name="SLICE_POD_WORKER", **fr(
					"metadata.labels['batch.kubernetes.io/"
					"job-completion-index']")),
				dict(name="SLICE_POD_RESTART_ATTEMPT", **fr(
					"metadata.labels['jobset.sigs.k8s.io/"
					"restart-attempt']")),
				dict(name="SLICE_POD_NAME", **fr("metadata.name")),
				dict(name="SLICE_POD_NODE", **fr("spec.nodeName")),
				{"name": "MEGASCALE_COORDINATOR_ADDRESS",
				 "value": "%s-slice-0-0.%s" % (name, name)},
				{"name": "MEGASCALE_NUM_SLICES", "value": str(slices)},
				dict(name="MEGASCALE_SLICE_ID", **fr(
					"metadata.labels['jobset.sigs.k8s.io/"
					"job-index']")),
				{"name": "MEGASCALE_PORT", "value": "8080"}] +
			list(env),
			"resources": {"limits": {"google.com/tpu": tpu},
				      "requests": {"google.com/tpu": tpu}},
			"ports": [{"containerPort": 8471}, {"containerPort": 8080}],
			"securityContext": {"privileged": True},
			"volumeMounts": [{"name": "slicectl",
					  "mountPath": "/slicectl"}] + list(mounts)}]}
	if prio:
		pod["priorityClassName"] = prio
	return {
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": {"name": name, "labels": {
			"kueue.x-k8s.io/queue-name": queue,
			"app.kubernetes.io/managed-by": "slicectl",
			"slicectl.dev/run": name}, "annotations": {
				"alpha.jobset.sigs.k8s.io/exclusive-topology":
				"cloud.google.com/gke-nodepool"}},
		"spec": {
			"failurePolicy": {"maxRestarts": max_restarts, "rules": [{
				"name": "runFailed", "action": "FailJobSet",
				"onJobFailureReasons": ["PodFailurePolicy"]}]},
			"network": {"enableDNSHostnames": True},
			"replicatedJobs": [{
				"name": "slice", "replicas": slices, "template": {
					"spec": {
						"parallelism": workers,
						"completions": workers,
						"completionMode": "Indexed",
						"backoffLimit": 0,
						"podFailurePolicy": {"rules": [{
							"action": "FailJob", "onExitCodes": {
								"containerName": "worker",
								"operator": "In", "values": [3]}}]},
						"template": {"spec": pod}}}}]}}


def pod_spec_of(js):
	return js["spec"]["replicatedJobs"][0]["template"]["spec"][
		"template"]["spec"]


def causes(doc):
	return [(c["field"], c["reason"]) for c in doc["details"]["causes"]]
