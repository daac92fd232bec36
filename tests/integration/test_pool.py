"""
The warm pool: each call gets a sandbox no earlier call touched. At every
level (the daemon runs at the suite's), a call leaves behind everything it
can (files, processes, IPC, sockets, locks, limits) and the next pooled call
finds what a fresh sandbox holds, no more. At the namespace level pooled
sandboxes are clones of one template per policy (doc/pool.md): calls there
also try to write, remount, unmount, signal and trace what the template
shares, to leave a mount behind and to see each other, and the pool goes on
serving. Each test ends with the autouse check that no cgroup or temp entry
is left.
"""

import ctypes
import errno
import json
import os
import subprocess

import pytest

from conftest import (Cordon, gvisor_call_pids, marker, mounts_snapshot, parent_of, pids_with,
                      wait_until)
from serve_util import Daemon

# Python inside the sandbox, for the calls below. MARK names what a call
# leaves; KEY (System V) and PORT (TCP) are derived from it.
PRELUDE = r"""
import ctypes, errno, fcntl, json, os, resource, socket, subprocess, sys
MARK = "@MARK@"
KEY = int(MARK[-6:], 16) | 0x10000000
PORT = 20000 + int(MARK[-4:], 16) % 20000
libc = ctypes.CDLL(None, use_errno=True)
HOME = os.environ.get("HOME", "/tmp/home")
# Where a run writes, by name. Without a mount namespace (the process level)
# /tmp and /dev/shm are the host's: only what carries MARK there is a run's.
DIRS = {"tmp": "/tmp", "TMPDIR": os.environ.get("TMPDIR", "/tmp"), "shm": "/dev/shm",
        "HOME": HOME, "workspace": os.getcwd()}
SHARED = {"tmp", "shm"} if DIRS["TMPDIR"] != "/tmp" else set()
def check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc
def errname(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
"""

DIRTY = PRELUDE + r"""
did = {}
def attempt(name, fn):
    did[name] = errname(fn)
for name, d in DIRS.items():
    attempt("file " + name, lambda d=d: open(os.path.join(d, MARK), "w").write("x"))
attempt("sysv shm", lambda: check(libc.shmget(KEY, 4096, 0o1000 | 0o600)))
attempt("sysv sem", lambda: check(libc.semget(KEY, 1, 0o1000 | 0o600)))
attempt("sysv msg", lambda: check(libc.msgget(KEY, 0o1000 | 0o600)))
libc.mq_open.restype = ctypes.c_int
attempt("mq", lambda: check(libc.mq_open(("/" + MARK).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)))
socks = []
def listen(family, addr):
    s = socket.socket(family)
    socks.append(s)
    s.bind(addr)
    s.listen()
attempt("abstract socket", lambda: listen(socket.AF_UNIX, "\0" + MARK))
attempt("tcp listener", lambda: listen(socket.AF_INET, ("127.0.0.1", PORT)))
held = []
def lock(path):
    fd = os.open(path, os.O_RDONLY)
    held.append(fd)
    fcntl.flock(fd, fcntl.LOCK_EX)
attempt("flock own", lambda: lock(os.path.join(HOME, MARK)))
attempt("flock shared", lambda: lock("/etc/hostname"))
attempt("background", lambda: subprocess.Popen(["sh", "-c", "sleep 60; : " + MARK],
                                               start_new_session=True))
def double_fork():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sh", ["sh", "-c", "sleep 60; : " + MARK + "-daemon"])
        os._exit(0)
    os.wait()
attempt("double fork", double_fork)
attempt("rlimit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
os.umask(0o077)
attempt("hostname", lambda: check(libc.sethostname(b"dirty", 5)))
attempt("keyring", lambda: check(libc.syscall(248, b"user", MARK.encode(), b"secret", 6, -4)))
os.environ["RESIDUE"] = MARK
print(json.dumps({"did": did, "random": os.urandom(16).hex()}))
"""

CLEAN = PRELUDE + r"""
seen = {}
# HOME is a fresh, empty directory of each run's: what is in it counts, not it.
def listing(name, d):
    try:
        return sorted(e for e in os.listdir(d) if os.path.join(d, e) != HOME and
                      (name not in SHARED or MARK in e))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
seen["files"] = {name: listing(name, d) for name, d in DIRS.items()}
sysv = []
for kind in ("shm", "sem", "msg"):
    try:
        rows = open("/proc/sysvipc/" + kind).read().splitlines()[1:]
        sysv += [kind for r in rows if r.split() and int(r.split()[0]) == KEY]
    except OSError:
        pass
seen["sysv"] = sysv
libc.mq_open.restype = ctypes.c_int
seen["mq"] = errname(lambda: check(libc.mq_open(("/" + MARK).encode(), os.O_RDONLY, 0, None)))
seen["abstract socket"] = MARK in open("/proc/net/unix").read()
seen["tcp"] = errname(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=5))
seen["flock shared"] = errname(lambda: fcntl.flock(os.open("/etc/hostname", os.O_RDONLY),
                                                   fcntl.LOCK_EX | fcntl.LOCK_NB))
procs = []
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            if MARK.encode() in open("/proc/%s/cmdline" % p, "rb").read():
                procs.append(p)
        except OSError:
            pass
seen["processes"] = procs
seen["rlimit"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
seen["umask"] = os.umask(0o022)
seen["hostname"] = socket.gethostname()
seen["env"] = sorted(os.environ)
seen["residue env"] = os.environ.get("RESIDUE")
print(json.dumps({"seen": seen, "random": os.urandom(16).hex()}))
"""


@pytest.fixture
def pool(cordon):
    made = []

    def make(n=1):
        d = Daemon(cordon, *cordon.level_opts(), "--pool", str(n), "--max-running", str(n))
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.stop()


def run_code(c, code, **params):
    r = c.result("run", {"code": code, "language": "python", **params})
    assert r["exit_code"] == 0, r
    return json.loads(r["stdout"]), r


def test_a_calls_files_are_placed_or_refused(pool, cordon):
    """A call's files are in its workspace, the command's own, at every
    level (the guest's agent places them at microvm). The next call has none."""
    d = pool(1)
    c = d.connect()
    files = {"a.txt": "from the call\n", "d/b.sh": {"content": "echo ran\n", "mode": 0o755}}
    r = c.result("run", {"argv": ["sh", "-c", "cat a.txt; ./d/b.sh; test -O a.txt && echo own"],
                         "files": files})
    assert (r["exit_code"], r["stdout"]) == (0, "from the call\nran\nown\n"), r
    r = c.result("run", {"argv": ["sh", "-c", "ls -A"]})
    assert (r["exit_code"], r["stdout"]) == (0, ""), r


def test_a_calls_files_are_held_to_the_file_size_limit(cordon):
    """A call's file over limits.file_size is refused before anything runs
    (125, which file), as the command could not have written it, at every
    level (microvm's agent and gVisor's helper place files under that
    rlimit, the boundary does not); one within it is placed."""
    pol = cordon.hostdir() / "fsize.yaml"
    pol.write_text("version: 1\nlimits:\n  file_size: 1M\n")
    os.chmod(pol.parent, 0o755)
    os.chmod(pol, 0o644)
    d = Daemon(cordon, *cordon.level_opts(), "--policy", pol, "--pool", "0")
    try:
        c = d.connect(timeout=120)
        ans = c.call("run", {"argv": ["touch", "ran"], "files": {"big": "x" * (2 << 20)}})
        r = ans["result"]
        assert r["status"] == 125 and r["reason"] == "setup_error", ans
        assert r["error"] == "files: 'big' is 2097152 bytes, over limits.file_size (1048576)", ans
        r = c.result("run", {"argv": ["sh", "-c", "wc -c < ok; ls"], "files": {"ok": "x" * 1000}})
        assert (r["exit_code"], r["stdout"]) == (0, "1000\nok\n"), r
        c.close()
    finally:
        d.stop()


def host_sysv(key):
    """System V objects with KEY in the host's IPC namespace."""
    found = []
    for kind in ("shm", "sem", "msg"):
        with open(f"/proc/sysvipc/{kind}") as f:
            found += [kind for r in f.read().splitlines()[1:] if r.split() and int(r.split()[0]) == key]
    return found


def host_mq(name):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mq_open.restype = ctypes.c_int
    fd = libc.mq_open(name.encode(), os.O_RDONLY, 0, None)
    if fd >= 0:
        os.close(fd)
        return True
    return False


def test_a_pooled_call_finds_nothing_of_the_one_before(pool, cordon):
    """Files in /tmp, /dev/shm, HOME and the workspace; a background and a
    double-forked process; System V objects and a POSIX queue; an abstract
    and a TCP listener; a lock held on a file every call reads; rlimits,
    umask, environment; the hostname and the keyrings it tries: the next
    pooled call sees what a cold run sees, and new random bytes."""
    mark = marker()
    dirty, clean = DIRTY.replace("@MARK@", mark), CLEAN.replace("@MARK@", mark)
    d = pool()
    c = d.connect()
    cold = cordon.run(["python3", "-"], input=clean.encode(), bind_probe=False)
    assert cold.status == 0, cold
    fresh = json.loads(cold.out)["seen"]
    assert d.pool_ready(1)
    first, r0 = run_code(c, clean)
    assert r0["pooled"], r0
    assert first["seen"] == fresh, (first["seen"], fresh)
    assert d.pool_ready(1)
    left, r1 = run_code(c, dirty)
    assert r1["pooled"], r1
    # It did leave what its level lets a run make (a level refuses some: each refusal is one
    # less thing to leave, and the clean call below looks for all of it alike).
    assert left["did"]["file shm"] == "ok" or cordon.level == "process", left
    assert left["did"]["background"] == "ok" and left["did"]["double fork"] == "ok", left
    assert d.pool_ready(1)
    after, r2 = run_code(c, clean)
    assert r2["pooled"], r2
    assert after["seen"] == fresh, (after["seen"], fresh)
    assert after["random"] != left["random"] != first["random"]
    # Nor on the host: the processes died with their sandbox, the IPC with its namespace.
    assert wait_until(lambda: not pids_with(mark), 10), pids_with(mark)
    key = int(mark[-6:], 16) | 0x10000000
    assert host_sysv(key) == [] and not host_mq("/" + mark)
    c.close()


def test_concurrent_pooled_calls_see_nothing_of_each_other(pool, cordon):
    """One call holds everything it made (it is still running) while another
    runs beside it: the other sees none of it."""
    mark = marker()
    holder = DIRTY.replace("@MARK@", mark).replace(
        'print(json.dumps({"did"', 'sys.stdout.write("ready\\n"); sys.stdout.flush()\n'
        'import time; time.sleep(60)\nprint(json.dumps({"did"')
    clean = CLEAN.replace("@MARK@", mark)
    d = pool(2)
    fresh = json.loads(cordon.run(["python3", "-"], input=clean.encode(), bind_probe=False).out)["seen"]
    a, b = d.connect(), d.connect()
    assert d.pool_ready(2)
    a.send("run", {"code": holder, "language": "python", "stream": True})
    # Its first output is its word that everything is made and held.
    note = a.line()
    assert note.get("method") == "run.output" and "ready" in json.dumps(note), note
    beside, r = run_code(b, clean)
    assert r["pooled"], r
    # A lock on a file both calls read (a file of the template's, or of the
    # host's /usr) is seen while its holder lives, as it always was: locks
    # are advisory and die with the holder (doc/pool.md); the call before
    # in the test above finds it free.
    del beside["seen"]["flock shared"], fresh["flock shared"]
    assert beside["seen"] == fresh, (beside["seen"], fresh)
    # A client that goes away stops its runs.
    a.close()
    b.close()
    assert wait_until(lambda: not pids_with(mark), 20), pids_with(mark)


def test_a_killed_supervisor_leaves_nothing_and_the_pool_goes_on(pool, cordon):
    """SIGKILL the supervisor of a running pooled call (the daemon's child
    above its sandbox): the call is answered as killed, nothing of its
    sandbox is left, its cgroup goes back to the pool or away, and the next
    calls are served from the pool."""
    mark = marker()
    d = pool(2)
    c = d.connect()
    assert d.pool_ready(2)
    c.send("run", {"argv": ["sh", "-c", f"echo up; sleep 60; : {mark}"], "stream": True})
    note = c.line()
    assert note.get("method") == "run.output", note
    # At gvisor the sleeper is gVisor's: the host process is the shim running it.
    def call_pids():
        return pids_with(mark) or gvisor_call_pids(mark)
    procs = wait_until(call_pids, 15)
    assert procs, "the call's sleeper is not running"
    sup = procs[0]
    while parent_of(sup) != d.proc.pid:
        sup = parent_of(sup)
    os.kill(sup, 9)
    ans = c.answer(1)
    assert ans.get("result", {}).get("reason") == "killed" or "error" in ans, ans
    assert wait_until(lambda: not call_pids(), 20), call_pids()
    for _ in range(3):
        assert d.pool_ready(1)
        r = c.result("run", {"argv": ["true"]})
        assert r["pooled"] and r["exit_code"] == 0, r
    c.close()


# --- the template (namespace level) ---------------------------------------------

@pytest.fixture
def ns_cordon(identity, bins, hosttmp):
    """The level whose pool clones a template, as root and as an ordinary user."""
    return Cordon(identity, bins, hosttmp, "namespace")


@pytest.fixture
def ns_pool(ns_cordon):
    made = []

    def make(n=1):
        d = Daemon(ns_cordon, "--level", "namespace", "--pool", str(n), "--max-running", str(n))
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.stop()


# Each is tried against what a template shares; the value is the errno name.
ATTACK = r"""
import ctypes, errno, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def errname(rc_or_fn):
    try:
        rc = rc_or_fn() if callable(rc_or_fn) else rc_or_fn
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    if isinstance(rc, int) and rc < 0:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return "ok"
MS_REMOUNT, MS_BIND, MS_RDONLY, MNT_DETACH = 32, 4096, 1, 2
out = {}
for path in ("/MARK", "/etc/MARK", "/dev/MARK", "/usr/MARK", "/proc/MARK"):
    out["create " + path] = errname(lambda p=path: os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
out["write /etc/passwd"] = errname(lambda: os.open("/etc/passwd", os.O_WRONLY))
out["mkdir /etc/x"] = errname(lambda: os.mkdir("/etc/MARK"))
out["remount / rw"] = errname(lambda: libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None))
out["remount /etc/ssl rw"] = errname(lambda: libc.mount(None, b"/etc/ssl", None,
                                                        MS_REMOUNT | MS_BIND, None))
out["unmount /proc"] = errname(lambda: libc.umount2(b"/proc", MNT_DETACH))
out["unmount /tmp"] = errname(lambda: libc.umount2(b"/tmp", MNT_DETACH))
out["mount over /etc"] = errname(lambda: libc.mount(b"tmpfs", b"/etc", b"tmpfs", 0, None))
out["ptrace init"] = errname(lambda: libc.ptrace(16, 1, None, None))  # PTRACE_ATTACH
# Init is the one process here that came through the template: its namespaces' and
# descriptors' links, and itself, are out of reach.
for what in ("ns/user", "ns/mnt", "fd", "root/"):
    out["open init's " + what] = errname(lambda w=what: os.close(os.open("/proc/1/" + w, os.O_RDONLY)))
out["kill init"] = errname(lambda: os.kill(1, signal.SIGKILL))
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["mounts"] = sorted(" ".join(l.split()[4:5] + l.split(" - ")[1].split()[:1])
                       for l in open("/proc/self/mountinfo"))
# Optional fields (shared:N, master:N): a mount of a peer group would carry
# mounts between the call and the template, or the calls after it.
out["propagation"] = sorted(f for l in open("/proc/self/mountinfo")
                            for f in l.split(" - ")[0].split()[6:])
print(json.dumps(out))
"""


def test_a_call_cannot_write_remount_or_unmount_the_template(ns_pool, ns_cordon):
    """The template's root and everything bound in it are read-only to a call,
    which cannot remount, unmount or mount over any of it (the copy each call
    gets is locked: its user namespace is a child of the template's), and a
    pooled call after it sees exactly the mount table the first one saw, none
    of its mounts in a peer group (nothing propagates to or from the
    template)."""
    mark = marker()
    attack = ATTACK.replace("MARK", mark)
    d = ns_pool()
    c = d.connect()
    assert d.pool_ready(1)
    first, r = run_code(c, attack)
    assert r["pooled"], r
    for k in ("create /" + mark, "create /etc/" + mark, "create /dev/" + mark,
              "create /usr/" + mark, "write /etc/passwd", "mkdir /etc/x"):
        assert first[k] in ("EROFS", "EACCES", "EPERM"), (k, first)
    assert first["create /proc/" + mark] == "ENOENT", first  # procfs makes no files
    for k in ("remount / rw", "remount /etc/ssl rw", "unmount /proc", "unmount /tmp",
              "mount over /etc", "ptrace init"):
        assert first[k] == "EPERM", (k, first)
    # Its own PID namespace: init and itself, nothing of the template or the daemon.
    assert first["pids"] == [1, 2], first
    assert first["propagation"] == [], first
    for what in ("ns/user", "ns/mnt", "fd", "root/"):
        assert first["open init's " + what] == "EACCES", (what, first)
    assert first["kill init"] == "EPERM", first
    assert d.pool_ready(1)
    second, r = run_code(c, attack)
    assert r["pooled"], r
    assert second["mounts"] == first["mounts"] and second["pids"] == [1, 2], (first, second)
    c.close()
    assert not pids_with(mark)


def test_a_call_that_kills_all_it_can_leaves_the_pool_serving(ns_pool, ns_cordon):
    """kill(-1, SIGKILL) inside a pooled call reaches its own processes only:
    no template process exists to reach, the other prepared sandbox and the
    daemon are in other PID namespaces, and the next calls are served from
    the pool with no failed preparation."""
    d = ns_pool(2)
    c = d.connect()
    assert d.pool_ready(2)
    before = c.result("stats")["pool"]["failures"]
    # kill(-1) spares its caller: the shell goes on, its sleeper does not.
    r = c.result("run", {"argv": ["sh", "-c", "sleep 30 & kill -9 -1; wait $!; echo $?"]})
    assert r["pooled"] and r["stdout"] == "137\n", r
    for _ in range(3):
        assert d.pool_ready(1)
        r = c.result("run", {"argv": ["sh", "-c", "ls /proc | grep -c '^[0-9]'"]})
        assert r["pooled"] and r["exit_code"] == 0, r
    st = c.result("stats")
    assert st["pool"]["failures"] == before and d.proc.poll() is None, st
    c.close()


def test_the_template_leaves_no_process_and_no_mount_on_the_host(ns_cordon):
    """A template is namespaces pinned by the daemon's descriptors: its
    builder is gone once they are, no mount of it is on the host, and
    nothing of it outlives the daemon."""
    before = mounts_snapshot()
    d = Daemon(ns_cordon, "--level", "namespace", "--pool", "2")
    try:
        assert d.pool_ready(2)
        assert not pids_with("cordon-template")
        assert mounts_snapshot() == before
        c = d.connect()
        r = c.result("run", {"argv": ["true"]})
        assert r["pooled"] and r["exit_code"] == 0, r
        c.close()
    finally:
        code, err = d.stop()
    assert code == 0, err
    assert mounts_snapshot() == before
    assert not pids_with("cordon-template")


# Leaves what the kernel frees only as it tears the run's namespaces down: a
# System V segment never removed and files in its tmpfs, all touched.
HOARD = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
touched = 0
sid = libc.shmget(0, 100 << 20, 0o1000 | 0o600)
addr = libc.shmat(sid, None, 0) if sid >= 0 else None
if addr and addr != ctypes.c_void_p(-1).value:
    ctypes.memset(addr, 1, 100 << 20)
    touched += 100 << 20
with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "hoard"), "wb") as f:
    for _ in range(50):
        f.write(b"x" * (1 << 20))
    touched += 50 << 20
print(json.dumps({"touched": touched}))
"""

# Takes most of the limit in memory of its own.
TAKE = r"""
b = bytearray(240 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print("took")
"""


def test_memory_a_call_leaves_charged_is_not_the_next_ones(cordon):
    """A call leaves 150 MB that only its namespaces' teardown frees (a
    System V segment, tmpfs files) in the cgroup the pool lends the next
    call: a cgroup is lent again only once that is gone, so the next call
    has its whole limit (it takes 240 MB of 320 MB) and each call's peak is
    at least what it touched itself, never less by what was charged before."""
    pol = cordon.hostdir() / "memory.yaml"
    # Where this user gets no cgroup the limit is the kernel's to give or not (best effort).
    pol.write_text("version: 1\nlimits:\n  memory: 320M\n  best_effort: [memory]\n")
    os.chmod(pol, 0o644)
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "1", "--max-running", "1", "-p", pol)
    try:
        c = d.connect()
        for _ in range(4):
            assert d.pool_ready(1)
            hoard, r = run_code(c, HOARD)
            assert r["pooled"], r
            if r["result"]["enforcement"]["memory"].startswith("cgroup"):
                assert r["result"]["peak_memory_bytes"] >= hoard["touched"], (hoard, r["result"])
            assert d.pool_ready(1)
            r = c.result("run", {"code": TAKE, "language": "python"})
            assert r["pooled"] and r["exit_code"] == 0 and r["stdout"] == "took\n", r
        c.close()
    finally:
        d.stop()
