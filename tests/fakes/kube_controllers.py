"""kube_fake.py's controllers: the JobSet and Kueue admission webhooks,
the Kueue, JobSet, Job and namespace reconcilers (kube_fake.py's header
says what each does; its Store collects the garbage)."""

import copy
import hashlib
import json
import re
import time
import traceback

from kube_api import (
	DNS1035_LABEL, KubeError, condition, now_text,
	random_suffix, seconds_since, set_condition)

# ---------------------------------------------------------------- webhooks

QUANTITY = re.compile(r"([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|"
		      r"[eE][+-]?[0-9]+)?")
SUFFIX = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30,
	  "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60, "n": 1e-9, "u": 1e-6,
	  "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	  "E": 1e18}


def quantity(v):
	"""A resource.Quantity's value as a number (0 for nonsense)."""
	if isinstance(v, (int, float)) and not isinstance(v, bool):
		return v
	m = QUANTITY.fullmatch(str(v).strip())
	if not m:
		return 0
	s = m.group(2)
	mult = SUFFIX[s] if s in SUFFIX else 10 ** int(s[1:])
	n = float(m.group(1)) * mult
	return int(n) if n == int(n) else n


def quantity_text(n):
	return str(int(n)) if n == int(n) else "%gm" % (n * 1000)


JOBSET_RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded",
		       "FailedIndexes", "MaxFailedIndexesExceeded",
		       "PodFailurePolicy")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VISIBILITY = "visibility.kueue.x-k8s.io"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JS = "jobset.sigs.k8s.io/"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


class Webhooks:
	"""What the JobSet and Kueue admission webhooks do on create."""

	@staticmethod
	def default(res, obj, kueue):
		"""kueue: whether Kueue (and so its webhook) is installed."""
		if res.plural != "jobsets" or not isinstance(obj.get("spec"),
							      dict):
			return
		spec = obj["spec"]
		labels = (obj.get("metadata") or {}).get("labels") or {}
		if kueue and QUEUE_LABEL in labels and not spec.get("suspend"):
			# Kueue's JobSet webhook.
			spec["suspend"] = True
		spec.setdefault("successPolicy", {"operator": "All"})
		if isinstance(spec["successPolicy"], dict):
			spec["successPolicy"].setdefault("operator", "All")
		spec.setdefault("startupPolicy", {"startupPolicyOrder":
						  "AnyOrder"})
		net = spec.setdefault("network", {})
		if isinstance(net, dict):
			net.setdefault("enableDNSHostnames", True)
			net.setdefault("publishNotReadyAddresses", True)
		fp = spec.get("failurePolicy")
		if isinstance(fp, dict):
			for i, rule in enumerate(fp.get("rules") or []):
				if isinstance(rule, dict) and not rule.get("name"):
					rule["name"] = "failurePolicyRule%d" % i
		for rj in spec.get("replicatedJobs") or []:
			if not isinstance(rj, dict):
				continue
			jspec = (rj.get("template") or {}).get("spec")
			if not isinstance(jspec, dict):
				continue
			jspec.setdefault("completionMode", "Indexed")
			pspec = (jspec.get("template") or {}).get("spec")
			if isinstance(pspec, dict) and not pspec.get("restartPolicy"):
				pspec["restartPolicy"] = "OnFailure"

	@staticmethod
	def validate(res, obj):
		"""JobSet's validating webhook: the messages it denies with."""
		if res.plural != "jobsets":
			return []
		out = []
		name = obj["metadata"].get("name", "")
		spec = obj.get("spec") or {}
		for rj in spec.get("replicatedJobs") or []:
			jspec = rj.get("template", {}).get("spec", {})
			job = "%s-%s-%d" % (name, rj.get("name", ""),
					    rj.get("replicas", 1) - 1)
			if len(job) > 63 or not DNS1035_LABEL.fullmatch(job):
				out.append("JobSet name is too long, job names "
					   "generated for this JobSet will exceed 63 "
					   "characters" if len(job) > 63 else
					   "a lowercase RFC 1035 label must consist of "
					   "lower case alphanumeric characters or '-', "
					   "start with an alphabetic character, and end "
					   "with an alphanumeric character")
			comp = jspec.get("completions")
			if jspec.get("completionMode") == "Indexed" and comp:
				pod = "%s-%d-abcde" % (job, comp - 1)
				if len(pod) > 63:
					out.append("JobSet name is too long, job and "
						   "pod names generated for this JobSet "
						   "will exceed 63 characters")
		fp = spec.get("failurePolicy") or {}
		names = set()
		for rule in fp.get("rules") or []:
			n = rule.get("name", "")
			if not JOBSET_RULE_NAME.fullmatch(n):
				out.append("invalid failure policy rule name '%s', a "
					   "failure policy rule name must start with "
					   "an alphabetic character, optionally followed "
					   "by a string of alphanumeric characters or "
					   "'_,:', and must end with an alphanumeric "
					   "character or '_'" % n)
			if n in names:
				out.append("rule names are not unique, rules with "
					   "duplicate names: %s" % n)
			names.add(n)
			for reason in rule.get("onJobFailureReasons") or []:
				if reason not in JOB_FAILURE_REASONS:
					out.append("invalid job failure reason '%s' in "
						   "failure policy is not a recognized job "
						   "failure reason" % reason)
		return out


def denied(webhook, messages):
	"""A validating webhook's denial as controller-runtime answers it:
	403 Forbidden."""
	msg = 'admission webhook "%s" denied the request: %s' % (
		webhook, "\n".join(messages))
	return KubeError(403, "Forbidden", msg)


# ---------------------------------------------------------------- controllers


def owner_ref(res, obj, version):
	return {"apiVersion": res.api_version(version), "kind": res.kind,
		"name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
		"controller": True, "blockOwnerDeletion": True}


def owned_by(obj, uid):
	return any(r.get("uid") == uid for r in
		   obj["metadata"].get("ownerReferences") or [])


class Controllers:
	"""Kueue, JobSet, Job and the garbage collector, one reconcile pass
	every TICK seconds under the store's lock."""

	TICK = 0.05

	def __init__(self, fake):
		self.fake = fake
		self.st = fake.store

	def r(self, plural):
		return self.st.resource(plural)

	def has(self, qualified):
		return qualified in self.st.res

	def run(self):
		# A fixed pace, not every change's wake-up: a busy server
		# must not make the controllers spin.
		while True:
			with self.st.lock:
				try:
					self.reconcile()
				except Exception:
					traceback.print_exc()
			time.sleep(self.TICK)

	def reconcile(self):
		if self.has("jobsets.jobset.x-k8s.io"):
			if self.has("workloads.kueue.x-k8s.io"):
				self.kueue()
			for js in self.st.items(self.r("jobsets.jobset.x-k8s.io")):
				self.jobset(js)
		for job in self.st.items(self.r("jobs.batch")):
			self.job(job)
		self.fake.kubelet.schedule()
		self.st.collect_garbage()
		self.namespaces()

	def namespaces(self):
		"""The namespace controller: a terminating namespace's content
		is deleted, then its "kubernetes" finalizer goes."""
		st = self.st
		nres = self.r("namespaces")
		for ns in st.items(nres):
			m = ns["metadata"]
			if not m.get("deletionTimestamp"):
				continue
			ns.setdefault("status", {})["phase"] = "Terminating"
			left = False
			for q, objs in st.objects.items():
				res = st.res[q]
				for o in [o for (n, _), o in list(objs.items())
					  if n == m["name"] and res.namespaced]:
					left = True
					if not o["metadata"].get("deletionTimestamp"):
						st.delete(res, o, "Background")
			fins = ns.get("spec", {}).get("finalizers") or []
			if not left and "kubernetes" in fins:
				fins.remove("kubernetes")
			if not left and not fins:
				st.remove(nres, ns)

	def event(self, obj, res, etype, reason, message):
		"""A core/v1 Event about obj."""
		st = self.st
		m = obj["metadata"]
		ns = m.get("namespace") or "default"
		ev = {"apiVersion": "v1", "kind": "Event", "metadata": {
			"name": "%s.%x" % (m["name"], int(time.time() * 1e9)),
			"namespace": ns},
			"involvedObject": {"apiVersion": obj.get("apiVersion",
								 res.api_version(
									 res.versions[0])),
					   "kind": res.kind, "name": m["name"],
					   "namespace": ns, "uid": m["uid"],
					   "resourceVersion":
					   m.get("resourceVersion", "")},
			"reason": reason, "message": message, "type": etype,
			"count": 1, "firstTimestamp": now_text(),
			"lastTimestamp": now_text(), "source": {
				"component": {"jobsets": "jobset-controller",
					      "workloads": "kueue-admission",
					      "jobs": "job-controller"}.get(
						      res.plural, "kubelet")},
			"reportingComponent": "", "reportingInstance": ""}
		while st.get(self.r("events"), ns, ev["metadata"]["name"]):
			ev["metadata"]["name"] += "0"
		st.add(self.r("events"), ev)

	# ---- JobSet

	def jobset(self, js):
		st = self.st
		m, spec = js["metadata"], js.get("spec") or {}
		if m.get("deletionTimestamp"):
			return
		status = js.setdefault("status", {})
		before = json.dumps(status, sort_keys=True)
		jres = self.r("jobs.batch")
		jobs = [j for j in st.items(jres, m["namespace"])
			if owned_by(j, m["uid"])]
		restarts = status.get("restarts", 0)
		current = []
		for j in jobs:
			attempt = int(j["metadata"]["labels"].get(
				JS + "restart-attempt", "0"))
			if attempt < restarts:
				if not j["metadata"].get("deletionTimestamp"):
					st.delete(jres, j, "Foreground")
			else:
				current.append(j)
		terminal = status.get("terminalState")
		suspended = bool(spec.get("suspend"))
		if terminal:
			for j in current:
				if not j["metadata"].get("deletionTimestamp") and \
						not (condition(j, "Complete") or
						     condition(j, "Failed")):
					st.delete(jres, j, "Foreground")
			self.jobset_status(js, current, before)
			ttl = spec.get("ttlSecondsAfterFinished")
			ended = [c.get("lastTransitionTime") for c in
				 status.get("conditions") or [] if c["type"] in
				 ("Completed", "Failed") and c["status"] == "True"]
			if ttl is not None and ended and seconds_since(
					ended[0]) >= ttl:
				st.delete(self.r("jobsets.jobset.x-k8s.io"), js,
					  "Foreground")
			return
		if suspended:
			set_condition(status, "Suspended", "True", "SuspendedJobs",
				      "jobset is suspended")
		elif condition(js, "Suspended"):
			set_condition(status, "Suspended", "False", "ResumeJobs",
				      "jobset is resumed")
		for j in current:
			if bool(j["spec"].get("suspend")) != suspended and \
					not j["metadata"].get("deletionTimestamp"):
				j["spec"]["suspend"] = suspended
				st.put(jres, j, True)
		failed = [j for j in current if condition(j, "Failed")]
		if failed:
			failed.sort(key=lambda j: [c.get("lastTransitionTime", "")
						  for c in j["status"]["conditions"]
						  if c["type"] == "Failed"])
			self.failure_policy(js, failed[0])
			self.jobset_status(js, current, before)
			return
		rjobs = spec.get("replicatedJobs") or []
		sp = spec.get("successPolicy") or {}
		targets = sp.get("targetReplicatedJobs") or [
			rj.get("name") for rj in rjobs]
		mine = [j for j in current if j["metadata"]["labels"].get(
			JS + "replicatedjob-name") in targets]
		want = sum(rj.get("replicas", 1) for rj in rjobs
			   if rj.get("name") in targets)
		done = [j for j in mine if condition(j, "Complete")]
		if want and len(done) == want if sp.get("operator", "All") == \
				"All" else done:
			set_condition(status, "Completed", "True", "AllJobsCompleted",
				      "jobset completed successfully")
			status["terminalState"] = "Completed"
			self.event(js, self.r("jobsets.jobset.x-k8s.io"), "Normal",
				   "AllJobsCompleted", "jobset completed successfully")
		else:
			self.create_jobs(js, rjobs, {j["metadata"]["name"] for j in
						     jobs})
		self.jobset_status(js, current, before)

	def jobset_status(self, js, jobs, before):
		status = js["status"]
		status.setdefault("restarts", 0)
		status.setdefault("restartsCountTowardsMax", 0)
		out = []
		for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
			mine = [j for j in jobs if j["metadata"]["labels"].get(
				JS + "replicatedjob-name") == rj.get("name")]
			out.append({
				"name": rj.get("name"),
				"ready": sum(1 for j in mine if j.get("status", {}).get(
					"ready", 0) >= (j["spec"].get("parallelism") or 1)),
				"succeeded": sum(1 for j in mine
						 if condition(j, "Complete")),
				"failed": sum(1 for j in mine if condition(j, "Failed")),
				"active": sum(1 for j in mine if j.get("status", {}).get(
					"active", 0) > 0),
				"suspended": sum(1 for j in mine
						 if j["spec"].get("suspend"))})
		status["replicatedJobsStatus"] = out
		if json.dumps(status, sort_keys=True) != before:
			self.st.put(self.r("jobsets.jobset.x-k8s.io"), js)

	def failure_policy(self, js, job):
		status = js["status"]
		fp = js["spec"].get("failurePolicy")
		res = self.r("jobsets.jobset.x-k8s.io")
		first = " (first failed job: %s)" % job["metadata"]["name"]
		if fp is None:
			return self.fail_jobset(js, "FailedJobs", "jobset failed due "
						"to one or more job failures" + first)
		reason = [c.get("reason") for c in job["status"]["conditions"]
			  if c["type"] == "Failed"][0]
		rjob = job["metadata"]["labels"].get(JS + "replicatedjob-name")
		action = "RestartJobSet"
		for rule in fp.get("rules") or []:
			if rule.get("onJobFailureReasons") and \
					reason not in rule["onJobFailureReasons"]:
				continue
			if rule.get("targetReplicatedJobs") and \
					rjob not in rule["targetReplicatedJobs"]:
				continue
			action = rule["action"]
			break
		if action == "FailJobSet":
			return self.fail_jobset(js, "FailJobSetAction", "applying "
						"FailJobSet failure policy action" +
						first)
		counts = action == "RestartJobSet"
		if counts and status.get("restartsCountTowardsMax", 0) >= \
				fp.get("maxRestarts", 0):
			return self.fail_jobset(js, "ReachedMaxRestarts", "jobset "
						"failed due to reaching max number of "
						"restarts" + first)
		status["restarts"] = status.get("restarts", 0) + 1
		if counts:
			status["restartsCountTowardsMax"] = status.get(
				"restartsCountTowardsMax", 0) + 1
		self.event(js, res, "Warning", action + "Action" if action !=
			   "RestartJobSet" else "RestartJobSetAction",
			   "restarting jobset" + first)

	def fail_jobset(self, js, reason, message):
		set_condition(js["status"], "Failed", "True", reason, message)
		js["status"]["terminalState"] = "Failed"
		self.event(js, self.r("jobsets.jobset.x-k8s.io"), "Warning",
			   reason, message)

	def create_jobs(self, js, rjobs, existing):
		st = self.st
		m, spec = js["metadata"], js["spec"]
		jres = self.r("jobs.batch")
		total = sum(rj.get("replicas", 1) for rj in rjobs)
		net = spec.get("network") or {}
		subdomain = net.get("subdomain") or m["name"]
		gindex = 0
		for rj in rjobs:
			reps = rj.get("replicas", 1)
			for i in range(reps):
				name = "%s-%s-%d" % (m["name"], rj["name"], i)
				g = gindex
				gindex += 1
				if name in existing:
					continue
				keys = {
					JS + "jobset-name": m["name"],
					JS + "jobset-uid": m["uid"],
					JS + "replicatedjob-name": rj["name"],
					JS + "replicatedjob-replicas": str(reps),
					JS + "global-replicas": str(total),
					JS + "job-index": str(i),
					JS + "job-global-index": str(g),
					JS + "job-key": hashlib.sha256(("%s/%s" % (
						m["namespace"], name)).encode()).hexdigest(),
					JS + "group-name": rj.get("groupName", "default"),
					JS + "group-replicas": str(total),
					JS + "job-group-index": str(g),
					JS + "restart-attempt": str(js["status"].get(
						"restarts", 0)),
				}
				tmpl = copy.deepcopy(rj.get("template") or {})
				jspec = tmpl.get("spec") or {}
				tm = tmpl.get("metadata") or {}
				labels = dict(tm.get("labels") or {}, **keys)
				ann = dict(tm.get("annotations") or {}, **keys)
				excl = "alpha.jobset.sigs.k8s.io/exclusive-topology"
				if excl in (m.get("annotations") or {}):
					ann[excl] = m["annotations"][excl]
				ptmpl = jspec.setdefault("template", {})
				pm = ptmpl.setdefault("metadata", {})
				pm["labels"] = dict(pm.get("labels") or {}, **keys)
				pm["annotations"] = dict(pm.get("annotations") or {},
							 **keys)
				if excl in ann:
					pm["annotations"][excl] = ann[excl]
				if net.get("enableDNSHostnames"):
					ptmpl.setdefault("spec", {}).setdefault(
						"subdomain", subdomain)
				jspec["suspend"] = bool(spec.get("suspend"))
				job = {"apiVersion": "batch/v1", "kind": "Job",
				       "metadata": {"name": name,
						    "namespace": m["namespace"],
						    "labels": labels, "annotations": ann,
						    "ownerReferences": [owner_ref(
							    self.r("jobsets.jobset.x-k8s.io"),
							    js, "v1alpha2")]},
				       "spec": jspec, "status": {}}
				jspec.setdefault("backoffLimit", 6)
				jspec.setdefault("parallelism", 1)
				jspec.setdefault("completions", jspec["parallelism"])
				jspec.setdefault("completionMode", "NonIndexed")
				st.add(jres, job)
				self.event(js, self.r("jobsets.jobset.x-k8s.io"),
					   "Normal", "SuccessfulCreate",
					   "Created job %s" % name)

	# ---- Job

	def job(self, job):
		st = self.st
		m, spec = job["metadata"], job["spec"]
		status = job.setdefault("status", {})
		before = json.dumps(status, sort_keys=True)
		pres = self.r("pods")
		pods = [p for p in st.items(pres, m["namespace"])
			if owned_by(p, m["uid"])]
		counted = job.setdefault("_counted", {})
		succeeded = job.setdefault("_succeeded", set())
		failed_now = None
		for p in pods:
			phase = p.get("status", {}).get("phase")
			uid = p["metadata"]["uid"]
			if phase not in ("Succeeded", "Failed") or uid in counted:
				continue
			counted[uid] = phase
			idx = p["metadata"].get("annotations", {}).get(INDEX_KEY)
			if phase == "Succeeded":
				succeeded.add(int(idx) if idx is not None else uid)
				status["succeeded"] = status.get("succeeded", 0) + 1
			elif not p.get("_by_job"):
				# Pods the Job itself stopped (suspended, finished)
				# are no failures.
				action, why = self.pod_failure_policy(job, p)
				if action != "Ignore":
					status["failed"] = status.get("failed", 0) + 1
				if action == "FailJob" and failed_now is None:
					failed_now = ("PodFailurePolicy", why)
			fins = p["metadata"].get("finalizers") or []
			if "batch.kubernetes.io/job-tracking" in fins:
				fins.remove("batch.kubernetes.io/job-tracking")
				st.put(pres, p)
		finished = condition(job, "Complete") or condition(job, "Failed")
		if not finished and failed_now is None and \
				status.get("failed", 0) > spec.get("backoffLimit", 6):
			failed_now = ("BackoffLimitExceeded", "Job has reached the "
				      "specified backoff limit")
		deadline = spec.get("activeDeadlineSeconds")
		if not finished and failed_now is None and deadline is not None \
				and status.get("startTime") and not spec.get("suspend") \
				and seconds_since(status["startTime"]) >= deadline:
			failed_now = ("DeadlineExceeded", "Job was active longer than "
				      "specified deadline")
		active = [p for p in pods if p.get("status", {}).get("phase") not
			  in ("Succeeded", "Failed") and
			  not p["metadata"].get("deletionTimestamp")]
		if failed_now and not finished:
			set_condition(status, "FailureTarget", "True", failed_now[0],
				      failed_now[1])
			set_condition(status, "Failed", "True", failed_now[0],
				      failed_now[1])
			self.event(job, self.r("jobs.batch"), "Warning",
				   failed_now[0], failed_now[1])
			finished = True
		completions = spec.get("completions") or 1
		indexed = spec.get("completionMode") == "Indexed"
		if not finished and len(succeeded) >= completions:
			set_condition(status, "SuccessCriteriaMet", "True",
				      "CompletionsReached", "Reached expected number "
				      "of succeeded pods")
			set_condition(status, "Complete", "True",
				      "CompletionsReached", "Reached expected number "
				      "of succeeded pods")
			status["completionTime"] = now_text()
			finished = True
		if finished or spec.get("suspend"):
			for p in active:
				p["_by_job"] = True
				st.delete(pres, p, None)
			active = []
			if spec.get("suspend") and not finished:
				set_condition(status, "Suspended", "True",
					      "JobSuspended", "Job suspended")
		else:
			if condition(job, "Suspended"):
				set_condition(status, "Suspended", "False",
					      "JobResumed", "Job resumed")
			status.setdefault("startTime", now_text())
			if not m.get("deletionTimestamp"):
				self.create_pods(job, pods, succeeded, indexed,
						 completions)
				active = [p for p in st.items(pres, m["namespace"])
					  if owned_by(p, m["uid"]) and
					  p.get("status", {}).get("phase") not in
					  ("Succeeded", "Failed") and
					  not p["metadata"].get("deletionTimestamp")]
		status["active"] = len(active)
		status["ready"] = sum(1 for p in active if condition(p, "Ready"))
		status["terminating"] = sum(1 for p in pods if p["metadata"].get(
			"deletionTimestamp") and p.get("status", {}).get("phase")
					    not in ("Succeeded", "Failed"))
		if indexed:
			status["completedIndexes"] = ranges(
				sorted(x for x in succeeded if isinstance(x, int)))
		status["uncountedTerminatedPods"] = {}
		if json.dumps(status, sort_keys=True) != before:
			st.put(self.r("jobs.batch"), job)

	def pod_failure_policy(self, job, pod):
		"""(action, message) of the first podFailurePolicy rule that
		matches a failed pod; ("Count", "") when none does."""
		rules = ((job["spec"].get("podFailurePolicy") or {})
			 .get("rules") or [])
		statuses = pod.get("status", {}).get("containerStatuses") or []
		for i, rule in enumerate(rules):
			ec = rule.get("onExitCodes")
			if ec:
				for cs in statuses:
					if ec.get("containerName") and \
							cs["name"] != ec["containerName"]:
						continue
					code = cs.get("state", {}).get(
						"terminated", {}).get("exitCode")
					if code is None or code == 0:
						continue
					inside = code in ec.get("values", [])
					if inside == (ec.get("operator") == "In"):
						return rule["action"], (
							"Container %s for pod %s/%s failed with "
							"exit code %d matching %s rule at index %d"
							% (cs["name"], pod["metadata"]["namespace"],
							   pod["metadata"]["name"], code,
							   rule["action"], i))
			for pc in rule.get("onPodConditions") or []:
				for c in pod.get("status", {}).get("conditions") or []:
					if c["type"] == pc.get("type") and \
							c["status"] == pc.get("status", "True"):
						return rule["action"], (
							"Pod %s/%s has condition %s matching %s "
							"rule at index %d" % (
								pod["metadata"]["namespace"],
								pod["metadata"]["name"], c["type"],
								rule["action"], i))
		return "Count", ""

	def create_pods(self, job, pods, succeeded, indexed, completions):
		spec = job["spec"]
		live = [p for p in pods if p.get("status", {}).get("phase") not in
			("Succeeded", "Failed")]
		if indexed:
			busy = {p["metadata"]["annotations"].get(INDEX_KEY)
				for p in live}
			todo = [i for i in range(completions)
				if i not in succeeded and str(i) not in busy]
		else:
			n = min(spec.get("parallelism", 1),
				completions - len(succeeded)) - len(live)
			todo = [None] * max(0, n)
		for idx in todo[:max(0, spec.get("parallelism", 1) - len(live))]:
			self.make_pod(job, idx)

	def make_pod(self, job, idx):
		st = self.st
		m = job["metadata"]
		tmpl = copy.deepcopy(job["spec"].get("template") or {})
		tm = tmpl.get("metadata") or {}
		labels = dict(tm.get("labels") or {})
		ann = dict(tm.get("annotations") or {})
		labels.update({"batch.kubernetes.io/controller-uid": m["uid"],
			       "batch.kubernetes.io/job-name": m["name"],
			       "controller-uid": m["uid"], "job-name": m["name"]})
		pspec = tmpl.get("spec") or {}
		if idx is not None:
			labels[INDEX_KEY] = str(idx)
			ann[INDEX_KEY] = str(idx)
			name = "%s-%d-%s" % (m["name"], idx, random_suffix())
			if pspec.get("subdomain"):
				pspec.setdefault("hostname", "%s-%d" % (m["name"], idx))
			for c in pspec.get("containers", []) + \
					pspec.get("initContainers", []):
				env = c.setdefault("env", [])
				if not any(e.get("name") == "JOB_COMPLETION_INDEX"
					   for e in env):
					env.append({"name": "JOB_COMPLETION_INDEX",
						    "valueFrom": {"fieldRef": {
							    "apiVersion": "v1",
							    "fieldPath": "metadata.annotations"
							    "['%s']" % INDEX_KEY}}})
		else:
			name = "%s-%s" % (m["name"], random_suffix())
		pspec.setdefault("terminationGracePeriodSeconds", 30)
		pspec.setdefault("restartPolicy", "Always")
		pspec.setdefault("dnsPolicy", "ClusterFirst")
		pspec.setdefault("schedulerName", "default-scheduler")
		pspec.setdefault("serviceAccountName", "default")
		pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
			"name": name, "generateName": "%s-%s" % (m["name"], "" if idx
								 is None else
								 "%d-" % idx),
			"namespace": m["namespace"], "labels": labels,
			"annotations": ann,
			"finalizers": ["batch.kubernetes.io/job-tracking"],
			"ownerReferences": [owner_ref(self.r("jobs.batch"), job,
						      "v1")]},
		       "spec": pspec, "status": {"phase": "Pending",
						 "qosClass": "BestEffort"}}
		st.add(self.r("pods"), pod)
		self.event(job, self.r("jobs.batch"), "Normal", "SuccessfulCreate",
			   "Created pod: %s" % name)

	# ---- Kueue

	def kueue(self):
		st = self.st
		wres = self.r("workloads.kueue.x-k8s.io")
		jsres = self.r("jobsets.jobset.x-k8s.io")
		for js in st.items(jsres):
			labels = js["metadata"].get("labels") or {}
			if QUEUE_LABEL not in labels or \
					js["metadata"].get("deletionTimestamp"):
				continue
			wl = self.workload_of(js)
			if wl is None:
				wl = self.make_workload(js)
			terminal = (js.get("status") or {}).get("terminalState")
			if terminal and not condition(wl, "Finished"):
				set_condition(wl.setdefault("status", {}), "Finished",
					      "True", "Succeeded" if terminal ==
					      "Completed" else "Failed", "Job finished")
				st.put(wres, wl)
		self.admit()

	def workload_of(self, js):
		for wl in self.st.items(self.r("workloads.kueue.x-k8s.io"),
					js["metadata"]["namespace"]):
			if owned_by(wl, js["metadata"]["uid"]):
				return wl
		return None

	def priority(self, js):
		"""(value, priorityClassRef or None) as Kueue finds them."""
		st = self.st
		labels = js["metadata"].get("labels") or {}
		name = labels.get(PRIORITY_LABEL)
		if name and self.has("workloadpriorityclasses.kueue.x-k8s.io"):
			wpc = st.get(self.r("workloadpriorityclasses.kueue.x-k8s.io"),
				     "", name)
			return (wpc or {}).get("value", 0), {
				"group": "kueue.x-k8s.io",
				"kind": "WorkloadPriorityClass", "name": name}
		for rj in js["spec"].get("replicatedJobs") or []:
			pc = rj.get("template", {}).get("spec", {}).get(
				"template", {}).get("spec", {}).get("priorityClassName")
			if pc:
				obj = st.get(self.r("priorityclasses.scheduling.k8s.io"),
					     "", pc)
				return (obj or {}).get("value", 0), {
					"group": "scheduling.k8s.io",
					"kind": "PriorityClass", "name": pc}
		return 0, None

	def make_workload(self, js):
		st = self.st
		m = js["metadata"]
		h = hashlib.sha256(("%s/%s/JobSet" % (m["name"], m["uid"])
				    ).encode()).hexdigest()[:5]
		podsets = []
		for rj in js["spec"].get("replicatedJobs") or []:
			jspec = rj.get("template", {}).get("spec", {})
			podsets.append({"name": rj["name"],
					"count": rj.get("replicas", 1) *
					jspec.get("parallelism", 1),
					"template": copy.deepcopy(jspec.get(
						"template", {}))})
		prio, ref = self.priority(js)
		wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		      "metadata": {"name": ("jobset-%s" % m["name"])[:246] + "-" +
				   h, "namespace": m["namespace"],
				   "labels": {"kueue.x-k8s.io/job-uid": m["uid"]},
				   "ownerReferences": [owner_ref(
					   self.r("jobsets.jobset.x-k8s.io"), js,
					   "v1alpha2")]},
		      "spec": {"queueName": m["labels"][QUEUE_LABEL],
			       "podSets": podsets, "priority": prio,
			       "active": True}, "status": {}}
		if ref:
			wl["spec"]["priorityClassRef"] = ref
		st.add(self.r("workloads.kueue.x-k8s.io"), wl)
		self.event(wl, self.r("workloads.kueue.x-k8s.io"), "Normal",
			   "CreatedWorkload", "Created Workload: %s/%s" % (
				   m["namespace"], wl["metadata"]["name"]))
		return wl

	@staticmethod
	def requests(wl):
		"""{resource: total} a workload asks for."""
		out = {}
		for ps in wl["spec"].get("podSets") or []:
			for c in ps.get("template", {}).get("spec", {}).get(
					"containers", []):
				res = c.get("resources") or {}
				want = dict(res.get("limits") or {},
					    **(res.get("requests") or {}))
				for k, v in want.items():
					out[k] = out.get(k, 0) + quantity(v) * \
						ps.get("count", 1)
		return out

	def cluster_queue(self, wl):
		"""(ClusterQueue, why not) for a workload."""
		st = self.st
		lq = st.get(self.r("localqueues.kueue.x-k8s.io"),
			    wl["metadata"]["namespace"], wl["spec"]["queueName"])
		if lq is None:
			return None, "LocalQueue %s doesn't exist" % \
				wl["spec"]["queueName"]
		cqn = (lq.get("spec") or {}).get("clusterQueue")
		cq = st.get(self.r("clusterqueues.kueue.x-k8s.io"), "", cqn)
		if cq is None:
			return None, "ClusterQueue %s doesn't exist" % cqn
		for rg in cq["spec"].get("resourceGroups") or []:
			for fl in rg.get("flavors") or []:
				if st.get(self.r("resourceflavors.kueue.x-k8s.io"), "",
					  fl["name"]) is None:
					return None, "ClusterQueue %s is inactive" % cqn
		return cq, None

	def usage(self, cq):
		"""{(flavor, resource): used} by workloads holding quota."""
		out = {}
		for wl in self.st.items(self.r("workloads.kueue.x-k8s.io")):
			adm = (wl.get("status") or {}).get("admission")
			if not adm or adm.get("clusterQueue") != \
					cq["metadata"]["name"] or \
					condition(wl, "Finished"):
				continue
			for psa in adm.get("podSetAssignments") or []:
				for r, fl in (psa.get("flavors") or {}).items():
					out[(fl, r)] = out.get((fl, r), 0) + quantity(
						(psa.get("resourceUsage") or {}).get(r, 0))
		return out

	def assign(self, cq, need, used):
		"""{resource: flavor} fitting need, or (None, why)."""
		out = {}
		for r, n in need.items():
			covered = False
			why = None
			for rg in cq["spec"].get("resourceGroups") or []:
				if r not in (rg.get("coveredResources") or []):
					continue
				covered = True
				for fl in rg.get("flavors") or []:
					quota = None
					for fr in fl.get("resources") or []:
						if fr["name"] == r:
							quota = quantity(fr.get("nominalQuota",
										0))
					if quota is None:
						continue
					have = quota - used.get((fl["name"], r), 0)
					if n <= have:
						out[r] = fl["name"]
						break
					why = ("insufficient unused quota for %s in "
					       "flavor %s, %s more needed" % (
						       r, fl["name"], quantity_text(
							       n - have)))
				if r in out:
					break
			if not covered:
				return None, "resource %s unavailable in " \
					"ClusterQueue" % r
			if r not in out:
				return None, why
		return out, None

	def admit(self):
		st = self.st
		wres = self.r("workloads.kueue.x-k8s.io")
		wls = st.items(wres)
		# Evicted workloads give their quota back once their pods
		# are gone.
		for wl in wls:
			s = wl.get("status") or {}
			if s.get("admission") and condition(wl, "Evicted") and \
					not self.pods_left(wl):
				del s["admission"]
				set_condition(s, "QuotaReserved", "False", "Pending",
					      "Preempted to accommodate a higher "
					      "priority Workload")
				set_condition(s, "Admitted", "False", "NoReservation",
					      "The workload has no reservation")
				set_condition(s, "Requeued", "True", "Preempted",
					      "Preempted to accommodate a higher "
					      "priority Workload")
				st.put(wres, wl)
		for wl in self.pending():
			s = wl.setdefault("status", {})
			cq, why = self.cluster_queue(wl)
			if cq is None:
				if set_condition(s, "QuotaReserved", "False",
						 "Inadmissible", why):
					st.put(wres, wl)
				continue
			need = self.requests(wl)
			used = self.usage(cq)
			flavors, why = self.assign(cq, need, used)
			if flavors is None:
				self.preempt(cq, wl, need, used)
				if set_condition(s, "QuotaReserved", "False", "Pending",
						 "couldn't assign flavors to pod set "
						 "%s: %s" % (wl["spec"]["podSets"][0][
							 "name"], why)):
					st.put(wres, wl)
				continue
			s["admission"] = {"clusterQueue": cq["metadata"]["name"],
					  "podSetAssignments": []}
			for ps in wl["spec"]["podSets"]:
				one = self.requests({"spec": {"podSets": [ps]}})
				s["admission"]["podSetAssignments"].append({
					"name": ps["name"], "count": ps.get("count", 1),
					"flavors": {r: flavors[r] for r in one},
					"resourceUsage": {r: quantity_text(v)
							  for r, v in one.items()}})
			msg = "Quota reserved in ClusterQueue %s" % \
				cq["metadata"]["name"]
			set_condition(s, "QuotaReserved", "True", "QuotaReserved", msg)
			set_condition(s, "Admitted", "True", "Admitted",
				      "The workload is admitted")
			if condition(wl, "Evicted"):
				set_condition(s, "Evicted", "False", "Admitted",
					      "The workload is admitted")
			if condition(wl, "Preempted"):
				set_condition(s, "Preempted", "False", "QuotaReserved",
					      "The workload is admitted")
			st.put(wres, wl)
			self.event(wl, wres, "Normal", "QuotaReserved", msg)
			self.event(wl, wres, "Normal", "Admitted", "Admitted by "
				   "ClusterQueue %s" % cq["metadata"]["name"])
			_, js = st.by_uid(wl["metadata"]["ownerReferences"][0]["uid"])
			if js is not None and js["spec"].get("suspend"):
				self.start(js, flavors)

	def pending(self):
		"""Workloads waiting for quota, in the order Kueue tries them:
		priority, then age."""
		out = [w for w in self.st.items(self.r("workloads.kueue.x-k8s.io"))
		       if not (w.get("status") or {}).get("admission") and
		       not condition(w, "Finished") and
		       not w["metadata"].get("deletionTimestamp") and
		       w["spec"].get("active", True)]
		out.sort(key=lambda w: (-w["spec"].get("priority", 0), w["_seq"]))
		return out

	def start(self, js, flavors):
		"""Kueue starts an admitted JobSet: the flavors' nodeLabels
		join the pod templates' nodeSelector, suspend goes false."""
		st = self.st
		labels = {}
		for fl in set(flavors.values()):
			obj = st.get(self.r("resourceflavors.kueue.x-k8s.io"), "", fl)
			labels.update((obj or {}).get("spec", {}).get("nodeLabels")
				      or {})
		for rj in js["spec"].get("replicatedJobs") or []:
			pspec = rj.setdefault("template", {}).setdefault(
				"spec", {}).setdefault("template", {}).setdefault(
					"spec", {})
			if labels:
				pspec["nodeSelector"] = dict(pspec.get("nodeSelector")
							     or {}, **labels)
		js["spec"]["suspend"] = False
		st.put(self.r("jobsets.jobset.x-k8s.io"), js, True)

	def pods_left(self, wl):
		owner = wl["metadata"]["ownerReferences"][0]["uid"]
		for p in self.st.items(self.r("pods"), wl["metadata"]["namespace"]):
			if (p["metadata"].get("labels") or {}).get(
					JS + "jobset-uid") == owner:
				return True
		return False

	def preempt(self, cq, wl, need, used):
		policy = (cq["spec"].get("preemption") or {}).get(
			"withinClusterQueue", "Never")
		if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
			return
		st = self.st
		wres = self.r("workloads.kueue.x-k8s.io")
		prio = wl["spec"].get("priority", 0)
		victims = []
		for o in st.items(wres):
			adm = (o.get("status") or {}).get("admission")
			if not adm or adm["clusterQueue"] != cq["metadata"]["name"] \
					or condition(o, "Evicted") or \
					condition(o, "Finished"):
				continue
			p = o["spec"].get("priority", 0)
			if p < prio or (policy == "LowerOrNewerEqualPriority" and
					p == prio and o["metadata"][
						"creationTimestamp"] >
					wl["metadata"]["creationTimestamp"]):
				victims.append(o)
		if any(condition(o, "Evicted") and (o.get("status") or {}).get(
				"admission") for o in st.items(wres)):
			# Wait for those already evicted to give quota back.
			return
		victims.sort(key=lambda o: (o["spec"].get("priority", 0),
					    o["metadata"]["creationTimestamp"]),
			     reverse=False)
		chosen = []
		left = dict(used)
		for v in victims:
			for psa in v["status"]["admission"]["podSetAssignments"]:
				for r, fl in psa["flavors"].items():
					left[(fl, r)] = left.get((fl, r), 0) - quantity(
						psa["resourceUsage"].get(r, 0))
			chosen.append(v)
			if self.assign(cq, need, left)[0] is not None:
				break
		else:
			return
		for v in chosen:
			s = v["status"]
			msg = "Preempted to accommodate a workload (UID: %s) due to " \
				"prioritization in the ClusterQueue" % \
				wl["metadata"]["uid"]
			set_condition(s, "Evicted", "True", "Preempted", msg)
			set_condition(s, "Preempted", "True", "InClusterQueue", msg)
			set_condition(s, "Admitted", "False", "Preempted", msg)
			st.put(wres, v)
			self.event(v, wres, "Normal", "Preempted", msg)
			_, js = st.by_uid(v["metadata"]["ownerReferences"][0]["uid"])
			if js is not None and not js["spec"].get("suspend"):
				js["spec"]["suspend"] = True
				st.put(self.r("jobsets.jobset.x-k8s.io"), js, True)


def ranges(nums):
	"""Job's completedIndexes: "0-2,4"."""
	out, i = [], 0
	while i < len(nums):
		j = i
		while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
			j += 1
		out.append(str(nums[i]) if i == j else "%d-%d" % (nums[i],
								  nums[j]))
		i = j + 1
	return ",".join(out)
