"""
Governance of the exceptions (issue 15): signed policies and an expected
digest. Every refusal is exit 125 with one line, and nothing ran: the
command would have left a file in a host directory and a run in the log.
"""

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import assert_cordon_refused


def keypair(d, name):
    key, pub = d / f"{name}.pem", d / f"{name}.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    os.chmod(key, 0o644)  # the ordinary user signs too
    os.chmod(pub, 0o644)
    return key, pub


def level_keys(cordon):
    """The suite's level written in the policy: the --level (and --accel) the suite adds
    to every run then changes nothing, where under a signature or break-glass a
    weaker level than the policy's would be refused."""
    keys = f"isolation: {cordon.level}\n"
    if cordon.level == "microvm":
        keys += f"microvm:\n  accel: {os.environ.get('CORDON_TEST_ACCEL', 'tcg')}\n"
    return keys


@pytest.fixture
def gov(cordon):
    """Keys, a policy whose command leaves a trace, and the place of that trace."""
    keys = cordon.hostdir("keys")
    out = cordon.hostdir("out", mode=0o777)
    good, good_pub = keypair(keys, "good")
    evil, evil_pub = keypair(keys, "evil")
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"

    class G:
        pass

    g = G()
    g.keys, g.out, g.log = keys, out, log
    g.good, g.good_pub, g.evil, g.evil_pub = good, good_pub, evil, evil_pub
    g.trace = out / "ran"

    def policy(extra=""):
        p = cordon.hostdir() / "policy.yaml"
        p.write_text(f"version: 1\n{level_keys(cordon)}filesystem:\n  read_write: ['{out}:/out']\n"
                     f"audit:\n  file: {log}\n{extra}")
        os.chmod(p, 0o666)
        os.chmod(p.parent, 0o777)
        return p

    g.policy = policy
    return g


def run_touch(cordon, policy, *opts, env=None):
    return cordon.raw("run", "-p", policy, *opts, "--", "/bin/sh", "-c", "touch /out/ran",
                      env=env)


def assert_nothing_ran(g):
    assert not g.trace.exists(), "the command ran"
    if g.log.exists():
        assert "run.start" not in g.log.read_text(), "a run was recorded"


def sign(cordon, policy, key):
    r = cordon.raw("policy", "sign", policy, "--key", key)
    assert r.status == 0, r
    return r.out.split("key_id ")[1].strip()


def events(log, kind):
    return [json.loads(line) for line in log.read_text().splitlines()
            if json.loads(line)["type"] == kind]


REFUSALS = [
    # (name, sign with, edit after signing, message words)
    ("unsigned", None, False, ["unsigned policy", "policy.yaml.sig"]),
    ("wrong key", "evil", False, ["not signed by a trusted key"]),
    ("edited after signing", "good", True, ["signs another version"]),
]


@pytest.mark.parametrize("name,signer,edit,words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_require_signature_refuses(cordon, gov, name, signer, edit, words):
    p = gov.policy(f"require_signature: {gov.good_pub}\n")
    if signer:
        sign(cordon, p, getattr(gov, signer))
    if edit:
        p.write_text(p.read_text().replace("version: 1", "version: 1\nlimits:\n  memory: 2G"))
    r = run_touch(cordon, p)
    assert_cordon_refused(r, *words)
    assert_nothing_ran(gov)


def test_signed_policy_runs_and_names_its_signer(cordon, gov):
    p = gov.policy(f"require_signature: {gov.good_pub}\n")
    key_id = sign(cordon, p, gov.good)
    r = cordon.raw("policy", "verify", p, "--key", gov.good_pub)
    assert r.status == 0 and key_id in r.out, r
    r = cordon.raw("policy", "verify", p, "--key", gov.evil_pub)
    assert_cordon_refused(r, "not signed by a trusted key")
    r = run_touch(cordon, p)
    assert r.status == 0, r
    assert gov.trace.exists()
    (start,) = events(gov.log, "run.start")
    assert start["policy_signer"] == key_id


@pytest.mark.parametrize("signer", [None, "evil", "good"])
def test_trust_dir_applies_to_every_policy(cordon, gov, signer):
    trust = cordon.hostdir("trust.d")
    (trust / "good.pem").write_bytes(gov.good_pub.read_bytes())
    env = {"CORDON_TRUST_DIR": str(trust)}
    p = gov.policy()
    if signer:
        sign(cordon, p, getattr(gov, signer))
    r = run_touch(cordon, p, env=env)
    if signer == "good":
        assert r.status == 0, r
        return
    assert_cordon_refused(r, "unsigned policy" if signer is None else "not signed by a trusted")
    assert_nothing_ran(gov)
    # Flags alone are no signed policy either.
    r = cordon.raw("run", "--rw", f"{gov.out}:/out", "--", "/bin/sh", "-c", "touch /out/ran",
                   env=env)
    assert_cordon_refused(r, "requires a signed policy")
    assert_nothing_ran(gov)


# The host's trust directory, seen by the run's cordon alone: /etc overlaid in a
# mount namespace of its own, with /etc/cordon/trust.d holding the good key.
HOST_TRUST = ('mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" '
              '/etc && shift && exec "$@"')


@pytest.mark.parametrize("trusted,signer", [("empty", None), ("evil", None), ("evil", "evil"),
                                            ("evil", "good")])
def test_the_callers_trust_dir_does_not_replace_the_hosts(cordon, gov, trusted, signer):
    """$CORDON_TRUST_DIR asks signatures of a caller's own runs; where the host's
    /etc/cordon/trust.d holds keys, it can neither lift that mandate nor add a key."""
    if os.geteuid() != 0:
        pytest.skip("overlays /etc in a mount namespace: the suite runs as root in CI")
    etc = cordon.hostdir("etc", mode=0o755)
    trust = etc / "upper" / "cordon" / "trust.d"
    trust.mkdir(parents=True)
    (etc / "work").mkdir()
    (trust / "good.pem").write_bytes(gov.good_pub.read_bytes())
    for d in (trust, trust.parent, trust.parent.parent):
        os.chmod(d, 0o755)
    os.chmod(trust / "good.pem", 0o644)
    mine = cordon.hostdir(f"mine-{trusted}", mode=0o755)
    if trusted == "evil":
        (mine / "evil.pem").write_bytes(gov.evil_pub.read_bytes())
    p = gov.policy()
    if signer:
        sign(cordon, p, getattr(gov, signer))
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", HOST_TRUST, "sh", str(etc),
            *cordon.argv("run", "-p", p, "--", "/bin/sh", "-c", "touch /out/ran")]
    r = cordon._exec(argv, None, None, {"CORDON_TRUST_DIR": str(mine)}, 60, None, ())
    if signer == "good":
        assert r.status == 0, r
        assert gov.trace.exists()
        return
    assert_cordon_refused(r, "unsigned policy" if signer is None else "not signed by a trusted")
    assert_nothing_ran(gov)


def test_expect_policy_digest(cordon, gov):
    p = gov.policy()
    r = cordon.raw("policy", "check", p)
    digest = json.loads(r.out)["digest"]
    # A flag changes the effective policy: refused.
    r = run_touch(cordon, p, "--memory", "512M", "--expect-policy-digest", digest)
    assert_cordon_refused(r, "digest", digest)
    assert_nothing_ran(gov)
    r = run_touch(cordon, p, "--expect-policy-digest", "0" * 64)
    assert_cordon_refused(r, "digest")
    assert_nothing_ran(gov)
    r = run_touch(cordon, p, "--expect-policy-digest", digest)
    assert r.status == 0, r
    (start,) = events(gov.log, "run.start")
    assert start["policy_digest"] == digest


# --- break-glass -------------------------------------------------------------

BG_POLICY = "limits:\n  best_effort: [memory]\nbreak_glass:\n  may_relax: [limits.memory, network.allow]\n  max_duration: 1h\n"


def test_break_glass_run_is_marked_in_every_event(cordon, gov):
    p = gov.policy(BG_POLICY)
    r = run_touch(cordon, p, "--break-glass", "incident 42", "--until", "10m",
                  "--relax", "limits.memory=2G")
    assert r.status == 0, r
    evs = [json.loads(line) for line in gov.log.read_text().splitlines()][1:]
    types = [e["type"] for e in evs]
    assert types == ["breakglass.start", "run.start", "run.end", "breakglass.end"], types
    for e in evs:
        bg = e["break_glass"]
        assert bg["reason"] == "incident 42"
        assert bg["relaxed"] == {"limits.memory": ["2G"]}
    start = evs[1]
    assert start["limits"]["memory"] == 2 << 30
    # The window is enforced: the wall limit is cut to it.
    assert 0 < start["limits"]["wall_ms"] <= 600_000
    assert cordon.raw("audit", "verify", gov.log).status == 0


BG_REFUSALS = [
    ("key not relaxable", ["--until", "10m", "--relax", "limits.pids=9999"],
     ["limits.pids", "not in break_glass.may_relax"]),
    ("longer than max", ["--until", "2h"], ["longer than break_glass.max_duration"]),
    ("expired", ["--until", "2020-01-01T00:00:00Z"], ["window ended"]),
    ("no until", [], ["needs --until"]),
]


@pytest.mark.parametrize("name,opts,words", BG_REFUSALS, ids=[r[0] for r in BG_REFUSALS])
def test_break_glass_refusals(cordon, gov, name, opts, words):
    p = gov.policy(BG_POLICY)
    r = run_touch(cordon, p, "--break-glass", "why", *opts)
    assert_cordon_refused(r, *words)
    assert_nothing_ran(gov)


def test_break_glass_without_policy_section_is_refused(cordon, gov):
    r = run_touch(cordon, gov.policy(), "--break-glass", "why", "--until", "5m")
    assert_cordon_refused(r, "no break_glass.max_duration")
    assert_nothing_ran(gov)
    r = run_touch(cordon, gov.policy(BG_POLICY), "--relax", "limits.memory=2G")
    assert_cordon_refused(r, "need --break-glass")
    assert_nothing_ran(gov)


def test_break_glass_approval_token(cordon, gov):
    p = gov.policy(BG_POLICY + f"  approval_key: {gov.good_pub}\n")
    r = run_touch(cordon, p, "--break-glass", "incident 7", "--until", "5m")
    assert_cordon_refused(r, "requires a signed approval")
    assert_nothing_ran(gov)

    def token(key, reason="incident 7", until="10m"):
        r = cordon.raw("policy", "approve", p, "--key", key, "--reason", reason, "--until", until)
        assert r.status == 0, r
        t = cordon.hostdir() / "token.json"
        t.write_text(r.out)
        os.chmod(t, 0o644)
        return t

    for tok, words in [(token(gov.evil), ["not signed by break_glass.approval_key"]),
                       (token(gov.good, reason="other"), ["another reason"]),
                       (token(gov.good, until="2m"), ["later than the approval allows"])]:
        r = run_touch(cordon, p, "--break-glass", "incident 7", "--until", "5m",
                      "--approval", tok)
        assert_cordon_refused(r, *words)
        assert_nothing_ran(gov)
    # A token that has expired by the time it is used.
    old = token(gov.good, until="1s")
    import time
    time.sleep(2.1)
    r = run_touch(cordon, p, "--break-glass", "incident 7", "--until", "1s", "--approval", old)
    assert_cordon_refused(r)
    assert_nothing_ran(gov)

    good = token(gov.good)
    r = run_touch(cordon, p, "--break-glass", "incident 7", "--until", "5m", "--approval", good)
    assert r.status == 0, r
    (start,) = events(gov.log, "breakglass.start")
    key_id = json.loads(good.read_text())["key_id"]
    assert start["break_glass"]["approved_by"] == key_id


# --- a signature means what it says (issue 22) ------------------------------------
#
# Under a signed policy what a caller passes may only tighten it: cordon run's
# flags, libcordon's setters, the daemon's call and session options. Every
# refusal is 125 (or JSON-RPC -32602) naming the flag and the key, nothing ran
# (OTHER, a host directory no flag may open, stays empty; no run.start), and a
# run.refused event says why. Binds are at their own paths, so every level runs them.


def own_policy(cordon, gov, signed=True, filesystem="", extra="", name="own.yaml"):
    """A policy of the suite's level binding OUT at its own path, logging to gov.log;
    signed by gov.good (require_signature) unless SIGNED is false."""
    p = cordon.hostdir() / name
    p.write_text(f"version: 1\n{level_keys(cordon)}"
                 + (f"require_signature: {gov.good_pub}\n" if signed else "")
                 + f"filesystem:\n  read_write: ['{gov.out}']\n{filesystem}"
                 f"limits:\n  memory: 512M\n  pids: 2000\n  wall: 1m\n"
                 f"  best_effort: [memory, pids, cpu]\naudit:\n  file: {gov.log}\n{extra}")
    os.chmod(p, 0o644)
    if signed:
        sign(cordon, p, gov.good)
    return p


@pytest.fixture
def other(cordon):
    return cordon.hostdir("other", mode=0o777)


def touch_both(cordon, gov, policy, other, *opts, env=None):
    """Run, under POLICY, a command that writes OUT/ran and, if it can, OTHER/x."""
    return cordon.raw("run", "-p", policy, *opts, "--", "/bin/sh", "-c",
                      f"touch {other}/x; touch {gov.out}/ran", env=env)


def assert_refused_and_recorded(cordon, gov, other, r, *words):
    """125 naming WORDS; no trace on the host, no run; the last event a run.refused
    saying so; the log still verifies."""
    assert_cordon_refused(r, *words)
    assert list(other.iterdir()) == [], "a refused flag opened a host directory"
    assert_nothing_ran(gov)
    refused = events(gov.log, "run.refused")[-1]
    assert refused["run"] is None and refused["front_end"] == "run", refused
    assert refused["reason"] == r.err.strip()[len("cordon: "):], refused
    assert refused["uid"] == cordon.ident.uid
    assert cordon.raw("audit", "verify", gov.log).status == 0
    return refused


RELAXING = {
    # name: (the flags, given OTHER and the log's directory; the flag; the key)
    "rw": (lambda o, d: ["--rw", o], "--rw", "filesystem.read_write"),
    "ro": (lambda o, d: ["--ro", o], "--ro", "filesystem.read_only"),
    "workspace": (lambda o, d: ["-w", o], "--workspace", "filesystem.workspace"),
    "memory unlimited": (lambda o, d: ["--memory", "unlimited"], "--memory", "limits.memory"),
    "memory larger": (lambda o, d: ["-m", "1G"], "--memory", "limits.memory"),
    "pids unlimited": (lambda o, d: ["--pids", "unlimited"], "--pids", "limits.pids"),
    "longer timeout": (lambda o, d: ["--timeout", "1h"], "--timeout", "limits.wall"),
    "best effort": (lambda o, d: ["--best-effort", "all"], "--best-effort",
                    "limits.best_effort"),
    "larger tmp": (lambda o, d: ["--tmp-size", "1G"], "--tmp-size", "filesystem.tmp_size"),
    "allow": (lambda o, d: ["--allow", "example.com"], "--allow", "network.allow"),
    "allow private": (lambda o, d: ["--allow-private", "127.0.0.0/8"], "--allow-private",
                      "network.allow_private"),
    "resolve": (lambda o, d: ["--resolve", "example.com=127.0.0.2"], "--resolve",
                "network.resolve"),
    "gateway": (lambda o, d: ["--net", "gateway"], "--net", "network.mode"),
    "secret": (lambda o, d: ["--secret", "TOK=env:HOME@example.com"], "--secret", "secrets"),
    "env pass": (lambda o, d: ["-e", "HOME"], "--env", "env.pass"),
    "env set": (lambda o, d: ["-e", "X=value-withheld"], "--env", "env.set"),
    "another log": (lambda o, d: ["--audit", f"{d}/elsewhere.jsonl"], "--audit", "audit.file"),
}


@pytest.mark.parametrize("name", list(RELAXING))
def test_signed_policy_refuses_a_relaxing_flag(cordon, gov, other, name):
    flags, flag, key = RELAXING[name]
    p = own_policy(cordon, gov)
    r = touch_both(cordon, gov, p, other, *flags(other, gov.log.parent))
    refused = assert_refused_and_recorded(cordon, gov, other, r, flag, key,
                                          "of a signed policy", f"--relax {key}=")
    assert refused["policy_signer"] and refused["policy_file"] == str(p), refused
    assert not (gov.log.parent / "elsewhere.jsonl").exists()
    assert "value-withheld" not in gov.log.read_text()  # an env value may be a credential


def test_signed_policy_refuses_a_weaker_level(cordon, gov, other):
    """microvm signed: namespace, process, or a weaker fallback are refused (before any
    level is asked whether it runs here); microvm itself is not weaker."""
    p = cordon.hostdir() / "vm.yaml"
    p.write_text(f"version: 1\nisolation: microvm\nrequire_signature: {gov.good_pub}\n"
                 f"audit:\n  file: {gov.log}\n")
    sign(cordon, p, gov.good)
    for level in ("namespace", "process", "microvm,process"):
        r = touch_both(cordon, gov, p, other, "--level", level)
        assert_refused_and_recorded(cordon, gov, other, r, "--level", "isolation",
                                    "of a signed policy")


TIGHTENING = {
    "smaller memory": ["--memory", "256M"],
    "fewer pids": ["--pids", "1000"],
    "shorter timeout": ["--timeout", "30s"],
    "less cpu": ["--cpu", "20s"],
    "smaller tmp": ["--tmp-size", "8M"],
    "deny": ["--deny", "example.com"],
    "no network": ["--net", "none"],
    "best effort it has": ["--best-effort", "memory"],
    "the same memory": ["--memory", "512M"],
}


@pytest.mark.parametrize("name", list(TIGHTENING))
def test_signed_policy_takes_a_tightening_flag(cordon, gov, other, name):
    p = own_policy(cordon, gov)
    digest = json.loads(cordon.raw("policy", "check", p).out)["digest"]
    opts = TIGHTENING[name]
    r = touch_both(cordon, gov, p, other, *opts)
    assert r.status == 0, r
    assert (gov.out / "ran").exists() and not (other / "x").exists()
    (start,) = events(gov.log, "run.start")
    assert start["policy_signer"], start
    # The file's digest (as policy check prints it) beside the effective one, and the flags.
    assert start["policy_file_digest"] == digest, start
    flags = [f for f in start.get("policy_flags", []) if f["flag"] not in ("--level", "--accel")]
    assert flags == [{"flag": f, "value": v} for f, v in zip(opts[::2], opts[1::2])], start
    if name == "smaller memory":
        assert start["limits"]["memory"] == 256 << 20 and start["policy_digest"] != digest


def test_no_network_tightens_a_policy_that_allows_hosts(cordon, gov):
    """--net none over a (signed) policy with allow rules and a secret: no network at all,
    the rules and the secret moot (it was refused: network.allow needs mode gateway)."""
    p = gov.policy(f"require_signature: {gov.good_pub}\nnetwork:\n  allow: [example.com]\n"
                   "secrets:\n  - name: T\n    from: env:PATH\n    hosts: [api.example.com]\n")
    sign(cordon, p, gov.good)
    r = cordon.raw("run", "-p", p, "--net", "none", "--", "/bin/sh", "-c",
                   'touch /out/ran; test -z "${T+set}"')
    assert r.status == 0, r
    assert gov.trace.exists()
    (start,) = events(gov.log, "run.start")
    assert start["network"]["mode"] == "none" and start["network"]["allow"] == [], start
    assert start["secrets"] == [] and start["policy_signer"], start


def test_break_glass_relaxes_only_by_relax(cordon, gov, other):
    """A signed policy's break-glass relaxes what may_relax lists, by --relax alone: an
    ordinary flag riding along is refused, as is a --relax of another key."""
    p = own_policy(cordon, gov, extra="break_glass:\n  may_relax: [limits.memory, "
                                      "filesystem.read_write]\n  max_duration: 1h\n")
    bg = ["--break-glass", "incident 9", "--until", "10m"]
    for opts, words in [
        (["--relax", "limits.memory=1G", "--memory", "2G"], ["--memory", "limits.memory"]),
        (["--relax", "limits.memory=1G", "--rw", str(other)], ["--rw", "filesystem.read_write"]),
        (["--relax", "limits.memory=1G", "--pids", "unlimited"], ["--pids", "limits.pids"]),
        (["--relax", "limits.pids=unlimited"], ["limits.pids", "not in break_glass.may_relax"]),
    ]:
        r = touch_both(cordon, gov, p, other, *bg, *opts)
        assert_refused_and_recorded(cordon, gov, other, r, *words)
    assert "breakglass.start" not in gov.log.read_text()
    # --relax of a listed key does relax it: the bind is there, and the record says so.
    r = touch_both(cordon, gov, p, other, *bg, "--relax", "limits.memory=1G", "--relax",
                   f"filesystem.read_write={other}")
    assert r.status == 0, r
    assert (other / "x").exists() and (gov.out / "ran").exists()
    (start,) = events(gov.log, "run.start")
    assert start["break_glass"]["relaxed"] == {"limits.memory": ["1G"],
                                               "filesystem.read_write": [str(other)]}, start
    assert start["limits"]["memory"] == 1 << 30 and start["policy_signer"], start
    assert cordon.raw("audit", "verify", gov.log).status == 0


def test_unsigned_break_glass_flags_may_only_tighten(cordon, gov, other):
    p = own_policy(cordon, gov, signed=False, extra="break_glass:\n  may_relax: "
                                                    "[limits.memory]\n  max_duration: 1h\n")
    bg = ["--break-glass", "incident 10", "--until", "10m", "--relax", "limits.memory=1G"]
    r = touch_both(cordon, gov, p, other, *bg, "--rw", other)
    assert_refused_and_recorded(cordon, gov, other, r, "--rw", "filesystem.read_write",
                                "a break-glass run relaxes only by --relax")
    r = touch_both(cordon, gov, p, other, *bg, "--timeout", "30s")
    assert r.status == 0 and (gov.out / "ran").exists(), r


def test_every_refusal_leaves_a_record(cordon, gov, other):
    """One run.refused per refused run, with its reason, and the log still verifies:
    a signature that does not hold, an unsigned policy under trust, a digest
    mismatch, a refused break-glass, a relaxing flag, a level that cannot run."""
    signed = own_policy(cordon, gov, name="signed.yaml")
    edited = own_policy(cordon, gov, name="edited.yaml")
    edited.write_text(edited.read_text().replace("pids: 2000", "pids: 6400"))
    plain = own_policy(cordon, gov, signed=False, name="plain.yaml")
    trust = cordon.hostdir("trust.d")
    (trust / "good.pem").write_bytes(gov.good_pub.read_bytes())
    ws = cordon.hostdir("ws")
    cases = [
        (edited, [], None, "signs another version"),
        (plain, [], {"CORDON_TRUST_DIR": str(trust)}, "unsigned policy"),
        (signed, ["--expect-policy-digest", "0" * 64], None, "digest"),
        (signed, ["--break-glass", "why", "--until", "5m"], None, "no break_glass.max_duration"),
        (signed, ["--memory", "unlimited"], None, "relaxes limits.memory"),
        (plain, ["--level", "process", "--workspace-mode", "overlay", "-w", ws], None,
         "overlay needs the namespace level"),
    ]
    for policy, opts, env, words in cases:
        r = touch_both(cordon, gov, policy, other, *opts, env=env)
        assert_cordon_refused(r, words)
    assert list(other.iterdir()) == [] and not (gov.out / "ran").exists()
    assert_nothing_ran(gov)
    refused = events(gov.log, "run.refused")
    assert [words in e["reason"] for (_, _, _, words), e in zip(cases, refused)] == \
        [True] * len(cases), refused
    assert refused[1]["policy_file"] == str(plain) and "policy_signer" not in refused[1]
    # The level's refusal is the run's: its id, level and effective digest.
    assert refused[-1]["run"] and refused[-1]["level"] == "process", refused[-1]
    r = cordon.raw("audit", "verify", gov.log)
    assert r.status == 0 and "intact" in r.out, r
    shown = cordon.raw("audit", "show", gov.log).out
    assert shown.count(" refused ") == len(cases), shown


LIBCORDON = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
class Err(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("errnum", ctypes.c_int), ("message", ctypes.c_char * 256)]
class Call(ctypes.Structure):
    _fields_ = [("argv", ctypes.POINTER(ctypes.c_char_p)), ("stdin_fd", ctypes.c_int),
                ("stdout_fd", ctypes.c_int), ("stderr_fd", ctypes.c_int),
                ("signal_fd", ctypes.c_int)]
lib.cordon_policy_load.restype = lib.cordon_policy_new.restype = ctypes.c_void_p
e, out = Err(), {}
def rec(name, rc):
    out[name] = [rc, e.message.decode()]
    e.message = b""
p = ctypes.c_void_p(lib.cordon_policy_load(sys.argv[2].encode(), ctypes.byref(e)))
for key, value in json.loads(sys.argv[3]):
    rec(key + "=" + value, lib.cordon_policy_set(p, key.encode(), value.encode(), ctypes.byref(e)))
rec("bind", lib.cordon_policy_add_bind(p, sys.argv[4].encode(), 1, ctypes.byref(e)))
run, res = ctypes.c_void_p(), ctypes.c_void_p()
call = Call((ctypes.c_char_p * 4)(b"/bin/sh", b"-c", sys.argv[5].encode(), None), -1, 1, 2, -1)
rc = lib.cordon_prepare(p, ctypes.byref(run), ctypes.byref(e))
rc = rc or lib.cordon_start(run, ctypes.byref(call), ctypes.byref(e))
rc = rc or lib.cordon_wait(run, ctypes.byref(res), ctypes.byref(e))
rec("run", rc)
out["exit"] = lib.cordon_result_exit_code(res) if rc == 0 else None
lib.cordon_result_free(res)
lib.cordon_release(run)
q = ctypes.c_void_p(lib.cordon_policy_new(ctypes.byref(e)))
rec("unsigned", lib.cordon_prepare(q, ctypes.byref(ctypes.c_void_p()), ctypes.byref(e)))
print(json.dumps(out))
"""


def test_libcordon_may_only_tighten_a_signed_policy(cordon, gov, other):
    from conftest import BUILD
    lib = cordon.hostdir("lib") / "libcordon.so.0"
    shutil.copy2(BUILD / "libcordon.so.0", lib)
    os.chmod(lib, 0o755)
    trust = cordon.hostdir("trust.d")
    (trust / "good.pem").write_bytes(gov.good_pub.read_bytes())
    p = own_policy(cordon, gov)
    sets = [["limits.memory", "unlimited"], ["network.allow", "example.com"],
            ["limits.memory", "128M"]]
    # The library finds the guest's initramfs beside its process's executable
    # (python here) or where cordon is installed: neither, so it is named.
    env = {"CORDON_TRUST_DIR": str(trust),
           "CORDON_GUEST_INITRAMFS": str(pathlib.Path(cordon.bin).parent / "cordon-guest.cpio")}
    # A sanitizer build's library needs its runtimes first in python (whose own leaks
    # are not ours to report).
    ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
    runtimes = [l.split("=>")[1].split()[0] for l in ldd.splitlines()
                if "=>" in l and ("libasan" in l or "libubsan" in l)]
    if runtimes:
        env.update(LD_PRELOAD=" ".join(runtimes), ASAN_OPTIONS="detect_leaks=0")
    r = subprocess.run(cordon.ident.wrap(["/usr/bin/python3", "-c", LIBCORDON, str(lib), str(p),
                                          json.dumps(sets), str(other),
                                          f"touch {other}/x; touch {gov.out}/ran"]),
                       env=cordon.ident.env(env),
                       capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r
    out = json.loads(r.stdout.splitlines()[-1])
    for key in ("limits.memory=unlimited", "network.allow=example.com"):
        rc, msg = out[key]
        assert rc == -1 and "relaxes " + key.split("=")[0] in msg, out
    assert out["bind"][0] == -1 and "filesystem.read_write" in out["bind"][1], out
    assert out["limits.memory=128M"] == [0, ""], out
    # The run happened under the tightened policy, without the refused bind.
    assert out["run"] == [0, ""] and out["exit"] == 0, out
    assert list(other.iterdir()) == [] and (gov.out / "ran").exists()
    (start,) = events(gov.log, "run.start")
    assert start["limits"]["memory"] == 128 << 20 and start["policy_signer"], start
    # With keys in the trust directory an unsigned policy does not run either.
    assert out["unsigned"][0] == -1 and "requires a signed policy" in out["unsigned"][1], out


def test_daemon_under_a_signed_policy_refuses_relaxing_call_options(cordon, gov, other):
    from serve_util import Daemon
    d = Daemon(cordon, "-p", own_policy(cordon, gov))
    c = d.connect()
    touch = ["/bin/sh", "-c", f"touch {other}/x; touch {gov.out}/ran"]
    try:
        for params, words in [({"timeout": 3600}, ['"timeout"', "limits.wall"]),
                              ({"env": {"X": "value-withheld"}}, ['"env" X=...', "env.set"])]:
            ans = c.call("run", {"argv": touch, **params})
            err = ans.get("error", {})
            assert err.get("code") == -32602, ans
            assert all(w in err["message"] for w in words), ans
            assert "of a signed policy" in err["message"], ans
        ans = c.call("session.create", {"workspace_commit": "always"})
        assert ans["error"]["code"] == -32602 and "workspace.commit" in ans["error"]["message"]
        # Two params in one request: which would run is not the daemon's to guess.
        c.send_raw(b'{"jsonrpc":"2.0","id":77,"method":"run","params":{"argv":["/bin/sh","-c",'
                   + json.dumps(f"touch {other}/x").encode() + b']},"params":{"argv":["true"]}}\n')
        ans = c.answer()
        assert ans["error"]["code"] == -32700 and "duplicate" in ans["error"]["message"], ans
        assert list(other.iterdir()) == [] and not (gov.out / "ran").exists()
        # What tightens, or is no key (the call's files, like its stdin), runs.
        ans = c.call("run", {"argv": ["/bin/sh", "-c", f"cat a.txt; touch {gov.out}/ran"],
                             "timeout": 30, "files": {"a.txt": "from the call"}})
        if cordon.level == "microvm":  # whose guest places none yet (test_pool's)
            ans = c.call("run", {"argv": ["/bin/sh", "-c", f"touch {gov.out}/ran"],
                                 "timeout": 30})
        assert ans["result"]["exit_code"] == 0, ans
        if cordon.level != "microvm":
            assert ans["result"]["stdout"] == "from the call", ans
    finally:
        c.close()
        d.stop()
    assert list(other.iterdir()) == [] and (gov.out / "ran").exists()
    refused = events(gov.log, "run.refused")
    assert [e["front_end"] for e in refused] == ["run", "run"], refused
    assert "limits.wall" in refused[0]["reason"] and refused[0]["policy_digest"], refused
    assert "value-withheld" not in gov.log.read_text()
    assert cordon.raw("audit", "verify", gov.log).status == 0


# --- ambiguous JSON: a key given twice is refused (issue 22) -------------------------


def test_signature_with_a_key_twice_is_refused(cordon, gov, other):
    """The real signature last, where a last-key-wins reader would find it."""
    p = own_policy(cordon, gov)
    sig = json.loads(pathlib.Path(f"{p}.sig").read_text())
    text = json.dumps(sig)
    pathlib.Path(f"{p}.sig").write_text('{"sig": "AAAA", ' + text[1:] + "\n")
    r = touch_both(cordon, gov, p, other)
    assert_refused_and_recorded(cordon, gov, other, r, "not a cordon policy signature")


def test_approval_with_a_key_twice_is_refused(cordon, gov, other):
    p = own_policy(cordon, gov, signed=False, extra=f"break_glass:\n  may_relax: [limits.memory]"
                                                    f"\n  max_duration: 1h\n  approval_key: "
                                                    f"{gov.good_pub}\n")
    r = cordon.raw("policy", "approve", p, "--key", gov.good, "--reason", "incident 7",
                   "--until", "10m")
    assert r.status == 0, r
    tok = cordon.hostdir() / "token.json"
    # Another reason first: the real one, last, would win where the last key wins.
    tok.write_text('{"reason": "something else", ' + r.out.strip()[1:] + "\n")
    os.chmod(tok, 0o644)
    r = touch_both(cordon, gov, p, other, "--break-glass", "something else", "--until", "5m",
                   "--approval", tok)
    assert_refused_and_recorded(cordon, gov, other, r, "is not a break-glass approval")


def test_evidence_with_a_key_twice_is_refused(cordon, gov):
    p = own_policy(cordon, gov, signed=False)
    r = cordon.raw("run", "-p", p, "--", "/bin/true")
    assert r.status == 0, r
    (start,) = events(gov.log, "run.start")
    doc = evidence(cordon, start["run"], gov.log)
    assert verify(cordon, doc).status == 0
    # A forged summary first, the true one last: a last-key-wins reader verifies it.
    f = cordon.hostdir() / "twice.json"
    f.write_text('{"summary": {"level": "microvm"}, ' + json.dumps(doc)[1:])
    os.chmod(f, 0o644)
    r = cordon.raw("evidence", "verify", f)
    assert_cordon_refused(r, "duplicate object key", "summary")


# --- kill --all ----------------------------------------------------------------


def test_kill_all_ends_every_sandbox_and_records_it(root_cordon, gov, bins):
    """In a PID namespace of its own, so that only this test's sandboxes are visible;
    at every level (it found none but the namespace level's before)."""
    c = root_cordon
    log = gov.log
    level = " ".join(c.level_opts())
    script = (
        f"for i in 1 2 3; do {c.bin} run {level} --audit {log} -- sleep 60 & done; "
        f"for i in $(seq 100); do [ $(grep -c run.start {log} 2>/dev/null || echo 0) = 3 ] && break; "
        f"sleep 0.1; done; sleep 0.3; "
        f"{c.bin} kill --all --audit {log} --json; wait"
    )
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["found"] == 3 and report["killed"] == 3, report
    ends = events(log, "run.end")
    assert len(ends) == 3 and all(e["reason"] == "killed" for e in ends), ends
    (k,) = events(log, "kill.all")
    assert k["killed"] == 3
    assert c.raw("audit", "verify", log).status == 0


@pytest.mark.parametrize("name", ["cordon-init", "cordon-vm", "cordon-gvisor",
                                  "cordon-process"])
def test_kill_all_leaves_a_host_process_named_like_a_sandbox(root_cordon, name):
    """A host process calling itself as a level's top process does is not in a sandbox
    (nor forked by cordon): not touched."""
    p = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
         f"python3 -c 'import ctypes,time; ctypes.CDLL(None).prctl(15, b\"{name}\", 0, 0, 0);"
         " time.sleep(30)' & sleep 0.5; " + root_cordon.bin + " kill --all --json; "
         "kill -0 $! && echo alive; kill $!"],
        capture_output=True, text=True, timeout=60)
    assert '"found": 0' in p.stdout and "alive" in p.stdout, p


# --- MCP tool pinning ------------------------------------------------------------

from mcp_util import MCP, NODE, policy as mcp_policy, require_npm_packages, sdk  # noqa: E402

INSIDE = "/opt/mcp"
TEE = ["/usr/bin/python3", f"{INSIDE}/tee_server.py", "--log", "/workspace/.tee.log", "--"]
FS_SERVER = [NODE, f"{INSIDE}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
             "/workspace"]


def lie(*opts):
    return ["/usr/bin/python3", f"{INSIDE}/hostile_server.py", "tools_lie", *opts]


def names(step):
    assert step["ok"], step
    return sorted(t["name"] for t in step["value"]["tools"])


def call_refused(step, *words):
    msg = step["error"]["message"] if not step["ok"] else str(step["value"])
    for w in words:
        assert w in msg, (w, step)


def called(ws):
    log = ws / ".tee.log"
    out = []
    for line in (log.read_text().splitlines() if log.exists() else []):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if isinstance(m, dict) and m.get("method") == "tools/call":
            out.append(m["params"]["name"])
    return out


def mcp_session(cordon, name, state):
    """A directory for STATE (pins, a decider socket), a log, and `mcp wrap` with a policy."""
    require_npm_packages()
    d = cordon.hostdir(name, mode=0o777)
    log = cordon.hostdir(name + "log", mode=0o777) / "audit.jsonl"

    def wrap(tools, server, ws, extra=""):
        pol = mcp_policy(cordon, f"tools:\n{tools}{extra}audit:\n  file: {log}\n")
        return cordon.argv("mcp", "wrap", "-p", pol, "--ro", f"{MCP}:{INSIDE}", "-w", ws, "--",
                           *TEE, *server)
    return d / state, log, wrap


@pytest.fixture
def pinning(cordon):
    pins, log, session = mcp_session(cordon, "pins", "pins.json")

    def wrap(allow, server, ws):
        return session(f"  allow: [{', '.join(allow)}]\n  pins: {pins}\n", server, ws)
    return pins, log, wrap


def test_rug_pull_mid_session_is_hidden_until_approved(cordon, pinning):
    pins, log, wrap = pinning
    ws = cordon.hostdir("ws", mode=0o777)
    allow = ["echo", "change", "exfiltrate"]
    rep = sdk(cordon, wrap(allow, lie(), ws), [
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": {"text": "a"}},
        {"op": "callTool", "name": "change", "arguments": {}},
        {"op": "wait", "notification": "notifications/tools/list_changed", "timeout_ms": 10000},
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": {"text": "b"}},
        {"op": "callTool", "name": "exfiltrate", "arguments": {"path": "/"}},
    ])
    first, echo1, _, _, second, echo2, exfil = rep["results"]
    assert names(first) == ["change", "echo"]           # pinned on first use
    assert echo1["ok"], echo1
    assert names(second) == ["change"]                  # echo changed, exfiltrate new: hidden
    call_refused(echo2, "Unknown tool", "changed since pinned")
    call_refused(exfil, "Unknown tool")
    assert called(ws) == ["echo", "change"]             # neither reached the server
    changed = {e["tool"]: e for e in map(json.loads, log.read_text().splitlines())
               if e["type"] == "mcp.tool_changed"}
    assert changed["echo"]["change"] == "changed" and changed["echo"]["pinned"]
    assert changed["exfiltrate"]["change"] == "new"
    # The session's evidence holds its tool calls and the changes.
    run = changed["echo"]["run"]
    r = cordon.raw("evidence", run, "--audit", log, "--format", "json")
    assert r.status == 0, r
    sm = json.loads(r.out)["summary"]
    assert [(c["tool"], c["decision"]) for c in sm["tool_calls"]] == [
        ("echo", "allowed"), ("change", "allowed"), ("echo", "refused"),
        ("exfiltrate", "refused")]
    assert sorted(c["tool"] for c in sm["tool_changes"]) == ["echo", "exfiltrate"]
    saved = json.loads(pins.read_text())["servers"]
    (server,) = saved.values()
    assert sorted(server["pending"]) == ["echo", "exfiltrate"]
    assert "IGNORE ALL PREVIOUS" in server["pending"]["echo"]["tool"]["description"]

    # Approving echo alone: the next session sees it; exfiltrate stays hidden.
    r = cordon.raw("mcp", "pins", "approve", "--pins", pins, "echo")
    assert r.status == 0 and "approved 1 tool" in r.out, r
    ws2 = cordon.hostdir("ws2", mode=0o777)
    rep = sdk(cordon, wrap(allow, lie("v2"), ws2), [
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": {"text": "c"}},
        {"op": "callTool", "name": "exfiltrate", "arguments": {"path": "/"}},
    ])
    listed, echo3, exfil2 = rep["results"]
    assert names(listed) == ["change", "echo"]
    assert echo3["ok"] and "called echo" in echo3["value"]["content"][0]["text"], echo3
    call_refused(exfil2, "Unknown tool")
    assert called(ws2) == ["echo"]
    r = cordon.raw("mcp", "pins", "approve", "--pins", pins, "nosuch")
    assert_cordon_refused(r, "nothing pending")


def tool_digest(tool):
    """mcp_tool_digest(), as anyone can compute it to write tools.pinned."""
    keys = ["name", "title", "description", "inputSchema", "outputSchema", "annotations"]
    text = json.dumps({k: tool.get(k) for k in keys}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_pins_written_in_the_policy(cordon):
    _, log, session = mcp_session(cordon, "fixed", "unused")
    echo = {"name": "echo", "description": "Echo the argument text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    change = {"name": "change", "description": "Change the tool list",
              "inputSchema": {"type": "object", "properties": {}}}
    ws = cordon.hostdir("ws", mode=0o777)
    pinned = f"  pinned: [echo={tool_digest(echo)}, change={tool_digest(change)}]\n"
    rep = sdk(cordon, session("  allow: [echo, change, exfiltrate]\n" + pinned, lie(), ws), [
        {"op": "listTools"},
        {"op": "callTool", "name": "change", "arguments": {}},
        {"op": "wait", "notification": "notifications/tools/list_changed", "timeout_ms": 10000},
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": {"text": "b"}},
    ])
    first, _, _, second, echo2 = rep["results"]
    assert names(first) == ["change", "echo"]
    assert names(second) == ["change"]
    call_refused(echo2, "Unknown tool")
    assert called(ws) == ["change"]
    changes = sorted((e["tool"], e["change"]) for e in map(json.loads, log.read_text().splitlines())
                     if e["type"] == "mcp.tool_changed")
    assert changes == [("echo", "changed"), ("exfiltrate", "new")]
    # A pin that is not a digest is a policy error.
    r = cordon.raw("policy", "check", mcp_policy(cordon, "tools:\n  allow: [echo]\n"
                                                          "  pinned: [echo=abc]\n"))
    assert_cordon_refused(r, "tools.pinned", "not a lower-case SHA-256")


def test_real_server_pins_are_stable_across_sessions(cordon, pinning):
    pins, log, wrap = pinning
    ws = cordon.hostdir("ws", mode=0o777)
    (ws / "hello.txt").write_text("hi\n")
    allow = ["read_text_file", "list_directory"]
    for _ in range(2):
        rep = sdk(cordon, wrap(allow, FS_SERVER, ws), [
            {"op": "listTools"},
            {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
        ])
        listed, read = rep["results"]
        assert names(listed) == allow[::-1] or names(listed) == sorted(allow)
        assert read["ok"] and "hi" in read["value"]["content"][0]["text"], read
    (server,) = json.loads(pins.read_text())["servers"].values()
    assert sorted(server["tools"]) == sorted(allow) and server["pending"] == {}
    assert "mcp.tool_changed" not in log.read_text()


# --- evidence ----------------------------------------------------------------------


def evidence_run(cordon, gov, extra=""):
    p = gov.policy(f"  sign_key: {gov.good}\nsecrets:\n  - name: API_TOKEN\n    from: env:TOK\n"
                   f"    hosts: [example.com]\n{extra}")
    # audit.sign_key is under audit: in the policy the fixture writes.
    r = cordon.run(["/bin/sh", "-c", "touch /out/ran"], "-p", p, env={"TOK": "s3cret-value"})
    assert r.status == 0, r
    return r.result["run_id"]


def evidence(cordon, run, log, *opts):
    r = cordon.raw("evidence", run, "--audit", log, "--format", "json", *opts)
    assert r.status == 0, r
    return json.loads(r.out)


def verify(cordon, doc, *opts):
    f = cordon.hostdir() / "evidence.json"
    f.write_text(json.dumps(doc))
    os.chmod(f, 0o644)
    return cordon.raw("evidence", "verify", f, *opts)


def test_evidence_is_verifiable_offline(cordon, gov):
    run = evidence_run(cordon, gov)
    evidence_run(cordon, gov)  # another run after it: its lines are not ours
    doc = evidence(cordon, run[:10], gov.log, "--key", gov.good_pub)
    sm = doc["summary"]
    assert doc["run"] == run
    assert sm["level"] == cordon.level and sm["secrets"] == ["API_TOKEN"]
    assert "s3cret-value" not in json.dumps(doc)
    assert sm["result"]["status"] == 0 and sm["limits_enforced"]["wall"] == "supervisor"
    assert sm["network"]["mode"] == "gateway"
    lines = doc["audit"]["lines"]
    assert [json.loads(l["text"])["type"] for l in lines] == ["run.start", "run.end",
                                                               "audit.checkpoint"]
    raw = gov.log.read_bytes().split(b"\n")
    for l in lines:  # the hashes are of the log's exact bytes
        assert hashlib.sha256(raw[l["seq"]]).hexdigest() == l["sha256"]
    r = verify(cordon, doc, "--key", gov.good_pub)
    assert r.status == 0 and "signed checkpoint verified" in r.out, r
    r = verify(cordon, doc, "--key", gov.evil_pub)
    assert r.status == 1 and "another key" in r.out, r


def tampered(doc, how, level):
    d = json.loads(json.dumps(doc))
    lines = d["audit"]["lines"]
    # The run's level, whichever the suite runs at, claimed to be another.
    other = "microvm" if level != "microvm" else "namespace"
    relevel = lambda t: re.sub(r'"(namespace|process|gvisor|microvm)"', f'"{other}"', t, count=1)
    if how == "line text":
        lines[0]["text"] = relevel(lines[0]["text"])
    elif how == "line rehashed":
        lines[0]["text"] = relevel(lines[0]["text"])
        lines[0]["sha256"] = hashlib.sha256(lines[0]["text"].encode()).hexdigest()
    elif how == "summary":
        d["summary"]["level"] = other
    elif how == "line dropped":
        del lines[1]
    return d


@pytest.mark.parametrize("how,words", [
    ("line text", "does not match its text"),
    ("line rehashed", "does not chain"),
    ("summary", "summary is not what the lines say"),
    ("line dropped", "does not chain"),
])
def test_tampered_evidence_does_not_verify(cordon, gov, how, words):
    doc = evidence(cordon, evidence_run(cordon, gov), gov.log)
    r = verify(cordon, tampered(doc, how, cordon.level), "--key", gov.good_pub)
    assert r.status == 1 and words in r.out, r


def test_evidence_without_checkpoint_says_unsigned(cordon, gov):
    p = gov.policy()
    r = cordon.run(["/bin/true"], "-p", p)
    doc = evidence(cordon, r.result["run_id"], gov.log)
    assert doc["audit"]["checkpoint"] is None
    r2 = verify(cordon, doc)
    assert r2.status == 0 and "no checkpoint (unsigned)" in r2.out, r2
    r2 = verify(cordon, doc, "--key", gov.good_pub)
    assert r2.status == 1 and "no signed checkpoint" in r2.out, r2
    r2 = cordon.raw("evidence", "0" * 32, "--audit", gov.log)
    assert_cordon_refused(r2, "no run")


# --- the runtime decider -------------------------------------------------------------

REPO_EXAMPLES = MCP.parent.parent / "examples"

from deciders import stop_decider, ThreadDecider, crashing_decider  # noqa: E402


@pytest.fixture
def asking(cordon):
    sock, log, session = mcp_session(cordon, "decider", "decider.sock")

    def wrap(ws, timeout="500ms"):
        return session("  allow: [echo, change, rm_rf]\n  ask: [echo, rm_rf]\n", lie(), ws,
                       f"decider:\n  socket: {sock}\n  timeout: {timeout}\n")
    return sock, log, wrap


def asks(log):
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "decider.ask"]


def test_reference_decider_allows_denies_and_remembers(cordon, asking):
    sock, log, wrap = asking
    rules = cordon.hostdir() / "rules.json"
    rules.write_text(json.dumps({"echo": "allow_session", "rm_rf": "deny"}))
    d = subprocess.Popen(["/usr/bin/python3", str(REPO_EXAMPLES / "decider.py"), str(sock),
                          "--rules", str(rules)], stderr=subprocess.PIPE)
    try:
        assert b"listening" in d.stderr.readline()
        ws = cordon.hostdir("ws", mode=0o777)
        rep = sdk(cordon, wrap(ws, timeout="5s"), [
            {"op": "callTool", "name": "echo", "arguments": {"text": "a"}},
            {"op": "callTool", "name": "echo", "arguments": {"text": "b"}},
            {"op": "callTool", "name": "rm_rf", "arguments": {"path": "/"}},
            {"op": "callTool", "name": "change", "arguments": {}},
        ])
    finally:
        d.kill()
        d.wait()
    e1, e2, rm, ch = rep["results"]
    assert e1["ok"] and e2["ok"] and ch["ok"], rep
    assert rm["value"]["isError"] and "decider did not allow it" in str(rm["value"]), rm
    assert called(ws) == ["echo", "echo", "change"]     # rm_rf never reached the server
    a = asks(log)
    assert [(x["tool"], x["decision"], x["cached"]) for x in a] == [
        ("echo", "allow_session", False), ("echo", "allow_session", True),
        ("rm_rf", "deny", False)]
    assert a[0]["decider"]["name"] == "cordon-reference-decider/1"
    assert a[0]["decider"]["pid"] == d.pid and a[0]["decider"]["socket"] == str(sock)


@pytest.mark.parametrize("mode,words", [
    ("slow", "timeout"),
    ("wrong_id", "answered another question"),
    ("garbage", "not a decision"),
    ("crash", "closed the connection"),
    ("missing", "unreachable"),
])
def test_decider_failures_deny(cordon, asking, mode, words):
    sock, log, wrap = asking
    ws = cordon.hostdir("ws", mode=0o777)
    dec = None
    if mode == "crash":
        dec = crashing_decider(sock)
    elif mode != "missing":
        dec = ThreadDecider(sock, mode)
    try:
        rep = sdk(cordon, wrap(ws), [
            {"op": "callTool", "name": "echo", "arguments": {"text": "a"}},
        ])
    finally:
        stop_decider(dec)
    (call,) = rep["results"]
    assert call["ok"] and call["value"]["isError"], call
    assert words in str(call["value"]), call
    assert called(ws) == []
    (a,) = asks(log)
    assert a["decision"] == "deny" and words in a["reason"], a
    if mode == "crash":
        assert dec.returncode == 3


# --- audit.export: otlp ----------------------------------------------------------------


class OtlpReceiver:
    """A local OTLP/HTTP logs receiver: each POST's JSON kept; MODE ok, or blackhole."""

    def __init__(self, mode="ok"):
        import http.server
        import threading
        self.posts, self.mode = [], mode
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers["Content-Length"])
                body = self.rfile.read(n)
                outer.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
                if outer.mode == "blackhole":
                    import time
                    time.sleep(30)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1/logs"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def records(self):
        out = []
        for _, _, doc in list(self.posts):
            for rl in doc["resourceLogs"]:
                for sl in rl["scopeLogs"]:
                    out.extend(sl["logRecords"])
        return out

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def attrs(rec):
    return {a["key"]: next(iter(a["value"].values())) for a in rec["attributes"]}


def test_otlp_export_sends_every_line_as_a_log_record(cordon, gov):
    rx = OtlpReceiver()
    try:
        p = gov.policy(f"  export: otlp\n  export_endpoint: {rx.url}\n")
        r = run_touch(cordon, p)
        assert r.status == 0, r
        lines = gov.log.read_text().splitlines()
        import time
        deadline = time.monotonic() + 20
        while len(rx.records()) < len(lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        recs = rx.records()
    finally:
        rx.close()
    assert [rec["body"]["stringValue"] for rec in recs] == lines
    for rec, line in zip(recs, lines):
        a = attrs(rec)
        assert a["cordon.line_sha256"] == hashlib.sha256(line.encode()).hexdigest()
        assert a["cordon.type"] == json.loads(line)["type"]
        assert int(rec["timeUnixNano"]) > 1_700_000_000 * 10**9
    path, ctype, doc = rx.posts[0]
    assert path == "/v1/logs" and ctype == "application/json"
    res = {a["key"]: a["value"]["stringValue"] for a in doc["resourceLogs"][0]["resource"]["attributes"]}
    assert res["service.name"] == "cordon"
    assert cordon.raw("audit", "verify", gov.log).status == 0


@pytest.mark.parametrize("collector", ["blackhole", "closed"])
def test_otlp_export_never_blocks_or_replaces_the_chain(cordon, gov, collector):
    rx = OtlpReceiver("blackhole") if collector == "blackhole" else None
    import socket as s
    if rx:
        url = rx.url
    else:
        probe = s.socket()
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1/logs"
        probe.close()  # nobody listens there now
    try:
        p = gov.policy(f"  export: otlp\n  export_endpoint: {url}\n")
        r = run_touch(cordon, p)
        assert r.status == 0, r
        # The exporter waits seconds on a collector that never answers; the run does not.
        assert r.wall < 3.0, r
        types = [json.loads(line)["type"] for line in gov.log.read_text().splitlines()]
        assert types == ["audit.header", "run.start", "run.end"]
        assert cordon.raw("audit", "verify", gov.log).status == 0
    finally:
        if rx:
            rx.close()


def test_otlp_export_needs_an_endpoint(cordon, gov):
    r = run_touch(cordon, gov.policy("  export: otlp\n"))
    assert_cordon_refused(r, "audit.export", "export_endpoint")
    assert_nothing_ran(gov)


def test_mcp_serve_asks_the_decider(cordon, asking):
    sock, log, _ = asking
    rules = cordon.hostdir() / "rules.json"
    rules.write_text(json.dumps({"run_code": "allow_once", "run_command": "deny"}))
    out = cordon.hostdir("serveout", mode=0o777)
    d = subprocess.Popen(["/usr/bin/python3", str(REPO_EXAMPLES / "decider.py"), str(sock),
                          "--rules", str(rules)], stderr=subprocess.PIPE)
    try:
        assert b"listening" in d.stderr.readline()
        pol = mcp_policy(cordon, "tools:\n  allow: [run_code, run_command]\n"
                                 "  ask: [run_code, run_command]\n"
                                 f"decider:\n  socket: {sock}\n  timeout: 5s\n"
                                 f"filesystem:\n  read_write: ['{out}:/out']\n"
                                 f"audit:\n  file: {log}\n")
        rep = sdk(cordon, cordon.argv("mcp", "serve", "-p", pol), [
            {"op": "callTool", "name": "run_command", "arguments": {"command": "touch /out/cmd"}},
            {"op": "callTool", "name": "run_code",
             "arguments": {"language": "sh", "source": "touch /out/code"}},
        ])
    finally:
        d.kill()
        d.wait()
    cmd, code = rep["results"]
    assert cmd["ok"] and cmd["value"]["isError"] and "decider did not allow" in str(cmd), cmd
    assert code["ok"] and not code["value"].get("isError"), code
    assert (out / "code").exists() and not (out / "cmd").exists()
    assert [(a["tool"], a["decision"]) for a in asks(log)] == [
        ("run_command", "deny"), ("run_code", "allow_once")]


def test_command_decider(cordon):
    """decider.command: the reference decider run per question, its answer honoured."""
    _, log, session = mcp_session(cordon, "cmd", "unused")
    rules = cordon.hostdir() / "rules.json"
    rules.write_text(json.dumps({"echo": "allow_once"}))
    os.chmod(rules, 0o644)
    cmd = f"/usr/bin/python3 {REPO_EXAMPLES / 'decider.py'} --stdin --rules {rules}"
    ws = cordon.hostdir("ws", mode=0o777)
    rep = sdk(cordon, session("  allow: [echo, rm_rf]\n  ask: [echo, rm_rf]\n", lie(), ws,
                              f"decider:\n  command: \"{cmd}\"\n  timeout: 10s\n"), [
        {"op": "callTool", "name": "echo", "arguments": {"text": "a"}},
        {"op": "callTool", "name": "rm_rf", "arguments": {"path": "/"}},
    ])
    echo, rm = rep["results"]
    assert echo["ok"] and not echo["value"].get("isError"), echo
    assert rm["value"]["isError"] and "no rule" in str(rm["value"]), rm
    assert called(ws) == ["echo"]
    a = asks(log)
    assert [(x["tool"], x["decision"]) for x in a] == [("echo", "allow_once"), ("rm_rf", "deny")]
    assert a[0]["decider"]["command"] == cmd
    assert a[0]["decider"]["name"] == "cordon-reference-decider/1"


# --- mcp serve: asking the person through the client (elicitation) ------------------------

from mcp_util import RawClient  # noqa: E402


def serve_policy(cordon, out, log, extra=""):
    return mcp_policy(cordon, "tools:\n  allow: [run_command]\n  ask: [run_command]\n"
                              f"decider:\n  elicit: true\n  timeout: 2s\n{extra}"
                              f"filesystem:\n  read_write: ['{out}:/out']\n"
                              f"audit:\n  file: {log}\n")


@pytest.mark.parametrize("answer,runs,words", [
    ({"action": "accept", "content": {"decision": "allow_once"}}, True, None),
    ({"action": "accept", "content": {"decision": "deny"}}, False, "chose deny"),
    ({"action": "decline"}, False, "declined"),
    ({"error": {"code": -32603, "message": "no person here"}}, False, "answered with an error"),
])
def test_mcp_serve_asks_the_person_by_elicitation(cordon, answer, runs, words):
    require_npm_packages()
    out = cordon.hostdir("out", mode=0o777)
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"
    rep = sdk(cordon, cordon.argv("mcp", "serve", "-p", serve_policy(cordon, out, log)), [
        {"op": "callTool", "name": "run_command", "arguments": {"command": "touch /out/ran"}},
    ], handlers={"elicitation": answer})
    (call,) = rep["results"]
    assert call["ok"], call
    assert (out / "ran").exists() == runs
    if runs:
        assert not call["value"].get("isError"), call
    else:
        assert call["value"]["isError"] and words in str(call["value"]), call
    (a,) = asks(log)
    assert a["decider"]["elicitation"] == "client"
    assert a["decision"] == ("allow_once" if runs else "deny")


def test_mcp_serve_without_elicitation_or_decider_refuses(cordon):
    require_npm_packages()
    out = cordon.hostdir("out", mode=0o777)
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"
    rep = sdk(cordon, cordon.argv("mcp", "serve", "-p", serve_policy(cordon, out, log)), [
        {"op": "callTool", "name": "run_command", "arguments": {"command": "touch /out/ran"}},
    ])
    (call,) = rep["results"]
    assert call["value"]["isError"] and "no elicitation capability" in str(call["value"]), call
    assert not (out / "ran").exists()


def test_mcp_serve_elicitation_unanswered_times_out(cordon):
    out = cordon.hostdir("out", mode=0o777)
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"
    c = RawClient(cordon.argv("mcp", "serve", "-p", serve_policy(cordon, out, log)),
                  cordon.ident.env(), cordon.tmp)
    try:
        c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "clientInfo": {"name": "t", "version": "1"},
                           "capabilities": {"elicitation": {}}}})
        assert c.recv()["id"] == 1
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        c.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_command", "arguments": {"command": "touch /out/ran"}}})
        ask = c.recv()
        assert ask["method"] == "elicitation/create", ask
        assert "run_command" in ask["params"]["message"]
        # Never answered: after decider.timeout the call is refused and the question withdrawn.
        got = [c.recv(timeout=15), c.recv(timeout=15)]
    finally:
        c.p.stdin.close()
        c.p.wait(timeout=30)
    cancelled = [m for m in got if m and m.get("method") == "notifications/cancelled"]
    (res,) = [m for m in got if m and m.get("id") == 2]
    assert cancelled and cancelled[0]["params"]["requestId"] == ask["id"]
    assert res["result"]["isError"] and "timeout" in json.dumps(res["result"]), res
    assert not (out / "ran").exists()
