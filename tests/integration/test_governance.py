"""
Governance of the exceptions (issue 15): signed policies and an expected
digest. Every refusal is exit 125 with one line, and nothing ran: the
command would have left a file in a host directory and a run in the log.
"""

import json
import os
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
        p.write_text(f"version: 1\nfilesystem:\n  read_write: ['{out}:/out']\n"
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
