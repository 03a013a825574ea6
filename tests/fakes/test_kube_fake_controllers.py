#!/usr/bin/env python3
"""test_kube_fake_controllers.py: the 'kube-fake-controllers' test.
Starts kube_fake.py on loopback and checks its controllers as slicectl
relies on them: Kueue admission, its visibility API and priority
preemption, JobSet restarts, failure and success policies and TTL, Job
podFailurePolicy, deadlines and orphaning, pods running as real processes
with the environment, mounts and /etc/hosts as rendered, logs, eviction
with its grace, node loss; a cluster without Kueue; the container API and
TLS, and that nothing outlives the fake. The fake and the helpers are
fake_testing.py's.
Runs as root (the pods' private mount namespaces need it) or skips.
"""

import base64
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kube_kubelet  # noqa: E402  (process_tree)
from fake_testing import (  # noqa: E402
	JS_API, KQ, PODS, pod_spec_of, rendered)
from fake_testing import KubeFake as Fake, main_as_root  # noqa: E402

TOKEN = "kube-token"


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
	main_as_root("kube-fake-controllers")
