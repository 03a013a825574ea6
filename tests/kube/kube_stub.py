#!/usr/bin/env python3
"""
tests/kube/kube_stub.py: a loopback HTTP(S) server that answers from a
script, for the Kubernetes client's tests: the exact failures a faithful
API fake should not have to stage (drops, stalls, a watch stream cut in
the middle, a Status of any shape) and TLS with a CA the test makes.

  kube_stub.py --port-file F --script S.json --log L.jsonl
               [--cert PEM --key PEM [--client-ca PEM]]

The script is a JSON list of answers. Each request takes the first
answer not yet used whose "method" and "path" (a prefix of the path with
its query) match, or is answered 418 when none does. Answer fields:
  status, body (JSON value or text), headers {name: value}
  repeat: true     never used up
  drop: true       close the connection without answering
  stall_ms: N      send the headers and part of the body, then wait
  events: [...]    a watch stream: each one JSON line, chunked, then the
                   stream ends (end: "cut" drops it without the last chunk)
  event_delay_ms   between events
Every request is appended to the log as one JSON line: method, path,
headers (lower-case names) and body.
"""
import argparse
import http.server
import json
import os
import socket
import ssl
import threading
import time


class Stub:
	def __init__(self, script, log):
		self.answers = script
		self.used = [False] * len(script)
		self.log = log
		self.lock = threading.Lock()

	def take(self, method, path):
		with self.lock:
			for i, a in enumerate(self.answers):
				if self.used[i]:
					continue
				if a.get("method", method) != method:
					continue
				if not path.startswith(a.get("path", "")):
					continue
				if not a.get("repeat"):
					self.used[i] = True
				return a
		return None

	def record(self, entry):
		with self.lock, open(self.log, "a") as f:
			f.write(json.dumps(entry) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
	protocol_version = "HTTP/1.1"

	def log_message(self, *args):
		pass

	def handle_any(self):
		stub = self.server.stub
		n = int(self.headers.get("Content-Length") or 0)
		body = self.rfile.read(n).decode() if n else ""
		stub.record({"method": self.command, "path": self.path,
			     "headers": {k.lower(): v for k, v in
					 self.headers.items()},
			     "body": body})
		a = stub.take(self.command, self.path)
		if a is None:
			a = {"status": 418, "body": {
				"kind": "Status", "status": "Failure",
				"message": "no scripted answer for %s %s" %
				(self.command, self.path), "code": 418}}
		if a.get("drop"):
			self.close_connection = True
			self.connection.shutdown(socket.SHUT_RDWR)
			return
		if "events" in a:
			self.stream(a)
			return
		payload = a.get("body", "")
		if not isinstance(payload, str):
			payload = json.dumps(payload)
		data = payload.encode()
		self.send_response(a.get("status", 200))
		self.send_header("Content-Type", "application/json")
		for k, v in a.get("headers", {}).items():
			self.send_header(k, v)
		self.send_header("Content-Length", str(len(data)))
		self.end_headers()
		if "stall_ms" in a:
			self.wfile.write(data[:len(data) // 2])
			self.wfile.flush()
			time.sleep(a["stall_ms"] / 1000)
			self.close_connection = True
			return
		self.wfile.write(data)

	def stream(self, a):
		self.send_response(a.get("status", 200))
		self.send_header("Content-Type", "application/json")
		self.send_header("Transfer-Encoding", "chunked")
		self.end_headers()
		for ev in a["events"]:
			line = (json.dumps(ev) + "\n").encode()
			self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
			self.wfile.flush()
			time.sleep(a.get("event_delay_ms", 0) / 1000)
		if a.get("end") == "cut":
			self.close_connection = True
			self.connection.shutdown(socket.SHUT_RDWR)
			return
		self.wfile.write(b"0\r\n\r\n")

	do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def main():
	p = argparse.ArgumentParser()
	p.add_argument("--port-file", required=True)
	p.add_argument("--script", required=True)
	p.add_argument("--log", required=True)
	p.add_argument("--cert")
	p.add_argument("--key")
	p.add_argument("--client-ca")
	args = p.parse_args()
	with open(args.script) as f:
		script = json.load(f)
	srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
	srv.daemon_threads = True
	srv.stub = Stub(script, args.log)
	if args.cert:
		ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
		ctx.load_cert_chain(args.cert, args.key)
		if args.client_ca:
			ctx.verify_mode = ssl.CERT_REQUIRED
			ctx.load_verify_locations(args.client_ca)
		srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
	tmp = args.port_file + ".tmp"
	with open(tmp, "w") as f:
		f.write("%d\n" % srv.server_address[1])
	os.rename(tmp, args.port_file)
	srv.serve_forever()


if __name__ == "__main__":
	main()
