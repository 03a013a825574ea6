#!/usr/bin/env python3
"""A receiver of slicectl's notifications for its tests: what Slack's
incoming webhooks (and any JSON webhook) are to a real run. It records
every POST's body and answers 200 "ok", as Slack does; fake_common.py's
fault rules make it answer an error (500, 503...), drop the connection or
stall first.

- POST any path (not /_fake/): the notification. Its body must be JSON
  with a string "text" (400 otherwise, as Slack refuses a payload without
  one); logged with its JSON.

Control endpoints (JSON in and out):
  POST /_fake/faults    fake_common.py's rules: {"method", "path" (regex
                        on path?query), "count" (default 1, < 0: always),
                        then "status" (+ "message"), "reset": true or
                        "stall": S}; GET lists them, DELETE clears
  GET  /_fake/requests  [{"method", "path", "json", "status", "fault",
                        "time"}]; DELETE clears it

--port N serves on that port (a test that starts the receiver only after
the notifier has tried it: the receiver was down); 0, the default, any.

Python standard library only (and fake_common.py, next to it).

Usage: notify_receiver.py --port-file FILE [--port N] [--verbose]
"""

import argparse
import json
import sys
import threading
import time

import fake_common


class Store:
	def __init__(self):
		self.lock = threading.Lock()
		self.faults = []
		self.requests = []


class Handler(fake_common.Handler):
	server_version = "NotifyReceiver"

	def log_message(self, fmt, *args):
		if self.server.verbose:
			sys.stderr.write("notify-receiver: " + fmt % args + "\n")

	def send_text(self, status, text):
		data = text.encode()
		self.send_response(status)
		self.send_header("Content-Type", "text/plain; charset=utf-8")
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		self.wfile.write(data)

	def send_fault(self, fault):
		self.send_text(fault.status, fault.rule.get("message") or
			       "injected fault: HTTP %d" % fault.status)

	def api_request(self):
		entry = {"method": self.command, "path": self.raw_path,
			 "json": None, "status": None, "fault": None,
			 "time": time.time()}
		status, text = self.with_faults(entry, lambda: self.answer(entry))
		entry["status"] = status
		self.send_text(status, text)

	def answer(self, entry):
		if self.command != "POST":
			return 405, "method not allowed"
		try:
			doc = json.loads(self.body)
		except ValueError:
			return 400, "invalid_payload"
		entry["json"] = doc
		if not isinstance(doc, dict) or \
				not isinstance(doc.get("text"), str):
			return 400, "no_text"
		return 200, "ok"

	def route_fake(self):
		answer = self.faults_and_log(fake_common.Fault)
		if answer is None:
			raise fake_common.BadRequest("no such control endpoint")
		return answer


def main():
	ap = argparse.ArgumentParser(description="A notification receiver "
				     "for tests")
	ap.add_argument("--port-file", required=True)
	ap.add_argument("--port", type=int, default=0)
	ap.add_argument("--verbose", action="store_true")
	args = ap.parse_args()

	srv = fake_common.Server(("127.0.0.1", args.port), Handler)
	srv.store = Store()
	srv.verbose = args.verbose
	fake_common.serve([srv], args.port_file)


if __name__ == "__main__":
	main()
