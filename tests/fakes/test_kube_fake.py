#!/usr/bin/env python3
"""test_kube_fake.py: the 'kube-fake' test. Starts kube_fake.py on loopback
and checks that it keeps the Kubernetes API's contract as slicectl relies
on it: its YAML reader, discovery, refusals by the CRD schemas (bad enum,
unknown fields at JobSet, Job and Pod level under each fieldValidation,
bad quantity, wrong type, ObjectMeta) and by JobSet's webhook,
404/409/401/403 Status bodies, faults, watch semantics (resourceVersion,
selectors, 410, bookmarks, compaction), patches, dryRun, status
subresources, tables, Kueue's two versions, namespace deletion. The
controllers, pods and the cluster are test_kube_fake_controllers.py's;
the fake and the helpers are fake_testing.py's.
Runs as root (the pods' private mount namespaces need it) or skips.
"""

import http.client
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kube_api  # noqa: E402  (the schema check)
import kube_fake  # noqa: E402  (its CRDs)
import kube_yaml  # noqa: E402  (the YAML reader)
from fake_testing import (  # noqa: E402
	JS_API, KQ, PODS, causes, pod_spec_of, rendered)
from fake_testing import KubeFake as Fake, main_as_root  # noqa: E402


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

if __name__ == "__main__":
	main_as_root("kube-fake")
