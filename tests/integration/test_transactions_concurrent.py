"""
Concurrent runs on one workspace never wedge it or lose anything. A run
writing the workspace directly holds it shared for its life, so an overlay
run's commit waits for it (and a direct run for a commit); a change the host
made after the overlay's change was read refuses the commit (122) rather
than being replaced; and a commit that someone else changed under it (a host
process, which no lock keeps out) is settled: theirs stays, what the commit
had moved is kept beside it as NAME.cordon-old-ID, and the workspace opens.
"""

import hashlib
import json
import os

from conftest import marker, pids_with, wait_until
from test_transactions_crash import (RESERVED, assert_whole, killed_at_journal, listing,
                                     reserved_left)

OVERLAY = ("--workspace-mode", "overlay")
NOT_COMMITTED = 122
CLOCK_NANOSLEEP = 230  # x86_64: the commit's wait for the workspace's lock


def own(cordon, *paths):
    for p in paths:
        os.lchown(p, cordon.ident.uid, cordon.ident.gid)


def sleeping_for_lock(pid, mark):
    """PID's sandbox is gone (no process but cordon's left with MARK) and
    PID sleeps in its lock wait: the commit is waiting for the workspace."""
    for q in pids_with(mark):
        try:
            with open(f"/proc/{q}/comm") as c:
                if not c.read().startswith("cordon"):
                    return False
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0] == str(CLOCK_NANOSLEEP)
    except (OSError, IndexError):
        return False


def test_overlay_commit_waits_for_a_direct_run_and_refuses_a_stale_change(cordon):
    """A direct run holds the workspace: an overlay run's commit waits for it
    instead of applying under its feet. Meanwhile the host makes the
    directory the overlay run made; once the direct run ends the commit is
    not applied (122: changed after it was read), and the host's file stays
    (on main the commit applied at once, and would have replaced it)."""
    ws = cordon.hostdir("ws")
    mark_d, mark_o = marker(), marker()
    d = cordon.popen(["sh", "-c", f"touch started; until [ -e go ]; do sleep 0.05; done; : {mark_d}"],
                     "-q", "-w", ws, "-t", "300s")
    assert wait_until(lambda: (ws / "started").exists() or d.poll() is not None, 120), "no start"
    assert d.poll() is None, d.communicate()
    res = cordon.hostdir() / "result.json"
    o = cordon.popen(["sh", "-c", f"mkdir d && echo run > d/f; : {mark_o}"], "-q", "-w", ws,
                     *OVERLAY, "--result", res)
    # Observed, not timed: the overlay's sandbox is gone and its commit sleeps
    # in the lock's wait (five looks in a row), or it ended.
    seen = [0]

    def waiting():
        seen[0] = seen[0] + 1 if sleeping_for_lock(o.pid, mark_o) else 0
        return o.poll() is not None or seen[0] >= 5

    assert wait_until(waiting, 240), "the overlay run neither ended nor waited"
    committed_under = o.poll() is not None
    # The host makes what the overlay made, after the overlay's change was read.
    (ws / "d").mkdir(exist_ok=committed_under)
    if not committed_under:
        (ws / "d" / "h").write_text("host\n")
        own(cordon, ws / "d", ws / "d" / "h")
    (ws / "go").touch()
    assert d.wait(timeout=120) == 0, d.communicate()
    assert not committed_under, "the overlay's commit applied while a direct run held the workspace"
    o.wait(timeout=300)
    t = json.loads(res.read_text())["transaction"]
    assert (o.returncode, t["outcome"]) == (NOT_COMMITTED, "failed"), (o.returncode, t)
    assert "changed in the workspace after" in t["reason"], t
    assert (ws / "d" / "h").read_text() == "host\n", "the host's file was lost"
    assert not (ws / "d" / "f").exists() and not reserved_left(ws), reserved_left(ws)
    # Run again on the tree as it is now, it commits beside the host's file.
    r = cordon.run(["sh", "-c", "echo run > d/f"], "-w", ws, *OVERLAY)
    assert r.status == 0, r
    assert sorted(os.listdir(ws / "d")) == ["f", "h"]


def test_overlay_commits_beside_a_direct_run_renaming_never_wedge(cordon):
    """The review's reproduction: a direct run renames a directory back and
    forth while overlay runs commit into it. No run is refused (125), the
    workspace opens afterwards, nothing of a commit is left, and every file
    a commit reported landed is there."""
    ws = cordon.hostdir("ws")
    loop = "while :; do mv d e 2>/dev/null && mv e d; done"
    d = cordon.popen(["sh", "-c", loop], "-q", "-w", ws, "-t", "3s")
    statuses = []
    for i in range(6):
        r = cordon.run(["sh", "-c", f"mkdir -p d; echo A > d/f{i}"], "-q", "-w", ws, *OVERLAY,
                       timeout=300)
        statuses.append(r.status)
    d.wait(timeout=300)
    assert all(s in (0, NOT_COMMITTED) for s in statuses), statuses
    r = cordon.raw("check", "-w", ws)
    assert r.status == 0 and "no interrupted commit" in r.out, r
    assert not reserved_left(ws), reserved_left(ws)
    names = set()
    for sub in ("d", "e"):
        if (ws / sub).is_dir():
            names |= set(os.listdir(ws / sub))
    for i, s in enumerate(statuses):
        assert s != 0 or f"f{i}" in names, (i, statuses, names)


def editor_save(path, text):
    """What an editor does: the new content aside, renamed over the old."""
    tmp = f"{path}.save"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def test_overlay_recovery_settles_entries_the_host_changed(cordon):
    """A commit killed mid-way (supervisor and watchdog), then a host process
    changes two entries its journal names: an editor saves over mod/7, and
    the directory new is moved away and made again. `cordon check -w` used to
    refuse for ever ("neither the old nor the new entry") and every run with
    it; now the host's entries stay, the rest is wholly old or wholly new, the
    old mod/7 the commit had moved aside is kept as mod/7.cordon-old-ID, and
    the workspace opens."""
    ws, old, new, expect = killed_at_journal(cordon)

    applied7 = (ws / "mod/7").read_text() == "new 7\n"
    editor_save(ws / "mod/7", "host 7\n")
    moved = (ws / "new").exists()
    if moved:
        os.rename(ws / "new", ws / "moved-new")
    (ws / "new").mkdir()
    (ws / "new" / "host").write_text("host\n")
    own(cordon, ws / "mod/7", ws / "new", ws / "new" / "host")

    r = cordon.raw("check", "-w", ws)
    assert r.status == 0, r
    assert "changed by someone else" in r.out, r
    assert not reserved_left(ws), reserved_left(ws)
    assert (ws / "mod/7").read_text() == "host 7\n"
    assert (ws / "new" / "host").read_text() == "host\n"
    assert sorted(os.listdir(ws / "new")) == ["host"]

    def rest(tree):
        return {k: v for k, v in tree.items()
                if k != "mod/7" and k.split("/")[0] not in ("new", "moved-new")
                and ".cordon-" not in k}

    now = listing(ws)
    got = assert_whole(rest(now), rest(old), rest(new), "settled")
    assert expect in (got, "either"), (expect, got)
    kept = {k: v for k, v in now.items() if ".cordon-" in k}
    if got == "old" and applied7:
        # The commit had swapped its mod/7 in; undone, the old one is kept.
        old7 = hashlib.sha256(b"old 7\n").hexdigest()
        assert [k for k, v in kept.items()
                if k.startswith("mod/7.cordon-old-") and v[1] == old7], kept
    else:
        assert not kept, kept
    # The workspace opens again.
    r = cordon.run(["sh", "-c", "cat mod/7 new/host"], "-w", ws)
    assert r.status == 0 and r.out == "host 7\nhost\n", r
    if moved:
        assert (ws / "moved-new").is_dir()
    assert RESERVED not in "".join(os.listdir(ws))
