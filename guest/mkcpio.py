#!/usr/bin/env python3
"""Writes the guest's initramfs: an uncompressed newc cpio holding the agent
as /init, /dev/console and the mount points of the agent's own /proc and
/dev. Deterministic (every mtime and owner 0), so its digest keys the
snapshot. Usage: mkcpio.py AGENT OUT"""
import stat
import sys


def entry(out, ino, name, mode, data=b"", rdev=(0, 0)):
    name_b = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
    out.append(b"070701" + b"".join(b"%08X" % f for f in fields) + name_b)
    out.append(b"\0" * (-(110 + len(name_b)) % 4))
    out.append(data)
    out.append(b"\0" * (-len(data) % 4))


def main():
    agent, dest = sys.argv[1], sys.argv[2]
    with open(agent, "rb") as f:
        init = f.read()
    # The command's root, its /etc included, is a tmpfs the agent builds at
    # each call (guest/agent.c enter_root): the initramfs holds only the agent.
    files = [
        ("dev", stat.S_IFDIR | 0o755, b""),
        ("proc", stat.S_IFDIR | 0o555, b""),
        ("init", stat.S_IFREG | 0o755, init),
    ]
    out = []
    ino = 0
    for name, mode, data in files:
        ino += 1
        entry(out, ino, name, mode, data)
        if name == "dev":
            ino += 1
            entry(out, ino, "dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
    entry(out, 0, "TRAILER!!!", 0)
    blob = b"".join(out)
    blob += b"\0" * (-len(blob) % 512)
    with open(dest, "wb") as f:
        f.write(blob)


main()
