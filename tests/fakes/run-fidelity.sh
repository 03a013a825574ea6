#!/bin/sh
# run-fidelity.sh WORKDIR [gcs|tpu]: the 'gcs-fidelity' and 'tpu-fidelity'
# tests. Starts the fake (gcs_fake.py or tpu_fake.py) on loopback, installs
# Google's Node.js client for it with npm into WORKDIR (@google-cloud/storage
# 7, or @google-cloud/tpu 3 with the google-auth-library and protobufjs it
# runs on), runs fidelity.js or tpu-fidelity.js against the fake and stops
# the fake by its pid. Exits 77 (meson's "skipped") only when node or npm
# is missing or npm's registry cannot be reached; any other failure of the
# install or of a check fails the test.
set -u

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: run-fidelity.sh WORKDIR [gcs|tpu]}
kind=${2:-gcs}
case "$kind" in
gcs)	packages='@google-cloud/storage@7'
	installed=@google-cloud/storage
	fake=gcs_fake.py
	script=fidelity.js ;;
tpu)	packages='@google-cloud/tpu@3 google-auth-library@9 protobufjs@7'
	installed=@google-cloud/tpu
	fake=tpu_fake.py
	script=tpu-fidelity.js ;;
*)	echo "run-fidelity.sh: no such client: $kind" >&2
	exit 2 ;;
esac
name=$kind-fidelity
mkdir -p "$work" || exit 1
python=${PYTHON:-python3}

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$name: SKIP: $tool is not installed" \
			"(apt-get install nodejs npm)" >&2
		exit 77
	fi
done

if [ ! -f "$work/node_modules/$installed/package.json" ]; then
	# shellcheck disable=SC2086 # $packages is a list of names
	if ! npm install --no-save --no-audit --no-fund --prefix "$work" \
		$packages >"$work/npm.log" 2>&1; then
		if ! npm ping >/dev/null 2>&1; then
			echo "$name: SKIP: npm's registry is" \
				"unreachable; see $work/npm.log" >&2
			exit 77
		fi
		echo "$name: npm install failed:" >&2
		cat "$work/npm.log" >&2
		exit 1
	fi
fi

port_file="$work/port"
rm -f "$port_file"
"$python" "$here/$fake" --port-file "$port_file" \
	2>"$work/fake.log" &
fake=$!
trap 'kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null' EXIT
trap 'exit 1' INT TERM

tries=0
while [ ! -s "$port_file" ]; do
	if ! kill -0 "$fake" 2>/dev/null; then
		echo "$name: the fake exited:" >&2
		cat "$work/fake.log" >&2
		exit 1
	fi
	tries=$((tries + 1))
	if [ "$tries" -gt 100 ]; then
		echo "$name: the fake did not listen within 10 s" >&2
		exit 1
	fi
	sleep 0.1
done

NODE_PATH="$work/node_modules" node "$here/$script" \
	"http://127.0.0.1:$(cat "$port_file")"
status=$?
if [ "$status" -ne 0 ] && [ -s "$work/fake.log" ]; then
	echo "$name: the fake's stderr:" >&2
	cat "$work/fake.log" >&2
fi
exit "$status"
