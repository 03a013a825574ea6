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
name=kube-fidelity
. "$here/fidelity-lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "kube-fidelity: SKIP: the fake's pods need root" \
		"(private mount namespaces)" >&2
	exit 77
fi
fidelity_tools
fidelity_npm_install "$work" @kubernetes/client-node \
	'@kubernetes/client-node@1' 'js-yaml@4'

# What the fake's YAML reader makes of each CRD file, for js-yaml to judge.
crds=$(cd "$here" && "$python" -c \
	'import kube_fake; print(kube_fake.default_crds())') || exit 1
rm -rf "$work/yaml" && mkdir -p "$work/yaml" || exit 1
dumps=""
for f in "$crds"/*.yaml; do
	out="$work/yaml/$(basename "$f").json"
	(cd "$here" && "$python" -c 'import json, sys, kube_yaml
with open(sys.argv[1]) as f:
	docs = kube_yaml.load_yaml(f.read())
with open(sys.argv[2], "w") as f:
	json.dump(docs, f)' "$f" "$out") || exit 1
	dumps="$dumps $f=$out"
done

rm -rf "$work/state"
fidelity_start_fake "$work" kube_fake.py --tls --require-token "$token" \
	--state-dir "$work/state"
server="https://127.0.0.1:$fake_port"
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
fidelity_finish "$status"
