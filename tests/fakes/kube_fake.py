#!/usr/bin/env python3
"""A fake Kubernetes API server for slicectl's GKE tests: JobSet and Kueue
as their CRDs define them, the controllers that give them life, and a
kubelet that runs each pod as a local process tree.

The API, as kube-apiserver serves it to kubectl and @kubernetes/client-node:
- discovery: /version, /api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION
  (plain APIGroupList/APIResourceList; aggregated discovery is not offered,
  clients fall back as they do for an old server); no /openapi (use
  kubectl --validate=false);
- resources: namespaces, pods (+ /log, /eviction, /status), events, nodes
  (made as pods are bound), priorityclasses (scheduling.k8s.io/v1), jobs
  (batch/v1), and every CRD
  in the CRD directory (default ../shared/k8s from the repository root:
  JobSet jobset.x-k8s.io/v1alpha2; Kueue kueue.x-k8s.io v1beta1 and v1beta2,
  both served: an object is kept as it was written, apiVersion follows the
  URL, no conversion): list (labelSelector, fieldSelector on metadata.name,
  metadata.namespace, spec.nodeName, status.phase), get, create (dryRun=All,
  generateName), replace (PUT, 409 Conflict on a stale resourceVersion),
  patch (merge, JSON patch; strategic merge is read as a merge patch),
  delete (propagationPolicy Foreground/Background/Orphan, gracePeriodSeconds;
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
  ClusterQueue (whose ResourceFlavors exist) has the google.com/tpu (and
  any other requested resource it covers) nominalQuota left, in priority
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
  index; gke-node-0 otherwise), runs its initContainers in order then its
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
                         "namespace"): every pod on that node is killed at
                         once (SIGKILL), Failed with DisruptionTarget
                         (DeletionByPodGC), and deleted, as when a node pool
                         goes away; answers {"pods": [names]}
  POST /_fake/forbid     {"verb", "resource", "namespace"?} or a list: 403
                         for matching requests (RBAC-like); DELETE clears
  POST /_fake/faults     fault rules as fake_common.py defines them
                         ("method", "path" regex on path?query, "count",
                         "status" (+ "message", "retry_after"), "reset",
                         "stall", "processed"); GET lists, DELETE clears
  POST /_fake/compact    forgets the watch history: older versions get 410
  GET  /_fake/requests   [{"method", "path", "query", "body", "headers",
                         "status", "fault"}]; DELETE clears it
  GET  /_fake/processes  [{"namespace", "pod", "container", "pid", "pgid",
                         "running", "exitCode"}]
  GET  /_fake/state      every stored object, by resource

Usage: kube_fake.py --port-file FILE [--port N] [--crds DIR] [--state-dir D]
                    [--tls] [--require-token T] [--without-group G]...
                    [--cluster P/L/C]... [--pass-env NAME]...
                    [--watch-history N] [--bookmark-interval S] [--verbose]
FILE gets two lines once both sockets listen (by rename, never half): the
API port (HTTPS with --tls, its CA in STATE/ca.pem) and a plain HTTP port
serving the same API, the container API and /_fake/. Without --state-dir
a temporary directory is used and removed at exit.

Python standard library only (and fake_common.py and gcs_fake.py, next to
it, for the fault rules, the request plumbing and the server class); the
CRD files are read with a YAML subset reader (load_yaml) sufficient for
controller-gen output, checked against js-yaml by the kube-fidelity test.
"""

import argparse
import base64
import copy
import datetime
import hashlib
import json
import os
import random
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
import gcs_fake

HERE = os.path.dirname(os.path.abspath(__file__))


def default_crds():
	"""../shared/k8s next to the repository (SLICECTL_SRCDIR, else the
	tree this file is in); from a git worktree, next to its main
	checkout."""
	root = os.environ.get("SLICECTL_SRCDIR") or os.path.join(HERE, "..",
								 "..")
	root = os.path.abspath(root)
	cands = [os.path.join(root, "..", "shared", "k8s")]
	try:
		with open(os.path.join(root, ".git")) as f:
			gitdir = f.read().split("gitdir:", 1)[1].strip()
		# .../main/.git/worktrees/NAME: the main checkout is two up.
		main_git = os.path.dirname(os.path.dirname(gitdir))
		cands.append(os.path.join(os.path.dirname(main_git), "..",
					  "shared", "k8s"))
	except (OSError, IndexError):
		pass
	for c in cands:
		if os.path.isdir(c):
			return os.path.normpath(c)
	return os.path.normpath(cands[0])

# ---------------------------------------------------------------- YAML


class YamlError(ValueError):
	pass


_NULL = re.compile(r"~|null|Null|NULL|")
_BOOL = {"true": True, "True": True, "TRUE": True,
	 "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _plain(text):
	"""A plain scalar resolved as YAML 1.2's core schema does."""
	if _NULL.fullmatch(text):
		return None
	if text in _BOOL:
		return _BOOL[text]
	if _INT.fullmatch(text):
		return int(text)
	if re.fullmatch(r"0x[0-9a-fA-F]+", text):
		return int(text, 16)
	if re.fullmatch(r"0o[0-7]+", text):
		return int(text[2:], 8)
	if _FLOAT.fullmatch(text):
		return float(text)
	if re.fullmatch(r"[-+]?\.(inf|Inf|INF)", text):
		return float("-inf") if text[0] == "-" else float("inf")
	if re.fullmatch(r"\.(nan|NaN|NAN)", text):
		return float("nan")
	return text


class _Yaml:
	"""Block YAML as controller-gen writes it: mappings, sequences
	(also at their key's indentation), plain, quoted (spanning lines)
	and block (| > with chomping) scalars, flow {} [] with simple
	items, comments, several documents. Anchors, tags and complex keys
	are refused rather than misread."""

	def __init__(self, text):
		self.lines = text.split("\n")
		self.i = 0

	def fail(self, why):
		raise YamlError("line %d: %s" % (self.i + 1, why))

	@staticmethod
	def indent(line):
		return len(line) - len(line.lstrip(" "))

	def skip(self):
		"""To the next line with content, past blanks and comments."""
		while self.i < len(self.lines):
			s = self.lines[self.i].strip()
			if s and not s.startswith("#"):
				return True
			self.i += 1
		return False

	def documents(self):
		docs, cur = [], []
		for line in self.lines:
			if line.rstrip() in ("---", "...") or line.startswith("--- "):
				docs.append(cur)
				cur = []
			else:
				cur.append(line)
		docs.append(cur)
		out = []
		for d in docs:
			sub = _Yaml("\n".join(d))
			if sub.skip():
				out.append(sub.node(0))
				if sub.skip():
					sub.fail("unexpected text at indentation %d" %
						 sub.indent(sub.lines[sub.i]))
		return out

	def node(self, ind):
		"""The block node starting at the current line, indented ind."""
		line = self.lines[self.i]
		text = line.strip()
		if text.startswith("- ") or text == "-":
			return self.sequence(self.indent(line))
		if self.key_of(text) is not None:
			return self.mapping(self.indent(line))
		# A lone scalar (plain or quoted), possibly over lines.
		return self.scalar_value(text, self.indent(line) - 1)

	def key_of(self, text):
		"""(key, rest) when text is "key: rest" or "key:", else None."""
		if text[:1] in ("'", '"'):
			j = self.closing(text, text[0])
			if j < 0:
				return None
			rest = text[j + 1:]
			if rest.startswith(":") and (len(rest) == 1 or rest[1] == " "):
				return self.quoted(text[:j + 1]), rest[1:].strip()
			return None
		m = re.match(r"([^\s#'\"{}\[\],&*!|>%@`][^:#]*?|[^\s]*?)\s*:(\s|$)",
			     text)
		if not m or text.startswith(("- ", "? ")):
			return None
		return m.group(1), text[m.end():].strip()

	def mapping(self, ind):
		out = {}
		while self.skip():
			line = self.lines[self.i]
			if self.indent(line) != ind:
				if self.indent(line) > ind:
					self.fail("bad indentation")
				break
			text = line.strip()
			if text.startswith("- "):
				break
			kv = self.key_of(text)
			if kv is None:
				self.fail("expected a mapping key")
			key, rest = kv
			if key in out:
				self.fail("duplicate key %r" % key)
			out[key] = self.value(rest, ind, True)
		return out

	def sequence(self, ind):
		out = []
		while self.skip():
			line = self.lines[self.i]
			text = line.strip()
			if self.indent(line) != ind or not (
					text.startswith("- ") or text == "-"):
				if self.indent(line) > ind:
					self.fail("bad indentation")
				break
			rest = text[1:].lstrip(" ")
			if not rest or rest.startswith("#"):
				self.i += 1
				out.append(self.child(ind, False))
				continue
			# "- key: v" opens a mapping at the item's column: read
			# the line again as if it were indented that far.
			col = ind + 1 + (len(text) - 1 - len(rest))
			if rest.startswith(("- ", "-\t")) or rest == "-" or \
					self.key_of(rest) is not None:
				self.lines[self.i] = " " * col + rest
				out.append(self.node(col))
			else:
				out.append(self.value(rest, ind, False))
		return out

	def child(self, ind, in_map):
		"""The node under a key or dash with nothing after it."""
		if not self.skip():
			return None
		line = self.lines[self.i]
		text = line.strip()
		n = self.indent(line)
		if n > ind:
			return self.node(n)
		if in_map and n == ind and (text.startswith("- ") or text == "-"):
			return self.sequence(n)
		return None

	def value(self, rest, ind, in_map):
		"""The value after "key:" or "- " on the current line; ind is
		the key's or dash's indentation."""
		if rest.startswith("#"):
			rest = ""
		if rest == "":
			self.i += 1
			return self.child(ind, in_map)
		if rest[0] in "&*!":
			self.fail("anchors, aliases and tags are not supported")
		if rest[0] in "|>":
			return self.block_scalar(rest, ind)
		return self.scalar_value(rest, ind)

	def scalar_value(self, rest, ind):
		"""A flow, quoted or plain scalar starting with rest on the
		current line; continuation lines are those indented more than
		ind."""
		if rest[0] in "{[":
			self.i += 1
			return self.flow(rest)
		if rest[0] in "'\"":
			text = rest
			q = rest[0]
			while not self.closed(text, q):
				self.i += 1
				if self.i >= len(self.lines):
					self.fail("unterminated quoted scalar")
				text += "\n" + self.lines[self.i]
			self.i += 1
			end = self.closing(text, q)
			tail = text[end + 1:].strip()
			if tail and not tail.startswith("#"):
				self.fail("text after a quoted scalar")
			return self.quoted(text[:end + 1])
		parts = [self.strip_comment(rest)]
		self.i += 1
		while self.i < len(self.lines):
			line = self.lines[self.i]
			s = line.strip()
			if s and (self.indent(line) <= ind or s.startswith("#")):
				break
			if s and self.key_of(s) is not None and \
					self.indent(line) > ind:
				self.fail("a mapping key inside a plain scalar")
			parts.append(self.strip_comment(s) if s else "")
			self.i += 1
		while parts and parts[-1] == "":
			parts.pop()
		text = self.fold(parts)
		return _plain(text) if len(parts) == 1 else text

	@staticmethod
	def strip_comment(s):
		m = re.search(r"\s#", s)
		return (s[:m.start()] if m else s).rstrip()

	@staticmethod
	def fold(parts):
		"""Line folding of flow scalars: one break is a space, n > 1
		breaks are n - 1 newlines."""
		out, blank = "", 0
		for k, p in enumerate(parts):
			if k == 0:
				out = p
				continue
			if p == "":
				blank += 1
				continue
			out += ("\n" * blank if blank else " ") + p
			blank = 0
		return out

	@staticmethod
	def closing(text, q):
		j = 1
		while j < len(text):
			if text[j] == q:
				if q == "'" and text[j + 1:j + 2] == "'":
					j += 2
					continue
				return j
			if q == '"' and text[j] == "\\":
				j += 1
			j += 1
		return -1

	def closed(self, text, q):
		return self.closing(text, q) > 0

	def quoted(self, text):
		q, body = text[0], text[1:-1]
		lines = body.split("\n")
		if len(lines) > 1:
			lines = [lines[0].rstrip(" \t")] + \
				[x.strip(" \t") for x in lines[1:-1]] + \
				[lines[-1].lstrip(" \t")]
			body = self.fold(lines)
		if q == "'":
			return body.replace("''", "'")
		out, j = [], 0
		esc = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "/": "/",
		       "0": "\0", "r": "\r", " ": " ", "b": "\b", "e": "\x1b",
		       "a": "\x07", "f": "\f", "v": "\v", "N": "\x85",
		       "_": "\xa0", "L": "\u2028", "P": "\u2029"}
		while j < len(body):
			c = body[j]
			if c != "\\":
				out.append(c)
				j += 1
				continue
			n = body[j + 1:j + 2]
			if n in esc:
				out.append(esc[n])
				j += 2
			elif n in ("x", "u", "U"):
				w = {"x": 2, "u": 4, "U": 8}[n]
				out.append(chr(int(body[j + 2:j + 2 + w], 16)))
				j += 2 + w
			elif n == "\n":
				j += 2
				while j < len(body) and body[j] in " \t":
					j += 1
			else:
				self.fail("unknown escape \\%s" % n)
		return "".join(out)

	def block_scalar(self, head, ind):
		m = re.fullmatch(r"([|>])([-+]?)([1-9]?)([-+]?)\s*(#.*)?", head)
		if not m:
			self.fail("bad block scalar header %r" % head)
		style, chomp = m.group(1), m.group(2) or m.group(4)
		self.i += 1
		lines = []
		content = None
		if m.group(3):
			content = ind + int(m.group(3))
		while self.i < len(self.lines):
			line = self.lines[self.i]
			if line.strip() == "":
				lines.append("")
				self.i += 1
				continue
			n = self.indent(line)
			if content is None:
				if n <= ind:
					break
				content = n
			if n < content:
				break
			lines.append(line[content:])
			self.i += 1
		# Trailing blank lines belong to chomping, not to the node.
		trail = 0
		while lines and lines[-1] == "":
			lines.pop()
			trail += 1
		if style == "|":
			text = "\n".join(lines)
		else:
			text = ""
			prev_more = False
			for k, x in enumerate(lines):
				more = x.startswith((" ", "\t"))
				if k == 0:
					text = x
				elif x == "":
					text += "\n"
				elif more or prev_more or text.endswith("\n"):
					text += ("\n" if not text.endswith("\n") or
						 more or prev_more else "") + x
				else:
					text += " " + x
				prev_more = more and x != ""
		if not lines:
			return "" if chomp != "+" else "\n" * trail
		if chomp == "-":
			return text
		if chomp == "+":
			return text + "\n" + "\n" * trail
		return text + "\n"

	def flow(self, text):
		"""{} [] and flow collections of plain or quoted scalars on
		one line."""
		t = self.strip_comment(text).strip()
		if t in ("{}", "[]"):
			return {} if t == "{}" else []
		if t[0] == "[" and t[-1] == "]":
			return [self.flow_scalar(x) for x in
				self.split_flow(t[1:-1])]
		if t[0] == "{" and t[-1] == "}":
			out = {}
			for item in self.split_flow(t[1:-1]):
				kv = self.key_of(item)
				if kv is None:
					self.fail("bad flow mapping item %r" % item)
				out[kv[0]] = self.flow_scalar(kv[1])
			return out
		self.fail("flow collections over lines are not supported")

	def split_flow(self, body):
		items, cur, q = [], "", None
		for c in body:
			if q:
				cur += c
				if c == q:
					q = None
			elif c in "'\"":
				q = c
				cur += c
			elif c in "[]{}":
				self.fail("nested flow collections are not supported")
			elif c == ",":
				items.append(cur.strip())
				cur = ""
			else:
				cur += c
		if cur.strip():
			items.append(cur.strip())
		return items

	def flow_scalar(self, s):
		if s[:1] in ("'", '"'):
			return self.quoted(s)
		return _plain(s)


def load_yaml(text):
	"""The documents of a YAML text (a list), as a YAML 1.2 core-schema
	parser gives them, for the subset _Yaml reads."""
	return _Yaml(text).documents()

# ---------------------------------------------------------------- errors


def now_text(t=None):
	d = datetime.datetime.fromtimestamp(time.time() if t is None else t,
					    datetime.timezone.utc)
	return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def status_doc(code, reason, message, details=None):
	doc = {"kind": "Status", "apiVersion": "v1", "metadata": {},
	       "status": "Failure", "message": message, "reason": reason,
	       "code": code}
	if details is not None:
		doc["details"] = details
	return doc


class KubeError(Exception):
	"""An answer other than success: a Status object (or, with text, a
	plain text body as the server's mux gives for unknown paths)."""

	def __init__(self, code, reason, message, details=None, text=None,
		     headers=None):
		super().__init__(message)
		self.code, self.reason, self.message = code, reason, message
		self.details, self.text = details, text
		self.headers = headers or {}

	def body(self):
		return status_doc(self.code, self.reason, self.message,
				  self.details)


def page_not_found():
	return KubeError(404, "NotFound", "404 page not found",
			 text="404 page not found\n")


def not_found(res, name):
	return KubeError(404, "NotFound", '%s "%s" not found' %
			 (res.qualified, name),
			 {"name": name, "group": res.group, "kind": res.plural})


def already_exists(res, name):
	return KubeError(409, "AlreadyExists", '%s "%s" already exists' %
			 (res.qualified, name),
			 {"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, why="the object has been modified; please apply "
	     "your changes to the latest version and try again"):
	return KubeError(409, "Conflict", 'Operation cannot be fulfilled on '
			 '%s "%s": %s' % (res.qualified, name, why),
			 {"name": name, "group": res.group, "kind": res.plural})


def bad_request(message):
	return KubeError(400, "BadRequest", message)


def go_quote(v):
	"""A value as Go's %q / %v print it in field errors."""
	if isinstance(v, str):
		return json.dumps(v)
	if isinstance(v, bool):
		return "true" if v else "false"
	if v is None:
		return "null"
	if isinstance(v, float) and v == int(v):
		return str(int(v))
	return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


class FieldErrors:
	"""field.ErrorList: (reason, field, message) in order."""

	def __init__(self):
		self.items = []

	def add(self, reason, field, message):
		self.items.append((reason, field, message))

	def required(self, field):
		self.add("FieldValueRequired", field, "Required value")

	def invalid(self, field, value, why):
		self.add("FieldValueInvalid", field, "Invalid value: %s: %s" %
			 (go_quote(value), why))

	def type_invalid(self, field, value, why):
		self.add("FieldValueTypeInvalid", field, "Invalid value: %s: %s"
			 % (go_quote(value), why))

	def not_supported(self, field, value, allowed):
		self.add("FieldValueNotSupported", field,
			 "Unsupported value: %s: supported values: %s" %
			 (go_quote(value), ", ".join(go_quote(a)
						     for a in allowed)))

	def too_long(self, field, limit):
		self.add("FieldValueTooLong", field, "Too long: may not be more "
			 "than %d bytes" % limit)

	def too_many(self, field, n, limit):
		self.add("FieldValueTooMany", field, "Too many: %d: must have "
			 "at most %d items" % (n, limit))

	def error(self, kind_group, name):
		"""The 422 Invalid the API server answers for these."""
		kind, group = kind_group
		texts = ["%s: %s" % (f, m) if f else m for _, f, m in self.items]
		joined = texts[0] if len(texts) == 1 else \
			"[" + ", ".join(texts) + "]"
		qual = "%s.%s" % (kind, group) if group else kind
		return KubeError(422, "Invalid", '%s "%s" is invalid: %s' % (
			qual, name, joined), {
				"name": name, "group": group, "kind": kind,
				"causes": [{"reason": r, "message": m, "field": f}
					   for r, f, m in self.items]})


# ---------------------------------------------------------------- names

DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
			       r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
		 "alphanumeric characters, '-' or '.', and must start and end "
		 "with an alphanumeric character (e.g. 'example.com', regex "
		 "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z"
		 "0-9]([-a-z0-9]*[a-z0-9])?)*')")
OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid",
	       "resourceVersion", "generation", "creationTimestamp",
	       "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
	       "annotations", "ownerReferences", "finalizers", "managedFields")


def check_qualified_key(errs, field, key):
	"""A label or annotation key: [prefix/]name."""
	prefix, _, name = key.rpartition("/")
	if prefix and (len(prefix) > 253 or
		       not DNS1123_SUBDOMAIN.fullmatch(prefix)):
		errs.invalid(field, key, "prefix part " + SUBDOMAIN_MSG)
	if not name or len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
		errs.invalid(field, key, "name part must consist of alphanumeric "
			     "characters, '-', '_' or '.', and must start and "
			     "end with an alphanumeric character (e.g. 'MyName',"
			     "  or 'my.name',  or '123-abc', regex used for "
			     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
			     "[A-Za-z0-9]') and must be no more than 63 "
			     "characters")


def check_meta(errs, meta):
	"""ObjectMeta's validation (apimachinery's ValidateObjectMeta)."""
	name = meta.get("name")
	if not name and not meta.get("generateName"):
		errs.add("FieldValueRequired", "metadata.name",
			 "Required value: name or generateName is required")
	elif name and (len(name) > 253 or
		       not DNS1123_SUBDOMAIN.fullmatch(name)):
		errs.invalid("metadata.name", name, SUBDOMAIN_MSG)
	for k, v in (meta.get("labels") or {}).items():
		check_qualified_key(errs, "metadata.labels", k)
		if not isinstance(v, str) or len(v) > 63 or \
				not LABEL_VALUE.fullmatch(v):
			errs.invalid("metadata.labels", v, "a valid label must be "
				     "an empty string or consist of alphanumeric "
				     "characters, '-', '_' or '.', and must start "
				     "and end with an alphanumeric character (e.g. "
				     "'MyValue',  or 'my_value',  or '12345', regex "
				     "used for validation is '(([A-Za-z0-9][-A-Za-z0-"
				     "9_.]*)?[A-Za-z0-9])?')")
	for k in (meta.get("annotations") or {}):
		check_qualified_key(errs, "metadata.annotations", k)


# ---------------------------------------------------------------- schemas

DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?"
		       r"([Zz]|[+-]\d{2}:\d{2})")
JSON_TYPES = {"string": str, "boolean": bool, "array": list,
	      "object": dict}


def json_type(v):
	if v is None:
		return "null"
	if isinstance(v, bool):
		return "boolean"
	if isinstance(v, int):
		return "integer"
	if isinstance(v, float):
		return "number"
	if isinstance(v, str):
		return "string"
	return "array" if isinstance(v, list) else "object"


class SchemaCheck:
	"""One object against a structural openAPIV3Schema, as the API
	server handles a custom resource: nulls of non-nullable fields
	pruned, unknown fields collected (then refused or dropped),
	defaults applied, then the value validation."""

	def __init__(self):
		self.errs = FieldErrors()
		self.unknown = []

	def run(self, schema, obj):
		obj = self.walk(schema, obj, "", root=True)
		return obj

	@staticmethod
	def join(path, name):
		return name if not path else path + "." + name

	def walk(self, s, v, path, root=False):
		"""v after pruning and defaulting; errors on the way."""
		if s.get("x-kubernetes-int-or-string"):
			if not isinstance(v, (int, str)) or isinstance(v, bool):
				self.errs.type_invalid(path, json_type(v), "%s in body "
						       "must be of type integer,"
						       "string: %s" % (path, go_quote(
							       json_type(v))))
				return v
			if isinstance(v, str):
				self.string(s, v, path)
			else:
				self.number(s, v, path)
			return v
		t = s.get("type")
		if t in (None, "") and "properties" not in s:
			return v
		got = json_type(v)
		if t == "number" and got in ("integer", "number"):
			self.number(s, v, path)
			return v
		if t == "integer" and got == "integer":
			self.number(s, v, path)
			return v
		if (t == "object" or (t is None and "properties" in s)) and \
				got == "object":
			return self.object(s, v, path, root)
		if t in JSON_TYPES and t == got:
			if t == "string":
				self.string(s, v, path)
				return v
			if t == "array":
				return self.array(s, v, path)
			return self.enum(s, v, path)
		if t not in ("string", "integer", "number", "boolean", "array",
			     "object"):
			return v
		self.errs.type_invalid(path, got, "%s in body must be of type "
				       "%s: %s" % (path, t, go_quote(got)))
		return v

	def enum(self, s, v, path):
		if "enum" in s and v not in s["enum"]:
			self.errs.not_supported(path, v, s["enum"])
		return v

	def string(self, s, v, path):
		self.enum(s, v, path)
		if "maxLength" in s and len(v) > s["maxLength"]:
			self.errs.too_long(path, s["maxLength"])
		if "minLength" in s and len(v) < s["minLength"]:
			self.errs.invalid(path, v, "%s in body should be at least "
					  "%d chars long" % (path, s["minLength"]))
		if "pattern" in s and not re.search(s["pattern"], v):
			self.errs.invalid(path, v, "%s in body should match '%s'" %
					  (path, s["pattern"]))
		fmt = s.get("format")
		if fmt == "date-time" and not DATE_TIME.fullmatch(v):
			self.errs.invalid(path, v, "%s in body must be of type "
					  "date-time: %s" % (path, go_quote(v)))

	def number(self, s, v, path):
		self.enum(s, v, path)
		fmt = s.get("format")
		bits = {"int32": 31, "int64": 63}.get(fmt)
		if bits and isinstance(v, int) and not \
				-(1 << bits) <= v < (1 << bits):
			self.errs.invalid(path, v, "%s in body must be of type %s: "
					  "%s" % (path, fmt, go_quote(str(v))))
		for key, word, beyond in (("minimum", "greater", lambda x, y: x < y),
					  ("maximum", "less", lambda x, y: x > y)):
			if key not in s:
				continue
			bound = s[key]
			strict = s.get("exclusive" + key.capitalize())
			if beyond(v, bound) or (strict and v == bound):
				self.errs.invalid(path, v, "%s in body should be %s "
						  "than %s%s" % (path, word, "" if strict
								 else "or equal to ",
								 go_quote(bound)))

	def array(self, s, v, path):
		out = []
		items = s.get("items") or {}
		for i, x in enumerate(v):
			p = "%s[%d]" % (path, i)
			if x is None and not items.get("nullable"):
				# A null item is not pruned: it is a type error.
				self.errs.type_invalid(p, "null", "%s in body must be "
						       "of type %s: \"null\"" % (
							       p, items.get("type",
									    "object")))
				out.append(x)
				continue
			out.append(self.walk(items, x, p))
		if "maxItems" in s and len(out) > s["maxItems"]:
			self.errs.too_many(path, len(out), s["maxItems"])
		if "minItems" in s and len(out) < s["minItems"]:
			self.errs.invalid(path, len(out), "%s in body should have "
					  "at least %d items" % (path, s["minItems"]))
		if s.get("x-kubernetes-list-type") == "map":
			keys = s.get("x-kubernetes-list-map-keys") or []
			seen = {}
			for i, x in enumerate(out):
				if not isinstance(x, dict):
					continue
				k = tuple(json.dumps(x.get(key)) for key in keys)
				if k in seen:
					self.errs.add("FieldValueDuplicate",
						      "%s[%d]" % (path, i),
						      "Duplicate value: %s" % (
							      "{" + ", ".join(
								      '"%s":%s' % (key,
										   go_quote(
											   x.get(key)))
								      for key in keys) + "}"))
				seen[k] = i
		elif s.get("x-kubernetes-list-type") == "set":
			for i, x in enumerate(out):
				if x in out[:i]:
					self.errs.add("FieldValueDuplicate",
						      "%s[%d]" % (path, i),
						      "Duplicate value: %s" %
						      go_quote(x))
		return out

	def object(self, s, v, path, root):
		props = s.get("properties")
		addl = s.get("additionalProperties")
		keep = s.get("x-kubernetes-preserve-unknown-fields")
		out = {}
		for k, x in v.items():
			p = self.join(path, k) if props is not None or not addl \
				else "%s[%s]" % (path, k)
			sub = None
			if props is not None and k in props:
				sub = props[k]
			elif isinstance(addl, dict):
				sub = addl
				p = "%s[%s]" % (path, k)
			elif addl is True or keep:
				out[k] = x
				continue
			elif root and k in ("apiVersion", "kind", "metadata"):
				sub = {}
			else:
				self.unknown.append(self.join(path, k))
				continue
			if x is None and not sub.get("nullable"):
				continue
			if root and k == "metadata":
				out[k] = self.meta(x)
				continue
			out[k] = self.walk(sub, x, p)
		for k, sub in (props or {}).items():
			if k not in out and "default" in sub:
				out[k] = self.walk(sub, copy.deepcopy(sub["default"]),
						   self.join(path, k))
		for k in s.get("required", []):
			if k not in out:
				self.errs.required(self.join(path, k))
		if "maxProperties" in s and len(out) > s["maxProperties"]:
			self.errs.too_many(path, len(out), s["maxProperties"])
		return out

	def meta(self, m):
		"""The root metadata is ObjectMeta whatever the schema says:
		its unknown fields are unknown fields."""
		if not isinstance(m, dict):
			self.errs.type_invalid("metadata", json_type(m), "metadata "
					       "in body must be of type object: %s" %
					       go_quote(json_type(m)))
			return m
		out = {}
		for k, x in m.items():
			if k in OBJECT_META:
				out[k] = x
			else:
				self.unknown.append("metadata." + k)
		return out


# ---------------------------------------------------------------- selectors


class Selector:
	"""A label selector as kubectl and clients write it: k=v, k==v,
	k!=v, k, !k, k in (a,b), k notin (a,b), comma-separated."""

	def __init__(self, text):
		self.reqs = []
		text = (text or "").strip()
		for part in self.split(text):
			part = part.strip()
			if not part:
				continue
			m = re.fullmatch(r"([^\s=!()]+)\s+(in|notin)\s+\(([^)]*)\)",
					 part)
			if m:
				vals = {x.strip() for x in m.group(3).split(",")}
				self.reqs.append((m.group(1), m.group(2), vals))
				continue
			m = re.fullmatch(r"([^\s=!]+)\s*(==|!=|=)\s*([^\s=!]*)", part)
			if m:
				op = {"==": "=", "=": "=", "!=": "!="}[m.group(2)]
				self.reqs.append((m.group(1), op, {m.group(3)}))
				continue
			m = re.fullmatch(r"(!?)\s*([^\s=!()]+)", part)
			if m:
				self.reqs.append((m.group(2), "!" if m.group(1) else
						  "exists", set()))
				continue
			raise bad_request("unable to parse requirement: found "
					  "'%s', expected: identifier" % part)

	@staticmethod
	def split(text):
		parts, depth, cur = [], 0, ""
		for c in text:
			if c == "(":
				depth += 1
			elif c == ")":
				depth -= 1
			if c == "," and depth == 0:
				parts.append(cur)
				cur = ""
			else:
				cur += c
		parts.append(cur)
		return parts

	def matches(self, labels):
		labels = labels or {}
		for k, op, vals in self.reqs:
			have = k in labels
			if op == "exists" and not have:
				return False
			if op == "!" and have:
				return False
			if op in ("=", "in") and (not have or labels[k] not in vals):
				return False
			if op in ("!=", "notin") and have and labels[k] in vals:
				return False
		return True


FIELD_PATHS = {"metadata.name": ("metadata", "name"),
	       "metadata.namespace": ("metadata", "namespace"),
	       "spec.nodeName": ("spec", "nodeName"),
	       "status.phase": ("status", "phase")}


def field_selector(text):
	"""A predicate on objects for a field selector (=, ==, !=)."""
	reqs = []
	for part in (text or "").split(","):
		part = part.strip()
		if not part:
			continue
		m = re.fullmatch(r"([\w.]+)\s*(==|!=|=)\s*(.*)", part)
		if not m or m.group(1) not in FIELD_PATHS:
			raise bad_request('"%s" is not a known field selector: only '
					  '"%s"' % (m.group(1) if m else part,
						    '", "'.join(FIELD_PATHS)))
		reqs.append((FIELD_PATHS[m.group(1)], m.group(2) != "!=",
			     m.group(3)))

	def pred(obj):
		for (a, b), eq, want in reqs:
			got = str((obj.get(a) or {}).get(b, ""))
			if (got == want) != eq:
				return False
		return True
	return pred

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
		self.cond.notify_all()

	def compact(self):
		self.history = []
		self.oldest = self.rv + 1
		self.cond.notify_all()

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
		(the kubelet says so)."""
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
			# The server's default: Jobs orphan their pods only when
			# asked by old clients; everything here is Background.
			propagation = "Background"
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
		if self.log_entry is not None:
			self.log_entry["status"] = code

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
		except (gcs_fake._Dropped, OSError):
			raise
		except Exception as err:
			traceback.print_exc()
			self.answer_error(KubeError(500, "InternalError",
						    "kube_fake.py: %r" % err))

	def check_token(self):
		want = self.fake.require_token
		if want is None:
			return
		got = self.headers.get("Authorization", "")
		if got != "Bearer " + want:
			raise KubeError(401, "Unauthorized", "Unauthorized")

	# ---- streaming

	def start_chunks(self, ctype="application/json"):
		self.send_response(200)
		self.send_header("Content-Type", ctype)
		self.send_header("Transfer-Encoding", "chunked")
		self.send_header("Cache-Control", "no-cache, private")
		self.end_headers()
		if self.log_entry is not None:
			self.log_entry["status"] = 200

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
				if st.get(st.resource("namespaces"), "", r.ns) is None \
						and m != "GET":
					raise not_found(st.resource("namespaces"), r.ns)
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
		if r.res.versions != ["v1"] or r.res.group:
			obj["apiVersion"] = r.res.api_version(r.version)
		obj.setdefault("kind", r.res.kind)
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
		h.start_chunks()
		for x in out:
			h.chunk(x)
		last_sent = time.monotonic()
		while True:
			batch = []
			gone = False
			with st.lock:
				if last < st.oldest - 1:
					gone = True
				else:
					for rv, etype, q, obj in st.history:
						if rv <= last or q != r.res.qualified:
							continue
						batch.append((rv, etype, obj))
					if not batch:
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
			if not batch:
				with st.lock:
					if st.rv > last and not any(
							rv > last for rv, *_ in st.history):
						last = st.rv
			if time.monotonic() >= deadline:
				break
			if bookmarks and time.monotonic() - last_sent >= \
					self.bookmark_interval:
				h.chunk(line("BOOKMARK", {
					"kind": r.res.kind, "apiVersion":
					r.res.api_version(r.version), "metadata": {
						"resourceVersion": str(max(last,
									   st.rv))}}))
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


def seconds_since(stamp):
	"""Seconds since an RFC 3339 time the fake wrote (now_text)."""
	t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
	return time.time() - t.replace(tzinfo=datetime.timezone.utc).timestamp()


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


def random_suffix(n=5):
	# The alphabet apimachinery's rand.String uses (no vowels).
	return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
		       for _ in range(n))


def set_condition(status, ctype, value, reason, message, t=None):
	"""Sets one condition; lastTransitionTime moves only on a change of
	status. Returns True when something changed."""
	conds = status.setdefault("conditions", [])
	for c in conds:
		if c["type"] == ctype:
			if (c["status"], c.get("reason"), c.get("message")) == \
					(value, reason, message):
				return False
			if c["status"] != value:
				c["lastTransitionTime"] = now_text(t)
			c.update(status=value, reason=reason, message=message)
			return True
	conds.append({"type": ctype, "status": value, "reason": reason,
		      "message": message, "lastTransitionTime": now_text(t)})
	return True


def condition(obj, ctype):
	for c in (obj.get("status") or {}).get("conditions") or []:
		if c["type"] == ctype:
			return c["status"] == "True"
	return False

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
		labels = pod["metadata"].get("labels") or {}
		if JS + "job-index" in labels:
			return "gke-tpu-slice-%s" % labels[JS + "job-index"]
		return "gke-node-0"

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
				spec["nodeName"] = self.node_of(pod)
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

	def ensure_node(self, name, pod):
		"""The Node object a pod is bound to, made on first use with
		the labels the pod selects (a node pool that fits it)."""
		st = self.st
		nres = st.resource("nodes")
		if st.get(nres, "", name) is not None:
			return
		labels = dict(pod["spec"].get("nodeSelector") or {})
		labels["kubernetes.io/hostname"] = name
		labels.setdefault("cloud.google.com/gke-nodepool",
				  name.replace("gke-", "", 1))
		tpu = 0
		for c in pod["spec"].get("containers") or []:
			tpu += quantity(((c.get("resources") or {}).get("limits")
					 or {}).get("google.com/tpu", 0))
		cap = {"cpu": "8", "memory": "32Gi", "pods": "110"}
		spec = {}
		if tpu:
			cap["google.com/tpu"] = quantity_text(tpu)
			spec["taints"] = [{"key": "google.com/tpu", "value":
					   "present", "effect": "NoSchedule"}]
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
		       "KUBERNETES_SERVICE_PORT": str(self.fake.api_port)}
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
		victims = []
		for pod in st.items(pres, doc.get("namespace")):
			if pod["spec"].get("nodeName") != node:
				continue
			labels = pod["metadata"].get("labels") or {}
			if doc.get("jobset") and labels.get(JS + "jobset-name") != \
					doc["jobset"]:
				continue
			if pod.get("status", {}).get("phase") in ("Succeeded",
								   "Failed"):
				continue
			victims.append(pod)
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
		gone = st.get(nres, "", node)
		if gone is not None:
			# The pool comes back empty: a new Node when pods return.
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
				out.append({"namespace": x.pod_key[0], "pod": x.pod_key[1],
					    "container": x.name, "pid": x.proc.pid,
					    "initPid": x.init_pid() if running else None,
					    "pgid": x.proc.pid, "running": running,
					    "exitCode": x.exit_code})
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


class TLSServer(gcs_fake.Server):
	"""HTTPS, the handshake done in the connection's own thread."""

	def finish_request(self, request, client_address):
		request = self.tls.wrap_socket(request, server_side=True)
		self.RequestHandlerClass(request, client_address, self)


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

	temp = None
	state = args.state_dir
	if not state:
		temp = tempfile.mkdtemp(prefix="kube-fake-")
		state = temp
	os.makedirs(state, exist_ok=True)
	resources = [r for r in BUILTIN if r.group not in args.without_group]
	resources += load_crds(args.crds, args.without_group)
	fake = Fake(args, resources, state)

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
		servers.append(gcs_fake.Server(("127.0.0.1", args.port), Handler))
	servers.append(gcs_fake.Server(("127.0.0.1", 0), Handler))
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
