"""
The kernel surface a run can reach beyond the syscall list: memory of other
processes through /proc/PID/mem, writes into read-only mappings through
/proc/self/mem, and socket protocols beyond TCP, UDP and ping.
"""

import errno
import gzip
import os

import pytest

from conftest import assert_errno

MEM_WAYS = ["path", "task", "fd"]
FORCE_CONFIG = {"CONFIG_PROC_MEM_ALWAYS_FORCE": "always", "CONFIG_PROC_MEM_FORCE_PTRACE": "ptrace",
                "CONFIG_PROC_MEM_NO_FORCE": "never"}


def host_proc_mem_force():
    """The host's proc_mem.force_override, read the way the kernel documents it."""
    release = os.uname().release
    major, minor = (int(x) for x in release.split(".")[:2])
    if (major, minor) < (6, 12):
        return "always"
    cmdline = open("/proc/cmdline").read().split(" -- ")[0].split()
    chosen = [a.split("=", 1)[1] for a in cmdline if a.startswith("proc_mem.force_override=")]
    chosen = [v for v in chosen if v in ("always", "ptrace", "never")]
    if chosen:
        return chosen[-1]
    for path, opener in ((f"/boot/config-{release}", open), ("/proc/config.gz", gzip.open)):
        try:
            with opener(path, "rt") as f:
                lines = set(f.read().splitlines())
        except OSError:
            continue
        for sym, value in FORCE_CONFIG.items():
            if f"{sym}=y" in lines:
                return value
    return "unknown"


def test_check_reports_proc_mem_force(cordon):
    r = cordon.raw("check")
    assert r.status == 0, r
    line = next((l for l in r.out.splitlines() if l.startswith("  proc_mem force ")), None)
    assert line is not None, r
    assert line.split()[2] == host_proc_mem_force(), r
    assert "/proc is read-only" in r.out, r


@pytest.mark.parametrize("via", MEM_WAYS)
def test_proc_mem_of_sibling_not_writable(cordon, via):
    """Same uid passes the kernel's ptrace check: the read-only /proc is what stops it."""
    r = cordon.probe("proc-mem-sibling", via)
    assert_errno(r, errno.EROFS)
    assert "sibling canary: canary-intact\n" in r.out, r
    assert "PWNED" not in r.out, r


@pytest.mark.parametrize("via", MEM_WAYS)
def test_proc_self_mem_cannot_force_readonly_pages(cordon, via):
    r = cordon.probe("proc-mem-self-ro", via)
    assert_errno(r, errno.EROFS)
    assert "read-only page: canary-intact\n" in r.out, r


def test_proc_mem_of_init_not_writable(cordon):
    r = cordon.probe("write", "/proc/1/mem", "PWNED")
    assert_errno(r, errno.EROFS, errno.EACCES)


@pytest.mark.parametrize("path", ["/proc/self/comm", "/proc/self/oom_score_adj",
                                  "/proc/self/timerslack_ns", "/proc/sys/kernel/hostname"])
def test_proc_files_not_writable(cordon, path):
    r = cordon.probe("write", path, "1\n")
    assert_errno(r, errno.EROFS)


def test_proc_still_readable(cordon):
    r = cordon.run(["sh", "-c", "head -1 /proc/meminfo; grep -c processor /proc/cpuinfo;"
                    " cat /proc/self/comm; readlink /proc/self/exe"])
    assert r.status == 0, r
    lines = r.out.splitlines()
    assert lines[0].startswith("MemTotal:"), r
    assert int(lines[1]) >= 1, r
    assert lines[2:] == ["cat", "/usr/bin/readlink"], r


def test_magic_links_to_writable_targets_still_write(cordon):
    """/dev/stdout, /dev/stderr and /proc/self/fd/N open their target, not /proc."""
    script = (
        "import os\n"
        "fd = os.open('/workspace/out.txt', os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "with open(f'/proc/self/fd/{fd}', 'w') as f: f.write('via proc fd\\n')\n"
        "with open(f'/dev/fd/{fd}', 'a') as f: f.write('via dev fd\\n')\n"
        "print(open('/workspace/out.txt').read(), end='')\n"
    )
    r = cordon.run(["sh", "-c",
                    "(echo to-stdout > /dev/stdout) | cat;"
                    " (echo to-stderr > /dev/stderr) 2>&1 | cat;"
                    " exec 3>/tmp/t; echo to-tmp > /proc/self/fd/3; cat /tmp/t;"
                    f" python3 -c \"{script}\""])
    assert r.status == 0, r
    assert r.out == "to-stdout\nto-stderr\nto-tmp\nvia proc fd\nvia dev fd\n", r


# family, type, protocol, the refusal (or 0 for success)
SOCKETS = [
    ("inet", "dgram", 136, errno.EPROTONOSUPPORT),      # UDP-Lite
    ("inet6", "dgram", 136, errno.EPROTONOSUPPORT),
    ("inet", "stream", 132, errno.EPROTONOSUPPORT),     # SCTP
    ("inet6", "stream", 132, errno.EPROTONOSUPPORT),
    ("inet", "stream", 262, errno.EPROTONOSUPPORT),     # MPTCP
    ("inet", "stream", 17, errno.EPROTONOSUPPORT),      # UDP as a stream
    ("inet", "seqpacket", 132, errno.EPERM),            # SCTP one-to-one
    ("inet", "raw", 1, errno.EPERM),
    ("inet", "raw", 255, errno.EPERM),
    ("inet6", "raw", 58, errno.EPERM),
    ("inet", "stream", 0, 0),
    ("inet", "stream", 6, 0),
    ("inet6", "stream", 6, 0),
    ("inet", "dgram", 0, 0),
    ("inet", "dgram", 17, 0),
    ("inet6", "dgram", 17, 0),
    ("unix", "stream", 0, 0),
    # each send may name its address past connect(): no keeper could check them all
    # (sandbox/usock.h), so no level makes one
    ("unix", "dgram", 0, errno.EACCES),
    ("unix", "seqpacket", 0, 0),
]


@pytest.mark.parametrize("family,kind,proto,refusal", SOCKETS,
                         ids=[f"{f}-{k}-{p}" for f, k, p, _ in SOCKETS])
def test_socket_protocols(cordon, family, kind, proto, refusal):
    r = cordon.probe("socket", family, kind, proto)
    if refusal:
        assert_errno(r, refusal)
        assert "created" not in r.out, r
    else:
        assert (r.status, r.out) == (0, f"socket {family} {kind} {proto} created\n"), r


@pytest.mark.parametrize("family", ["inet", "inet6"])
def test_ping_sockets_reach_the_kernel(cordon, family):
    """ICMP datagram sockets pass the filter; the kernel's ping_group_range decides."""
    r = cordon.probe("socket", family, "dgram", 1 if family == "inet" else 58)
    assert_errno(r, 0, errno.EACCES)


def test_tcp_and_udp_still_carry_bytes(cordon):
    r = cordon.probe("bind-tcp", "127.0.0.1", 0)
    assert r.status == 0 and r.out.startswith("loopback ok"), r
    r = cordon.run(["python3", "-c",
                    "import socket\n"
                    "for fam, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
                    "    a = socket.socket(fam, socket.SOCK_DGRAM); a.bind((host, 0))\n"
                    "    b = socket.socket(fam, socket.SOCK_DGRAM, socket.IPPROTO_UDP)\n"
                    "    b.sendto(b'ping', a.getsockname()[:2])\n"
                    "    a.settimeout(5); print(a.recv(16).decode())\n"])
    assert (r.status, r.out) == (0, "ping\nping\n"), r
