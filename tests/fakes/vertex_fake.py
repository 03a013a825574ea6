#!/usr/bin/env python3
"""A fake Vertex AI API (v1, custom jobs) for slicectl's tests: the
regional endpoint (https://REGION-aiplatform.googleapis.com) served as
plain HTTP on loopback, the paths unchanged.

- customJobs: create, get, list (filter, pageSize, pageToken), cancel,
  delete (a done long-running Operation, which operations.get serves);
  every body checked against the schemas Google Cloud CLI 528 knows
  (api/aiplatform.v1.customjobs.gcloud-528.json) with fake_api.py's
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

Python standard library only, with fake_common.py and fake_api.py (the
body checker, errors and request handling) next to it; the jobs, their
replicas and their restarts are vertex_jobs.py's.

Usage: vertex_fake.py --port-file FILE [--port N] [--schemas PATH]
                      [--work-dir DIR] [--pass-env NAME]...
                      [--require-token T] [--delay S] [--verbose]
"""

import argparse
import copy
import json
import os
import re
import shutil
import tempfile
import threading
import time

import fake_api
import fake_common
from fake_api import ApiError, check_query
from vertex_jobs import TERMINAL, Job, Store

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

# The enums' numbers (the same protos, as @google-cloud/aiplatform 4.4.0
# ships them in build/protos/protos.json): Google's Node.js client sends
# enums as numbers ($alt=json;enum-encoding=int), which the API takes.
ENUM_NUMBERS = {
	(V1 + "Scheduling", "strategy"): (
		"STRATEGY_UNSPECIFIED", "ON_DEMAND", "LOW_COST", "STANDARD",
		"SPOT", None, "FLEX_START"),
	(V1 + "MachineSpec", "acceleratorType"): (
		"ACCELERATOR_TYPE_UNSPECIFIED", "NVIDIA_TESLA_K80",
		"NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_P4",
		"NVIDIA_TESLA_T4", "TPU_V2", "TPU_V3", "NVIDIA_TESLA_A100",
		"NVIDIA_A100_80GB", "TPU_V4_POD", "NVIDIA_L4", "TPU_V5_LITEPOD",
		"NVIDIA_H100_80GB", "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB",
		"NVIDIA_B200"),
	(V1 + "ReservationAffinity", "reservationAffinityType"): (
		"TYPE_UNSPECIFIED", "NO_RESERVATION", "ANY_RESERVATION",
		"SPECIFIC_RESERVATION"),
	(JOB, "state"): (
		"JOB_STATE_UNSPECIFIED", "JOB_STATE_QUEUED", "JOB_STATE_PENDING",
		"JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
		"JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED", "JOB_STATE_PAUSED",
		"JOB_STATE_EXPIRED", "JOB_STATE_UPDATING",
		"JOB_STATE_PARTIALLY_SUCCEEDED"),
}
for _k, _names in ENUM_NUMBERS.items():
	FIELDS.setdefault(_k, {})["enumNumbers"] = {
		i: n for i, n in enumerate(_names) if n}
# Enums declared outside the message that uses them.
TOP_ENUMS = {"ACCELERATOR_TYPE_UNSPECIFIED": "AcceleratorType",
	     "JOB_STATE_UNSPECIFIED": "JobState"}

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

class Schemas:
	"""The body schemas with FIELDS merged in; what fake_api.Checker
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

	def enum_type(self, schema, field, values):
		top = TOP_ENUMS.get(values[0] if values else "")
		if top:
			return self.type_url(V1 + top)
		return fake_api.enum_type(self.type_url, schema, field, values)

	@staticmethod
	def route(http_method, path):
		return fake_api.find_route(ROUTES, http_method, path)


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
		# "All worker pools except the first one are optional and can
		# be skipped by providing an empty value"
		# (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec).
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


# ---------------------------------------------------------------- HTTP


class Handler(fake_api.Handler):
	"""The API under /v1/, control under /_fake/."""
	server_version = "vertex-fake/1"
	service = "aiplatform.googleapis.com"

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
			if (p, m) == ("/_fake/lose_vm", "POST"):
				job, r = st.replica(self.fake_json())
				st.stop_replica(r, now, "lost")
				return 200, job.resource(), None
			if (p, m) == ("/_fake/maintenance", "POST"):
				job, r = st.replica(self.fake_json())
				st.stop_replica(r, now, "maintenance")
				return 200, job.resource(), None
			if (p, m) == ("/_fake/preempt", "POST"):
				doc = self.fake_json()
				job = st.by_name(doc)
				if job.scheduling.get("strategy") != "SPOT" or \
						job.state != "JOB_STATE_RUNNING":
					raise ApiError("FAILED_PRECONDITION", "%s is "
						       "not a RUNNING SPOT job" %
						       job.name)
				st.preempt(job, now, doc.get("code", 14),
					   doc.get("message", "The job's Spot VMs "
						   "were preempted (STOCKOUT)."))
				return 200, job.resource(), None
			if (p, m) == ("/_fake/state", "GET"):
				return 200, st.snapshot(), None
			if (p, m) == ("/_fake/reset", "POST"):
				st.reset()
				return 200, {}, None
		got = self.faults_and_log(fake_api.Fault)
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
