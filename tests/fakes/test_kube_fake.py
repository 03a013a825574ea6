#!/usr/bin/env python3
"""test_kube_fake.py: the 'kube-fake' test. Starts kube_fake.py on loopback
and checks that it keeps the Kubernetes API's contract as slicectl relies
on it: discovery, refusals by the CRD schemas (bad enum, unknown fields
at JobSet, Job and Pod level under each fieldValidation, bad quantity,
wrong type, ObjectMeta) and by JobSet's webhook, 404/409/401/403 Status
bodies, faults, watch semantics (resourceVersion, selectors, 410,
bookmarks, compaction), patches, dryRun, status subresources, tables,
Kueue's two versions, namespace deletion, Kueue admission, its visibility
API and priority preemption, JobSet restarts, failure and success
policies and TTL, Job podFailurePolicy, deadlines and orphaning, pods
running as real processes with the environment, mounts and /etc/hosts as
rendered, logs, eviction with its grace, node loss, the container API and
TLS, and that nothing outlives the fake.
Runs as root (the pods' private mount namespaces need it) or skips.
"""

import base64
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_start  # noqa: E402
import kube_api  # noqa: E402  (the schema check)
import kube_fake  # noqa: E402  (its CRDs)
import kube_kubelet  # noqa: E402  (process_tree)
import kube_yaml  # noqa: E402  (the YAML reader)

JS_API = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
KQ = "/apis/kueue.x-k8s.io/v1beta2"
PODS = "/api/v1/namespaces/default/pods"
TOKEN = "kube-token"


class Fake:
	"""One kube_fake.py process on loopback."""

	def __init__(self, *args):
		self.tmp = tempfile.TemporaryDirectory()
		port_file = os.path.join(self.tmp.name, "port")
		self.state = os.path.join(self.tmp.name, "state")
		self.proc = fake_start.start("kube_fake.py", port_file, [
			"--state-dir", self.state, "--bookmark-interval",
			"0.5"] + list(args), seconds=90)
		with open(port_file) as f:
			self.port, self.plain = [int(x) for x in f.read().split()]
		self.tls = "--tls" in args

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.tmp.cleanup()

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
		if body is not None and not isinstance(body, (str, bytes)):
			body = json.dumps(body)
		c = self.conn(port)
		try:
			c.request(method, path, body=body, headers=h)
			r = c.getresponse()
			data = r.read()
		finally:
			c.close()
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


class YamlSubset(unittest.TestCase):
	"""load_yaml on the constructs controller-gen writes (the equality
	with js-yaml on every CRD file is checked by kube-fidelity)."""

	def test_constructs(self):
		text = """---
a: 1
b: "True"
c: True
d: |-
  line one
    indented
  line three
e: 'it''s
  folded'
f:
- x
- k: v
  m: [1, 'two']
g: {}
h: a plain
  scalar over lines
i: ~
j: 1.5
k: "esc\\"aped\\u0041"
l: >
  folded
  text
---
second: doc
"""
		docs = kube_yaml.load_yaml(text)
		self.assertEqual(docs[0], {
			"a": 1, "b": "True", "c": True,
			"d": "line one\n  indented\nline three",
			"e": "it's folded", "f": ["x", {"k": "v", "m": [1, "two"]}],
			"g": {}, "h": "a plain scalar over lines", "i": None,
			"j": 1.5, "k": 'esc"apedA', "l": "folded text\n"})
		self.assertEqual(docs[1], {"second": "doc"})

	def test_refuses_what_it_cannot_read(self):
		with self.assertRaises(kube_yaml.YamlError):
			kube_yaml.load_yaml("a: &anchor 1\nb: *anchor\n")

	def test_every_crd_loads(self):
		crds = kube_fake.load_crds(kube_fake.default_crds())
		names = {r.qualified: r.versions for r in crds}
		self.assertEqual(names["jobsets.jobset.x-k8s.io"], ["v1alpha2"])
		for plural in ("workloads", "localqueues", "clusterqueues",
			       "resourceflavors", "workloadpriorityclasses"):
			self.assertEqual(names[plural + ".kueue.x-k8s.io"],
					 ["v1beta2", "v1beta1"], plural)


class Api(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.f = Fake()
		cls.f.queue("cq-api", 1000)

	@classmethod
	def tearDownClass(cls):
		cls.f.stop()

	def test_discovery(self):
		f = self.f
		self.assertEqual(f.get("/api")["versions"], ["v1"])
		groups = {g["name"]: [v["version"] for v in g["versions"]]
			  for g in f.get("/apis")["groups"]}
		self.assertEqual(groups["jobset.x-k8s.io"], ["v1alpha2"])
		self.assertEqual(groups["kueue.x-k8s.io"], ["v1beta2", "v1beta1"])
		self.assertEqual(groups["batch"], ["v1"])
		core = {r["name"] for r in f.get("/api/v1")["resources"]}
		self.assertTrue({"pods", "pods/log", "events", "namespaces",
				 "pods/eviction"} <= core)
		js = f.get("/apis/jobset.x-k8s.io/v1alpha2")["resources"]
		self.assertEqual((js[0]["name"], js[0]["kind"],
				  js[0]["namespaced"]), ("jobsets", "JobSet", True))
		self.assertIn("jobsets/status", [r["name"] for r in js])
		self.assertEqual(f.get("/version")["major"], "1")
		s, text, _ = f.call("GET", "/apis/nothing.example.com/v1")
		self.assertEqual((s, text), (404, "404 page not found\n"))

	def test_kueue_versions(self):
		"""Kept in v1beta2, served in both, converted where names
		differ."""
		f = self.f
		s, cq, _ = f.call("POST", "/apis/kueue.x-k8s.io/v1beta1/"
				  "clusterqueues", {
					  "apiVersion": "kueue.x-k8s.io/v1beta1",
					  "kind": "ClusterQueue",
					  "metadata": {"name": "old"},
					  "spec": {"cohort": "team"}})
		self.assertEqual(s, 201, cq)
		self.assertEqual((cq["apiVersion"], cq["spec"]["cohort"]),
				 ("kueue.x-k8s.io/v1beta1", "team"))
		new = f.get(KQ + "/clusterqueues/old")
		self.assertEqual((new["apiVersion"], new["spec"]["cohortName"]),
				 ("kueue.x-k8s.io/v1beta2", "team"))
		self.assertNotIn("cohort", new["spec"])
		f.call("DELETE", KQ + "/clusterqueues/old")

	def test_tables(self):
		"""kubectl get asks for a Table: the CRD's printer columns."""
		f = self.f
		path = KQ + "/namespaces/default/localqueues"
		f.call("POST", path, {
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": {"name": "tab"}, "spec": {"clusterQueue": "q"}})
		s, t, _ = f.call("GET", path, headers={
			"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,"
			"application/json"})
		self.assertEqual((s, t["kind"]), (200, "Table"))
		self.assertEqual([c["name"] for c in t["columnDefinitions"]], [
			"Name", "ClusterQueue", "Pending Workloads",
			"Admitted Workloads"])
		row = [r for r in t["rows"] if r["cells"][0] == "tab"][0]
		self.assertEqual(row["cells"][1], "q")
		self.assertEqual(row["object"]["kind"], "PartialObjectMetadata")
		f.call("DELETE", path + "/tab")

	def strict(self, doc, mode="Strict"):
		return self.f.call("POST", JS_API + "?fieldValidation=" + mode,
				   doc)

	def test_unknown_fields_by_field_validation(self):
		doc = rendered("unknown", "true")
		doc["spec"]["colour"] = "blue"
		doc["spec"]["replicatedJobs"][0]["template"]["spec"][
			"parallelizm"] = 2
		pod_spec_of(doc)["hostNetwrok"] = True
		doc["metadata"]["lables"] = {}
		s, body, _ = self.strict(doc)
		self.assertEqual((s, body["reason"], body["kind"]),
				 (400, "BadRequest", "Status"))
		for path in ("spec.colour",
			     "spec.replicatedJobs[0].template.spec.parallelizm",
			     "spec.replicatedJobs[0].template.spec.template.spec."
			     "hostNetwrok", "metadata.lables"):
			self.assertIn('unknown field "%s"' % path, body["message"])
		self.assertIn('JobSet in version "v1alpha2" cannot be handled as '
			      'a JobSet: strict decoding error', body["message"])
		self.assertIsNone(self.f.jobset("unknown"))
		# Warn (the default): stored without them, one Warning each.
		s, body, r = self.strict(doc, "Warn")
		self.assertEqual(s, 201, body)
		warnings = r.msg.get_all("Warning")
		self.assertEqual(len(warnings), 4)
		self.assertIn('299 - "unknown field \\"spec.colour\\""', warnings)
		self.assertNotIn("colour", body["spec"])
		self.assertNotIn("hostNetwrok", pod_spec_of(body))
		self.f.call("DELETE", JS_API + "/unknown")
		self.f.until("unknown gone", lambda: not self.f.jobset("unknown"))
		s, body, r = self.strict(doc, "Ignore")
		self.assertEqual(s, 201)
		self.assertIsNone(r.getheader("Warning"))
		self.assertNotIn("parallelizm", body["spec"]["replicatedJobs"][0][
			"template"]["spec"])
		self.f.call("DELETE", JS_API + "/unknown")

	def test_schema_refusals(self):
		doc = rendered("bad", "true")
		doc["spec"]["failurePolicy"]["restartStrategy"] = "Sometimes"
		doc["spec"]["replicatedJobs"][0]["replicas"] = "two"
		pod_spec_of(doc)["containers"][0]["resources"]["limits"][
			"google.com/tpu"] = "4x"
		del pod_spec_of(doc)["containers"][0]["name"]
		s, body, _ = self.strict(doc)
		self.assertEqual((s, body["reason"], body["code"]),
				 (422, "Invalid", 422))
		self.assertEqual(body["details"]["kind"], "JobSet")
		self.assertEqual(body["details"]["group"], "jobset.x-k8s.io")
		rj = "spec.replicatedJobs[0]"
		c0 = rj + ".template.spec.template.spec.containers[0]"
		self.assertEqual(sorted(causes(body)), sorted([
			("spec.failurePolicy.restartStrategy",
			 "FieldValueNotSupported"),
			(rj + ".replicas", "FieldValueTypeInvalid"),
			(c0 + ".resources.limits[google.com/tpu]",
			 "FieldValueInvalid"),
			(c0 + ".name", "FieldValueRequired")]))
		self.assertTrue(body["message"].startswith(
			'JobSet.jobset.x-k8s.io "bad" is invalid: ['))
		self.assertIn('spec.failurePolicy.restartStrategy: Unsupported '
			      'value: "Sometimes": supported values: "Recreate", '
			      '"BlockingRecreate"', body["message"])
		self.assertIn(rj + '.replicas: Invalid value: "string": ' + rj +
			      '.replicas in body must be of type integer: '
			      '"string"', body["message"])
		self.assertIn(c0 + '.resources.limits[google.com/tpu]: Invalid '
			      'value: "4x": ', body["message"])
		# One error: no brackets; metadata is ObjectMeta.
		doc = rendered("Bad_Name", "true")
		s, body, _ = self.strict(doc)
		self.assertEqual(s, 422)
		self.assertEqual(causes(body), [("metadata.name",
						 "FieldValueInvalid")])
		self.assertIn('JobSet.jobset.x-k8s.io "Bad_Name" is invalid: '
			      'metadata.name: Invalid value: "Bad_Name": a '
			      'lowercase RFC 1123 subdomain', body["message"])

	def test_webhook_refusals(self):
		s, body, _ = self.strict(rendered("n" * 50, "true"))
		self.assertEqual((s, body["reason"]), (403, "Forbidden"))
		self.assertIn('admission webhook "vjobset.kb.io" denied the '
			      'request: JobSet name is too long', body["message"])

	def test_defaults_and_kueue_suspend(self):
		doc = rendered("defaults", "true", queue="nowhere")
		doc["spec"]["replicatedJobs"][0]["template"]["spec"].pop(
			"completionMode")
		s, body, _ = self.strict(doc)
		self.assertEqual(s, 201, body)
		self.assertTrue(body["spec"]["suspend"])
		self.assertEqual(body["spec"]["successPolicy"]["operator"], "All")
		self.assertEqual(body["spec"]["replicatedJobs"][0]["template"][
			"spec"]["completionMode"], "Indexed")
		self.assertTrue(body["metadata"]["uid"])
		self.assertEqual(body["metadata"]["generation"], 1)
		wl = self.f.until("workload", lambda: self.f.get(
			KQ + "/namespaces/default/workloads")["items"])[0]
		self.assertTrue(wl["metadata"]["name"].startswith(
			"jobset-defaults-"))
		# The Workload the fake makes passes Kueue's own schema.
		res = {r.plural: r for r in kube_fake.load_crds(
			kube_fake.default_crds())}["workloads"]
		chk = kube_api.SchemaCheck()
		chk.run(res.schemas["v1beta2"], wl)
		self.assertEqual((chk.unknown, chk.errs.items), ([], []))
		self.f.until("inadmissible", lambda: [
			c for c in (self.f.get(KQ + "/namespaces/default/workloads/"
					      + wl["metadata"]["name"])["status"]
				    .get("conditions") or [])
			if c["reason"] == "Inadmissible" and
			"LocalQueue nowhere doesn't exist" in c["message"]])
		self.f.call("DELETE", JS_API + "/defaults")

	def test_errors(self):
		f = self.f
		s, body, _ = f.call("GET", JS_API + "/missing")
		self.assertEqual(body, {
			"kind": "Status", "apiVersion": "v1", "metadata": {},
			"status": "Failure", "code": 404, "reason": "NotFound",
			"message": 'jobsets.jobset.x-k8s.io "missing" not found',
			"details": {"name": "missing", "group": "jobset.x-k8s.io",
				    "kind": "jobsets"}})
		doc = rendered("twice", "sleep 30", queue="none")
		self.assertEqual(self.strict(doc)[0], 201)
		s, body, _ = self.strict(doc)
		self.assertEqual((s, body["reason"], body["message"]), (
			409, "AlreadyExists",
			'jobsets.jobset.x-k8s.io "twice" already exists'))
		cur = f.jobset("twice")
		cur["metadata"]["resourceVersion"] = "1"
		s, body, _ = f.call("PUT", JS_API + "/twice", cur)
		self.assertEqual((s, body["reason"]), (409, "Conflict"))
		self.assertIn("the object has been modified", body["message"])
		s, body, _ = f.call("POST", "/apis/jobset.x-k8s.io/v1alpha2/"
				    "namespaces/nope/jobsets", doc)
		self.assertEqual((s, body["message"]),
				 (404, 'namespaces "nope" not found'))
		s, body, _ = f.call("DELETE", JS_API + "/twice?propagationPolicy="
				    "Foreground")
		self.assertEqual(s, 200)
		self.assertEqual(body["metadata"]["name"], "twice")
		f.until("twice gone", lambda: not f.jobset("twice"))
		# Forbidden, as RBAC says it.
		f.ctl("POST", "/_fake/forbid", {"verb": "list",
						"resource": "pods"})
		s, body, _ = f.call("GET", PODS)
		f.ctl("DELETE", "/_fake/forbid")
		self.assertEqual((s, body["reason"]), (403, "Forbidden"))
		self.assertEqual(body["message"], 'pods is forbidden: User '
				 '"system:serviceaccount:default:slicectl-test" '
				 'cannot list resource "pods" in API group "" in '
				 'the namespace "default"')

	def test_dry_run_patch_status_and_collections(self):
		f = self.f
		doc = rendered("dry", "true", queue="none")
		s, body, _ = f.call("POST", JS_API + "?dryRun=All&fieldValidation="
				    "Strict", doc)
		self.assertEqual(s, 201)
		self.assertTrue(body["metadata"]["uid"])
		self.assertIsNone(f.jobset("dry"))
		path = KQ + "/namespaces/default/localqueues"
		s, lq, _ = f.call("POST", path, {
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": {"generateName": "gen-", "labels": {"p": "1"}},
			"spec": {"clusterQueue": "cq-api"}})
		self.assertEqual(s, 201)
		name = lq["metadata"]["name"]
		self.assertRegex(name, r"^gen-[a-z0-9]{5}$")
		s, out, _ = f.call("PATCH", path + "/" + name, {
			"metadata": {"labels": {"p": None, "q": "2"}}},
			ctype="application/merge-patch+json")
		self.assertEqual((s, out["metadata"]["labels"]), (200, {"q": "2"}))
		self.assertGreater(int(out["metadata"]["resourceVersion"]),
				   int(lq["metadata"]["resourceVersion"]))
		s, out, _ = f.call("PATCH", path + "/" + name, [
			{"op": "replace", "path": "/spec/clusterQueue",
			 "value": "other"}], ctype="application/json-patch+json")
		self.assertEqual((s, out["spec"]["clusterQueue"]), (200, "other"))
		# Labels are no spec change: one generation more, not two.
		self.assertEqual(out["metadata"]["generation"], 2)
		# A patch the schema refuses is refused like a create.
		s, out, _ = f.call("PATCH", path + "/" + name, {
			"spec": {"stopPolicy": "Sometimes"}},
			ctype="application/merge-patch+json")
		self.assertEqual((s, out["reason"]), (422, "Invalid"))
		# status goes through its subresource only.
		s, out, _ = f.call("PATCH", path + "/" + name + "/status", {
			"status": {"pendingWorkloads": 7}},
			ctype="application/merge-patch+json")
		self.assertEqual((s, out["status"]["pendingWorkloads"]), (200, 7))
		self.assertEqual(out["metadata"]["generation"], 2)
		s, out, _ = f.call("DELETE", path + "?labelSelector=q%3D2")
		self.assertEqual((s, [i["metadata"]["name"] for i in out["items"]]),
				 (200, [name]))
		self.assertIsNone(f.get(path + "/" + name))

	def test_namespace_deletion(self):
		f = self.f
		s, ns, _ = f.call("POST", "/api/v1/namespaces", {
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": {"name": "team"}})
		self.assertEqual(s, 201, ns)
		path = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets"
		doc = rendered("inteam", "sleep 30", queue="none")
		self.assertEqual(f.call("POST", path, doc)[0], 201)
		s, body, _ = f.call("DELETE", "/api/v1/namespaces/team")
		self.assertEqual(s, 200)
		doc["metadata"]["name"] = "late"
		s, body, _ = f.call("POST", path, doc)
		self.assertEqual((s, body["message"]), (403, 'jobsets.jobset.x-'
				 'k8s.io "late" is forbidden: unable to create new '
				 'content in namespace team because it is being '
				 'terminated'))
		f.until("team gone", lambda: f.get("/api/v1/namespaces/team") is
			None)
		self.assertEqual(f.get(path)["items"], [])

	def test_faults(self):
		f = self.f
		f.ctl("POST", "/_fake/faults", [
			{"method": "GET", "path": "/jobsets$", "status": 429,
			 "retry_after": 2},
			{"method": "GET", "path": "/jobsets$", "status": 500},
			{"method": "GET", "path": "/jobsets$", "reset": True}])
		s, body, r = f.call("GET", JS_API)
		self.assertEqual((s, body["reason"], r.getheader("Retry-After")),
				 (429, "TooManyRequests", "2"))
		s, body, _ = f.call("GET", JS_API)
		self.assertEqual((s, body["reason"]), (500, "InternalError"))
		with self.assertRaises((ConnectionError, http.client.HTTPException,
				       OSError)):
			f.call("GET", JS_API)
		s, body, _ = f.call("GET", JS_API)
		self.assertEqual((s, body["kind"]), (200, "JobSetList"))
		log = f.ctl("GET", "/_fake/requests")[1]
		self.assertEqual([e["status"] for e in log
				  if e["path"].endswith("/jobsets") and
				  e["method"] == "GET"][-4:],
				 [429, 500, "reset", 200])

	def watch_lines(self, path, n, timeout=20):
		"""The first n events of a watch (fewer at timeout)."""
		c = self.f.conn(timeout=timeout)
		c.request("GET", path)
		r = c.getresponse()
		self.assertEqual(r.status, 200)
		self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
		out = []
		try:
			while len(out) < n:
				line = r.fp.readline()
				if not line:
					break
				if line.strip() and not line.startswith(b"{"):
					continue  # chunk sizes: read raw
				if line.strip():
					out.append(json.loads(line))
		finally:
			c.close()
		return out

	def test_watch(self):
		f = self.f
		path = KQ + "/namespaces/default/localqueues"
		lq = lambda n, team: {  # noqa: E731
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": {"name": n, "labels": {"team": team}},
			"spec": {"clusterQueue": "cq-api"}}
		s, first, _ = f.call("POST", path, lq("w1", "a"))
		rv = first["metadata"]["resourceVersion"]
		f.call("POST", path, lq("w2", "b"))
		f.call("DELETE", path + "/w1")
		ev = self.watch_lines(path + "?watch=1&resourceVersion=%s" % rv, 2)
		self.assertEqual([(e["type"], e["object"]["metadata"]["name"])
				  for e in ev], [("ADDED", "w2"), ("DELETED", "w1")])
		self.assertEqual(ev[0]["object"]["kind"], "LocalQueue")
		# No resourceVersion: every object first, as ADDED.
		ev = self.watch_lines(path + "?watch=true&labelSelector=team%3Db",
				      1)
		self.assertEqual([(e["type"], e["object"]["metadata"]["name"])
				  for e in ev], [("ADDED", "w2")])
		# Bookmarks when asked for.
		ev = self.watch_lines(path + "?watch=1&allowWatchBookmarks=true&"
				      "resourceVersion=%s" %
				      f.get(path)["metadata"]["resourceVersion"], 1)
		self.assertEqual(ev[0]["type"], "BOOKMARK")
		# A watch running across a compaction goes on.
		c = f.conn()
		c.request("GET", path + "?watch=1&resourceVersion=" +
			  f.get(path)["metadata"]["resourceVersion"])
		r = c.getresponse()
		f.ctl("POST", "/_fake/compact")
		f.call("POST", path, lq("w3", "c"))
		line = b""
		while not line.startswith(b"{"):
			line = r.fp.readline()
		self.assertEqual(json.loads(line)["object"]["metadata"]["name"],
				 "w3")
		c.close()
		f.call("DELETE", path + "/w3")
		# A new one from before it: 410 in an ERROR event.
		ev = self.watch_lines(path + "?watch=1&resourceVersion=%s" % rv, 1)
		self.assertEqual(ev[0]["type"], "ERROR")
		self.assertEqual((ev[0]["object"]["code"],
				  ev[0]["object"]["reason"]), (410, "Expired"))
		# A list's version is a valid start; timeoutSeconds ends it.
		lst = f.get(path)
		ev = self.watch_lines(path + "?watch=1&timeoutSeconds=1&"
				      "resourceVersion=" +
				      lst["metadata"]["resourceVersion"], 5)
		self.assertEqual(ev, [])
		f.call("DELETE", path + "/w2")


class Controllers(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.f = Fake()
		cls.out = tempfile.mkdtemp(prefix="kube-fake-out-")

	@classmethod
	def tearDownClass(cls):
		cls.f.stop()
		subprocess.run(["rm", "-rf", cls.out])

	def create(self, doc):
		s, body, _ = self.f.call("POST", JS_API + "?fieldValidation=Strict",
					 doc)
		self.assertEqual(s, 201, body)
		return body

	def queue_and_dir(self, name):
		"""A queue of 16 chips for the test named name, and an empty
		host directory for its pods to write into."""
		self.f.queue("cq-" + name, 16, lq="lq-" + name, flavor=name)
		out = os.path.join(self.out, name)
		os.makedirs(out)
		return out

	def terminal(self, name, timeout=60):
		return self.f.until(name + " terminal", lambda: (
			self.f.jobset(name) or {}).get("status", {}).get(
				"terminalState"), timeout)

	def test_pods_run_as_processes_with_env_and_mounts(self):
		f = self.f
		out = self.queue_and_dir("run")
		cmd = ('d=/out/$SLICE_POD_SLICE-$SLICE_POD_WORKER; mkdir -p $d; '
		       'env > $d/env; cat /slicectl/slice-supervisor > $d/init; '
		       'echo mine > /slicectl/private; echo $$$$ > $d/pid; '
		       'echo "$0" > $d/expanded; pwd > $d/pwd; '
		       'getent hosts $MEGASCALE_COORDINATOR_ADDRESS > $d/coord; '
		       'echo logged-$SLICE_POD_WORKER')
		doc = rendered("run", cmd, queue="lq-run", mounts=[
			{"name": "out", "mountPath": "/out"}], volumes=[
			{"name": "out", "hostPath": {"path": out}}])
		c = pod_spec_of(doc)["containers"][0]
		c["command"] = ["/bin/sh", "-c", cmd, "$(MEGASCALE_PORT)-$$(X)"]
		c["workingDir"] = "/slicectl"
		self.create(doc)
		self.assertEqual(self.terminal("run"), "Completed")
		js = f.jobset("run")
		self.assertEqual(js["status"]["replicatedJobsStatus"][0][
			"succeeded"], 2)
		for s in (0, 1):
			for w in (0, 1):
				d = os.path.join(out, "%d-%d" % (s, w))
				with open(os.path.join(d, "env")) as fp:
					env = dict(x.split("=", 1) for x in
						   fp.read().splitlines() if "=" in x)
				self.assertEqual(env["SLICE_POD_SLICE"], str(s))
				self.assertEqual(env["MEGASCALE_SLICE_ID"], str(s))
				self.assertEqual(env["SLICE_POD_WORKER"], str(w))
				self.assertEqual(env["JOB_COMPLETION_INDEX"], str(w))
				self.assertEqual(env["SLICE_POD_RESTART_ATTEMPT"], "0")
				self.assertEqual(env["SLICE_POD_NODE"],
						 "gke-tpu-slice-%d" % s)
				self.assertTrue(env["SLICE_POD_NAME"].startswith(
					"run-slice-%d-%d-" % (s, w)))
				self.assertEqual(env["HOSTNAME"], "run-slice-%d-%d" %
						 (s, w))
				self.assertEqual(env["MEGASCALE_COORDINATOR_ADDRESS"],
						 "run-slice-0-0.run")
				with open(os.path.join(d, "init")) as fp:
					self.assertEqual(fp.read(), "fetched\n")
				with open(os.path.join(d, "expanded")) as fp:
					self.assertEqual(fp.read(), "8080-$(X)\n")
				with open(os.path.join(d, "coord")) as fp:
					# The JobSet's DNS names, as /etc/hosts.
					self.assertEqual(fp.read().split()[0],
							 "127.0.0.1")
				with open(os.path.join(d, "pwd")) as fp:
					self.assertEqual(fp.read(), "/slicectl\n")
				with open(os.path.join(d, "pid")) as fp:
					# PID 1 of its own namespace, as in a container
					# ($$$$: Kubernetes turns $$ into $).
					self.assertEqual(fp.read(), "1\n")
		# The emptyDir was private to each pod's mount namespace.
		self.assertFalse(os.path.exists("/slicectl/private"))
		pods = f.pods("jobset.sigs.k8s.io/jobset-name=run")
		self.assertEqual(len(pods), 4)
		p = pods[0]
		labels = p["metadata"]["labels"]
		for key in ("jobset-name", "replicatedjob-name", "job-index",
			    "restart-attempt", "job-key", "global-replicas",
			    "replicatedjob-replicas", "job-global-index"):
			self.assertIn("jobset.sigs.k8s.io/" + key, labels)
			self.assertIn("jobset.sigs.k8s.io/" + key,
				      p["metadata"]["annotations"])
		self.assertIn("batch.kubernetes.io/job-completion-index",
			      p["metadata"]["annotations"])
		self.assertEqual(p["spec"]["subdomain"], "run")
		self.assertEqual(p["spec"]["nodeSelector"][
			"cloud.google.com/gke-nodepool"], "pool-run")
		self.assertEqual(p["status"]["phase"], "Succeeded")
		self.assertEqual(p["status"]["containerStatuses"][0]["state"][
			"terminated"]["exitCode"], 0)
		node = f.get("/api/v1/nodes/gke-tpu-slice-1")
		self.assertEqual(node["metadata"]["labels"][
			"cloud.google.com/gke-tpu-topology"], "4x4")
		self.assertEqual(node["status"]["capacity"]["google.com/tpu"],
				 "4")
		procs = f.ctl("GET", "/_fake/processes")[1]
		self.assertEqual(len([x for x in procs if x["pod"] in [
			q["metadata"]["name"] for q in pods]]), 8)
		# Logs.
		name = [q["metadata"]["name"] for q in pods if q["metadata"][
			"labels"]["batch.kubernetes.io/job-completion-index"] ==
			"1"][0]
		s, text, _ = f.call("GET", PODS + "/%s/log?container=worker" %
				    name)
		self.assertEqual((s, text), (200, "logged-1\n"))
		# One container: it needs no name (init containers do not
		# count); an unknown one is refused.
		s, text, _ = f.call("GET", PODS + "/%s/log?tailLines=1" % name)
		self.assertEqual((s, text), (200, "logged-1\n"))
		s, text, _ = f.call("GET", PODS + "/%s/log?container="
				    "fetch-supervisor" % name)
		self.assertEqual((s, text), (200, ""))
		s, body, _ = f.call("GET", PODS + "/%s/log?container=nope" % name)
		self.assertEqual((s, body["message"]), (400, "container nope is "
							"not valid for pod %s" %
							name))
		f.call("DELETE", JS_API + "/run")

	def test_restart_on_failed_pod_then_complete(self):
		f = self.f
		f.queue("cq-rs", 16, lq="lq-rs", flavor="rs")
		cmd = ('if [ "$SLICE_POD_RESTART_ATTEMPT" = 0 ] && '
		       '[ "$SLICE_POD_SLICE$SLICE_POD_WORKER" = 11 ]; then exit 1; '
		       'fi; sleep 0.2')
		self.create(rendered("rs", cmd, queue="lq-rs"))
		self.assertEqual(self.terminal("rs"), "Completed")
		js = f.jobset("rs")
		self.assertEqual((js["status"]["restarts"],
				  js["status"]["restartsCountTowardsMax"]), (1, 1))
		pods = f.pods("jobset.sigs.k8s.io/jobset-name=rs")
		self.assertEqual({p["metadata"]["labels"][
			"jobset.sigs.k8s.io/restart-attempt"] for p in pods}, {"1"})
		self.assertEqual(len(pods), 4)
		events = [e["reason"] for e in f.get(
			"/api/v1/namespaces/default/events")["items"]
			if e["involvedObject"]["name"] == "rs"]
		self.assertIn("RestartJobSetAction", events)
		f.call("DELETE", JS_API + "/rs")

	def test_bare_job_and_its_default_orphaning(self):
		"""A Job on its own: NonIndexed pods; deleting it without a
		propagationPolicy orphans them, as the API server does."""
		f = self.f
		jobs = "/apis/batch/v1/namespaces/default/jobs"
		s, job, _ = f.call("POST", jobs, {
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": {"name": "bare"}, "spec": {
				"parallelism": 2, "completions": 2, "template": {
					"spec": {"restartPolicy": "Never", "containers": [{
						"name": "c", "image": "x",
						"command": ["sleep", "30"]}]}}}})
		self.assertEqual(s, 201, job)
		pods = f.until("bare's pods", lambda: (lambda p: p if len(p) == 2
						       else None)(
			f.pods("job-name=bare")))
		self.assertNotIn("batch.kubernetes.io/job-completion-index",
				 pods[0]["metadata"]["labels"])
		s, body, _ = f.call("DELETE", jobs + "/bare")
		self.assertEqual((s, body["kind"], body["status"]),
				 (200, "Status", "Success"))
		time.sleep(1)
		left = f.pods("job-name=bare")
		self.assertEqual(len(left), 2)
		self.assertTrue(all(not p["metadata"].get("ownerReferences")
				    for p in left))
		for p in left:
			f.call("DELETE", PODS + "/" + p["metadata"]["name"] +
			       "?gracePeriodSeconds=0")

	def test_fail_job_and_max_restarts(self):
		f = self.f
		f.queue("cq-fail", 16, lq="lq-fail", flavor="fail")
		self.create(rendered("exit3", 'if [ "$SLICE_POD_WORKER" = 1 ]; '
				     'then exit 3; fi; sleep 30', queue="lq-fail"))
		self.assertEqual(self.terminal("exit3"), "Failed")
		js = f.jobset("exit3")
		cond = [c for c in js["status"]["conditions"]
			if c["type"] == "Failed"][0]
		self.assertEqual(cond["reason"], "FailJobSetAction")
		self.assertEqual(js["status"]["restarts"], 0)
		jobs = f.get("/apis/batch/v1/namespaces/default/jobs?"
			     "labelSelector=jobset.sigs.k8s.io/jobset-name%3Dexit3")
		reasons = [c["reason"] for j in jobs["items"]
			   for c in j["status"].get("conditions", [])
			   if c["type"] == "Failed"]
		self.assertIn("PodFailurePolicy", reasons)
		# The other pods were stopped, not left running.
		f.until("exit3 pods stopped", lambda: all(
			p["status"]["phase"] in ("Succeeded", "Failed")
			for p in f.pods("jobset.sigs.k8s.io/jobset-name=exit3")))
		f.call("DELETE", JS_API + "/exit3")
		f.until("exit3 gone", lambda: not f.jobset("exit3"))
		self.create(rendered("exit1", "exit 1", queue="lq-fail",
				     max_restarts=2))
		self.assertEqual(self.terminal("exit1"), "Failed")
		js = f.jobset("exit1")
		self.assertEqual(js["status"]["restarts"], 2)
		self.assertEqual([c["reason"] for c in js["status"]["conditions"]
				  if c["type"] == "Failed"], ["ReachedMaxRestarts"])
		f.call("DELETE", JS_API + "/exit1")

	def test_admission_waits_then_preemption(self):
		f = self.f
		f.queue("cq-q", 16, preemption="LowerPriority", lq="lq-q",
			flavor="q")
		for name, value in (("low", 10), ("high", 1000)):
			f.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
				"apiVersion": "scheduling.k8s.io/v1",
				"kind": "PriorityClass", "metadata": {"name": name},
				"value": value})
		# Two equal workloads on quota for one: the second waits.
		self.create(rendered("first", "sleep 1", queue="lq-q",
				     prio="low"))
		self.create(rendered("second", "sleep 1", queue="lq-q",
				     prio="low"))
		wls = lambda: {w["metadata"]["ownerReferences"][0]["name"]: w  # noqa
			       for w in f.get(KQ + "/namespaces/default/"
					      "workloads")["items"]}
		f.until("second pending", lambda: [
			c for c in wls().get("second", {}).get("status", {}).get(
				"conditions", []) if c["type"] == "QuotaReserved" and
			c["status"] == "False" and "insufficient unused quota" in
			c["message"]])
		self.assertTrue(f.jobset("second")["spec"]["suspend"])
		# Kueue's visibility API gives its place in the queues.
		vis = "/apis/visibility.kueue.x-k8s.io/v1beta1/"
		pend = f.get(vis + "namespaces/default/localqueues/lq-q/"
			     "pendingworkloads")
		self.assertEqual([(w["metadata"]["name"], w["localQueueName"],
				   w["positionInLocalQueue"],
				   w["positionInClusterQueue"])
				  for w in pend["items"]],
				 [(wls()["second"]["metadata"]["name"], "lq-q", 0, 0)])
		self.assertEqual(f.get(vis + "clusterqueues/cq-q/pendingworkloads")[
			"items"], pend["items"])
		self.assertEqual(self.terminal("first"), "Completed")
		self.assertEqual(self.terminal("second"), "Completed")
		# A running low-priority set is preempted by a high one.
		self.create(rendered("victim", "trap 'exit 143' TERM; "
				     "sleep 60 & wait", queue="lq-q", prio="low"))
		f.until("victim running", lambda: len([
			p for p in f.pods("jobset.sigs.k8s.io/jobset-name=victim")
			if p["status"].get("phase") == "Running"]) == 4)
		self.create(rendered("boss", "sleep 1", queue="lq-q",
				     prio="high"))
		f.until("victim evicted", lambda: [
			c for c in wls()["victim"].get("status", {}).get(
				"conditions", []) if c["type"] == "Evicted" and
			c["status"] == "True" and c["reason"] == "Preempted"])
		self.assertTrue(f.until("victim suspended", lambda: f.jobset(
			"victim")["spec"]["suspend"]))
		self.assertEqual(self.terminal("boss"), "Completed")
		boss = wls()["boss"]
		self.assertEqual(boss["spec"]["priority"], 1000)
		self.assertEqual(boss["spec"]["priorityClassRef"], {
			"group": "scheduling.k8s.io", "kind": "PriorityClass",
			"name": "high"})
		old = f.get("/apis/kueue.x-k8s.io/v1beta1/namespaces/default/"
			    "workloads/" + boss["metadata"]["name"])
		self.assertEqual((old["spec"]["priorityClassName"],
				  old["spec"]["priorityClassSource"]),
				 ("high", "scheduling.k8s.io/priorityclass"))
		# Requeued, readmitted and running again.
		f.until("victim resumed", lambda: len([
			p for p in f.pods("jobset.sigs.k8s.io/jobset-name=victim")
			if p["status"].get("phase") == "Running"]) == 4, 60)
		self.assertEqual(f.jobset("victim")["status"].get("restarts"), 0)
		for name in ("first", "second", "victim", "boss"):
			f.call("DELETE", JS_API + "/" + name)

	def test_eviction_grace_and_node_loss(self):
		f = self.f
		out = self.queue_and_dir("ev")
		# Ready once the handler is set: a pod is Running before its
		# process can act on SIGTERM, on Kubernetes too.
		cmd = ('trap "echo term > /out/$SLICE_POD_NAME.$SLICE_POD_RESTART_'
		       'ATTEMPT; exit 143" TERM; touch /out/$SLICE_POD_NAME.ready; '
		       'sleep 60 & wait')
		self.create(rendered("ev", cmd, queue="lq-ev", grace=3,
				     mounts=[{"name": "out", "mountPath": "/out"}],
				     volumes=[{"name": "out", "hostPath": {
					     "path": out}}]))
		sel = "jobset.sigs.k8s.io/jobset-name=ev"
		ready = lambda attempt: [  # noqa: E731
			p for p in f.pods(sel) if p["metadata"]["labels"][
				"jobset.sigs.k8s.io/restart-attempt"] == attempt and
			os.path.exists(os.path.join(out, p["metadata"]["name"] +
						    ".ready"))]
		pods = f.until("ev ready", lambda: (lambda x: x if len(x) == 4
						    else None)(ready("0")))
		victim = pods[0]["metadata"]["name"]
		s, body = f.ctl("POST", "/_fake/evict", {"name": victim})
		self.assertEqual(s, 200, body)
		self.assertIn("DisruptionTarget", [c["type"] for c in body[
			"status"]["conditions"]])
		# Its handler ran: SIGTERM came first, not the SIGKILL.
		f.until("term seen", lambda: os.path.exists(os.path.join(
			out, victim + ".0")))
		# JobSet restarts the set: every pod recreated, attempt 1.
		f.until("ev restarted", lambda: len(ready("1")) == 4, 60)
		self.assertEqual(f.jobset("ev")["status"]["restarts"], 1)
		for p in pods:
			self.assertTrue(os.path.exists(os.path.join(
				out, p["metadata"]["name"] + ".0")))
		# Node loss: slice 1's pods die at once (no TERM), restart 2.
		# Attempt 0's pods may still be terminating on a loaded
		# machine; the node would take them down too.
		f.until("attempt 0 gone", lambda: not [
			p for p in f.pods(sel) if p["metadata"]["labels"][
				"jobset.sigs.k8s.io/restart-attempt"] == "0"], 60)
		s, body = f.ctl("POST", "/_fake/lose-node",
				{"node": "gke-tpu-slice-1"})
		# The node takes down every pod on it: an earlier test's
		# JobSet may still be terminating there (CI saw 3).
		lost = [n for n in body["pods"] if n.startswith("ev-")]
		self.assertEqual(len(lost), 2, body)
		f.until("ev restarted again", lambda: len([
			p for p in f.pods(sel) if p["metadata"]["labels"][
				"jobset.sigs.k8s.io/restart-attempt"] == "2" and
			p["status"].get("phase") == "Running"]) == 4, 60)
		for name in lost:
			self.assertFalse(os.path.exists(os.path.join(
				out, name + ".1")))
		# A pod that ignores SIGTERM (PID 1 without a handler) is
		# killed after its grace.
		s, pod, _ = f.call("POST", PODS, {
			"apiVersion": "v1", "kind": "Pod",
			"metadata": {"name": "stubborn"},
			"spec": {"terminationGracePeriodSeconds": 2,
				 "restartPolicy": "Never", "containers": [{
					 "name": "c", "image": "x",
					 "command": ["sleep", "60"]}]}})
		self.assertEqual(s, 201, pod)
		f.until("stubborn running", lambda: (f.get(PODS + "/stubborn") or
						     {}).get("status", {}).get(
							     "phase") == "Running")
		t0 = time.monotonic()
		s, body, _ = f.call("DELETE", PODS + "/stubborn")
		self.assertEqual(s, 200)
		self.assertTrue(body["metadata"]["deletionTimestamp"])
		f.until("stubborn gone", lambda: f.get(PODS + "/stubborn") is None)
		self.assertGreaterEqual(time.monotonic() - t0, 1.9)
		f.call("DELETE", JS_API + "/ev?propagationPolicy=Foreground")
		f.until("ev gone", lambda: not f.jobset("ev") and not f.pods(sel),
			30)


class WithoutKueue(unittest.TestCase):
	def test_queue_label_without_kueue_runs_at_once(self):
		f = Fake("--without-group", "kueue.x-k8s.io")
		try:
			groups = [g["name"] for g in f.get("/apis")["groups"]]
			self.assertNotIn("kueue.x-k8s.io", groups)
			s, text, _ = f.call("GET", KQ + "/namespaces/default/"
					    "localqueues")
			self.assertEqual((s, text), (404, "404 page not found\n"))
			s, body, _ = f.call("POST", JS_API, rendered(
				"nokueue", "true", slices=1, workers=1))
			self.assertEqual(s, 201, body)
			self.assertNotIn("suspend", body["spec"])
			f.until("completed", lambda: f.jobset("nokueue").get(
				"status", {}).get("terminalState") == "Completed")
		finally:
			f.stop()


class Lifetimes(unittest.TestCase):
	def test_job_deadline_and_jobset_ttl(self):
		f = Fake("--without-group", "kueue.x-k8s.io")
		try:
			doc = rendered("slow", "sleep 60", slices=1, workers=1,
				       max_restarts=0)
			doc["spec"]["ttlSecondsAfterFinished"] = 1
			doc["spec"]["replicatedJobs"][0]["template"]["spec"][
				"activeDeadlineSeconds"] = 1
			s, body, _ = f.call("POST", JS_API, doc)
			self.assertEqual(s, 201, body)
			f.until("the Job's deadline", lambda: [
				c for j in f.get("/apis/batch/v1/namespaces/default/"
						 "jobs")["items"]
				for c in j["status"].get("conditions", [])
				if c["type"] == "Failed" and
				c["reason"] == "DeadlineExceeded"])
			# Failed, then gone after its TTL, pods and all.
			f.until("the JobSet's TTL", lambda: f.jobset("slow") is None)
			f.until("its pods gone", lambda: not f.pods())
		finally:
			f.stop()


class Cluster(unittest.TestCase):
	def test_tls_token_container_api_and_shutdown(self):
		f = Fake("--tls", "--require-token", TOKEN, "--cluster",
			 "p/us-east5/c1")
		try:
			s, body, _ = f.call("GET", PODS)
			self.assertEqual((s, body["reason"], body["message"]),
					 (401, "Unauthorized", "Unauthorized"))
			s, body, _ = f.call("GET", PODS, token=TOKEN)
			self.assertEqual(s, 200)
			s, body, _ = f.call("GET", "/version")
			self.assertEqual((s, body["major"]), (200, "1"))
			path = "/v1/projects/p/locations/us-east5/clusters/c1"
			s, body, _ = f.call("GET", path, port=f.plain)
			self.assertEqual((s, body["error"]["status"]),
					 (401, "UNAUTHENTICATED"))
			s, body, _ = f.call("GET", path, port=f.plain, token=TOKEN)
			self.assertEqual(s, 200)
			self.assertEqual(body["endpoint"], "127.0.0.1:%d" % f.port)
			with open(os.path.join(f.state, "ca.pem")) as fp:
				self.assertEqual(base64.b64decode(body["masterAuth"][
					"clusterCaCertificate"]).decode(), fp.read())
			s, body, _ = f.call("GET", path.replace("c1", "c2"),
					    port=f.plain, token=TOKEN)
			self.assertEqual((s, body["error"]["status"]),
					 (404, "NOT_FOUND"))
			s, pod, _ = f.call("POST", PODS, {
				"apiVersion": "v1", "kind": "Pod",
				"metadata": {"name": "long"}, "spec": {
					"restartPolicy": "Never", "containers": [{
						"name": "c", "image": "x", "command": [
							"/bin/sh", "-c",
							"sleep 300 & sleep 301"]}]}},
				token=TOKEN)
			self.assertEqual(s, 201)
			procs = f.until("long started", lambda: [
				p for p in f.ctl("GET", "/_fake/processes")[1]
				if p["running"] and p["initPid"]])
			# unshare, the container's PID 1 and its child.
			tree = f.until("the pod's process tree", lambda: (
				lambda t: t if len(t) >= 3 else None)(
					descendants(procs[0]["pid"])))
			listed = f.until("the tree listed", lambda: [
				x for p in f.ctl("GET", "/_fake/processes")[1]
				for x in p["tree"] if x["cmdline"] == "sleep 300"])
			self.assertIn(listed[0]["pid"], tree)
		finally:
			f.stop()
		# Stopping the fake stopped every process it started.
		for _ in range(50):
			if not any(os.path.exists("/proc/%d" % p) for p in tree):
				break
			time.sleep(0.1)
		self.assertEqual([p for p in tree
				  if os.path.exists("/proc/%d" % p)], [])


def descendants(pid):
	"""pid and every process below it."""
	return [x["pid"] for x in kube_kubelet.process_tree(pid)]


if __name__ == "__main__":
	if os.geteuid() != 0:
		print("kube-fake: SKIP: pods run in private mount namespaces, "
		      "which needs root", file=sys.stderr)
		sys.exit(77)
	unittest.main(verbosity=2)
