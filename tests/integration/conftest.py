"""
Integration fixtures: real sandboxes, real host listeners, and the checks for
host traces that every boundary test ends with.

The suite runs as root in CI. Each boundary test runs twice through the
`cordon` fixture: once as root and once as an ordinary user (uid 65534 via
setpriv), because the two take different paths through cordon (a mapped
unprivileged uid and cgroups for root; a plain user namespace and a refusal
or rlimits for the user).

The build directory is $CORDON_BUILD, or ../../build from this file. cordon
and the probe are copied into a 0755 temporary directory so that the
ordinary user can execute them and bind the probe into its sandboxes.
"""

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import levels

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CORDON_BUILD", REPO / "build")).resolve()
PROBE = "/opt/probe"
NOBODY = 65534
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# In the host environment of every cordon run; must never show up inside.
HOST_TOKEN = "cordon-host-token-" + secrets.token_hex(8)

# Where leftovers of a run would show up on the host.
TMP_GLOBS = ("/tmp", "/dev/shm", "/run", "/var/tmp")
CGROUP_ROOT = "/sys/fs/cgroup"


def errname(n):
    if n is None:
        return "None"
    if 0 < n < 200 and n in errno.errorcode:
        return f"{n} ({errno.errorcode[n]})"
    if n > 128:
        return f"{n} (signal {n - 128}?)"
    return str(n)


@dataclasses.dataclass
class Run:
    argv: list
    status: int
    stdout: bytes
    stderr: bytes
    wall: float
    result: dict | None

    @property
    def out(self):
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self):
        return self.stderr.decode("utf-8", "replace")

    def __str__(self):
        return (
            f"argv: {' '.join(map(str, self.argv))}\n"
            f"status: {errname(self.status)}  wall: {self.wall:.2f}s\n"
            f"stdout: {self.out[:2000]!r}\nstderr: {self.err[:2000]!r}\n"
            f"result: {json.dumps(self.result)}"
        )


@dataclasses.dataclass
class Identity:
    name: str
    uid: int
    gid: int

    @property
    def root(self):
        return self.uid == 0

    def wrap(self, argv):
        if self.uid == os.geteuid():
            return list(argv)
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            *argv,
        ]

    def env(self, extra=None):
        env = {
            "PATH": HOST_PATH,
            "LANG": "C.UTF-8",
            "HOME": "/root" if self.root else "/nonexistent",
            "CORDON_TEST_TOKEN": HOST_TOKEN,
        }
        # A sanitizer build reads its options from cordon's own environment;
        # a guest kernel built elsewhere than the shared cache is named so.
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "CORDON_GUEST_KERNEL"):
            if k in os.environ:
                env[k] = os.environ[k]
        env.update(extra or {})
        return env


def identities():
    if os.geteuid() == 0:
        return [Identity("root", 0, 0), Identity("nobody", NOBODY, NOBODY)]
    return [Identity("user", os.geteuid(), os.getegid())]


class Cordon:
    """Runs build/cordon as one identity at one isolation level; results come back as Run.

    Every `cordon run` it makes gets --level LEVEL. Where the level has no
    mounts (process), each bind (the probe's too) is made at its own host
    path, and a command argument naming the bind's destination names that
    path instead: the tests name their fixtures once, the level decides where
    they are seen.
    """

    def __init__(self, ident, bins, tmp, level="namespace"):
        self.ident = ident
        self.bin = str(bins / "cordon")
        self.probe_bin = str(bins / "probe")
        self.tmp = tmp
        self.level = level
        self._n = 0

    def __repr__(self):
        return f"Cordon({self.ident.name}, {self.level})"

    @property
    def probe_path(self):
        """Where the probe is seen inside a sandbox of this level."""
        return PROBE if levels.has_mounts(self.level) else self.probe_bin

    def _probe_bind(self):
        return ["--ro", f"{self.probe_bin}:{self.probe_path}"]

    def _binds(self, opts):
        """OPTS with each bind at its host path where the level has no mounts,
        and what each destination became."""
        opts = [str(o) for o in opts]
        moved = {PROBE: self.probe_bin}
        if levels.has_mounts(self.level):
            return opts, {}
        binds = []
        for i, o in enumerate(opts[:-1]):
            if o in ("--ro", "--rw") and ":" in opts[i + 1]:
                src, dest = opts[i + 1].split(":", 1)
                moved[dest] = src
                binds.append(i + 1)
        opts = [o.split(":", 1)[0] if i in binds else self._cmd([o], moved)[0]
                for i, o in enumerate(opts)]
        return opts, moved

    @staticmethod
    def _cmd(cmd, moved):
        """CMD with each moved destination, wherever it appears (a shell
        string, an option's value), naming where the bind really is."""
        out = []
        for c in map(str, cmd):
            for dest, src in moved.items():
                c = re.sub(re.escape(dest) + r"(?=/|$|[^\w.-])", lambda _m: src, c)
            out.append(c)
        return out

    @property
    def root(self):
        return self.ident.root

    def hostdir(self, name=None, mode=0o755):
        """A fresh host directory owned by this identity."""
        self._n += 1
        d = self.tmp / (name or f"d{self._n}")
        d.mkdir(mode=mode)
        os.chmod(d, mode)
        os.chown(d, self.ident.uid, self.ident.gid)
        return d

    def level_opts(self):
        """The options that put a front end's sandboxes at this level: without
        hardware virtualization here, microvm runs only where QEMU's emulator
        is allowed (see levels.py)."""
        opts = ["--level", self.level]
        if self.level == "microvm":
            opts += ["--accel", os.environ.get("CORDON_TEST_ACCEL", "tcg")]
        return opts

    def argv(self, *args):
        args = list(map(str, args))
        if args[:1] == ["run"] and "--level" not in args and "-l" not in args:
            args[1:1] = self.level_opts() if "--accel" not in args else ["--level", self.level]
        return self.ident.wrap([self.bin, *args])

    def popen(self, cmd, *opts, env=None, **kw):
        opts, moved = self._binds(opts)
        argv = self.argv("run", *opts, *self._probe_bind(), "--", *self._cmd(cmd, moved))
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(
            argv, env=self.ident.env(env), cwd=self.tmp, start_new_session=True, **kw
        )

    def raw(self, *args, input=None, env=None, timeout=60, stdin=None, pass_fds=()):
        """cordon ARGS... exactly as given."""
        return self._exec(self.argv(*args), None, input, env, timeout, stdin, pass_fds)

    def run(self, cmd, *opts, input=None, env=None, timeout=60, stdin=None, pass_fds=(),
            result=True, bind_probe=True):
        """cordon run OPTS --ro PROBE -- CMD; with the --result JSON parsed."""
        res = None
        extra = []
        if result:
            self._n += 1
            rdir = self.hostdir(f"result{self._n}")
            res = rdir / "result.json"
            extra = ["--result", str(res)]
        probe = self._probe_bind() if bind_probe else []
        opts, moved = self._binds(opts)
        argv = self.argv("run", *opts, *extra, *probe, "--", *self._cmd(cmd, moved))
        return self._exec(argv, res, input, env, timeout, stdin, pass_fds)

    def probe(self, action, *args, opts=(), **kw):
        return self.run([PROBE, action, *map(str, args)], *opts, **kw)

    def _exec(self, argv, res, input, env, timeout, stdin, pass_fds):
        if input is not None:
            stdin = subprocess.PIPE
        elif stdin is None:
            stdin = subprocess.DEVNULL
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.ident.env(env), cwd=self.tmp,
                             start_new_session=True, pass_fds=pass_fds)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            pytest.fail(f"cordon did not end within {timeout}s: {argv}\n{err[-2000:]!r}")
        wall = time.monotonic() - t0
        result = None
        if res is not None and res.exists() and res.stat().st_size:
            result = json.loads(res.read_text())
        return Run(argv, p.returncode, out, err, wall, result)


# --- host traces ------------------------------------------------------------


def marker():
    """A unique argv word to find a run's processes on the host by."""
    return "cordon-it-mark-" + secrets.token_hex(6)


def pids_with(word, exclude=()):
    """Host pids whose command line contains WORD."""
    found = []
    me = os.getpid()
    needle = word.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me or int(d) in exclude:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(d))
        except OSError:
            pass
    return found


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def gvisor_call_pids(word):
    """Host pids of the gvisor shims serving a call whose arguments name WORD:
    at the gvisor level the command is gVisor's, no host process, and the
    shim (its run's directory's `call` file names the call) runs it."""
    found = []
    for q in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            with open(f"/proc/{q}/comm") as f:
                if f.read().strip() != "cordon-gvisor":
                    continue
            sup = parent_of(q)
            for base in ("/dev/shm", "/tmp"):
                for call in pathlib.Path(base).glob(f"cordon-gvisor-{sup}-*/call"):
                    if word in call.read_bytes().decode(errors="replace"):
                        found.append(q)
        except OSError:
            pass
    return found


def probe_pids(word, timeout=15):
    """Host pids of the probe (comm "probe") running with WORD in its argv
    (at the gvisor level, of the shim running it)."""
    def find():
        found = []
        for q in pids_with(word):
            try:
                with open(f"/proc/{q}/comm") as f:
                    if f.read().strip() == "probe":
                        found.append(q)
            except OSError:
                pass
        return found or gvisor_call_pids(word)
    return wait_until(find, timeout)


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


def wait_until(pred, timeout, interval=0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(interval)


# Pids of the processes the running test started (its cordon, seam and MCP
# processes): a cgroup or temp entry cordon makes names its maker's pid
# (cordon-PID-..., cordon-check-PID), so the leftover checks count only the
# entries of the test's own runs, not those of runs others start on the host
# meanwhile (a user's cordon, another suite). None outside a test: count all.
_test_pids = None
# Entries already there when the test began, whatever pid they name: pids are
# reused (pid_max is 32768 here), so an old entry of someone else's run may
# come to name a pid of the test's own runs; it is still not the test's.
_preexisting = frozenset()
_PID_IN_NAME = re.compile(r"^\.?cordon-(?:[a-z]+-)*?(\d+)(?:-|$)")


def _popen_init_tracking(orig):
    def init(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        if _test_pids is not None and getattr(self, "pid", None):
            _test_pids.add(self.pid)
    return init


subprocess.Popen.__init__ = _popen_init_tracking(subprocess.Popen.__init__)


def _ours(path):
    """Is PATH an entry of a run the current test started?"""
    if _test_pids is None:
        return True
    if path in _preexisting:
        return False
    m = _PID_IN_NAME.match(os.path.basename(path))
    # An entry naming no pid cannot be told apart: it counts.
    return m is None or int(m.group(1)) in _test_pids


# A cold run's cgroup may be one of its user's slots (src/sandbox/cgroup.h,
# CGROUP_SLOT_PREFIX), kept between runs by design: a slot is a run's cgroup
# while it holds a process, and a leftover only if it still does after.
SLOT_PREFIX = "cordon-slot-u"
SLOT_MAX = 8
SLOT_HIERARCHIES = ("memory", "pids", "cpuacct")


def slot_holds_a_process(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return bool(f.read().strip())
    except OSError:
        return False


def _ancestry(pid):
    """PID and its ancestors: [(pid, comm)], nearest first."""
    out = []
    while pid > 1 and len(out) < 32:
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            break
        out.append((pid, st[st.index("(") + 1:st.rindex(")")]))
        pid = int(st[st.rindex(")") + 2:].split()[1])
    return out


def _slot_ours(path):
    """Does the slot PATH hold a process of the current test's runs? A slot
    serves whoever's run comes next, so its name cannot tell: its members'
    ancestors do. A member under a pid the test started is the test's; one
    under no living cordon (its supervisor gone, whoever's it was) is a
    leftover, and counts; one under another's cordon does not."""
    if _test_pids is None:
        return slot_holds_a_process(path)
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            members = [int(x) for x in f.read().split()]
    except OSError:
        return False
    for pid in members:
        chain = _ancestry(pid)
        if any(q in _test_pids for q, _ in chain):
            return True
        if not any(comm.startswith("cordon") for _, comm in chain[1:]):
            return True
    return False


def cordon_cgroups():
    """Cgroup directories named cordon* of the current test's runs, in every
    hierarchy (a slot while it holds a process of them)."""
    found = set()
    for dirpath, dirnames, _ in os.walk(CGROUP_ROOT):
        for d in dirnames:
            path = os.path.join(dirpath, d)
            if d.startswith(SLOT_PREFIX):
                if _slot_ours(path):
                    found.add(path)
            elif d.startswith("cordon") and _ours(path):
                found.add(path)
    return found


def slot_dirs(uid=0):
    """Where a cordon started by this process as UID keeps its slots: {hierarchy: [dirs]}."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for h in SLOT_HIERARCHIES:
                if h in ctrls.split(","):
                    base = os.path.join(CGROUP_ROOT, h) + path.rstrip("/")
                    out[h] = [f"{base}/{SLOT_PREFIX}{uid}-{k}" for k in range(SLOT_MAX)]
    return out


def holds_a_slot(pid):
    """Does PID hold (flock) one of root's slots for runs started by this process?"""
    inodes = set()
    for dirs in slot_dirs().values():
        for d in dirs:
            try:
                st = os.stat(d)
            except OSError:
                continue
            inodes.add(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")
    with open("/proc/locks") as f:
        for line in f:
            # "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END"
            parts = line.split()
            if len(parts) > 5 and parts[1] == "FLOCK" and parts[4] == str(pid) and \
                    parts[5] in inodes:
                return True
    return False


@pytest.fixture(scope="session", autouse=True)
def slots_removed_at_the_end():
    """The slots the suite's runs leave are removed when it ends (those no
    other run holds): a cgroup with children is one its manager cannot
    simply rmdir."""
    yield
    for dirs in slot_dirs().values():
        for d in dirs:
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.rmdir(d)
            except OSError:
                pass
            finally:
                os.close(fd)


@contextlib.contextmanager
def slots_held():
    """Every slot of root's runs started by this process locked, as runs would
    hold them: a run meanwhile makes a cgroup of its own (and a watchdog)."""
    fds = []
    try:
        for dirs in slot_dirs().values():
            for d in dirs:
                os.makedirs(d, mode=0o700, exist_ok=True)  # as cordon makes them
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)  # a run of another's holds it: until it ends
        yield
    finally:
        for fd in fds:
            os.close(fd)


def cordon_tmp():
    found = set()
    for d in TMP_GLOBS:
        try:
            for e in os.listdir(d):
                if (e.startswith("cordon") or e.startswith(".cordon")) and _ours(os.path.join(d, e)):
                    found.add(os.path.join(d, e))
        except OSError:
            pass
    return found


def host_state():
    return cordon_cgroups() | cordon_tmp()


def new_leftovers(before, grace=3.0, unnamed_grace=30.0):
    """Entries not in BEFORE that are still there after GRACE seconds.

    Only the current test's runs count (see _test_pids); an entry of one of
    them may take a moment to go after its process ends, a leftover does not.
    An entry that names no pid may be a run of someone else's that outlasts
    the test: it has UNNAMED_GRACE to go (only paid when there is one).
    """
    left = host_state() - before
    start = time.monotonic()
    while left:
        named = {e for e in left if _PID_IN_NAME.match(os.path.basename(e))}
        waited = time.monotonic() - start
        if waited >= unnamed_grace or (waited >= grace and named == left):
            break
        time.sleep(0.1)
        left &= host_state()
    return left


def mounts_snapshot():
    with open("/proc/self/mountinfo") as f:
        return {" ".join(l.split()[3:5]) for l in f}


# --- levels -------------------------------------------------------------------


def pytest_collection_modifyitems(config, items):
    """A test that cannot hold at a level is expected to fail there, strictly,
    with the reason levels.EXCEPTIONS gives: never a silent skip."""
    for item in items:
        cs = getattr(item, "callspec", None)
        lvl = cs.params.get("level") if cs else None
        if lvl is None:
            continue
        reason = levels.exception(item.nodeid, lvl)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"{lvl}: {reason}"))


# --- strict mode --------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """CORDON_TESTS_STRICT=1 (CI): a skipped test is a failed one, since a skip
    there means the machine lost a feature the suite is meant to exercise."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CORDON_TESTS_STRICT") == "1" and \
            not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CORDON_TESTS_STRICT=1: {report.longrepr}"


# --- fixtures ---------------------------------------------------------------


@pytest.fixture(scope="session")
def bins():
    cordon = BUILD / "cordon"
    probe = BUILD / "probe"
    for f in (cordon, probe):
        if not os.access(f, os.X_OK):
            pytest.fail(f"{f} is not built (set CORDON_BUILD or run make)")
    d = pathlib.Path(tempfile.mkdtemp(prefix="cit-bin-"))
    os.chmod(d, 0o755)
    for f in (cordon, probe):
        shutil.copy2(f, d / f.name)
        os.chmod(d / f.name, 0o755)
    # The microvm level's initramfs, which cordon looks for beside itself.
    guest = BUILD / "cordon-guest.cpio"
    if guest.exists():
        shutil.copy2(guest, d / guest.name)
        os.chmod(d / guest.name, 0o644)
    # The egress presets (--allow @npm), which cordon looks for beside itself too.
    shutil.copytree(BUILD / "data" / "presets", d / "presets")
    for f in (d / "presets").iterdir():
        os.chmod(f, 0o644)
    os.chmod(d / "presets", 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hosttmp():
    """A 0755 scratch directory on the host, removed afterwards."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="cit-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=identities(), ids=lambda i: i.name)
def identity(request):
    return request.param


@pytest.fixture(scope="module")
def seam_bin():
    """The seam driver (tests/integration/seam.c), where every identity can run it."""
    d = tempfile.mkdtemp(prefix="cit-seam-")
    os.chmod(d, 0o755)
    shutil.copy2(BUILD / "seam", d)
    os.chmod(os.path.join(d, "seam"), 0o755)
    yield os.path.join(d, "seam")
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=levels.selected(BUILD), ids=lambda l: l)
def level(request):
    """Every isolation level under test (CORDON_LEVELS; see levels.py)."""
    return request.param


@pytest.fixture
def cordon(identity, level, bins, hosttmp):
    """cordon as root and as an ordinary user (each test runs both ways), at each level."""
    return Cordon(identity, bins, hosttmp, level)


@pytest.fixture
def root_cordon(level, bins, hosttmp):
    """cordon as root: what needs cgroups."""
    if os.geteuid() != 0:
        pytest.skip("needs root (the suite runs as root in CI)")
    return Cordon(Identity("root", 0, 0), bins, hosttmp, level)


@pytest.fixture
def user_cordon(level, bins, hosttmp):
    """cordon as an ordinary user (uid 65534 when the suite runs as root)."""
    ident = identities()[-1]
    if ident.uid == 0:
        pytest.skip("no ordinary user to run as")
    return Cordon(ident, bins, hosttmp, level)


@pytest.fixture(autouse=True)
def no_leftovers():
    """Every test: no cordon cgroup or temp entry of its runs left behind on the host."""
    global _test_pids, _preexisting
    _test_pids = None
    _preexisting = frozenset(host_state())  # everyone's, before the test's pids are known
    _test_pids = {os.getpid()}  # libcordon runs in-process would name pytest
    before = host_state()
    try:
        yield
        left = new_leftovers(before)
    finally:
        _test_pids = None
        _preexisting = frozenset()
    assert not left, f"cordon left state on the host: {sorted(left)}"


@pytest.fixture
def host_secret(cordon):
    """A secret the caller can read on the host, in a 0700 directory it owns."""
    d = cordon.hostdir("private", mode=0o700)
    f = d / "token.txt"
    value = "host-secret-" + secrets.token_hex(8)
    f.write_text(value + "\n")
    os.chown(f, cordon.ident.uid, cordon.ident.gid)
    os.chmod(f, 0o600)
    return f, value


class TcpListener:
    """A host TCP listener that counts the connections it accepts."""

    def __init__(self, addr):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.addr = addr
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            c.close()

    def count(self):
        """Accepted so far, after letting any connection in flight land."""
        time.sleep(0.3)
        return self.accepted

    def close(self):
        self._stop = True
        self._t.join()
        self.sock.close()


class UnixListener:
    def __init__(self, path=None, abstract=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.path = path
        self.name = abstract
        self.sock.bind(path if path else "\0" + abstract)
        if path:
            os.chmod(path, 0o777)
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.accepted = 0
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    _loop = TcpListener._loop
    count = TcpListener.count
    close = TcpListener.close


def host_ipv4_addresses():
    """Non-loopback IPv4 addresses of the host (from `ip -4 addr`)."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            a = parts[parts.index("inet") + 1].split("/")[0]
            if not a.startswith("127."):
                addrs.append(a)
    return addrs


@pytest.fixture
def tcp_listener():
    listeners = []

    def make(addr):
        l = TcpListener(addr)
        listeners.append(l)
        return l

    yield make
    for l in listeners:
        l.close()


@pytest.fixture
def unix_listener(hosttmp):
    l = UnixListener(path=str(hosttmp / "host.sock"))
    yield l
    l.close()


@pytest.fixture
def abstract_listener():
    l = UnixListener(abstract="cordon-it-" + secrets.token_hex(6))
    yield l
    l.close()


def assert_errno(r, *expected):
    """A controlled refusal: the probe exited with one of EXPECTED, no signal."""
    names = ", ".join(errname(e) for e in expected)
    assert r.status in expected, f"expected {names}, got {errname(r.status)}\n{r}"
    if r.result is not None:
        assert r.result.get("signal") is None, f"probe died by a signal\n{r}"


def assert_cordon_refused(r, *words):
    """Exit 125 with one line on stderr, starting `cordon: ` and naming WORDS."""
    assert r.status == 125, f"expected 125\n{r}"
    lines = r.err.rstrip("\n").split("\n")
    assert len(lines) == 1, f"expected one line on stderr\n{r}"
    assert lines[0].startswith("cordon: "), r
    for w in words:
        assert w.lower() in lines[0].lower(), f"message does not name {w!r}\n{r}"
