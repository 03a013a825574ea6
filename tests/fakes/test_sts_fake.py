#!/usr/bin/env python3
"""test_sts_fake.py: the 'auth-fakes' test. Starts sts_fake.py on loopback
and checks that it keeps the contract of the services it stands in for,
as slicectl and Google's clients rely on it: STS's token exchange (every
form field checked, workforce options, the configured audience and
subject token), IAM Credentials' generateAccessToken (the bearer token of
the source, its scope, delegates, lifetime, permission, expiry), the
OAuth token endpoint for source credentials, the subject-token URL and its
headers, each service's error format, fault injection (status, count,
Retry-After, reset, stall), the request log and the control endpoints.
"""

import datetime
import http.client
import json
import os
import socket
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_start  # noqa: E402
CLOUD = "https://www.googleapis.com/auth/cloud-platform"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"
JWT = "urn:ietf:params:oauth:token-type:jwt"
WORKLOAD = ("//iam.googleapis.com/projects/123/locations/global/"
	    "workloadIdentityPools/pool/providers/prov")
WORKFORCE = ("//iam.googleapis.com/locations/global/workforcePools/staff/"
	     "providers/idp")
SA = "target@proj.iam.gserviceaccount.com"
IAM = "/v1/projects/-/serviceAccounts/%s:generateAccessToken" % SA
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class Fake:
	"""One sts_fake.py process on loopback."""

	def __init__(self, *args):
		self.tmp = tempfile.TemporaryDirectory()
		self.port_file = os.path.join(self.tmp.name, "port")
		self.proc = fake_start.start("sts_fake.py", self.port_file, args)
		with open(self.port_file) as f:
			self.port = int(f.read().split()[0])

	def stop(self):
		self.proc.terminate()
		self.proc.wait(10)
		self.tmp.cleanup()

	def call(self, method, path, body=None, headers=None, timeout=30):
		"""(status, parsed JSON or text, response) of one request."""
		if body is not None and not isinstance(body, (str, bytes)):
			body = json.dumps(body)
		c = http.client.HTTPConnection("127.0.0.1", self.port,
					       timeout=timeout)
		try:
			c.request(method, path, body=body, headers=headers or {})
			r = c.getresponse()
			data = r.read().decode()
		finally:
			c.close()
		try:
			doc = json.loads(data)
		except ValueError:
			doc = data
		return r.status, doc, r


class StsFakeTest(unittest.TestCase):
	@classmethod
	def setUpClass(cls):
		cls.fake = Fake()

	@classmethod
	def tearDownClass(cls):
		cls.fake.stop()

	def setUp(self):
		self.control("POST", "/_fake/reset")

	def control(self, method, path, body=None, want=200):
		status, doc, _ = self.fake.call(method, path, body)
		self.assertEqual(status, want, doc)
		return doc

	def post_form(self, path, fields, headers=FORM):
		return self.fake.call("POST", path,
				      urllib.parse.urlencode(fields), headers)

	def exchange(self, **over):
		fields = {"grant_type": EXCHANGE, "audience": WORKLOAD,
			  "scope": CLOUD, "requested_token_type": ACCESS,
			  "subject_token": "eyJ.subject", "subject_token_type":
			  JWT}
		fields.update(over)
		fields = {k: v for k, v in fields.items() if v is not None}
		return self.post_form("/v1/token", fields)

	def source_token(self):
		status, doc, _ = self.post_form("/token", {
			"grant_type": "refresh_token", "client_id": "c",
			"client_secret": "s", "refresh_token": "r"})
		self.assertEqual(status, 200, doc)
		return doc["access_token"]

	def generate(self, token, body=None, path=IAM):
		headers = {"Content-Type": "application/json"}
		if token is not None:
			headers["Authorization"] = "Bearer " + token
		if body is None:
			body = {"scope": [CLOUD], "lifetime": "3600s"}
		return self.fake.call("POST", path, body, headers)

	def assert_oauth_error(self, answer, status, error, text=None):
		got, doc, _ = answer
		self.assertEqual(got, status, doc)
		self.assertEqual(doc["error"], error, doc)
		if text:
			self.assertIn(text, doc["error_description"])

	def assert_api_error(self, answer, status, name, text=None):
		got, doc, _ = answer
		self.assertEqual(got, status, doc)
		self.assertEqual(doc["error"]["code"], status)
		self.assertEqual(doc["error"]["status"], name)
		if text:
			self.assertIn(text, doc["error"]["message"])

	# ---- STS

	def test_sts_exchange(self):
		status, doc, r = self.exchange()
		self.assertEqual(status, 200, doc)
		self.assertTrue(doc["access_token"].startswith("ya29.sts-"))
		self.assertEqual(doc["issued_token_type"], ACCESS)
		self.assertEqual(doc["token_type"], "Bearer")
		self.assertEqual(doc["expires_in"], 3600)
		self.assertTrue(r.getheader("Content-Type").startswith(
			"application/json"))
		status, doc, _ = self.exchange(audience=WORKFORCE,
					       options='{"userProject": "p"}')
		self.assertEqual(status, 200, doc)

	def test_sts_checks_every_field(self):
		self.assert_oauth_error(self.exchange(grant_type="password"),
					400, "unsupported_grant_type")
		self.assert_oauth_error(self.exchange(
			requested_token_type=JWT), 400, "invalid_request",
			"requested_token_type")
		self.assert_oauth_error(self.exchange(
			subject_token_type="urn:x"), 400, "invalid_request",
			"subject_token_type")
		self.assert_oauth_error(self.exchange(
			audience="//iam.googleapis.com/projects/p/pools/x"),
			400, "invalid_target")
		self.assert_oauth_error(self.exchange(scope=None), 400,
					"invalid_scope")
		self.assert_oauth_error(self.exchange(subject_token=None), 400,
					"invalid_grant")
		self.assert_oauth_error(self.exchange(
			options='{"userProject": "p"}'), 400, "invalid_request",
			"workforce")
		self.assert_oauth_error(self.exchange(options="[1]"), 400,
					"invalid_request", "options")
		self.assert_oauth_error(self.fake.call(
			"POST", "/v1/token", json.dumps({"grant_type": EXCHANGE}),
			{"Content-Type": "application/json"}), 400,
			"invalid_request", "x-www-form-urlencoded")
		status, doc, _ = self.fake.call("GET", "/v1/token")
		self.assertEqual(status, 405, doc)

	def test_sts_configured_audience_and_subject(self):
		self.control("POST", "/_fake/config", {
			"audience": WORKLOAD, "subject_token": "good"})
		self.assert_oauth_error(self.exchange(subject_token="bad"), 400,
					"invalid_grant", "invalid or has expired")
		self.assert_oauth_error(self.exchange(
			audience=WORKLOAD.replace("prov", "other"),
			subject_token="good"), 400, "invalid_target")
		self.assertEqual(self.exchange(subject_token="good")[0], 200)

	# ---- OAuth for the source credential

	def test_oauth_refresh_and_grants(self):
		tok = self.source_token()
		self.assertTrue(tok.startswith("ya29.source-"))
		self.assert_oauth_error(self.post_form("/token", {
			"grant_type": "refresh_token", "client_id": "c",
			"refresh_token": "r"}), 400, "invalid_request",
			"client_secret")
		self.assert_oauth_error(self.post_form("/token", {
			"grant_type": "refresh_token", "client_id": "c",
			"client_secret": "s", "refresh_token": "revoked"}), 400,
			"invalid_grant", "expired or revoked")
		self.assert_oauth_error(self.post_form("/token", {
			"grant_type": "urn:ietf:params:oauth:grant-type:"
			"jwt-bearer", "assertion": "not.a-jwt"}), 400,
			"invalid_grant", "Invalid JWT")
		self.assert_oauth_error(self.post_form("/token", {
			"grant_type": "client_credentials"}), 400,
			"unsupported_grant_type")

	# ---- IAM Credentials

	def test_generate_access_token(self):
		src = self.source_token()
		before = datetime.datetime.now(datetime.timezone.utc)
		status, doc, _ = self.generate(src, {
			"scope": [CLOUD], "lifetime": "600s", "delegates": [
				"projects/-/serviceAccounts/hop@p.iam."
				"gserviceaccount.com"]})
		self.assertEqual(status, 200, doc)
		self.assertEqual(sorted(doc), ["accessToken", "expireTime"])
		self.assertTrue(doc["accessToken"].startswith(
			"ya29.impersonated-"))
		expire = datetime.datetime.strptime(
			doc["expireTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
				tzinfo=datetime.timezone.utc)
		self.assertLess(abs((expire - before).total_seconds() - 600), 5)
		# The impersonated token may buy another (a chain).
		status, doc2, _ = self.generate(doc["accessToken"])
		self.assertEqual(status, 200, doc2)
		toks = {t["token"]: t for t in self.control(
			"GET", "/_fake/tokens")}
		self.assertEqual(toks[doc["accessToken"]]["kind"],
				 "impersonated")
		self.assertEqual(toks[doc["accessToken"]]["email"], SA)
		self.assertEqual(toks[src]["kind"], "oauth")

	def test_generate_checks_the_bearer(self):
		self.assert_api_error(self.generate(None), 401,
				      "UNAUTHENTICATED", "missing required")
		self.assert_api_error(self.generate("ya29.made-up"), 401,
				      "UNAUTHENTICATED", "invalid authentication")
		self.control("POST", "/_fake/config", {"token_expires_in": 1})
		src = self.source_token()
		time.sleep(1.1)
		self.assert_api_error(self.generate(src), 401, "UNAUTHENTICATED")
		# A token bought for another scope cannot impersonate.
		self.control("POST", "/_fake/config", {"token_expires_in": 3600})
		src = self.source_token()
		status, doc, _ = self.generate(src, {"scope": [
			"https://www.googleapis.com/auth/devstorage.read_only"]})
		self.assertEqual(status, 200, doc)
		self.assert_api_error(self.generate(doc["accessToken"]), 403,
				      "PERMISSION_DENIED", "insufficient")

	def test_generate_checks_the_body(self):
		src = self.source_token()
		self.assert_api_error(self.generate(src, {"lifetime": "60s"}),
				      400, "INVALID_ARGUMENT", "Scope required")
		self.assert_api_error(self.generate(src, {
			"scope": [CLOUD], "delegates": ["hop@p.iam"]}), 400,
			"INVALID_ARGUMENT", "delegates")
		for bad in ("0s", "3601s", "60", 60):
			self.assert_api_error(self.generate(src, {
				"scope": [CLOUD], "lifetime": bad}), 400,
				"INVALID_ARGUMENT", "lifetime")
		self.assert_api_error(self.generate(src, {
			"scope": [CLOUD], "scopes": [CLOUD]}), 400,
			"INVALID_ARGUMENT", "Unknown name \"scopes\"")
		self.assert_api_error(self.generate(src, "not json"), 400,
				      "INVALID_ARGUMENT")
		status, doc, _ = self.fake.call(
			"GET", IAM, headers={"Authorization": "Bearer " + src})
		self.assertEqual(status, 405, doc)

	def test_generate_permission_and_expiry_cap(self):
		src = self.source_token()
		self.control("POST", "/_fake/config", {
			"impersonable": ["other@p.iam.gserviceaccount.com"]})
		self.assert_api_error(self.generate(src), 403,
				      "PERMISSION_DENIED",
				      "iam.serviceAccounts.getAccessToken")
		self.control("POST", "/_fake/config", {
			"impersonable": [SA], "impersonated_expires_in": 2})
		self.assert_api_error(self.generate(src, {
			"scope": [CLOUD], "delegates": [
				"projects/-/serviceAccounts/x@p"]}), 403,
			"PERMISSION_DENIED")
		status, doc, _ = self.generate(src)
		self.assertEqual(status, 200, doc)
		toks = {t["token"]: t for t in self.control(
			"GET", "/_fake/tokens")}
		self.assertLessEqual(toks[doc["accessToken"]]["expires_in"], 2)

	# ---- subject token URL

	def test_subject_url(self):
		self.control("POST", "/_fake/config", {
			"subject_token": "idp", "subject_headers": {"X-Id": "1"}})
		status, doc, _ = self.fake.call("GET", "/subject/text")
		self.assertEqual(status, 403, doc)
		status, doc, r = self.fake.call("GET", "/subject/text",
						headers={"X-Id": "1"})
		self.assertEqual((status, doc), (200, "idp"))
		self.assertTrue(r.getheader("Content-Type").startswith(
			"text/plain"))
		status, doc, _ = self.fake.call("GET", "/subject/json",
						headers={"X-Id": "1"})
		self.assertEqual((status, doc), (200, {"id_token": "idp"}))

	# ---- faults, log, control

	def test_faults_in_each_services_format(self):
		self.control("POST", "/_fake/faults", [
			{"path": "^/v1/token", "status": 503, "retry_after": 2},
			{"path": "generateAccessToken", "status": 429,
			 "count": 2}])
		got = self.exchange()
		self.assert_oauth_error(got, 503, "temporarily_unavailable")
		self.assertEqual(got[2].getheader("Retry-After"), "2")
		self.assertEqual(self.exchange()[0], 200)
		src = self.source_token()
		self.assert_api_error(self.generate(src), 429,
				      "RESOURCE_EXHAUSTED", "Injected")
		self.assert_api_error(self.generate(src), 429,
				      "RESOURCE_EXHAUSTED")
		self.assertEqual(self.generate(src)[0], 200)
		rules = self.control("GET", "/_fake/faults")
		self.assertEqual([r["count"] for r in rules], [0, 0])
		self.control("DELETE", "/_fake/faults")
		self.assertEqual(self.control("GET", "/_fake/faults"), [])

	def test_fault_reset_and_stall(self):
		self.control("POST", "/_fake/faults", {"path": "^/token",
						       "reset": True})
		with self.assertRaises((ConnectionError, http.client.HTTPException,
					socket.error)):
			self.source_token()
		self.control("POST", "/_fake/faults", {"path": "^/token",
						       "stall": 0.5})
		t0 = time.monotonic()
		self.source_token()
		self.assertGreaterEqual(time.monotonic() - t0, 0.45)
		log = self.control("GET", "/_fake/requests")
		self.assertEqual([e["status"] for e in log], ["reset", 200])

	def test_request_log_and_bad_control(self):
		self.exchange()
		self.generate(self.source_token())
		log = self.control("GET", "/_fake/requests")
		self.assertEqual([e["path"] for e in log],
				 ["/v1/token", "/token", IAM])
		self.assertEqual(log[0]["form"]["subject_token"], "eyJ.subject")
		self.assertEqual(log[2]["json"]["scope"], [CLOUD])
		self.assertTrue(log[2]["headers"]["authorization"].startswith(
			"Bearer ya29.source-"))
		self.assertEqual([e["status"] for e in log], [200, 200, 200])
		self.control("DELETE", "/_fake/requests")
		self.assertEqual(self.control("GET", "/_fake/requests"), [])
		for bad in ({"nosuch": 1}, {"token_expires_in": 0},
			    {"impersonable": "a"}, {"subject_headers": []}):
			self.control("POST", "/_fake/config", bad, want=400)
		self.control("POST", "/_fake/faults", {"status": 200}, want=400)
		self.control("POST", "/_fake/faults", {"path": "x"}, want=400)
		self.control("GET", "/_fake/nosuch", want=404)
		status, _, _ = self.fake.call("GET", "/v1/other")
		self.assertEqual(status, 404)


if __name__ == "__main__":
	unittest.main(verbosity=2)
