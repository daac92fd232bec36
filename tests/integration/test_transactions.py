"""
Transactional workspaces: `--workspace-mode overlay` runs the call on an
overlayfs layer over the host workspace and the supervisor commits it (or
not) once the sandbox is gone.

Each test runs a real sandbox as root and as nobody. A refused or discarded
change must leave the host tree byte-identical (tree_digest); a commit must
write only beneath the workspace, never through a link either side holds.
"""

import hashlib
import json
import os
import signal

import pytest

from conftest import assert_cordon_refused, marker, pids_with, wait_until
from test_workspace_trust import TOOL_NAMES, make_repo, tree_digest, write_step

OVERLAY = ("--workspace-mode", "overlay")
NOT_COMMITTED = 122  # cordon run's status when the change was refused or not applied


def sh(cordon, ws, script, *opts, audit=None, timeout=60):
    extra = ["--audit", audit] if audit else []
    return cordon.run(["sh", "-c", script], "-w", ws, *OVERLAY, *opts, *extra, timeout=timeout)


def run_end(audit):
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    ends = [e for e in events if e.get("type") == "run.end"]
    assert len(ends) == 1, events
    return ends[0]


def seed(cordon, name="ws"):
    ws = cordon.hostdir(name)
    (ws / "a.txt").write_text("hello\n")
    (ws / "old").mkdir()
    (ws / "old" / "x.txt").write_text("x\n")
    (ws / "gone.txt").write_text("bye\n")
    for p in (ws / "a.txt", ws / "old", ws / "old" / "x.txt", ws / "gone.txt"):
        os.chown(p, cordon.ident.uid, cordon.ident.gid)
    return ws


CHANGE = "echo changed > a.txt && echo new > b.txt && mkdir -p n/m && echo deep > n/m/f && rm gone.txt"


def test_overlay_commits_on_success(cordon):
    ws = seed(cordon)
    audit = cordon.hostdir("audit") / "audit.log"
    r = sh(cordon, ws, CHANGE + " && cat a.txt", audit=audit)
    assert r.status == 0 and r.out == "changed\n", r
    assert (ws / "a.txt").read_text() == "changed\n"
    assert (ws / "b.txt").read_text() == "new\n"
    assert (ws / "n" / "m" / "f").read_text() == "deep\n"
    assert not (ws / "gone.txt").exists()
    assert (ws / "old" / "x.txt").read_text() == "x\n"
    # What the run wrote belongs to the caller, as in direct mode.
    assert os.lstat(ws / "b.txt").st_uid == cordon.ident.uid
    t = r.result["transaction"]
    assert (t["outcome"], t["committed"]) == ("committed", True), t
    assert (t["added"], t["changed"], t["removed"]) == (4, 1, 1), t
    assert t["bytes"] == len("changed\nnew\ndeep\n"), t
    assert "removed gone.txt" in t["paths"] and "added n/m/f" in t["paths"], t
    assert len(t["digest"]) == 64, t
    assert run_end(audit)["transaction"] == t


@pytest.mark.parametrize("when, committed", [("on_success", False), ("always", True)])
def test_overlay_failed_run_is_discarded_unless_always(cordon, when, committed):
    ws = seed(cordon)
    before = tree_digest(ws)
    r = sh(cordon, ws, CHANGE + " && exit 3", "--workspace-commit", when)
    assert r.status == 3, r
    t = r.result["transaction"]
    if committed:
        assert t["outcome"] == "committed", t
        assert (ws / "b.txt").read_text() == "new\n"
    else:
        assert (t["outcome"], t["committed"]) == ("discarded", False), t
        assert "on_success" in t["reason"], t
        assert tree_digest(ws) == before
        assert "discarded" in r.err, r
    assert (t["added"], t["changed"], t["removed"]) == (4, 1, 1), t


@pytest.mark.parametrize("attack", [
    "echo x > .env",                                   # a protected name at the top
    "mkdir -p deep/er && echo x > deep/er/.envrc",      # at any depth
    "mkdir -p vendor/lib/.husky && echo 'rm -rf ~' > vendor/lib/.husky/pre-commit",
    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
])
def test_overlay_protected_change_refuses_the_whole_commit(cordon, attack):
    ws = make_repo(cordon)
    before = tree_digest(ws)
    audit = cordon.hostdir("audit") / "audit.log"
    # Ordinary changes first, so a partial commit would show.
    r = sh(cordon, ws, f"echo more >> a.txt && echo new > b.txt && {attack}", audit=audit)
    # The command succeeded; cordon's status says its change did not land.
    assert (r.status, r.result["exit_code"], r.result["status"]) == (NOT_COMMITTED, 0,
                                                                     NOT_COMMITTED), r
    t = r.result["transaction"]
    assert (t["outcome"], t["committed"]) == ("refused", False), t
    assert "protected" in t["reason"], t
    assert tree_digest(ws) == before
    assert run_end(audit)["transaction"]["reason"] == t["reason"]
    assert "refused" in r.err, r


def test_overlay_tool_config_names_refuse_the_commit(cordon):
    """The names version managers, dev containers and agent CLIs act on
    (issue 22), at the top or deep down in an overlay's change, refuse the
    whole commit, with the name in the reason, a notice and status 122."""
    ws = make_repo(cordon)
    before = tree_digest(ws)
    for i, name in enumerate(TOOL_NAMES):
        where = "" if i % 2 == 0 else "sub/dir/"
        step = write_step(name, where)
        r = sh(cordon, ws, f"echo more >> a.txt && mkdir -p sub/dir && {step}")
        assert (r.status, r.result["exit_code"]) == (NOT_COMMITTED, 0), (name, r)
        t = r.result["transaction"]
        assert (t["outcome"], t["committed"]) == ("refused", False), (name, t)
        assert f"'{where}{name.rstrip('/')}' is protected" in t["reason"], (name, t)
        assert "refused" in r.err, r
        assert tree_digest(ws) == before, name


def test_overlay_not_committed_exit_status(cordon):
    """122 when the change did not land, whatever the command's status; the
    command's own code stays in the result; a discarded change keeps the
    command's status (it is the cause)."""
    ws = seed(cordon)
    before = tree_digest(ws)
    r = sh(cordon, ws, "echo x > b.txt && echo y > .envrc && exit 7", "--workspace-commit",
           "always", "-q", "--json")
    assert r.status == NOT_COMMITTED, r
    printed = json.loads(r.out[r.out.index("{"):])
    assert (printed["exit_code"], printed["status"], printed["reason"]) == (7, NOT_COMMITTED,
                                                                            "exited"), printed
    assert printed["transaction"]["outcome"] == "refused" and r.result == printed, r
    assert r.err == "", r  # -q: the status alone tells
    r = sh(cordon, ws, "echo x > b.txt && exit 7")
    assert (r.status, r.result["transaction"]["outcome"]) == (7, "discarded"), r
    assert tree_digest(ws) == before


def test_overlay_planted_links_cannot_make_the_commit_write_outside(cordon):
    ws = seed(cordon)
    outside = cordon.hostdir("outside")
    # An earlier run's (or anyone's) link in the workspace, leading out.
    os.symlink(outside, ws / "sub")
    os.lchown(ws / "sub", cordon.ident.uid, cordon.ident.gid)
    # The run replaces the link by a directory with a file in it: the commit
    # must make a directory there, not write through the link.
    r = sh(cordon, ws, "rm sub && mkdir sub && echo pwned > sub/f")
    assert r.status == 0, r
    assert r.result["transaction"]["outcome"] == "committed", r.result
    assert os.listdir(outside) == []
    assert not os.path.islink(ws / "sub") and (ws / "sub" / "f").read_text() == "pwned\n"
    # A link the run plants leading out refuses the commit; nothing lands.
    before = tree_digest(ws)
    for script in (f"ln -s {outside} esc && echo x > keep", "ln -s ../../../.. up"):
        r = sh(cordon, ws, script)
        assert r.status == NOT_COMMITTED, r
        t = r.result["transaction"]
        assert t["outcome"] == "refused" and "link leading out" in t["reason"], t
        assert tree_digest(ws) == before
        assert os.listdir(outside) == []


def test_overlay_whiteouts_and_opaque_directories(cordon):
    ws = seed(cordon)
    (ws / "old" / "keep").mkdir()
    (ws / "old" / "keep" / "k").write_text("k\n")
    for p in (ws / "old" / "keep", ws / "old" / "keep" / "k"):
        os.chown(p, cordon.ident.uid, cordon.ident.gid)
    r = sh(cordon, ws, "rm a.txt && rm -r old && mkdir old && echo fresh > old/y.txt")
    assert r.status == 0, r
    t = r.result["transaction"]
    assert t["outcome"] == "committed", t
    assert not (ws / "a.txt").exists()
    # The directory was replaced, not merged: nothing of the old one is left.
    assert sorted(os.listdir(ws / "old")) == ["y.txt"]
    assert (t["removed"], t["changed"], t["added"]) == (1, 1, 1), t


def test_overlay_layer_is_size_capped(cordon):
    ws = seed(cordon)
    before = tree_digest(ws)
    policy = cordon.hostdir("pol") / "policy.yaml"
    policy.write_text("version: 1\nfilesystem:\n  workspace_size: 1M\n")
    r = sh(cordon, ws, "head -c 4000000 /dev/zero > big", "--policy", policy)
    assert r.status != 0 and "No space left" in r.err, r
    assert r.result["transaction"]["outcome"] == "discarded", r.result
    assert tree_digest(ws) == before


def test_overlay_commit_has_an_entry_cap(cordon):
    ws = seed(cordon)
    before = tree_digest(ws)
    policy = cordon.hostdir("pol") / "policy.yaml"
    policy.write_text("version: 1\nfilesystem:\n  workspace_inodes: 200000\n")
    # Past the commit's 100,000 entries (the layer's own inode cap allows them).
    r = sh(cordon, ws, "mkdir many && cd many && python3 -c 'import os\n"
           "for i in range(100001): os.close(os.open(str(i), os.O_CREAT | os.O_WRONLY))'",
           "--policy", policy, "--workspace-commit", "always", timeout=180)
    assert r.status == NOT_COMMITTED and r.result["exit_code"] == 0, r
    t = r.result["transaction"]
    assert t["outcome"] == "refused" and "cap" in t["reason"], t
    assert tree_digest(ws) == before


def test_overlay_summary_digest_is_stable(cordon):
    digests = []
    for i, text in enumerate(("one\n", "one\n", "two\n")):
        ws = seed(cordon, f"ws{i}")
        r = sh(cordon, ws, f"printf '{text}' > a.txt && mkdir d && ln -s ../a.txt d/l && rm gone.txt")
        assert r.status == 0, r
        digests.append(r.result["transaction"]["digest"])
    assert digests[0] == digests[1] != digests[2], digests


def test_overlay_unchanged_run_commits_nothing(cordon):
    ws = seed(cordon)
    before = tree_digest(ws)
    r = sh(cordon, ws, "cat a.txt > /dev/null && touch -c nothing")
    t = r.result["transaction"]
    assert (t["added"], t["changed"], t["removed"], t["paths"]) == (0, 0, 0, []), t
    assert tree_digest(ws) == before


def test_workspace_mode_bad_input_is_refused(cordon):
    ws = seed(cordon)
    r = cordon.run(["true"], "-w", ws, "--workspace-mode", "cow", result=False)
    assert_cordon_refused(r, "--workspace-mode", "cow")
    r = cordon.run(["true"], *OVERLAY, result=False)
    assert_cordon_refused(r, "overlay", "workspace")
    r = cordon.run(["true"], "-w", ws, *OVERLAY, "--workspace-commit", "manual", result=False)
    assert_cordon_refused(r, "manual", "session")


def test_workspace_mode_overlay_needs_a_level_that_has_it(cordon):
    ws = seed(cordon)
    before = tree_digest(ws)
    r = cordon.run(["sh", "-c", "echo x > b.txt"], "-w", ws, *OVERLAY, result=False)
    if cordon.level == "namespace":
        assert r.status == 0 and (ws / "b.txt").exists(), r
    else:
        assert_cordon_refused(r, "overlay", "namespace")
        assert tree_digest(ws) == before


# --- daemon sessions ---------------------------------------------------------

from serve_util import Daemon, Stopped, children  # noqa: E402
from test_audit import assert_intact  # noqa: E402


@pytest.fixture
def daemon(cordon):
    made = []

    def make(*opts):
        d = Daemon(cordon, *opts)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.stop()


def test_session_manual_commit_and_discard(daemon, cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "0", "--audit", log)
    c = d.connect()
    s = c.result("session.create", {"workspace_mode": "overlay", "workspace_commit": "manual"})
    sid = s["session_id"]
    assert (s["workspace_mode"], s["workspace_commit"], s["pending"]) == ("overlay", "manual", False)
    ws = d.path.parent / (d.path.name + ".d") / sid
    c.result("session.write_file", {"session_id": sid, "path": "a.txt", "content": "one\n"})

    r = c.result("session.exec", {"session_id": sid, "argv": ["sh", "-c", "echo two > a.txt; echo new > b.txt"]})
    t = r["transaction"]
    assert (t["outcome"], t["changed"], t["added"]) == ("pending", 1, 1), r
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "b.txt").exists()
    # One change waits at a time: the next exec is refused until it is decided.
    ans = c.call("session.exec", {"session_id": sid, "argv": ["true"]})
    assert "not committed" in ans["error"]["message"], ans
    done = c.result("session.commit", {"session_id": sid})
    assert done["run_id"] == r["run_id"] and done["transaction"]["outcome"] == "committed", done
    assert done["transaction"]["digest"] == t["digest"]
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "b.txt").read_text() == "new\n"

    r = c.result("session.exec", {"session_id": sid, "argv": ["sh", "-c", "rm b.txt; echo three > a.txt"]})
    assert r["transaction"]["outcome"] == "pending", r
    gone = c.result("session.discard", {"session_id": sid})["transaction"]
    assert (gone["outcome"], gone["removed"], gone["changed"]) == ("discarded", 1, 1), gone
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "b.txt").exists()
    ans = c.call("session.commit", {"session_id": sid})
    assert "no change waiting" in ans["error"]["message"], ans

    # A protected name refuses the change at once: nothing waits, nothing lands.
    before = sorted(os.listdir(ws))
    r = c.result("session.exec", {"session_id": sid, "argv": ["sh", "-c", "echo x > .env; echo y > c.txt"]})
    assert r["transaction"]["outcome"] == "refused" and ".env" in r["transaction"]["reason"], r
    assert sorted(os.listdir(ws)) == before
    assert c.result("session.list")["sessions"][0]["pending"] is False
    d.stop()
    evs = assert_intact(bins, log)
    decisions = [e for e in evs if e["type"] == "workspace.decision"]
    assert [e["decision"] for e in decisions] == ["commit", "discard"], decisions
    assert decisions[0]["run"] == done["run_id"] and decisions[0]["session"] == sid
    ends = [e for e in evs if e["type"] == "run.end"]
    assert [e["transaction"]["outcome"] for e in ends] == ["pending", "pending", "refused"], ends


def test_session_commit_not_applied_is_an_error(daemon, cordon):
    """session.commit of a change that is refused now (a removed directory
    gained a protected name meanwhile) answers an error carrying the
    transaction, and the workspace is as it was."""
    d = daemon("--pool", "0")
    c = d.connect()
    sid = c.result("session.create", {"workspace_mode": "overlay",
                                      "workspace_commit": "manual"})["session_id"]
    ws = d.path.parent / (d.path.name + ".d") / sid
    c.result("session.write_file", {"session_id": sid, "path": "sub/x.txt", "content": "x\n"})
    r = c.result("session.exec", {"session_id": sid, "argv": ["sh", "-c", "rm -r sub; echo n > n"]})
    assert r["transaction"]["outcome"] == "pending", r
    c.result("session.write_file", {"session_id": sid, "path": "sub/.envrc", "content": "e\n"})
    ans = c.call("session.commit", {"session_id": sid})
    err = ans["error"]
    assert err["code"] == -32000 and "refused" in err["message"] and ".envrc" in err["message"], ans
    t = err["data"]["transaction"]
    assert (t["outcome"], err["data"]["run_id"]) == ("refused", r["run_id"]), err
    assert sorted(os.listdir(ws / "sub")) == [".envrc", "x.txt"] and not (ws / "n").exists()
    # Decided: nothing waits any more.
    assert "no change waiting" in c.call("session.commit", {"session_id": sid})["error"]["message"]


def test_serve_finishes_a_dead_commit_at_start(daemon, cordon):
    """A commit into the daemon's workspace that died past its marker (left
    by hand: the new a.txt in place, the old one aside) is finished when
    cordon serve starts, and said so."""
    ws = cordon.hostdir("ws")
    tid = "00112233445566aa"
    d = ws / f".cordon-txn-{tid}"
    d.mkdir(mode=0o700)
    (ws / "a.txt").write_text("old\n")
    (ws / f".cordon-txn-{tid}.0").write_text("new\n")
    new_ino, old_ino = os.lstat(ws / f".cordon-txn-{tid}.0").st_ino, os.lstat(ws / "a.txt").st_ino
    os.rename(ws / "a.txt", ws / f".cordon-txn-{tid}.0.old")
    os.rename(ws / f".cordon-txn-{tid}.0", ws / "a.txt")
    (d / "journal").write_text(f"cordon-txn 1 {tid}\nput {new_ino} {old_ino} 0 "
                               f"{b'a.txt'.hex()}\nend\n")
    (d / "committed").write_text("")
    for p in [ws, d, *d.iterdir(), *ws.iterdir()]:
        os.lchown(p, cordon.ident.uid, cordon.ident.gid)
    dm = daemon("--pool", "0", "-w", ws)
    code, err = dm.stop()
    assert "finished 1 interrupted commit" in err, err
    assert sorted(os.listdir(ws)) == ["a.txt"] and (ws / "a.txt").read_text() == "new\n"


@pytest.mark.parametrize("params, words", [
    ({"workspace_mode": "cow"}, "expected one of direct, overlay"),
    ({"workspace_commit": "later"}, "expected one of always, on_success, manual"),
    ({"workspace_mode": 1}, "must be a string"),
    ({"bogus": "x"}, "unknown option"),
])
def test_session_create_refuses_bad_options(daemon, params, words):
    d = daemon("--pool", "0")
    c = d.connect()
    ans = c.call("session.create", params)
    assert ans["error"]["code"] == -32602 and words in ans["error"]["message"], ans
    assert c.result("session.list")["sessions"] == []


def test_session_fork_makes_independent_copies(daemon, cordon):
    d = daemon("--pool", "0")
    c = d.connect()
    sid = c.result("session.create", {"workspace_mode": "overlay", "workspace_commit": "always"})["session_id"]
    root = d.path.parent / (d.path.name + ".d")
    for name in ("a.txt", "src/b.txt"):
        c.result("session.write_file", {"session_id": sid, "path": name, "content": "base\n"})
    f = c.result("session.fork", {"session_id": sid, "count": 3})
    assert f["method"] in ("reflink", "copy", "reflink+copy"), f
    assert f["files_reflinked"] + f["files_copied"] == 6, f
    forks = f["session_ids"]
    for i, fid in enumerate(forks):
        r = c.result("session.exec", {"session_id": fid, "argv": ["sh", "-c", f"echo {i} >> a.txt; rm src/b.txt"]})
        assert r["transaction"]["outcome"] == "committed", r
    for i, fid in enumerate(forks):
        assert (root / fid / "a.txt").read_text() == f"base\n{i}\n"
        assert not (root / fid / "src" / "b.txt").exists()
    assert (root / sid / "a.txt").read_text() == "base\n"
    assert (root / sid / "src" / "b.txt").read_text() == "base\n"
    listed = {s["session_id"]: s for s in c.result("session.list")["sessions"]}
    assert all(listed[fid]["workspace_mode"] == "overlay" for fid in forks), listed
    # One exec at a time on a layer: a second, while the first runs, is busy.
    first = c.send("session.exec", {"session_id": sid, "argv": ["sh", "-c", "sleep 2; echo x > s"]})
    second = c.send("session.exec", {"session_id": sid, "argv": ["true"]})
    ans = c.answer(second)
    assert ans["error"]["code"] == -32002 and "one exec at a time" in ans["error"]["message"], ans
    assert c.answer(first)["result"]["transaction"]["outcome"] == "committed"


# 20,000 files in 200 directories.
MANY = ("import os\nfor i in range(200):\n    os.mkdir('d%d' % i)\n"
        "    for j in range(100):\n        open('d%d/f%d' % (i, j), 'w').write('x')\n")


def test_a_large_commit_does_not_hold_up_other_clients(daemon):
    """A 20,000-file commit runs in a worker: held in flight (its worker
    stopped), another client's run is answered, a call on the same session
    hears it is busy, and the commit's answer comes after; a SIGTERM meanwhile
    waits for it."""
    d = daemon("--pool", "1", "--grace", "120s")
    a, b, owner = d.connect(timeout=300), d.connect(), d.connect()
    sid = a.result("session.create", {"workspace_mode": "overlay",
                                      "workspace_commit": "manual"})["session_id"]
    r = a.result("session.exec", {"session_id": sid, "argv": ["python3", "-c", MANY],
                                  "timeout": 600})
    assert r["transaction"]["outcome"] == "pending" and r["transaction"]["added"] == 20200, r
    commit = a.send("session.commit", {"session_id": sid})
    with Stopped(d, "cordon-commit"):
        listed = {s["session_id"]: s["state"] for s in owner.result("session.list")["sessions"]}
        assert listed == {sid: "committing"}, listed
        for method, extra in [("exec", {"argv": ["true"]}), ("read_file", {"path": "d0/f0"}),
                              ("discard", {}), ("destroy", {})]:
            ans = owner.call(f"session.{method}", {"session_id": sid, **extra})
            assert ans["error"]["code"] == -32002 and "committing" in ans["error"]["message"], ans
        got = b.result("run", {"argv": ["echo", "meanwhile"]})
        assert got["stdout"] == "meanwhile\n", got
        assert not a.pending(), "the commit was answered while its worker was stopped"
        d.proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: b.result("health")["draining"], 30)
    done = a.answer(commit)["result"]
    assert (done["run_id"], done["transaction"]["outcome"]) == (r["run_id"], "committed"), done
    assert done["transaction"]["digest"] == r["transaction"]["digest"], done
    # Drained once the commit was answered (it exits, its sessions with it:
    # removing the 20,200 files its session holds took over 30 s at load 4).
    rc, err = d.stop(timeout=300)
    assert rc == 0, err


@pytest.mark.parametrize("mode, restart", [("overlay", "mid_call"), ("overlay", "after_the_call"),
                                           ("direct", "mid_call")])
def test_a_call_outliving_its_daemon_commits_nothing(daemon, cordon, bins, mode, restart):
    """kill -9 of the daemon while a session's call runs: the call's
    supervisor, its daemon gone, discards an overlay's change instead of
    committing it (the workspace is unchanged), and a daemon restarted on the
    same state directory, mid-call or after it, waits for the old call to let
    go of its session and leaves no session directory behind (a direct
    session's call writes into it until its very end)."""
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "0", "--audit", log)
    state = d.path.parent / (d.path.name + ".d")
    c = d.connect()
    sid = c.result("session.create", {"workspace_mode": mode,
                                      "workspace_commit": "always"})["session_id"]
    c.result("session.write_file", {"session_id": sid, "path": "a.txt", "content": "before\n"})
    before = tree_digest(state / sid)
    mark = marker()
    if mode == "overlay":
        # 20,000 files to commit, then it waits; SIGTERM (the supervisor's, once
        # its daemon is gone) ends it with success.
        script = (f"python3 -c \"{MANY}\"; trap 'exit 0' TERM; echo ready; "
                  f"while :; do sleep 0.1; done; : {mark}")
    else:
        # Writes on, SIGTERM or not, until its supervisor kills it.
        script = (f"trap '' TERM; echo ready; i=0; while [ $i -lt 200000 ]; do "
                  f"echo x > f$i; i=$((i+1)); done; : {mark}")
    c.send("session.exec", {"session_id": sid, "argv": ["sh", "-c", script], "stream": True,
                            "timeout": 600})
    note = c.line()
    assert note.get("method") == "run.output" and "ready" in note["params"]["data"], note
    supervisors = children(d.proc.pid)
    assert supervisors
    d.proc.kill()
    d.proc.wait()

    def old_gone():
        return not any(os.path.exists(f"/proc/{p}") for p in supervisors) and not pids_with(mark)

    if restart == "after_the_call":
        assert wait_until(old_gone, 120)
        # Nothing was committed: the workspace is as it was, no temporary file in it.
        assert tree_digest(state / sid) == before
    d.start()
    # It answers once the stale session is gone, which waited for the old call.
    assert d.connect().result("session.list")["sessions"] == []
    assert wait_until(old_gone, 120)
    assert os.listdir(state) == [], list(state.rglob("*"))[:5]
    d.stop()
    end = [e for e in assert_intact(bins, log) if e["type"] == "run.end"]
    assert len(end) == 1 and end[0]["session"] == sid, end
    if mode == "overlay":
        t = end[0]["transaction"]
        assert t["outcome"] == "discarded" and "gone" in t["reason"], t


def canonical_digest(policy):
    """The policy digest cordon computes: SHA-256 of the compact, sorted JSON."""
    text = json.dumps(policy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_session_run_records_its_own_policy_digest(daemon, cordon, bins):
    """run.start of a session's exec names the digest of the policy it ran
    under (the daemon's with the session's workspace and options), not the
    daemon's, whatever the daemon computed before."""
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "1", "--audit", log)
    c = d.connect()
    base = c.result("policy.check")
    assert canonical_digest(base["policy"]) == base["digest"]
    assert c.result("run", {"argv": ["true"]})["exit_code"] == 0
    sids = [c.result("session.create", opts)["session_id"] for opts in
            ({}, {"workspace_mode": "overlay", "workspace_commit": "manual"})]
    for sid in sids:
        assert c.result("session.exec", {"session_id": sid, "argv": ["true"]})["exit_code"] == 0
    fork = c.result("session.fork", {"session_id": sids[1]})["session_ids"][0]
    c.result("session.discard", {"session_id": sids[1]})
    assert c.result("session.exec", {"session_id": fork, "argv": ["true"]})["exit_code"] == 0
    state = d.path.parent / (d.path.name + ".d")
    d.stop()
    starts = [e for e in assert_intact(bins, log) if e["type"] == "run.start"]
    assert starts[0]["policy_digest"] == base["digest"] and "session" not in starts[0]
    for sid, overlay in ((sids[0], False), (sids[1], True), (fork, True)):
        want = json.loads(json.dumps(base["policy"]))
        want["filesystem"]["workspace"] = str(state / sid)
        if overlay:
            want["workspace"] = {"mode": "overlay", "commit": "manual"}
        (start,) = [e for e in starts if e.get("session") == sid]
        assert start["workspace"] == str(state / sid)
        assert start["policy_digest"] == canonical_digest(want) != base["digest"], (sid, start)

