#!/usr/bin/env python3
"""A fake of the token services behind credentials that hold no key:
Google's Security Token Service (sts.googleapis.com, the token exchange
of Workload Identity Federation), the IAM Credentials API's
generateAccessToken (iamcredentials.googleapis.com, service account
impersonation), and the OAuth token endpoint a source credential uses
(oauth2.googleapis.com/token), all on one port, so that slicectl's
impersonated_service_account and external_account credentials can be
tested end to end, and Google's own client (google-auth-library, see
auth-fidelity.js) can check that the fake answers what it expects.

It promises the real services' rules for the calls those clients make:

POST /v1/token (STS, RFC 8693), a form (application/x-www-form-urlencoded):
  grant_type urn:ietf:params:oauth:grant-type:token-exchange (else 400
  unsupported_grant_type), requested_token_type ...:token-type:access_token,
  subject_token_type one of ...:token-type:{jwt,id_token,saml2,
  access_token} or urn:ietf:params:aws:token-type:aws4_request, audience a
  workload pool provider (//iam.googleapis.com/projects/N/locations/
  global/workloadIdentityPools/P/providers/R) or a workforce pool provider
  (//iam.googleapis.com/locations/global/workforcePools/P/providers/R),
  scope (space-separated, required), subject_token; options (JSON,
  {"userProject"}) only for a workforce pool (400 invalid_request
  otherwise). The audience must be the configured one (400 invalid_target)
  and the subject token the configured one (400 invalid_grant). Answers
  {"access_token", "issued_token_type", "token_type": "Bearer",
  "expires_in"}; errors {"error", "error_description"}.

POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken (JSON
  {"scope": [...] required, "delegates": ["projects/-/serviceAccounts/X"],
  "lifetime": "Ns", 1 to 3600}) with "Authorization: Bearer T", T a token
  this fake issued and has not expired (401 UNAUTHENTICATED otherwise; 403
  "insufficient authentication scopes" when T lacks cloud-platform), for an
  account T may impersonate (config "impersonable"; 403 PERMISSION_DENIED
  "iam.serviceAccounts.getAccessToken" otherwise). Answers {"accessToken",
  "expireTime": RFC 3339 UTC}; errors {"error": {"code", "message",
  "status"}}.

POST /token (OAuth 2.0), a form: grant_type refresh_token (client_id,
  client_secret, refresh_token; "revoked" answers invalid_grant) or
  urn:ietf:params:oauth:grant-type:jwt-bearer (the assertion checked as
  fake_common.py checks it for gcs_fake.py too, its signature with
  --jwt-public-key when given).
  Answers {"access_token", "expires_in", "token_type", "scope"}.

GET /subject/text, /subject/json: the configured subject token, as text or
  as {"id_token": T}, for a credential source "url"; every header named in
  config "subject_headers" must be sent with its value (403 otherwise),
  as an identity provider's endpoint would insist.

Control endpoints (JSON in and out):
  POST /_fake/config  merges settings, answers the whole config:
      "audience": the one STS accepts (null: any well-formed),
      "subject_token": the one STS accepts (null: any non-empty),
      "subject_headers": {NAME: VALUE} the subject URL requires,
      "impersonable": [EMAIL...] (null: every account),
      "token_expires_in": S for STS and OAuth tokens,
      "impersonated_expires_in": S caps generateAccessToken's lifetime
                       (null: the requested one)
  GET  /_fake/config
  POST /_fake/faults  fake_common.py's rules: {"method", "path" (regex on
                      path?query), "count" (default 1, < 0: always), then
                      "status" (+ "message", "retry_after"), "reset": true
                      or "stall": S; "processed": true acts after the
                      answer is ready}; GET lists them, DELETE clears
  GET  /_fake/requests  [{"method", "path", "form" (form bodies), "json"
                      (JSON bodies), "headers" (authorization,
                      content-type), "status" (or "reset"), "fault",
                      "time"}]; DELETE clears it
  GET  /_fake/tokens  [{"token", "kind" (oauth, sts, impersonated),
                      "email", "scope", "expires_in"}]
  POST /_fake/reset   forgets everything: config, tokens, faults, log

Python standard library only (and fake_common.py, next to it, for the
fault rules, the request plumbing, the JWT check and the server class).

Usage: sts_fake.py --port-file FILE [--jwt-public-key PEM] [--verbose]
"""

import argparse
import datetime
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse

import fake_common

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
SUBJECT_TYPES = (
	"urn:ietf:params:oauth:token-type:jwt",
	"urn:ietf:params:oauth:token-type:id_token",
	"urn:ietf:params:oauth:token-type:saml2",
	"urn:ietf:params:oauth:token-type:access_token",
	"urn:ietf:params:aws:token-type:aws4_request",
)
WORKLOAD_AUDIENCE = re.compile(
	r"//iam\.googleapis\.com/projects/[0-9]+/locations/global/"
	r"workloadIdentityPools/[a-z0-9-]+/providers/[a-z0-9-]+")
WORKFORCE_AUDIENCE = re.compile(
	r"//iam\.googleapis\.com/locations/global/workforcePools/"
	r"[a-z0-9-]+/providers/[a-z0-9-]+")
IAM_PATH = re.compile(r"/v1/projects/([^/]+)/serviceAccounts/([^/:]+)"
		      r":generateAccessToken")
DELEGATE = re.compile(r"projects/-/serviceAccounts/[^/]+")
LIFETIME = re.compile(r"([0-9]+)(\.[0-9]+)?s")
UNAUTHENTICATED = (
	"Request had invalid authentication credentials. Expected OAuth 2 "
	"access token, login cookie or other valid authentication "
	"credential. See https://developers.google.com/identity/sign-in/web/"
	"devconsole-project.")
MISSING_CREDENTIAL = (
	"Request is missing required authentication credential. Expected "
	"OAuth 2 access token, login cookie or other valid authentication "
	"credential. See https://developers.google.com/identity/sign-in/web/"
	"devconsole-project.")
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED",
		403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
		503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def default_config():
	return {
		"audience": None,
		"subject_token": None,
		"subject_headers": {},
		"impersonable": None,
		"token_expires_in": 3600,
		"impersonated_expires_in": None,
	}


BadRequest = fake_common.BadRequest


class Store:
	"""Config, issued tokens, faults and the request log, one lock."""

	def __init__(self):
		self.lock = threading.Lock()
		self.reset()

	def reset(self):
		with self.lock:
			self.config = default_config()
			self.tokens = {}
			self.faults = []
			self.requests = []

	def issue(self, kind, prefix, expires_in, scope, email=None):
		"""A new token (lock held)."""
		tok = "ya29.%s-%s" % (prefix, secrets.token_urlsafe(18))
		self.tokens[tok] = {"kind": kind, "email": email,
				    "scope": scope,
				    "expiry": time.monotonic() + expires_in}
		return tok

	def configure(self, doc):
		c = dict(self.config)
		for k, v in doc.items():
			if k not in c:
				raise BadRequest("unknown config key %r; keys are %s"
						 % (k, ", ".join(sorted(c))))
			if k in ("audience", "subject_token"):
				if v is not None and (not isinstance(v, str) or
						      not v):
					raise BadRequest("%s: a string or null" % k)
			elif k == "subject_headers":
				if not isinstance(v, dict) or not all(
						isinstance(x, str)
						for x in v.values()):
					raise BadRequest("subject_headers: {NAME: "
							 "VALUE}")
			elif k == "impersonable":
				if v is not None and (not isinstance(v, list) or
						      not all(isinstance(x, str)
							      for x in v)):
					raise BadRequest("impersonable: [EMAIL...] "
							 "or null")
			elif k == "token_expires_in" or v is not None:
				if not isinstance(v, int) or isinstance(v, bool) \
						or v <= 0:
					raise BadRequest("%s: a positive integer"
							 % k)
			c[k] = v
		self.config = c
		return c


class Fault(fake_common.Fault):
	"""fake_common.Fault's rule; a rule acts with status, reset or
	stall."""

	def __init__(self, rule):
		super().__init__(rule)
		if self.status is None and not self.reset and not self.stall:
			raise ValueError("a rule has one of status, reset, stall")
		if self.status is not None and self.reset:
			raise ValueError("status and reset exclude each other")
		if self.status is not None and not 400 <= self.status <= 599:
			raise ValueError("status: 400 to 599")


class ApiError(Exception):
	"""An answer in the error format of the service asked."""

	def __init__(self, status, message, oauth_error=None):
		super().__init__(message)
		self.status = status
		self.message = message
		self.oauth_error = oauth_error


class Handler(fake_common.TokenChecks, fake_common.Handler):
	server_version = "ESF"

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("sts-fake: %s\n" % (fmt % args))

	def send(self, status, doc, headers=()):
		"""doc: JSON, or a str sent as text/plain."""
		if isinstance(doc, str):
			data, ctype = doc.encode(), "text/plain; charset=UTF-8"
		else:
			data = json.dumps(doc, indent=1).encode() + b"\n"
			ctype = "application/json; charset=UTF-8"
		if self.log_entry is not None:
			self.log_entry["status"] = status
		self.send_response(status)
		self.send_header("Content-Type", ctype)
		for k, v in headers:
			self.send_header(k, v)
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		self.wfile.write(data)

	def is_oauth(self):
		return self.raw_path in ("/v1/token", "/token")

	def error_doc(self, status, message, oauth_error=None):
		if self.is_oauth():
			return {"error": oauth_error or "invalid_request",
				"error_description": message}
		return {"error": {"code": status, "message": message,
				  "status": STATUS_NAMES.get(status, "UNKNOWN")}}

	def send_fault(self, fault):
		extra = []
		if fault.retry_after is not None:
			extra.append(("Retry-After", str(fault.retry_after)))
		text = fault.rule.get("message") or \
			"Injected fault: HTTP %d" % fault.status
		self.send(fault.status, self.error_doc(
			fault.status, text, "temporarily_unavailable"
			if fault.status >= 500 else None), extra)

	# ---- the services

	def api_request(self):
		keep = ("authorization", "content-type")
		entry = {"method": self.command, "path": self.raw_path,
			 "form": None, "json": None,
			 "headers": {k.lower(): v for k, v in self.headers.items()
				     if k.lower() in keep},
			 "status": None, "fault": None, "time": time.time()}
		ctype = self.headers.get("Content-Type", "")
		if ctype.startswith("application/x-www-form-urlencoded"):
			entry["form"] = {k: v[-1] for k, v in urllib.parse.parse_qs(
				self.body.decode("utf-8", "replace"),
				keep_blank_values=True).items()}
		elif self.body:
			try:
				entry["json"] = json.loads(self.body)
			except ValueError:
				entry["json"] = None
		self.entry = entry
		self.send(*self.with_faults(entry, self.answer))

	def answer(self):
		try:
			return self.route()
		except ApiError as err:
			return err.status, self.error_doc(err.status, err.message,
							  err.oauth_error)

	def route(self):
		p, m = self.raw_path, self.command
		if p == "/v1/token":
			return self.need_post() or self.sts()
		if p == "/token":
			return self.need_post() or self.oauth()
		mo = IAM_PATH.fullmatch(p)
		if mo:
			return self.need_post() or self.generate(
				urllib.parse.unquote(mo.group(2)))
		if p in ("/subject/text", "/subject/json") and m == "GET":
			return self.subject(p.endswith("json"))
		raise ApiError(404, "The requested URL %s was not found on this "
			       "server." % p)

	def need_post(self):
		if self.command != "POST":
			raise ApiError(405, "Method %s is not allowed here; POST"
				       % self.command)
		return None

	def form(self):
		form = self.entry["form"]
		if form is None:
			raise ApiError(400, "The request body must be "
				       "application/x-www-form-urlencoded.",
				       "invalid_request")
		return form

	def sts(self):
		form = self.form()
		c = self.store.config
		grant = form.get("grant_type")
		if grant != TOKEN_EXCHANGE:
			raise ApiError(400, "Invalid value for \"grant_type\": "
				       "%s" % grant, "unsupported_grant_type")
		if form.get("requested_token_type") != ACCESS_TOKEN_TYPE:
			raise ApiError(400, "Invalid value for "
				       "\"requested_token_type\".",
				       "invalid_request")
		if form.get("subject_token_type") not in SUBJECT_TYPES:
			raise ApiError(400, "Invalid value for "
				       "\"subject_token_type\".",
				       "invalid_request")
		aud = form.get("audience", "")
		workforce = WORKFORCE_AUDIENCE.fullmatch(aud)
		if not (WORKLOAD_AUDIENCE.fullmatch(aud) or workforce) or \
				(c["audience"] is not None and aud != c["audience"]):
			raise ApiError(400, "The target service indicated by the "
				       "\"audience\" parameters is invalid. This "
				       "might either be because the pool or "
				       "provider is disabled or deleted or "
				       "because it doesn't exist.",
				       "invalid_target")
		scope = form.get("scope", "").split()
		if not scope:
			raise ApiError(400, "Scope(s) must be provided.",
				       "invalid_scope")
		if "options" in form:
			try:
				opts = json.loads(form["options"])
			except ValueError:
				opts = None
			if not isinstance(opts, dict) or not isinstance(
					opts.get("userProject", ""), str):
				raise ApiError(400, "Invalid value for "
					       "\"options\".", "invalid_request")
			if "userProject" in opts and not workforce:
				raise ApiError(400, "userProject is only "
					       "supported for workforce pools.",
					       "invalid_request")
		subject = form.get("subject_token", "")
		if not subject or (c["subject_token"] is not None and
				   subject != c["subject_token"]):
			raise ApiError(400, "The incoming token is invalid or "
				       "has expired.", "invalid_grant")
		with self.store.lock:
			tok = self.store.issue("sts", "sts", c["token_expires_in"],
					       scope)
		return 200, {"access_token": tok,
			     "issued_token_type": ACCESS_TOKEN_TYPE,
			     "token_type": "Bearer",
			     "expires_in": c["token_expires_in"]}

	def oauth(self):
		form = self.form()
		grant = form.get("grant_type")
		scope = [CLOUD_PLATFORM]
		if grant == "refresh_token":
			for k in ("client_id", "client_secret", "refresh_token"):
				if not form.get(k):
					raise ApiError(400, "Missing required "
						       "parameter: " + k,
						       "invalid_request")
			if form["refresh_token"] == "revoked":
				raise ApiError(400, "Token has been expired or "
					       "revoked.", "invalid_grant")
		elif grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
			try:
				self.check_jwt(form.get("assertion", ""))
			except fake_common.OAuthError as err:
				raise ApiError(400, str(err), "invalid_grant")
		else:
			raise ApiError(400, "Invalid grant_type: %s" % grant,
				       "unsupported_grant_type")
		n = self.store.config["token_expires_in"]
		with self.store.lock:
			tok = self.store.issue("oauth", "source", n, scope)
		return 200, {"access_token": tok, "expires_in": n,
			     "token_type": "Bearer", "scope": " ".join(scope)}

	def bearer(self):
		"""The issued token the request carries (401 otherwise)."""
		got = self.headers.get("Authorization")
		if got is None:
			raise ApiError(401, MISSING_CREDENTIAL)
		tok = got[len("Bearer "):] if got.startswith("Bearer ") else ""
		with self.store.lock:
			info = self.store.tokens.get(tok)
		if info is None or info["expiry"] <= time.monotonic():
			raise ApiError(401, UNAUTHENTICATED)
		return info

	def generate(self, email):
		info = self.bearer()
		if CLOUD_PLATFORM not in info["scope"]:
			raise ApiError(403, "Request had insufficient "
				       "authentication scopes.")
		doc = self.entry["json"]
		if not isinstance(doc, dict):
			raise ApiError(400, "Invalid JSON payload received.")
		unknown = set(doc) - {"scope", "delegates", "lifetime"}
		if unknown:
			raise ApiError(400, "Invalid JSON payload received. "
				       "Unknown name \"%s\": Cannot find field."
				       % sorted(unknown)[0])
		scope = doc.get("scope")
		if not isinstance(scope, list) or not scope or not all(
				isinstance(s, str) and s for s in scope):
			raise ApiError(400, "Scope required.")
		dels = doc.get("delegates", [])
		if not isinstance(dels, list) or not all(
				isinstance(d, str) and DELEGATE.fullmatch(d)
				for d in dels):
			raise ApiError(400, "Invalid form of delegates: each "
				       "must be projects/-/serviceAccounts/"
				       "{ACCOUNT_EMAIL_OR_UNIQUEID}.")
		life = doc.get("lifetime", "3600s")
		mo = LIFETIME.fullmatch(life) if isinstance(life, str) else None
		secs = int(mo.group(1)) if mo else 0
		if not 1 <= secs <= 3600:
			raise ApiError(400, "The lifetime requested is invalid: "
				       "it must be between 1s and 3600s.")
		allowed = self.store.config["impersonable"]
		chain = [d.rsplit("/", 1)[1] for d in dels] + [email]
		if allowed is not None and any(x not in allowed for x in chain):
			raise ApiError(403, "Permission 'iam.serviceAccounts."
				       "getAccessToken' denied on resource (or "
				       "it may not exist).")
		cap = self.store.config["impersonated_expires_in"]
		if cap is not None:
			secs = min(secs, cap)
		with self.store.lock:
			tok = self.store.issue("impersonated", "impersonated",
					       secs, scope, email)
		expire = datetime.datetime.now(datetime.timezone.utc) + \
			datetime.timedelta(seconds=secs)
		return 200, {"accessToken": tok, "expireTime":
			     expire.strftime("%Y-%m-%dT%H:%M:%SZ")}

	def subject(self, as_json):
		c = self.store.config
		for k, v in c["subject_headers"].items():
			if self.headers.get(k) != v:
				raise ApiError(403, "header %s: missing or wrong"
					       % k)
		tok = c["subject_token"] or "subject-token-from-url"
		return 200, {"id_token": tok} if as_json else tok

	# ---- /_fake control endpoints

	def route_fake(self):
		p, m = self.raw_path, self.command
		st = self.store
		if p == "/_fake/config" and m == "POST":
			doc = self.json_body()
			if not isinstance(doc, dict):
				raise BadRequest("config: a JSON object")
			with st.lock:
				return 200, st.configure(doc)
		if p == "/_fake/config" and m == "GET":
			with st.lock:
				return 200, dict(st.config)
		common = self.faults_and_log(Fault)
		if common is not None:
			return common
		if p == "/_fake/tokens" and m == "GET":
			now = time.monotonic()
			with st.lock:
				return 200, [{"token": t, "kind": i["kind"],
					      "email": i["email"],
					      "scope": i["scope"],
					      "expires_in": int(i["expiry"] - now)}
					     for t, i in st.tokens.items()]
		if p == "/_fake/reset" and m == "POST":
			st.reset()
			return 200, {}
		return 404, {"error": {"code": 404, "message": "no control "
				       "endpoint %s %s" % (m, p)}}


def main():
	ap = argparse.ArgumentParser(description="Fake STS, IAM Credentials "
				     "and OAuth token endpoints for tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--jwt-public-key")
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	srv = fake_common.Server(("127.0.0.1", 0), Handler)
	srv.store = Store()
	srv.verbose = args.verbose
	srv.jwt_public_key = args.jwt_public_key
	banner = None
	if args.verbose:
		banner = "sts-fake: on 127.0.0.1:%d\n" % srv.server_address[1]
	fake_common.serve([srv], args.port_file, banner)


if __name__ == "__main__":
	main()
