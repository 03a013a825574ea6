#!/usr/bin/env python3
"""A fake Kubernetes API server for slicectl's GKE tests: JobSet and Kueue
as their CRDs define them, the controllers that give them life, and a
kubelet that runs each pod as a local process tree.

The API, as kube-apiserver serves it to kubectl and @kubernetes/client-node:
- discovery: /version, /api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION
  (plain APIGroupList/APIResourceList; aggregated discovery is not offered,
  clients fall back as they do for an old server); /openapi/v3 only as far
  as kubectl needs it to leave validation to the server (fieldValidation
  on every PATCH operation, no schemas): kubectl create/apply then send
  fieldValidation=Strict and print the server's refusal; no /openapi/v2;
- resources: namespaces (deleting one deletes its content first, and
  refuses new content meanwhile), pods (+ /log, /eviction, /status),
  events, nodes (made as pods are bound), priorityclasses
  (scheduling.k8s.io/v1), jobs (batch/v1), and every CRD in the CRD
  directory (default k8s/ of the repository, copies of ../shared/k8s:
  JobSet jobset.x-k8s.io/v1alpha2; Kueue kueue.x-k8s.io v1beta1 and v1beta2,
  both served, kept in v1beta2 and converted as Kueue's webhook does for
  the fields whose names differ: Workload priorityClassName/Source vs
  priorityClassRef, ClusterQueue cohort vs cohortName and admissionChecks,
  LocalQueue status flavorUsage vs flavorsUsage): list (labelSelector,
  fieldSelector on metadata.name, metadata.namespace, spec.nodeName,
  status.phase), get, create (dryRun=All,
  generateName), replace (PUT, 409 Conflict on a stale resourceVersion),
  patch (merge, JSON patch; strategic merge is read as a merge patch),
  delete (propagationPolicy Foreground/Background/Orphan, by default
  Background, Orphan for batch/v1 Jobs as the API server has it;
  gracePeriodSeconds;
  the object is returned, or a Success Status for batch Jobs deleted at
  once), deletecollection, status subresources; watch (?watch=1: chunked JSON
  lines from resourceVersion, ADDED for every object without one or with
  "0", BOOKMARK every --bookmark-interval s with allowWatchBookmarks, an
  ERROR event with a 410 Expired Status for a version older than the kept
  history, timeoutSeconds); a meta.k8s.io/v1 Table when asked for one (as
  kubectl get does): the CRD's additionalPrinterColumns, kubectl's pod,
  job, event, node and namespace columns;
- CRD objects are checked against the CRD's openAPIV3Schema as the API
  server does (nulls pruned, defaults applied, types, enum, required,
  formats int32/int64/date-time, int-or-string, pattern, min/max,
  lengths, items, additionalProperties, x-kubernetes-preserve-unknown-
  fields, embedded resources; metadata as ObjectMeta: DNS-1123 names,
  label syntax): 422 Invalid with details.causes. Unknown fields follow
  fieldValidation: Strict refuses them with 400 BadRequest ("strict decoding
  error: unknown field ...", what the real server answers), Warn (the
  default) drops them with a "Warning: 299" header, Ignore drops them.
  JobSet's validating webhook (generated Job and pod names <= 63, rule
  names, failure reasons) denies as controller-runtime does: 403 Forbidden,
  'admission webhook "vjobset.kb.io" denied the request: ...'. CEL rules
  are not evaluated. Core objects (pods, jobs, ...) are not validated;
- errors are Status objects: 401 (with --require-token), 403 (rules set by
  /_fake/forbid), 404 NotFound (object, namespace; a plain "404 page not
  found" for an unknown path, e.g. a group left out by --without-group),
  409 AlreadyExists / Conflict, 410, 422, 429/500 and resets and stalls
  through fault rules (fake_common.py's language);
- Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta1, served with
  Kueue unless --without-group visibility.kueue.x-k8s.io): GET
  .../clusterqueues/CQ/pendingworkloads and .../namespaces/NS/localqueues/
  LQ/pendingworkloads (offset, limit): PendingWorkloadsSummary with
  positionInClusterQueue and positionInLocalQueue, in admission order;
- GKE's container API: GET /v1/projects/P/locations/L/clusters/C gives a
  RUNNING cluster whose "endpoint" is 127.0.0.1:PORT (the API port) and,
  with --tls, masterAuth.clusterCaCertificate = base64 of the CA's PEM
  (Google's error shape for 401 and an unknown --cluster).

The controllers (one reconcile loop, every 50 ms):
- Kueue: a JobSet with the kueue.x-k8s.io/queue-name label is suspended on
  create (its webhook); a Workload (kueue.x-k8s.io/v1beta2) is made for it,
  named jobset-NAME-HASH, with one podSet per replicatedJob; it is admitted
  (QuotaReserved, Admitted, status.admission) when its LocalQueue's
  ClusterQueue (whose ResourceFlavors exist) has the google.com/tpu or
  nvidia.com/gpu (and any other requested resource it covers) nominalQuota
  left, in priority
  then creation order; the JobSet is then unsuspended. Priority is the
  kueue.x-k8s.io/priority-class label's WorkloadPriorityClass, else the pod
  template's priorityClassName's PriorityClass. With the ClusterQueue's
  preemption.withinClusterQueue LowerPriority (or LowerOrNewerEqualPriority),
  a pending workload evicts admitted lower-priority ones (Evicted and
  Preempted conditions, the JobSet suspended: its pods killed with grace);
  they are readmitted when quota frees. Kueue's default, Never, never
  preempts.
- JobSet (v0.10.1): webhook defaults; Jobs NAME-RJOB-I with the labels and
  annotations of research/gke.md 1.6 (suspended while the JobSet is);
  failurePolicy: on a failed Job the first rule whose onJobFailureReasons
  and targetReplicatedJobs match acts (FailJobSet; RestartJobSet;
  RestartJobSetAndIgnoreMaxRestarts), no rule: restart; a restart while
  restarts < maxRestarts deletes every Job (foreground: their pods are
  killed with grace) and recreates them once gone, restart-attempt + 1;
  else Failed (ReachedMaxRestarts); successPolicy (All or Any, over
  targetReplicatedJobs) met: Completed; ttlSecondsAfterFinished deletes
  a finished JobSet.
  status.restarts, restartsCountTowardsMax, conditions, terminalState,
  replicatedJobsStatus.
- Job: Indexed (and NonIndexed) pods NAME-I-xxxxx with
  batch.kubernetes.io/job-completion-index (label and annotation),
  job-name and controller-uid labels, env JOB_COMPLETION_INDEX, hostname
  JOBSET-RJOB-J-I and subdomain for JobSet pods; backoffLimit;
  podFailurePolicy (onExitCodes In/NotIn with containerName,
  onPodConditions; FailJob, Ignore, Count); activeDeadlineSeconds; Failed
  (BackoffLimitExceeded, PodFailurePolicy, DeadlineExceeded) kills the
  other pods (not counted as failures, nor are pods a suspend stops);
  Complete. restartPolicy OnFailure/Always do not restart containers in
  place: a container's exit ends its pod (slicectl renders Never).
- kubelet: a pod is bound to node gke-tpu-slice-J (J = its JobSet job
  index), or when it asks for nvidia.com/gpu to a node of its own,
  gke-gpu-slice-J-I (I = its completion index; node pool gpu-slice-J);
  gke-node-0 otherwise. A node is made on first use with the labels the
  pod selects, and for each of google.com/tpu and nvidia.com/gpu the pod
  asks for, that capacity and allocatable and a NoSchedule taint, as GKE's
  TPU and GPU node pools have. It runs its initContainers in order then its
  containers, each as a local process tree: command + args with $(VAR)
  expansion, env (value, valueFrom.fieldRef: metadata.name, .namespace,
  .uid, .labels['k'], .annotations['k'], spec.nodeName,
  spec.serviceAccountName, status.podIP, status.hostIP), workingDir, in a
  private mount and PID namespace (unshare --mount --pid --fork
  --propagation private, as root) where each volumeMount is bind-mounted
  at its mountPath (emptyDir: STATE/pods/UID/volumes/NAME; hostPath: the
  path; subPath, readOnly), a missing mountPath being created on the host;
  a pod with a subdomain gets an /etc/hosts (bind-mounted) that resolves
  its JobSet's names (JOBSET-RJOB-J-I.SUBDOMAIN[.NS.svc.cluster.local]) to
  127.0.0.1, standing in for the cluster DNS. Note $$ is $ after
  expansion, as in Kubernetes: "echo $$" prints "$".
  The image is ignored; the environment is PATH, HOSTNAME and the names
  given with --pass-env, plus the container's env. Output is the log
  (GET .../pods/NAME/log?container=&follow=&tailLines=&previous=).
  Phase from the exit codes (all 0: Succeeded, else Failed); containerStatuses
  as kubelet reports them. Deleting a pod sends SIGTERM to each container's
  first process and SIGKILL to its PID namespace after the grace period
  (DeleteOptions, else terminationGracePeriodSeconds, default 30).
  Shutting the fake down (SIGTERM) kills every process group it started.

Control endpoints (no auth; JSON in and out, errors as Status objects):
  POST /_fake/evict      {"namespace", "name"} (+ "grace": S): the pod
                         gets condition DisruptionTarget (EvictionByEvictionAPI)
                         and is deleted with its grace: SIGTERM, SIGKILL
                         after the grace; Failed. (The real Eviction API,
                         POST .../pods/NAME/eviction, does the same.)
  POST /_fake/lose-node  {"node": N} or {"jobset", "slice": J} (+
                         "namespace"): every pod on that node (or slice J's
                         GPU nodes) is killed at
                         once (SIGKILL), Failed with DisruptionTarget
                         (DeletionByPodGC), and deleted, as when a node pool
                         goes away; answers {"pods": [names]}
  POST /_fake/forbid     {"verb", "resource", "namespace"?} or a list: 403
                         for matching requests (RBAC-like); DELETE clears
  POST /_fake/faults     fault rules as fake_common.py defines them
                         ("method", "path" regex on path?query, "count",
                         "status" (+ "message", "retry_after"), "reset",
                         "stall", "processed"); GET lists, DELETE clears
  POST /_fake/compact    as etcd's compaction: a new watch from a version
                         before now gets 410 (running watches go on)
  GET  /_fake/requests   [{"method", "path", "query", "body", "headers",
                         "status", "fault"}]; DELETE clears it
  GET  /_fake/processes  [{"namespace", "pod", "container", "pid" (unshare's,
                         = "pgid"), "initPid" (the container's PID 1 on
                         the host), "running", "exitCode", "tree": [{"pid",
                         "cmdline"}] (PID 1 and all below it: to crash or
                         hang a trainer by pid, as on the local provider)}]
  GET  /_fake/state      every stored object, by resource

Usage: kube_fake.py --port-file FILE [--port N] [--crds DIR] [--state-dir D]
                    [--tls] [--require-token T] [--without-group G]...
                    [--cluster P/L/C]... [--pass-env NAME]...
                    [--watch-history N] [--bookmark-interval S] [--verbose]
FILE gets two lines once both sockets listen (by rename, never half): the
API port (HTTPS with --tls, its CA in STATE/ca.pem) and a plain HTTP port
serving the same API, the container API and /_fake/. Without --state-dir
a temporary directory is used and removed at exit.

Python standard library only, in files next to this one: kube_api.py (the
API server's checks and Status answers, the schema check), kube_yaml.py
(the CRD files' YAML, checked against js-yaml by the kube-fidelity test),
kube_controllers.py (webhooks, Kueue, JobSet, Job), kube_kubelet.py (pods
as processes); fake_common.py for the fault rules, the request plumbing
and the server class. This file: the resources, the
store and watch history, the HTTP API, tables, conversion, serving.
"""

import argparse
import base64
import bisect
import copy
import hashlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

import fake_common
from kube_yaml import load_yaml
from kube_api import (
	KubeError, SchemaCheck, Selector, already_exists,
	bad_request, check_meta, condition, conflict,
	field_selector, go_quote, not_found, now_text,
	page_not_found, random_suffix, seconds_since, set_condition,
	status_doc)
from kube_controllers import (
	Controllers, VISIBILITY, Webhooks, denied)
from kube_kubelet import Kubelet

HERE = os.path.dirname(os.path.abspath(__file__))


def default_crds():
	"""k8s/ of the source tree (SLICECTL_SRCDIR, else the tree this file
	is in): JobSet's and Kueue's CRDs as released, copied in-tree."""
	root = os.environ.get("SLICECTL_SRCDIR") or os.path.join(HERE, "..",
								 "..")
	return os.path.normpath(os.path.join(root, "k8s"))

# ---------------------------------------------------------------- resources


class Resource:
	"""One kind of object the server stores: a built-in one, or a
	CRD's (with its schema per served version)."""

	def __init__(self, group, versions, plural, kind, namespaced,
		     short=(), status=True, schemas=None, categories=()):
		self.group, self.versions = group, list(versions)
		self.plural, self.kind, self.namespaced = plural, kind, namespaced
		self.singular = kind.lower()
		self.short, self.status, self.categories = list(short), status, \
			list(categories)
		self.schemas = schemas
		self.printer = {}
		self.qualified = plural + ("." + group if group else "")

	@property
	def builtin(self):
		return self.schemas is None

	def api_version(self, version):
		return "%s/%s" % (self.group, version) if self.group else version

	def discovery(self):
		verbs = ["create", "delete", "deletecollection", "get", "list",
			 "patch", "update", "watch"]
		out = [{"name": self.plural, "singularName": self.singular,
			"namespaced": self.namespaced, "kind": self.kind,
			"verbs": verbs, "storageVersionHash": base64.b64encode(
				hashlib.sha256(self.qualified.encode()).digest()[:8]
			).decode()}]
		if self.short:
			out[0]["shortNames"] = self.short
		if self.categories:
			out[0]["categories"] = self.categories
		if self.status:
			out.append({"name": self.plural + "/status",
				    "singularName": "", "namespaced":
				    self.namespaced, "kind": self.kind,
				    "verbs": ["get", "patch", "update"]})
		if self.plural == "pods":
			out.append({"name": "pods/log", "singularName": "",
				    "namespaced": True, "kind": "Pod",
				    "verbs": ["get"]})
			out.append({"name": "pods/eviction", "singularName": "",
				    "namespaced": True, "group": "policy",
				    "version": "v1", "kind": "Eviction",
				    "verbs": ["create"]})
		return out


BUILTIN = [
	Resource("", ["v1"], "namespaces", "Namespace", False, ["ns"]),
	Resource("", ["v1"], "pods", "Pod", True, ["po"], categories=["all"]),
	Resource("", ["v1"], "events", "Event", True, ["ev"], status=False),
	Resource("", ["v1"], "nodes", "Node", False, ["no"]),
	Resource("batch", ["v1"], "jobs", "Job", True, categories=["all"]),
	Resource("scheduling.k8s.io", ["v1"], "priorityclasses",
		 "PriorityClass", False, ["pc"], status=False),
]


def load_crds(directory, without=()):
	"""Resources for every CRD in directory's *.yaml files."""
	out = []
	for fn in sorted(os.listdir(directory)):
		if not fn.endswith((".yaml", ".yml")):
			continue
		with open(os.path.join(directory, fn)) as f:
			docs = load_yaml(f.read())
		for d in docs:
			if not d or d.get("kind") != "CustomResourceDefinition":
				continue
			spec = d["spec"]
			if spec["group"] in without:
				continue
			served = [v for v in spec["versions"] if v.get("served")]
			# The storage version first: the preferred one.
			served.sort(key=lambda v: not v.get("storage"))
			schemas = {v["name"]: v["schema"]["openAPIV3Schema"]
				   for v in served}
			names = spec["names"]
			res = Resource(
				spec["group"], [v["name"] for v in served],
				names["plural"], names["kind"],
				spec["scope"] == "Namespaced",
				names.get("shortNames", ()),
				any("status" in (v.get("subresources") or {})
				    for v in served), schemas,
				names.get("categories", ()))
			res.printer = {v["name"]: v.get("additionalPrinterColumns")
				       or [] for v in served}
			out.append(res)
	return out


# ---------------------------------------------------------------- store


class Store:
	"""Every object, the resourceVersion counter and the history of
	changes watches read. One lock (a Condition) guards it all;
	controllers and the kubelet take it too."""

	def __init__(self, resources, history):
		self.cond = threading.Condition(threading.RLock())
		self.lock = self.cond
		self.resources = resources
		self.by_plural = {}
		for r in resources:
			self.by_plural[(r.group, r.plural)] = r
		self.objects = {r.qualified: {} for r in resources}
		self.uids = {}
		self.rv = 1
		self.history = []      # (rv, type, qualified, object)
		self.base = 0          # history[0]'s place in all changes ever
		self.history_max = history
		self.oldest = 1        # versions below this are gone (410)
		self.faults, self.requests, self.forbidden = [], [], []
		self.res = {r.qualified: r for r in resources}

	def resource(self, plural_qualified):
		return self.res[plural_qualified]

	def next_rv(self):
		self.rv += 1
		return self.rv

	def record(self, etype, res, obj):
		self.history.append((int(obj["metadata"]["resourceVersion"]),
				     etype, res.qualified, copy.deepcopy(obj)))
		if len(self.history) > self.history_max:
			drop = len(self.history) - self.history_max
			self.oldest = self.history[drop - 1][0] + 1
			del self.history[:drop]
			self.base += drop
		self.cond.notify_all()

	def compact(self):
		"""Versions up to now are too old for a new watch; watches
		already running keep going, as etcd's compaction lets them."""
		self.oldest = self.rv + 1

	def get(self, res, ns, name):
		return self.objects[res.qualified].get((ns or "", name))

	def items(self, res, ns=None):
		return [o for (n, _), o in sorted(
			self.objects[res.qualified].items())
			if ns is None or n == ns]

	def add(self, res, obj, t=None):
		"""Stores a new object (metadata completed); returns it."""
		m = obj.setdefault("metadata", {})
		m["uid"] = str(uuid.uuid4())
		m["creationTimestamp"] = now_text(t)
		if not res.builtin or res.plural == "jobs":
			m["generation"] = 1
		m["resourceVersion"] = str(self.next_rv())
		# Creation order, finer than creationTimestamp's seconds.
		obj["_seq"] = self.rv
		self.objects[res.qualified][(m.get("namespace", ""),
					     m["name"])] = obj
		self.uids[m["uid"]] = (res, m.get("namespace", ""), m["name"])
		self.record("ADDED", res, obj)
		return obj

	def put(self, res, obj, spec_changed=False):
		"""Records a change to a stored object (in place or new)."""
		m = obj["metadata"]
		if spec_changed and "generation" in m:
			m["generation"] += 1
		m["resourceVersion"] = str(self.next_rv())
		key = (m.get("namespace", ""), m["name"])
		self.objects[res.qualified][key] = obj
		if m.get("deletionTimestamp") and not m.get("finalizers") and \
				not self.held(res, obj):
			self.remove(res, obj)
			return obj
		self.record("MODIFIED", res, obj)
		return obj

	@staticmethod
	def held(res, obj):
		"""A pod being deleted stays until its containers are gone
		(the kubelet says so); a namespace until its content is (the
		namespace controller removes it)."""
		if res.plural == "namespaces":
			return True
		return res.plural == "pods" and not obj.get(
			"_stopped", not obj.get("spec", {}).get("nodeName"))

	def remove(self, res, obj):
		m = obj["metadata"]
		key = (m.get("namespace", ""), m["name"])
		if self.objects[res.qualified].get(key) is not obj:
			return
		del self.objects[res.qualified][key]
		self.uids.pop(m["uid"], None)
		m["resourceVersion"] = str(self.next_rv())
		self.record("DELETED", res, obj)

	def by_uid(self, uid):
		hit = self.uids.get(uid)
		if hit is None:
			return None, None
		res, ns, name = hit
		return res, self.get(res, ns, name)

	def dependents(self, uid):
		out = []
		for q, objs in self.objects.items():
			for o in objs.values():
				for ref in o["metadata"].get("ownerReferences", []):
					if ref.get("uid") == uid:
						out.append((self.res[q], o))
		return out

	def delete(self, res, obj, propagation=None, grace=None, t=None):
		"""Starts deleting obj; it is gone at once unless finalizers,
		foreground dependents or a pod's containers hold it."""
		m = obj["metadata"]
		if propagation is None:
			# The server's default: batch/v1 Jobs keep their legacy
			# OrphanDependents (kubectl asks for Background itself);
			# everything else is Background.
			propagation = "Orphan" if res.plural == "jobs" else \
				"Background"
		if m.get("deletionTimestamp"):
			if res.plural == "pods" and grace is not None:
				obj["_grace"] = min(obj.get("_grace", grace), grace)
			return obj
		if propagation == "Orphan":
			for _, d in self.dependents(m["uid"]):
				d["metadata"]["ownerReferences"] = [
					r for r in d["metadata"]["ownerReferences"]
					if r.get("uid") != m["uid"]]
				self.put(self.uids[d["metadata"]["uid"]][0], d)
		elif propagation == "Foreground" and self.dependents(m["uid"]):
			m.setdefault("finalizers", [])
			if "foregroundDeletion" not in m["finalizers"]:
				m["finalizers"].append("foregroundDeletion")
		if res.plural == "pods":
			if grace is None:
				grace = obj.get("spec", {}).get(
					"terminationGracePeriodSeconds", 30)
			obj["_grace"] = grace
			m["deletionGracePeriodSeconds"] = grace
		elif m.get("finalizers"):
			m["deletionGracePeriodSeconds"] = 0
		m["deletionTimestamp"] = now_text(t)
		obj["_propagation"] = propagation
		if not m.get("finalizers") and not self.held(res, obj):
			self.remove(res, obj)
		else:
			self.put(res, obj)
		return obj

	def collect_garbage(self):
		"""The garbage collector: dependents of a missing owner are
		deleted; an owner deleted in the foreground waits for its
		dependents, which are deleted in the foreground too."""
		for q, objs in list(self.objects.items()):
			res = self.res[q]
			for o in list(objs.values()):
				m = o["metadata"]
				refs = m.get("ownerReferences") or []
				if refs and not m.get("deletionTimestamp"):
					owners = [self.by_uid(r.get("uid"))[1]
						  for r in refs]
					if all(x is None for x in owners):
						self.delete(res, o, "Background")
						continue
					fg = [x for x in owners if x is not None and
					      x.get("_propagation") == "Foreground" and
					      x["metadata"].get("deletionTimestamp")]
					if fg:
						self.delete(res, o, "Foreground")
						continue
				if "foregroundDeletion" in (m.get("finalizers") or []) \
						and not self.dependents(m["uid"]):
					m["finalizers"].remove("foregroundDeletion")
					self.put(res, o)


def public(obj):
	"""The object as served: without the fake's own keys (_...)."""
	return {k: v for k, v in obj.items() if not k.startswith("_")}

# ---------------------------------------------------------------- HTTP

VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.5-gke.1000",
	   "gitCommit": "0000000000000000000000000000000000000000",
	   "gitTreeState": "clean", "buildDate": "2025-09-01T00:00:00Z",
	   "goVersion": "go1.24.6", "compiler": "gc",
	   "platform": "linux/amd64"}
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
	 "DELETE": "delete"}


def decode_json(body, what="the request body"):
	try:
		doc = json.loads(body or b"{}")
	except ValueError as err:
		raise bad_request("couldn't get version/kind; json parse error: "
				  "%s" % err)
	if not isinstance(doc, dict):
		raise bad_request("%s is not a JSON object" % what)
	return doc


def merge_patch(target, patch):
	if not isinstance(patch, dict):
		return copy.deepcopy(patch)
	out = dict(target) if isinstance(target, dict) else {}
	for k, v in patch.items():
		if v is None:
			out.pop(k, None)
		else:
			out[k] = merge_patch(out.get(k), v)
	return out


def json_patch(doc, ops):
	doc = copy.deepcopy(doc)

	def walk(path):
		parts = [p.replace("~1", "/").replace("~0", "~")
			 for p in path.split("/")[1:]]
		cur = doc
		for p in parts[:-1]:
			cur = cur[int(p)] if isinstance(cur, list) else cur[p]
		return cur, parts[-1]
	for op in ops:
		kind = op.get("op")
		try:
			parent, key = walk(op["path"])
			if isinstance(parent, list):
				key = len(parent) if key == "-" else int(key)
			if kind in ("add", "replace"):
				if isinstance(parent, list) and kind == "add":
					parent.insert(key, op["value"])
				else:
					if kind == "replace":
						parent[key]  # noqa: B018 (must exist)
					parent[key] = op["value"]
			elif kind == "remove":
				del parent[key]
			elif kind == "test":
				if parent[key] != op.get("value"):
					raise bad_request("the test operation failed")
			else:
				raise bad_request("unsupported JSON patch op %r" % kind)
		except (KeyError, IndexError, ValueError, TypeError):
			raise KubeError(422, "Invalid", "the server rejected our "
					"request due to an error in our request")
	return doc


class Handler(fake_common.Handler):
	server_version = "kube-fake/1"

	@property
	def fake(self):
		return self.server.fake

	def log_message(self, fmt, *args):
		if self.fake.verbose:
			sys.stderr.write("kube-fake: %s\n" % (fmt % args))

	# ---- answers

	def answer(self, code, doc, headers=None, text=None):
		if text is not None:
			body, ctype = text.encode(), "text/plain; charset=utf-8"
		else:
			body = json.dumps(doc).encode() + b"\n"
			ctype = "application/json"
		# Logged before it is sent: a client may ask for the log as
		# soon as it has the answer.
		if self.log_entry is not None:
			self.log_entry["status"] = code
		self.send_response(code)
		self.send_header("Content-Type", ctype)
		self.send_header("Audit-Id", str(uuid.uuid4()))
		self.send_header("Cache-Control", "no-cache, private")
		for k, v in (headers or {}).items():
			for one in (v if isinstance(v, list) else [v]):
				self.send_header(k, one)
		self.send_header("Content-Length", str(len(body)))
		self.end_headers()
		if self.command != "HEAD":
			self.wfile.write(body)

	def answer_error(self, err):
		self.answer(err.code, None if err.text else err.body(),
			    err.headers, err.text)

	def send_fault(self, fault):
		code = fault.status
		reason = {429: "TooManyRequests", 500: "InternalError",
			  503: "ServiceUnavailable", 504: "Timeout",
			  401: "Unauthorized", 403: "Forbidden",
			  409: "Conflict", 404: "NotFound"}.get(code, "Unknown")
		msg = fault.rule.get("message") or {
			429: "storage is (re)initializing",
			500: "Internal error occurred: injected fault"}.get(
				code, "injected fault: HTTP %d" % code)
		headers = {}
		details = None
		if fault.retry_after is not None:
			headers["Retry-After"] = str(fault.retry_after)
			details = {"retryAfterSeconds": int(fault.retry_after)}
		self.answer(code, status_doc(code, reason, msg, details), headers)

	def control(self):
		try:
			code, doc = self.fake.control(self)
			self.answer(code, doc)
		except KubeError as err:
			self.answer_error(err)

	def api_request(self):
		entry = {"method": self.command, "path": self.raw_path,
			 "query": dict(self.query), "body": None,
			 "headers": {k.lower(): v for k, v in self.headers.items()
				     if k.lower() in ("authorization",
						      "content-type", "accept")},
			 "status": None, "fault": None}
		try:
			entry["body"] = json.loads(self.body) if self.body else None
		except ValueError:
			entry["raw_body"] = self.body.decode("utf-8", "replace")
		self.with_faults(entry, self.serve_api)

	def serve_api(self):
		try:
			if self.raw_path.startswith("/v1/projects/"):
				return self.fake.container_api(self)
			self.check_token()
			return self.fake.api(self)
		except KubeError as err:
			self.answer_error(err)
		except (fake_common.Dropped, OSError):
			raise
		except Exception as err:
			traceback.print_exc()
			self.answer_error(KubeError(500, "InternalError",
						    "kube_fake.py: %r" % err))

	def check_token(self):
		want = self.fake.require_token
		# system:public-info-viewer: anyone may read these.
		if want is None or self.raw_path in ("/version", "/healthz",
						     "/livez", "/readyz"):
			return
		got = self.headers.get("Authorization", "")
		if got != "Bearer " + want:
			raise KubeError(401, "Unauthorized", "Unauthorized")

	# ---- streaming

	def start_chunks(self, ctype="application/json"):
		if self.log_entry is not None:
			self.log_entry["status"] = 200
		self.send_response(200)
		self.send_header("Content-Type", ctype)
		self.send_header("Transfer-Encoding", "chunked")
		self.send_header("Cache-Control", "no-cache, private")
		self.end_headers()

	def chunk(self, data):
		if data:
			self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
			self.wfile.flush()

	def end_chunks(self):
		self.wfile.write(b"0\r\n\r\n")
		self.wfile.flush()

# ---------------------------------------------------------------- the API


class Route:
	"""What a request path names."""

	def __init__(self, res, version, ns, name, sub):
		self.res, self.version, self.ns = res, version, ns
		self.name, self.sub = name, sub


class Fake:
	"""The server's state and behaviour, shared by both listeners."""

	def __init__(self, args, resources, state_dir):
		self.store = Store(resources, args.watch_history)
		self.verbose = args.verbose
		# Kueue's visibility API (an aggregated API server of its own)
		# comes with Kueue unless left out by name.
		self.visibility = "workloads.kueue.x-k8s.io" in \
			self.store.res and VISIBILITY not in args.without_group
		self.require_token = args.require_token
		self.state_dir = state_dir
		self.bookmark_interval = args.bookmark_interval
		self.clusters = args.cluster or None
		self.ca_pem = None
		self.api_port = 0
		self.user = "system:serviceaccount:default:slicectl-test"
		self.kubelet = Kubelet(self, args.pass_env)
		self.controllers = Controllers(self)
		st = self.store
		with st.lock:
			ns = st.resource("namespaces")
			for n in ("default", "kube-system", "kube-public"):
				st.add(ns, {"apiVersion": "v1", "kind": "Namespace",
					    "metadata": {"name": n},
					    "spec": {"finalizers": ["kubernetes"]},
					    "status": {"phase": "Active"}})

	# ---- routing

	def groups(self):
		"""{group: [versions]} in discovery order."""
		out = {}
		for r in self.store.resources:
			for v in r.versions:
				out.setdefault(r.group, [])
				if v not in out[r.group]:
					out[r.group].append(v)
		if self.visibility:
			out[VISIBILITY] = ["v1beta1"]
		return out

	def route(self, path):
		segs = [urllib.parse.unquote(s) for s in path.split("/")[1:]]
		if segs and segs[-1] == "":
			segs.pop()
		if segs[:2] == ["api", "v1"]:
			group, version, rest = "", "v1", segs[2:]
		elif segs[:1] == ["apis"] and len(segs) >= 3:
			group, version, rest = segs[1], segs[2], segs[3:]
		else:
			return None
		if group not in self.groups() or \
				version not in self.groups()[group]:
			return None
		ns = None
		if len(rest) >= 3 and rest[0] == "namespaces":
			ns, rest = rest[1], rest[2:]
		if not rest:
			return Route(None, version, ns, None, None) \
				if ns is None else None
		res = self.store.by_plural.get((group, rest[0]))
		if res is None or version not in res.versions:
			if ns is not None and group == "" and len(rest) == 1:
				# /api/v1/namespaces/NAME/status
				res = self.store.by_plural[("", "namespaces")]
				return Route(res, version, None, ns, rest[0])
			return None
		if res.namespaced != (ns is not None) and len(rest) > 1:
			return None
		return Route(res, version, ns, rest[1] if len(rest) > 1 else
			     None, rest[2] if len(rest) > 2 else None)

	def api(self, h):
		p = h.raw_path.rstrip("/") or "/"
		if p in ("/healthz", "/livez", "/readyz"):
			return h.answer(200, None, text="ok")
		if p == "/version":
			return h.answer(200, VERSION)
		if p == "/openapi/v3" or p.startswith("/openapi/v3/"):
			return self.openapi_v3(h, p[len("/openapi/v3"):].lstrip("/"))
		if p == "/api":
			return h.answer(200, {
				"kind": "APIVersions", "versions": ["v1"],
				"serverAddressByClientCIDRs": [{
					"clientCIDR": "0.0.0.0/0", "serverAddress":
					"127.0.0.1:%d" % self.api_port}]})
		if p == "/apis":
			return h.answer(200, {
				"kind": "APIGroupList", "apiVersion": "v1",
				"groups": [self.group_doc(g, v) for g, v in
					   self.groups().items() if g]})
		segs = p.split("/")
		if len(segs) == 3 and segs[1] == "apis" and \
				segs[2] in self.groups():
			return h.answer(200, dict(self.group_doc(
				segs[2], self.groups()[segs[2]]), kind="APIGroup",
						  apiVersion="v1"))
		if self.visibility and p.startswith("/apis/%s/v1beta1/" %
							 VISIBILITY):
			return self.pending_workloads(h, segs[4:])
		r = self.route(p)
		if r is None:
			raise page_not_found()
		if r.res is None:
			if h.command != "GET":
				raise KubeError(405, "MethodNotAllowed", "the server "
						"does not allow this method")
			group = "" if p.startswith("/api/") else segs[2]
			return h.answer(200, self.resource_list(group, r.version))
		self.authorize(h, r)
		return self.serve_resource(h, r)

	def openapi_v3(self, h, gv):
		"""Just enough OpenAPI v3 for clients to see that the server
		checks fields itself (fieldValidation on every PATCH), so that
		kubectl validates on the server instead of fetching /openapi/v2
		to do it: the index, and per group version its PATCH operations
		(no schemas: kubectl explain has nothing to show)."""
		groups = self.groups()
		names = ["api/v1"] + ["apis/%s/%s" % (g, v) for g, vs in
				      groups.items() if g for v in vs]
		if not gv:
			return h.answer(200, {"paths": {n: {
				"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (
					n, hashlib.sha256(n.encode()).hexdigest()[:16]
					.upper())} for n in names}})
		if gv not in names:
			raise page_not_found()
		group, version = ("", "v1") if gv == "api/v1" else \
			gv.split("/")[1:]
		paths = {}
		for r in self.store.resources:
			if r.group != group or version not in r.versions:
				continue
			base = "/%s/%s%s" % (gv, "namespaces/{namespace}/" if
					     r.namespaced else "", r.plural)
			paths[base + "/{name}"] = {"patch": {
				"operationId": "patch" + r.kind,
				"parameters": [{"name": n, "in": "query",
						"schema": {"type": "string",
							   "uniqueItems": True}}
					       for n in ("dryRun", "fieldManager",
							 "fieldValidation", "force")],
				"responses": {"200": {"description": "OK"}},
				"x-kubernetes-action": "patch",
				"x-kubernetes-group-version-kind": {
					"group": group, "version": version,
					"kind": r.kind}}}
		return h.answer(200, {"openapi": "3.0.0", "info": {
			"title": "Kubernetes", "version": VERSION["gitVersion"]},
			"paths": paths, "components": {"schemas": {}}})

	def group_doc(self, g, versions):
		vs = [{"groupVersion": "%s/%s" % (g, v), "version": v}
		      for v in versions]
		return {"name": g, "versions": vs, "preferredVersion": vs[0]}

	def resource_list(self, group, version):
		if group == VISIBILITY:
			return {"kind": "APIResourceList", "apiVersion": "v1",
				"groupVersion": VISIBILITY + "/v1beta1",
				"resources": [{
					"name": plural + sub, "singularName": "",
					"namespaced": plural == "localqueues",
					"kind": "PendingWorkloadsSummary" if sub else kind,
					"verbs": ["get"]} for plural, kind in (
						("clusterqueues", "ClusterQueue"),
						("localqueues", "LocalQueue"))
					for sub in ("", "/pendingworkloads")]}
		out = []
		for r in self.store.resources:
			if r.group == group and version in r.versions:
				out.extend(r.discovery())
		return {"kind": "APIResourceList", "apiVersion": "v1",
			"groupVersion": "%s/%s" % (group, version) if group else
			version, "resources": out}

	def authorize(self, h, r):
		verb = VERBS.get(h.command, h.command.lower())
		if h.command == "GET" and r.name is None:
			verb = "watch" if h.query.get("watch") in ("1", "true") \
				else "list"
		if h.command == "DELETE" and r.name is None:
			verb = "deletecollection"
		for rule in self.store.forbidden:
			if rule.get("verb", verb) != verb:
				continue
			if rule.get("resource", r.res.plural) != r.res.plural:
				continue
			if rule.get("namespace", r.ns) != r.ns:
				continue
			where = ' in the namespace "%s"' % r.ns if r.ns else \
				" at the cluster scope"
			what = r.res.plural + ("/" + r.sub if r.sub else "")
			raise KubeError(403, "Forbidden", '%s%s is forbidden: User '
					'"%s" cannot %s resource "%s" in API group '
					'"%s"%s' % (
						r.res.qualified, ' "%s"' % r.name
						if r.name else "", self.user, verb,
						what, r.res.group, where), {
							"name": r.name or "",
							"group": r.res.group,
							"kind": r.res.plural})

	# ---- resources

	def serve_resource(self, h, r):
		st = self.store
		m = h.command
		if r.ns is not None and not (r.res.plural == "namespaces"):
			with st.lock:
				ns = st.get(st.resource("namespaces"), "", r.ns)
				if ns is None and m != "GET":
					raise not_found(st.resource("namespaces"), r.ns)
				if ns is not None and m == "POST" and \
						ns["metadata"].get("deletionTimestamp"):
					raise KubeError(403, "Forbidden", '%s "%s" is '
							'forbidden: unable to create new '
							'content in namespace %s because it '
							'is being terminated' % (
								r.res.qualified, decode_json(
									h.body).get("metadata", {})
								.get("name", ""), r.ns))
		if r.name is None:
			if m == "GET":
				if h.query.get("watch") in ("1", "true"):
					return self.watch(h, r)
				return h.answer(200, self.tabled(h, r, self.list(h, r)))
			if m == "POST":
				return self.create(h, r)
			if m == "DELETE":
				return self.delete_collection(h, r)
		elif r.sub is None:
			if m == "GET":
				return h.answer(200, self.tabled(
					h, r, self.served(r, self.find(r))))
			if m == "PUT":
				return self.replace(h, r)
			if m == "PATCH":
				return self.patch(h, r)
			if m == "DELETE":
				return self.delete(h, r)
		elif r.sub == "status" and r.res.status:
			if m == "GET":
				return h.answer(200, self.served(r, self.find(r)))
			if m == "PUT":
				return self.replace(h, r, status=True)
			if m == "PATCH":
				return self.patch(h, r, status=True)
		elif r.sub == "log" and r.res.plural == "pods" and m == "GET":
			return self.kubelet.serve_log(h, r)
		elif r.sub == "eviction" and r.res.plural == "pods" and \
				m == "POST":
			return self.evict_api(h, r)
		raise KubeError(405, "MethodNotAllowed", "the server does not "
				"allow this method on the requested resource")

	def find(self, r):
		st = self.store
		with st.lock:
			obj = st.get(r.res, r.ns, r.name)
			if obj is None:
				raise not_found(r.res, r.name)
			return copy.deepcopy(obj)

	def served(self, r, obj):
		obj = public(obj)
		if r.version != r.res.versions[0]:
			obj = convert(copy.deepcopy(obj), r.res.kind, r.version)
		if r.res.versions != ["v1"] or r.res.group:
			obj["apiVersion"] = r.res.api_version(r.version)
		obj.setdefault("kind", r.res.kind)
		return obj

	def stored(self, r, obj):
		"""obj as kept: in the storage version."""
		if r.version == r.res.versions[0]:
			return obj
		obj = convert(obj, r.res.kind, r.res.versions[0])
		obj["apiVersion"] = r.res.api_version(r.res.versions[0])
		return obj

	def list(self, h, r):
		st = self.store
		sel = Selector(h.query.get("labelSelector"))
		fsel = field_selector(h.query.get("fieldSelector"))
		with st.lock:
			items = [self.served(r, copy.deepcopy(o))
				 for o in st.items(r.res, r.ns)
				 if sel.matches(o["metadata"].get("labels")) and
				 fsel(o)]
			rv = str(st.rv)
		if r.res.builtin:
			for o in items:
				o.pop("apiVersion", None)
				o.pop("kind", None)
		return {"apiVersion": r.res.api_version(r.version),
			"kind": r.res.kind + "List",
			"metadata": {"resourceVersion": rv}, "items": items}

	def tabled(self, h, r, doc):
		"""doc (an object or a list) as a meta.k8s.io/v1 Table when the
		client asks for one (kubectl get does), else doc."""
		accept = h.headers.get("Accept", "")
		if "as=Table" not in accept or "g=meta.k8s.io" not in accept:
			return doc
		items = doc["items"] if "items" in doc else [doc]
		cols = table_columns(r.res, r.version)
		include = h.query.get("includeObject", "Metadata")
		rows = []
		for o in items:
			row = {"cells": [c[1](o) for c in cols]}
			if include == "Object":
				row["object"] = o
			elif include != "None":
				row["object"] = {
					"kind": "PartialObjectMetadata",
					"apiVersion": "meta.k8s.io/v1",
					"metadata": o["metadata"]}
			rows.append(row)
		return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
			"metadata": {"resourceVersion": doc.get("metadata", {}).get(
				"resourceVersion", "")},
			"columnDefinitions": [c[0] for c in cols], "rows": rows}

	def body_object(self, h, r, name=None):
		obj = decode_json(h.body)
		kind, av = obj.get("kind"), obj.get("apiVersion")
		if not kind or not av:
			raise bad_request("Object 'Kind' is missing in '%s'" %
					  h.body.decode("utf-8", "replace")[:200]
					  if not kind else "Object 'apiVersion' is "
					  "missing in '%s'" % h.body.decode(
						  "utf-8", "replace")[:200])
		want = r.res.api_version(r.version)
		if kind != r.res.kind or av != want:
			raise bad_request("the API version in the data (%s) does not "
					  "match the expected API version (%s)" %
					  (av, want) if av != want else
					  "%s in version \"%s\" cannot be handled as "
					  "a %s: no kind \"%s\" is registered" % (
						  r.res.kind, r.version, r.res.kind,
						  kind))
		m = obj.setdefault("metadata", {})
		if not isinstance(m, dict):
			raise bad_request("metadata must be an object")
		if r.ns is not None:
			if m.get("namespace") not in (None, "", r.ns):
				raise bad_request("the namespace of the provided "
						  "object does not match the namespace "
						  "sent on the request")
			m["namespace"] = r.ns
		if name is not None and m.get("name") not in (None, name):
			raise bad_request("the name of the object (%s) does not "
					  "match the name on the URL (%s)" %
					  (m.get("name"), name))
		return obj

	def validate(self, h, r, obj, name):
		"""The object as it would be stored, and the warnings; raises
		the API server's errors for it."""
		mode = h.query.get("fieldValidation", "Warn")
		if mode not in ("Ignore", "Warn", "Strict"):
			raise bad_request('fieldValidation must be one of "Ignore", '
					  '"Warn" or "Strict", got "%s"' % mode)
		warnings = []
		if r.res.builtin:
			return obj, warnings
		chk = SchemaCheck()
		out = chk.run(r.res.schemas[r.version], obj)
		if chk.unknown:
			texts = ['unknown field "%s"' % u for u in chk.unknown]
			if mode == "Strict":
				raise bad_request('%s in version "%s" cannot be handled '
						  'as a %s: strict decoding error: %s' % (
							  r.res.kind, r.version,
							  r.res.kind, ", ".join(texts)))
			if mode == "Warn":
				warnings = texts
		errs = chk.errs
		check_meta(errs, out.get("metadata") or {})
		if errs.items:
			raise errs.error((r.res.kind, r.res.group), name or
					 out["metadata"].get("name") or "")
		denial = Webhooks.validate(r.res, out)
		if denial:
			raise denied("vjobset.kb.io", denial)
		return out, warnings

	@staticmethod
	def warning_headers(warnings):
		if not warnings:
			return {}
		return {"Warning": ['299 - "%s"' % w.replace('"', '\\"')
				    for w in warnings]}

	def create(self, h, r):
		st = self.store
		obj = self.body_object(h, r)
		m = obj["metadata"]
		if not m.get("name") and m.get("generateName"):
			m["name"] = m["generateName"] + random_suffix()
		Webhooks.default(r.res, obj, "workloads.kueue.x-k8s.io" in
				 self.store.res)
		obj, warnings = self.validate(h, r, obj, m.get("name"))
		obj = self.stored(r, obj)
		for k in ("uid", "resourceVersion", "creationTimestamp",
			  "deletionTimestamp", "generation"):
			obj["metadata"].pop(k, None)
		if r.res.status and r.res.plural not in ("namespaces",):
			obj.pop("status", None)
		if h.query.get("dryRun") == "All":
			obj["metadata"]["uid"] = str(uuid.uuid4())
			obj["metadata"]["creationTimestamp"] = now_text()
			return h.answer(201, self.served(r, obj),
					self.warning_headers(warnings))
		with st.lock:
			if st.get(r.res, r.ns, obj["metadata"]["name"]) is not None:
				raise already_exists(r.res, obj["metadata"]["name"])
			obj.setdefault("apiVersion", r.res.api_version(r.version))
			obj.setdefault("kind", r.res.kind)
			st.add(r.res, obj)
			out = self.served(r, copy.deepcopy(obj))
		return h.answer(201, out, self.warning_headers(warnings))

	def replace(self, h, r, status=False, obj=None):
		st = self.store
		if obj is None:
			obj = self.body_object(h, r, r.name)
		obj, warnings = self.validate(h, r, obj, r.name)
		obj = self.stored(r, obj)
		with st.lock:
			cur = st.get(r.res, r.ns, r.name)
			if cur is None:
				raise not_found(r.res, r.name)
			want = obj["metadata"].get("resourceVersion")
			if want and want != cur["metadata"]["resourceVersion"]:
				raise conflict(r.res, r.name)
			new = copy.deepcopy(cur)
			if status:
				if "status" in obj:
					new["status"] = obj["status"]
				else:
					new.pop("status", None)
			else:
				keep = {k: cur["metadata"][k] for k in (
					"uid", "creationTimestamp", "generation",
					"deletionTimestamp", "deletionGracePeriodSeconds")
					if k in cur["metadata"]}
				for k, v in obj.items():
					if k != "status" or not r.res.status:
						new[k] = v
				for k in list(new):
					if k not in obj and not k.startswith("_") and \
							(k != "status" or not r.res.status):
						del new[k]
				new["metadata"].update(keep)
			if h.query.get("dryRun") == "All":
				return h.answer(200, self.served(r, new))
			changed = not status and public(new).get("spec") != \
				cur.get("spec")
			# The object is replaced in place so that controllers
			# holding it see the change.
			cur.clear()
			cur.update(new)
			st.put(r.res, cur, changed)
			out = self.served(r, copy.deepcopy(cur))
		return h.answer(200, out, self.warning_headers(warnings))

	def patch(self, h, r, status=False):
		ctype = h.headers.get("Content-Type", "").split(";")[0].strip()
		try:
			patch = json.loads(h.body or b"null")
		except ValueError as err:
			raise bad_request("error decoding patch: %s" % err)
		cur = self.served(r, self.find(r))
		if ctype == "application/json-patch+json":
			if not isinstance(patch, list):
				raise bad_request("json patch must be a list")
			new = json_patch(cur, patch)
		elif ctype in ("application/merge-patch+json",
			       "application/strategic-merge-patch+json"):
			new = merge_patch(cur, patch)
		elif ctype == "application/apply-patch+yaml":
			raise KubeError(415, "UnsupportedMediaType", "the fake "
					"does not serve server-side apply")
		else:
			raise KubeError(415, "UnsupportedMediaType", "the body of "
					"the request was in an unknown format - "
					"accepted media types include: application/"
					"json-patch+json, application/merge-patch+"
					"json, application/apply-patch+yaml")
		if not (isinstance(patch, dict) and "resourceVersion" in
			(patch.get("metadata") or {})):
			new["metadata"].pop("resourceVersion", None)
		return self.replace(h, r, status, new)

	def delete_options(self, h):
		opts = decode_json(h.body) if h.body.strip() else {}
		prop = h.query.get("propagationPolicy") or \
			opts.get("propagationPolicy")
		if prop is None and opts.get("orphanDependents") is not None:
			prop = "Orphan" if opts["orphanDependents"] else "Background"
		if prop not in (None, "Foreground", "Background", "Orphan"):
			raise KubeError(422, "Invalid", "DeleteOptions.meta.k8s.io "
					'"" is invalid: propagationPolicy: Unsupported '
					'value: "%s": supported values: "Foreground", '
					'"Background", "Orphan", "nil"' % prop)
		grace = h.query.get("gracePeriodSeconds",
				    opts.get("gracePeriodSeconds"))
		pre = opts.get("preconditions") or {}
		return prop, None if grace is None else int(grace), pre

	def delete(self, h, r):
		st = self.store
		prop, grace, pre = self.delete_options(h)
		dry = h.query.get("dryRun") == "All"
		with st.lock:
			obj = st.get(r.res, r.ns, r.name)
			if obj is None:
				raise not_found(r.res, r.name)
			if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
				raise conflict(r.res, r.name, "Precondition failed: UID "
					       "in precondition: %s, UID in object meta: "
					       "%s" % (pre["uid"], obj["metadata"]["uid"]))
			if pre.get("resourceVersion") and pre["resourceVersion"] != \
					obj["metadata"]["resourceVersion"]:
				raise conflict(r.res, r.name)
			if dry:
				return h.answer(200, self.served(r, copy.deepcopy(obj)))
			st.delete(r.res, obj, prop, grace)
			gone = st.get(r.res, r.ns, r.name) is not obj
			out = self.served(r, copy.deepcopy(obj))
			self.kubelet.wake()
		if gone and r.res.builtin and r.res.plural != "pods":
			return h.answer(200, {
				"kind": "Status", "apiVersion": "v1", "metadata": {},
				"status": "Success", "details": {
					"name": r.name, "group": r.res.group,
					"kind": r.res.plural,
					"uid": obj["metadata"]["uid"]}})
		return h.answer(200, out)

	def delete_collection(self, h, r):
		st = self.store
		prop, grace, _ = self.delete_options(h)
		sel = Selector(h.query.get("labelSelector"))
		with st.lock:
			victims = [o for o in st.items(r.res, r.ns)
				   if sel.matches(o["metadata"].get("labels"))]
			out = [self.served(r, copy.deepcopy(o)) for o in victims]
			for o in victims:
				st.delete(r.res, o, prop, grace)
		return h.answer(200, {"apiVersion": r.res.api_version(r.version),
				      "kind": r.res.kind + "List",
				      "metadata": {"resourceVersion": str(st.rv)},
				      "items": out})

	def evict_api(self, h, r):
		decode_json(h.body)
		with self.store.lock:
			if self.store.get(r.res, r.ns, r.name) is None:
				raise not_found(r.res, r.name)
			self.evict(r.ns, r.name, None)
		return h.answer(201, {"kind": "Status", "apiVersion": "v1",
				      "metadata": {}, "status": "Success",
				      "code": 201})

	def evict(self, ns, name, grace):
		st = self.store
		pods = st.resource("pods")
		pod = st.get(pods, ns, name)
		if pod is None:
			raise not_found(pods, name)
		set_condition(pod.setdefault("status", {}), "DisruptionTarget",
			      "True", "EvictionByEvictionAPI",
			      "Eviction API: evicting")
		st.put(pods, pod)
		st.delete(pods, pod, None, grace)
		self.kubelet.wake()
		return pod

	def controllers_event(self, pod, etype, reason, message):
		with self.store.lock:
			self.controllers.event(pod, self.store.resource("pods"),
					       etype, reason, message)

	def pending_workloads(self, h, segs):
		"""Kueue's visibility API: a queue's pending workloads with
		their positions, in the order admission tries them."""
		if h.command != "GET":
			raise KubeError(405, "MethodNotAllowed", "the server does "
					"not allow this method on the requested "
					"resource")
		st = self.store
		ctl = self.controllers
		with st.lock:
			if len(segs) == 3 and segs[0] == "clusterqueues" and \
					segs[2] == "pendingworkloads":
				res, ns, name = ctl.r("clusterqueues.kueue.x-k8s.io"), \
					"", segs[1]
			elif len(segs) == 5 and segs[0] == "namespaces" and \
					segs[2] == "localqueues" and \
					segs[4] == "pendingworkloads":
				res, ns, name = ctl.r("localqueues.kueue.x-k8s.io"), \
					segs[1], segs[3]
			else:
				raise page_not_found()
			if st.get(res, ns, name) is None:
				raise not_found(res, name)
			by_cq, items = {}, []
			for wl in ctl.pending():
				cq, _ = ctl.cluster_queue(wl)
				if cq is None:
					continue
				cqn = cq["metadata"]["name"]
				lq = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
				pos = by_cq.setdefault(cqn, {"cq": 0})
				entry = {"metadata": {
					k: wl["metadata"][k] for k in (
						"name", "namespace", "creationTimestamp",
						"ownerReferences") if k in wl["metadata"]},
					"priority": wl["spec"].get("priority", 0),
					"localQueueName": lq[1],
					"positionInClusterQueue": pos["cq"],
					"positionInLocalQueue": pos.get(lq, 0)}
				pos["cq"] += 1
				pos[lq] = pos.get(lq, 0) + 1
				if (ns == "" and cqn == name) or (ns, name) == lq:
					items.append(entry)
		offset = int(h.query.get("offset") or 0)
		limit = int(h.query.get("limit") or 1000)
		return h.answer(200, {
			"kind": "PendingWorkloadsSummary",
			"apiVersion": VISIBILITY + "/v1beta1",
			"metadata": {"creationTimestamp": None},
			"items": items[offset:offset + limit]})

	# ---- watch

	def watch(self, h, r):
		st = self.store
		sel = Selector(h.query.get("labelSelector"))
		fsel = field_selector(h.query.get("fieldSelector"))
		bookmarks = h.query.get("allowWatchBookmarks") in ("1", "true")
		limit = float(h.query.get("timeoutSeconds") or 1800)
		deadline = time.monotonic() + limit
		rv_text = h.query.get("resourceVersion", "")

		def matches(o):
			return (r.ns is None or o["metadata"].get("namespace") ==
				r.ns) and sel.matches(o["metadata"].get("labels")) \
				and fsel(o)

		def line(etype, obj):
			if etype != "ERROR" and etype != "BOOKMARK":
				obj = self.tabled(h, r, self.served(r, obj))
			return json.dumps({"type": etype, "object": obj}).encode() + \
				b"\n"
		out = []
		with st.lock:
			if rv_text in ("", "0"):
				last = st.rv
				seen = set()
				for o in st.items(r.res, r.ns):
					if matches(o):
						seen.add(o["metadata"]["uid"])
						out.append(line("ADDED", copy.deepcopy(o)))
			else:
				try:
					last = int(rv_text)
				except ValueError:
					raise bad_request("invalid resource version: %s"
							  % rv_text)
				seen = {o["metadata"]["uid"] for o in
					st.items(r.res, r.ns) if matches(o)}
			# Where in the history this watch reads next.
			pos = st.base + bisect.bisect_right(st.history, last,
							    key=lambda e: e[0])
			gone = last < st.oldest - 1
		h.start_chunks()
		for x in out:
			h.chunk(x)
		last_sent = time.monotonic()
		while True:
			batch = []
			with st.lock:
				# Behind the kept history: changes were lost.
				gone = gone or pos < st.base
				new = [] if gone else st.history[pos - st.base:]
				pos = st.base + len(st.history)
				batch = [(rv, etype, obj) for rv, etype, q, obj in new
					 if q == r.res.qualified and rv > last]
				if not new and not gone:
					left = deadline - time.monotonic()
					st.cond.wait(max(0.01, min(
						left, self.bookmark_interval)))
			if gone:
				h.chunk(line("ERROR", status_doc(
					410, "Expired", "too old resource version: %d "
					"(%d)" % (last, st.oldest))))
				break
			for rv, etype, obj in batch:
				last = rv
				uid = obj["metadata"]["uid"]
				now_in = etype != "DELETED" and matches(obj)
				was_in = uid in seen
				if etype == "DELETED":
					if was_in or matches(obj):
						seen.discard(uid)
						h.chunk(line("DELETED", obj))
					continue
				if now_in and not was_in:
					seen.add(uid)
					h.chunk(line("ADDED", obj))
				elif now_in:
					h.chunk(line(etype, obj))
				elif was_in:
					seen.discard(uid)
					h.chunk(line("DELETED", obj))
				last_sent = time.monotonic()
			if time.monotonic() >= deadline:
				break
			if bookmarks and time.monotonic() - last_sent >= \
					self.bookmark_interval:
				h.chunk(line("BOOKMARK", {
					"kind": r.res.kind, "apiVersion":
					r.res.api_version(r.version), "metadata": {
						"resourceVersion": str(st.rv)}}))
				last_sent = time.monotonic()
		h.end_chunks()
		h.close_connection = True

	# ---- GKE's container API

	def container_api(self, h):
		m = re.fullmatch(r"/v1/projects/([^/]+)/locations/([^/]+)/"
				 r"clusters/([^/:]+)", h.raw_path)
		if not m or h.command != "GET":
			return h.answer(404, {"error": {
				"code": 404, "message": "Method not found.",
				"status": "NOT_FOUND"}})
		want = self.require_token
		got = h.headers.get("Authorization", "")
		if not got.startswith("Bearer ") or (want is not None and
						     got != "Bearer " + want):
			return h.answer(401, {"error": {
				"code": 401, "message": "Request had invalid "
				"authentication credentials. Expected OAuth 2 "
				"access token, login cookie or other valid "
				"authentication credential.", "status":
				"UNAUTHENTICATED"}}, {"WWW-Authenticate":
						      'Bearer realm="https://'
						      'accounts.google.com/"'})
		p, loc, c = m.groups()
		if self.clusters is not None and "%s/%s/%s" % (p, loc, c) \
				not in self.clusters:
			return h.answer(404, {"error": {
				"code": 404, "message": "Not found: projects/%s/"
				"locations/%s/clusters/%s." % (p, loc, c),
				"status": "NOT_FOUND"}})
		doc = {"name": c, "location": loc,
		       "selfLink": "https://container.googleapis.com/v1/projects/"
		       "%s/locations/%s/clusters/%s" % (p, loc, c),
		       "endpoint": "127.0.0.1:%d" % self.api_port,
		       "status": "RUNNING", "currentMasterVersion":
		       VERSION["gitVersion"][1:], "masterAuth": {},
		       "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {
			       "endpoint": "gke-fake.%s.%s.gke.goog" % (c, loc),
			       "allowExternalTraffic": False}}}
		if self.ca_pem:
			doc["masterAuth"]["clusterCaCertificate"] = \
				base64.b64encode(self.ca_pem.encode()).decode()
		return h.answer(200, doc)

	# ---- /_fake/

	def control(self, h):
		st = self.store
		p, m = h.raw_path, h.command
		if (p, m) == ("/_fake/evict", "POST"):
			doc = decode_json(h.body)
			with st.lock:
				pod = self.evict(doc.get("namespace", "default"),
						 doc.get("name", ""), doc.get("grace"))
				return 200, public(copy.deepcopy(pod))
		if (p, m) == ("/_fake/lose-node", "POST"):
			doc = decode_json(h.body)
			with st.lock:
				return 200, {"pods": self.kubelet.lose_node(doc)}
		if p == "/_fake/forbid":
			if m == "POST":
				doc = json.loads(h.body or b"[]")
				with st.lock:
					st.forbidden.extend([doc] if isinstance(
						doc, dict) else doc)
				return 200, {"rules": len(st.forbidden)}
			if m == "DELETE":
				st.forbidden = []
				return 200, {"rules": 0}
		if p == "/_fake/faults":
			if m == "POST":
				rules = decode_json(b'{"r": %s}' % (h.body or b"[]"))[
					"r"]
				try:
					faults = [fake_common.Fault(x) for x in (
						[rules] if isinstance(rules, dict)
						else rules)]
				except (ValueError, TypeError, re.error) as err:
					raise bad_request("bad fault rules: %s" % err)
				for f in faults:
					if (f.status is not None) + f.reset > 1 or not (
							f.status is not None or f.reset or
							f.stall):
						raise bad_request("a rule has one of status, "
								  "reset, stall")
				with st.lock:
					st.faults.extend(faults)
				return 200, {"rules": len(st.faults)}
			if m == "DELETE":
				st.faults = []
				return 200, {"rules": 0}
			if m == "GET":
				return 200, [dict(f.rule, count=f.times)
					     for f in st.faults]
		if (p, m) == ("/_fake/compact", "POST"):
			with st.lock:
				st.compact()
				return 200, {"oldest": st.oldest}
		if (p, m) == ("/_fake/requests", "GET"):
			with st.lock:
				return 200, copy.deepcopy(st.requests)
		if (p, m) == ("/_fake/requests", "DELETE"):
			st.requests = []
			return 200, {}
		if (p, m) == ("/_fake/processes", "GET"):
			return 200, self.kubelet.processes()
		if (p, m) == ("/_fake/state", "GET"):
			with st.lock:
				return 200, {q: [public(copy.deepcopy(o))
						 for o in objs.values()]
					     for q, objs in st.objects.items()}
		raise KubeError(404, "NotFound", "no control endpoint %s %s" %
				(m, p))


def human_age(stamp):
	"""apimachinery's HumanDuration of the time since stamp."""
	try:
		s = int(seconds_since(stamp))
	except (TypeError, ValueError):
		return "<unknown>"
	if s < 0:
		return "<invalid>"
	if s < 120:
		return "%ds" % s
	m = s // 60
	if m < 10:
		return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
	if m < 180:
		return "%dm" % m
	h = m // 60
	if h < 8:
		return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
	if h < 48:
		return "%dh" % h
	return "%dd" % (h // 24) if h < 24 * 365 * 2 else "%dy" % (h // 8760)




def json_path(obj, path):
	"""The values a printer column's JSONPath (.a.b, [?(@.k=="v")],
	[N]) selects in obj."""
	cur = [obj]
	for part in re.findall(r"\.([^.\[]+)|\[\?\(@\.(\w+)==[\"']([^\"']*)"
			       r"[\"']\)\]|\[(\d+)\]", path):
		key, fkey, fval, idx = part
		nxt = []
		for c in cur:
			if key and isinstance(c, dict) and key in c:
				nxt.append(c[key])
			elif fkey and isinstance(c, list):
				nxt += [x for x in c if isinstance(x, dict) and
					str(x.get(fkey)) == fval]
			elif idx and isinstance(c, list) and int(idx) < len(c):
				nxt.append(c[int(idx)])
		cur = nxt
	return cur


NAME_COLUMN = {"name": "Name", "type": "string", "format": "name",
	       "description": "Name must be unique within a namespace.",
	       "priority": 0}


def column(name, fn, ctype="string", priority=0):
	return ({"name": name, "type": ctype, "format": "", "description": "",
		 "priority": priority}, fn)


def pod_status_text(o):
	"""kubectl's STATUS of a pod."""
	s = o.get("status") or {}
	if o["metadata"].get("deletionTimestamp"):
		return "Terminating"
	inits = s.get("initContainerStatuses") or []
	done = sum(1 for c in inits if (c["state"].get("terminated") or {})
		   .get("exitCode") == 0)
	if inits and done < len(inits) and s.get("phase") == "Pending":
		return "Init:%d/%d" % (done, len(inits))
	for c in s.get("containerStatuses") or []:
		st = c.get("state") or {}
		if "terminated" in st and s.get("phase") != "Running":
			return st["terminated"].get("reason") or "Error"
		if "waiting" in st and s.get("phase") == "Pending":
			return st["waiting"].get("reason") or "Pending"
	return s.get("phase") or "Pending"


def table_columns(res, version):
	"""[(columnDefinition, cell(obj))] as the API server prints res."""
	age = column("Age", lambda o: human_age(o["metadata"].get(
		"creationTimestamp")))
	name = (NAME_COLUMN, lambda o: o["metadata"]["name"])
	if not res.builtin:
		cols = [name]
		printer = res.printer.get(version) or []
		for c in printer:
			def cell(o, c=c):
				vals = json_path(o, c["jsonPath"])
				if not vals:
					return None
				v = vals[0]
				if c["type"] == "date":
					return human_age(v)
				if c["type"] == "string" and not isinstance(v, str):
					return go_quote(v) if not isinstance(v, (
						dict, list)) else json.dumps(v)
				return v
			cols.append(({"name": c["name"], "type": c["type"],
				      "format": c.get("format", ""),
				      "description": c.get("description", ""),
				      "priority": c.get("priority", 0)}, cell))
		return cols if printer else cols + [age]
	if res.plural == "pods":
		def ready(o):
			cs = (o.get("status") or {}).get("containerStatuses") or []
			return "%d/%d" % (sum(1 for c in cs if c.get("ready")),
					  len(o["spec"].get("containers") or []))
		return [name, column("Ready", ready),
			column("Status", pod_status_text),
			column("Restarts", lambda o: sum(
				c.get("restartCount", 0) for c in (o.get(
					"status") or {}).get("containerStatuses") or []),
				"integer"), age,
			column("IP", lambda o: (o.get("status") or {}).get(
				"podIP", "<none>"), priority=1),
			column("Node", lambda o: o["spec"].get("nodeName",
							       "<none>"),
			       priority=1)]
	if res.plural == "jobs":
		def status(o):
			for t in ("Complete", "Failed", "Suspended"):
				if condition(o, t):
					return t
			return "Running"
		return [name, column("Status", status), column(
			"Completions", lambda o: "%d/%d" % (
				(o.get("status") or {}).get("succeeded", 0),
				o["spec"].get("completions") or 1)), age]
	if res.plural == "events":
		return [column("Last Seen", lambda o: human_age(
			o.get("lastTimestamp"))), column("Type", lambda o: o.get(
				"type", "")), column("Reason", lambda o: o.get(
					"reason", "")),
			column("Object", lambda o: "%s/%s" % (
				o["involvedObject"].get("kind", "").lower(),
				o["involvedObject"].get("name", ""))),
			column("Message", lambda o: o.get("message", "")), name]
	if res.plural in ("namespaces", "nodes"):
		def state(o):
			if res.plural == "namespaces":
				return (o.get("status") or {}).get("phase", "Active")
			return "Ready" if condition(o, "Ready") else "NotReady"
		return [name, column("Status", state), age]
	return [name, age]


def rename(doc, old, new):
	if isinstance(doc, dict) and old in doc:
		doc[new] = doc.pop(old)


PRIORITY_SOURCES = {"kueue.x-k8s.io": "kueue.x-k8s.io/workloadpriorityclass",
		    "scheduling.k8s.io": "scheduling.k8s.io/priorityclass"}


def convert(obj, kind, to):
	"""Kueue's conversion between v1beta1 and v1beta2 (the storage
	version), for the fields whose names differ; changes obj."""
	spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
	status = obj.get("status") if isinstance(obj.get("status"),
						 dict) else {}
	up = to == "v1beta2"
	if kind == "Workload":
		if up and spec.get("priorityClassName"):
			src = spec.pop("priorityClassSource", "")
			group = "kueue.x-k8s.io" if src == PRIORITY_SOURCES[
				"kueue.x-k8s.io"] else "scheduling.k8s.io"
			spec["priorityClassRef"] = {
				"group": group, "kind": "WorkloadPriorityClass" if
				group == "kueue.x-k8s.io" else "PriorityClass",
				"name": spec.pop("priorityClassName")}
		elif not up and spec.get("priorityClassRef"):
			ref = spec.pop("priorityClassRef")
			spec["priorityClassName"] = ref.get("name")
			spec["priorityClassSource"] = PRIORITY_SOURCES.get(
				ref.get("group"), "")
		spec.pop("priorityClassSource" if up else "preemptionGates", None)
		# v1beta1's field name has a typo; v1beta2 fixed it.
		names = ("accumulatedPastExexcutionTimeSeconds",
			 "accumulatedPastExecutionTimeSeconds")
		rename(status, *(names if up else names[::-1]))
	elif kind == "ClusterQueue":
		rename(spec, *(("cohort", "cohortName") if up else
			       ("cohortName", "cohort")))
		if up and spec.get("admissionChecks"):
			spec.setdefault("admissionChecksStrategy", {
				"admissionChecks": [{"name": n} for n in
						    spec["admissionChecks"]]})
		if up:
			spec.pop("admissionChecks", None)
	elif kind == "LocalQueue":
		rename(status, *(("flavorUsage", "flavorsUsage") if up else
				 ("flavorsUsage", "flavorUsage")))
	return obj

# ---------------------------------------------------------------- serving


def make_certificates(directory):
	"""A CA and a server certificate for 127.0.0.1 signed by it, made
	with the openssl CLI; returns (ca.pem, server.pem, server.key)."""
	p = {n: os.path.join(directory, n) for n in (
		"ca.pem", "ca.key", "server.pem", "server.key", "server.csr",
		"ext.cnf")}
	with open(p["ext.cnf"], "w") as f:
		f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,"
			"DNS:kubernetes.default.svc\nbasicConstraints=CA:FALSE\n"
			"keyUsage=critical,digitalSignature,keyEncipherment\n"
			"extendedKeyUsage=serverAuth\n")
	key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
	       "-nodes"]
	for cmd in (
		["openssl", "req", "-x509"] + key + [
			"-keyout", p["ca.key"], "-out", p["ca.pem"], "-days", "7",
			"-subj", "/CN=kube-fake-ca", "-addext",
			"basicConstraints=critical,CA:TRUE", "-addext",
			"keyUsage=critical,keyCertSign,cRLSign"],
		["openssl", "req"] + key + [
			"-keyout", p["server.key"], "-out", p["server.csr"],
			"-subj", "/CN=kube-apiserver"],
		["openssl", "x509", "-req", "-in", p["server.csr"], "-CA",
		 p["ca.pem"], "-CAkey", p["ca.key"], "-CAcreateserial", "-out",
		 p["server.pem"], "-days", "7", "-extfile", p["ext.cnf"]]):
		subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
			       stderr=subprocess.DEVNULL)
	return p["ca.pem"], p["server.pem"], p["server.key"]


class TLSServer(fake_common.Server):
	"""HTTPS, the handshake done in the connection's own thread."""

	def finish_request(self, request, client_address):
		request = self.tls.wrap_socket(request, server_side=True)
		self.RequestHandlerClass(request, client_address, self)


def listen(args, state, fake):
	"""The API's server (HTTPS with --tls, its CA made here) and the
	plain HTTP one."""
	servers = []
	if args.tls:
		ca, cert, key = make_certificates(state)
		with open(ca) as f:
			fake.ca_pem = f.read()
		api = TLSServer(("127.0.0.1", args.port), Handler)
		api.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
		api.tls.load_cert_chain(cert, key)
		servers.append(api)
	else:
		servers.append(fake_common.Server(("127.0.0.1", args.port), Handler))
	servers.append(fake_common.Server(("127.0.0.1", 0), Handler))
	return servers


def main():
	ap = argparse.ArgumentParser(description="Fake Kubernetes API server "
				     "(JobSet, Kueue, pods as processes) for "
				     "tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--port", type=int, default=0)
	ap.add_argument("--crds", default=default_crds())
	ap.add_argument("--state-dir")
	ap.add_argument("--tls", action="store_true")
	ap.add_argument("--require-token")
	ap.add_argument("--without-group", action="append", default=[])
	ap.add_argument("--cluster", action="append",
			help="PROJECT/LOCATION/NAME the container API knows "
			"(default: any)")
	ap.add_argument("--pass-env", action="append", default=[])
	ap.add_argument("--watch-history", type=int, default=10000)
	ap.add_argument("--bookmark-interval", type=float, default=5.0)
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	resources = [r for r in BUILTIN if r.group not in args.without_group]
	resources += load_crds(args.crds, args.without_group)
	temp = None
	state = args.state_dir
	if not state:
		temp = tempfile.mkdtemp(prefix="kube-fake-")
		state = temp
	os.makedirs(state, exist_ok=True)
	fake = Fake(args, resources, state)

	try:
		servers = listen(args, state, fake)
	except BaseException:
		if temp:
			shutil.rmtree(temp, ignore_errors=True)
		raise
	for s in servers:
		s.fake = fake
		s.store = fake.store
	fake.api_port = servers[0].server_address[1]

	def stop(signum, frame):
		# Every container's process tree dies with the fake.
		fake.kubelet.kill_all()
		if temp:
			shutil.rmtree(temp, ignore_errors=True)
		sys.stderr.flush()
		os._exit(0)
	for sig in (signal.SIGTERM, signal.SIGINT):
		signal.signal(sig, stop)
	threading.Thread(target=fake.controllers.run, daemon=True).start()
	for s in servers:
		threading.Thread(target=s.serve_forever, args=(0.2,),
				 daemon=True).start()
	with open(args.port_file + ".tmp", "w") as f:
		f.write("".join("%d\n" % s.server_address[1] for s in servers))
	os.replace(args.port_file + ".tmp", args.port_file)
	if args.verbose:
		sys.stderr.write("kube-fake: API on %s://127.0.0.1:%d, plain "
				 "HTTP on %d\n" % ("https" if args.tls else "http",
						   servers[0].server_address[1],
						   servers[1].server_address[1]))
	while True:
		signal.pause()


if __name__ == "__main__":
	main()
