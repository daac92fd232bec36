"""
What a new user meets in the first hour (issue 13): refusals they can see,
limits that say what they mean, results a script can read, and the rough
edges of the CLI. Every test drives a real sandbox through the cordon binary.
"""

import errno
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

import conftest
import egress_servers as es
from conftest import (BUILD, PROBE, REPO, assert_cordon_refused, marker, pids_with, probe_pids,
                      wait_until)
from mcp_util import RawClient
from test_limits import assert_gone, held

# The notice of an ordinary user's run without a cgroup, before anything else.
DEGRADED = re.compile(r"^cordon: limits [a-z, ]+ hold per process only")

# Asks the gateway (the proxy in HTTP_PROXY) for URL and prints what came back.
PROXY_GET = """
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=20)
    print("fetched")
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("X-Cordon-Denied"), e.read().decode().strip())
"""


# --- refusals a person can see -------------------------------------------------


@pytest.mark.parametrize("quiet", [False, True], ids=["told", "quiet"])
def test_egress_refusal_is_one_line_on_stderr(cordon, quiet):
    opts = ["--allow", "allowed.test"] + (["--quiet"] if quiet else [])
    r = cordon.run(["python3", "-c", PROXY_GET, "http://blocked.test:8080/x"], *opts)
    assert r.status == 0, r
    # The client still gets the 403, the class and the reason.
    code, cls, body = r.out.strip().split(" ", 2)
    assert (code, cls) == ("403", "not_allowed") and "allowlist" in body, r
    lines = [l for l in r.err.splitlines() if not DEGRADED.match(l)]
    # What was refused, and the flag that would allow it.
    told = "cordon: egress refused: blocked.test:8080 (no rule; --allow blocked.test:8080)"
    assert lines == ([] if quiet else [told]), r
    if quiet:
        assert r.err == "", r  # --quiet hides every notice
    assert r.result["egress"]["refused"] == 1, r


def test_egress_refusal_told_as_it_happens(cordon):
    """The line is on stderr while the command still runs, not at the end."""
    m = marker()
    script = (PROXY_GET + f"\nimport subprocess\nsubprocess.run(['{PROBE}', 'sleep', '1000', '{m}'])")
    p = cordon.popen(["python3", "-c", script, "http://blocked.test/"], "--allow", "allowed.test")
    try:
        line = p.stderr.readline().decode()
        if DEGRADED.match(line):  # an ordinary user's run, said as it starts
            line = p.stderr.readline().decode()
        assert probe_pids(m), "the command is no longer running"
        assert line == "cordon: egress refused: blocked.test (no rule; --allow blocked.test)\n", line
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert_gone(m)


def test_fetch_dns_failure_is_a_failure_not_a_refusal(cordon):
    # A nameserver that knows no name: NXDOMAIN for the allowed one.
    stub = es.DnsStub("127.0.0.3", 0, {})
    try:
        r = cordon.raw("fetch", "--allow", "nothing.invalid", "--dns", stub.address,
                       "http://nothing.invalid/")
    finally:
        stub.close()
    assert stub.seen, "the gateway never asked the nameserver"
    assert r.status == 125 and r.out == "", r
    assert r.err.startswith("cordon: fetch: failed: cannot resolve nothing.invalid"), r
    assert r.err.count("\n") == 1, r
    r = cordon.raw("fetch", "--allow", "allowed.test", "http://other.test/")
    assert r.err.startswith("cordon: fetch: refused: "), r


# --- limits that say what they mean -------------------------------------------------


@pytest.mark.parametrize("flag,key", [("--memory", "limits.memory"), ("--timeout", "limits.wall"),
                                      ("--pids", "limits.pids"), ("--output", "limits.output"),
                                      ("--cpu", "limits.cpu")])
def test_zero_limit_refused(cordon, flag, key):
    r = cordon.run(["true"], flag, "0", result=False)
    assert_cordon_refused(r, flag, "0 is not a limit", "unlimited")
    p = cordon.hostdir() / "p.yaml"
    section, name = key.split(".")
    p.write_text(f"version: 1\n{section}:\n  {name}: 0\n")
    r = cordon.raw("run", "-p", p, "--", "true")
    assert_cordon_refused(r, f"{p.name}:3", key, "unlimited")


def test_tiny_memory_limit_ends_as_oom(root_cordon):
    r = root_cordon.run(["true"], "--memory", "1K")
    assert r.result["reason"] == "oom", r
    assert (r.status, r.result["signal"]) == (128 + signal.SIGKILL, signal.SIGKILL), r
    assert r.err.strip() == "cordon: run ended: oom", r


# --- signals -------------------------------------------------------------------------


def test_handled_signal_exits_with_the_commands_status(cordon):
    """A command that traps the signal cordon passes on and exits: its status, 'exited'."""
    ws = cordon.hostdir()
    m = marker()
    # The handler is installed before "ready" is printed: no race with the signal.
    script = ("import signal, subprocess, sys\n"
              "def bye(*_):\n    open('cleaned', 'w').write('cleaned')\n"
              "    sys.exit(7)\n"
              "signal.signal(signal.SIGTERM, bye)\n"
              f"child = subprocess.Popen(['{PROBE}', 'sleep', '1000', '{m}'])\n"
              "print('ready', flush=True)\nchild.wait()\nsignal.pause()\n")
    res = cordon.hostdir() / "result.json"
    p = cordon.popen(["python3", "-c", script], "-w", ws, "--result", res)
    try:
        assert p.stdout.readline() == b"ready\n", p.stderr.read()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().decode()
    assert (ws / "cleaned").read_text() == "cleaned", err
    result = json.loads(res.read_text())
    assert (p.returncode, result["reason"], result["exit_code"]) == (7, "exited", 7), (err, result)
    assert "run ended" not in err, err
    assert_gone(m)


# --- results a script can read -----------------------------------------------------------


def test_result_to_unwritable_place_refused_before_the_run(cordon):
    locked = cordon.hostdir("locked", mode=0o555)
    cases = [(locked, ["--result", "is a directory"]),
             ("/proc/self/r.json", ["--result"])]
    if not cordon.root:  # root may write in a 0555 directory
        cases.append((locked / "r.json", ["--result", "cannot write", "locked"]))
    for target, words in cases:
        ws = cordon.hostdir()
        r = cordon.raw("run", "--result", target, "-w", ws, "--", "touch", "/workspace/ran")
        assert_cordon_refused(r, *words)
        assert not (ws / "ran").exists(), "the command ran although its result had nowhere to go"


def test_run_json_prints_the_result_after_the_output(cordon):
    r = cordon.raw("run", "--json", "--", "sh", "-c", "echo hello; exit 3")
    assert r.status == 3, r
    first, rest = r.out.split("\n", 1)
    assert first == "hello", r
    res = json.loads(rest)
    assert (res["reason"], res["exit_code"], res["stdout_bytes"]) == ("exited", 3, 6), res


def test_result_times_are_integers(cordon):
    r = cordon.run(["python3", "-c", PROXY_GET, "http://blocked.test:22/"], "--allow", "x.test")
    for k in ("wall_ms", "cpu_ms", "wall_us", "cpu_us"):
        assert type(r.result[k]) is int and r.result[k] >= 0, (k, r.result)
    assert abs(r.result["wall_ms"] - r.result["wall_us"] / 1000) <= 0.5, r.result
    assert r.result["wall_us"] > 0, r.result
    (d,) = r.result["egress"]["recent"]
    assert type(d["duration_ms"]) is int and type(d["duration_us"]) is int, d


# --- HOME and git ---------------------------------------------------------------------


def test_tool_caches_stay_out_of_the_workspace(cordon):
    """HOME is private to the run: what tools write there never reaches the project."""
    ws = cordon.hostdir()
    script = ('mkdir -p "$HOME/.npm/_logs" "$HOME/.cache/pip" && echo log > "$HOME/.npm/_logs/x" '
              '&& git config --global user.name sandbox && cat "$HOME/.gitconfig" && '
              'stat -c "%a %U" "$HOME" && echo "$HOME"')
    r = cordon.run(["sh", "-c", script], "-w", ws)
    assert r.status == 0, r
    assert r.out.splitlines()[-2:] == ["700 sandbox", "/tmp/home"], r
    assert list(ws.iterdir()) == [], f"tool state landed in the workspace: {list(ws.iterdir())}"


def test_git_works_on_a_bound_repository_owned_by_another_uid(cordon, hosttmp):
    """A read-only bind of someone else's repository: git reads it (safe.directory)."""
    repo = hosttmp / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first commit"],
                ["clone", "-q", "--bare", ".", "sub.git"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    os.chown(repo, 4321, 4321)  # nobody's: root's files are as foreign to uid 65534
    for d, _, files in os.walk(repo):
        for f in [d] + [os.path.join(d, f) for f in files]:
            os.chown(f, 4321, 4321)
    r = cordon.run(["git", "-C", "/src", "log", "--format=%s"], "--ro", f"{repo}:/src")
    assert (r.status, r.out) == (0, "first commit\n"), r
    # A repository beneath the bind, not at it: cloned, and a bare one too (issue 27, item 2).
    r = cordon.run(["sh", "-c", "cd ${TMPDIR:-/tmp} && git clone -q /src/.git a && "
                    "git clone -q /src/sub.git b && git -C a log --format=%s && "
                    "git -C b log --format=%s"],
                   "--ro", f"{hosttmp}:/src0", "--ro", f"{repo}:/src")
    assert (r.status, r.out) == (0, "first commit\n" * 2), r
    r = cordon.run(["git", "-C", "/src0/repo/sub.git", "log", "--format=%s"],
                   "--ro", f"{hosttmp}:/src0")
    assert (r.status, r.out) == (0, "first commit\n"), r
    # Without cordon's setting, git would refuse: the ownership really is foreign inside.
    r = cordon.run(["sh", "-c", "HOME=/nonexistent GIT_CONFIG_COUNT=0 git -C /src log --format=%s"],
                   "--ro", f"{repo}:/src")
    assert r.status != 0 and "dubious ownership" in r.err, r


# --- MCP: failures the client is told ----------------------------------------------------

# Answers initialize (with instructions of its own) and nothing else.
TINY_SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "tiny", "version": "1"}, "instructions": "tiny's own words"}
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


def mcp_client(cordon, *args):
    return RawClient(cordon.argv("mcp", *args), cordon.ident.env(), cordon.tmp)


def initialize_error(c):
    r = c.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "raw", "version": "1"}})
    assert "error" in r, r
    return r["error"]["message"]


@pytest.mark.parametrize("args,status,words", [
    (["--allow-tool", "x", "--", "no-such-server-cordon-it"], 127,
     ["the server could not start", "command not found", "no-such-server-cordon-it"]),
    (["--allow-tool", "x", "--ro", "/nonexistent-cordon-it", "--", "true"], 125,
     ["the server cannot start", "--ro", "/nonexistent-cordon-it", "does not exist"]),
    (["--allow-tool", "x", "--", "sh", "-c", "exit 3"], 3, ["exited with status 3"]),
], ids=["not-found", "missing-ro", "exits"])
def test_wrap_tells_the_client_why_the_server_is_gone(cordon, args, status, words):
    c = mcp_client(cordon, "wrap", *args)
    msg = initialize_error(c)
    for w in words:
        assert w in msg, (w, msg)
    rc, _, err = c.close()
    assert rc == status, err


def test_wrap_tells_a_client_that_asks_late(cordon):
    # A server gone before the client's first request: the wrap stays to
    # answer it with why. It had exited as soon as the server was reaped,
    # and a client slower than that (a loaded machine: CI's own flake) got
    # a broken pipe and no reason.
    c = mcp_client(cordon, "wrap", "--allow-tool", "x", "--", "no-such-server-cordon-it")
    time.sleep(1.0)  # the server is long gone by now
    msg = initialize_error(c)
    assert "command not found" in msg and "no-such-server-cordon-it" in msg, msg
    rc, _, err = c.close()
    assert rc == 127, err


def test_wrap_with_no_tools_says_so_in_the_instructions(cordon):
    c = mcp_client(cordon, "wrap", "--", "python3", "-c", TINY_SERVER)
    init = c.initialize()
    head, _, theirs = init["instructions"].partition("\n\n")
    assert "forwards no tools" in head and "--allow-tool" in head, init
    assert theirs == "tiny's own words", init
    c.close()
    c = mcp_client(cordon, "wrap", "--allow-tool", "x", "--", "python3", "-c", TINY_SERVER)
    assert c.initialize()["instructions"] == "tiny's own words"
    c.close()


LISTING_SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "lister", "version": "1"}}
    elif m.get("method") == "tools/list":
        r = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("read", "write")]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


@pytest.mark.parametrize("allow,warned", [("reed", True), ("read", False)])
def test_wrap_whose_allowlist_matches_no_tool_says_so(cordon, allow, warned):
    """tools.allow names tools, but none the server has (a typo): the client's
    log hears it once, as an MCP log message, beside the empty list."""
    c = mcp_client(cordon, "wrap", "--allow-tool", allow, "--", "python3", "-c", LISTING_SERVER)
    c.initialize()
    c.send({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}})
    got = [c.recv()]
    if warned:
        got.append(c.recv())
    c.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}})
    got += [c.answer(8)]
    listed = [m for m in got if m.get("id") == 7][0]["result"]["tools"]
    notes = [m for m in got if m.get("method") == "notifications/message"]
    assert [t["name"] for t in listed] == ([] if warned else ["read"])
    if warned:
        assert len(notes) == 1, got
        assert notes[0]["params"]["level"] == "warning"
        text = notes[0]["params"]["data"]
        assert "matches none of the 2 tools" in text and "--allow-tool" in text, text
    else:
        assert notes == [], got
    rc, _, err = c.close()
    assert err.count("matches none of the 2 tools") == (1 if warned else 0), err


def test_serve_refuses_at_start_a_policy_this_host_cannot_enforce(user_cordon):
    if held(user_cordon, "memory") == "supervisor":
        # The level meters memory itself (gvisor): nothing to refuse, and
        # serve starts as the run does.
        assert user_cordon.run(["true"], "--memory", "100M").status == 0
        c = mcp_client(user_cordon, "serve", *user_cordon.level_opts(), "--memory", "100M")
        assert "instructions" in c.initialize()
        rc, _, err = c.close()
        assert rc == 0, err
        return
    if user_cordon.run(["true"], "--memory", "100M", result=False).status == 0:
        pytest.skip("this host delegates a memory cgroup to ordinary users")
    c = mcp_client(user_cordon, "serve", *user_cordon.level_opts(), "--memory", "100M")
    msg = initialize_error(c)
    assert "cannot enforce" in msg and "--best-effort memory" in msg, msg
    rc, _, err = c.close()
    assert rc == 125 and "cordon: this host cannot enforce the policy" in err, err
    assert err.count("\n") == 1, err
    # Marked best-effort, the same policy serves.
    c = mcp_client(user_cordon, "serve", *user_cordon.level_opts(), "--memory", "100M",
                   "--best-effort", "memory")
    assert "instructions" in c.initialize()
    rc, _, err = c.close()
    assert rc == 0, err


def test_run_code_description_names_each_variable_once(cordon):
    p = cordon.hostdir() / "p.yaml"
    p.write_text("version: 1\nenv:\n  set:\n    LANG: C.UTF-8\n    HOME: /tmp/home\n"
                 "    EXTRA: x\n  pass: [PATH]\nlimits:\n  output: 64K\n")
    c = mcp_client(cordon, "serve", "-p", p)
    c.initialize()
    tools = c.request(1, "tools/list")["result"]["tools"]
    c.close()
    for t in tools:
        d = t["description"]
        env = d[d.index("The environment holds only "):].split(".")[0]
        env = env.split(" and git's")[0][len("The environment holds only "):]
        names = env.split(", ")
        assert len(names) == len(set(names)), env
        assert "EXTRA" in names and "HOME" in names, env
        # The output that comes back is what the policy's 64K allows, not more.
        assert "Up to 64 KiB each of stdout and stderr comes back" in d, d
        assert "HOME is /tmp/home" in d, d


# --- a delegated systemd scope for an ordinary user on cgroup v2 ------------------------

# A stand-in for systemd-run: records how it was asked, then runs the command
# after "--" as the real one does for --scope (exec, same process).
FAKE_SYSTEMD_RUN = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_LOG"
echo "scope=$CORDON_DELEGATED_SCOPE" >> "$FAKE_LOG"
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


def v2_offers_limits():
    """Does this host's cgroup v2 hierarchy (if any) hold memory and pids?"""
    with open("/proc/self/mountinfo") as f:
        mounts = [l.split()[4] for l in f if " - cgroup2 " in l]
    for m in mounts:
        try:
            ctrls = open(f"{m}/cgroup.controllers").read().split()
        except OSError:
            continue
        return m, "memory" in ctrls and "pids" in ctrls
    return None, False


def test_a_user_scope_is_asked_for_only_where_it_would_hold_the_limits(user_cordon):
    """On cgroup v2 with a user manager, an ordinary user's cordon re-runs itself
    in systemd-run --user --scope -p Delegate=yes; on a host whose v2 lacks the
    controllers (v1 or hybrid, like this one) it does not, and check says why."""
    bindir = user_cordon.hostdir("bin")
    fake = bindir / "systemd-run"
    fake.write_text(FAKE_SYSTEMD_RUN)
    fake.chmod(0o755)
    runtime = user_cordon.hostdir("runtime")
    (runtime / "systemd").mkdir()
    (runtime / "systemd" / "private").touch()  # where a user manager listens
    log = user_cordon.hostdir("log") / "calls"
    log.touch()
    os.chown(log, user_cordon.ident.uid, user_cordon.ident.gid)
    env = {"PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "XDG_RUNTIME_DIR": str(runtime), "FAKE_LOG": str(log)}
    r = user_cordon.raw("run", "--best-effort", "all", "--", "echo", "ran", env=env)
    assert (r.status, r.out) == (0, "ran\n"), r
    calls = log.read_text().splitlines()
    _, offers = v2_offers_limits()
    if offers:
        # Asked once (the re-run cordon never asks again), for a delegated user scope.
        assert len(calls) == 2 and calls[1] == "scope=1", calls
        assert calls[0].startswith("--user --scope --quiet --collect -p Delegate=yes -- "), calls
        assert calls[0].endswith(" run --best-effort all -- echo ran"), calls
    else:
        assert calls == [], calls
        r = user_cordon.raw("check", env=env)
        assert "delegation     this host keeps memory and pids on cgroup v1" in r.out, r
    # A run that needs no cgroup never asks.
    log.write_text("")
    r = user_cordon.raw("run", "--memory", "unlimited", "--pids", "unlimited", "--cpu",
                        "unlimited", "--", "true", env=env)
    assert r.status == 0 and log.read_text() == "", r


def test_in_a_delegated_scope_cordon_moves_into_a_leaf(user_cordon):
    """What systemd's Delegate=yes hands over (a cgroup the user owns), cordon
    uses as its own: the supervisor moves into a leaf, runs go beside it."""
    v2, _ = v2_offers_limits()
    assert v2, "no cgroup v2 hierarchy on this host"
    scope = f"{v2}/it-scope-{os.getpid()}"
    uid = user_cordon.ident.uid
    run = " ".join(user_cordon.argv("run", "--best-effort", "all", "--", "echo", "ran"))
    script = (f"mkdir {scope}\n"
              f"chown {uid} {scope} {scope}/cgroup.procs {scope}/cgroup.subtree_control\n"
              f"echo $$ > {scope}/cgroup.procs\n"
              f"CORDON_DELEGATED_SCOPE=1 {run}\n"
              f"ls {scope} | grep cordon-supervisor- || echo noleaf\n"
              f"echo $$ > {v2}/cgroup.procs\n"
              f"rmdir {scope}/cordon-supervisor-* || true\n"
              f"rmdir {scope}\n")
    r = subprocess.run(["sh", "-ec", script], env=user_cordon.ident.env(), capture_output=True,
                       text=True, timeout=60, cwd=user_cordon.tmp)
    assert r.returncode == 0, r
    out = r.stdout.splitlines()
    assert out[0] == "ran", r
    assert out[1].startswith("cordon-supervisor-"), r
    assert "not usable" not in r.stderr, r
    assert not os.path.exists(scope)


# --- cordon check --json and the default policy location -------------------------------


def test_check_json_says_what_the_text_says(cordon):
    r = cordon.raw("check", "--json")
    assert r.status == 0 and r.err == "", r
    doc = json.loads(r.out)
    text = cordon.raw("check").out
    assert doc["uid"] == cordon.ident.uid and doc["cordon_version"] in text
    ns = doc["levels"]["namespace"]
    assert ns == {"usable": True, "why": None, "default": True, "egress": ns["egress"],
                  "unix_sockets": ns["unix_sockets"]}, doc
    # How each level's command reaches the allowed hosts and unix sockets, as the text says it.
    for lvl in doc["levels"].values():
        assert f"egress: {lvl['egress']}" in text, (lvl, text)
        assert f"unix sockets: {lvl['unix_sockets']}" in text, (lvl, text)
    cg = doc["cgroups"]
    for c in ("memory", "pids", "cpu"):
        line = next(l for l in text.splitlines() if l.strip().startswith(c + " "))
        assert cg[c]["usable"] == line.split(None, 1)[1].startswith("usable"), (cg, line)
        # The same reason (each run probes with a cgroup named by its own pid).
        assert cg[c]["usable"] or re.sub(r"check-\d+", "", cg[c]["why"]) in \
            re.sub(r"check-\d+", "", line), (cg, line)
    assert cg["delegation"] in text, cg
    assert doc["default_limits"]["memory"]["value"] == "1G", doc
    assert set(doc["default_limits"]) == {"wall", "cpu", "memory", "pids", "output", "file_size",
                                          "open_files"}, doc


def test_default_policy_location(cordon):
    home = cordon.hostdir("home")
    conf = home / ".config" / "cordon"
    conf.mkdir(parents=True)
    env = {"HOME": str(home)}
    # Nothing anywhere: the built-in defaults, and where cordon looked.
    r = cordon.raw("policy", "check", env=env)
    doc = json.loads(r.out)
    assert (r.status, doc["file"], doc["from"]) == (0, None, "built-in defaults"), r
    # ~/.config/cordon/policy.yaml, used by cordon run when no -p is given.
    (conf / "policy.yaml").write_text("version: 1\nenv:\n  set:\n    FROM_POLICY: home\n")
    r = cordon.raw("policy", "check", env=env)
    doc = json.loads(r.out)
    assert (doc["file"], doc["from"]) == (str(conf / "policy.yaml"),
                                          "~/.config/cordon/policy.yaml"), r
    r = cordon.raw("run", "--quiet", "--", "sh", "-c", "echo $FROM_POLICY", env=env)
    assert (r.status, r.out) == (0, "home\n"), r
    # $CORDON_POLICY comes first, and must exist when named.
    other = cordon.hostdir("other") / "p.yaml"
    other.write_text("version: 1\nenv:\n  set:\n    FROM_POLICY: env\n")
    env["CORDON_POLICY"] = str(other)
    r = cordon.raw("run", "--quiet", "--", "sh", "-c", "echo $FROM_POLICY", env=env)
    assert (r.status, r.out) == (0, "env\n"), r
    assert json.loads(cordon.raw("policy", "check", env=env).out)["from"] == "$CORDON_POLICY"
    env["CORDON_POLICY"] = str(other) + ".missing"
    for args in (["policy", "check"], ["run", "--", "true"]):
        assert_cordon_refused(cordon.raw(*args, env=env), "$CORDON_POLICY", ".missing")
    # -p still wins over every default.
    r = cordon.raw("run", "--quiet", "-p", other, "--", "sh", "-c", "echo $FROM_POLICY", env=env)
    assert (r.status, r.out) == (0, "env\n"), r


# --- cordon run --tty ---------------------------------------------------------------------


def on_a_terminal(cordon, cmd, steps, rows=33, cols=101, timeout=20, opts=("--ro", None)):
    """cordon run --tty [OPTS] CMD with a real pty (python's pty module) as its terminal
    (OPTS: the probe's bind by default). STEPS: (bytes to wait for, action(master fd)) in
    turn. All output, exit status."""
    if opts == ("--ro", None):
        opts = ("--ro", f"{cordon.probe_bin}:{PROBE}")
    argv = cordon.argv("run", "--tty", *opts, "--", *cmd)
    env = cordon.ident.env({"TERM": "xterm"})
    pid, fd = pty.fork()
    if pid == 0:
        try:
            # As at a person's terminal: a suite started in the background
            # (an async list: SIGINT ignored) must not pass that on to ^C.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
            os.chdir(cordon.tmp)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    if conftest._test_pids is not None:  # its leftovers are the test's (see conftest)
        conftest._test_pids.add(pid)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    out, end, steps = b"", time.monotonic() + timeout, list(steps)
    try:
        while time.monotonic() < end:
            if steps and steps[0][0] in out:
                steps.pop(0)[1](fd)
            r, _, _ = select.select([fd], [], [], 0.1)
            if not r:
                continue
            try:
                d = os.read(fd, 4096)
            except OSError:  # EIO: every holder of the terminal is gone
                break
            if not d:
                break
            out += d
    finally:
        if time.monotonic() >= end:
            os.kill(pid, signal.SIGKILL)
        _, st = os.waitpid(pid, 0)
        os.close(fd)
    assert not steps, f"never saw {steps[0][0]!r}: {out!r}"
    return out.decode(errors="replace"), os.waitstatus_to_exitcode(st)


def test_tty_is_given_or_refused_never_dropped(cordon):
    """A level with no terminal of the sandbox's own to give (process: the
    host's devpts; gvisor: runsc's host pty; microvm: the guest's agent has
    none) refuses --tty with why (125) before anything runs: the command
    never runs without the terminal it asked for, nor writes its workspace."""
    ws = cordon.hostdir("ws")
    out, status = on_a_terminal(cordon, ["sh", "-c", "stty size; touch ran"], [],
                                opts=("-w", ws))
    if cordon.level == "namespace":
        assert status == 0 and "33 101" in out and os.listdir(ws) == ["ran"], out
        return
    assert status == 125, out
    assert f"cordon: {cordon.level}: --tty is not supported at this level" in out, out
    assert "33 101" not in out and os.listdir(ws) == [], out
    assert wait_until(lambda: not pids_with(str(ws)), 30), pids_with(str(ws))  # QEMU's share


def test_tty_is_the_sandboxs_own_terminal(cordon):
    out, status = on_a_terminal(
        cordon, ["sh", "-c", "tty; stty size; echo READY; read x; echo got:$x; "
                             "readlink /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2; "
                             "ls -1 /dev/pts"],
        [(b"READY", lambda fd: os.write(fd, b"hello\n"))])
    lines = [l for l in out.replace("\r\n", "\n").splitlines() if not DEGRADED.match(l)]
    assert status == 0, out
    # A pty of the sandbox's own devpts, sized like ours, on all three stdio.
    tty = lines[0]
    assert tty.startswith("/dev/pts/") and lines[1] == "33 101", out
    assert "got:hello" in lines, out
    assert lines[-5:-2] == [tty, tty, tty], out
    # The sandbox's devpts holds its one terminal, not the host's (ours among them).
    assert lines[-2:] == ["0", "ptmx"], out


def test_tty_window_size_and_interrupt_are_passed_on(cordon):
    def resize(fd):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 44, 120, 0, 0))
        time.sleep(0.3)  # SIGWINCH reaches cordon, which resizes the run's terminal
        os.write(fd, b"\n")
    out, status = on_a_terminal(
        cordon, ["sh", "-c", "echo READY; read x; stty size; echo SIZED; exec sleep 100"],
        [(b"READY", resize), (b"SIZED", lambda fd: os.write(fd, b"\x03"))])
    assert "44 120" in out, out
    # ^C went to the run's terminal, whose line discipline interrupted the command
    # (exec: one process either way, so no sleep outlives a shell the ^C reached first).
    assert status == 128 + signal.SIGINT, out


def test_tty_cannot_push_input_anywhere(cordon):
    """TIOCSTI stays impossible: the command cannot inject into its terminal,
    and the caller's terminal (the test's pty) receives nothing it did not send."""
    out, status = on_a_terminal(
        cordon, [PROBE, "ioctl-tiocsti", "0"], [])
    assert status in (errno.EPERM, errno.EIO), out
    assert "#" not in out, out


def test_tty_needs_a_terminal(cordon):
    r = cordon.raw("run", "--tty", "--", "true")
    assert_cordon_refused(r, "--tty", "terminal")


# --- the man page and bash completion -------------------------------------------------------


def run_options(cordon):
    text = cordon.raw("run", "--help").out
    return sorted(set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", text, re.M)))


def test_man_page_and_completion_are_installed(hosttmp):
    dest = hosttmp / "dest"
    r = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--quiet",
                        "--destdir", str(dest)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r
    man = list(dest.rglob("man1/cordon.1"))
    comp = list(dest.rglob("bash-completion/completions/cordon"))
    assert len(man) == 1 and len(comp) == 1, (man, comp)
    # groff reads it without a warning, and it is the one in the tree.
    r = subprocess.run(["groff", "-man", "-ww", "-z", str(man[0])], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stderr == "", r
    assert man[0].read_text() == (REPO / "doc" / "cordon.1").read_text()
    # The README's MCP example names the installed example policy.
    assert list(dest.rglob("share/cordon/mcp-filesystem.yaml")), list(dest.rglob("*.yaml"))
    assert "/usr/local/share/cordon/mcp-filesystem.yaml" in (REPO / "README.md").read_text()


def test_man_page_and_completion_know_every_run_option(cordon):
    opts = run_options(cordon)
    assert "--tty" in opts and "--quiet" in opts and len(opts) > 25, opts
    man = subprocess.run(["groff", "-man", "-Tascii", "-P", "-cbou",
                          str(REPO / "doc" / "cordon.1")], capture_output=True,
                         text=True).stdout
    comp = (REPO / "contrib" / "cordon.bash-completion").read_text()
    assert [o for o in opts if o not in man] == [], "options missing from cordon.1"
    assert [o for o in opts if o not in re.findall(r"--[a-z][a-z-]*", comp)] == [], \
        "missing from completion"


@pytest.mark.parametrize("words,want", [
    (["cordon", ""], {"run", "check", "fetch", "mcp", "policy", "audit"}),
    (["cordon", "run", "--me"], {"--memory"}),
    (["cordon", "run", "--net", ""], {"none", "gateway"}),
    (["cordon", "run", "--best-effort", "p"], {"pids"}),
    (["cordon", "mcp", "wrap", "--allow-t"], {"--allow-tool"}),
    (["cordon", "mcp", "serve", "--tt"], set()),  # --tty is cordon run's alone
    (["cordon", "check", "--j"], {"--json"}),
    (["cordon", "run", "--", "pytho"], {"python3"}),
])
def test_bash_completion(words, want):
    script = (f"source {REPO / 'contrib' / 'cordon.bash-completion'}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
              "_cordon; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    got = {w for w in r.stdout.split("\n") if w}
    assert want <= got and (want or not got), (words, got, r.stderr)
