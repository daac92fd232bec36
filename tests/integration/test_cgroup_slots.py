"""
A cold run's cgroups as root: made per run, or (namespace level, cgroup v1)
one of the user's slots, kept between runs and reset for the next
(src/sandbox/cgroup.h, CGROUP_SLOTS). Whichever it gets, a run's limits and
counts are its own: nothing of the run before it carries over, and a slot
holding anything of another run is passed over, never shared.
"""

import os
import signal
import subprocess

from conftest import (PROBE, SLOT_PREFIX, cordon_cgroups, marker, probe_pids, slot_dirs,
                      slots_held, wait_until)
from test_limits import assert_gone, cgroup_paths, fork_counter

MIB = 1 << 20


def filler(mib):
    """Python writing MIB MiB (pages touched, so charged), then saying so."""
    return ["python3", "-c", f"x = b'\\x01' * ({mib} << 20); print('filled', flush=True)"]


def slots_in_use(pid):
    """The slots among PID's cgroups."""
    return {h: p for h, p in cgroup_paths(pid).items() if os.path.basename(p).startswith(SLOT_PREFIX)}


def uses_slots(cordon):
    """Does a cold run at this level take a slot (namespace, whose runs die
    with their supervisor, on a cgroup v1 host)?"""
    return cordon.level == "namespace" and "memory" in slot_dirs()


def test_the_next_run_has_its_own_limits_and_counts(root_cordon):
    """An OOM-killed run with small limits, then runs without them and one
    with none of its load: each sees its own limits, peak and reason."""
    m = marker()
    small = root_cordon.run(filler(200), "--memory", "64M", "--pids", "16", timeout=120)
    assert small.result["reason"] == "oom", small
    forks = root_cordon.run(fork_counter(m, 40), "--pids", "unlimited", "--memory", "1G",
                            timeout=120)
    assert forks.status == 0 and forks.out.split() == ["0", "40"], forks
    assert_gone(m)
    big = root_cordon.run(filler(100), "--memory", "unlimited", timeout=120)
    assert (big.status, big.out, big.result["reason"]) == (0, "filled\n", "exited"), big
    idle = root_cordon.run(["true"], timeout=120)
    assert (idle.status, idle.result["reason"]) == (0, "exited"), idle
    # Not the 100 MiB before it (at gvisor and microvm, gVisor's or QEMU's own share counts).
    assert idle.result["peak_memory_bytes"] < big.result["peak_memory_bytes"] - 50 * MIB, \
        (idle.result, big.result)


def test_a_slot_holding_a_process_is_passed_over(root_cordon):
    """A process left in a free slot (put there by hand): the next run takes
    another (or, at a level without slots, a cgroup of its own), and neither
    touches the other."""
    root_cordon.run(["true"])  # the slots exist, where the level has them
    for ds in slot_dirs().values():
        os.makedirs(ds[0], exist_ok=True)
    squatter = subprocess.Popen(["sleep", "1000"])
    m = marker()
    p = None
    try:
        first = {h: ds[0] for h, ds in slot_dirs().items()}
        for d in first.values():
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(squatter.pid))
        p = root_cordon.popen([PROBE, "sleep", "1000", m], "--memory", "256M")
        found = probe_pids(m)
        assert found, "run never started"
        inside = slots_in_use(found[0])
        if uses_slots(root_cordon):
            assert set(inside) >= {"memory", "pids"}, cgroup_paths(found[0])
        else:
            assert not inside, cgroup_paths(found[0])
        for h, path in inside.items():
            assert not first[h].endswith(path), (h, path)
        assert squatter.poll() is None, "cordon killed a process that was not its run's"
    finally:
        if p:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
        squatter.kill()
        squatter.wait()
    assert_gone(m)


def test_slots_taken_the_run_makes_a_cgroup_of_its_own(root_cordon):
    """Every slot locked: the run makes (and afterwards removes) its own, as
    a run at a level without slots always does."""
    m = marker()
    with slots_held():
        before = cordon_cgroups()
        p = root_cordon.popen([PROBE, "sleep", "1000", m], "--memory", "256M")
        try:
            found = probe_pids(m)
            assert found, "run never started"
            assert not slots_in_use(found[0]), cgroup_paths(found[0])
            mine = cordon_cgroups() - before
            assert any(os.path.basename(d).startswith(f"cordon-{p.pid}-") for d in mine), mine
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
    assert_gone(m)
    assert wait_until(lambda: not (cordon_cgroups() - before), 10), cordon_cgroups() - before


def test_more_runs_at_once_than_slots(root_cordon):
    """Twelve runs at once (eight slots): each holds its memory limit alone,
    and every one of them leaves its cgroup empty or gone."""
    before = cordon_cgroups()
    runs = [root_cordon.popen(filler(40 if i % 2 else 150), "--memory", "96M",
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for i in range(12)]
    outs = [(p.communicate(timeout=300)[0], p.returncode) for p in runs]
    for i, (out, rc) in enumerate(outs):
        if i % 2:
            assert (out, rc) == (b"filled\n", 0), (i, out, rc)
        else:
            assert out == b"" and rc == 137, (i, out, rc)
    assert wait_until(lambda: not (cordon_cgroups() - before), 10), cordon_cgroups() - before
