"""kube_fake.py's kubelet: the scheduler's binding, and each pod run as
local process trees in private mount and PID namespaces, with its
logs, its grace on deletion and the chaos of a lost node (kube_fake.py's
header says how)."""

import os
import re
import signal
import subprocess
import threading
import time
import traceback

from kube_api import bad_request, not_found, now_text, set_condition
from kube_controllers import JS, quantity, quantity_text

# ---------------------------------------------------------------- kubelet

FIELD_REF = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]")
MOUNT_SCRIPT = r"""set -e
wd=$1; shift
while [ "$1" != "--" ]; do
	mount --bind "$1" "$2"
	if [ "$3" = ro ]; then mount -o remount,bind,ro "$2"; fi
	shift 3
done
shift
cd "$wd"
exec "$@"
"""


def expand(text, env):
	"""Kubernetes' $(VAR) expansion: $$ is $, an unknown $(VAR) stays."""
	out, i = [], 0
	while i < len(text):
		c = text[i]
		if c == "$" and i + 1 < len(text):
			n = text[i + 1]
			if n == "$":
				out.append("$")
				i += 2
				continue
			if n == "(":
				j = text.find(")", i + 2)
				if j > 0:
					name = text[i + 2:j]
					if name in env:
						out.append(env[name])
					else:
						out.append(text[i:j + 1])
					i = j + 1
					continue
		out.append(c)
		i += 1
	return "".join(out)


DEVICE_RESOURCES = ("google.com/tpu", "nvidia.com/gpu")


def device_requests(pod):
	"""{resource: count} of the TPU and GPU limits of a pod's containers."""
	out = {}
	for c in pod["spec"].get("containers") or []:
		limits = (c.get("resources") or {}).get("limits") or {}
		for res in DEVICE_RESOURCES:
			if res in limits:
				out[res] = out.get(res, 0) + quantity(limits[res])
	return out


def field_value(pod, path):
	m = pod["metadata"]
	simple = {"metadata.name": m.get("name"),
		  "metadata.namespace": m.get("namespace"),
		  "metadata.uid": m.get("uid"),
		  "spec.nodeName": pod["spec"].get("nodeName"),
		  "spec.serviceAccountName": pod["spec"].get(
			  "serviceAccountName"),
		  "status.hostIP": "127.0.0.1", "status.podIP": "127.0.0.1",
		  "status.podIPs": "127.0.0.1", "status.hostIPs": "127.0.0.1"}
	if path in simple:
		return simple[path] or ""
	fm = FIELD_REF.fullmatch(path)
	if fm:
		return (m.get(fm.group(1)) or {}).get(fm.group(2), "")
	return ""


def process_tree(pid):
	"""[{"pid", "cmdline"}] for pid and every process below it (host
	pids), for tests that crash or hang a process inside a pod."""
	out, todo = [], [pid]
	while todo:
		p = todo.pop(0)
		try:
			with open("/proc/%d/cmdline" % p, "rb") as f:
				cmd = f.read().replace(b"\0", b" ").decode(
					"utf-8", "replace").strip()
			with open("/proc/%d/task/%d/children" % (p, p)) as f:
				todo += [int(x) for x in f.read().split()]
		except (OSError, ValueError):
			continue
		out.append({"pid": p, "cmdline": cmd})
	return out


class Container:
	"""One container's process: unshare, then the command."""

	def __init__(self, pod_key, name, log_path):
		self.pod_key, self.name, self.log_path = pod_key, name, log_path
		self.proc = None
		self.exit_code = None
		self.started = self.finished = None
		self.reason = None

	@property
	def running(self):
		return self.proc is not None and self.exit_code is None

	def init_pid(self):
		"""The host pid of the container's first process (PID 1 of
		its namespace), or None before it exists."""
		try:
			with open("/proc/%d/task/%d/children" % (
					self.proc.pid, self.proc.pid)) as f:
				kids = f.read().split()
			return int(kids[0]) if kids else None
		except (OSError, ValueError):
			return None

	def signal(self, sig):
		if not self.running:
			return
		if sig == signal.SIGKILL:
			# Killing PID 1 of the namespace kills everything in it.
			pid = self.init_pid()
			for target in ([pid] if pid else []):
				try:
					os.kill(target, sig)
				except OSError:
					pass
			try:
				os.killpg(self.proc.pid, sig)
			except OSError:
				pass
			return
		# unshare forks the container's first process at once, but a
		# busy machine may take a while.
		for _ in range(500):
			pid = self.init_pid()
			if pid or self.proc.poll() is not None:
				break
			time.sleep(0.01)
		if pid:
			try:
				os.kill(pid, sig)
			except OSError:
				pass


class Kubelet:
	"""Runs pods bound to the fake nodes as local process trees."""

	def __init__(self, fake, pass_env):
		self.fake = fake
		self.pass_env = list(pass_env or [])
		self.running = {}     # pod uid -> thread
		self.containers = []  # every Container started
		self.plock = threading.Lock()
		self.root = os.geteuid() == 0

	@property
	def st(self):
		return self.fake.store

	def wake(self):
		self.st.cond.notify_all()

	@staticmethod
	def node_of(pod):
		"""A TPU slice's pods share node gke-tpu-slice-J (the pool stands
		for its hosts); a GPU pod has a node of its own,
		gke-gpu-slice-J-I, as a GPU machine holds one such pod."""
		labels = pod["metadata"].get("labels") or {}
		if JS + "job-index" not in labels:
			return "gke-node-0"
		if device_requests(pod).get("nvidia.com/gpu"):
			return "gke-gpu-slice-%s-%s" % (
				labels[JS + "job-index"],
				labels.get("batch.kubernetes.io/job-completion-index",
					   "0"))
		return "gke-tpu-slice-%s" % labels[JS + "job-index"]

	def schedule(self):
		"""The scheduler and the kubelets' watch: binds new pods, and
		starts a thread for each bound pod not yet running."""
		st = self.st
		pres = st.resource("pods")
		for pod in st.items(pres):
			m = pod["metadata"]
			# Orphaned pods lose the Job's tracking finalizer.
			fins = m.get("finalizers") or []
			if "batch.kubernetes.io/job-tracking" in fins and not any(
					st.by_uid(r.get("uid"))[1] for r in
					m.get("ownerReferences") or []):
				fins.remove("batch.kubernetes.io/job-tracking")
				st.put(pres, pod)
				continue
			if m.get("deletionTimestamp") or pod.get("_started"):
				continue
			spec = pod.setdefault("spec", {})
			if not spec.get("nodeName"):
				spec["nodeName"] = self.schedulable(self.node_of(pod))
				self.ensure_node(spec["nodeName"], pod)
				set_condition(pod.setdefault("status", {}),
					      "PodScheduled", "True", None, None)
				pod["status"]["conditions"][-1].pop("reason", None)
				pod["status"]["conditions"][-1].pop("message", None)
				st.put(pres, pod)
				self.fake.controllers.event(
					pod, pres, "Normal", "Scheduled",
					"Successfully assigned %s/%s to %s" % (
						m["namespace"], m["name"], spec["nodeName"]))
			pod["_started"] = True
			t = threading.Thread(target=self.run_pod, args=(pod,),
					     daemon=True)
			self.running[m["uid"]] = t
			t.start()

	def schedulable(self, name):
		"""name, or when that node is cordoned (spec.unschedulable)
		the pool's first spare that is not: NAME-spare-K."""
		nres = self.st.resource("nodes")
		cand, k = name, 0
		while ((self.st.get(nres, "", cand) or {}).get("spec") or
		       {}).get("unschedulable"):
			k += 1
			cand = "%s-spare-%d" % (name, k)
		return cand

	def ensure_node(self, name, pod):
		"""The Node object a pod is bound to, made on first use with
		the labels the pod selects (a node pool that fits it)."""
		st = self.st
		nres = st.resource("nodes")
		if st.get(nres, "", name) is not None:
			return
		labels = dict(pod["spec"].get("nodeSelector") or {})
		labels["kubernetes.io/hostname"] = name
		pool = name.replace("gke-", "", 1).split("-spare-")[0]
		if pool.startswith("gpu-"):
			pool = pool.rsplit("-", 1)[0]
		labels.setdefault("cloud.google.com/gke-nodepool", pool)
		cap = {"cpu": "8", "memory": "32Gi", "pods": "110"}
		spec = {}
		# GKE taints TPU and GPU node pools with their device resource.
		for res, n in device_requests(pod).items():
			cap[res] = quantity_text(n)
			spec.setdefault("taints", []).append(
				{"key": res, "value": "present", "effect": "NoSchedule"})
		st.add(nres, {"apiVersion": "v1", "kind": "Node", "metadata": {
			"name": name, "labels": labels}, "spec": spec, "status": {
				"capacity": cap, "allocatable": dict(cap),
				"addresses": [{"type": "InternalIP",
					       "address": "127.0.0.1"},
					      {"type": "Hostname", "address": name}],
				"conditions": [{"type": "Ready", "status": "True",
						"reason": "KubeletReady",
						"message": "kubelet is posting ready "
						"status", "lastHeartbeatTime": now_text(),
						"lastTransitionTime": now_text()}]}})

	def hosts_file(self, pod):
		"""/etc/hosts for a pod: what the cluster's DNS would resolve
		for it and its JobSet's peers (hostname.subdomain), all on
		loopback; None when the pod has no subdomain."""
		spec, m = pod["spec"], pod["metadata"]
		sub = spec.get("subdomain")
		if not sub or not os.path.isfile("/etc/hosts"):
			return None
		names = {spec.get("hostname") or m["name"]}
		with self.st.lock:
			js_name = (m.get("labels") or {}).get(JS + "jobset-name")
			jres = self.st.res.get("jobsets.jobset.x-k8s.io")
			js = self.st.get(jres, m["namespace"], js_name) \
				if jres and js_name else None
			for rj in ((js or {}).get("spec") or {}).get(
					"replicatedJobs") or []:
				par = rj.get("template", {}).get("spec", {}).get(
					"parallelism", 1)
				for i in range(rj.get("replicas", 1)):
					for k in range(par):
						names.add("%s-%s-%d-%d" % (js_name, rj["name"],
									   i, k))
		path = os.path.join(self.pod_dir(pod), "hosts")
		with open(path, "w") as f:
			f.write("# Kubernetes-managed hosts file (kube-fake).\n"
				"127.0.0.1\tlocalhost\n::1\tlocalhost "
				"ip6-localhost ip6-loopback\n")
			for n in sorted(names):
				f.write("127.0.0.1\t%s.%s %s.%s.%s.svc %s.%s.%s.svc."
					"cluster.local %s\n" % (
						n, sub, n, sub, m["namespace"], n, sub,
						m["namespace"], n))
		return path

	# ---- one pod

	def pod_dir(self, pod):
		return os.path.join(self.fake.state_dir, "pods",
				    pod["metadata"]["uid"])

	def run_pod(self, pod):
		try:
			self.pod_life(pod)
		except Exception:
			traceback.print_exc()
		finally:
			with self.st.lock:
				pod["_stopped"] = True
				if self.st.get(self.st.resource("pods"),
					       pod["metadata"]["namespace"],
					       pod["metadata"]["name"]) is pod:
					self.st.put(self.st.resource("pods"), pod)

	def update(self, pod, fn):
		st = self.st
		with st.lock:
			fn(pod.setdefault("status", {}))
			if st.get(st.resource("pods"), pod["metadata"]["namespace"],
				  pod["metadata"]["name"]) is pod:
				st.put(st.resource("pods"), pod)

	def deleting(self, pod):
		with self.st.lock:
			return bool(pod["metadata"].get("deletionTimestamp"))

	def pod_life(self, pod):
		spec = pod["spec"]
		base = self.pod_dir(pod)
		os.makedirs(os.path.join(base, "logs"), exist_ok=True)
		inits = spec.get("initContainers") or []
		mains = spec.get("containers") or []

		def pending(s):
			s["phase"] = "Pending"
			s["hostIP"] = s["podIP"] = "127.0.0.1"
			s["hostIPs"] = s["podIPs"] = [{"ip": "127.0.0.1"}]
			s["startTime"] = now_text()
			set_condition(s, "PodReadyToStartContainers", "True", None,
				      None)
			set_condition(s, "Initialized", "False" if inits else "True",
				      "ContainersNotInitialized" if inits else None,
				      "containers with incomplete status: [%s]" %
				      " ".join(c["name"] for c in inits) if inits
				      else None)
			set_condition(s, "Ready", "False", "ContainersNotReady",
				      "containers with unready status: [%s]" %
				      " ".join(c["name"] for c in mains))
			set_condition(s, "ContainersReady", "False",
				      "ContainersNotReady",
				      "containers with unready status: [%s]" %
				      " ".join(c["name"] for c in mains))
			for c in s["conditions"]:
				if c.get("reason") is None:
					c.pop("reason", None)
					c.pop("message", None)
			if inits:
				s["initContainerStatuses"] = [self.waiting(
					c, "PodInitializing") for c in inits]
			s["containerStatuses"] = [self.waiting(
				c, "PodInitializing" if inits else "ContainerCreating")
				for c in mains]
		self.update(pod, pending)
		for i, c in enumerate(inits):
			if self.deleting(pod):
				break
			code = self.run_one(pod, c, "initContainerStatuses", i)
			if code != 0:
				return self.finish(pod, mains, failed_init=True)
		if self.deleting(pod):
			return self.finish(pod, mains, never_started=True)

		def initialized(s):
			if inits:
				set_condition(s, "Initialized", "True", None, None)
				for c in s["conditions"]:
					if c["type"] == "Initialized":
						c.pop("reason", None)
						c.pop("message", None)
		self.update(pod, initialized)
		running = []
		for i, c in enumerate(mains):
			running.append(self.start(pod, c, "containerStatuses", i))

		def up(s):
			s["phase"] = "Running"
			for ctype in ("Ready", "ContainersReady"):
				set_condition(s, ctype, "True", None, None)
				for x in s["conditions"]:
					if x["type"] == ctype:
						x.pop("reason", None)
						x.pop("message", None)
		if any(x.running for x in running):
			self.update(pod, up)
		self.wait_all(pod, running, mains)
		self.finish(pod, mains)

	@staticmethod
	def waiting(c, reason):
		return {"name": c["name"], "image": c.get("image", ""),
			"imageID": "", "ready": False, "restartCount": 0,
			"started": False, "state": {"waiting": {"reason": reason}}}

	def run_one(self, pod, c, field, i):
		x = self.start(pod, c, field, i)
		self.wait_all(pod, [x], [c], field)
		return x.exit_code

	def wait_all(self, pod, conts, specs, field="containerStatuses"):
		"""Waits for the containers, stopping them when the pod is
		deleted (SIGTERM, SIGKILL after the grace)."""
		killed_at = None
		while any(x.running for x in conts):
			for i, x in enumerate(conts):
				if x.running and x.proc.poll() is not None:
					self.exited(pod, x, field, i)
			with self.st.lock:
				dead = pod["metadata"].get("deletionTimestamp")
				grace = pod.get("_grace", 30)
			if dead and killed_at is None:
				killed_at = time.monotonic()
				for x in conts:
					if grace <= 0:
						x.signal(signal.SIGKILL)
					else:
						x.signal(signal.SIGTERM)
				self.fake.controllers_event(pod, "Normal", "Killing",
							    "Stopping container %s" %
							    ", ".join(c["name"]
								      for c in specs))
			elif killed_at is not None and \
					time.monotonic() - killed_at >= grace:
				for x in conts:
					x.signal(signal.SIGKILL)
			elif killed_at is not None:
				with self.st.lock:
					grace = pod.get("_grace", grace)
			with self.st.lock:
				self.st.cond.wait(0.05)
		for i, x in enumerate(conts):
			if x.finished is None:
				self.exited(pod, x, field, i)

	def exited(self, pod, x, field, i):
		code = x.proc.wait()
		x.exit_code = 128 - code if code < 0 else code
		x.finished = now_text()
		reason = x.reason or ("Completed" if x.exit_code == 0 else "Error")

		def done(s):
			cs = s[field][i]
			cs.update(ready=False, started=False, state={"terminated": {
				"exitCode": x.exit_code, "reason": reason,
				"startedAt": x.started, "finishedAt": x.finished,
				"containerID": "fake://%d" % x.proc.pid}})
		self.update(pod, done)

	def start(self, pod, c, field, i):
		"""Starts container c of pod; returns its Container."""
		m = pod["metadata"]
		log = os.path.join(self.pod_dir(pod), "logs", c["name"] + ".log")
		x = Container((m["namespace"], m["name"]), c["name"], log)
		with self.plock:
			self.containers.append(x)
		env = self.environment(pod, c)
		argv = [expand(a, env) for a in (c.get("command") or []) +
			(c.get("args") or [])]
		x.started = now_text()
		if not c.get("command"):
			with open(log, "ab") as f:
				f.write(b"kube-fake: container %s has no command; the "
					b"fake runs no image\n" % c["name"].encode())
			x.proc = subprocess.Popen(["/bin/false"])
			x.reason = "StartError"
		else:
			binds = self.mounts(pod, c)
			hosts = self.hosts_file(pod)
			if hosts:
				binds += [hosts, "/etc/hosts", "rw"]
			ns = ["unshare", "--mount", "--pid", "--fork",
			      "--propagation", "private"]
			if not self.root:
				ns[1:1] = ["--user", "--map-root-user"]
			wd = c.get("workingDir") or "/"
			cmd = ns + ["--", "/bin/sh", "-c", MOUNT_SCRIPT, "sh", wd] + \
				binds + ["--"] + argv
			with open(log, "ab") as f:
				x.proc = subprocess.Popen(
					cmd, env=env, stdin=subprocess.DEVNULL, stdout=f,
					stderr=subprocess.STDOUT, start_new_session=True,
					cwd="/")

		def running(s):
			cs = s[field][i]
			cs.update(ready=True, started=True, state={"running": {
				"startedAt": x.started}},
				  containerID="fake://%d" % x.proc.pid)
		self.update(pod, running)
		self.fake.controllers_event(pod, "Normal", "Started",
					    "Started container %s" % c["name"])
		return x

	def environment(self, pod, c):
		env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:"
					      "/bin"),
		       "HOSTNAME": pod["spec"].get("hostname") or
		       pod["metadata"]["name"],
		       "KUBERNETES_SERVICE_HOST": "127.0.0.1",
		       "KUBERNETES_SERVICE_PORT": str(self.fake.api_port),
		       "SLICE_KUBE_SA_DIR": self.service_account(pod)}
		for k in self.pass_env:
			if k in os.environ:
				env[k] = os.environ[k]
		for e in c.get("env") or []:
			if "value" in e:
				env[e["name"]] = expand(str(e["value"]), env)
			elif (e.get("valueFrom") or {}).get("fieldRef"):
				with self.st.lock:
					env[e["name"]] = field_value(
						pod, e["valueFrom"]["fieldRef"]["fieldPath"])
			else:
				env[e["name"]] = ""
		return env

	def service_account(self, pod):
		"""The pod's in-cluster credentials, as the kubelet projects
		them to /var/run/secrets/kubernetes.io/serviceaccount: a token
		the API accepts (--require-token's) and its CA (--tls); the
		pods find the directory in SLICE_KUBE_SA_DIR."""
		d = os.path.join(self.pod_dir(pod), "serviceaccount")
		os.makedirs(d, exist_ok=True)
		with open(os.path.join(d, "token"), "w") as f:
			f.write(self.fake.require_token or "kube-fake-sa-token")
		with open(os.path.join(d, "namespace"), "w") as f:
			f.write(pod["metadata"]["namespace"])
		if self.fake.ca_pem:
			with open(os.path.join(d, "ca.crt"), "w") as f:
				f.write(self.fake.ca_pem)
		return d

	def mounts(self, pod, c):
		"""[src, dst, rw|ro, ...] for the container's volumeMounts;
		emptyDirs made, missing mount points created on the host."""
		vols = {v["name"]: v for v in pod["spec"].get("volumes") or []}
		out = []
		for vm in c.get("volumeMounts") or []:
			v = vols.get(vm["name"], {})
			if "hostPath" in v:
				src = v["hostPath"]["path"]
				if v["hostPath"].get("type") in ("DirectoryOrCreate",):
					os.makedirs(src, exist_ok=True)
			else:
				src = os.path.join(self.pod_dir(pod), "volumes",
						   vm["name"])
				os.makedirs(src, exist_ok=True)
			if vm.get("subPath"):
				src = os.path.join(src, vm["subPath"])
				os.makedirs(src, exist_ok=True)
			dst = vm["mountPath"]
			if not os.path.exists(dst):
				try:
					if os.path.isdir(src):
						os.makedirs(dst, exist_ok=True)
					else:
						os.makedirs(os.path.dirname(dst),
							    exist_ok=True)
						open(dst, "a").close()
				except OSError:
					pass
			out += [src, dst, "ro" if vm.get("readOnly") else "rw"]
		return out

	def finish(self, pod, mains, failed_init=False, never_started=False):
		def done(s):
			codes = []
			for cs in s.get("containerStatuses") or []:
				t = cs["state"].get("terminated")
				if t is None:
					cs["state"] = {"terminated": {
						"exitCode": 137 if never_started else 0,
						"reason": "ContainerStatusUnknown" if
						never_started else "Completed"}} \
						if never_started else {"waiting": {
							"reason": "PodInitializing"}}
				t = cs["state"].get("terminated") or {}
				codes.append(t.get("exitCode", 1))
			bad = failed_init or never_started or any(codes)
			s["phase"] = "Failed" if bad else "Succeeded"
			for ctype in ("Ready", "ContainersReady"):
				set_condition(s, ctype, "False", "PodCompleted", "")
				for x in s["conditions"]:
					if x["type"] == ctype:
						x.pop("message", None)
		self.update(pod, done)

	# ---- chaos and listings

	def lose_node(self, doc):
		"""Kills every pod on a node at once (SIGKILL), as when the
		node's pool is gone; they are Failed and deleted."""
		st = self.st
		pres = st.resource("pods")
		node = doc.get("node")
		if node is None:
			if "slice" not in doc:
				raise bad_request('give "node" or "jobset" and "slice"')
			node = "gke-tpu-slice-%s" % doc["slice"]
		# A GPU slice's pool is its nodes gke-gpu-slice-J-I.
		pool = "gke-gpu-slice-%s-" % doc["slice"] if "slice" in doc else None
		victims, nodes = [], set()
		for pod in st.items(pres, doc.get("namespace")):
			on = pod["spec"].get("nodeName") or ""
			if on != node and not (pool and on.startswith(pool)):
				continue
			labels = pod["metadata"].get("labels") or {}
			if doc.get("jobset") and labels.get(JS + "jobset-name") != \
					doc["jobset"]:
				continue
			if pod.get("status", {}).get("phase") in ("Succeeded",
								   "Failed"):
				continue
			victims.append(pod)
			nodes.add(on)
		for pod in victims:
			set_condition(pod.setdefault("status", {}),
				      "DisruptionTarget", "True", "DeletionByPodGC",
				      "PodGC: node no longer exists")
			st.put(pres, pod)
			st.delete(pres, pod, None, 0)
			key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
			with self.plock:
				for x in self.containers:
					if x.pod_key == key:
						x.signal(signal.SIGKILL)
		nres = st.resource("nodes")
		for name in nodes | {node}:
			gone = st.get(nres, "", name)
			if gone is not None:
				# The pool comes back empty: a new Node when pods
				# return.
				st.delete(nres, gone)
		self.wake()
		return [p["metadata"]["name"] for p in victims]

	def processes(self):
		out = []
		with self.plock:
			for x in self.containers:
				if x.proc is None:
					continue
				running = x.proc.poll() is None
				init = x.init_pid() if running else None
				out.append({"namespace": x.pod_key[0], "pod": x.pod_key[1],
					    "container": x.name, "pid": x.proc.pid,
					    "initPid": init, "pgid": x.proc.pid,
					    "running": running, "exitCode": x.exit_code,
					    "tree": process_tree(init) if init else []})
		return out

	def kill_all(self):
		with self.plock:
			for x in self.containers:
				if x.proc is not None and x.proc.poll() is None:
					x.signal(signal.SIGKILL)

	# ---- logs

	def serve_log(self, h, r):
		st = self.st
		with st.lock:
			pod = st.get(r.res, r.ns, r.name)
			if pod is None:
				raise not_found(r.res, r.name)
			spec = pod["spec"]
			names = [c["name"] for c in spec.get("containers") or []]
			inits = [c["name"] for c in spec.get("initContainers") or []]
			name = h.query.get("container")
			if not name:
				if len(names) != 1:
					raise bad_request(
						"a container name must be specified for pod "
						"%s, choose one of: [%s]%s" % (
							r.name, " ".join(names),
							" or one of the init containers: [%s]" %
							" ".join(inits) if inits else ""))
				name = names[0]
			if name not in names + inits:
				raise bad_request("container %s is not valid for pod %s"
						  % (name, r.name))
			if h.query.get("previous") in ("1", "true"):
				raise bad_request('previous terminated container "%s" '
						  'in pod "%s" not found' % (name, r.name))
			path = os.path.join(self.pod_dir(pod), "logs", name + ".log")
			if not os.path.exists(path):
				raise bad_request('container "%s" in pod "%s" is waiting '
						  'to start: %s' % (name, r.name,
								    "PodInitializing"
								    if inits else
								    "ContainerCreating"))
			key = (r.ns, r.name)
		follow = h.query.get("follow") in ("1", "true")
		tail = h.query.get("tailLines")
		with open(path, "rb") as f:
			data = f.read()
			if tail is not None:
				lines = data.splitlines(keepends=True)
				data = b"".join(lines[-int(tail):]) if int(tail) else b""
			if not follow:
				return h.answer(200, None, text=data.decode(
					"utf-8", "replace"))
			h.start_chunks("text/plain")
			h.chunk(data)
			while True:
				more = f.read()
				if more:
					h.chunk(more)
					continue
				with self.plock:
					alive = any(x.running and x.proc.poll() is None
						    for x in self.containers
						    if x.pod_key == key and x.name == name)
				if not alive:
					h.chunk(f.read())
					break
				time.sleep(0.1)
			h.end_chunks()
			h.close_connection = True
