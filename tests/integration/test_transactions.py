"""
Transactional workspaces: `--workspace-mode overlay` runs the call on an
overlayfs layer over the host workspace and the supervisor commits it (or
not) once the sandbox is gone.

Each test runs a real sandbox as root and as nobody. A refused or discarded
change must leave the host tree byte-identical (tree_digest); a commit must
write only beneath the workspace, never through a link either side holds.
"""

import json
import os

import pytest

from conftest import assert_cordon_refused
from test_workspace_trust import make_repo, tree_digest

OVERLAY = ("--workspace-mode", "overlay")


def sh(cordon, ws, script, *opts, audit=None):
    extra = ["--audit", audit] if audit else []
    return cordon.run(["sh", "-c", script], "-w", ws, *OVERLAY, *opts, *extra)


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
    "mkdir -p vendor/lib/.git/hooks && echo 'rm -rf ~' > vendor/lib/.git/hooks/post-checkout",
    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
])
def test_overlay_protected_change_refuses_the_whole_commit(cordon, attack):
    ws = make_repo(cordon)
    before = tree_digest(ws)
    audit = cordon.hostdir("audit") / "audit.log"
    # Ordinary changes first, so a partial commit would show.
    r = sh(cordon, ws, f"echo more >> a.txt && echo new > b.txt && {attack}", audit=audit)
    assert r.status == 0, r
    t = r.result["transaction"]
    assert (t["outcome"], t["committed"]) == ("refused", False), t
    assert "protected" in t["reason"], t
    assert tree_digest(ws) == before
    assert run_end(audit)["transaction"]["reason"] == t["reason"]
    assert "refused" in r.err, r


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
