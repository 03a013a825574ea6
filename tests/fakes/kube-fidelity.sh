#!/bin/sh
# kube-fidelity.sh WORKDIR: the 'kube-fidelity' test. Starts kube_fake.py
# on loopback with TLS and a bearer token, installs the Kubernetes
# JavaScript client (@kubernetes/client-node, major version 1) and js-yaml
# with npm into WORKDIR, and runs kube-fidelity.js against the fake (which
# also checks the fake's YAML reader against js-yaml on every CRD file);
# then kubectl, when installed, creates, reads, waits for, lists the pods
# and logs of, and deletes a JobSet. Stops the fake by its pid. Exits 77
# (meson's "skipped") only when node or npm is missing, npm's registry
# cannot be reached, or not root (the fake's pods need mount namespaces);
# a missing kubectl skips only its part, with a message.
set -u

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: kube-fidelity.sh WORKDIR}
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)
python=${PYTHON:-python3}
token=fidelity-token

if [ "$(id -u)" -ne 0 ]; then
	echo "kube-fidelity: SKIP: the fake's pods need root" \
		"(private mount namespaces)" >&2
	exit 77
fi
for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "kube-fidelity: SKIP: $tool is not installed" \
			"(apt-get install nodejs npm)" >&2
		exit 77
	fi
done

if [ ! -f "$work/node_modules/@kubernetes/client-node/package.json" ] ||
	[ ! -f "$work/node_modules/js-yaml/package.json" ]; then
	if ! npm install --no-save --no-audit --no-fund --prefix "$work" \
		'@kubernetes/client-node@1' 'js-yaml@4' \
		>"$work/npm.log" 2>&1; then
		if ! npm ping >/dev/null 2>&1; then
			echo "kube-fidelity: SKIP: npm's registry is" \
				"unreachable; see $work/npm.log" >&2
			exit 77
		fi
		echo "kube-fidelity: npm install failed:" >&2
		cat "$work/npm.log" >&2
		exit 1
	fi
fi

# What the fake's YAML reader makes of each CRD file, for js-yaml to judge.
crds=$(cd "$here" && "$python" -c \
	'import kube_fake; print(kube_fake.default_crds())') || exit 1
rm -rf "$work/yaml" && mkdir -p "$work/yaml" || exit 1
dumps=""
for f in "$crds"/*.yaml; do
	out="$work/yaml/$(basename "$f").json"
	(cd "$here" && "$python" -c 'import json, sys, kube_fake
with open(sys.argv[1]) as f:
	docs = kube_fake.load_yaml(f.read())
with open(sys.argv[2], "w") as f:
	json.dump(docs, f)' "$f" "$out") || exit 1
	dumps="$dumps $f=$out"
done

port_file="$work/port"
rm -rf "$port_file" "$work/state"
"$python" "$here/kube_fake.py" --port-file "$port_file" --tls \
	--require-token "$token" --state-dir "$work/state" \
	2>"$work/fake.log" &
fake=$!
trap 'kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null' EXIT
trap 'exit 1' INT TERM

tries=0
while [ ! -s "$port_file" ]; do
	if ! kill -0 "$fake" 2>/dev/null; then
		echo "kube-fidelity: the fake exited:" >&2
		cat "$work/fake.log" >&2
		exit 1
	fi
	tries=$((tries + 1))
	if [ "$tries" -gt 200 ]; then
		echo "kube-fidelity: the fake did not listen within 20 s" >&2
		exit 1
	fi
	sleep 0.1
done
server="https://127.0.0.1:$(head -n 1 "$port_file")"
ca="$work/state/ca.pem"

# shellcheck disable=SC2086 # one argument per CRD file
NODE_PATH="$work/node_modules" node "$here/kube-fidelity.js" \
	"$server" "$ca" "$token" $dumps
status=$?

if [ "$status" -eq 0 ]; then
	if command -v kubectl >/dev/null 2>&1; then
		"$here/kube-fidelity-kubectl.sh" "$work" "$server" "$ca" \
			"$token"
		status=$?
	else
		echo "kube-fidelity: kubectl is not installed: its part" \
			"is skipped" >&2
	fi
fi
if [ "$status" -ne 0 ] && [ -s "$work/fake.log" ]; then
	echo "kube-fidelity: the fake's stderr:" >&2
	cat "$work/fake.log" >&2
fi
exit "$status"
