"""
--level gvisor: the command runs on gVisor's user-space kernel (runsc, ptrace
platform), in an OCI bundle built from the same mount plan as the namespace
level, with --network=none and the gateway's unix socket as the only door.

Each test runs as root and as uid 65534 (runsc --rootless). Escapes are tried
from inside a real sandbox; each test asserts the refusal and that the host
shows nothing: no file, no connection, and (conftest's no_leftovers) no
cordon directory in /tmp or cgroup. Tests that end a run also check that no
runsc process of it survives.

Known differences from the namespace level, by design or by this runsc
(Debian 12's 2022 build):
- the command runs as gVisor's uid 0 (no capability, no_new_privs): the
  gofer shows the caller's files as owned by 0, so that is the caller;
- the filesystem boundary is the bundle's mounts (gVisor has no Landlock);
- --tty is refused; the call's files are placed inside by the helper, whose
  caller forks the command in the booted sandbox (no runsc exec per call);
- this runsc refuses AT_NO_AUTOMOUNT in statx()/newfstatat() (EINVAL), which
  coreutils passes on every stat: a compat library preloaded through the
  bundle's /etc/ld.so.preload drops the flag (gvisor/compat.c), so dynamic
  programs work; a static program's own statx would still get EINVAL.
Time: about 40 s for the file on this 2-core host (about 1 s per run).
"""

import errno
import glob
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess

import pytest

import conftest

import egress_servers as es
from test_signals import GROUP_TRAP
from conftest import (BUILD, PROBE, assert_errno, host_ipv4_addresses, host_state, marker,
                      new_leftovers, pids_with, wait_until)

LEVEL = ("--level", "gvisor")
NO_ROUTE = (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL)


@pytest.fixture
def level():
    """This file's runs name their level themselves: the suite's level parameter
    (levels.py) would only run each test again, and rewrite its binds."""
    return "namespace"


@pytest.fixture(autouse=True)
def runsc_installed():
    if not shutil.which("runsc"):
        pytest.skip("runsc is not installed (scripts/install-deps.sh installs it)")


def gv(cordon, cmd, *opts, **kw):
    return cordon.run(cmd, *LEVEL, *opts, **kw)


def runsc_pids():
    """Host runsc processes of this test's gvisor runs (and cordon check's
    probes): their state directories name the cordon that made them, so a
    concurrent run elsewhere on the host is not counted."""
    found = set()
    for pid in conftest._test_pids or ():
        found.update(pids_with(f"cordon-gvisor-{pid}-"))
        found.update(pids_with(f"cordon-gvisor-probe-{pid}-"))
    return sorted(found)


def assert_nothing_left(timeout=5):
    left = wait_until(lambda: not runsc_pids(), timeout)
    assert left, f"runsc processes left: {runsc_pids()}"


# --- runs -------------------------------------------------------------------


@pytest.mark.parametrize("cmd, status, out", [
    (["true"], 0, ""),
    (["sh", "-c", "echo hi; exit 3"], 3, "hi\n"),
    (["python3", "-c", "import sys; print(sys.version_info[0])"], 0, "3\n"),
    (["sh", "-c", "cat"], 0, "from stdin"),
])
def test_runs(cordon, cmd, status, out):
    r = gv(cordon, cmd, input=b"from stdin")
    assert r.status == status, r
    assert r.out == out, r
    assert r.result["level"] == "gvisor", r.result
    assert_nothing_left()


def test_command_not_found(cordon):
    """Told by the helper's caller over a socket the command never holds:
    a setup error (127, 126) with its error, as at every level."""
    r = gv(cordon, ["no-such-command-here"])
    assert r.status == 127, r
    assert "command not found: 'no-such-command-here'" in r.err, r
    assert (r.result["reason"], r.result["error"]) == \
        ("setup_error", "command not found: 'no-such-command-here'"), r.result
    r = gv(cordon, ["/etc/passwd"])
    assert (r.status, r.result["reason"]) == (126, "setup_error"), r


def test_a_command_that_kills_its_caller_ran(cordon):
    """The command is the helper's caller's uid, so it may kill the caller
    at once: the run it had is recorded as its own (killed, exited), never
    as a setup error in which nothing ran, whatever it wrote meanwhile."""
    for i in range(20):  # a race the command won 1 time in 4 when it could
        ws = cordon.hostdir(f"ws{i}")
        r = gv(cordon, [PROBE, "kill-parent-write", "ran"], "-w", ws)
        assert r.result["reason"] != "setup_error", (r, os.listdir(ws))
    assert_nothing_left()


def test_runs_on_gvisor_kernel(cordon):
    """The kernel the command sees is gVisor's, not the host's."""
    r = gv(cordon, ["python3", "-c", "import os; print(open('/proc/version').read())"])
    assert r.status == 0, r
    assert os.uname().release not in r.out, r


def test_enforcement_says_mounts(cordon):
    r = gv(cordon, ["true"])
    enf = r.result["enforcement"]
    assert enf["filesystem"] == "mounts", enf
    assert enf["cgroup_holds"] == "runsc", enf
    assert enf["wall"] == "supervisor" and enf["output"] == "supervisor", enf


def test_seccomp_profile_applied(cordon):
    r = gv(cordon, ["python3", "-c",
                    "print([l for l in open('/proc/self/status') if l.startswith('Seccomp:')][0])"])
    assert r.status == 0, r
    assert "Seccomp:\t2" in r.out, r


# --- filesystem ---------------------------------------------------------------


def test_coreutils_stat_the_workspace(cordon):
    """ls, stat, find, cp -a, du stat with AT_NO_AUTOMOUNT, which this runsc
    refuses unless the compat library drops it; nothing of it shows in the
    command's environment."""
    ws = cordon.hostdir("ws")
    (ws / "sub").mkdir()
    (ws / "sub" / "f.txt").write_text("x" * 5000)
    for p in (ws / "sub", ws / "sub" / "f.txt"):
        os.chown(p, cordon.ident.uid, cordon.ident.gid)
    r = gv(cordon, ["sh", "-c", """set -e
ls -la sub | grep -c ' f.txt$'
stat -c '%s %F' sub/f.txt
find . -name f.txt
cp -a sub copy && stat -c '%s' copy/f.txt
du -s --apparent-size -B1 sub/f.txt | cut -f1
test -z "$LD_PRELOAD" && echo clean-env
"""], "-w", ws)
    assert r.status == 0, r
    assert r.out.splitlines() == ["1", "5000 regular file", "./sub/f.txt", "5000", "5000",
                                  "clean-env"], r
    assert (ws / "copy" / "f.txt").read_text() == "x" * 5000


def test_host_files_outside_policy_invisible(cordon, host_secret):
    path, value = host_secret
    r = gv(cordon, ["python3", "-c", f"""
import os
for p in ({str(path)!r}, {str(path.parent)!r}, '/root', '/home', '/etc/shadow', '/var/log'):
    print(p, os.path.exists(p))
"""])
    assert r.status == 0, r
    assert value not in r.out
    for line in r.out.splitlines():
        assert line.endswith("False"), r


ETC_WALK = r"""
import hashlib, json, os
seen = {}
for top, dirs, files in os.walk("/etc"):
    for name in dirs + files:
        p = os.path.join(top, name)
        if os.path.islink(p):
            seen[p] = "link:" + os.readlink(p)
        elif os.path.isfile(p):
            try:
                with open(p, "rb") as f:
                    seen[p] = hashlib.sha256(f.read()).hexdigest()
            except OSError as e:
                seen[p] = "denied"
        elif os.path.isdir(p) and not os.access(p, os.R_OK | os.X_OK):
            seen[p] = "denied"
print(json.dumps(seen))
"""
# /etc files cordon writes itself, not the host's.
GENERATED = {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/hostname", "/etc/nsswitch.conf",
             "/etc/resolv.conf", "/etc/ld.so.preload"}


def test_etc_copied_or_bound_shows_the_hosts_files_and_no_more(cordon):
    """The host /etc entries the bundle holds as copies (instead of binds)
    read as the host's own, links stay links, and what the host keeps from
    others stays unreadable: a copy shows nothing a bind would not."""
    r = gv(cordon, ["python3", "-c", ETC_WALK])
    assert r.status == 0, r
    seen = json.loads(r.out)
    assert len(seen) > 20, seen
    for path, got in seen.items():
        if path in GENERATED or not os.path.lexists(path):
            continue
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            assert got == "link:" + os.readlink(path), path
        elif not st.st_mode & stat.S_IROTH or (stat.S_ISDIR(st.st_mode) and
                                                  not st.st_mode & stat.S_IXOTH):
            assert got == "denied", (path, got)
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                assert got == hashlib.sha256(f.read()).hexdigest(), path
    assert_nothing_left()


@pytest.mark.parametrize("target", ["/usr/cordon-x", "/etc/cordon-x", "/cordon-x",
                                    "/.cordon/init", "/bin/cordon-x"])
def test_write_outside_workspace_fails(cordon, target):
    host = "/" + target.lstrip("/")
    existed = os.path.exists(host)
    r = gv(cordon, ["/opt/probe", "write", target, "x"])
    assert_errno(r, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT)
    if not existed:
        assert not os.path.exists(host), host


def test_workspace_round_trip(cordon):
    ws = cordon.hostdir("ws")
    (ws / "in.txt").write_text("host data\n")
    os.chown(ws / "in.txt", cordon.ident.uid, cordon.ident.gid)
    r = gv(cordon, ["sh", "-c", "cat in.txt; echo made > out.txt; echo x > .bashrc"],
           "-w", ws)
    assert "host data" in r.out, r
    assert (ws / "out.txt").read_text() == "made\n"
    st = (ws / "out.txt").stat()
    assert (st.st_uid, st.st_gid) == (cordon.ident.uid, cordon.ident.gid)
    # Protected names stay covered at this level too.
    assert not (ws / ".bashrc").exists()


@pytest.mark.parametrize("kind", ["protected-link", "socket", "fifo"])
def test_workspace_entry_it_cannot_hide_is_refused(cordon, kind):
    """runsc cannot mount over a link (it would mount at the link's target,
    making its directories in the host workspace), a socket (it fails) or a
    FIFO (it hangs): such a workspace is refused with one line, untouched."""
    from conftest import UnixListener, assert_cordon_refused
    ws = cordon.hostdir("ws")
    listener = None
    if kind == "socket":
        listener = UnixListener(path=str(ws / "agent.sock"))
        name = "agent.sock"
    elif kind == "fifo":
        os.mkfifo(ws / "pipe")
        name = "pipe"
    else:
        os.symlink("config/envrc", ws / ".envrc")
        name = ".envrc"
    try:
        before = sorted(os.listdir(ws))
        r = gv(cordon, ["true"], "-w", ws)
        assert_cordon_refused(r, name, "link, socket or FIFO")
        assert sorted(os.listdir(ws)) == before
        if listener:
            assert listener.count() == 0
    finally:
        if listener:
            listener.close()


def test_tmp_is_private_and_sized(cordon):
    r = gv(cordon, ["sh", "-c", "head -c 3000000 /dev/zero > /tmp/big"], "--tmp-size", "1M")
    assert r.status != 0, r
    r = gv(cordon, ["sh", "-c", "echo t > /tmp/t && cat /tmp/t"])
    assert r.out == "t\n", r


# --- network -------------------------------------------------------------------


def test_host_loopback_listener_gets_nothing(cordon, tcp_listener):
    l = tcp_listener("127.0.0.1")
    r = gv(cordon, ["/opt/probe", "connect-tcp", "127.0.0.1", str(l.port)])
    assert_errno(r, errno.ECONNREFUSED)
    assert l.count() == 0


def test_host_addresses_get_nothing(cordon, tcp_listener):
    addrs = host_ipv4_addresses() + ["198.51.100.7"]
    listeners = [tcp_listener(a) for a in addrs[:-1]]
    for a in addrs:
        r = gv(cordon, ["/opt/probe", "connect-tcp", a, "80"])
        assert_errno(r, *NO_ROUTE)
    for l in listeners:
        r = gv(cordon, ["/opt/probe", "connect-tcp", l.sock.getsockname()[0], str(l.port)])
        assert_errno(r, *NO_ROUTE)
        assert l.count() == 0


def test_host_unix_socket_gets_nothing(cordon, unix_listener):
    r = gv(cordon, ["/opt/probe", "connect-unix", unix_listener.path])
    assert_errno(r, errno.ENOENT)
    assert unix_listener.count() == 0


@pytest.fixture
def web():
    s = es.Server("web", "127.0.0.2")
    other = es.Server("other", "127.0.0.3")
    yield s, other
    s.close()
    other.close()


def test_egress_allowed_and_refused(cordon, web):
    s, other = web
    code = f"""
import urllib.request, urllib.error
for url in ('http://example.test:{s.port}/x', 'http://other.test:{other.port}/y'):
    try:
        r = urllib.request.urlopen(url, timeout=20)
        print(r.status, r.headers.get('X-Cordon-Denied'))
    except urllib.error.HTTPError as e:
        print(e.code, e.headers.get('X-Cordon-Denied'))
"""
    r = gv(cordon, ["python3", "-c", code], "--allow", f"example.test:{s.port}",
           "--allow-private", "127.0.0.2/32", "--allow-private", "127.0.0.3/32",
           "--resolve", "example.test=127.0.0.2", "--resolve", "other.test=127.0.0.3")
    assert r.status == 0, r
    assert r.out.splitlines() == ["200 None", "403 not_allowed"], r
    assert s.count() == 1
    assert other.count() == 0
    assert r.result["egress"]["allowed"] == 1 and r.result["egress"]["refused"] == 1


def test_gateway_run_still_has_no_direct_route(cordon, tcp_listener):
    """With the gateway, the proxy port is the only way out."""
    l = tcp_listener("127.0.0.1")
    r = gv(cordon, ["/opt/probe", "connect-tcp", "127.0.0.1", str(l.port)],
           "--allow", "example.test")
    assert_errno(r, errno.ECONNREFUSED)
    assert l.count() == 0


TRANSPARENT_PROBE = r"""
import errno, socket, sys
for a, port in [tuple(t.split(":")) for t in sys.argv[1:]]:
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect((a, int(port)))
        print(a, "connected")
    except OSError as e:
        print(a, errno.errorcode.get(e.errno, e.errno))
caps = [l.split()[1] for l in open("/proc/1/status") if l.startswith(("CapPrm", "CapEff"))]
print("init caps", *caps)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    print("netlink open")
except OSError as e:
    print("netlink", errno.errorcode.get(e.errno, e.errno))
"""


def test_transparent_egress_opens_no_other_route(cordon, tcp_listener):
    """The init makes only the synthetic range the sandbox's own: a host
    address, its listeners and the addresses just outside the range still
    have no route, and the command cannot add one (the init dropped the
    capabilities it used before the command started, and netlink is refused)."""
    listeners = [tcp_listener(a) for a in host_ipv4_addresses()]
    outside = [f"{l.sock.getsockname()[0]}:{l.port}" for l in listeners] + [
        "198.17.255.254:443", "198.20.0.1:443", "198.51.100.7:443"]
    r = gv(cordon, ["python3", "-c", TRANSPARENT_PROBE, "198.19.255.254:443", *outside],
           "--allow", "example.test:443")
    assert r.status == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "198.19.255.254 connected", r  # the init's listener for port 443
    for line, target in zip(lines[1:], outside):
        a, why = line.split()
        assert a == target.split(":")[0] and errno.errorcode[NO_ROUTE[1]] == why, r
    # The seccomp profile refuses netlink sockets as an unsupported family.
    assert lines[-2:] == ["init caps 0000000000000000 0000000000000000",
                          "netlink EAFNOSUPPORT"], r
    assert all(l.count() == 0 for l in listeners)


# --- ends -------------------------------------------------------------------------


def test_timeout_leaves_nothing(cordon):
    r = gv(cordon, ["sh", "-c", "sleep 60 & sleep 60"], "-t", "1s")
    assert r.status == 124, r
    assert r.result["reason"] == "timeout"
    assert r.wall < 20, r
    assert_nothing_left()


def test_background_process_dies_with_run(cordon):
    m = marker()
    r = gv(cordon, ["sh", "-c", f"sleep 60 {m} >/dev/null 2>&1 & echo started"])
    assert r.status == 0 and r.out == "started\n", r
    assert_nothing_left()
    assert not pids_with(m)


def test_kill_9_of_cordon_leaves_nothing(cordon):
    m = marker()
    p = cordon.popen(["sh", "-c", f"echo up; exec sleep 60 {m}"], *LEVEL)
    try:
        assert p.stdout.readline() == b"up\n"
        assert runsc_pids()
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert_nothing_left()
    # no_leftovers then checks /tmp and the cgroups.


def test_signal_reaches_command(cordon):
    """SIGTERM to cordon reaches the command's process group inside (the
    helper's caller passes it on), as at every level. The signal is blocked
    before "ready" and taken with sigwait: no handler races a sleep."""
    p = cordon.popen(["python3", "-c", GROUP_TRAP], *LEVEL)
    assert p.stdout.readline() == b"ready\n"
    os.kill(p.pid, signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    # Both the command and the child in its group took it; the command's
    # exit is its own, as at every level.
    assert out == b"child got term\ngot term\n", (out, err)
    assert p.returncode == 7, (out, err)
    assert b"run ended" not in err
    assert_nothing_left()


def test_exit_128_plus_n_is_not_a_signal(cordon):
    """The caller reports the command's real wait status: exit(137) is an
    exit, death by SIGKILL a signal (runsc exec once told them apart by
    neither)."""
    r = gv(cordon, ["sh", "-c", "exit 137"])
    assert (r.status, r.result["exit_code"], r.result.get("signal")) == (137, 137, None), r
    r = gv(cordon, ["sh", "-c", "kill -KILL $$"])
    assert r.result["signal"] == signal.SIGKILL and r.result["exit_code"] is None, r.result
    assert_nothing_left()


CALL_CHANNEL = r"""
import errno, json, os, socket
out = {"ctl": sorted(os.listdir("/.cordon/ctl"))}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("/.cordon/ctl/call.sock")
    out["connect"] = "connected"
except OSError as e:
    out["connect"] = errno.errorcode[e.errno]
# The caller (the command's parent) holds the channel: its descriptors are not ours to take.
ppid = os.getppid()
try:
    os.open(f"/proc/{ppid}/fd/3", os.O_RDWR)
    out["steal"] = "opened"
except OSError as e:
    out["steal"] = errno.errorcode[e.errno]
print(json.dumps(out), flush=True)
"""


def test_the_call_channel_is_closed_to_the_command(cordon):
    """The shim accepts the helper's one dial and removes the socket before
    any call runs: the command finds no channel to forge a status or a call
    on, and cannot take the caller's end."""
    r = gv(cordon, ["python3", "-c", CALL_CHANNEL])
    assert r.status == 0, r
    got = json.loads(r.out)
    assert got["ctl"] == [], got
    assert got["connect"] in ("ENOENT", "ECONNREFUSED"), got
    assert got["steal"] != "opened", got
    assert_nothing_left()


def test_killing_the_caller_ends_the_run_as_killed(cordon):
    """A command that kills its parent (the helper's caller, the same
    gVisor uid) only ends its own run: reported killed, nothing left."""
    m = marker()
    r = gv(cordon, ["sh", "-c", f"sleep 60 {m} & kill -KILL $PPID; sleep 60"])
    assert r.result["signal"] == signal.SIGKILL, r.result
    assert_nothing_left()
    assert not pids_with(m)


REACH_HOST_FDS = """
import json, os, sys, time
marker = sys.argv[1][::-1].encode() * 4096  # not argv's: the run's call file holds that
reached = []
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            link = os.readlink(path)
            w = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if link.startswith("host:") and os.write(w, marker) > 0:
                reached.append([pid, fd, link])
        except OSError:
            pass
        os.close(w)
print(json.dumps(reached), flush=True)
time.sleep(60)
"""


def test_helper_holds_no_host_descriptor_the_command_can_write(cordon):
    """The helper's processes (init, its caller, the relay and the DNS stub)
    are the command's uid, so their descriptors are the command's to reopen
    through /proc/PID/fd. None is a host one: a stderr left on runsc's log
    (a host file in the run's directory) let the command write gigabytes
    onto the host's /dev/shm past the run's memory and disk limits."""
    m = marker()
    p = cordon.popen(["python3", "-c", REACH_HOST_FDS, m[::-1]], *LEVEL)
    try:
        line = p.stdout.readline()
        on_host = []
        for base in ("/dev/shm", "/tmp"):
            for d in glob.glob(f"{base}/cordon-gvisor-{p.pid}-*"):
                for root, _, files in os.walk(d):
                    for f in files:
                        path = os.path.join(root, f)
                        try:
                            with open(path, "rb") as fh:
                                if m.encode() in fh.read():
                                    on_host.append(path)
                        except OSError:
                            pass
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    assert line, "the command printed nothing"
    assert on_host == []
    assert json.loads(line) == [], line
    assert_nothing_left()


# --- limits (root: the cgroup around runsc's processes) -----------------------------


def test_memory_limit_ends_run_as_oom(root_cordon):
    """The sentry holds the command's memory: the cgroup's OOM kill takes the
    whole sandbox, reported as the command's death by SIGKILL, reason oom."""
    r = gv(root_cordon, ["python3", "-c",
                         "b = [bytearray(10 << 20) for i in range(150)]; print('all')"],
           "-m", "64M")
    assert r.status == 128 + signal.SIGKILL, r
    assert r.result["reason"] == "oom", r.result
    assert "all" not in r.out
    assert r.result["enforcement"]["memory"] == "cgroup-v1", r.result
    assert_nothing_left()


def test_pids_are_counted_inside_gvisor(root_cordon):
    """The pids limit is gVisor's RLIMIT_NPROC, exact and the whole sandbox's:
    a fork flood is refused at 32 and the run goes on. The host's pids cgroup
    would count gVisor's own tasks (~5 a process): with it as the limit, 200
    processes under a limit of 256 ended a run as pids_limit."""
    r = gv(root_cordon, ["python3", "-c", """
import os, time
n = 0
try:
    while n < 300:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError as e:
    print('refused after', n)
"""], "--pids", "32", "-t", "60s")
    assert r.status == 0 and r.result["reason"] == "exited", r
    assert r.out.startswith("refused after") and int(r.out.split()[-1]) < 32, r
    assert r.result["enforcement"]["pids"] == "kernel", r.result
    r = gv(root_cordon, ["python3", "-c", """
import os, time
for i in range(200):
    if os.fork() == 0:
        time.sleep(3)
        os._exit(0)
print('forked 200')
"""], "-t", "60s")
    assert (r.status, r.out) == (0, "forked 200\n"), r
    assert_nothing_left()


def test_memory_held_by_the_supervisor_without_cgroup(user_cordon):
    """No cgroup for an ordinary user, and gVisor ignores RLIMIT_DATA: the
    supervisor meters gVisor's memory (its memory file and its own heap)
    and ends the run as oom past the limit, the default's too."""
    hog = ["python3", "-c", "b = [bytearray(16 << 20) for i in range(40)]\nprint('allocated')"]
    r = gv(user_cordon, hog, "-m", "64M", "--best-effort", "memory")
    assert (r.status, r.result["reason"]) == (137, "oom"), r
    assert "allocated" not in r.out, r
    assert r.result["enforcement"]["memory"] == "supervisor", r.result
    r = gv(user_cordon, ["python3", "-c",
                         "b = [bytearray(64 << 20) for i in range(24)]\nprint('allocated')"])
    assert (r.status, r.result["reason"]) == (137, "oom"), r
    assert r.result["enforcement"]["memory"] == "supervisor", r.result
    assert r.result["peak_memory_bytes"] <= (1 << 30) + (256 << 20), r.result


def test_pids_rlimit_without_cgroup(user_cordon):
    r = gv(user_cordon, ["python3", "-c", """
import os, time
n = 0
try:
    for i in range(50):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
    print('forked', n)
except OSError as e:
    print('refused after', n)
"""], "--pids", "10", "--best-effort", "pids")
    assert r.status == 0, r
    assert r.out.startswith("refused after"), r


def test_output_cap(cordon):
    r = gv(cordon, ["sh", "-c", "yes cordon"], "--output", "64K")
    assert r.result["reason"] == "output_limit", r.result
    assert len(r.stdout) <= 64 * 1024
    assert_nothing_left()


# --- the seam: prepared warm, started later (what a pool holds) -----------------


def test_two_prepared_sandboxes_started_from_one_process(identity, seam_bin):
    r = subprocess.run(identity.wrap([seam_bin, "concurrent", "isolation=gvisor",
                                      "limits.wall=30s"]),
                       env=identity.env(), capture_output=True, text=True, cwd="/", timeout=90)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    a, b = json.loads(lines[0]), json.loads(lines[1])
    assert (a["label"], a["exit_code"], a["level"]) == ("from-a\n", 3, "gvisor"), a
    assert (b["label"], b["exit_code"]) == ("from-b\n", 0), b
    assert lines[2] == "children 0", r.stdout
    assert_nothing_left()


@pytest.mark.parametrize("extra", [[], ["network.allow=example.test"]],
                         ids=["plain", "gateway"])
def test_prepared_sandbox_released_without_start(identity, seam_bin, extra):
    before = host_state()
    p = subprocess.Popen(identity.wrap([seam_bin, "release", "isolation=gvisor", *extra]),
                         env=identity.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        first = p.stdout.readline().split()
        assert first[:1] == ["prepared"], (first, p.stderr.read() if p.poll() else "")
        assert runsc_pids(), "the sandbox is not up while prepared"
        out, err = p.communicate("go\n", timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert out.strip() == "released 0", out
    assert_nothing_left()
    assert not new_leftovers(before), "a released sandbox left state on the host"


# --- the call's files (cordon serve's run) ------------------------------------------


def test_call_files_are_placed_inside(cordon):
    """The helper writes them inside gVisor (the scratch workspace is gVisor's
    own tmpfs) before the command runs, with their modes."""
    from serve_util import Daemon
    d = Daemon(cordon, *LEVEL, "--pool", "1")
    try:
        c = d.connect()
        d.pool_ready(1)
        r = c.result("run", {"argv": ["sh", "-c", "stat -c '%n %a %s' main.py d/e/run.sh; "
                                                  "./d/e/run.sh"],
                             "files": {"main.py": "print(1)\n",
                                       "d/e/run.sh": {"content": "#!/bin/sh\necho ran\n",
                                                      "mode": 0o755}}})
        assert r["pooled"] and r["exit_code"] == 0, r
        assert r["stdout"] == "main.py 644 9\nd/e/run.sh 755 19\nran\n", r
        c.close()
    finally:
        d.stop()
    assert_nothing_left()


def test_call_files_do_not_follow_links(cordon):
    """A link in a host workspace is not followed out of it: the call fails
    with one error naming the file, and the link's target stays empty."""
    from serve_util import Daemon
    ws, outside = cordon.hostdir("ws"), cordon.hostdir("outside")
    os.symlink(outside, ws / "d")
    d = Daemon(cordon, *LEVEL, "--pool", "0", "-w", ws)
    try:
        c = d.connect()
        ans = c.call("run", {"argv": ["true"], "files": {"d/x": "planted"}})
        c.close()
    finally:
        d.stop()
    assert "cannot place file 'd/x'" in json.dumps(ans), ans
    assert os.listdir(outside) == []
    assert_nothing_left()


# --- check ---------------------------------------------------------------------


def test_check_reports_platforms(cordon):
    r = cordon.raw("check", timeout=60)
    assert r.status == 0, r
    assert "ptrace         works (the one cordon uses)" in r.out, r
    assert "gvisor     yes" in r.out, r
    assert not runsc_pids()
