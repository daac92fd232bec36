"""
The audit log under faults: a run that fills the log's filesystem, a
supervisor or a watchdog killed at any point, a log cut short. Whatever
happens, the log stays a chain that verifies, each run that started has
exactly one run.end (or, where both its writers died, verify names it as
lost), a lost end is said on stderr and in the result, and no cgroup or
directory of a killed run is left on the host.

Mounting the small filesystem needs root, which the suite has in CI; the
runs on it are root's and nobody's both.
"""

import contextlib
import datetime
import fcntl
import json
import os
import random
import re
import signal
import subprocess

import pytest

from conftest import (PROBE, assert_cordon_refused, cordon_cgroups, holds_a_slot, host_state,
                      marker, new_leftovers, probe_pids, slots_held, wait_until)
from test_audit import assert_chain, assert_intact, cli, dumps, ed25519, lines_of, sha
from test_limits import assert_gone, limits_for

LOST = re.compile(r"(\S+):(\d+): warning: run ([0-9a-f]{8}) has no run\.end and is not "
                  r"running: its end was lost")


def verify(bins, log, *args):
    return cli(bins, "audit", "verify", log, *args)


def intact_with_lost(bins, log, lost):
    """verify exits 0: its summary line, then one warning per run in LOST (run ids)."""
    r = verify(bins, log)
    assert r.returncode == 0 and not r.stderr, r
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{log}: intact: "), r
    warned = [LOST.fullmatch(l) for l in lines[1:]]
    assert all(warned) and [m.group(3) for m in warned] == [x[:8] for x in lost], r
    return assert_chain(log)


def one_end_each(evs):
    """Every run.start has exactly one run.end after it, and no run.end lacks its start."""
    starts = [e["run"] for e in evs if e["type"] == "run.start"]
    ends = [e["run"] for e in evs if e["type"] == "run.end"]
    assert len(set(starts)) == len(starts) and sorted(starts) == sorted(ends), (starts, ends)
    for run in starts:
        seqs = [(e["seq"], e["type"]) for e in evs if e["run"] == run and e["type"] in
                ("run.start", "run.end")]
        assert [t for _, t in seqs] == ["run.start", "run.end"], seqs
    return starts


def holders(path):
    """Pids holding PATH open: the supervisor and its watchdog, while they live."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                if os.readlink(f"/proc/{d}/fd/{fd}") == str(path):
                    found.append(int(d))
                    break
        except OSError:
            pass
    return found


def watchdog_of(p):
    """The cleanup watchdog of the cordon process P (its child named cordon-watchdog), or
    None once P has ended."""
    pid = p.pid

    def find():
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/status") as f:
                    st = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
                if st.get("Name") == "cordon-watchdog" and int(st["PPid"]) == pid:
                    return int(d)
            except (OSError, ValueError, KeyError):
                pass
        return None
    return wait_until(lambda: find() or p.poll() is not None, 15) and find()


def kill9(p):
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def settled(log, before):
    """After a kill: every writer of LOG gone, and nothing of the run's left on the host."""
    assert wait_until(lambda: not holders(log), 30), f"writers of {log} still alive"
    left = new_leftovers(before)
    assert not left, f"a killed run left state on the host: {sorted(left)}"


def append_event(log, ev):
    """Append EV to LOG as cordon would: under its lock, chained to the last line."""
    with open(log, "rb+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        last = lines_of(log)[-1]
        prev = json.loads(last)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        head = {"seq": prev["seq"] + 1, "ts": now, "run": ev.pop("run"), "type": ev.pop("type"),
                "prev": sha(last)}
        line = dumps({**head, **ev}) + b"\n"
        f.seek(0, os.SEEK_END)
        f.write(line)
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)
        return line


# --- a full disk ------------------------------------------------------------------------


@pytest.fixture
def small_fs(cordon):
    """An 8 MiB tmpfs owned by the run's identity: a log and a workspace that share it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the suite runs as root in CI)")
    d = cordon.hostdir("small")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=8m,mode=0755,uid={cordon.ident.uid},"
                    f"gid={cordon.ident.gid}", "cordon-test", d], check=True)
    try:
        (d / "audit").mkdir()
        os.chown(d / "audit", cordon.ident.uid, cordon.ident.gid)
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)


# Commands name the workspace by their working directory (/workspace, or its host path where
# the level has no mounts), and write in box/ beneath it (at the process level the workspace's
# root, holding protected names, is read-only).
FILL = "head -c 100000000 /dev/zero 2>/dev/null > box/fill"


def workspace(cordon, d=None):
    ws = d / "ws" if d else cordon.hostdir("ws")
    ws.mkdir(exist_ok=True)
    (ws / "box").mkdir()
    for x in (ws, ws / "box"):
        os.chown(x, cordon.ident.uid, cordon.ident.gid)
    return ws / "box"


def test_a_run_that_fills_the_disk_keeps_its_end(cordon, bins, small_fs):
    log, box = small_fs / "audit" / "audit.log", workspace(cordon, small_fs)
    ws = box.parent
    r = cordon.run(["sh", "-c", FILL], "--audit", log, "-w", ws)
    assert (r.status, r.result["reason"], r.result["exit_code"]) == (1, "exited", 1), r
    assert "audit" not in r.result and "audit" not in r.err, r
    assert (box / "fill").stat().st_size > 5 << 20 and os.statvfs(small_fs).f_bavail == 0
    # The reserve kept past the log's end took the run's end.
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"], evs
    assert (evs[2]["run"], evs[2]["exit_code"]) == (r.result["run_id"], 1)

    # Still full: once what the log holds in reserve is less than its whole (the next page
    # is needed), a run is refused before it starts, saying why; each before it was recorded.
    for _ in range(10):
        r = cordon.run(["true"], "--audit", log, "-w", ws)
        if r.status != 0:
            break
        assert "audit" not in r.result and assert_chain(log)[-1]["run"] == r.result["run_id"]
    assert_cordon_refused(r, "audit log", str(log), "reserve")
    one_end_each(assert_intact(bins, log))
    # Room again: runs go on, on the same chain.
    (box / "fill").unlink()
    r = cordon.run(["echo", "again"], "--audit", log, "-w", ws)
    assert (r.status, r.out) == (0, "again\n") and "audit" not in r.result, r
    evs = assert_intact(bins, log)
    assert evs[-1]["type"] == "run.end" and evs[-1]["run"] == r.result["run_id"]
    one_end_each(evs)


def pad_to(log, rest):
    """Extend LOG by one chained line so that it ends REST bytes short of a page."""
    size = log.stat().st_size
    # Measure the line with an empty pad, then pad to length.
    probe = dumps({"seq": 0, "ts": "2026-01-01T00:00:00.000000Z", "run": None,
                   "type": "test.pad", "prev": "0" * 64, "pad": ""})
    seq_digits = len(str(json.loads(lines_of(log)[-1])["seq"] + 1)) - 1
    need = (4096 - rest - size) % 4096
    while need < len(probe) + 1 + seq_digits:
        need += 4096
    append_event(log, {"run": None, "type": "test.pad", "pad": "x" * (need - len(probe) - 1 -
                                                                        seq_digits)})
    assert log.stat().st_size % 4096 == 4096 - rest


def test_a_lost_end_is_reported(cordon, bins, small_fs, hosttmp):
    log, box = small_fs / "audit" / "audit.log", workspace(cordon, small_fs)
    ws = box.parent
    res = cordon.hostdir("res") / "result.json"
    # It fills the disk, waits, then fills what the log's reserve gave back, and exits 0.
    cmd = (f"{FILL}; : > box/filled; while [ ! -e box/go ]; do sleep 0.05; done; "
           f"{FILL.replace('fill', 'fill2')}; exit 0")
    p = cordon.popen(["sh", "-c", cmd], "--audit", log, "-w", ws, "--result", res, "-q")
    try:
        assert wait_until(lambda: (box / "filled").exists() or p.poll() is not None, 60)
        assert p.poll() is None, p.stderr.read()
        # What other runs' events would do to the reserve, done by hand: the log's last page
        # left 100 bytes short (a chained line), the room kept past its end given back (and
        # filled by the run).
        pad_to(log, 100)
        with open(log, "rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            os.truncate(log, log.stat().st_size)
            fcntl.flock(f, fcntl.LOCK_UN)
        size = log.stat().st_size
        (box / "go").touch()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            kill9(p)
    # run.end would not fit: its first 100 bytes went in and were cut back.
    assert log.stat().st_size == size and log.read_bytes().endswith(b"\n")
    result = json.loads(res.read_text())
    lost = f"run.end not recorded: cannot write to audit log '{log}': No space left on device"
    assert p.returncode == 125, (p.returncode, err)
    assert err.decode() == f"cordon: audit: {lost}\n", err
    assert (result["reason"], result["exit_code"], result["status"], result["audit"]) == (
        "exited", 0, 125, lost), result
    evs = intact_with_lost(bins, log, [result["run_id"]])
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "test.pad"], evs
    # No second writer added one later.
    assert wait_until(lambda: not holders(log), 30) and log.stat().st_size == size

    for f in ("fill", "fill2", "filled", "go"):
        (box / f).unlink()
    r = cordon.run(["true"], "--audit", log, "-w", ws)
    assert r.status == 0 and "audit" not in r.result, r
    evs = intact_with_lost(bins, log, [result["run_id"]])
    assert [e["type"] for e in evs][-2:] == ["run.start", "run.end"]


def test_no_room_for_the_witness_refuses_the_run(cordon, bins, small_fs):
    """The witness keeps a reserve of its own: on a filesystem without it, no run starts."""
    tiny = small_fs / "tiny"
    tiny.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=32k,mode=0755,uid={cordon.ident.uid}",
                    "cordon-test", tiny], check=True)
    try:
        log, witness = small_fs / "audit" / "audit.log", tiny / "audit.witness"
        pol = small_fs / "audit" / "p.yaml"
        pol.write_text(f"version: 1\naudit:\n  file: {log}\n  witness: {witness}\n")
        m = marker()
        r = cordon.run([PROBE, "sleep", "0", m], "-p", pol)
        assert_cordon_refused(r, "audit witness", str(witness), "reserve")
        assert not probe_pids(m, timeout=0.5)
    finally:
        subprocess.run(["umount", "-l", tiny], check=False)


# --- a witness ------------------------------------------------------------------------


def witness_policy(d, log, witness, key=None, every=2):
    p = d / "witnessed.yaml"
    text = f"version: 1\naudit:\n  file: {log}\n  witness: {witness}\n"
    if key:
        text += f"  sign_key: {key}\n  checkpoint_every: {every}\n"
    p.write_text(text)
    os.chmod(p, 0o644)
    return p


def test_witness_reports_a_tail_cut_at_a_checkpoint(cordon, bins):
    d = cordon.hostdir("audit")
    wd = cordon.hostdir("witness")
    key, pub = ed25519(d, "sign", cordon.ident)
    log, witness = d / "audit.log", wd / "audit.witness"
    pol = witness_policy(d, log, witness, key)
    ids = [cordon.run(["echo", str(i)], "-p", pol).result["run_id"] for i in range(3)]
    assert (witness.stat().st_mode & 0o777, witness.stat().st_uid) == (0o600, cordon.ident.uid)
    evs = assert_chain(log)
    raw = lines_of(log)
    notes = [json.loads(l) for l in lines_of(witness)]
    noted = [e for e in evs if e["type"] in ("run.end", "audit.checkpoint")]
    assert [(n["seq"], n["sha256"], n["type"]) for n in notes] == [
        (e["seq"], sha(raw[e["seq"]]), e["type"]) for e in noted]
    assert {n["log"] for n in notes} == {sha(raw[0])}
    r = verify(bins, log, "--key", pub, "--witness", witness)
    assert r.returncode == 0 and r.stdout.endswith(
        f", witnessed to seq {notes[-1]['seq']} ({len(notes)} notes)\n"), r

    # Cut the last run off, exactly at the checkpoint before it.
    third = next(e["seq"] for e in evs if e["run"] == ids[2])
    cut_at = max(e["seq"] for e in evs[:third] if e["type"] == "audit.checkpoint")
    cut = d / "cut.log"
    cut.write_bytes(b"".join(l + b"\n" for l in raw[:cut_at + 1]))
    # Without the witness a shorter log, well signed, verifies: that is all a chain can say.
    r = verify(bins, cut, "--key", pub)
    assert r.returncode == 0 and r.stdout.startswith(f"{cut}: intact: {cut_at + 1} events"), r
    missing = sum(n["seq"] > cut_at for n in notes)
    r = verify(bins, cut, "--key", pub, "--witness", witness)
    assert (r.returncode, r.stdout) == (1, (
        f"{cut}:{cut_at + 2}: truncated: the log ends at seq {cut_at}, its witness holds seq "
        f"{notes[-1]['seq']} (audit.checkpoint); {missing} noted lines are missing\n")), r
    # The whole log still verifies against it.
    assert verify(bins, log, "--witness", witness).returncode == 0


def test_witness_is_never_written_through_a_link(cordon, bins):
    d = cordon.hostdir("audit")
    target = cordon.hostdir("elsewhere") / "target"
    target.write_bytes(b"theirs\n")
    witness = d / "audit.witness"
    witness.symlink_to(target)
    pol = witness_policy(d, d / "audit.log", witness)
    r = cordon.run(["true"], "-p", pol)
    assert_cordon_refused(r, "audit.witness", "symbolic link")
    assert target.read_bytes() == b"theirs\n" and not (d / "audit.log").exists()


# --- kills ------------------------------------------------------------------------------


def running(cordon, log, box, m):
    """A run whose command says it runs (box/running: at microvm no host process shows it)."""
    p = cordon.popen(["sh", "-c", f": > box/running; exec {PROBE} sleep 1000 {m}"], "--audit", log,
                     "-w", box.parent, *limits_for(cordon))
    try:
        assert wait_until(lambda: (box / "running").exists() or p.poll() is not None, 120)
        assert p.poll() is None, p.stderr.read()
    except BaseException:
        kill9(p)
        raise
    return p


def test_watchdog_adds_no_second_end(cordon, bins):
    """The supervisor dies just after its run.end: the watchdog finds it and writes none."""
    before = host_state()
    log = cordon.hostdir("audit") / "audit.log"
    m = marker()
    p = running(cordon, log, workspace(cordon), m)
    run = next(e["run"] for e in assert_chain(log) if e["type"] == "run.start")
    # The supervisor's own end, as it writes it (the chain's next line), then its death.
    append_event(log, {"run": run, "type": "run.end", "reason": "exited", "status": 0})
    kill9(p)
    settled(log, before)
    assert_gone(m)
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"]
    assert evs[2]["reason"] == "exited"


@pytest.mark.parametrize("when", ["running", "exited"])
def test_supervisor_killed_one_end(cordon, bins, when):
    """Killed while the command runs, or as it exits: one run.end, whoever writes it."""
    before = host_state()
    log = cordon.hostdir("audit") / "audit.log"
    box = workspace(cordon)
    m = marker()
    if when == "running":
        p = running(cordon, log, box, m)
    else:
        p = cordon.popen(["sh", "-c", f": > box/exiting; exec {PROBE} sleep 0 {m}"], "--audit",
                         log, "-w", box.parent, *limits_for(cordon))
        assert wait_until(lambda: (box / "exiting").exists() or p.poll() is not None, 120)
    kill9(p)
    settled(log, before)
    assert_gone(m)
    evs = assert_intact(bins, log)
    one_end_each(evs)
    assert len([e for e in evs if e["type"] == "run.end"]) == 1


@pytest.mark.parametrize("when", ["running", "exited"])
def test_watchdog_killed_supervisor_ends_the_run(cordon, bins, when):
    """The watchdog dies first: the supervisor still ends the run, records it once, cleans up."""
    before = host_state()
    log = cordon.hostdir("audit") / "audit.log"
    box = workspace(cordon)
    cmd = (": > box/running; while [ ! -e box/go ]; do sleep 0.05; done" if when == "running"
           else ": > box/exiting")
    p = cordon.popen(["sh", "-c", cmd], "--audit", log, "-w", box.parent, *limits_for(cordon))
    try:
        wd = watchdog_of(p)
        assert wd or when == "exited", "no watchdog"
        assert wait_until(lambda: (box / when.replace("exited", "exiting")).exists(), 120)
        try:
            if wd:
                os.kill(wd, signal.SIGKILL)
        except ProcessLookupError:
            pass                # the run was over already: the same outcome is checked
        (box / "go").touch()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            kill9(p)
    assert p.returncode == 0, err
    settled(log, before)
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"]
    assert evs[2]["reason"] == "exited" and "error" not in evs[2]


def test_kills_at_random_points_leave_one_end_and_nothing_else(cordon, bins):
    """
    kill -9 of `cordon run` as it starts: at random delays, and the moment its first
    cgroup exists (where it has one). Whatever point each kill hits, each run.start has
    exactly one run.end, verify names no end as lost, and no cgroup or directory of the
    runs is left (the watchdog is told of each before it is made).
    """
    before = host_state()
    log = cordon.hostdir("audit") / "audit.log"
    rng = random.Random(os.getpid())
    cgroup_points = 0
    for i in range(16):
        m = marker()
        # Every fourth run finds its slots taken and makes a cgroup of its own.
        with slots_held() if cordon.root and i % 4 == 0 else contextlib.nullcontext():
            p = cordon.popen([PROBE, "sleep", "1000", m], "--audit", log, *limits_for(cordon))
            if cordon.root and i % 2 == 0:
                # The marker: the run's cgroup exists (cordon-PID-XXXX in any
                # hierarchy), or it holds a slot.
                found = wait_until(lambda: p.poll() is not None or holds_a_slot(p.pid) or any(
                    os.path.basename(c).startswith(f"cordon-{p.pid}-") for c in cordon_cgroups()),
                    30, interval=0.001)
                cgroup_points += bool(found) and p.poll() is None
            else:
                wait_until(lambda: False, rng.uniform(0, 0.25), interval=0.001)
            kill9(p)
        settled(log, before)
        assert_gone(m)
    assert not cordon.root or cgroup_points, "no kill found the run's cgroup made"
    if log.exists():
        evs = intact_with_lost(bins, log, [])
        one_end_each(evs)
    assert not (cordon_cgroups() - before)
