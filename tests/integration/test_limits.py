"""
Limits and teardown: each bomb ends with the reason that stopped it, the host
is unaffected, and when a run ends -- normally, by a limit, or because the
supervisor was signalled or killed -- no process, cgroup or mount of it stays.
"""

import os
import signal
import subprocess
import time

import pytest

from conftest import (PROBE, assert_cordon_refused, cordon_cgroups, host_state, marker,
                      mounts_snapshot, new_leftovers, pids_with, probe_pids, wait_until)

MIB = 1 << 20


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
    m = marker()
    r = root_cordon.run(fork_bomb(m), "--pids", "64", "--timeout", "20s", timeout=60)
    assert r.result is not None, r
    assert r.result["reason"] == "pids_limit", r
    assert r.status != 0 and r.status != 125, r
    assert r.wall < 20, r
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
    assert r.result["reason"] == "cpu_limit", r
    assert r.status not in (0, 124, 125), r
    assert r.result["cpu_ms"] >= 900, r
    assert_gone(m)


def test_root_limits_enforced_by_cgroup(root_cordon):
    r = root_cordon.run(["true"], "-m", "256M", "--pids", "128", "--cpu", "10s")
    assert r.status == 0, r
    enf = r.result["enforcement"]
    for k in ("memory", "pids"):
        assert enf.get(k) in ("cgroup-v1", "cgroup-v2"), enf


# --- an ordinary user: refusal, or rlimits when best-effort -----------------------


@pytest.mark.parametrize("flag,value,word", [("--memory", "64M", "memory"),
                                             ("-m", "64M", "memory"),
                                             ("--pids", "64", "pids"),
                                             ("--cpu", "5s", "cpu")])
def test_unprivileged_limit_refused(user_cordon, flag, value, word):
    before = host_state()
    r = user_cordon.run(["true"], flag, value, result=False)
    assert_cordon_refused(r, word)
    assert not new_leftovers(before)


def test_unprivileged_best_effort_memory(user_cordon):
    r = user_cordon.run(["echo", "ran"], "-m", "256M", "--best-effort", "memory")
    assert r.status == 0, r
    assert r.out == "ran\n"
    assert r.result["enforcement"]["memory"] == "rlimit", r


def test_unprivileged_best_effort_all(user_cordon):
    r = user_cordon.run(["echo", "ran"], "-m", "256M", "--pids", "64", "--cpu", "5s",
                        "--best-effort", "all")
    assert r.status == 0, r
    enf = r.result["enforcement"]
    assert enf["memory"] == "rlimit", enf
    assert enf["pids"] in ("rlimit", "none"), enf
    assert enf["cpu"] in ("rlimit", "supervisor"), enf


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
    assert r.result["enforcement"]["memory"] == "rlimit", r
    p = policy(user_cordon, "version: 1\nlimits:\n  memory: 256M\n")
    r = user_cordon.run(["true"], "-p", p, result=False)
    assert_cordon_refused(r, "memory")
