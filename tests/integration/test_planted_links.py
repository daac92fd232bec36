"""
Links a run plants in what outlives it (its workspace, a writable bind) must
never steer a later run's host paths: bind sources, the workspace, bind
mountpoints, the --result file, the audit log, fetch's -o file.

Each attack plants its link from inside a real sandbox, as an agent's code
would, then starts the later run as the same identity (root and nobody) and
asserts a refusal naming the link, and no trace on the host: nothing of the
link's target shown, written or created.
"""

import json
import os
import secrets

import pytest

from conftest import assert_cordon_refused


def plant(cordon, ws, *links):
    """
    A run that makes each (name, target) link in a writable host tree, as its
    own code. Through --rw: a workspace's after-run scan removes links that
    lead out of it (test_workspace_trust.py); a writable bind keeps them.
    """
    script = "; ".join(f"ln -s '{target}' '/plant/{name}'" for name, target in links)
    r = cordon.run(["sh", "-c", script], "--rw", f"{ws}:/plant")
    assert r.status == 0, r
    for name, target in links:
        assert os.readlink(ws / name) == str(target)


@pytest.fixture
def victim(cordon):
    """A host directory the caller can read and write, outside every tree a run gets."""
    d = cordon.hostdir("victim")
    canary = d / "canary"
    canary.write_text("untouched\n")
    os.chown(canary, cordon.ident.uid, cordon.ident.gid)
    return d


def unchanged(victim):
    assert sorted(p.name for p in victim.iterdir()) == ["canary"], list(victim.iterdir())
    assert (victim / "canary").read_text() == "untouched\n"


def test_ro_bind_through_planted_link_refused(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("x", victim))
    r = cordon.run(["cat", "/y/canary"], "--ro", f"{ws}/x:/y")
    assert_cordon_refused(r, f"{ws}/x", "symbolic link")
    assert "untouched" not in r.out and r.result is None, r
    unchanged(victim)


def test_rw_bind_through_planted_link_in_a_parent_refused(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("up", victim.parent))
    r = cordon.run(["sh", "-c", "echo owned > /y/canary; echo owned > /y/new"], "--rw",
                   f"{ws}/up/{victim.name}:/y")
    assert_cordon_refused(r, f"{ws}/up", "symbolic link")
    unchanged(victim)


def test_workspace_through_planted_link_refused(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("sub", victim))
    r = cordon.run(["sh", "-c", "cat canary; echo owned > canary; touch new"], "-w",
                   f"{ws}/sub")
    assert_cordon_refused(r, "workspace", f"{ws}/sub")
    assert "untouched" not in r.out, r
    unchanged(victim)


def test_follow_symlinks_is_an_explicit_choice(cordon, victim):
    """The policy can let one bind through a link; the effective policy shows where it leads."""
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("x", victim))
    pol = cordon.hostdir("pol") / "p.yaml"
    pol.write_text(f"version: 1\nfilesystem:\n  read_only:\n"
                   f"    - {{source: {ws}/x, dest: /y, follow_symlinks: true}}\n")
    r = cordon.run(["cat", "/y/canary"], "-p", pol)
    assert (r.status, r.out) == (0, "untouched\n"), r
    r = cordon.raw("policy", "check", pol)
    assert r.status == 0, r
    binds = json.loads(r.out)["policy"]["filesystem"]["read_only"]
    assert binds == [{"source": str(victim), "dest": "/y", "follow_symlinks": True}], r.out


@pytest.mark.parametrize("value", ["yes please", "[]"])
def test_follow_symlinks_must_be_a_bool(cordon, value):
    d = cordon.hostdir("src")
    pol = cordon.hostdir("pol") / "p.yaml"
    pol.write_text(f"version: 1\nfilesystem:\n  read_only:\n"
                   f"    - {{source: {d}, dest: /y, follow_symlinks: {value}}}\n")
    r = cordon.run(["true"], "-p", pol)
    assert_cordon_refused(r, "follow_symlinks", "true or false")


def test_mountpoint_through_planted_link_refused(cordon, victim):
    """
    A bind beneath a read-only bind of a tree an earlier run wrote: its
    mountpoint must not be made through a link planted there (that would
    create directories on the host and mount elsewhere).
    """
    ws = cordon.hostdir("ws")
    other = cordon.hostdir("other")
    # Inside the second run the host tree is reachable beneath /oldroot while binds are made.
    plant(cordon, ws, ("sub", f"/oldroot{victim}"), ("rel", "../../../../../../../../" + str(victim)))
    for link in ("sub", "rel"):
        r = cordon.run(["ls", "/src"], "--ro", f"{ws}:/src", "--ro", f"{other}:/src/{link}/deeper")
        assert_cordon_refused(r, f"/src/{link}")
        unchanged(victim)


def test_bind_beneath_a_writable_bind_refused(cordon):
    a, b = cordon.hostdir("a"), cordon.hostdir("b")
    r = cordon.run(["true"], "--rw", f"{a}:/out", "--ro", f"{b}:/out/sub")
    assert_cordon_refused(r, "/out/sub", "writable bind")
    assert list(a.iterdir()) == []


def test_result_through_planted_link_replaces_the_link(cordon, victim):
    """--result never writes through a link or a FIFO left where the file goes."""
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("r.json", victim / "canary"))
    os.mkfifo(ws / "fifo.json")
    os.chown(ws / "fifo.json", cordon.ident.uid, cordon.ident.gid)
    for name in ("r.json", "fifo.json"):
        r = cordon.run(["true"], "-w", ws, "--result", ws / name, result=False, timeout=30)
        assert r.status == 0, r
        out = ws / name
        assert out.is_file() and not out.is_symlink(), name
        assert json.loads(out.read_text())["reason"] == "exited"
        unchanged(victim)


def test_result_dir_through_planted_link_refused_before_the_run(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("d", victim))
    mark = ws / f"ran-{secrets.token_hex(4)}"
    r = cordon.run(["touch", f"/workspace/{mark.name}"], "-w", ws, "--result",
                   f"{ws}/d/r.json", result=False)
    assert_cordon_refused(r, "--result", f"{ws}/d")
    assert not mark.exists(), "the command ran although its result could not be written"
    unchanged(victim)


def test_audit_log_through_link_refused(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("logs", victim))
    mark = ws / f"ran-{secrets.token_hex(4)}"
    r = cordon.run(["touch", f"/workspace/{mark.name}"], "-w", cordon.hostdir("other"),
                   "--audit", f"{ws}/logs/audit.log")
    assert_cordon_refused(r, "audit", f"{ws}/logs", "symbolic link")
    assert not mark.exists()
    unchanged(victim)


def test_audit_witness_through_link_refused(cordon, victim):
    ws = cordon.hostdir("ws")
    plant(cordon, ws, ("logs", victim))
    log = cordon.hostdir("audit") / "audit.log"
    r = cordon.run(["true"], "-p", audit_policy(cordon, log, witness=f"{ws}/logs/w.jsonl"))
    assert_cordon_refused(r, "audit.witness", f"{ws}/logs", "symbolic link")
    assert not log.exists()
    unchanged(victim)


def test_audit_witness_that_is_a_fifo_refused(cordon):
    d = cordon.hostdir("logs")
    os.mkfifo(d / "audit.witness")
    os.chown(d / "audit.witness", cordon.ident.uid, cordon.ident.gid)
    r = cordon.run(["true"], "-p", audit_policy(cordon, d / "audit.log", witness=d /
                                                "audit.witness"), timeout=30)
    assert_cordon_refused(r, "audit witness", "not a regular file")


def test_audit_log_that_is_a_fifo_refused(cordon):
    d = cordon.hostdir("logs")
    os.mkfifo(d / "audit.log")
    os.chown(d / "audit.log", cordon.ident.uid, cordon.ident.gid)
    r = cordon.run(["true"], "--audit", d / "audit.log", timeout=30)
    assert_cordon_refused(r, "audit", "not a regular file")


def audit_policy(cordon, log, key=None, witness=None):
    pol = cordon.hostdir("pol") / "p.yaml"
    text = f"version: 1\naudit:\n  file: {log}\n"
    if key:
        key.write_text("never read: refused before\n")
        text += f"  sign_key: {key}\n"
    if witness:
        text += f"  witness: {witness}\n"
    pol.write_text(text)
    return pol


@pytest.mark.parametrize("where", ["workspace", "rw-bind"])
@pytest.mark.parametrize("what", ["file", "sign_key", "witness"])
def test_audit_files_in_a_writable_tree_refused(cordon, where, what):
    """The sandbox must not be able to write, swap or relink the log, its witness or its key."""
    ws = cordon.hostdir("ws")
    inner = ws / "logs"
    inner.mkdir()
    os.chown(inner, cordon.ident.uid, cordon.ident.gid)
    log, key, witness = cordon.hostdir("audit") / "audit.log", None, None
    if what == "file":
        log = inner / "audit.log"
    elif what == "sign_key":
        key = inner / "sign.pem"
    else:
        witness = inner / "audit.witness"
    opts = ["-p", audit_policy(cordon, log, key, witness)]
    opts += ["-w", ws] if where == "workspace" else ["--rw", f"{ws}:/out"]
    r = cordon.run(["true"], *opts)
    assert_cordon_refused(r, f"audit.{what}", "keep it outside")
    assert not log.exists() and not (inner / "audit.witness").exists()


def test_audit_log_in_a_second_mount_of_the_workspace_refused(root_cordon):
    """The same directory under another name is caught by identity, not by name."""
    ws = root_cordon.hostdir("ws")
    alias = root_cordon.hostdir("alias")
    log = ws / "audit.log"
    assert os.system(f"mount --bind {ws} {alias}") == 0
    try:
        r = root_cordon.run(["true"], "-w", alias, "-p", audit_policy(root_cordon, log))
    finally:
        assert os.system(f"umount {alias}") == 0
    assert_cordon_refused(r, "audit.file", "keep it outside")
    assert not log.exists()


@pytest.mark.parametrize("what", ["log", "secret"])
def test_a_hard_link_into_the_workspace_is_refused(cordon, what):
    """The audit log, or a secret's file, with a second name inside the workspace:
    found by no path check, so a file with more than one name on the workspace's file
    system is refused, and the log is neither written nor recorded in."""
    ws = cordon.hostdir("ws")
    logs = cordon.hostdir("audit")
    log = logs / "audit.log"
    value = "real-value-" + secrets.token_hex(8)
    token = logs / "token"
    token.write_text(value)
    if what == "log":
        pol = audit_policy(cordon, log)
        r = cordon.run(["true"], "-p", pol)
        assert r.status == 0, r
        os.link(log, ws / "hl")
        before = log.read_bytes()
        r = cordon.run(["sh", "-c", 'echo "{\\"forged\\":1}" >> /workspace/hl'], "-w", ws,
                       "-p", pol)
        assert_cordon_refused(r, "audit.file", "hard links", str(ws))
        assert log.read_bytes() == before
    else:
        os.link(token, ws / "hl")
        r = cordon.run(["cat", "/workspace/hl"], "-w", ws, "--secret",
                       f"TOKEN=file:{token}@api.example.com")
        assert_cordon_refused(r, "TOKEN", "hard links", str(ws))
        assert value.encode() not in r.stdout


@pytest.mark.parametrize("where", ["-w", "--ro"])
def test_secret_file_the_sandbox_could_read_refused(cordon, where):
    """A file: secret inside a tree the sandbox sees would put the real value inside."""
    d = cordon.hostdir("tree")
    (d / "token").write_text("real-value-" + secrets.token_hex(8))
    opts = [where, d] if where == "-w" else [where, f"{d}:/t"]
    r = cordon.run(["cat", "/workspace/token", "/t/token"], *opts, "--secret",
                   f"TOKEN=file:{d}/token@api.example.com")
    assert_cordon_refused(r, "TOKEN", "inside", "would enter the sandbox")
    assert "real-value" not in r.out
