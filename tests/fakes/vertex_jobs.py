"""The jobs of vertex_fake.py: each CustomJob's walk through Vertex's
states, its replicas run as local process groups with CLUSTER_SPEC and
the variables Vertex sets, their restarts, and the chaos the fake's
control endpoints inject (a lost VM, maintenance, a Spot preemption).
vertex_fake.py's docstring says what each promises and why; a thread
steps every job (Store.run).

Python standard library only, with fake_common.py and fake_api.py.
"""

import copy
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import fake_common
from fake_api import ApiError

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
		# The error a preemption ends the job with (Store.preempt).
		self.preempted = None

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

	def stop_replica(self, r, now, why):
		"""A lost VM (SIGKILL now) or a maintenance event (SIGTERM,
		SIGKILL after the grace period); chaos_step restarts the
		worker."""
		if why == "lost":
			r.signal(signal.SIGKILL)
			r.kill_at = now
		else:
			r.signal(signal.SIGTERM)
			r.kill_at = now + self.config["grace"]
		r.stopping = why

	def preempt(self, job, now, code, message):
		"""Compute Engine's preemption notice to every replica, then
		the job ends FAILED. Vertex documents a preempted Spot
		prediction job failing with a STOCKOUT error
		(https://cloud.google.com/vertex-ai/docs/predictions/use-spot-vms)
		and nothing for training: the fake fails it the same way."""
		job.preempted = {"code": code, "message": message}
		for r in job.replicas:
			# A replica's own exit after the notice (143, once
			# its emergency checkpoint is written) is the
			# preemption's, not a worker failure to restart.
			r.done = True
		self.stop_all(job, now, "preempt")
		if not any(r.stopping for r in job.replicas):
			# No replica left running to wait for.
			self.end(job, now, "JOB_STATE_FAILED", job.preempted)

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
		# https://cloud.google.com/vertex-ai/docs/training/distributed-training
		# (CLUSTER_SPEC: "job" is the CustomJobSpec the job was
		# created with, as a dictionary; TF_CONFIG names the pools
		# chief, worker, ps and evaluator).
		spec = copy.deepcopy(job.spec)
		env["CLUSTER_SPEC"] = json.dumps({
			"cluster": cluster, "environment": "cloud",
			"task": {"type": "workerpool%d" % r.pool, "index": r.index},
			"job": spec})
		tf_names = ("chief", "worker", "ps", "evaluator")
		env["TF_CONFIG"] = json.dumps({
			"cluster": {tf_names[int(k[-1])]: v
				    for k, v in cluster.items()},
			"environment": "cloud",
			"task": {"type": tf_names[r.pool], "index": r.index},
			"job": spec})
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
