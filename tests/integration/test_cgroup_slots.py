"""
A cold run's cgroups as root: made per run, or (namespace level, cgroup v1)
one of the user's slots, kept between runs and reset for the next
(src/sandbox/cgroup.h, cgroup_slot_use). Whichever it gets, a run's limits and
counts are its own: nothing of the run before it carries over, and a slot
holding anything of another run is passed over, never shared.
"""

import os
import signal
import subprocess

from conftest import (CGROUP_ROOT, SLOT_MAX, SLOT_PREFIX, cordon_cgroups, marker, slot_dirs,
                      slots_held, wait_until)
from test_limits import assert_gone, fork_counter

MIB = 1 << 20
SMALL = 256  # MiB: the least a microvm's guest is given a limit for


def filler(mib):
    """Python writing MIB MiB (pages touched, so charged) 16 MiB at a time
    (no single allocation a microvm's guest refuses outright), then saying so."""
    return ["python3", "-c",
            f"x = [b'\\x01' * (16 << 20) for _ in range({mib} // 16)]; print('filled', flush=True)"]


def past(cordon, limit_mib):
    """MiB that pass a memory limit of LIMIT_MIB at this level (gVisor's cgroup
    holds 256 MiB more for gVisor itself)."""
    return limit_mib + 128 + (256 if cordon.level == "gvisor" else 0)


def uses_slots(cordon):
    """Does a cold run at this level take a slot (namespace, whose runs die
    with their supervisor, on a cgroup v1 host)?"""
    return cordon.level == "namespace" and "memory" in slot_dirs()


def hierarchies(dirs):
    """The hierarchies ("memory", "pids"...) of cgroup directories DIRS."""
    return {os.path.relpath(d, CGROUP_ROOT).split("/")[0] for d in dirs}


def members(d):
    """The pids in cgroup directory D."""
    with open(os.path.join(d, "cgroup.procs")) as f:
        return {int(x) for x in f.read().split()}


def assert_run_cgroups(cordon, p, mine, passed_over=()):
    """MINE, the cgroups P's run holds: slots other than PASSED_OVER where the
    level has slots, else its own (cordon-PID-...)."""
    names = {os.path.basename(d) for d in mine}
    if uses_slots(cordon):
        assert all(n.startswith(SLOT_PREFIX) for n in names), mine
        assert not set(mine) & set(passed_over), mine
    else:
        assert all(n.startswith(f"cordon-{p.pid}-") for n in names), mine


def test_the_next_run_has_its_own_limits_and_counts(root_cordon):
    """An OOM-killed run with small limits, then runs without them and one
    with none of its load: each sees its own limits, peak and reason."""
    m = marker()
    fill = past(root_cordon, SMALL)
    small = root_cordon.run(filler(fill), "--memory", f"{SMALL}M", "--pids", "16", timeout=120)
    assert small.result["reason"] == "oom", small
    forks = root_cordon.run(fork_counter(m, 40), "--pids", "unlimited", "--memory", "1G",
                            timeout=120)
    assert forks.status == 0 and forks.out.split() == ["0", "40"], forks
    assert_gone(m)
    big = root_cordon.run(filler(fill), "--memory", "unlimited", timeout=120)
    assert (big.status, big.out, big.result["reason"]) == (0, "filled\n", "exited"), big
    idle = root_cordon.run(["true"], timeout=120)
    assert (idle.status, idle.result["reason"]) == (0, "exited"), idle
    # Not the fill before it (at gvisor and microvm, gVisor's or QEMU's own share counts).
    assert idle.result["peak_memory_bytes"] < big.result["peak_memory_bytes"] - 100 * MIB, \
        (idle.result, big.result)


def test_a_slot_holding_a_process_is_passed_over(root_cordon):
    """A process left in a free slot (put there by hand): the next run takes
    another (or, at a level without slots, a cgroup of its own), and neither
    touches the other."""
    root_cordon.run(["true"])  # the slots exist, where the level has them
    squatter = subprocess.Popen(["sleep", "1000"])
    p = None
    try:
        squatted = [ds[0] for ds in slot_dirs().values()]
        for d in squatted:
            os.makedirs(d, mode=0o700, exist_ok=True)  # as cordon makes them
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(squatter.pid))
        before = cordon_cgroups()
        p = root_cordon.popen(["sleep", "1000"], "--memory", "512M")
        shared = lambda: [d for d in squatted if members(d) - {squatter.pid}]
        assert wait_until(lambda: p.poll() is not None or shared() or
                          "memory" in hierarchies(cordon_cgroups() - before), 120), \
            "the run never held a cgroup"
        assert p.poll() is None, p.communicate()
        assert not shared(), "the run shares a slot with a process not its own"
        assert_run_cgroups(root_cordon, p, cordon_cgroups() - before, squatted)
        assert squatter.poll() is None, "cordon killed a process that was not its run's"
    finally:
        if p:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=60)
        squatter.kill()
        squatter.wait()


def test_slots_taken_the_run_makes_a_cgroup_of_its_own(root_cordon):
    """Every slot locked: the run makes (and afterwards removes) its own, as
    a run at a level without slots always does."""
    with slots_held():
        before = cordon_cgroups()
        p = root_cordon.popen(["sleep", "1000"], "--memory", "512M")
        try:
            mine = lambda: {d for d in cordon_cgroups() - before
                            if os.path.basename(d).startswith(f"cordon-{p.pid}-")}
            assert wait_until(lambda: p.poll() is not None or
                              "memory" in hierarchies(mine()), 120), cordon_cgroups() - before
            assert p.poll() is None, p.communicate()
            assert mine() == cordon_cgroups() - before, cordon_cgroups() - before
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=60)
    assert wait_until(lambda: not (cordon_cgroups() - before), 10), cordon_cgroups() - before


def test_more_runs_at_once_than_slots(root_cordon):
    """Ten runs at once (eight slots; four at a level without): each holds
    its memory limit alone, and every one leaves its cgroup empty or gone."""
    before = cordon_cgroups()
    limit = 384
    n = SLOT_MAX + 2 if uses_slots(root_cordon) else 4
    runs = [root_cordon.popen(filler(64 if i % 2 else past(root_cordon, limit)),
                              "--memory", f"{limit}M",
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for i in range(n)]
    outs = [(p.communicate(timeout=600)[0], p.returncode) for p in runs]
    for i, (out, rc) in enumerate(outs):
        if i % 2:
            assert (out, rc) == (b"filled\n", 0), (i, out, rc)
        else:
            assert out == b"" and rc == 137, (i, out, rc)
    assert wait_until(lambda: not (cordon_cgroups() - before), 10), cordon_cgroups() - before


MSGQ = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 8000)]
m, n = Msg(1, b"x" * 7999), 0
for _ in range(4000):
    q = libc.msgget(0, 0o1000 | 0o600)   # IPC_PRIVATE, IPC_CREAT
    if q < 0:
        break
    for _ in range(2):
        libc.msgsnd(q, ctypes.byref(m), 8000, 0o4000)   # IPC_NOWAIT
    n += 1
print(n)
"""


def test_kernel_memory_a_run_leaves_is_not_the_next_ones(root_cordon):
    """A run leaves 64 MB of System V messages, which the kernel frees only
    after its IPC namespace is gone: the next run with a limit below that
    still starts, and counts its own 32 MB (a reused cgroup charged with them
    refused the limit, EBUSY, or hid the peak)."""
    limit = 300 if root_cordon.level == "microvm" else 48
    for _ in range(2):
        a = root_cordon.run(["python3", "-c", MSGQ], "--memory", "unlimited", timeout=120)
        assert a.status == 0, a
        b = root_cordon.run(filler(32), "--memory", f"{limit}M", timeout=120)
        assert (b.status, b.out, b.result["reason"]) == (0, "filled\n", "exited"), b
        assert b.result["peak_memory_bytes"] >= 32 * MIB, b.result


def test_page_cache_a_run_leaves_does_not_hide_the_next_ones_peak(root_cordon):
    """A run reads a 300 MB file (its page cache charged to its cgroup); the
    next, three processes of 60 MB each, reports a peak of at least their
    sum (a cgroup reused with the cache as its baseline reported 68 MB)."""
    d = root_cordon.hostdir()
    big = d / "big"
    with open(big, "wb") as f:
        f.truncate(0)
        for _ in range(300):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
        # Out of the cache: the run's reads bring it back, charged to the run's cgroup.
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    a = root_cordon.run(["sh", "-c", f"cat {big} >/dev/null"], "--ro", str(d),
                        "--memory", "unlimited", timeout=300)
    assert a.status == 0, a
    three = ("import os, time\n"
             "for _ in range(3):\n"
             "    if os.fork() == 0:\n"
             "        x = b'\\x01' * (60 << 20)\n"
             "        time.sleep(2)\n"
             "        os._exit(0)\n"
             "for _ in range(3):\n"
             "    os.wait()\n")
    # Less than the cache and the three together: the limit reclaims the cache.
    limit = 512 if root_cordon.level == "microvm" else 256
    b = root_cordon.run(["python3", "-c", three], "--memory", f"{limit}M", timeout=120)
    assert b.status == 0, b
    assert b.result["peak_memory_bytes"] >= 180 * MIB, b.result


def test_no_one_else_can_hold_roots_slots(root_cordon):
    """The slots a run leaves are root's alone (0700): an ordinary user can
    neither open nor lock one, so cannot keep root's runs from them."""
    root_cordon.run(["true"])
    dirs = [d for ds in slot_dirs().values() for d in ds if os.path.isdir(d)]
    for d in dirs:
        assert os.stat(d).st_mode & 0o077 == 0, (d, oct(os.stat(d).st_mode))
    if dirs:
        r = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "/usr/bin/python3", "-c",
             "import fcntl, os, sys\n"
             "n = 0\n"
             "for d in sys.argv[1:]:\n"
             "    try:\n"
             "        fcntl.flock(os.open(d, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "        n += 1\n"
             "    except PermissionError:\n"
             "        pass\n"
             "print(n)\n", *dirs], capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout) == (0, "0\n"), r


def test_a_limit_below_what_a_slot_holds_still_ends_as_oom(root_cordon):
    """A run leaves a little charged in its slot (page cache, kernel objects);
    the next run's limit is smaller than that: it gets a cgroup that can take
    the limit, and ends as oom as in a new one (a slot refused the limit,
    EBUSY, and the run ended as a setup error)."""
    for _ in range(2):
        r = root_cordon.run(["sh", "-c", "cat /usr/bin/* >/dev/null 2>&1; true"], timeout=120)
        assert r.status == 0, r
        tiny = root_cordon.run(["true"], "--memory", "1K", timeout=120)
        assert tiny.result["reason"] == "oom", tiny
