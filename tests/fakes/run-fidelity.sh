#!/bin/sh
# run-fidelity.sh WORKDIR: the 'gcs-fidelity' test. Starts gcs_fake.py on
# loopback, installs Google's Node.js client (@google-cloud/storage, major
# version 7) with npm into WORKDIR, runs fidelity.js against the fake and
# stops the fake by its pid. Exits 77 (meson's "skipped") only when node or
# npm is missing or npm's registry cannot be reached; any other failure of
# the install or of a check fails the test.
set -u

name=gcs-fidelity
here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: run-fidelity.sh WORKDIR}
mkdir -p "$work" || exit 1
. "$here/fidelity-lib.sh"

fidelity_tools
fidelity_npm_install "$work" @google-cloud/storage '@google-cloud/storage@7'
fidelity_start_fake "$work" gcs_fake.py
NODE_PATH="$work/node_modules" node "$here/fidelity.js" "$fake_base"
fidelity_finish $?
