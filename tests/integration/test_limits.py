"""
Limits and teardown: each bomb ends with the reason that stopped it, the host
is unaffected, and when a run ends -- normally, by a limit, or because the
supervisor was signalled or killed -- no process, cgroup or mount of it stays.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

import levels
from conftest import (PROBE, assert_cordon_refused, cordon_cgroups, host_state, marker,
                      mounts_snapshot, new_leftovers, pids_with, probe_pids, wait_until)

MIB = 1 << 20
TREE_WIDE = ("cgroup-v1", "cgroup-v2")


def held(cordon, limit):
    """What holds LIMIT at this level as this caller (levels.HELD_BY)."""
    return levels.held_by(limit, cordon.level, cordon.root)


def says_held(r, cordon, limit):
    """Does the run's enforcement say what levels.HELD_BY says for LIMIT?"""
    want, got = held(cordon, limit), r.result["enforcement"][limit]
    return got in TREE_WIDE if want == "cgroup" else got == want


def assert_gone(m, timeout=5.0):
    left = wait_until(lambda: not pids_with(m), timeout)
    assert left, f"processes of the run survived: {pids_with(m)}"


def fork_bomb(m):
    # Every forked shell keeps argv[0] = the marker, so survivors are findable.
    return ["sh", "-c", "b() { b | b & }; b; sleep 30", m]


def memory_bomb():
    return ["python3", "-c",
            "x = [b'\\x01' * (16 << 20) for _ in range(64)]; print('survived')"]


# --- root: cgroup-enforced limits ---------------------------------------------


def test_fork_bomb_ends_with_pids_limit(root_cordon):
    """Where a cgroup counts pids, the bomb ends the run; where the level's
    own kernel does (gvisor, microvm), its forks fail and it runs on."""
    m = marker()
    r = root_cordon.run(fork_bomb(m), "--pids", "64", "--timeout", "20s", timeout=60)
    assert r.result is not None, r
    assert says_held(r, root_cordon, "pids"), r
    if held(root_cordon, "pids") == "kernel":
        # Its forks fail; gVisor's host tasks may still reach their own
        # bound (the cgroup's), which ends the run. Or the first shell's own
        # fork failed, once its children had taken every pid first (which
        # comes first is the scheduler's): dash exits 2 on "Cannot fork".
        assert r.result["reason"] in ("timeout", "pids_limit") or (
            (r.result["reason"], r.status) == ("exited", 2) and "fork" in r.err.lower()), r
    else:
        assert r.result["reason"] == "pids_limit", r
        assert r.wall < 20, r
    assert r.status != 0 and r.status != 125, r
    assert root_cordon.run(["true"]).status == 0
    assert_gone(m)
    assert subprocess.run(["true"]).returncode == 0      # the host can still fork


def test_memory_bomb_ends_with_oom(root_cordon):
    r = root_cordon.run(memory_bomb(), "-m", "64M", "--timeout", "30s", timeout=60)
    assert r.result is not None, r
    assert r.result["reason"] == "oom", r
    assert r.status == 137, r
    assert "survived" not in r.out
    assert r.result["peak_memory_bytes"] <= 80 * MIB, r


def test_cpu_limit(root_cordon):
    m = marker()
    r = root_cordon.run(["sh", "-c", "while :; do :; done", m], "--cpu", "1s",
                        "--timeout", "20s", timeout=60)
    assert r.result is not None, r
    # The CPU limit stopped it, not the wall clock. How much CPU the result
    # then shows is the kernel's accounting, which on a loaded (or virtual)
    # machine can read less than the second the limit fired at (steal time,
    # sampled ticks): asserted only to be some.
    assert r.result["reason"] == "cpu_limit", r
    assert r.status not in (0, 124, 125), r
    assert r.result["cpu_ms"] > 0, r
    assert_gone(m)


def test_root_limits_enforced_by_cgroup(root_cordon):
    r = root_cordon.run(["true"], "-m", "256M", "--pids", "128", "--cpu", "10s")
    assert r.status == 0, r
    for k in ("memory", "pids"):
        assert says_held(r, root_cordon, k), r.result["enforcement"]


# --- an ordinary user: refusal, or rlimits when best-effort -----------------------


@pytest.mark.parametrize("flag,value,word", [("--memory", "64M", "memory"),
                                             ("-m", "64M", "memory"),
                                             ("--pids", "64", "pids"),
                                             ("--cpu", "5s", "cpu")])
def test_unprivileged_limit_refused(user_cordon, flag, value, word):
    """Refused where only a per-process rlimit could hold it; a level that
    holds it for the whole sandbox without a cgroup (gvisor) runs it."""
    before = host_state()
    r = user_cordon.run(["true"], flag, value, result=held(user_cordon, word) != "rlimit")
    if held(user_cordon, word) == "rlimit":
        assert_cordon_refused(r, word)
    else:
        assert r.status == 0 and says_held(r, user_cordon, word), r
    assert not new_leftovers(before)


def test_unprivileged_best_effort_memory(user_cordon):
    r = user_cordon.run(["echo", "ran"], "-m", "256M", "--best-effort", "memory")
    assert r.status == 0, r
    assert r.out == "ran\n"
    assert says_held(r, user_cordon, "memory"), r


def test_unprivileged_best_effort_all(user_cordon):
    r = user_cordon.run(["echo", "ran"], "-m", "256M", "--pids", "64", "--cpu", "5s",
                        "--best-effort", "all")
    assert r.status == 0, r
    for k in ("memory", "pids", "cpu"):
        assert says_held(r, user_cordon, k), r.result["enforcement"]


def test_unprivileged_best_effort_fork_bomb_contained(user_cordon):
    m = marker()
    r = user_cordon.run(fork_bomb(m), "--pids", "64", "--best-effort", "pids",
                        "--timeout", "5s", timeout=60)
    assert r.status not in (0, 125), r
    assert r.result["reason"] in ("timeout", "pids_limit"), r
    assert_gone(m)


# --- both identities ----------------------------------------------------------


def test_timeout(cordon):
    r = cordon.run(["sleep", "100"], "--timeout", "1s")
    assert r.status == 124, r
    assert r.result["reason"] == "timeout", r
    assert r.wall < 20, r                     # sanity bound, not a speed test
    assert r.result["wall_ms"] >= 900, r


def test_timeout_kills_whole_tree(cordon):
    m = marker()
    r = cordon.run(["sh", "-c", f"sleep 100 & sleep 100 & {PROBE} sleep 100 {m}; wait", m],
                   "-t", "1s")
    assert r.status == 124, r
    assert_gone(m)


def test_output_flood_capped(cordon):
    r = cordon.run(["head", "-c", "100000000", "/dev/zero"], "--output", "1M", timeout=60)
    assert r.result is not None, r
    assert r.result["reason"] == "output_limit", r
    assert len(r.stdout) <= MIB, len(r.stdout)
    assert r.result["stdout_bytes"] <= MIB, r
    assert r.status != 0, r


def test_output_cap_counts_stderr_too(cordon):
    r = cordon.run(["sh", "-c", "head -c 3000000 /dev/zero >&2"], "--output", "1M")
    assert r.result["reason"] == "output_limit", r
    assert len(r.stdout) + len(r.stderr) <= MIB + 4096, (len(r.stdout), len(r.stderr))


def test_daemon_does_not_outlive_the_run(cordon):
    m = marker()
    ws = cordon.hostdir("ws")
    r = cordon.run([PROBE, "daemon", "/workspace/daemon-was-here", "1", m], "-w", ws)
    assert r.status == 0, r
    assert "daemonized" in r.out
    assert_gone(m, timeout=2)
    time.sleep(2)  # the daemon would have written its file after 1s
    assert not (ws / "daemon-was-here").exists(), "a daemon outlived the run"
    assert not pids_with(m)


def test_shell_daemon_does_not_outlive_the_run(cordon):
    m = marker()
    r = cordon.run(["sh", "-c", f"setsid sh -c '{PROBE} sleep 1000 {m} &' </dev/null "
                   ">/dev/null 2>&1 & sleep 0.2; echo started"])
    assert r.status == 0, r
    assert_gone(m)


def limits_for(cordon):
    """Limits that give a root run its cgroups (the teardown must remove them)."""
    if cordon.root:
        return ["-m", "256M", "--pids", "256", "--cpu", "100s"]
    return ["-m", "256M", "--pids", "256", "--best-effort", "all"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_supervisor_signal_tears_down(cordon, sig):
    before = cordon_cgroups()
    mounts = mounts_snapshot()
    m = marker()
    p = cordon.popen([PROBE, "sleep", "1000", m], *limits_for(cordon))
    try:
        assert probe_pids(m), "run never started"
        if cordon.root:
            assert cordon_cgroups() - before, "a run with limits made no cgroup"
        p.send_signal(sig)
        p.wait(timeout=15)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    err = p.stderr.read().decode(errors="replace")
    assert p.returncode != 0, err
    assert p.returncode != 125 or "cordon:" not in err, err
    assert_gone(m)
    assert wait_until(lambda: not (cordon_cgroups() - before), 5), cordon_cgroups() - before
    assert mounts_snapshot() == mounts


def test_supervisor_sigkill_takes_the_run_with_it(cordon):
    before = cordon_cgroups()
    m = marker()
    p = cordon.popen([PROBE, "sleep", "1000", m], *limits_for(cordon))
    try:
        assert probe_pids(m), "run never started"
        if cordon.root:
            assert cordon_cgroups() - before, "a run with limits made no cgroup"
        p.kill()
        p.wait(timeout=15)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert_gone(m, timeout=3)
    # Nobody is left to rmdir the cgroup in-line; it must still go away.
    left = wait_until(lambda: not (cordon_cgroups() - before), 5)
    assert left, f"cgroups left after SIGKILL: {cordon_cgroups() - before}"


def cgroup_paths(pid):
    """{hierarchy directory name: path} for PID, e.g. {"memory": "/a/b"}."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            name = ctrls.replace("name=", "") if ctrls else "unified"
            out[name] = path
    return out


def test_cgroup_beneath_supervisor(root_cordon):
    """The run's cgroups sit under cordon's own, and hold the sandboxed process."""
    before = cordon_cgroups()
    m = marker()
    p = root_cordon.popen([PROBE, "sleep", "1000", m], "-m", "64M", "--pids", "64",
                          "--cpu", "100s")
    try:
        found = probe_pids(m)
        assert found, "run never started"
        mine = cordon_cgroups() - before
        assert mine, "no cgroup for a run with limits"
        sup = cgroup_paths(p.pid)
        inner = cgroup_paths(found[0])
        hierarchies = set()
        for d in mine:
            rel = os.path.relpath(d, "/sys/fs/cgroup")
            h, _, path = rel.partition("/")
            path = "/" + path
            hierarchies.add(h)
            base = sup[h].rstrip("/")
            assert path.startswith(base + "/"), f"{d} is not beneath cordon's {sup[h]}"
            assert inner[h] == path or inner[h].startswith(path + "/"), (d, inner)
        assert {"memory", "pids"} <= hierarchies, mine
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=15)
    assert_gone(m)


def policy(cordon, text):
    d = cordon.hostdir()
    (d / "policy.yaml").write_text(text)
    return d / "policy.yaml"


def test_core_dumps_off(cordon):
    r = cordon.run(["sh", "-c", "ulimit -c"])
    assert (r.status, r.out) == (0, "0\n"), r


def test_file_size_limit(cordon):
    ws = cordon.hostdir("ws")
    p = policy(cordon, "version: 1\nlimits:\n  file_size: 1M\n")
    r = cordon.run(["sh", "-c", "head -c 3000000 /dev/zero > big"], "-p", p, "-w", ws)
    assert r.status != 0, r
    assert (ws / "big").stat().st_size <= MIB


def test_open_files_limit(cordon):
    p = policy(cordon, "version: 1\nlimits:\n  open_files: 32\n")
    r = cordon.run(["python3", "-c",
                    "import errno\nfs = []\ntry:\n"
                    "    for _ in range(100): fs.append(open('/dev/null'))\n"
                    "except OSError as e:\n    print(e.errno, len(fs))\n"], "-p", p)
    assert r.status == 0, r
    code, n = r.out.split()
    assert int(code) == 24 and int(n) < 32, r          # EMFILE


def test_policy_best_effort_key(user_cordon):
    p = policy(user_cordon, "version: 1\nlimits:\n  memory: 256M\n  best_effort: [memory]\n")
    r = user_cordon.run(["true"], "-p", p)
    assert r.status == 0, r
    assert says_held(r, user_cordon, "memory"), r
    p = policy(user_cordon, "version: 1\nlimits:\n  memory: 256M\n")
    if held(user_cordon, "memory") != "rlimit":
        # Held for the whole sandbox without a cgroup: nothing to refuse.
        r = user_cordon.run(["true"], "-p", p)
        assert r.status == 0 and says_held(r, user_cordon, "memory"), r
        return
    r = user_cordon.run(["true"], "-p", p, result=False)
    assert_cordon_refused(r, "memory")


# --- defaults: a run given no limit at all ------------------------------------------
#
# Each default is driven to its edge with no limit flag, as root (cgroup) and as
# an ordinary user (no cgroup: the defaults degrade to rlimits instead of
# refusing), and then lifted by an explicit override. The 10-minute wall and
# CPU defaults are only checked for how they are enforced: a test cannot wait
# for them.

DEFAULTS = ["wall", "cpu", "memory", "pids", "output", "file_size", "open_files"]


def fork_counter(m, limit=2000):
    """Fork sleeping children until fork fails; print errno and how many lived."""
    code = ("import os, sys, time\n"
            "n = 0\n"
            "try:\n"
            f"    while n < {limit}:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60)\n"
            "            os._exit(0)\n"
            "        n += 1\n"
            "    print(0, n, flush=True)\n"
            "except OSError as e:\n"
            "    print(e.errno, n, flush=True)\n"
            "time.sleep(3)\n")
    return ["python3", "-c", code, m]


def test_no_flags_runs_as_anyone_with_every_default(cordon):
    r = cordon.run(["sh", "-c", "ulimit -t; ulimit -d; ulimit -f; ulimit -n"])
    assert r.status == 0, r
    assert r.result["defaults"] == DEFAULTS, r
    enf = r.result["enforcement"]
    assert enf["wall"] == enf["output"] == "supervisor", enf
    assert enf["file_size"] == enf["open_files"] == "rlimit", enf
    t, d, f, n = r.out.split()
    assert (t, f, n) == ("600", str((1 << 30) // 512), "1024"), r   # ulimit -f counts 512B blocks
    for k in ("memory", "pids", "cpu"):
        assert says_held(r, cordon, k), enf
    if held(cordon, "memory") == "rlimit":
        assert d == str(1 << 20), r               # RLIMIT_DATA 1G, in KiB
    else:
        assert d == "unlimited", r                # a cgroup or the supervisor holds memory


def test_default_pids_stop_a_fork_flood(cordon):
    m = marker()
    r = cordon.run(fork_counter(m), timeout=60)
    assert r.result is not None, r
    assert subprocess.run(["true"]).returncode == 0          # the host can still fork
    assert says_held(r, cordon, "pids"), r
    if held(cordon, "pids") == "cgroup":
        assert r.result["reason"] == "pids_limit", r
    else:
        assert (r.status, r.result["reason"]) == (0, "exited"), r
    if r.out:
        code, n = map(int, r.out.split())
        assert code == errno.EAGAIN and 200 < int(n) < 256, r
    assert_gone(m)


def test_default_pids_count_only_the_run(user_cordon):
    """RLIMIT_NPROC is counted in the run's user namespace: the caller's other
    processes on the host do not eat the run's 256."""
    m = marker()
    sleepers = [subprocess.Popen(user_cordon.ident.wrap(["sleep", "60", m]))
                for _ in range(300)]
    try:
        r = user_cordon.run(["sh", "-c", "for i in $(seq 20); do sleep 0.5 & done; wait; "
                                         "echo forked"])
        assert (r.status, r.out) == (0, "forked\n"), r
        assert says_held(r, user_cordon, "pids"), r
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_pids_override_lifts_the_default(cordon):
    m = marker()
    r = cordon.run(fork_counter(m, 300), "--pids", "unlimited", timeout=60)
    assert r.status == 0, r
    assert r.out.split() == ["0", "300"], r
    assert "pids" not in r.result["defaults"], r
    assert r.result["enforcement"]["pids"] == "none", r
    assert_gone(m)


def memory_hog(mib):
    return ["python3", "-c",
            f"x = [b'\\x01' * (64 << 20) for _ in range({mib} // 64)]; print('survived')"]


def test_default_memory_stops_a_hog(cordon):
    r = cordon.run(memory_hog(1536), timeout=60)
    assert "survived" not in r.out, r
    assert says_held(r, cordon, "memory"), r
    if held(cordon, "memory") == "rlimit":
        assert r.status == 1 and "MemoryError" in r.err, r
    else:
        assert (r.status, r.result["reason"]) == (137, "oom"), r
        # The supervisor polls: it may see the limit passed by what one tick allocated.
        over = 16 << 20 if held(cordon, "memory") == "cgroup" else 256 << 20
        assert r.result["peak_memory_bytes"] <= (1 << 30) + over, r


def test_memory_override_lifts_the_default(cordon):
    r = cordon.run(memory_hog(1536), "--memory", "unlimited", timeout=60)
    assert (r.status, r.out) == (0, "survived\n"), r
    assert r.result["enforcement"]["memory"] == "none", r


@pytest.mark.skipif(not shutil.which("java"), reason="no java on this host")
def test_default_memory_lets_a_jvm_start(cordon):
    """The fallback is RLIMIT_DATA: RLIMIT_AS at 1G keeps a JVM from starting."""
    r = cordon.run(["java", "-version"], timeout=60)
    assert r.status == 0, r


def sparse_write(path, offset):
    """Python ignores SIGXFSZ, so the write fails with EFBIG, printed."""
    return ["python3", "-c", "import errno\ntry:\n"
            f"    f = open('{path}', 'wb'); f.seek({offset}); f.write(b'x'); f.close()\n"
            "    print('written')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"]


@pytest.mark.parametrize("where", ["/workspace", "/tmp"])
def test_default_file_size_stops_a_4tib_sparse_file(cordon, where):
    ws = cordon.hostdir("ws")
    r = cordon.run(sparse_write(where + "/sparse", 4 << 40), "-w", ws)
    assert (r.status, r.out) == (0, "EFBIG\n"), r
    # dd takes SIGXFSZ as it comes: the run says which limit ended it.
    r = cordon.run(["dd", "if=/dev/zero", f"of={where}/sparse2", "bs=1", "count=1",
                    f"seek={4 << 40}"], "-w", ws)
    assert (r.status, r.result["reason"]) == (128 + signal.SIGXFSZ, "file_size_limit"), r
    assert r.result["enforcement"]["file_size"] == "rlimit", r
    if where == "/workspace":
        for f in ("sparse", "sparse2"):
            assert (ws / f).stat().st_size == 0, f        # created, never extended


def test_file_size_override_lifts_the_default(cordon):
    ws = cordon.hostdir("ws")
    p = policy(cordon, "version: 1\nlimits:\n  file_size: unlimited\n")
    r = cordon.run(sparse_write("/workspace/sparse", 4 << 40), "-w", ws, "-p", p)
    assert (r.status, r.out) == (0, "written\n"), r
    assert (ws / "sparse").stat().st_size == (4 << 40) + 1
    assert r.result["enforcement"]["file_size"] == "none", r


def test_default_output_cap(cordon):
    r = cordon.run(["head", "-c", str(40 << 20), "/dev/zero"], timeout=60)
    assert r.result["reason"] == "output_limit", r
    assert len(r.stdout) <= 16 << 20 and r.result["stdout_bytes"] <= 16 << 20, r
    r = cordon.run(["head", "-c", str(20 << 20), "/dev/zero"], "--output", "unlimited", timeout=60)
    assert (r.status, len(r.stdout)) == (0, 20 << 20), r


def inode_flood(d, limit):
    return ["python3", "-c",
            "import os\nn = 0\ntry:\n"
            f"    while n < {limit}:\n"
            f"        open('{d}/f%d' % n, 'w').close()\n"
            "        n += 1\n"
            "    print(0, n)\n"
            "except OSError as e:\n    print(e.errno, n)\n"]


@pytest.mark.parametrize("d,cap", [("/tmp", 16384), ("/dev/shm", 4096),
                                   ("/workspace", 65536)])
def test_default_inode_caps(cordon, d, cap):
    before = mounts_snapshot()
    r = cordon.run(inode_flood(d, 100000), timeout=120)
    assert r.status == 0, r
    code, n = map(int, r.out.split())
    # The root directory takes one inode of the cap, and on /tmp HOME and its .gitconfig two.
    assert (code, n) == (errno.ENOSPC, cap - 1 - 2 * (d == "/tmp")), r
    assert mounts_snapshot() == before


def test_inode_override_lifts_the_default(cordon):
    p = policy(cordon, "version: 1\nfilesystem:\n  tmp_inodes: unlimited\n  shm_inodes: 100\n")
    r = cordon.run(inode_flood("/tmp", 20000), "-p", p, timeout=120)
    assert r.out.split() == ["0", "20000"], r
    r = cordon.run(inode_flood("/dev/shm", 1000), "-p", p)
    assert r.out.split() == [str(errno.ENOSPC), "99"], r


def test_shm_has_its_own_size(cordon):
    p = policy(cordon, "version: 1\nfilesystem:\n  shm_size: 8M\n  tmp_size: 32M\n")
    r = cordon.run(["sh", "-c", "df -k /dev/shm /tmp | tail -2"], "-p", p)
    assert r.status == 0, r
    sizes = [int(l.split()[1]) for l in r.out.splitlines()]
    assert sizes == [8 * 1024, 32 * 1024], r


def test_explicit_limit_still_refused_without_cgroup(user_cordon):
    """A default degrades; the same value written is refused as before
    (where only an rlimit could hold it)."""
    before = host_state()
    r = user_cordon.run(["true"], "--memory", "1G", result=False)
    if held(user_cordon, "memory") == "rlimit":
        assert_cordon_refused(r, "memory", "best_effort")
    else:
        assert r.status == 0, r
    assert not new_leftovers(before)


def test_policy_check_names_the_defaults(cordon):
    p = policy(cordon, "version: 1\nlimits:\n  memory: 2G\n  pids: unlimited\n")
    r = cordon.raw("policy", "check", p)
    assert r.status == 0, r
    lim = json.loads(r.out)["policy"]["limits"]
    assert lim["defaults"] == ["wall", "cpu", "output", "file_size", "open_files"], lim
    assert (lim["memory"], lim["pids"], lim["wall_ms"], lim["output"]) == \
        (2 << 30, 0, 600000, 16 << 20), lim
    fs = json.loads(r.out)["policy"]["filesystem"]
    assert (fs["shm_size"], fs["tmp_inodes"], fs["shm_inodes"], fs["workspace_inodes"]) == \
        (64 << 20, 16384, 4096, 65536), fs


def test_check_prints_the_defaults(cordon):
    r = cordon.raw("check")
    assert r.status == 0, r
    rows = {l.split()[0]: l.split()[1:] for l in r.out.splitlines()
            if l.startswith("  ") and l.split()[0] in DEFAULTS}
    assert {k: v[0] for k, v in rows.items()} == {
        "wall": "10m", "cpu": "10m", "memory": "1G", "pids": "256", "output": "16M",
        "file_size": "1G", "open_files": "1024"}, r
    want = TREE_WIDE if cordon.root else ("rlimit",)
    assert rows["memory"][1] in want and rows["pids"][1] in want, r
