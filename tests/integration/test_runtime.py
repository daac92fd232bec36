"""
The runtime surface: who the sandboxed process is (uid, capabilities,
no_new_privs), what it inherits (environment, descriptors, terminal) and
which syscalls it is refused.
"""

import errno
import os
import pty
import re
import signal
import subprocess

import pytest

import levels

from conftest import (HOST_TOKEN, PROBE, assert_errno, marker, pids_with, probe_pids,
                      proc_status, wait_until)

SIGSYS_STATUS = 128 + 31


def test_host_env_token_does_not_leak(cordon):
    r = cordon.probe("env")
    assert r.status == 0, r
    assert HOST_TOKEN not in r.out
    assert "CORDON_TEST_TOKEN" not in r.out
    names = {l.split("=", 1)[0] for l in r.out.splitlines()}
    git = {"GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"}  # safe.directory
    # Every run has a gateway (with no network it allows nothing, and says so at once).
    proxy = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}
    proxy |= {v.lower() for v in proxy}
    assert names <= {"PATH", "HOME", "LANG", "TERM"} | git | proxy, \
        f"unexpected variables: {names}\n{r}"
    assert {"PATH", "HOME"} <= names, r
    env = dict(l.split("=", 1) for l in r.out.splitlines())
    assert all(env[v] == "http://127.0.0.1:3128" for v in proxy & names
               if v.lower() != "no_proxy"), r
    r = cordon.probe("read", "/proc/self/environ")
    assert r.status == 0, r
    assert HOST_TOKEN.encode() not in r.stdout
    r = cordon.probe("read", "/proc/1/environ")
    assert HOST_TOKEN.encode() not in r.stdout


def test_env_pass_and_set(cordon):
    r = cordon.probe("env", opts=["-e", "CORDON_TEST_TOKEN", "-e", "GREETING=hello world"])
    assert r.status == 0, r
    env = dict(l.split("=", 1) for l in r.out.splitlines())
    assert env.get("CORDON_TEST_TOKEN") == HOST_TOKEN, r
    assert env.get("GREETING") == "hello world", r


def test_argv0_is_found_in_the_runs_own_path(cordon):
    """The command is looked up in the PATH the run gives it (the policy's,
    or -e), at every level: not in a default the boundary fell back on."""
    r = cordon.run(["nologin"], "-e", "PATH=/usr/sbin:/usr/bin:/bin")
    assert r.status == 1 and "This account is currently not available" in r.out, r
    r = cordon.run(["ls", "/"], "-e", "PATH=/nonexistent")
    assert r.status == 127 and "command not found: 'ls'" in r.err, r


def test_stdin_unread_blocks_nothing_else(cordon):
    """A command that writes before it reads its stdin, and one that exits
    with its stdin unread, end as they would outside (no deadlock, no
    timeout) at every level: stdin is relayed as the command takes it,
    never by blocking the relay of its output, its signals or its end."""
    r = cordon.run(["sh", "-c", "head -c 300000 /dev/zero; wc -c >&2"], "-t", "120s",
                   input=b"x" * 1000000, timeout=180)
    assert r.status == 0 and len(r.stdout) == 300000, r
    assert "1000000" in r.err.splitlines(), r  # beside any line on degraded limits
    r = cordon.run(["sh", "-c", "echo hi; exit 3"], "-t", "120s", input=b"x" * (12 << 20),
                   timeout=180)
    assert r.status == 3 and r.out == "hi\n" and r.result["reason"] == "exited", r


PRODUCER = """import os, sys
n, b = 0, b"y" * 65536
try:
    while True:
        n += os.write(1, b)
except OSError:
    pass
sys.stderr.write(str(n))
"""


def test_stdin_closed_by_the_command_is_read_no_more(cordon):
    """Once the command closes its stdin, cordon stops reading the caller's
    (an endless producer is held at what the pipes buffer, not drained into
    the sandbox for nothing until the command exits), at every level."""
    prod = subprocess.Popen(["python3", "-c", PRODUCER], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        r = cordon.run(["sh", "-c", "exec 0<&-; sleep 3; echo ok"], "-t", "120s",
                       stdin=prod.stdout, timeout=180)
    finally:
        prod.stdout.close()
        _, err = prod.communicate(timeout=60)
    assert (r.status, r.out) == (0, "ok\n"), r
    assert int(err) < 16 << 20, f"{int(err)} bytes of stdin read after the command closed it"


def test_dev_stdout_and_stderr_open_again(cordon):
    """/dev/stdout, /dev/stderr and /dev/stdin open again, as scripts and tee use them
    (a root caller's command, another uid, was refused its own stdio pipes)."""
    r = cordon.run(["sh", "-c", "echo err > /dev/stderr; echo out | tee /dev/stdout; "
                    "head -c 3 /dev/stdin"], input=b"in\n")
    assert (r.status, r.out) == (0, "out\nout\nin\n") and "err" in r.err.splitlines(), r


def test_home_and_cwd(cordon):
    r = cordon.run(["sh", "-c", 'echo "$HOME"; pwd'])
    assert r.status == 0, r
    home, cwd = r.out.splitlines()
    assert cwd == "/workspace", r
    assert home == "/tmp/home", r   # private to the run, never the workspace


def test_only_stdio_descriptors(cordon):
    """A descriptor the caller leaks into cordon does not reach the sandbox."""
    fd = os.open("/etc/hostname", os.O_RDONLY)
    os.set_inheritable(fd, True)
    try:
        r = cordon.probe("fds", pass_fds=(fd,))
    finally:
        os.close(fd)
    assert r.status == 0, f"descriptors above 2 open inside\n{r}"


def test_no_capabilities_and_no_new_privs(cordon):
    r = cordon.probe("caps")
    assert r.status == 0, f"capabilities inside\n{r}"
    f = dict(re.findall(r"^(\w+):\s*(.*)$", r.out, re.M))
    assert int(f["CapBnd"], 16) == 0, r
    assert int(f["CapEff"], 16) == 0, r
    assert f["NoNewPrivs"] == "1", r
    assert f["Seccomp"] == "2", r


def test_uid_inside_is_sandbox_user(cordon):
    r = cordon.probe("ids")
    assert r.status == 0, r
    assert "uid=1000 euid=1000 gid=1000 egid=1000" in r.out, r
    r = cordon.run(["id"])
    assert r.status == 0, r
    assert r.out.startswith("uid=1000(sandbox) gid=1000"), r


def test_sandboxed_process_is_not_host_root(cordon):
    """Seen from the host, the sandboxed process runs as the mapped uid."""
    m = marker()
    p = cordon.popen([PROBE, "sleep", "60", m])
    try:
        pids = probe_pids(m)
        assert pids, "the sandboxed probe never appeared on the host"
        for q in pids:
            uids = [int(u) for u in proc_status(q)["Uid"].split()]
            gids = [int(g) for g in proc_status(q)["Gid"].split()]
            assert 0 not in uids, f"sandboxed process {q} has host uid 0: {uids}"
            assert 0 not in gids, f"sandboxed process {q} has host gid 0: {gids}"
            if not cordon.root:
                assert set(uids) == {cordon.ident.uid}, uids
            caps = int(proc_status(q)["CapEff"], 16)
            assert caps == 0
    finally:
        os.killpg(p.pid, 15)
        p.wait(timeout=15)
    assert wait_until(lambda: not pids_with(m), 5), pids_with(m)


def test_host_pids_unreachable(cordon):
    """Host processes are not in the sandbox's PID namespace."""
    r = cordon.probe("kill", os.getpid(), 0)
    assert_errno(r, errno.ESRCH)


def test_host_supervisor_unreachable_by_ptrace(cordon):
    r = cordon.probe("ptrace-attach")          # its parent, the sandbox's init
    assert_errno(r, errno.EPERM)
    r = cordon.probe("ptrace-attach", "1")
    assert_errno(r, errno.EPERM)


# action, args, refusals it may get (the first is what the spec promises)
SECCOMP_REFUSALS = [
    ("unshare", [], (errno.EPERM,)),
    ("unshare-ns", [], (errno.EPERM,)),
    ("clone-newuser", [], (errno.EPERM,)),
    ("setns", [], (errno.EPERM,)),
    ("mount", ["/tmp"], (errno.EPERM,)),
    ("open-tree", ["/"], (errno.EPERM, errno.ENOSYS)),
    ("chroot", ["/tmp"], (errno.EPERM,)),
    # uid 0 is not mapped in the sandbox's user namespace: EINVAL is the kernel's no.
    ("setuid0", [], (errno.EPERM, errno.EINVAL)),
    ("ptrace-traceme", [], (errno.EPERM,)),
    ("io-uring", [], (errno.EPERM, errno.ENOSYS)),
    ("bpf", [], (errno.EPERM,)),
    ("perf-event-open", [], (errno.EPERM, errno.EACCES)),
    ("userfaultfd", [], (errno.EPERM,)),
    ("keyctl", [], (errno.EPERM,)),
    ("add-key", [], (errno.EPERM,)),
    ("open-by-handle", [], (errno.EPERM,)),
    ("socket-netlink", [], (errno.EPERM, errno.EAFNOSUPPORT)),
    ("socket-packet", [], (errno.EPERM, errno.EAFNOSUPPORT)),
    ("ioctl-tiocsti", ["0"], (errno.EPERM,)),
    ("ioctl-tioclinux", ["0"], (errno.EPERM,)),
]


@pytest.mark.parametrize("action,args,allowed", SECCOMP_REFUSALS,
                         ids=[a for a, _, _ in SECCOMP_REFUSALS])
def test_syscall_refused(cordon, action, args, allowed):
    r = cordon.probe(action, *args)
    assert_errno(r, *allowed)


# Raw syscalls (x86_64 numbers) the profile refuses; harmless arguments, so
# that anything but a refusal would be visible as success or EINVAL/EFAULT.
RAW_REFUSALS = [
    ("kexec_load", 246, [0, 0, 0, 0]),
    ("kexec_file_load", 320, [-1, -1, 0, 0, 0]),
    ("init_module", 175, [0, 0, 0]),
    ("finit_module", 313, [0, 0, 0]),
    ("delete_module", 176, [0, 0]),
    ("reboot", 169, [0xfee1dead, 672274793, 0x4321fedc, 0]),
    ("swapon", 167, [0, 0]),
    ("swapoff", 168, [0]),
    ("acct", 163, [0]),
    ("settimeofday", 164, [0, 0]),
    ("clock_settime", 227, [0, 0]),
    ("adjtimex", 159, [0]),
    ("pivot_root", 155, [0, 0]),
    ("umount2", 166, [0, 0]),
    ("fsopen", 430, [0, 0]),
    ("fsmount", 432, [-1, 0, 0]),
    ("move_mount", 429, [-1, 0, -1, 0, 0]),
    ("mount_setattr", 442, [-1, 0, 0, 0, 0]),
    ("ptrace", 101, [16, 1, 0, 0]),
    ("process_vm_readv", 310, [1, 0, 0, 0, 0, 0]),
    ("process_vm_writev", 311, [1, 0, 0, 0, 0, 0]),
    ("process_madvise", 440, [-1, 0, 0, 0, 0]),
    ("quotactl", 179, [0, 0, 0, 0]),
    ("lookup_dcookie", 212, [0, 0, 0]),
    ("vhangup", 153, []),
    ("iopl", 172, [3]),
    ("ioperm", 173, [0, 1, 1]),
    ("io_uring_enter", 426, [-1, 0, 0, 0, 0, 0]),
    ("io_uring_register", 427, [-1, 0, 0, 0]),
    ("keyctl", 250, [0, -3, 0]),
    ("request_key", 249, [0, 0, 0, 0]),
    ("bpf", 321, [0, 0, 0]),
    ("perf_event_open", 298, [0, 0, -1, -1, 0]),
    ("userfaultfd", 323, [0]),
    ("setns", 308, [-1, 0]),
    ("unshare", 272, [0x10000000]),      # CLONE_NEWUSER
    ("open_by_handle_at", 304, [-1, 0, 0]),
    ("name_to_handle_at", 303, [-100, 0, 0, 0, 0]),
]


@pytest.mark.parametrize("nr,args", [(nr, a) for _, nr, a in RAW_REFUSALS],
                         ids=[n for n, _, _ in RAW_REFUSALS])
def test_raw_syscall_refused(cordon, nr, args):
    r = cordon.probe("syscall", nr, *args)
    assert_errno(r, errno.EPERM, errno.ENOSYS)


@pytest.mark.parametrize("action", ["i386", "x32"])
def test_foreign_syscall_abi_killed(cordon, action):
    r = cordon.probe(action)
    assert "returned" not in r.out
    if not levels.host_has_abi(cordon.probe_bin, action):
        # No entry point on this kernel: the call cannot be made, in or out.
        assert r.status == 128 + signal.SIGSEGV, r
        return
    assert r.status == SIGSYS_STATUS, f"expected death by SIGSYS (159)\n{r}"
    assert r.result is not None and r.result["signal"] == 31, r


def test_no_host_terminal(cordon):
    """With a terminal on stdin, the sandbox cannot push input into it."""
    master, slave = pty.openpty()
    try:
        r = cordon.probe("ioctl-tiocsti", "0", stdin=slave)
        assert_errno(r, errno.EPERM, errno.ENOTTY, errno.EIO)
        r = cordon.probe("ioctl-tiocsti", "/dev/tty", stdin=slave)
        assert_errno(r, errno.EPERM, errno.ENXIO, errno.ENOENT, errno.EIO)
    finally:
        os.close(slave)
        os.set_blocking(master, False)
        try:
            injected = os.read(master, 4096)
        except OSError:
            injected = b""
        os.close(master)
    assert b"#" not in injected, injected


def test_signals_to_host_refused(cordon):
    """Even pid numbers that exist on the host are not the host's processes."""
    victim = subprocess.Popen(["sleep", "30"])
    try:
        r = cordon.probe("kill", victim.pid, 9)
        assert_errno(r, errno.ESRCH, errno.EPERM)
        assert victim.poll() is None, "the host process was killed from inside"
    finally:
        victim.kill()
        victim.wait()
