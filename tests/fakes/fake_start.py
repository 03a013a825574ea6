"""Starting a fake for the Python tests: a script next to this file that
takes --port-file and writes it once it listens. start() returns the
fake's Popen then, and raises, naming the fake, as soon as it exits or
once a deadline on the monotonic clock passes (the fake is killed): a
bound for a loaded machine, where Python may start slowly, not a pace.
stderr: where the fake's stderr goes (a file), the caller's when None.
The C tests' counterpart is fake_start() in tests/harness/fake_start.c."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def start(script, port_file, args=(), seconds=60, stderr=None):
	proc = subprocess.Popen([sys.executable, os.path.join(HERE, script),
				 "--port-file", port_file] + list(args),
				stderr=stderr)
	deadline = time.monotonic() + seconds
	while not os.path.exists(port_file):
		if proc.poll() is not None:
			raise RuntimeError("%s exited at start (status %d)" %
					   (script, proc.returncode))
		if time.monotonic() >= deadline:
			proc.kill()
			proc.wait()
			raise RuntimeError("%s did not listen within %d s" %
					   (script, seconds))
		time.sleep(0.05)
	return proc
