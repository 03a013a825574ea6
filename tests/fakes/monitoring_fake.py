#!/usr/bin/env python3
"""A fake of Cloud Monitoring's time series API (monitoring.googleapis.com
v3) for slicectl's tests: what the supervisor's goodput export writes to,
and what Google's own Node.js client (@google-cloud/monitoring, its REST
transport) can write to and read back (monitoring-fidelity.js).

It keeps the real API's rules for the calls slicectl makes:

- POST /v3/projects/P/timeSeries {"timeSeries": [...]}
  (projects.timeSeries.create) needs "Authorization: Bearer ..." (401
  without); at most 200 TimeSeries a request; each names metric.type
  (a user-defined metric: custom.googleapis.com/... or
  external.googleapis.com/...), labels whose keys match
  [a-z_][a-z0-9_]{0,99} and values of at most 1024 characters, a
  resource of a type custom metrics may use with its labels (generic_task:
  location, namespace, job, task_id; generic_node: location, namespace,
  node_id; global: none), and exactly one point, whose interval.endTime is
  RFC 3339 (a GAUGE's startTime, if any, equal to it) and whose value is
  one of doubleValue, int64Value, boolValue, stringValue. metricKind and
  valueType are optional; given, they must be the point's (GAUGE or
  CUMULATIVE). The first point of a metric type fixes its value type.
  A series named twice in one request, a point older than or equal to its
  series' newest ("Points must be written in order"), or sooner than the
  sampling period after it (10 s, as the quotas page says for
  user-defined metrics) is refused. As the real API does, the series that
  pass are written all the same; the answer is then 400 INVALID_ARGUMENT
  with the count written and each failure in the message (the real API's
  CreateTimeSeriesSummary detail is left out: the Node.js client's REST
  transport has no type for it and fails to decode such an error). All
  written: 200 {}.
- GET /v3/projects/P/timeSeries?filter=F&interval.endTime=T
  [&interval.startTime=S] (projects.timeSeries.list): F is clauses
  joined by AND: metric.type = "X", resource.type = "X",
  metric.labels.K = "V", resource.labels.K = "V" (anything else is 400).
  Answers {"timeSeries": [...]}, points newest first, those with endTime
  in (S, T] (S missing: T alone); no match: {}.

Control endpoints (JSON in and out):
  POST /_fake/faults  fake_common.py's rules: {"method", "path" (regex on
                      path?query), "count" (default 1, < 0: always), then
                      "status" (+ "message", "retry_after"), "reset": true
                      or "stall": S}; GET lists them, DELETE clears
  GET  /_fake/requests  [{"method", "path", "query", "json",
                      "authorization" (present or not), "status",
                      "fault", "time"}]; DELETE clears it
  GET  /_fake/series  every series written: [{"metric", "resource",
                      "valueType", "points": [{"endTime", "value"}]}],
                      oldest point first
  POST /_fake/config  {"sampling_period_s": S} (default 10)
  POST /_fake/reset   forgets everything

Python standard library only (and fake_common.py, next to it).

Usage: monitoring_fake.py --port-file FILE [--verbose]
"""

import argparse
import datetime
import json
import re
import sys
import threading
import time

import fake_common

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED",
		403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
		503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
SERIES_PATH = re.compile(r"/v3/projects/([^/]+)/timeSeries")
MAX_SERIES = 200
USER_PREFIXES = ("custom.googleapis.com/", "external.googleapis.com/")
# The monitored resources a user-defined metric may be written against,
# and their labels (project_id is filled in from the request's project).
RESOURCES = {
	"global": (),
	"generic_task": ("location", "namespace", "job", "task_id"),
	"generic_node": ("location", "namespace", "node_id"),
}
LABEL_KEY = re.compile(r"[a-z_][a-z0-9_]{0,99}")
VALUE_TYPES = {"doubleValue": "DOUBLE", "int64Value": "INT64",
	       "boolValue": "BOOL", "stringValue": "STRING"}
CLAUSE = re.compile(r'\s*(metric\.type|resource\.type|'
		    r'metric\.labels\.[a-z_][a-z0-9_]*|'
		    r'resource\.labels\.[a-z_][a-z0-9_]*)\s*=\s*"([^"]*)"\s*')
# How far from now a point's end may be, as the real API allows.
PAST_S, FUTURE_S = 25 * 3600, 5 * 60

BadRequest = fake_common.BadRequest


class ApiError(Exception):
	def __init__(self, status, message):
		super().__init__(message)
		self.status = status
		self.message = message


def parse_time(text):
	"""Seconds since the epoch of an RFC 3339 time, or None."""
	if not isinstance(text, str):
		return None
	m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{1,9})?"
			 r"(Z|[+-]\d\d:\d\d)", text)
	if not m:
		return None
	try:
		d = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
	except ValueError:
		return None
	off = 0
	if m.group(3) != "Z":
		sign = -1 if m.group(3)[0] == "-" else 1
		off = sign * (int(m.group(3)[1:3]) * 3600 +
			      int(m.group(3)[4:6]) * 60)
	t = d.replace(tzinfo=datetime.timezone.utc).timestamp() - off
	return t + float(m.group(2) or 0)


class Store:
	"""Series, descriptors' value types, config, faults and the request
	log, one lock."""

	def __init__(self):
		self.lock = threading.Lock()
		self.reset()

	def reset(self):
		with self.lock:
			self.series = {}
			self.value_types = {}
			self.sampling_period_s = 10.0
			self.faults = []
			self.requests = []


class Fault(fake_common.Fault):
	def __init__(self, rule):
		super().__init__(rule)
		if self.status is None and not self.reset and not self.stall:
			raise ValueError("a rule has one of status, reset, stall")
		if self.status is not None and self.reset:
			raise ValueError("status and reset exclude each other")


def series_key(ts):
	return json.dumps([ts["metric"], ts["resource"]], sort_keys=True)


def check_labels(where, labels):
	if labels is None:
		return {}
	if not isinstance(labels, dict):
		raise ValueError("%s.labels: a map of strings" % where)
	if len(labels) > 30:
		raise ValueError("%s.labels: at most 30 labels" % where)
	for k, v in labels.items():
		if not LABEL_KEY.fullmatch(k):
			raise ValueError("%s.labels: invalid label key %r" %
					 (where, k))
		if not isinstance(v, str) or len(v) > 1024:
			raise ValueError("%s.labels.%s: a string of at most "
					 "1024 characters" % (where, k))
	return dict(labels)


def check_series(project, i, ts, now):
	"""A TimeSeries of a create request, normalized: {"metric",
	"resource", "metricKind", "valueType", "end", "point"}; ValueError
	names the field, as the real API's "Field timeSeries[i]..." does."""
	f = "timeSeries[%d]" % i
	if not isinstance(ts, dict):
		raise ValueError("Field %s had an invalid value: not an object"
				 % f)
	metric = ts.get("metric")
	if not isinstance(metric, dict) or not isinstance(metric.get("type"),
							  str):
		raise ValueError("Field %s.metric.type is required" % f)
	mtype = metric["type"]
	if not mtype.startswith(USER_PREFIXES) or \
			len(mtype) <= len("custom.googleapis.com/"):
		raise ValueError("Field %s.metric.type had an invalid value of "
				 "\"%s\": the metric type is not a user-defined "
				 "metric (custom.googleapis.com/ or "
				 "external.googleapis.com/)" % (f, mtype))
	mlabels = check_labels(f + ".metric", metric.get("labels"))
	res = ts.get("resource")
	if not isinstance(res, dict) or res.get("type") not in RESOURCES:
		raise ValueError("Field %s.resource.type had an invalid value: "
				 "user-defined metrics take one of %s" %
				 (f, ", ".join(sorted(RESOURCES))))
	rlabels = check_labels(f + ".resource", res.get("labels"))
	rlabels.setdefault("project_id", project)
	want = set(RESOURCES[res["type"]]) | {"project_id"}
	if set(rlabels) != want:
		raise ValueError("Field %s.resource.labels had an invalid "
				 "value: %s takes exactly the labels %s" %
				 (f, res["type"], ", ".join(sorted(want))))
	points = ts.get("points")
	if not isinstance(points, list) or len(points) != 1:
		raise ValueError("Field %s.points had an invalid value: Only one "
				 "point can be written per TimeSeries per "
				 "request." % f)
	p = points[0]
	interval = p.get("interval") if isinstance(p, dict) else None
	if not isinstance(interval, dict):
		raise ValueError("Field %s.points[0].interval is required" % f)
	end = parse_time(interval.get("endTime"))
	if end is None:
		raise ValueError("Field %s.points[0].interval.endTime had an "
				 "invalid value: an RFC 3339 time" % f)
	kind = ts.get("metricKind") or "GAUGE"
	if kind not in ("GAUGE", "CUMULATIVE"):
		raise ValueError("Field %s.metricKind had an invalid value of "
				 "\"%s\": GAUGE or CUMULATIVE" % (f, kind))
	start = interval.get("startTime")
	if kind == "GAUGE" and start is not None and \
			parse_time(start) != end:
		raise ValueError("Field %s.points[0].interval.startTime: a "
				 "GAUGE point's start time must equal its end "
				 "time" % f)
	if end < now - PAST_S or end > now + FUTURE_S:
		raise ValueError("Field %s.points[0].interval.endTime had an "
				 "invalid value: Points must be written within "
				 "25 hours in the past and 5 minutes in the "
				 "future" % f)
	value = p.get("value")
	keys = [k for k in (value or {}) if k in VALUE_TYPES]
	if not isinstance(value, dict) or len(keys) != 1 or \
			len(value) != 1:
		raise ValueError("Field %s.points[0].value had an invalid "
				 "value: one of %s" %
				 (f, ", ".join(VALUE_TYPES)))
	vtype = VALUE_TYPES[keys[0]]
	v = value[keys[0]]
	ok = {"DOUBLE": lambda x: isinstance(x, (int, float)) and
	      not isinstance(x, bool) or x in ("NaN", "Infinity",
					       "-Infinity"),
	      "INT64": lambda x: (isinstance(x, int) and
				  not isinstance(x, bool)) or
	      (isinstance(x, str) and re.fullmatch(r"-?\d+", x)),
	      "BOOL": lambda x: isinstance(x, bool),
	      "STRING": lambda x: isinstance(x, str)}[vtype]
	if not ok(v):
		raise ValueError("Field %s.points[0].value.%s had an invalid "
				 "value" % (f, keys[0]))
	if ts.get("valueType") not in (None, vtype):
		raise ValueError("Field %s.valueType had an invalid value of "
				 "\"%s\": the point is %s" %
				 (f, ts["valueType"], vtype))
	return {"metric": {"type": mtype, "labels": mlabels},
		"resource": {"type": res["type"], "labels": rlabels},
		"metricKind": kind, "valueType": vtype, "end": end,
		"point": {"interval": {"startTime": interval["endTime"]
				       if kind == "GAUGE" else start,
				       "endTime": interval["endTime"]},
			  "value": {keys[0]: v}}}


def parse_filter(text):
	"""[(field, value)] of a filter of '=' clauses joined by AND."""
	if not text:
		raise ApiError(400, "Field filter had an invalid value: a "
			       "filter naming metric.type is required")
	out = []
	for part in re.split(r"\s+AND\s+", text.strip()):
		m = CLAUSE.fullmatch(part)
		if not m:
			raise ApiError(400, "Field filter had an invalid value "
				       "of \"%s\": this fake knows only = "
				       "clauses on metric.type, resource.type "
				       "and their labels, joined by AND" % text)
		out.append((m.group(1), m.group(2)))
	if not any(k == "metric.type" for k, _ in out):
		raise ApiError(400, "Field filter had an invalid value: it "
			       "must name metric.type")
	return out


def matches(s, clauses):
	for k, v in clauses:
		if k in ("metric.type", "resource.type"):
			got = s[k.split(".")[0]]["type"]
		else:
			top, _, key = k.split(".", 2)
			got = s[top]["labels"].get(key)
		if got != v:
			return False
	return True


class Handler(fake_common.Handler):
	server_version = "ESF"

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("monitoring-fake: %s\n" % (fmt % args))

	def send(self, status, doc, headers=()):
		data = json.dumps(doc, indent=1).encode() + b"\n"
		if self.log_entry is not None:
			self.log_entry["status"] = status
		self.send_response(status)
		self.send_header("Content-Type", "application/json; charset=UTF-8")
		for k, v in headers:
			self.send_header(k, v)
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		self.wfile.write(data)

	@staticmethod
	def error_doc(status, message):
		return {"error": {"code": status, "message": message,
				  "status": STATUS_NAMES.get(status, "UNKNOWN")}}

	def send_fault(self, fault):
		extra = []
		if fault.retry_after is not None:
			extra.append(("Retry-After", str(fault.retry_after)))
		text = fault.rule.get("message") or \
			"Injected fault: HTTP %d" % fault.status
		self.send(fault.status, self.error_doc(fault.status, text), extra)

	def api_request(self):
		doc = None
		if self.body:
			try:
				doc = json.loads(self.body)
			except ValueError:
				doc = None
		entry = {"method": self.command, "path": self.raw_path,
			 "query": self.query, "json": doc,
			 "authorization": bool(self.headers.get(
				 "Authorization", "").startswith("Bearer ")),
			 "status": None, "fault": None, "time": time.time()}
		self.doc = doc
		self.send(*self.with_faults(entry, self.answer))

	def answer(self):
		try:
			return self.route()
		except ApiError as err:
			return err.status, self.error_doc(err.status, err.message)

	def route(self):
		m = SERIES_PATH.fullmatch(self.raw_path)
		if not m:
			raise ApiError(404, "no such method: %s %s" %
				       (self.command, self.raw_path))
		if not self.headers.get("Authorization", "").startswith(
				"Bearer "):
			raise ApiError(401, "Request is missing required "
				       "authentication credential. Expected "
				       "OAuth 2 access token.")
		if self.command == "POST":
			return self.create(m.group(1))
		if self.command == "GET":
			return self.list(m.group(1))
		raise ApiError(405, "method %s not allowed" % self.command)

	def create(self, project):
		doc = self.doc
		if not isinstance(doc, dict) or \
				not isinstance(doc.get("timeSeries"), list) or \
				not doc["timeSeries"]:
			raise ApiError(400, "Field timeSeries is required: a "
				       "non-empty list")
		tss = doc["timeSeries"]
		if len(tss) > MAX_SERIES:
			raise ApiError(400, "Field timeSeries had an invalid "
				       "value: A maximum of %d TimeSeries can "
				       "be written in a single request." %
				       MAX_SERIES)
		now = time.time()
		errors, seen = [], set()
		st = self.store
		with st.lock:
			for i, ts in enumerate(tss):
				try:
					s = check_series(project, i, ts, now)
					self.write(s, i, seen)
				except ValueError as err:
					errors.append(str(err))
		if not errors:
			return 200, {}
		raise ApiError(400, "One or more TimeSeries could not be "
			       "written: %d of %d points written; %s" %
			       (len(tss) - len(errors), len(tss),
				"; ".join(errors)))

	def write(self, s, i, seen):
		"""Adds s's point to its series (lock held), or ValueError."""
		st = self.store
		key = series_key(s)
		if key in seen:
			raise ValueError("Field timeSeries[%d] had an invalid "
					 "value: Duplicate TimeSeries encountered. "
					 "Only one point can be written per "
					 "TimeSeries per request." % i)
		seen.add(key)
		mtype = s["metric"]["type"]
		known = st.value_types.get(mtype)
		if known and known != s["valueType"]:
			raise ValueError("Field timeSeries[%d].points[0].value had "
					 "an invalid value: Value type for metric "
					 "%s must be %s, but is %s." %
					 (i, mtype, known, s["valueType"]))
		old = st.series.get(key)
		if old:
			last = old["last"]
			if s["end"] <= last:
				raise ValueError("timeSeries[%d]: Points must be "
						 "written in order. One or more "
						 "of the points specified had an "
						 "older start time than the most "
						 "recent point." % i)
			if s["end"] - last < st.sampling_period_s:
				raise ValueError("timeSeries[%d]: One or more "
						 "points were written more "
						 "frequently than the maximum "
						 "sampling period configured for "
						 "the metric." % i)
		st.value_types[mtype] = s["valueType"]
		if not old:
			old = st.series[key] = {
				"metric": s["metric"], "resource": s["resource"],
				"metricKind": s["metricKind"],
				"valueType": s["valueType"], "points": []}
		old["points"].append(s["point"])
		old["last"] = s["end"]

	def list(self, project):
		clauses = parse_filter(self.query.get("filter"))
		end = parse_time(self.query.get("interval.endTime"))
		if end is None:
			raise ApiError(400, "Field interval.endTime had an invalid "
				       "value: an RFC 3339 time is required")
		start = self.query.get("interval.startTime")
		start = parse_time(start) if start else None
		out = []
		with self.store.lock:
			for s in self.store.series.values():
				if s["resource"]["labels"]["project_id"] != \
						project or not matches(s, clauses):
					continue
				pts = [p for p in s["points"] if (
					lambda t: t <= end and (
						t == end if start is None
						else t > start))(
					parse_time(p["interval"]["endTime"]))]
				if pts:
					out.append({k: s[k] for k in (
						"metric", "resource", "metricKind",
						"valueType")} | {
						"points": pts[::-1]})
		return 200, {"timeSeries": out} if out else {}

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.store
		common = self.faults_and_log(Fault)
		if common is not None:
			return common
		if p == "/_fake/series" and m == "GET":
			with st.lock:
				return 200, [{k: s[k] for k in (
					"metric", "resource", "metricKind",
					"valueType", "points")}
					for s in st.series.values()]
		if p == "/_fake/config" and m == "POST":
			doc = self.json_body()
			v = doc.get("sampling_period_s") if isinstance(
				doc, dict) else None
			if not isinstance(v, (int, float)) or v < 0:
				raise BadRequest("config: {\"sampling_period_s\": "
						 "S >= 0}")
			with st.lock:
				st.sampling_period_s = float(v)
			return 200, {"sampling_period_s": float(v)}
		if p == "/_fake/reset" and m == "POST":
			st.reset()
			return 200, {}
		return 404, {"error": {"code": 404, "message": "no control "
				       "endpoint %s %s" % (m, p)}}


def main():
	ap = argparse.ArgumentParser(description="Fake Cloud Monitoring time "
				     "series API for tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	srv = fake_common.Server(("127.0.0.1", 0), Handler)
	srv.store = Store()
	srv.verbose = args.verbose
	banner = None
	if args.verbose:
		banner = "monitoring-fake: on 127.0.0.1:%d\n" % \
			srv.server_address[1]
	fake_common.serve([srv], args.port_file, banner)


if __name__ == "__main__":
	main()
