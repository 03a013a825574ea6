#!/usr/bin/env python3
"""Makes slice-supervisor.portable (the layout is described at the top of
supervisor/portable.c): the static head, then a zstd-compressed payload
holding the dynamic loader, every library of the supervisor's DT_NEEDED
closure and the supervisor itself, then the trailer.

The closure is what the build machine's loader resolves (ldd, which runs
the loader in its --list mode), checked against readelf's NEEDED entries
so that nothing is missed; the loader is the binary's PT_INTERP. The
vDSO is the kernel's and is left out.

usage: portable.py HEAD SUPERVISOR OUTPUT
"""

import hashlib
import os
import re
import struct
import subprocess
import sys

MAGIC = b"SLICEPB1"


def fail(msg):
    sys.exit("portable.py: " + msg)


def needed(path):
    """The DT_NEEDED sonames of an ELF file (readelf -d)."""
    out = subprocess.run(["readelf", "-d", path], check=True,
                         capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def interpreter(path):
    out = subprocess.run(["readelf", "-l", path], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"Requesting program interpreter: ([^\]]+)\]", out)
    if not m:
        fail(path + " has no program interpreter: is it static?")
    return m.group(1)


def closure(path):
    """{soname: resolved path} for every library ldd resolves."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True,
                         text=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(0x[0-9a-f]+\)", line)
        if m:
            libs[m.group(1)] = m.group(2)
        elif "=> not found" in line:
            fail("ldd: " + line.strip())
    return libs


def entry(name, mode, data):
    return (name.encode() + b"\0" + struct.pack("<IQ", mode, len(data)) +
            data)


def main():
    if len(sys.argv) != 4:
        fail("usage: portable.py HEAD SUPERVISOR OUTPUT")
    head, sup, output = sys.argv[1:]
    interp = interpreter(sup)
    libs = closure(sup)
    # Every NEEDED of the binary and of each library must be carried.
    for path in [sup] + list(libs.values()):
        for so in needed(path):
            if so not in libs and os.path.basename(interp) != so:
                fail("%s needs %s, which ldd did not resolve" % (path, so))
    parts = [entry("lib", 0o40755, b""), entry("bin", 0o40755, b"")]
    with open(os.path.realpath(interp), "rb") as f:
        parts.append(entry("ld.so", 0o755, f.read()))
    for so in sorted(libs):
        with open(os.path.realpath(libs[so]), "rb") as f:
            parts.append(entry("lib/" + so, 0o644, f.read()))
    with open(sup, "rb") as f:
        parts.append(entry("bin/slice-supervisor", 0o755, f.read()))
    parts.append(b"\0")
    # The zstd command (a build dependency already): the standard library
    # has no zstd. Level 6 is most of -19's gain at a fraction of its time.
    payload = subprocess.run(["zstd", "-q", "-6", "-T0", "-c"],
                             input=b"".join(parts), check=True,
                             capture_output=True).stdout
    with open(head, "rb") as f:
        stub = f.read()
    ident = hashlib.sha256(payload).digest()[:8]
    trailer = MAGIC + struct.pack("<QQ", len(stub), len(payload)) + ident
    tmp = output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(stub + payload + trailer)
    os.chmod(tmp, 0o755)
    os.replace(tmp, output)


main()
