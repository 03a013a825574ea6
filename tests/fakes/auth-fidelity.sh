#!/bin/sh
# auth-fidelity.sh WORKDIR PROBE: the 'auth-fidelity' test. Starts
# sts_fake.py on loopback, installs Google's Node.js auth client
# (google-auth-library, major version 10) with npm into WORKDIR, runs
# auth-fidelity.js, which gets tokens through the fake with that client
# and with PROBE (slicectl's, auth-fidelity.c) from the same credentials
# files and compares their requests, and stops the fake by its pid. Exits
# 77 (meson's "skipped") only when node or npm is missing or npm's
# registry cannot be reached; any other failure fails the test.
set -u

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: auth-fidelity.sh WORKDIR PROBE}
probe=${2:?usage: auth-fidelity.sh WORKDIR PROBE}
mkdir -p "$work" || exit 1
python=${PYTHON:-python3}

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "auth-fidelity: SKIP: $tool is not installed" \
			"(apt-get install nodejs npm)" >&2
		exit 77
	fi
done

if [ ! -f "$work/node_modules/google-auth-library/package.json" ]; then
	if ! npm install --no-save --no-audit --no-fund --prefix "$work" \
		'google-auth-library@10' >"$work/npm.log" 2>&1; then
		if ! npm ping >/dev/null 2>&1; then
			echo "auth-fidelity: SKIP: npm's registry is" \
				"unreachable; see $work/npm.log" >&2
			exit 77
		fi
		echo "auth-fidelity: npm install failed:" >&2
		cat "$work/npm.log" >&2
		exit 1
	fi
fi

port_file="$work/port"
rm -f "$port_file"
"$python" "$here/sts_fake.py" --port-file "$port_file" \
	2>"$work/fake.log" &
fake=$!
trap 'kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null' EXIT
trap 'exit 1' INT TERM

tries=0
while [ ! -s "$port_file" ]; do
	if ! kill -0 "$fake" 2>/dev/null; then
		echo "auth-fidelity: the fake exited:" >&2
		cat "$work/fake.log" >&2
		exit 1
	fi
	tries=$((tries + 1))
	if [ "$tries" -gt 100 ]; then
		echo "auth-fidelity: the fake did not listen within 10 s" >&2
		exit 1
	fi
	sleep 0.1
done

NODE_PATH="$work/node_modules" node "$here/auth-fidelity.js" \
	"http://127.0.0.1:$(cat "$port_file")" "$probe" "$work"
status=$?
if [ "$status" -ne 0 ] && [ -s "$work/fake.log" ]; then
	echo "auth-fidelity: the fake's stderr:" >&2
	cat "$work/fake.log" >&2
fi
exit "$status"
