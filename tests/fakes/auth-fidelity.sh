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

name=auth-fidelity
here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: auth-fidelity.sh WORKDIR PROBE}
probe=${2:?usage: auth-fidelity.sh WORKDIR PROBE}
mkdir -p "$work" || exit 1
. "$here/fidelity-lib.sh"

fidelity_tools
fidelity_npm_install "$work" google-auth-library 'google-auth-library@10'
fidelity_start_fake "$work" sts_fake.py
NODE_PATH="$work/node_modules" node "$here/auth-fidelity.js" "$fake_base" \
	"$probe" "$work"
fidelity_finish $?
