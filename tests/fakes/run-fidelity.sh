#!/bin/sh
# run-fidelity.sh WORKDIR [gcs|tpu|monitoring|vertex]: the 'gcs-fidelity',
# 'tpu-fidelity', 'monitoring-fidelity' and 'vertex-fidelity' tests. Starts
# the fake (gcs_fake.py, tpu_fake.py, monitoring_fake.py or vertex_fake.py)
# on loopback, installs Google's Node.js client for it with npm into WORKDIR
# (@google-cloud/storage 7, @google-cloud/tpu 3 with the google-auth-library
# and protobufjs it runs on, @google-cloud/monitoring 4 with
# google-auth-library, or @google-cloud/aiplatform 4, the last for Node.js
# 18, with google-auth-library 10), runs fidelity.js, tpu-fidelity.js,
# monitoring-fidelity.js or vertex-fidelity.js against it and stops
# the fake by its pid. Exits 77 (meson's "skipped") only when node or npm
# is missing or npm's registry cannot be reached; any other failure of the
# install or of a check fails the test.
set -u

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: run-fidelity.sh WORKDIR [gcs|tpu|monitoring|vertex]}
kind=${2:-gcs}
case "$kind" in
gcs)	packages='@google-cloud/storage@7'
	installed=@google-cloud/storage
	fake_script=gcs_fake.py
	script=fidelity.js ;;
tpu)	packages='@google-cloud/tpu@3 google-auth-library@9 protobufjs@7'
	installed=@google-cloud/tpu
	fake_script=tpu_fake.py
	script=tpu-fidelity.js ;;
monitoring)	packages='@google-cloud/monitoring@4 google-auth-library@9'
	installed=@google-cloud/monitoring
	fake_script=monitoring_fake.py
	script=monitoring-fidelity.js ;;
vertex)	packages='@google-cloud/aiplatform@4 google-auth-library@10'
	installed=@google-cloud/aiplatform
	fake_script=vertex_fake.py
	script=vertex-fidelity.js ;;
*)	echo "run-fidelity.sh: no such client: $kind" >&2
	exit 2 ;;
esac
name=$kind-fidelity
mkdir -p "$work" || exit 1
. "$here/fidelity-lib.sh"

fidelity_tools
# shellcheck disable=SC2086 # $packages is a list of names
fidelity_npm_install "$work" "$installed" $packages
fidelity_start_fake "$work" "$fake_script"
NODE_PATH="$work/node_modules" node "$here/$script" "$fake_base"
fidelity_finish $?
