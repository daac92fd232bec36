"""
network.ask: egress destinations the static rules do not allow are asked of
the runtime decider (decider.socket) instead of refused. The gateway asks
without stopping its loop, fails closed (late, crashed, garbage: 403), keeps
an allow_run for the run, and never asks about an address class the SSRF
rules refuse. Every question and answer is a decider.ask event in the audit
log, with the run's id.

"The internet" is two servers on 127.0.0.2: `asked` (reached as asked.test,
on network.ask) and `free` (example.test, on network.allow). An internal
service on 127.0.0.1 is on network.ask too, by name and by address: it must
never see a connection, and the decider must never hear of it.
"""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

import egress_servers as es
from conftest import assert_cordon_refused
from deciders import stop_decider, ThreadDecider, crashing_decider

EG = "/eg"
DECIDER = pathlib.Path(__file__).resolve().parents[2] / "examples" / "decider.py"

# Requests in parallel through the gateway, each [DELAY_S, TARGET, HOST]:
# status, X-Cordon-Denied and when each finished (seconds from the start).
CLIENT = r'''
import http.client, json, sys, threading, time
reqs, out, t0 = json.loads(sys.argv[1]), {}, time.monotonic()
def go(i, delay, target, host):
    time.sleep(delay)
    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    try:
        c.request("GET", target, headers={"Host": host})
        r = c.getresponse()
        body = r.read().decode("latin-1")
        out[i] = {"status": r.status, "denied": r.getheader("X-Cordon-Denied"), "body": body}
    except OSError as e:
        out[i] = {"error": type(e).__name__}
    out[i]["at"] = time.monotonic() - t0
ts = [threading.Thread(target=go, args=(i, *q)) for i, q in enumerate(reqs)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(len(reqs)): print(json.dumps(out[i]))
'''


class World:
    def __init__(self, d):
        self.dir = d
        self.asked = es.Server("asked", "127.0.0.2")
        self.free = es.Server("free", "127.0.0.2")
        self.internal = es.Server("internal", "127.0.0.1")
        (d / "client.py").write_text(CLIENT)
        os.chmod(d / "client.py", 0o644)
        self.key = f"asked.test:{self.asked.port}"

    def url(self, name, server, path="/hello"):
        return [f"http://{name}:{server.port}{path}", f"{name}:{server.port}"]

    def servers(self):
        return (self.asked, self.free, self.internal)


@pytest.fixture(scope="module")
def world():
    d = pathlib.Path(tempfile.mkdtemp(prefix="cit-ask-"))
    os.chmod(d, 0o755)
    w = World(d)
    yield w
    for s in w.servers():
        s.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ask(cordon, world):
    """A decider socket's place, the audit log, and a run of client.py under network.ask."""
    for s in world.servers():
        s.reset()
    sdir = cordon.hostdir("decider", mode=0o755)
    sock = sdir / "decider.sock"
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"

    def run(reqs, timeout="1s"):
        p = cordon.hostdir() / "policy.yaml"
        i = world.internal.port
        p.write_text(
            "version: 1\nnetwork:\n"
            f"  ask: ['{world.key}', 'internal.test:{i}', '127.0.0.1:{i}']\n"
            f"  allow: ['example.test:{world.free.port}']\n"
            f"  allow_private: [127.0.0.2/32]\n"
            f"  resolve: [asked.test=127.0.0.2, example.test=127.0.0.2, "
            f"internal.test=127.0.0.1]\n"
            f"decider:\n  socket: {sock}\n  timeout: {timeout}\n"
            f"audit:\n  file: {log}\n")
        os.chmod(p, 0o644)
        r = cordon.run(["python3", f"{EG}/client.py", json.dumps(reqs)], "-p", p,
                       "--ro", f"{world.dir}:{EG}", "-t", "60s")
        assert r.status == 0, r
        return [json.loads(l) for l in r.out.splitlines()], r

    class A:
        pass

    a = A()
    a.sock, a.log, a.run = sock, log, run
    yield a
    assert world.internal.count() == 0, world.internal.requests


def reference_decider(cordon, sock, rules):
    f = cordon.hostdir() / "rules.json"
    f.write_text(json.dumps(rules))
    os.chmod(f, 0o644)
    d = subprocess.Popen(["/usr/bin/python3", str(DECIDER), str(sock), "--rules", str(f)],
                         stderr=subprocess.PIPE)
    assert b"listening" in d.stderr.readline()
    return d


def stop(d):
    """End the reference decider; its log (one line per question)."""
    d.kill()
    _, err = d.communicate()
    return [l for l in err.decode().splitlines() if "->" in l]


def audit(log, kind):
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == kind]


def test_allowed_once_reaches_the_server(cordon, world, ask):
    d = reference_decider(cordon, ask.sock, {world.key: "allow_once"})
    try:
        out, r = ask.run([[0, *world.url("asked.test", world.asked)],
                          [0.5, *world.url("asked.test", world.asked)]])
    finally:
        asked = stop(d)
    assert [o["status"] for o in out] == [200, 200], out
    assert out[0]["body"] == "hello from asked\n", out
    assert world.asked.count() == 2
    assert len(asked) == 2, asked  # allow_once: asked each time
    ev = audit(ask.log, "decider.ask")
    assert len(ev) == 2, ev
    run_id = r.result["run_id"]
    for e in ev:
        assert e["run"] == run_id, e
        assert (e["kind"], e["key"], e["decision"], e["failed"]) == (
            "egress", world.key, "allow_once", False), e
        assert e["rule"] == f"ask:{world.key}", e
        assert e["question"]["addresses"] == ["127.0.0.2"], e
        assert e["decider"]["name"] == "cordon-reference-decider/1", e
        assert e["decider"]["socket"] == str(ask.sock) and e["decider"]["pid"] == d.pid, e
    dec = audit(ask.log, "egress.decision")
    assert [(x["allowed"], x["rule"]) for x in dec] == [(True, f"ask:{world.key}")] * 2, dec


def test_allow_run_is_remembered(cordon, world, ask):
    d = reference_decider(cordon, ask.sock, {world.key: "allow_run"})
    try:
        out, _ = ask.run([[0, *world.url("asked.test", world.asked)],
                          [0.5, *world.url("asked.test", world.asked, "/again")],
                          [1.0, *world.url("asked.test", world.asked, "/third")]])
    finally:
        asked = stop(d)
    assert [o["status"] for o in out] == [200, 200, 200], out
    assert [q["path"] for q in world.asked.requests] == ["/hello", "/again", "/third"]
    assert asked == [f"decider: egress {world.key} -> allow_run"], asked  # asked once
    assert [e["decision"] for e in audit(ask.log, "decider.ask")] == ["allow_run"]
    dec = audit(ask.log, "egress.decision")
    assert "remembered" in dec[-1]["reason"], dec


def test_denied_is_403_and_no_connection(cordon, world, ask):
    d = reference_decider(cordon, ask.sock, {world.key: "deny"})
    try:
        out, _ = ask.run([[0, *world.url("asked.test", world.asked)]])
    finally:
        asked = stop(d)
    (o,) = out
    assert o["status"] == 403 and o["denied"] == "decider_denied", o
    assert "denied: rule for" in o["body"], o
    assert world.asked.count() == 0
    assert len(asked) == 1
    (e,) = audit(ask.log, "decider.ask")
    assert e["decision"] == "deny" and not e["failed"], e
    (x,) = audit(ask.log, "egress.decision")
    assert not x["allowed"] and x["rule"] == "decider_denied", x


def test_timeout_denies_and_the_loop_goes_on(cordon, world, ask):
    dec = ThreadDecider(ask.sock, "slow", delay=4.0)
    try:
        # The asked request waits for a decider that answers in 4 s (past the
        # 1 s deadline); the allowed one starts 0.3 s later, while it waits.
        out, _ = ask.run([[0, *world.url("asked.test", world.asked)],
                          [0.3, *world.url("example.test", world.free)]], timeout="1s")
    finally:
        dec.close()
    slow, free = out
    assert slow["status"] == 403 and slow["denied"] == "decider_timeout", slow
    assert 0.9 <= slow["at"] < 2.5, slow  # the deadline, plus a little
    assert free["status"] == 200 and free["at"] < slow["at"], out  # served meanwhile
    assert world.asked.count() == 0 and world.free.count() == 1
    assert len(dec.questions) == 1
    assert dec.questions[0]["kind"] == "egress" and dec.questions[0]["key"] == world.key
    (e,) = audit(ask.log, "decider.ask")
    assert e["decision"] == "deny" and e["failed"] and "timeout" in e["reason"], e


@pytest.mark.parametrize("mode,words", [
    ("garbage", "not a decision"),
    ("duplicate", "duplicate object key"),
    ("crash", "closed the connection"),
    ("missing", "unreachable"),
])
def test_failed_decider_denies(cordon, world, ask, mode, words):
    dec = None
    if mode == "crash":
        dec = crashing_decider(ask.sock)
    elif mode != "missing":
        dec = ThreadDecider(ask.sock, mode)
    try:
        out, _ = ask.run([[0, *world.url("asked.test", world.asked)]])
    finally:
        stop_decider(dec)
    (o,) = out
    assert o["status"] == 403 and o["denied"] == "decider_failed", o
    assert words in o["body"], o
    assert world.asked.count() == 0
    (e,) = audit(ask.log, "decider.ask")
    assert e["decision"] == "deny" and e["failed"] and words in e["reason"], e


def test_private_address_is_never_asked(cordon, world, ask):
    # A decider that would allow anything: it must not be asked at all.
    d = reference_decider(cordon, ask.sock, {"*": "allow_run"})
    try:
        out, _ = ask.run([[0, *world.url("internal.test", world.internal)],
                          [0, *world.url("127.0.0.1", world.internal)]])
    finally:
        asked = stop(d)
    assert [(o["status"], o["denied"]) for o in out] == [
        (403, "ssrf:loopback"), (403, "ssrf:loopback")], out
    assert asked == [], asked
    assert audit(ask.log, "decider.ask") == []
    # the fixture checks the internal service saw no connection


@pytest.mark.parametrize("text,words", [
    ("network:\n  ask: [example.com]\n", ["network.ask", "decider.socket"]),
    ("network:\n  ask: [example.com]\ndecider:\n  command: /bin/true\n",
     ["network.ask", "decider.socket", "decider.command"]),
    ("network:\n  ask: ['exa mple.com']\ndecider:\n  socket: /tmp/x.sock\n", ["network.ask"]),
    ("network:\n  ask: true\ndecider:\n  socket: /tmp/x.sock\n", ["network.ask"]),
    ("network:\n  mode: none\n  ask: [example.com]\ndecider:\n  socket: /tmp/x.sock\n",
     ["network.ask", "mode gateway"]),
])
def test_invalid_ask_is_refused(cordon, text, words):
    p = cordon.hostdir() / "policy.yaml"
    p.write_text("version: 1\n" + text)
    os.chmod(p, 0o644)
    r = cordon.raw("run", "-p", p, "--", "/bin/true")
    assert_cordon_refused(r, *words)
