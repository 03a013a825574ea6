#!/usr/bin/env python3
"""A fake Vertex AI API (v1, custom jobs) for slicectl's tests: the
regional endpoint (https://REGION-aiplatform.googleapis.com) served as
plain HTTP on loopback, the paths unchanged.

- customJobs: create, get, list (filter, pageSize, pageToken), cancel,
  delete (a done long-running Operation, which operations.get serves);
  every body checked against the schemas Google Cloud CLI 528 knows
  (api/aiplatform.v1.customjobs.gcloud-528.json) with tpu_fake.py's
  checker: unknown names, JSON types, enums, durations, with Google's
  messages ("Invalid JSON payload received. Unknown name "x" at
  'custom_job': Cannot find field."); output-only fields are dropped and
  recorded; required fields are refused as Vertex words it ("List of
  found errors:\t1.Field: custom_job.display_name; Message: Required field
  is not set.\t");
- states JOB_STATE_QUEUED, PENDING (each lasting a configurable delay),
  RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED;
- replicas: each replica of each worker pool runs the pool's
  containerSpec command + args (imageUri is not run: there are no
  images; a pythonPackageSpec runs python3 -m pythonModule args) as a
  local process group, its output in WORKDIR/JOBID/workerpoolI-J.log,
  with CLUSTER_SPEC and TF_CONFIG, AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and
  AIP_TENSORBOARD_LOG_DIR (from baseOutputDirectory), CLOUD_ML_PROJECT_ID,
  MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, then containerSpec.env.
  Each replica has its own free loopback port, its CLUSTER_SPEC address
  127.0.0.1:PORT, which stays the same across restarts (Vertex restarts a
  worker "with the same hostname");
- restarts as Vertex documents them
  (https://cloud.google.com/vertex-ai/docs/training/understanding-training-service):
  the primary replica (workerpool0, index 0) exiting 0 ends the job
  SUCCEEDED; a replica exiting non-zero is restarted in place, up to
  "worker_restarts" (5) times, then the whole job is retried up to
  "job_retries" (3) times, then the job FAILED; an exit code in
  "permanent_exit_codes" (the docs' "common errors") fails the job at
  once; with scheduling.restartJobOnWorkerRestart every worker restart
  restarts every replica;
- chaos (control endpoints below): a replica's VM lost (its process
  group SIGKILLed, the worker restarted on "another VM"; with
  scheduling.disableRetries, which turns off retries of internal errors,
  the job FAILED), a maintenance event (SIGTERM, "grace" seconds, SIGKILL,
  restarted the same way), the preemption of a SPOT job (SIGTERM, grace,
  FAILED), the end of maxWaitDuration for a FLEX_START job held PENDING,
  and scheduling.timeout;
- errors in Google's shape: {"error": {"code", "message", "status",
  "details"}}.

Control endpoints (no auth; JSON in and out):
  POST /_fake/config    merges settings, answers the whole config:
      "delay": S, "delays": {"JOB_STATE_QUEUED": S, "JOB_STATE_PENDING": S}
      "hold": bool           jobs stay PENDING (no capacity): a FLEX_START
                             job FAILS once maxWaitDuration (default 24 h,
                             0 forever) passes; set false to release
      "grace": S             SIGTERM to SIGKILL (cancel, maintenance,
                             preemption)
      "worker_restarts": N, "job_retries": N, "permanent_exit_codes": [N]
      "locations": [L]       other locations are 404 (null: any)
  GET  /_fake/config
  POST /_fake/lose_vm       {"name": JOB, "pool": I, "replica": J}
  POST /_fake/maintenance   {"name": JOB, "pool": I, "replica": J}
  POST /_fake/preempt       {"name": JOB}: a RUNNING SPOT job
  POST /_fake/faults, GET, DELETE; GET /_fake/requests, DELETE (as
                        tpu_fake.py's)
  GET  /_fake/state     {"jobs": [{"name", "state", "jobRetries",
                        "replicas": [{"pool", "index", "port", "pid",
                        "running", "starts", "exitCodes", "log"}]}],
                        "config"}
  POST /_fake/reset     kills every replica, forgets every job
JOB is the job's id or its whole name.

Python standard library only, with fake_common.py and tpu_fake.py (its
body checker, errors and request handling) next to it.

Usage: vertex_fake.py --port-file FILE [--port N] [--schemas PATH]
                      [--work-dir DIR] [--pass-env NAME]...
                      [--require-token T] [--delay S] [--verbose]
"""

import argparse
import copy
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import fake_common
import tpu_fake
from tpu_fake import ApiError, check_query

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMAS = os.path.join(HERE, "..", "..", "api",
			       "aiplatform.v1.customjobs.gcloud-528.json")
V1 = "GoogleCloudAiplatformV1"
JOB = V1 + "CustomJob"

# What the gcloud-528 schemas (apitools classes) cannot say, from the v1
# protos (google/cloud/aiplatform/v1/custom_job.proto, job_state.proto):
# the output-only fields, and which strings are Durations or Timestamps.
FIELDS = {
	(JOB, "name"): {"readOnly": True},
	(JOB, "state"): {"readOnly": True},
	(JOB, "error"): {"readOnly": True},
	(JOB, "webAccessUris"): {"readOnly": True},
	(JOB, "satisfiesPzs"): {"readOnly": True},
	(JOB, "satisfiesPzi"): {"readOnly": True},
	(V1 + "Scheduling", "timeout"): {"format": "google-duration"},
	(V1 + "Scheduling", "maxWaitDuration"): {"format": "google-duration"},
}
for _f in ("createTime", "startTime", "endTime", "updateTime"):
	FIELDS[(JOB, _f)] = {"readOnly": True, "format": "google-datetime"}

# The proto packages of the schema names, for Google's type URLs.
PACKAGES = ((V1, "google.cloud.aiplatform.v1"), ("GoogleRpc", "google.rpc"),
	    ("GoogleLongrunning", "google.longrunning"),
	    ("GoogleProtobuf", "google.protobuf"))

# The system parameters every Google API binds in a query.
GLOBAL_PARAMS = {k: {"type": t, "location": "query"} for k, t in (
	("$.xgafv", "string"), ("access_token", "string"), ("alt", "string"),
	("callback", "string"), ("fields", "string"), ("key", "string"),
	("oauth_token", "string"), ("prettyPrint", "boolean"),
	("quotaUser", "string"), ("uploadType", "string"),
	("upload_protocol", "string"))}

PARENT = r"/v1/projects/(?P<project>[^/:]+)/locations/(?P<location>[^/:]+)"
JOB_ID = r"/customJobs/(?P<job>[^/:]+)"


class Route:
	"""One REST method (api/README.md: from Google's discovery
	document): its path, request schema and query parameters."""

	def __init__(self, short, http, path, request=None, root="",
		     params=()):
		self.short, self.http, self.request = short, http, request
		self.route = re.compile(path)
		self.root = root
		self.params = {k: {"type": t, "location": "query"}
			       for k, t in params}
		self.id = "aiplatform.projects.locations." + short

	def body_root(self):
		return self.root


ROUTES = [
	Route("customJobs.create", "POST", PARENT + "/customJobs", JOB,
	      "custom_job"),
	Route("customJobs.list", "GET", PARENT + "/customJobs", params=(
		("filter", "string"), ("pageSize", "integer"),
		("pageToken", "string"), ("readMask", "string"))),
	Route("customJobs.get", "GET", PARENT + JOB_ID),
	Route("customJobs.delete", "DELETE", PARENT + JOB_ID),
	Route("customJobs.cancel", "POST", PARENT + JOB_ID + ":cancel",
	      V1 + "CancelCustomJobRequest"),
	Route("operations.get", "GET", PARENT + r"/operations/(?P<op>[^/:]+)"),
]

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
# A job's retries and a worker's restarts, as the lifecycle page gives
# them: "up to five times for each worker", then "retries the whole job up
# to three times".
WORKER_RESTARTS, JOB_RETRIES = 5, 3
# Scheduling's defaults (custom_job.proto): a 7-day timeout; a
# FLEX_START job waits 24 hours for resources, 0 meaning forever
# (https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws).
DEFAULT_TIMEOUT, DEFAULT_MAX_WAIT = 7 * 86400, 86400
TICK = 0.05


class Schemas:
	"""The body schemas with FIELDS merged in; what tpu_fake.Checker
	asks of its discovery document."""

	def __init__(self, path):
		with open(path) as f:
			self.schemas = copy.deepcopy(json.load(f)["schemas"])
		for (schema, field), extra in FIELDS.items():
			self.schemas[schema]["properties"][field].update(extra)
		self.global_params = GLOBAL_PARAMS

	@staticmethod
	def type_url(schema):
		for prefix, package in PACKAGES:
			if schema.startswith(prefix):
				schema = package + "." + schema[len(prefix):]
				break
		return "type.googleapis.com/" + schema

	enum_type = tpu_fake.Discovery.enum_type

	methods = ROUTES
	route = tpu_fake.Discovery.route


def required(fields):
	"""INVALID_ARGUMENT for unset required fields, in Vertex's words."""
	text = "List of found errors:\t" + "".join(
		"%d.Field: %s; Message: Required field is not set.\t" % (i + 1, f)
		for i, f in enumerate(fields))
	return ApiError("INVALID_ARGUMENT", text, [{
		"@type": "type.googleapis.com/google.rpc.BadRequest",
		"fieldViolations": [{"field": f, "description":
				     "Required field is not set."}
				    for f in fields]}])


def invalid(field, why):
	return ApiError("INVALID_ARGUMENT", "List of found errors:\t1.Field: "
			"%s; Message: %s\t" % (field, why), [{
				"@type": "type.googleapis.com/google.rpc.BadRequest",
				"fieldViolations": [{"field": field,
						     "description": why}]}])


def check_job(body):
	"""What Vertex requires of a CustomJob beyond its schema."""
	missing = []
	if not body.get("displayName"):
		missing.append("custom_job.display_name")
	pools = (body.get("jobSpec") or {}).get("workerPoolSpecs") or []
	if not pools:
		missing.append("custom_job.job_spec.worker_pool_specs")
	for i, pool in enumerate(pools):
		at = "custom_job.job_spec.worker_pool_specs[%d]" % i
		# An empty spec stands for a pool not used (the distributed
		# training page leaves pools 2 and 3 as {}), never the first.
		if not pool and i > 0:
			continue
		if not (pool.get("machineSpec") or {}).get("machineType"):
			missing.append(at + ".machine_spec.machine_type")
		code = [k for k in ("containerSpec", "pythonPackageSpec")
			if k in pool]
		if not code:
			missing.append(at + ".task")
		elif "containerSpec" in pool and \
				not pool["containerSpec"].get("imageUri"):
			missing.append(at + ".container_spec.image_uri")
	if missing:
		raise required(missing)
	for i, pool in enumerate(pools):
		at = "custom_job.job_spec.worker_pool_specs[%d]" % i
		if len([k for k in ("containerSpec", "pythonPackageSpec")
			if k in pool]) > 1:
			raise invalid(at, "Only one of container_spec and "
				      "python_package_spec can be set.")
		n = int(pool.get("replicaCount") or 0)
		if pool and n < 1:
			raise invalid(at + ".replica_count", "Replica count must "
				      "be positive.")
		# The primary replica is one replica (distributed-training).
		if i == 0 and n != 1:
			raise invalid(at + ".replica_count", "The first worker "
				      "pool must have exactly one replica.")
	if len(pools) > 4:
		raise invalid("custom_job.job_spec.worker_pool_specs",
			      "At most 4 worker pools are allowed.")


def duration(text, default):
	return float(text[:-1]) if text else default


def free_port(taken):
	while True:
		with socket.socket() as s:
			s.bind(("127.0.0.1", 0))
			port = s.getsockname()[1]
		if port not in taken:
			taken.add(port)
			return port


def exit_status(code):
	"""A container's exit status: 128 + the signal that killed it."""
	return 128 - code if code < 0 else code


# ---------------------------------------------------------------- jobs


class Replica:
	def __init__(self, pool, index, port, log):
		self.pool, self.index, self.port, self.log = pool, index, port, log
		self.proc = None
		self.starts = self.restarts = 0
		self.exit_codes = []
		self.done = False
		# Why the fake itself stops the process ("maintenance",
		# "lost", "cancel", "preempt", "end"), and its SIGKILL time.
		self.stopping = None
		self.kill_at = None

	@property
	def name(self):
		return "workerpool%d-%d" % (self.pool, self.index)

	@property
	def running(self):
		return self.proc is not None and self.proc.poll() is None

	def signal(self, sig):
		if self.running:
			try:
				os.killpg(self.proc.pid, sig)
			except OSError:
				pass

	def kill(self):
		"""SIGKILLs the process group and reaps its leader."""
		if self.proc is None:
			return
		self.signal(signal.SIGKILL)
		try:
			self.proc.wait(10)
		except subprocess.TimeoutExpired:
			pass


class Job:
	def __init__(self, project, location, jid, body, now):
		self.project, self.location, self.id = project, location, jid
		self.body = body
		self.state = "JOB_STATE_QUEUED"
		self.create_time = self.update_time = self.entered = now
		self.start_time = self.end_time = None
		self.error = None
		self.replicas = []
		self.retries = 0

	@property
	def name(self):
		return "projects/%s/locations/%s/customJobs/%s" % (
			self.project, self.location, self.id)

	@property
	def spec(self):
		return self.body.get("jobSpec") or {}

	@property
	def scheduling(self):
		return self.spec.get("scheduling") or {}

	@property
	def pools(self):
		return self.spec.get("workerPoolSpecs") or []

	def enter(self, state, now):
		self.state, self.entered, self.update_time = state, now, now
		if state in TERMINAL:
			self.end_time = now

	def resource(self):
		r = copy.deepcopy(self.body)
		r.update(name=self.name, state=self.state,
			 createTime=fake_common.rfc3339(self.create_time),
			 updateTime=fake_common.rfc3339(self.update_time))
		if self.start_time is not None:
			r["startTime"] = fake_common.rfc3339(self.start_time)
		if self.end_time is not None:
			r["endTime"] = fake_common.rfc3339(self.end_time)
		if self.error:
			r["error"] = self.error
		return dict(sorted(r.items()))


class Store:
	"""Jobs, their replicas' processes, operations, faults and the
	request log; a thread steps every job TICK seconds."""

	def __init__(self, delay, work_dir, pass_env):
		self.lock = threading.RLock()
		self.delay0 = delay
		self.work_dir, self.pass_env = work_dir, pass_env
		self.faults, self.requests = [], []
		self.reset()

	def reset(self):
		self.kill_all()
		self.jobs = {}
		self.operations = {}
		self.ports = set()
		self.ids = itertools.count(1000000000000000000 +
					   int(time.time() * 1000) % 10 ** 12)
		self.config = {"delay": self.delay0, "delays": {}, "hold": False,
			       "grace": 1.0, "worker_restarts": WORKER_RESTARTS,
			       "job_retries": JOB_RETRIES,
			       "permanent_exit_codes": [], "locations": None}

	def kill_all(self):
		for job in getattr(self, "jobs", {}).values():
			for r in job.replicas:
				r.kill()

	def delay(self, state):
		return self.config["delays"].get(state, self.config["delay"])

	def run(self):
		while True:
			time.sleep(TICK)
			with self.lock:
				now = time.time()
				for job in list(self.jobs.values()):
					self.step(job, now)

	# ---- the walk

	def step(self, job, now):
		s = job.state
		if s == "JOB_STATE_QUEUED" and now >= job.entered + \
				self.delay(s):
			job.enter("JOB_STATE_PENDING", now)
		elif s == "JOB_STATE_PENDING":
			self.pending(job, now)
		elif s == "JOB_STATE_RUNNING":
			self.running(job, now)
		elif s == "JOB_STATE_CANCELLING":
			if self.stopped(job, now):
				self.end(job, now, "JOB_STATE_CANCELLED",
					 {"code": 1, "message": "CANCELED"})

	def pending(self, job, now):
		sched = job.scheduling
		if self.config["hold"]:
			wait = duration(sched.get("maxWaitDuration"),
					DEFAULT_MAX_WAIT)
			if sched.get("strategy") == "FLEX_START" and wait and \
					now >= job.entered + wait:
				# The docs say only that the job waits this
				# long; failing it then, RESOURCE_EXHAUSTED, is
				# the fake's choice.
				self.end(job, now, "JOB_STATE_FAILED", {
					"code": 8, "message": "The job could not "
					"get the resources it requested within "
					"scheduling.max_wait_duration (%s)." %
					sched.get("maxWaitDuration", "86400s")})
			return
		if now < job.entered + self.delay("JOB_STATE_PENDING"):
			return
		self.make_replicas(job)
		for r in job.replicas:
			self.start(job, r)
		# Vertex runs each worker's code as soon as it is up, and the
		# job is RUNNING when all are (understanding-training-service).
		job.start_time = now
		job.enter("JOB_STATE_RUNNING", now)

	def running(self, job, now):
		timeout = duration(job.scheduling.get("timeout"), DEFAULT_TIMEOUT)
		if now >= job.start_time + timeout:
			self.stop_all(job, now, "end")
			# The fake's choice of code: the docs name the limit
			# only ("The maximum job running time").
			self.end(job, now, "JOB_STATE_FAILED", {
				"code": 4, "message": "The job ran longer than "
				"scheduling.timeout (%s)." %
				job.scheduling.get("timeout")})
			return
		for r in job.replicas:
			if job.state != "JOB_STATE_RUNNING":
				return
			if r.stopping:
				self.chaos_step(job, r, now)
			elif r.proc is not None and not r.done and \
					r.proc.poll() is not None:
				self.exited(job, r, now)

	def chaos_step(self, job, r, now):
		"""A replica the fake stops: SIGKILL at its time, then what
		Vertex does for the reason."""
		if r.running and now < r.kill_at:
			return
		r.kill()
		why, r.stopping = r.stopping, None
		if why == "preempt":
			if all(not x.stopping for x in job.replicas):
				self.stop_all(job, now, "end")
				self.end(job, now, "JOB_STATE_FAILED", job.preempted)
			return
		if job.scheduling.get("disableRetries"):
			self.stop_all(job, now, "end")
			self.end(job, now, "JOB_STATE_FAILED", {
				"code": 13, "message": "Internal error occurred "
				"for the current attempt: the VM of replica %s "
				"was %s; scheduling.disable_retries is set." %
				(r.name, "lost" if why == "lost" else
				 "under maintenance")})
			return
		# "restarts the worker on another VM", with its hostname.
		self.restart(job, [r] if not self.whole(job) else job.replicas)

	def exited(self, job, r, now):
		code = exit_status(r.proc.returncode)
		r.exit_codes.append(code)
		if code == 0:
			r.done = True
			if (r.pool, r.index) == (0, 0):
				self.stop_all(job, now, "end")
				self.end(job, now, "JOB_STATE_SUCCEEDED", None)
			return
		failed = {"code": 3, "message": "The replica %s exited with a "
			  "non-zero status of %d. To find out more about why your "
			  "job exited please check the logs: https://console."
			  "cloud.google.com/logs/viewer?project=%s&resource="
			  "ml_job%%2Fjob_id%%2F%s" % (r.name, code, job.project,
						     job.id)}
		if code in self.config["permanent_exit_codes"]:
			self.stop_all(job, now, "end")
			self.end(job, now, "JOB_STATE_FAILED", failed)
			return
		if r.restarts < self.config["worker_restarts"]:
			r.restarts += 1
			self.restart(job, job.replicas if self.whole(job) else [r])
			return
		if job.retries < self.config["job_retries"]:
			job.retries += 1
			for x in job.replicas:
				x.restarts = 0
				x.done = False
			self.restart(job, job.replicas)
			return
		self.stop_all(job, now, "end")
		self.end(job, now, "JOB_STATE_FAILED", failed)

	@staticmethod
	def whole(job):
		"""Whether a worker's restart restarts every replica."""
		s = job.scheduling
		return bool(s.get("restartJobOnWorkerRestart")) and \
			not s.get("disableRetries")

	def restart(self, job, replicas):
		for r in replicas:
			r.kill()
			r.done = False
			self.start(job, r)

	def stop_all(self, job, now, why):
		"""SIGTERMs every running replica; chaos_step or stopped()
		SIGKILLs them after the grace period."""
		for r in job.replicas:
			if r.running:
				r.signal(signal.SIGTERM)
				r.stopping, r.kill_at = why, now + self.config["grace"]
		if why == "end":
			for r in job.replicas:
				r.kill()
				r.stopping = None

	def stopped(self, job, now):
		"""Whether every replica is gone; SIGKILLs those past their
		grace."""
		alive = False
		for r in job.replicas:
			if r.running and now < (r.kill_at or 0):
				alive = True
			elif r.proc is not None:
				r.kill()
				r.stopping = None
		return not alive

	def end(self, job, now, state, error):
		job.error = error
		job.enter(state, now)

	# ---- replicas

	def make_replicas(self, job):
		if job.replicas:
			return
		d = os.path.join(self.work_dir, job.id)
		os.makedirs(d, exist_ok=True)
		for i, pool in enumerate(job.pools):
			for j in range(int(pool.get("replicaCount") or 0)):
				job.replicas.append(Replica(
					i, j, free_port(self.ports),
					os.path.join(d, "workerpool%d-%d.log" % (i, j))))

	def cluster(self, job):
		out = {}
		for r in job.replicas:
			out.setdefault("workerpool%d" % r.pool, []).append(
				"127.0.0.1:%d" % r.port)
		return out

	def environment(self, job, r):
		env = {k: os.environ[k] for k in
		       ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH") +
		       tuple(self.pass_env) if k in os.environ}
		cluster = self.cluster(job)
		job_text = json.dumps(job.spec, sort_keys=True)
		# https://cloud.google.com/vertex-ai/docs/training/distributed-training
		# (CLUSTER_SPEC; TF_CONFIG names the pools chief, worker, ps
		# and evaluator).
		env["CLUSTER_SPEC"] = json.dumps({
			"cluster": cluster, "environment": "cloud",
			"task": {"type": "workerpool%d" % r.pool, "index": r.index},
			"job": job_text})
		tf_names = ("chief", "worker", "ps", "evaluator")
		env["TF_CONFIG"] = json.dumps({
			"cluster": {tf_names[int(k[-1])]: v
				    for k, v in cluster.items()},
			"environment": "cloud",
			"task": {"type": tf_names[r.pool], "index": r.index},
			"job": job_text})
		# PyTorch's rendezvous, as Vertex sets it: the primary is the
		# master, workerpool1's replicas the other ranks.
		ranks = [x for x in job.replicas if x.pool in (0, 1)]
		env["MASTER_ADDR"], env["MASTER_PORT"] = "127.0.0.1", str(
			job.replicas[0].port)
		env["WORLD_SIZE"] = str(len(ranks))
		if r in ranks:
			env["RANK"] = str(ranks.index(r))
		env["CLOUD_ML_PROJECT_ID"] = job.project
		base = (job.spec.get("baseOutputDirectory") or {}).get(
			"outputUriPrefix")
		if base:
			# CustomJobSpec.base_output_directory's documentation.
			base = base.rstrip("/")
			env["AIP_MODEL_DIR"] = base + "/model/"
			env["AIP_CHECKPOINT_DIR"] = base + "/checkpoints/"
			env["AIP_TENSORBOARD_LOG_DIR"] = base + "/logs/"
		pool = job.pools[r.pool]
		code = pool.get("containerSpec") or pool.get("pythonPackageSpec")
		for e in code.get("env") or []:
			env[e.get("name", "")] = e.get("value", "")
		return env

	def start(self, job, r):
		pool = job.pools[r.pool]
		if "containerSpec" in pool:
			c = pool["containerSpec"]
			argv = (c.get("command") or []) + (c.get("args") or [])
		else:
			p = pool["pythonPackageSpec"]
			argv = [sys.executable, "-m", p.get("pythonModule", "")] + \
				(p.get("args") or [])
		r.starts += 1
		with open(r.log, "ab") as f:
			if not argv:
				# An image's entrypoint would run; the fake has
				# no images.
				f.write(b"vertex-fake: %s has no command; the "
					b"fake runs no image\n" % r.name.encode())
				argv = ["/bin/false"]
			try:
				r.proc = subprocess.Popen(
					argv, env=self.environment(job, r),
					stdin=subprocess.DEVNULL, stdout=f,
					stderr=subprocess.STDOUT,
					start_new_session=True,
					cwd=os.path.dirname(r.log))
			except OSError as err:
				f.write(b"vertex-fake: %s\n" % str(err).encode())
				r.proc = subprocess.Popen(["/bin/false"])

	# ---- views

	def find(self, project, location, jid):
		job = self.jobs.get((project, location, jid))
		if job is None:
			raise ApiError("NOT_FOUND", "The CustomJob does not exist.")
		return job

	def by_name(self, doc):
		name = str(doc.get("name", ""))
		for job in self.jobs.values():
			if name in (job.id, job.name):
				return job
		raise ApiError("NOT_FOUND", "no job %r" % name)

	def replica(self, doc):
		job = self.by_name(doc)
		if job.state != "JOB_STATE_RUNNING":
			raise ApiError("FAILED_PRECONDITION", "%s is %s" %
				       (job.name, job.state))
		for r in job.replicas:
			if (r.pool, r.index) == (doc.get("pool", 0),
						 doc.get("replica", 0)):
				return job, r
		raise ApiError("NOT_FOUND", "%s has no replica %r" % (
			job.name, doc))

	def snapshot(self):
		jobs = []
		for job in self.jobs.values():
			jobs.append({"name": job.name, "state": job.state,
				     "jobRetries": job.retries, "replicas": [{
					     "pool": r.pool, "index": r.index,
					     "port": r.port, "pid": r.proc.pid
					     if r.proc else None,
					     "running": r.running,
					     "starts": r.starts,
					     "exitCodes": r.exit_codes,
					     "log": r.log}
					     for r in job.replicas]})
		return {"jobs": jobs, "config": self.config}

	def configure(self, doc):
		c = copy.deepcopy(self.config)
		for k, v in doc.items():
			if k not in c:
				raise ValueError("unknown setting %r" % k)
			if k == "delays" and isinstance(v, dict):
				c["delays"].update(v)
				c["delays"] = {s: d for s, d in c["delays"].items()
					       if d is not None}
			else:
				c[k] = v
		for k in ("delay", "grace", "worker_restarts", "job_retries"):
			if not isinstance(c[k], (int, float)) or c[k] < 0:
				raise ValueError("%s must be a number >= 0" % k)
		self.config = c
		return c


# ---------------------------------------------------------------- HTTP


class Handler(tpu_fake.Handler):
	"""The API under /v1/, control under /_fake/: tpu_fake.py's
	request log, faults, auth and body checks, Vertex's routes."""
	server_version = "vertex-fake/1"
	service = "aiplatform.googleapis.com"

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("vertex-fake: %s\n" % (fmt % args))

	def api_call(self):
		method, p = self.disco.route(self.command, self.raw_path)
		self.require_auth()
		locations = self.store.config["locations"]
		if locations is not None and p["location"] not in locations:
			raise ApiError("NOT_FOUND", "Location projects/%s/locations/"
				       "%s not found" % (p["project"], p["location"]))
		check_query(self.disco, method, self.query)
		body = self.request_body(method) if method.request else None
		with self.store.lock:
			return getattr(self, method.short.replace(".", "_"))(
				p, body, time.time())

	def customJobs_create(self, p, body, now):
		check_job(body)
		st = self.store
		jid = str(next(st.ids))
		job = Job(p["project"], p["location"], jid, body, now)
		st.jobs[(job.project, job.location, jid)] = job
		return 200, job.resource(), None

	def customJobs_get(self, p, body, now):
		job = self.store.find(p["project"], p["location"], p["job"])
		return 200, job.resource(), None

	def customJobs_list(self, p, body, now):
		keep = job_filter(self.query.get("filter", ""))
		items = [j for (pp, loc, _), j in self.store.jobs.items()
			 if (pp, loc) == (p["project"], p["location"]) and keep(j)]
		return self.page(items, "customJobs", Job.resource)

	def customJobs_cancel(self, p, body, now):
		st = self.store
		job = st.find(p["project"], p["location"], p["job"])
		if job.state in TERMINAL or job.state == "JOB_STATE_CANCELLING":
			raise ApiError("FAILED_PRECONDITION", "Cannot cancel "
				       "CustomJob %s as it is in state %s." %
				       (job.name, job.state))
		st.stop_all(job, now, "cancel")
		job.enter("JOB_STATE_CANCELLING", now)
		return 200, {}, None

	def customJobs_delete(self, p, body, now):
		st = self.store
		job = st.find(p["project"], p["location"], p["job"])
		if job.state not in TERMINAL:
			raise ApiError("FAILED_PRECONDITION", "CustomJob %s is in "
				       "state %s; only a job that has ended can be "
				       "deleted. Cancel it first." %
				       (job.name, job.state))
		for r in job.replicas:
			st.ports.discard(r.port)
		del st.jobs[(job.project, job.location, job.id)]
		oid = str(next(st.ids))
		t = fake_common.rfc3339(now)
		op = {"name": "projects/%s/locations/%s/operations/%s" % (
			job.project, job.location, oid),
		      "metadata": {"@type": "type.googleapis.com/google.cloud."
				   "aiplatform.v1.DeleteOperationMetadata",
				   "genericMetadata": {"createTime": t,
						       "updateTime": t}},
		      "done": True,
		      "response": {"@type": "type.googleapis.com/"
				   "google.protobuf.Empty"}}
		st.operations[op["name"]] = op
		return 200, op, None

	def operations_get(self, p, body, now):
		name = "projects/%s/locations/%s/operations/%s" % (
			p["project"], p["location"], p["op"])
		op = self.store.operations.get(name)
		if op is None:
			raise ApiError("NOT_FOUND", "Operation %s not found." % name)
		return 200, op, None

	# ---- control

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.store
		with st.lock:
			now = time.time()
			if (p, m) == ("/_fake/config", "POST"):
				try:
					return 200, st.configure(self.fake_json()), None
				except ValueError as err:
					raise ApiError("INVALID_ARGUMENT", str(err))
			if (p, m) == ("/_fake/config", "GET"):
				return 200, st.config, None
			if (p, m) in (("/_fake/lose_vm", "POST"),
				      ("/_fake/maintenance", "POST")):
				job, r = st.replica(self.fake_json())
				if p == "/_fake/lose_vm":
					r.signal(signal.SIGKILL)
					r.stopping, r.kill_at = "lost", now
				else:
					r.signal(signal.SIGTERM)
					r.stopping = "maintenance"
					r.kill_at = now + st.config["grace"]
				return 200, job.resource(), None
			if (p, m) == ("/_fake/preempt", "POST"):
				doc = self.fake_json()
				job = st.by_name(doc)
				if job.scheduling.get("strategy") != "SPOT" or \
						job.state != "JOB_STATE_RUNNING":
					raise ApiError("FAILED_PRECONDITION", "%s is "
						       "not a RUNNING SPOT job" %
						       job.name)
				# Compute Engine's preemption notice, then the
				# job ends; Vertex documents a preempted Spot
				# prediction job failing with a STOCKOUT error
				# (predictions/use-spot-vms) and nothing for
				# training: the fake fails it the same way.
				job.preempted = {"code": doc.get("code", 14),
						 "message": doc.get("message",
						 "The job's Spot VMs were "
						 "preempted (STOCKOUT).")}
				st.stop_all(job, now, "preempt")
				return 200, job.resource(), None
			if (p, m) == ("/_fake/state", "GET"):
				return 200, st.snapshot(), None
			if (p, m) == ("/_fake/reset", "POST"):
				st.reset()
				return 200, {}, None
		got = self.faults_and_log(tpu_fake.Fault)
		if got is None:
			raise ApiError("NOT_FOUND", "no control endpoint %s %s" %
				       (m, p))
		return got[0], got[1], None


FILTER_TERM = re.compile(r'\s*(state|display_name|displayName|labels\.'
			 r'[a-z0-9_-]+)\s*(=|!=)\s*"([^"]*)"\s*')


def job_filter(text):
	"""A predicate on jobs from list's filter: terms joined by AND,
	each state, display_name or labels.KEY, = or != a quoted string (the
	subset of Google's filter language the fake knows)."""
	terms = []
	for part in re.split(r"\s+AND\s+", text.strip()) if text.strip() \
			else []:
		mo = FILTER_TERM.fullmatch(part)
		if not mo:
			raise ApiError("INVALID_ARGUMENT", "Unsupported filter: %s"
				       % text)
		terms.append(mo.groups())

	def value(job, field):
		if field == "state":
			return job.state
		if field in ("display_name", "displayName"):
			return job.body.get("displayName", "")
		return (job.body.get("labels") or {}).get(field[7:])

	return lambda job: all((value(job, f) == v) == (op == "=")
			       for f, op, v in terms)


def main():
	ap = argparse.ArgumentParser(description="Fake Vertex AI API (v1 "
				     "custom jobs) for tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--port", type=int, default=0)
	ap.add_argument("--schemas", default=DEFAULT_SCHEMAS)
	ap.add_argument("--work-dir", help="replicas' logs and working "
			"directories (default: a temporary one, removed)")
	ap.add_argument("--pass-env", action="append", default=[],
			help="an environment variable replicas inherit")
	ap.add_argument("--require-token")
	ap.add_argument("--delay", type=float, default=0.2,
			help="seconds QUEUED and PENDING each last")
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	temp = None
	if not args.work_dir:
		temp = args.work_dir = tempfile.mkdtemp(prefix="vertex-fake-")
	srv = fake_common.Server(("127.0.0.1", args.port), Handler)
	srv.disco = Schemas(args.schemas)
	srv.store = Store(args.delay, args.work_dir, args.pass_env)
	srv.verbose = args.verbose
	srv.require_token = args.require_token
	threading.Thread(target=srv.store.run, daemon=True).start()

	def stop():
		# Every replica's process group dies with the fake.
		with srv.store.lock:
			srv.store.kill_all()
		if temp:
			shutil.rmtree(temp, ignore_errors=True)
	fake_common.serve([srv], args.port_file,
			  "vertex-fake: listening on 127.0.0.1:%d\n" %
			  srv.server_address[1] if args.verbose else None,
			  on_stop=stop)


if __name__ == "__main__":
	main()
