"""
The audit log: every run leaves a hash-chained record (run.start, limit.fired,
run.end) that closes however the run ends, that the sandbox can neither see
nor touch, that `cordon audit verify` breaks at the exact line of any edit,
and that holds no secret value. Real runs; the chain is also recomputed here.
"""

import base64
import errno
import hashlib
import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import tempfile

import pytest

from conftest import PROBE, assert_cordon_refused, cordon_cgroups, marker, probe_pids, wait_until
from levels import held_by
from test_limits import assert_gone, fork_bomb, held, limits_for, memory_bomb

CHAIN_KEYS = ["seq", "ts", "run", "type", "prev"]
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
HEX64 = re.compile(r"[0-9a-f]{64}")
WATCHDOG_ERROR = "the supervisor died before the run ended"
SIGN_FMT = "cordon-audit-checkpoint v1 {} {}"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def lines_of(path):
    data = pathlib.Path(path).read_bytes()
    assert data.endswith(b"\n"), f"{path} does not end in a newline"
    return data[:-1].split(b"\n")


def write_lines(path, lines):
    pathlib.Path(path).write_bytes(b"".join(l + b"\n" for l in lines))


def dumps(ev):
    return json.dumps(ev, separators=(",", ":")).encode()


def assert_chain(path):
    """Recompute the chain independently of cordon; return the events."""
    raw = lines_of(path)
    evs = [json.loads(l) for l in raw]
    head = evs[0]
    assert head["type"] == "audit.header" and head["run"] is None, head
    assert head["version"] == 1 and HEX64.fullmatch(head["genesis"]), head
    assert head["prev"] == sha(head["genesis"].encode()), head
    for i, ev in enumerate(evs):
        assert list(ev)[:5] == CHAIN_KEYS, ev
        assert ev["seq"] == i and TS.fullmatch(ev["ts"]), ev
        if i:
            assert ev["prev"] == sha(raw[i - 1]), f"line {i + 1} does not chain"
            assert ev["ts"] >= evs[i - 1]["ts"], f"line {i + 1} goes back in time"
    return evs


def cli(bins, *args):
    return subprocess.run([str(bins / "cordon"), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def verify(bins, path, key=None):
    return cli(bins, "audit", "verify", path, *(["--key", key] if key else []))


def verify_witnessed(bins, path, witness):
    r = cli(bins, "audit", "verify", path, "--witness", witness)
    return r.returncode == 0 and ", witnessed to seq " in r.stdout


def assert_intact(bins, path, key=None):
    """verify exits 0 with the exact summary line; the chain recomputes here."""
    r = verify(bins, path, key)
    assert r.returncode == 0 and not r.stderr, r
    evs = assert_chain(path)
    runs = {e["run"] for e in evs if e["run"]}
    want = (f"{path}: intact: {len(evs)} events, {len(runs)} run{'' if len(runs) == 1 else 's'}"
            f", {evs[0]['ts']} .. {evs[-1]['ts']}, head {sha(lines_of(path)[-1])}")
    if key:
        want += f", {sum(e['type'] == 'audit.checkpoint' for e in evs)} signed checkpoints"
    assert r.stdout == want + "\n", r
    return evs


def assert_broken(bins, path, line, why, key=None):
    r = verify(bins, path, key)
    assert r.returncode == 1, r
    assert r.stdout.count("\n") == 1 and r.stdout.startswith(f"{path}:{line}: {why}"), r
    return r.stdout


def of_run(evs, run_id):
    return [e for e in evs if e["run"] == run_id]


def body(ev):
    return {k: v for k, v in ev.items() if k not in CHAIN_KEYS}


def ed25519(d, name, owner=None):
    priv, pub = d / f"{name}.pem", d / f"{name}.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ED25519", "-out", priv], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", priv, "-pubout", "-out", pub], check=True,
                   capture_output=True)
    if owner:
        os.chown(priv, owner.uid, owner.gid)
    return priv, pub


def key_id(pub):
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", pub, "-outform", "DER"],
                         check=True, capture_output=True).stdout
    return sha(der[-32:])


def sign(priv, text):
    with tempfile.NamedTemporaryFile() as m:
        m.write(text.encode())
        m.flush()
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", priv, "-rawin", "-in",
                              m.name], check=True, capture_output=True).stdout
    assert len(sig) == 64
    return base64.b64encode(sig).decode()


def audit_policy(d, log, key=None, every=2, witness=None):
    p = d / "audit.yaml"
    text = f"version: 1\naudit:\n  file: {log}\n"
    if key:
        text += f"  sign_key: {key}\n  checkpoint_every: {every}\n"
    if witness:
        text += f"  witness: {witness}\n"
    p.write_text(text)
    os.chmod(p, 0o644)
    return p


# --- the record of a run --------------------------------------------------------


def test_normal_run_record(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    ws = cordon.hostdir("ws")
    r = cordon.run(["sh", "-c", "echo hi"], "--audit", log, "-w", ws)
    assert (r.status, r.out) == (0, "hi\n"), r
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"]
    assert (log.stat().st_mode & 0o777, log.stat().st_uid) == (0o600, cordon.ident.uid)
    head, start, end = evs
    assert body(head) == {"genesis": head["genesis"], "version": 1, "host": os.uname().nodename,
                          "cordon_version": start["cordon_version"]}
    assert start["run"] == end["run"] == r.result["run_id"], r
    assert re.fullmatch(r"[0-9a-f]{32}", start["run"])
    assert {k: start[k] for k in ("uid", "host", "level", "argv", "workspace", "secrets")} == {
        "uid": cordon.ident.uid, "host": os.uname().nodename, "level": cordon.level,
        "argv": ["sh", "-c", "echo hi"], "workspace": str(ws), "secrets": []}
    assert re.fullmatch(r"\d+\.\d+\.\d+", start["cordon_version"]), start
    for k in ("policy_digest", "network_digest", "tools_digest", "syscalls_digest"):
        assert HEX64.fullmatch(start[k]), (k, start)
    assert start["limits"]["open_files"] == 1024 and start["limits"]["wall_ms"] == 600000, start
    assert "wall" in start["limits"]["defaults"], start
    # run.end is the --result, field for field, less the run id it is filed under.
    res = dict(r.result)
    del res["run_id"]
    assert set(body(end)) == set(res), (end, res)
    for k, v in res.items():
        assert end[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert (end["reason"], end["status"], end["exit_code"], end["signal"]) == ("exited", 0, 0,
                                                                              None)
    assert end["stdout_bytes"] == 3 and end["policy_digest"] == start["policy_digest"]
    # A second run appends to the same chain: no second header.
    r2 = cordon.run(["false"], "--audit", log)
    assert r2.status == 1, r2
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs[3:]] == ["run.start", "run.end"]
    assert evs[3]["run"] == evs[4]["run"] == r2.result["run_id"] != r.result["run_id"]
    assert (evs[4]["reason"], evs[4]["status"], evs[4]["exit_code"]) == ("exited", 1, 1)


# --- out of the sandbox's view --------------------------------------------------


def test_log_beside_the_workspace_is_not_visible(cordon, bins):
    box = cordon.hostdir("box")
    ws = box / "ws"
    ws.mkdir()
    os.chown(ws, cordon.ident.uid, cordon.ident.gid)
    os.chown(box, cordon.ident.uid, cordon.ident.gid)
    name = f"audit-{secrets.token_hex(4)}.log"
    log = box / name
    r = cordon.run(["sh", "-c", f"ls -a /workspace /workspace/..; find / -path /proc -prune -o "
                    f"-name {name} -print 2>/dev/null; {PROBE} stat {log}; echo stat=$?"],
                   "--audit", log, "-w", ws, timeout=300)  # a walk of / over 9p under TCG
    assert r.status == 0, r
    assert name not in r.out, r
    assert r.out.endswith(f"stat={errno.ENOENT}\n"), r
    assert len(assert_intact(bins, log)) == 3


# Inside: every way to read, write, replace or remove the masked file, by errno name.
MASK_OPS = r"""
import errno, json, os, stat, sys
p = sys.argv[1]
d = os.path.dirname(p)
X = b"DEGROF"[::-1] + b"\n"     # not spelled out here: argv is in the log
def t(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def over():
    with open(d + "/new", "wb") as f:
        f.write(X)
    os.rename(d + "/new", p)
ops = {
    "read": lambda: open(p, "rb").read(),
    "append": lambda: open(p, "ab").write(X),
    "overwrite": lambda: open(p, "wb").write(X),
    "truncate": lambda: os.truncate(p, 0),
    "unlink": lambda: os.unlink(p),
    "rename": lambda: os.rename(p, d + "/moved"),
    "rename-over": over,
    "link": lambda: os.link(p, d + "/hard"),
    "chmod": lambda: os.chmod(p, 0o666),
}
res = {k: t(f) for k, f in ops.items()}
st = os.stat(p)
res["stat"] = [stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev), st.st_size]
print(json.dumps(res))
"""


# In a writable tree (workspace, --rw) all three are refused: test_planted_links.py.
@pytest.mark.parametrize("what", ["log", "key", "witness"])
def test_masked_inside_a_read_only_bind(cordon, bins, what):
    d = cordon.hostdir("shared")
    keydir = cordon.hostdir("keys")
    name = f"secret-{secrets.token_hex(4)}"
    key = witness = None
    if what == "log":
        log = d / f"{name}.log"
    else:
        log = cordon.hostdir("audit") / "audit.log"
    if what == "key":
        key, _ = ed25519(d, name, cordon.ident)
    if what == "witness":
        witness = d / f"{name}.witness"
    target = {"log": log, "key": key, "witness": witness}[what]
    opts = ["-p", audit_policy(keydir, log, key, witness=witness), "--ro", f"{d}:/shared"]
    inside = f"/shared/{target.name}"
    before = target.read_bytes() if target.exists() else b""
    for n in (1, 2):       # the first run creates the log, the second finds it there
        r = cordon.run(["python3", "-c", MASK_OPS, inside], *opts)
        assert r.status == 0, r
        res = json.loads(r.out)
        assert res.pop("stat") == [True, 1, 3, 0], r          # /dev/null, empty
        assert "ok" not in res.values(), res
        # Removing fails on the read-only bind first (on the mountpoint, EBUSY, after).
        assert res["read"] == "EACCES" and res["unlink"] == "EROFS", res
        assert res["link"] == "EXDEV" or res["link"] == "EROFS", res
        evs = assert_intact(bins, log, key and key.with_suffix(".pub"))
        types = [e["type"] for e in evs if e["type"] != "audit.checkpoint"]
        assert types == ["audit.header"] + ["run.start", "run.end"] * n
        assert b"FORGED" not in log.read_bytes()
        assert not (d / "moved").exists() and not (d / "hard").exists()
    assert target.stat().st_size and (what != "key" or target.read_bytes() == before)
    if witness:
        assert b"FORGED" not in witness.read_bytes() and len(lines_of(witness)) == 2
        assert verify_witnessed(bins, log, witness)


def test_no_descriptor_of_the_log_inside(cordon, bins):
    d = cordon.hostdir("audit")
    key, pub = ed25519(d, "sign", cordon.ident)
    log = d / "audit.log"
    pol = audit_policy(d, log, key)
    r = cordon.probe("fds", opts=["-p", pol])
    assert r.status == 0, r             # only 0, 1 and 2
    # Nor in any process of the sandbox that /proc shows.
    r = cordon.run(["sh", "-c", "ls -l /proc/[0-9]*/fd/ /proc/[0-9]*/map_files/ 2>/dev/null; "
                    "true"], "-p", pol)
    assert r.status == 0, r
    assert "audit.log" not in r.out and "sign.pem" not in r.out, r
    assert_intact(bins, log, pub)


# --- every run closes its record ------------------------------------------------


# id, command (None: a fork bomb), options, limit, reason, status (None: not fixed)
LIMIT_KILLS = [
    ("timeout", ["sleep", "100"], ["-t", "1s"], "wall", "timeout", 124),
    ("output", ["head", "-c", "100000000", "/dev/zero"], ["--output", "1M"], "output",
     "output_limit", None),
]
CGROUP_KILLS = [
    ("memory", memory_bomb(), ["-m", "64M", "-t", "30s"], "memory", "oom", 137),
    ("pids", None, ["--pids", "64", "-t", "20s"], "pids", "pids_limit", None),
    ("cpu", ["sh", "-c", "while :; do :; done"], ["--cpu", "1s", "-t", "20s"], "cpu",
     "cpu_limit", None),
]


@pytest.mark.parametrize("case", LIMIT_KILLS, ids=[c[0] for c in LIMIT_KILLS])
def test_limit_kill_is_recorded(cordon, bins, case):
    assert_limit_recorded(cordon, bins, *case[1:])


@pytest.mark.parametrize("case", CGROUP_KILLS, ids=[c[0] for c in CGROUP_KILLS])
def test_cgroup_limit_kill_is_recorded(root_cordon, bins, case):
    reasons = None
    if case[0] == "pids" and held(root_cordon, "pids") == "kernel":
        # The level's own RLIMIT_NPROC refuses the forks: the bomb runs on to
        # its timeout, or gVisor's own host tasks reach the cgroup's bound
        # first, or the guest's shell gives up on a fork it cannot make
        # (exited, no limit fired: none ended it). The record says which.
        reasons = {"pids_limit": "pids", "timeout": "wall", "exited": None}
    assert_limit_recorded(root_cordon, bins, *case[1:], reasons=reasons)


def assert_limit_recorded(cordon, bins, cmd, opts, limit, reason, status, reasons=None):
    """REASONS: the verdicts the level may give instead, each with its limit."""
    m = marker()
    log = cordon.hostdir("audit") / "audit.log"
    r = cordon.run(cmd or fork_bomb(m), *opts, "--audit", log, timeout=60)
    if reasons and r.result["reason"] in reasons:
        reason, limit = r.result["reason"], reasons[r.result["reason"]]
    assert r.result["reason"] == reason, r
    assert status is None or r.status == status, r
    assert r.status not in (0, 125), r
    evs = assert_intact(bins, log)
    fired = ["limit.fired"] if limit else []
    assert [e["type"] for e in evs] == ["audit.header", "run.start", *fired, "run.end"]
    assert {e["run"] for e in evs[1:]} == {r.result["run_id"]}
    if limit:
        assert body(evs[2]) == {"limit": limit, "reason": reason}
    assert (evs[-1]["reason"], evs[-1]["status"]) == (reason, r.status)
    assert_gone(m)


def test_setup_failures_are_recorded(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    cmd = f"no-such-command-{secrets.token_hex(3)}"
    cases = [([cmd], [], 127, f"command not found: '{cmd}'")]
    if held_by("memory", cordon.level, cordon.root) == "rlimit":  # refused unless best effort
        cases.append((["true"], ["-m", "64M"], 125, None))
    for argv, opts, status, error in cases:
        r = cordon.run(argv, *opts, "--audit", log)
        assert r.status == status, r
        msg = r.err.rstrip("\n")
        assert msg.count("\n") == 0 and msg.startswith("cordon: "), r
        end = assert_intact(bins, log)[-1]
        start = assert_chain(log)[-2]
        assert (start["type"], start["argv"], start["run"]) == ("run.start", argv, end["run"])
        assert (end["type"], end["reason"], end["status"]) == ("run.end", "setup_error", status)
        assert end["error"] == (error or msg[len("cordon: "):]), (end, r)
        if status == 125:
            assert_cordon_refused(r, "memory")
            assert end["exit_code"] is None and "best_effort" in end["error"], end


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)],
                         ids=["TERM", "INT"])
def test_supervisor_signal_closes_the_record(cordon, bins, sig, status):
    log = cordon.hostdir("audit") / "audit.log"
    m = marker()
    p = cordon.popen([PROBE, "sleep", "1000", m], "--audit", log, *limits_for(cordon))
    try:
        assert probe_pids(m), "run never started"
        p.send_signal(sig)
        p.wait(timeout=15)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == status, p.stderr.read()
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"]
    assert (evs[2]["reason"], evs[2]["status"]) == ("killed", status), evs[2]
    assert "error" not in evs[2], evs[2]
    assert_gone(m)


def test_supervisor_sigkill_watchdog_closes_the_record(cordon, bins):
    before = cordon_cgroups()
    log = cordon.hostdir("audit") / "audit.log"
    m = marker()
    p = cordon.popen([PROBE, "sleep", "1000", m], "--audit", log, *limits_for(cordon))
    try:
        assert probe_pids(m), "run never started"
        p.kill()
        p.wait(timeout=15)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    closed = wait_until(lambda: b'"type":"run.end"' in log.read_bytes().split(b"\n")[-2], 5)
    assert closed, f"no run.end within 5 s after SIGKILL:\n{log.read_text()}"
    evs = assert_intact(bins, log)
    assert [e["type"] for e in evs] == ["audit.header", "run.start", "run.end"]
    assert evs[2]["run"] == evs[1]["run"]
    assert body(evs[2]) == {"reason": "killed", "status": 137, "error": WATCHDOG_ERROR}
    assert_gone(m)
    assert wait_until(lambda: not (cordon_cgroups() - before), 5), cordon_cgroups() - before


def test_torn_last_line(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    assert cordon.run(["true"], "--audit", log).status == 0
    n = len(lines_of(log))
    ev = dumps({"seq": n, "ts": "2026-01-01T00:00:00.000000Z", "run": None, "type": "run.start",
                "prev": sha(lines_of(log)[-1])})
    with open(log, "ab") as f:
        f.write(ev[: len(ev) // 2])
    torn = log.read_bytes()
    out = assert_broken(bins, log, n + 1, "truncated last line")
    assert f"the {n} lines before it verify" in out, out
    r = cordon.run(["true"], "--audit", log, result=False)
    assert_cordon_refused(r, "torn line", f"line {n + 1}", str(log))
    assert log.read_bytes() == torn


# --- tampering ------------------------------------------------------------------


@pytest.fixture(scope="module")
def logs(bins, tmp_path_factory):
    """A real unsigned and a real signed multi-run log (and the signing keys)."""
    d = tmp_path_factory.mktemp("logs")
    key, pub = ed25519(d, "real")
    other, other_pub = ed25519(d, "other")
    out = {"dir": d, "key": key, "pub": pub, "other": other, "other_pub": other_pub}
    for name, k in (("plain", None), ("signed", key)):
        pol = audit_policy(d, d / f"{name}.log", k)
        for flags, cmd, status in (([], ["echo", "one"], 0), (["-t", "1s"], ["sleep", "5"], 124),
                                   ([], ["false"], 1)):
            assert cli(bins, "run", "-p", pol, *flags, "--", *cmd).returncode == status
        out[name] = d / f"{name}.log"
    return out


def tampered(logs, name, edit):
    raw = lines_of(logs[name])
    path = logs["dir"] / f"t-{secrets.token_hex(4)}.log"
    path.write_bytes(edit(list(raw)))
    return path


def change(lineno, old, new):
    """Replace OLD by NEW once in line LINENO (1-based)."""
    def edit(raw):
        line = raw[lineno - 1]
        assert line.count(old) >= 1, (old, line)
        raw[lineno - 1] = line.replace(old, new, 1)
        return b"".join(l + b"\n" for l in raw)
    return edit


def joined(f):
    return lambda raw: b"".join(l + b"\n" for l in f(raw))


def flip(lineno, field):
    """Change the last digit of FIELD's value in line LINENO to another digit."""
    def edit(raw):
        old = b'"%s":%s' % (field.encode(), dumps(json.loads(raw[lineno - 1])[field]))
        i = max(k for k in range(len(old)) if old[k:k + 1].isdigit())
        return change(lineno, old, old[:i] + (b"1" if old[i:i + 1] == b"0" else b"0")
                      + old[i + 1:])(raw)
    return edit


# plain.log: 1 header, then (start, end), (start, limit.fired, end), (start, end): 8 lines.
TAMPER = [
    ("ts", flip(2, "ts"), 3, "digest mismatch"),
    ("argv", change(2, b'"echo","one"', b'"echo","onE"'), 3, "digest mismatch"),
    ("type", change(5, b'"limit.fired"', b'"limit.fixed"'), 6, "digest mismatch"),
    ("limit", change(5, b'"limit":"wall"', b'"limit":"cpu"'), 6, "digest mismatch"),
    ("status", flip(6, "status"), 7, "digest mismatch"),
    ("run", flip(3, "run"), 4, "digest mismatch"),
    ("genesis", flip(1, "genesis"), 1,
     "header prev is not the digest of its genesis"),
    ("prev", change(4, b'"prev":"', b'"prev":"0'), 4, "prev missing or not a SHA-256 digest"),
    ("prev-digit", flip(4, "prev"), 4, "digest mismatch"),
    ("seq", flip(4, "seq"), 4, "seq out of order: expected 3, got 0"),
    ("json", change(3, b"{", b"["), 3, "bad json"),
    ("deleted", joined(lambda raw: raw[:3] + raw[4:]), 4,
     "seq gap: expected 3, got 4 (1 line missing)"),
    ("deleted-two", joined(lambda raw: raw[:2] + raw[4:]), 3,
     "seq gap: expected 2, got 4 (2 lines missing)"),
    ("duplicated", joined(lambda raw: raw[:4] + [raw[3]] + raw[4:]), 5, "duplicate of line 4"),
    ("swapped", joined(lambda raw: raw[:3] + [raw[4], raw[3]] + raw[5:]), 4,
     "seq out of order: expected 3, got 4 (lines 4 and 5 are swapped)"),
    ("header-again", joined(lambda raw: raw[:4] + [raw[0]] + raw[4:]), 5, "second header"),
    ("truncated-mid-line", lambda raw: b"".join(l + b"\n" for l in raw[:5]) + raw[5][:40], 6,
     "truncated last line"),
]


@pytest.mark.parametrize("case", TAMPER, ids=[c[0] for c in TAMPER])
def test_verify_catches_tampering(bins, logs, case):
    _, edit, line, why = case
    assert [e["type"] for e in assert_intact(bins, logs["plain"])] == [
        "audit.header", "run.start", "run.end", "run.start", "limit.fired", "run.end",
        "run.start", "run.end"]
    path = tampered(logs, "plain", edit)
    assert path.read_bytes() != logs["plain"].read_bytes()
    assert_broken(bins, path, line, why)


def forge_append(raw):
    # Not a second run.end (verify flags that): a line the run could have had.
    last = json.loads(raw[-1])
    ev = {"seq": last["seq"] + 1, "ts": last["ts"], "run": json.loads(raw[1])["run"],
          "type": "egress.decision", "prev": sha(raw[-1]), "allowed": True,
          "host": "example.org", "port": 443}
    return b"".join(l + b"\n" for l in raw + [dumps(ev)])


def test_forged_append_needs_the_key(bins, logs):
    # Anyone can extend a bare chain: it verifies. Only a signed log catches it.
    plain = tampered(logs, "plain", forge_append)
    assert len(assert_intact(bins, plain)) == 9
    signed = tampered(logs, "signed", forge_append)
    n = len(lines_of(logs["signed"]))
    assert len(assert_intact(bins, signed)) == n + 1              # the chain alone holds
    assert_broken(bins, signed, n + 1, f"not signed: 1 line after the last checkpoint (line {n})",
                  key=logs["pub"])
    # Dropping the closing checkpoint leaves an unsigned tail as well.
    cut = tampered(logs, "signed", joined(lambda raw: raw[:-1]))
    evs = assert_intact(bins, cut)
    last_cp = max(i for i, e in enumerate(evs, 1) if e["type"] == "audit.checkpoint")
    k = len(evs) - last_cp
    assert_broken(bins, cut, last_cp + 1, f"not signed: {k} line{'s' * (k > 1)} after the last "
                  f"checkpoint (line {last_cp})", logs["pub"])


def resign(raw, priv, pub, kid=None):
    """Rechain every line after the header; sign each checkpoint with PRIV."""
    kid = kid or key_id(pub)
    out = raw[:1]
    for line in raw[1:]:
        ev = json.loads(line)
        ev["prev"] = sha(out[-1])
        if ev["type"] == "audit.checkpoint":
            ev.update(head=ev["prev"], key_id=kid,
                      sig=sign(priv, SIGN_FMT.format(ev["seq"] - 1, ev["prev"])))
        out.append(dumps(ev))
    return b"".join(l + b"\n" for l in out)


@pytest.mark.parametrize("what", ["end", "start"])
def test_a_second_end_or_start_is_flagged(bins, logs, what):
    """Chained well, signed or not: a run's second run.end (or run.start) contradicts it."""
    raw = lines_of(logs["plain"])
    first = json.loads(raw[1])
    end_line = next(i for i, l in enumerate(raw, 1)
                    if json.loads(l)["type"] == f"run.{what}" and json.loads(l)["run"] ==
                    first["run"])

    def inject(raw):
        last = json.loads(raw[-1])
        ev = {"seq": last["seq"] + 1, "ts": last["ts"], "run": first["run"],
              "type": f"run.{what}", "prev": sha(raw[-1]), "reason": "killed", "status": 137}
        return b"".join(l + b"\n" for l in raw + [dumps(ev)])

    path = tampered(logs, "plain", inject)
    assert_broken(bins, path, len(raw) + 1, f"second run.{what} of run {first['run'][:8]} (the "
                  f"first is line {end_line})")
    # In the middle, re-chained after it, the same.
    def middle(raw):
        out = raw[:4]
        for line in [dumps({**json.loads(raw[2]), "reason": "killed"})] + raw[4:]:
            ev = json.loads(line)
            ev.update(seq=json.loads(out[-1])["seq"] + 1, prev=sha(out[-1]))
            out.append(dumps(ev))
        return b"".join(l + b"\n" for l in out)

    if what == "end":
        path = tampered(logs, "plain", middle)
        assert_broken(bins, path, 5, f"second run.end of run {first['run'][:8]} (the first is "
                      f"line 3)")


def test_resigned_log_fails_under_the_real_key(bins, logs):
    evs = assert_intact(bins, logs["signed"], logs["pub"])
    first_cp = next(i for i, e in enumerate(evs) if e["type"] == "audit.checkpoint") + 1
    end = next(i for i, e in enumerate(evs) if e["type"] == "run.end") + 1

    def forged(raw, kid=None):
        assert b'"stdout_bytes":4,' in raw[end - 1]
        raw[end - 1] = raw[end - 1].replace(b'"stdout_bytes":4,', b'"stdout_bytes":0,')
        return resign(raw, logs["other"], logs["other_pub"], kid)

    path = tampered(logs, "signed", forged)
    assert_intact(bins, path, logs["other_pub"])    # a well-formed forgery under its own key
    assert_broken(bins, path, first_cp, "checkpoint signed by another key", logs["pub"])
    path = tampered(logs, "signed", lambda raw: forged(raw, key_id(logs["pub"])))
    assert_broken(bins, path, first_cp, "bad signature", logs["pub"])


# --- concurrency, secrets, show, signatures -------------------------------------


def test_concurrent_appends_form_one_chain(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    procs = [subprocess.Popen(cordon.argv("run", "--audit", log, "--", "sh", "-c", "echo $$"),
                              env=cordon.ident.env(), cwd=cordon.tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True)
             for _ in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.strip().isdigit(), (out, err)
    evs = assert_intact(bins, log)
    assert len(evs) == 1 + 16
    runs = {e["run"] for e in evs[1:]}
    assert len(runs) == 8
    for run in runs:
        mine = [(e["seq"], e["type"]) for e in of_run(evs, run)]
        assert [t for _, t in mine] == ["run.start", "run.end"] and mine[0][0] < mine[1][0], mine


def test_secret_values_never_in_the_log(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    passed = "passed-secret-" + secrets.token_hex(8)
    set_ = "set-secret-" + secrets.token_hex(8)
    r = cordon.run(["sh", "-c", 'echo "$CORDON_PASSED $CORDON_SET"; echo "$CORDON_SET" >&2'],
                   "-e", "CORDON_PASSED", "-e", f"CORDON_SET={set_}", "--audit", log,
                   env={"CORDON_PASSED": passed})
    assert r.status == 0 and r.out == f"{passed} {set_}\n", r
    evs = assert_intact(bins, log)
    data = log.read_bytes()
    for value in (passed, set_, passed[-16:], set_[-16:]):
        assert value.encode() not in data, f"{value} is in the audit log"
    assert evs[1]["secrets"] == []


def test_show(cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    a = cordon.run(["echo", "hello there"], "--audit", log)
    b = cordon.run(["sleep", "100"], "-t", "1s", "--audit", log)
    assert (a.status, b.status) == (0, 124)
    ida, idb = a.result["run_id"], b.result["run_id"]
    raw = lines_of(log)
    evs = [json.loads(l) for l in raw]

    def show(*args):
        r = cli(bins, "audit", "show", log, *args)
        assert r.returncode == 0 and not r.stderr, r
        return r.stdout

    out = show()
    assert out.startswith(f"log opened on {os.uname().nodename} "), out
    assert f"run {ida[:8]} " in out and f"run {idb[:8]} " in out, out
    assert "$ echo 'hello there'" in out and "$ sleep 100" in out, out
    assert f"uid {cordon.ident.uid}" in out, out
    assert "end exited 0 in " in out and "end timeout (status 124) in " in out, out
    assert "limit wall fired (timeout)" in out, out
    assert out.index(ida[:8]) < out.index("end exited") < out.index(idb[:8]), out
    only_b = show("--run", idb[:8])
    assert idb[:8] in only_b and ida[:8] not in only_b and "hello there" not in only_b, only_b
    assert "end timeout" in only_b and "limit wall fired" in only_b, only_b
    # --json passes exactly the matching lines through, byte for byte.
    for args, keep in [(["--run", ida[:6]], lambda e: e["run"] == ida),
                       (["--run", idb], lambda e: e["run"] == idb),
                       (["--type", "limit.fired"], lambda e: e["type"] == "limit.fired"),
                       (["--type", "run.end"], lambda e: e["type"] == "run.end"),
                       (["--type", "run"], lambda e: e["type"] in ("run.start", "run.end")),
                       (["--run", idb, "--type", "run.start"],
                        lambda e: e["run"] == idb and e["type"] == "run.start"),
                       ([], lambda e: True)]:
        want = b"".join(l + b"\n" for l, e in zip(raw, evs) if keep(e))
        assert want and show(*args, "--json").encode() == want, args
    fired = show("--type", "limit.fired")
    assert "limit wall fired (timeout)" in fired and "end exited" not in fired, fired


def test_signed_log(cordon, bins):
    d = cordon.hostdir("audit")
    key, pub = ed25519(d, "sign", cordon.ident)
    _, other_pub = ed25519(d, "other")
    log = d / "audit.log"
    pol = audit_policy(d, log, key, every=2)
    for cmd, opts in ((["true"], []), (["sleep", "100"], ["-t", "1s"]), (["false"], [])):
        cordon.run(cmd, "-p", pol, *opts)
    evs = assert_intact(bins, log, pub)       # "..., N signed checkpoints"
    raw = lines_of(log)
    cps = [i for i, e in enumerate(evs) if e["type"] == "audit.checkpoint"]
    assert len(cps) >= 4 and cps[-1] == len(evs) - 1, [e["type"] for e in evs]
    for i in cps:
        cp = evs[i]
        assert cp["run"] is None and cp["head"] == sha(raw[i - 1]), cp
        assert (cp["signed_seq"], cp["key_id"]) == (i - 1, key_id(pub)), cp
        assert evs[i - 1]["type"] != "audit.checkpoint"
    # The last signature checks out with openssl too, not only with cordon.
    with tempfile.TemporaryDirectory() as t:
        msg, sig = pathlib.Path(t, "msg"), pathlib.Path(t, "sig")
        msg.write_text(SIGN_FMT.format(evs[-1]["signed_seq"], evs[-1]["head"]))
        sig.write_bytes(base64.b64decode(evs[-1]["sig"]))
        v = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin",
                            "-in", msg, "-sigfile", sig], capture_output=True, text=True)
        assert v.returncode == 0, v
    assert_intact(bins, log)                  # no key: the chain alone
    assert_broken(bins, log, cps[0] + 1, "checkpoint signed by another key", other_pub)
