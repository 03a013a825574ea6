#!/bin/sh
# sshd-prepare.sh DIR [USER_KEY_TYPE]
#
# Prepares everything an OpenSSH sshd needs to serve logins on loopback, for
# the C test harness, scripts/demo-fanout and bench/fanout alike. DIR must exist and
# be empty. Environment: PORT (required), EXTRA_CONFIG (appended to
# sshd_config). Promises, under DIR:
#   host_{ed25519,ecdsa,rsa}_key[.pub]  host keys
#   user_key, user_key.pub              the login key (default type ed25519)
#   authorized_keys                     holding user_key.pub
#   known_hosts                         empty, for the caller to fill
#   shared/                             mode 1777, writable by the login user
#   user                                the login user's name, one line
#   sshd_config                         for `sshd -D -e -f DIR/sshd_config`
# As root the login user is "slicectltest" (created when missing, shell
# /bin/sh so a login runs dash without rc files); otherwise it is the
# current user. Exits non-zero with a message on stderr when it cannot.
set -eu

die() {
	echo "sshd-prepare: $*" >&2
	exit 1
}

[ $# -ge 1 ] || die "usage: sshd-prepare.sh DIR [USER_KEY_TYPE]"
dir=$1
key_type=${2:-ed25519}
[ -d "$dir" ] || die "$dir is not a directory; create it first"
case "${PORT:-}" in
'' | *[!0-9]*) die "PORT must be set to the port sshd will listen on" ;;
esac
case "$dir" in
/*) ;;
*) dir=$(cd "$dir" && pwd) ;;
esac
# sshd_config reads paths as quoted words with %-tokens expanded.
case "$dir" in
*[\"%\\]*)
	die "$dir holds a quote, % or backslash, which sshd_config" \
		"cannot express; use another directory"
	;;
esac

if [ "$(id -u)" -eq 0 ]; then
	user=slicectltest
	# Several test binaries may start at once, and useradd fails while
	# another holds /etc/passwd locked, so creation is serialized.
	lock=/run/lock/slicectl-useradd.lock
	[ -d /run/lock ] || lock=/tmp/slicectl-useradd.lock
	# The password field is "*" (no password, not locked): with UsePAM no,
	# sshd refuses any login, even by key, to an account locked with "!".
	flock "$lock" sh -c '
		if ! id slicectltest >/dev/null 2>&1; then
			useradd -m -s /bin/sh -p "*" slicectltest
		fi' || die "cannot create user slicectltest (useradd failed)"
	# sshd refuses to start as root without its privilege separation dir.
	mkdir -p /run/sshd
else
	user=$(id -un)
fi

# RSA at 2048 bits: generation time is paid on every test start, and the
# key only has to exist for clients that ask for ssh-rsa host keys.
ssh-keygen -q -t ed25519 -N '' -C slicectl-test-host \
	-f "$dir/host_ed25519_key" </dev/null ||
	die "ssh-keygen failed for the ed25519 host key"
ssh-keygen -q -t ecdsa -N '' -C slicectl-test-host \
	-f "$dir/host_ecdsa_key" </dev/null ||
	die "ssh-keygen failed for the ecdsa host key"
ssh-keygen -q -t rsa -b 2048 -N '' -C slicectl-test-host \
	-f "$dir/host_rsa_key" </dev/null ||
	die "ssh-keygen failed for the rsa host key"
ssh-keygen -q -t "$key_type" -N '' -C slicectl-test-user \
	-f "$dir/user_key" </dev/null ||
	die "ssh-keygen -t $key_type failed for the user key"

cp "$dir/user_key.pub" "$dir/authorized_keys"
: >"$dir/known_hosts"
mkdir -p "$dir/shared"
printf '%s\n' "$user" >"$dir/user"

cat >"$dir/sshd_config" <<EOF
ListenAddress 0.0.0.0
Port $PORT
HostKey "$dir/host_ed25519_key"
HostKey "$dir/host_ecdsa_key"
HostKey "$dir/host_rsa_key"
PidFile "$dir/sshd.pid"
AuthorizedKeysFile "$dir/authorized_keys"
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
AllowUsers $user@127.0.0.0/8
MaxStartups 4096
MaxSessions 16
LogLevel ERROR
Subsystem sftp internal-sftp
EOF
if [ -n "${EXTRA_CONFIG:-}" ]; then
	printf '%s\n' "$EXTRA_CONFIG" >>"$dir/sshd_config"
fi

# sshd opens authorized_keys as the login user, so the tree must be readable
# by others; the private keys stay 0600 because sshd and ssh refuse keys
# that others can read.
chmod -R go+rX "$dir"
chmod 1777 "$dir/shared"
chmod 600 "$dir/host_ed25519_key" "$dir/host_ecdsa_key" \
	"$dir/host_rsa_key" "$dir/user_key"

# shellcheck disable=SC2016 # $1 is expanded by the login user's shell
if [ "$user" != "$(id -un)" ] &&
	! su -s /bin/sh -c 'test -r "$1"' "$user" sh "$dir/authorized_keys"
then
	die "user $user cannot read $dir/authorized_keys; a parent directory" \
		"of $dir is closed to others (set TMPDIR to a directory such" \
		"as /tmp)"
fi
