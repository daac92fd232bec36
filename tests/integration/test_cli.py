"""
The command line: exit statuses, stdin, the result JSON, policy files, and
each bad input refused with exit 125, one `cordon: ` line and no state left.
"""

import hashlib
import json
import os
import re
import shutil

import pytest

from conftest import REPO, assert_cordon_refused, host_state, new_leftovers

REASONS = {"exited", "timeout", "oom", "pids_limit", "output_limit", "cpu_limit",
           "file_size_limit", "killed", "setup_error"}
# What `enforcement` may say (levels.HELD_BY has what each limit says at each
# level): the level's own kernel ("kernel"), a tmpfs's caps ("tmpfs"), an
# inode count held only through the memory limit ("memory"); the gvisor level
# adds its filesystem ("mounts") and what its cgroup holds ("runsc").
ENFORCERS = {"cgroup-v1", "cgroup-v2", "rlimit", "supervisor", "kernel", "tmpfs", "memory",
             "none", "mounts", "runsc"}


# --- exit statuses ------------------------------------------------------------


def test_runs_a_command(cordon):
    r = cordon.run(["/bin/echo", "hi"])
    assert (r.status, r.out) == (0, "hi\n"), r
    assert r.err == "" or r.err.startswith("cordon: limits "), r  # only a degraded-limit notice


def test_stdin_reaches_the_command(cordon):
    r = cordon.run(["cat"], input=b"hi\n")
    assert (r.status, r.out) == (0, "hi\n"), r
    big = os.urandom(1 << 20)
    r = cordon.run(["sha256sum"], input=big)
    assert r.out.split()[0] == hashlib.sha256(big).hexdigest(), r


def test_stdin_file_is_relayed_not_passed(cordon):
    """A host file on stdin arrives as a pipe: the sandbox cannot reopen it to write."""
    d = cordon.hostdir()
    f = d / "stdin.txt"
    f.write_text("original\n")
    os.chown(f, cordon.ident.uid, cordon.ident.gid)
    with open(f, "r+b") as fh:
        r = cordon.run(["sh", "-c", "readlink /proc/self/fd/0; echo pwned > /proc/self/fd/0;"
                        " cat"], stdin=fh)
    assert r.out.startswith("pipe:"), r
    assert "original\n" in r.out, r       # the relay still delivered the file
    assert f.read_text() == "original\n"


def test_stderr_relayed_separately(cordon):
    r = cordon.run(["sh", "-c", "echo out; echo err >&2"], "--quiet")  # no cordon notices
    assert (r.status, r.out, r.err) == (0, "out\n", "err\n"), r


@pytest.mark.parametrize("cmd,status", [
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "exit 0"], 0),
    (["false"], 1),
    (["sh", "-c", "kill -9 $$"], 137),
    (["sh", "-c", "kill -TERM $$"], 143),
    (["/no/such/command"], 127),
    (["no-such-command-cordon"], 127),
    (["/etc/passwd"], 126),
], ids=["exit3", "exit0", "false", "sigkill", "sigterm", "missing-path", "missing-in-path",
        "not-executable"])
def test_exit_status(cordon, cmd, status):
    r = cordon.run(cmd)
    assert r.status == status, r
    res = r.result
    assert res is not None and res["status"] == status, r
    if status in (126, 127):
        assert cmd[0] in r.err, f"stderr does not name the command\n{r}"
    elif status > 128:
        assert res["signal"] == status - 128 and res["exit_code"] is None, res
    else:
        assert res["exit_code"] == status and res["signal"] is None, res
        assert res["reason"] == "exited", res


def test_not_executable_workspace_file(cordon):
    ws = cordon.hostdir("ws")
    (ws / "script.sh").write_text("#!/bin/sh\necho no\n")
    os.chmod(ws / "script.sh", 0o644)
    r = cordon.run(["./script.sh"], "-w", ws)
    assert r.status == 126, r


# --- the result ---------------------------------------------------------------


def test_result_json(cordon):
    r = cordon.run(["sh", "-c", "echo 12345; echo ab >&2; exit 7"])
    res = r.result
    assert r.status == 7, r
    for k in ("level", "exit_code", "signal", "reason", "status", "wall_ms", "cpu_ms",
              "peak_memory_bytes", "stdout_bytes", "stderr_bytes", "policy_digest",
              "enforcement"):
        assert k in res, f"result lacks {k}: {res}"
    assert res["level"] == cordon.level
    assert (res["exit_code"], res["signal"], res["reason"], res["status"]) == (7, None,
                                                                              "exited", 7)
    assert (res["stdout_bytes"], res["stderr_bytes"]) == (6, 3), res
    assert re.fullmatch(r"[0-9a-f]{64}", res["policy_digest"]), res
    assert isinstance(res["wall_ms"], (int, float)) and 0 < res["wall_ms"] < 60000, res
    assert isinstance(res["cpu_ms"], (int, float)) and res["cpu_ms"] >= 0, res
    assert isinstance(res["peak_memory_bytes"], int) and res["peak_memory_bytes"] >= 0, res
    assert "error" not in res, res
    assert isinstance(res["enforcement"], dict), res
    assert set(res["enforcement"].values()) <= ENFORCERS, res


def test_result_digest_tracks_policy(cordon):
    a = cordon.run(["true"]).result["policy_digest"]
    b = cordon.run(["true"]).result["policy_digest"]
    c = cordon.run(["true"], "--tmp-size", "32M").result["policy_digest"]
    assert a == b != c


def test_result_on_setup_error(cordon):
    """A run that cordon cannot set up still reports why, when it gets that far."""
    r = cordon.run(["true"], "--ro", "/nonexistent-cordon-it")
    assert r.status == 125, r
    if r.result is not None:
        assert r.result["reason"] == "setup_error" and r.result["error"], r.result


# --- bad inputs ---------------------------------------------------------------


def policy_file(cordon, text, name="policy.yaml"):
    d = cordon.hostdir()
    p = d / name
    p.write_text(text)
    os.chmod(p, 0o644)
    return p


BAD_ARGS = [
    ("unknown-flag", ["run", "--no-such-flag", "--", "true"], ["no-such-flag"]),
    ("no-command", ["run"], []),
    ("no-command-after-dashes", ["run", "--"], []),
    ("bad-size", ["run", "-m", "lots", "--", "true"], ["lots"]),
    ("bad-output-size", ["run", "--output", "-5", "--", "true"], []),
    ("bad-duration", ["run", "-t", "forever", "--", "true"], ["forever"]),
    ("bad-pids", ["run", "--pids", "many", "--", "true"], ["many"]),
    ("missing-ro", ["run", "--ro", "/nonexistent-cordon-it", "--", "true"],
     ["/nonexistent-cordon-it"]),
    ("missing-rw", ["run", "--rw", "/nonexistent-cordon-it:/x", "--", "true"],
     ["/nonexistent-cordon-it"]),
    ("missing-workspace", ["run", "-w", "/nonexistent-cordon-it", "--", "true"],
     ["/nonexistent-cordon-it"]),
    ("unknown-level", ["run", "--level", "teleport", "--", "true"], ["teleport"]),
    ("bad-env", ["run", "-e", "=x", "--", "true"], []),
    ("bad-best-effort", ["run", "--best-effort", "nothing", "--", "true"], ["nothing"]),
    ("missing-policy", ["run", "-p", "/nonexistent-cordon-it.yaml", "--", "true"],
     ["/nonexistent-cordon-it.yaml"]),
    ("unknown-subcommand", ["frobnicate"], ["frobnicate"]),
]


@pytest.mark.parametrize("args,words", [(a, w) for _, a, w in BAD_ARGS],
                         ids=[n for n, _, _ in BAD_ARGS])
def test_bad_arguments_refused(cordon, args, words):
    before = host_state()
    r = cordon.raw(*args)
    assert_cordon_refused(r, *words)
    assert r.out == "", r
    assert not new_leftovers(before)


BAD_POLICIES = [
    ("malformed-yaml", "version: 1\nlimits: [unclosed\n", []),
    ("unknown-key", "version: 1\nlimits:\n  memory: 64M\n  bogus_limit: 3\n",
     ["{file}:4", "bogus_limit"]),
    ("bad-size", "version: 1\nlimits:\n  memory: lots\n", ["{file}:3", "limits.memory",
                                                          "lots"]),
    ("negative-size", "version: 1\nfilesystem:\n  tmp_size: -1M\n", ["{file}:3", "tmp_size"]),
    ("wrong-type", "version: 1\nlimits:\n  pids: [1, 2]\n", ["{file}:3", "limits.pids"]),
    ("missing-ro", "version: 1\nfilesystem:\n  read_only:\n    - /nonexistent-cordon-it\n",
     ["{file}:4", "/nonexistent-cordon-it"]),
    ("bad-tool-rule", "version: 1\ntools:\n  allow:\n    - read_file\n  rules:\n"
     "    read_file:\n      path: { under: [relative] }\n",
     ["{file}:7", "tools.rules.read_file.path.under[0]", "not an absolute path"]),
    ("moved-record-arguments", "version: 1\naudit:\n  record_arguments: true\n",
     ["{file}:3", "moved to tools.record_arguments"]),
    ("bad-allow-rule", "version: 1\nnetwork:\n  allow:\n    - \"exa mple.com\"\n",
     ["{file}:4", "network.allow"]),
    ("secrets-not-a-list", "version: 1\nsecrets: {}\n", ["{file}:2", "secrets"]),
    ("bad-version", "version: 99\n", ["version"]),
    ("bad-isolation", "version: 1\nisolation: teleport\n", ["{file}:2", "teleport"]),
]


@pytest.mark.parametrize("text,words", [(t, w) for _, t, w in BAD_POLICIES],
                         ids=[n for n, _, _ in BAD_POLICIES])
def test_bad_policy_refused(cordon, text, words):
    p = policy_file(cordon, text)
    words = [w.format(file=p.name) for w in words]
    before = host_state()
    r = cordon.raw("run", "-p", p, "--", "true")
    assert_cordon_refused(r, *words)
    assert not new_leftovers(before)
    r = cordon.raw("policy", "check", p)
    assert_cordon_refused(r, *words)
    assert r.out == "", r


# --- policy files ---------------------------------------------------------------


def find_digest(text):
    """`cordon policy check` prints {"digest": HEX, "policy": {...}}."""
    digest = json.loads(text)["digest"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest), text
    return digest


def test_policy_check_prints_effective_policy(cordon):
    p = policy_file(cordon, "# a comment\nversion: 1\nlimits:\n  wall: 30s\n  output: 1M\n"
                    "filesystem:\n  tmp_size: 16M\nenv:\n  set:\n    GREETING: hi\n")
    r = cordon.raw("policy", "check", p)
    assert r.status == 0, r
    doc = json.loads(r.out)
    assert re.fullmatch(r"[0-9a-f]{64}", doc["digest"]), doc
    doc = doc["policy"]
    assert doc["version"] == 1, doc
    assert doc["isolation"] == "namespace", doc
    assert doc["limits"]["wall_ms"] == 30000 and doc["limits"]["output"] == 1 << 20, doc
    assert doc["filesystem"]["tmp_size"] == 16 << 20, doc
    text = json.dumps(doc)
    assert "GREETING" in text, doc
    digest = find_digest(r.out)
    # The same policy file run as is: the result carries the same digest.
    run = cordon.run(["sh", "-c", "echo $GREETING; df -k /tmp | tail -1"], "-p", p,
                     bind_probe=False)
    assert run.status == 0, run
    assert run.out.startswith("hi\n"), run
    assert run.out.split("\n")[1].split()[1] == str(16 * 1024), run
    assert run.result["policy_digest"] == digest, (run.result, r.out)
    # JSON is YAML: the same policy as JSON has the same effective form.
    j = policy_file(cordon, json.dumps({"version": 1, "limits": {"wall": "30s", "output": "1M"},
                                        "filesystem": {"tmp_size": "16M"},
                                        "env": {"set": {"GREETING": "hi"}}}), "p.json")
    r2 = cordon.raw("policy", "check", j)
    assert r2.status == 0, r2
    assert find_digest(r2.out) == digest, (r.out, r2.out)


def test_policy_check_defaults_are_stable(cordon):
    p = policy_file(cordon, "version: 1\n")
    a = cordon.raw("policy", "check", p)
    b = cordon.raw("policy", "check", p)
    assert a.status == 0 and a.out == b.out, a


def test_flags_override_policy(cordon):
    p = policy_file(cordon, "version: 1\nlimits:\n  wall: 60s\n")
    r = cordon.run(["sleep", "100"], "-p", p, "-t", "1s")
    assert r.status == 124, r


def test_policy_syscalls_deny(cordon):
    r = cordon.run(["python3", "-c", "import os; os.mkdir('d'); print('made')"])
    assert (r.status, r.out) == (0, "made\n"), r
    p = policy_file(cordon, "version: 1\nsyscalls:\n  deny: [mkdir, mkdirat]\n")
    r = cordon.run(["python3", "-c", "import os; os.mkdir('d'); print('made')"], "-p", p)
    assert r.status == 1 and "PermissionError" in r.err, r


EXAMPLES = sorted((REPO / "examples").glob("*.yaml")) + sorted((REPO / "examples").glob("*.json"))


@pytest.mark.parametrize("example", EXAMPLES or [None], ids=lambda e: e.name if e else "none")
def test_example_policies(cordon, example):
    """Every shipped example works as shipped, for root and an ordinary user alike."""
    if example is None:
        pytest.fail("no examples/*.yaml in the repository")
    d = cordon.hostdir()
    p = d / example.name
    shutil.copy(example, p)
    os.chmod(p, 0o644)
    r = cordon.raw("policy", "check", p)
    assert r.status == 0, r
    find_digest(r.out)
    r = cordon.run(["python3", "-c", "import sys; print(6 * 7, file=sys.stdout)"], "-p", p)
    assert r.status == 0, r
    assert r.out == "42\n", r
    r = cordon.run(["sh", "-c", "echo ok"], "-p", p)
    assert (r.status, r.out) == (0, "ok\n"), r
    # What held only per process is said, on stderr and in the result.
    degraded = r.result["degraded"]
    assert all(r.result["enforcement"][k] == "rlimit" for k in degraded), r
    if degraded:
        assert r.err.startswith("cordon: limits " + ", ".join(degraded) + " hold per process"), r
    else:
        assert r.err == "", r


# --- informational commands -----------------------------------------------------


def test_check(cordon):
    r = cordon.raw("check")
    assert r.status == 0, r
    out = r.out.lower()
    for word in ("namespace", "seccomp", "landlock", "cgroup"):
        assert word in out, f"`cordon check` does not mention {word}\n{r}"


def test_help_and_version(cordon):
    r = cordon.raw("--help")
    assert r.status == 0 and "run" in r.out, r
    r = cordon.raw("run", "--help")
    assert r.status == 0, r
    for flag in ("--policy", "--workspace", "--timeout", "--memory", "--best-effort"):
        assert flag in r.out, f"run --help lacks {flag}\n{r}"
    r = cordon.raw("--version")
    assert r.status == 0 and re.search(r"\d+\.\d+", r.out), r

