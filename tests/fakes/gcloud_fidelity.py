#!/usr/bin/env python3
"""gcloud_fidelity.py WORKDIR: the 'gcloud-fidelity' test. The Google Cloud
CLI, which works against Google's services, checks the fakes:

- tpu_fake.py through `gcloud alpha compute tpus queued-resources` (v2alpha1,
  CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU): create flex-start and spot, describe,
  list, reset, perform-maintenance and delete, each waiting for its
  operation as gcloud does; gcloud's own flex-start body must be the one
  recorded in research/gke.md 4.1, and the fake must take every request as
  sent;
- gcs_fake.py through `gcloud storage` (CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE):
  cp up (a small file in one multipart request, a large one by resumable
  upload started under /resumable/upload/), ls -l, cp down (bytes
  compared), rm;
- vertex_fake.py through `gcloud ai custom-jobs`
  (CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM): create from a --config
  file (SPOT, restartJobOnWorkerRestart, a command), describe until
  RUNNING, list, cancel until CANCELLED, and a second cancel refused.

gcloud gets an access token file (--access-token-file) that both fakes
require, and CLOUDSDK_CONFIG in a temporary directory; it talks to nothing
but the fakes on loopback. It is slow to start (one to two seconds a call),
so the calls are few. Exits 77 (skipped), saying why, when gcloud or its
alpha component is not installed.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import fake_start  # next to this script: the fakes' one starter

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "fidelity-token"
ZONE = "us-east5-a"
PARENT = "projects/p/locations/" + ZONE
NAME = "gcloud-fidelity"
# gcloud 528 alpha's flex-start request, as captured (research/gke.md 4.1).
FLEX_BODY = {
	"provisioningModel": "FLEX_START",
	"queueingPolicy": {"validUntilDuration": "21600s"},
	"runDuration": {"maxRunDuration": "259200s"},
	"tpu": {"nodeSpec": [{
		"multiNodeParams": {"nodeCount": 2, "nodeIdPrefix": "ms"},
		"node": {"acceleratorType": "v6e-16",
			 "autocheckpointEnabled": False, "metadata": {},
			 "networkConfig": {"enableExternalIps": True,
					   "network": "default"},
			 "runtimeVersion": "v2-alpha-tpuv6e",
			 "serviceAccount": {}},
		"parent": PARENT}]}}


class Failure(Exception):
	pass


def check(cond, what):
	if not cond:
		raise Failure(what)


class Fake:
	"""One fake on loopback, stopped by its pid."""

	def __init__(self, work, script, *args):
		self.port_file = os.path.join(work, script + ".port")
		self.log = open(os.path.join(work, script + ".log"), "w")
		try:
			self.proc = fake_start.start(
				script, self.port_file,
				["--require-token", TOKEN] + list(args),
				stderr=self.log)
		except RuntimeError as err:
			raise Failure(str(err))
		with open(self.port_file) as f:
			self.url = "http://127.0.0.1:%d" % int(f.read())

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.log.close()

	def call(self, method, path, body=None, token=None):
		data = None if body is None else json.dumps(body).encode()
		req = urllib.request.Request(self.url + path, data=data,
					     method=method)
		req.add_header("Content-Type", "application/json")
		if token:
			req.add_header("Authorization", "Bearer " + token)
		with urllib.request.urlopen(req, timeout=30) as r:
			text = r.read()
		return json.loads(text) if text.strip() else None

	def requests(self):
		log = self.call("GET", "/_fake/requests")
		self.call("DELETE", "/_fake/requests")
		return log


class Gcloud:
	def __init__(self, gcloud, work, tpu, gcs, vertex):
		self.gcloud = gcloud
		self.token_file = os.path.join(work, "token")
		with open(self.token_file, "w") as f:
			f.write(TOKEN + "\n")
		config = os.path.join(work, "config")
		os.makedirs(config, exist_ok=True)
		self.env = {k: v for k, v in os.environ.items()
			    if not k.startswith("CLOUDSDK_")}
		self.env.update({
			"CLOUDSDK_CONFIG": config,
			"CLOUDSDK_CORE_PROJECT": "p",
			"CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
			"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
			"CLOUDSDK_CORE_CHECK_GCE_METADATA": "false",
			"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
			"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": tpu.url + "/",
			"CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE":
				gcs.url + "/storage/v1/",
			"CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM":
				vertex.url + "/",
		})
		self.calls = 0
		self.seconds = 0.0

	def run(self, *args, ok=True):
		argv = [self.gcloud, "--access-token-file", self.token_file,
			"--verbosity", "error"] + list(args)
		t = time.monotonic()
		p = subprocess.run(argv, env=self.env, capture_output=True,
				   text=True, timeout=300)
		self.calls += 1
		self.seconds += time.monotonic() - t
		if ok and p.returncode != 0:
			raise Failure("%s: exit %d:\n%s%s" % (" ".join(args),
							     p.returncode, p.stdout,
							     p.stderr))
		return p

	def tpu(self, *args):
		return self.run("alpha", "compute", "tpus", "queued-resources",
				*args, "--zone", ZONE)


def assert_clean(log, what):
	"""Every request routed, accepted, with no output-only field."""
	check(log, "%s: no requests reached the fake" % what)
	for r in log:
		# A GET may also find nothing (gcloud looks before it
		# writes) or get a range of an object; GCS answers a delete
		# 204.
		check(r["status"] == 200 or (r["method"] == "GET" and
					     r["status"] in (206, 404)) or
		      (r["method"] == "DELETE" and r["status"] == 204),
		      "%s: %s %s answered %s (%s)" % (what, r["method"],
						      r["path"], r["status"],
						      json.dumps(r.get("body"))))
		check(not r.get("ignored"), "%s: %s sent output-only %s" % (
			what, r["path"], r.get("ignored")))


def tpu_checks(g, tpu):
	tpu.call("POST", "/_fake/config", {"delay": 0.05})
	p = g.tpu("create", "qr-flex", "--accelerator-type", "v6e-16",
		  "--runtime-version", "v2-alpha-tpuv6e", "--node-count", "2",
		  "--node-prefix", "ms", "--provisioning-model", "flex-start",
		  "--max-run-duration", "72h", "--valid-until-duration", "6h")
	log = tpu.requests()
	assert_clean(log, "create flex-start")
	post = [r for r in log if r["method"] == "POST"][0]
	check(post["body"] == FLEX_BODY, "gcloud's flex-start body changed: "
	      "%s" % json.dumps(post["body"], sort_keys=True))
	check(post["query"].get("queuedResourceId") == "qr-flex",
	      "query %s" % post["query"])

	p = g.tpu("describe", "qr-flex", "--format", "json")
	qr = json.loads(p.stdout)
	check(qr["state"]["state"] == "ACTIVE", "state %s" % qr["state"])
	run = qr.get("runDuration", {})
	check(run.get("maxRunDuration") == "259200s" and
	      run.get("terminationTime"), "runDuration %s" % run)

	# gcloud alpha's --spot: provisioningModel STANDARD beside "spot".
	g.tpu("create", "qr-spot", "--accelerator-type", "v5litepod-8",
	      "--runtime-version", "v2-alpha-tpuv5-lite", "--node-id", "spot",
	      "--spot")
	post = [r for r in tpu.requests() if r["method"] == "POST"][0]
	check(post["body"].get("spot") == {} and
	      post["body"].get("provisioningModel") == "STANDARD",
	      "gcloud's --spot body changed: %s" % json.dumps(post["body"]))

	p = g.tpu("list", "--format", "json")
	names = sorted(q["name"].rsplit("/", 1)[-1] for q in json.loads(p.stdout))
	check(names == ["qr-flex", "qr-spot"], "list: %s" % names)

	g.tpu("reset", "qr-flex")
	tpu.call("POST", "/_fake/node", {
		"name": "ms-1", "upcomingMaintenance": {
			"type": "SCHEDULED", "canReschedule": True,
			"maintenanceStatus": "PENDING",
			"windowStartTime": "2030-01-01T00:00:00Z"}})
	g.tpu("perform-maintenance", "qr-flex", "--node-names", "ms-1")
	done = [m for m in tpu.call("GET", "/_fake/maintenance")
		if m.get("kind") == "performMaintenance"]
	check([m["node"] for m in done] == ["ms-1"], "maintenance %s" % done)

	for qid in ("qr-flex", "qr-spot"):
		g.tpu("delete", qid, "--force", "--quiet")
	assert_clean(tpu.requests(), "describe, list, reset, maintenance, "
		     "delete")
	left = tpu.call("GET", "/_fake/state")["queuedResources"]
	check(left == [], "left behind: %s" % left)


def gcs_checks(g, gcs, work):
	gcs.call("POST", "/storage/v1/b?project=p", {"name": "bkt"},
		 token=TOKEN)
	up = os.path.join(work, "up")
	os.makedirs(up, exist_ok=True)
	small = os.path.join(up, "small.txt")
	big = os.path.join(up, "big.bin")
	with open(small, "w") as f:
		f.write("hello from gcloud\n")
	with open(big, "wb") as f:
		# Over gcloud's 8 MiB resumable threshold.
		f.write(os.urandom(9 * 1024 * 1024 + 17))
	g.run("storage", "cp", small, big, "gs://bkt/dir/")
	log = gcs.requests()
	assert_clean(log, "storage cp up")
	starts = [r["path"] for r in log if r["method"] == "POST"]
	check(any(p.startswith("/resumable/upload/storage/v1/b/bkt/o")
		  for p in starts), "no resumable upload: %s" % starts)
	check(any(p.startswith("/upload/storage/v1/b/bkt/o")
		  for p in starts), "no simple upload: %s" % starts)

	p = g.run("storage", "ls", "-l", "gs://bkt/dir/")
	for path, size in ((small, 18), (big, 9 * 1024 * 1024 + 17)):
		want = "%d" % size
		line = [ln for ln in p.stdout.splitlines()
			if ln.endswith("gs://bkt/dir/" + os.path.basename(path))]
		check(line and line[0].split()[0] == want,
		      "ls -l: %s\n%s" % (path, p.stdout))

	down = os.path.join(work, "down")
	os.makedirs(down, exist_ok=True)
	g.run("storage", "cp", "gs://bkt/dir/*", down)
	for path in (small, big):
		with open(path, "rb") as a, open(os.path.join(
				down, os.path.basename(path)), "rb") as b:
			check(a.read() == b.read(), "%s came back different" %
			      path)

	g.run("storage", "rm", "gs://bkt/dir/**")
	listing = gcs.call("GET", "/storage/v1/b/bkt/o", token=TOKEN)
	check(not listing.get("items"), "rm left %s" % listing)
	assert_clean(gcs.requests(), "storage ls, cp down, rm")


# A custom job as gcloud's --config reads it (a CustomJobSpec in YAML;
# JSON is YAML).
VERTEX_SPEC = {
	"workerPoolSpecs": [{
		"machineSpec": {"machineType": "n1-standard-4"},
		"replicaCount": 1,
		"containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1",
				  "command": ["/bin/sh", "-c", "sleep 30"]}}],
	"scheduling": {"strategy": "SPOT", "restartJobOnWorkerRestart": True}}


def vertex_checks(g, vertex, work):
	vertex.call("POST", "/_fake/config", {"delay": 0.05, "grace": 0.2})
	config = os.path.join(work, "custom-job.yaml")
	with open(config, "w") as f:
		json.dump(VERTEX_SPEC, f)
	region = ["--region", "us-central1"]
	p = g.run("ai", "custom-jobs", "create", "--display-name", "g1",
		  "--config", config, "--format", "json", *region)
	job = json.loads(p.stdout)
	log = vertex.requests()
	assert_clean(log, "ai custom-jobs create")
	body = [r for r in log if r["method"] == "POST"][0]["body"]
	want = dict(VERTEX_SPEC, workerPoolSpecs=[dict(
		VERTEX_SPEC["workerPoolSpecs"][0], replicaCount="1")])
	check(body == {"displayName": "g1", "jobSpec": want},
	      "gcloud's custom job body changed: %s" % json.dumps(body))
	jid = job["name"].rsplit("/", 1)[-1]

	def state():
		return g.run("ai", "custom-jobs", "describe", jid, "--format",
			     "value(state)", *region).stdout.strip()
	check(state() in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING"),
	      "describe: not started")
	p = g.run("ai", "custom-jobs", "list", "--format", "value(name)",
		  *region)
	check(p.stdout.split() == [job["name"]], "list: %s" % p.stdout)
	g.run("ai", "custom-jobs", "cancel", jid, *region)
	check(state() in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"),
	      "cancel: the job did not end")
	assert_clean(vertex.requests(), "ai custom-jobs describe, list, "
		     "cancel")
	p = g.run("ai", "custom-jobs", "cancel", jid, *region, ok=False)
	check(p.returncode != 0 and "FAILED_PRECONDITION" in p.stderr,
	      "a second cancel: %s" % p.stderr)


def main():
	if len(sys.argv) != 2:
		sys.exit("usage: gcloud_fidelity.py WORKDIR")
	gcloud = os.environ.get("GCLOUD") or shutil.which("gcloud")
	if not gcloud:
		print("%s: SKIP: gcloud (the Google Cloud CLI) is not installed"
		      % NAME, file=sys.stderr)
		return 77
	os.makedirs(sys.argv[1], exist_ok=True)
	with tempfile.TemporaryDirectory(dir=sys.argv[1]) as work:
		tpu = Fake(work, "tpu_fake.py")
		gcs = vertex = None
		try:
			gcs = Fake(work, "gcs_fake.py")
			vertex = Fake(work, "vertex_fake.py")
			g = Gcloud(gcloud, work, tpu, gcs, vertex)
			p = g.run("alpha", "compute", "tpus", "queued-resources",
				  "list", "--zone", ZONE, ok=False)
			if p.returncode != 0 and "alpha" in p.stderr and \
					"install" in p.stderr:
				print("%s: SKIP: gcloud's alpha component is not "
				      "installed (gcloud components install alpha)"
				      % NAME, file=sys.stderr)
				return 77
			check(p.returncode == 0, "list: %s" % p.stderr)
			tpu.requests()
			tpu_checks(g, tpu)
			gcs_checks(g, gcs, work)
			vertex_checks(g, vertex, work)
			print("%s: every check passed: %d gcloud calls, %.1f s"
			      % (NAME, g.calls, g.seconds))
			return 0
		except Failure as err:
			print("%s: FAIL: %s" % (NAME, err), file=sys.stderr)
			for fake in (tpu, gcs, vertex):
				if fake:
					with open(fake.log.name) as f:
						sys.stderr.write(f.read())
			return 1
		finally:
			tpu.stop()
			for fake in (gcs, vertex):
				if fake:
					fake.stop()


if __name__ == "__main__":
	sys.exit(main())
