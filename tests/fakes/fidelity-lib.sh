# fidelity-lib.sh: what the fidelity tests (run-fidelity.sh, auth-fidelity.sh)
# share, sourced by them: node and npm present, a Google client installed
# with npm into the test's work directory, and a fake started on loopback
# and stopped by its pid when the test exits. Each function exits the
# script: 77 (meson's "skipped") only when node or npm is missing or npm's
# registry cannot be reached, 1 on any other failure. $name (the test's
# name) prefixes every message.

# fidelity_tools: node and npm, or skip.
fidelity_tools() {
	for tool in node npm; do
		if ! command -v "$tool" >/dev/null 2>&1; then
			echo "$name: SKIP: $tool is not installed" \
				"(apt-get install nodejs npm)" >&2
			exit 77
		fi
	done
}

# fidelity_npm_install WORK PACKAGE-DIR SPEC...: installs the SPECs into
# WORK/node_modules unless WORK/node_modules/PACKAGE-DIR is there.
fidelity_npm_install() {
	[ -f "$1/node_modules/$2/package.json" ] && return 0
	work_dir=$1
	shift 2
	if ! npm install --no-save --no-audit --no-fund --prefix "$work_dir" \
		"$@" >"$work_dir/npm.log" 2>&1; then
		if ! npm ping >/dev/null 2>&1; then
			echo "$name: SKIP: npm's registry is unreachable;" \
				"see $work_dir/npm.log" >&2
			exit 77
		fi
		echo "$name: npm install failed:" >&2
		cat "$work_dir/npm.log" >&2
		exit 1
	fi
}

# fidelity_start_fake WORK SCRIPT [ARG...]: starts the fake (a Python
# script next to this file that takes --port-file) with the ARGs, its
# stderr in WORK/fake.log, and waits until it listens; sets $fake_port to
# the first port it wrote and $fake_base to http://127.0.0.1:PORT. The
# fake is stopped by its pid when the shell exits.
fidelity_start_fake() {
	port_file="$1/port"
	fake_log="$1/fake.log"
	fake_script=$2
	shift 2
	rm -f "$port_file"
	"${PYTHON:-python3}" "$here/$fake_script" --port-file "$port_file" \
		"$@" 2>"$fake_log" &
	fake=$!
	trap 'kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null' EXIT
	trap 'exit 1' INT TERM
	end=$(($(date +%s) + 20))
	while [ ! -s "$port_file" ]; do
		if ! kill -0 "$fake" 2>/dev/null; then
			echo "$name: the fake exited:" >&2
			cat "$fake_log" >&2
			exit 1
		fi
		if [ "$(date +%s)" -ge "$end" ]; then
			echo "$name: the fake did not listen within 20 s:" >&2
			tail -n 20 "$fake_log" >&2
			exit 1
		fi
		sleep 0.1
	done
	fake_port=$(head -n 1 "$port_file")
	fake_base="http://127.0.0.1:$fake_port"
}

# fidelity_finish STATUS: exits with STATUS, showing the fake's stderr
# first when the check failed.
fidelity_finish() {
	if [ "$1" -ne 0 ] && [ -s "$fake_log" ]; then
		echo "$name: the fake's stderr:" >&2
		cat "$fake_log" >&2
	fi
	exit "$1"
}
