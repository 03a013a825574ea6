#!/bin/sh
# tests/startup/debian11-root.sh: prints the path of a minimal Debian 11
# root (glibc 2.31 and OpenSSL 1.1, as on Ubuntu 20.04 TPU images, plus
# curl and zstd, which the startup script needs), made once with
# `debootstrap --variant=minbase bullseye` from Debian's registry and
# cached: $SLICECTL_DEBIAN11_ROOT, else /var/cache/slicectl/bullseye when
# /var/cache is writable, else $XDG_CACHE_HOME/slicectl/bullseye. It is
# rebuilt only when missing or incomplete (no stamp).
# Exit 77 (the caller skips) with the reason on stderr when not root or
# when debootstrap is missing or cannot fetch.
set -eu

INCLUDE=libssl1.1,curl,zstd,ca-certificates
MIRROR=http://deb.debian.org/debian

skip() {
	echo "skip: $*" >&2
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "not root: debootstrap and chroot need root"
root=${SLICECTL_DEBIAN11_ROOT:-}
if [ -z "$root" ]; then
	if [ -w /var/cache ]; then
		root=/var/cache/slicectl/bullseye
	else
		root=${XDG_CACHE_HOME:-$HOME/.cache}/slicectl/bullseye
	fi
fi
stamp=$root/.slicectl-root
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "bullseye $INCLUDE" ]; then
	printf '%s\n' "$root"
	exit 0
fi
command -v debootstrap >/dev/null 2>&1 ||
	skip "debootstrap is not installed (scripts/deps debootstrap)"
mkdir -p "${root%/*}"
# One build at a time; a second caller waits and then finds it.
exec 9>"$root.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "bullseye $INCLUDE" ]; then
	printf '%s\n' "$root"
	exit 0
fi
tmp=$root.tmp.$$
rm -rf "$root".tmp.*
echo "debian11-root: debootstrap bullseye into $root (once)" >&2
if ! debootstrap --variant=minbase --include="$INCLUDE" bullseye "$tmp" \
	"$MIRROR" >"$tmp.log" 2>&1; then
	why=$(tail -n 3 "$tmp.log" | tr '\n' ' ')
	rm -rf "$tmp" "$tmp.log"
	skip "debootstrap could not make a Debian 11 root from $MIRROR: $why"
fi
rm -f "$tmp.log"
printf 'bullseye %s\n' "$INCLUDE" >"$tmp/.slicectl-root"
rm -rf "$root"
mv "$tmp" "$root"
printf '%s\n' "$root"
