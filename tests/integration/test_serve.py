"""
`cordon serve`: the JSON-RPC daemon on a unix socket. Every run is a real
sandbox, handed out of the warm pool where the test says so; hostile
clients are real sockets that send garbage, flood, stop reading or vanish.
Each test ends with the autouse check that no cgroup or temp entry is left.
"""

import base64
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from conftest import NOBODY, marker, pids_with, wait_until
from serve_util import Daemon, Rpc, Stopped, connect_as
from test_audit import assert_intact


@pytest.fixture
def daemon(cordon):
    made = []

    def make(*opts, **kw):
        # At the suite's level, as the cold runs the tests compare it with.
        level = [] if "--level" in opts else cordon.level_opts()
        d = Daemon(cordon, *level, *opts, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.stop(signal.SIGTERM)


def test_run_answers_like_cordon_run(daemon):
    d = daemon("--pool", "1")
    c = d.connect()
    r = c.result("run", {"argv": ["sh", "-c", "read x; echo out:$x:$FOO; echo err >&2; exit 3"],
                         "stdin": "in\n", "env": {"FOO": "bar"}})
    assert (r["exit_code"], r["signal"], r["reason"], r["status"]) == (3, None, "exited", 3), r
    assert (r["stdout"], r["stderr"]) == ("out:in:bar\n", "err\n"), r
    assert (r["stdout_encoding"], r["stdout_truncated"], r["stdout_total"]) == ("utf-8", False, 11)
    assert len(r["run_id"]) == 32 and r["result"]["run_id"] == r["run_id"]
    assert r["times"]["total_ms"] >= r["times"]["wall_ms"] > 0

    r = c.result("run", {"code": "import sys; sys.stdout.buffer.write(bytes(range(256)))",
                         "language": "python"})
    assert r["stdout_encoding"] == "base64", r
    assert base64.b64decode(r["stdout"]) == bytes(range(256))

    r = c.result("run", {"argv": ["sh", "-c", "kill -9 $$"]})
    assert (r["exit_code"], r["signal"], r["reason"]) == (None, 9, "exited"), r

    r = c.result("run", {"argv": ["sleep", "30"], "timeout": 0.5})
    assert r["reason"] == "timeout" and r["times"]["wall_ms"] < 10000, json.dumps(r)

    r = c.result("run", {"argv": ["sh", "-c", "head -c 3000000 /dev/zero"]})
    assert r["stdout_truncated"] and r["stdout_total"] == 3000000, {**r, "stdout": "..."}
    assert len(r["stdout"]) == 1 << 20

    r = c.result("run", {"argv": ["no-such-command-here"]})
    assert r["status"] == 127 and "command not found" in r["error"], r


def test_streaming_notifications(daemon):
    d = daemon("--pool", "1")
    c = d.connect()
    r = c.result("run", {"argv": ["sh", "-c", "echo one; sleep 0.3; echo two >&2; echo three"],
                         "stream": True})
    chunks = [(n["params"]["stream"], n["params"]["data"]) for n in c.notes
              if n["method"] == "run.output"]
    assert all(n["params"]["run_id"] == r["run_id"] and n["params"]["id"] == 1 for n in c.notes)
    assert "".join(t for s, t in chunks if s == "stdout") == r["stdout"] == "one\nthree\n"
    assert "".join(t for s, t in chunks if s == "stderr") == "two\n"
    # The first chunk came before the command ended: it streamed.
    assert chunks[0] == ("stdout", "one\n")


def test_pooled_run_sees_nothing_of_the_previous_one(daemon, cordon):
    """A call leaves files, shm, an abstract socket, env, a key and a process;
    the next call, from the same pool, finds none of it."""
    d = daemon("--pool", "1", "--max-running", "1")
    c = d.connect()
    mark = marker()
    dirty = r"""
import ctypes, os, socket, subprocess, sys
open('/tmp/residue', 'w').write('x')
open('/dev/shm/residue', 'w').write('x')
open('/workspace/residue', 'w').write('x')
s = socket.socket(socket.AF_UNIX); s.bind('\0MARK'); s.listen()
os.environ['RESIDUE'] = '1'
libc = ctypes.CDLL(None, use_errno=True)
for ring in (-3, -4, -5):  # session, user, user-session keyrings
    k = libc.syscall(248, b'user', b'MARK', b'secret', 6, ring)
    print('add_key', ring, k, ctypes.get_errno())
subprocess.Popen(['sh', '-c', 'sleep 30; : MARK'], start_new_session=True)
print('dirty')
""".replace("MARK", mark)
    clean = r"""
import os, sys
seen = []
# /tmp/home is each run's own fresh HOME: what is in it counts, not it.
for d in ('/tmp', '/tmp/home', '/dev/shm', '/workspace'):
    seen += [d + '/' + e for e in os.listdir(d) if d + '/' + e != '/tmp/home']
if 'MARK' in open('/proc/net/unix').read(): seen.append('abstract socket')
if 'MARK' in open('/proc/keys').read(): seen.append('key')
if 'RESIDUE' in os.environ: seen.append('env')
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            if b'MARK' in open('/proc/%s/cmdline' % p, 'rb').read() and int(p) != os.getpid():
                seen.append('process ' + p)
        except OSError:
            pass
print(repr(seen))
""".replace("MARK", mark)
    # What a fresh sandbox holds by itself (a cold `cordon run`, and a pooled
    # run before any other): the pooled run after the dirty one holds the same.
    cold = cordon.run(["python3", "-c", clean])
    assert cold.status == 0 and mark not in cold.out, cold
    d.pool_ready(1)
    r0 = c.result("run", {"code": clean, "language": "python"})
    assert r0["pooled"] and r0["stdout"] == cold.out, (r0, cold.out)
    d.pool_ready(1)
    r1 = c.result("run", {"code": dirty, "language": "python"})
    assert r1["exit_code"] == 0 and "dirty" in r1["stdout"], r1
    d.pool_ready(1)
    r2 = c.result("run", {"code": clean, "language": "python"})
    assert r2["pooled"] and r2["exit_code"] == 0, r2
    assert r2["stdout"] == cold.out, (r2["stdout"], cold.out)
    # Nor on the host: the first run's sleeper died with its sandbox.
    assert wait_until(lambda: not pids_with(mark), 10), pids_with(mark)


def test_secrets_are_never_pooled(daemon, host_secret):
    path, value = host_secret
    d = daemon("--pool", "2", "--net", "gateway", "--secret", f"TOKEN=file:{path}@example.com")
    c = d.connect()
    st = c.result("stats")
    assert st["pool"]["target"] == 0 and st["pool"]["ready"] == 0, st
    r = c.result("run", {"argv": ["sh", "-c", "echo $TOKEN"]})
    assert r["exit_code"] == 0 and not r["pooled"], r
    assert value not in r["stdout"] and r["stdout"].strip(), r
    # Each call gets its own placeholder, made at its start.
    r2 = c.result("run", {"argv": ["sh", "-c", "echo $TOKEN"], "env": {"TOKEN": "mine"}})
    assert r2["stdout"] != r["stdout"] and r2["stdout"].strip() != "mine", (r, r2)


def test_hostile_input_gets_errors_and_others_go_on(daemon):
    d = daemon("--pool", "1")
    bad, good = d.connect(), d.connect()
    cases = [
        (b"not json\n", -32700, "parse error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"run","params":{"argv":"sh"}}\n', -32602,
         '"argv" must be a non-empty array of strings'),
        (b'{"jsonrpc":"2.0","id":2,"method":"run","params":{"argv":["true"],"timeout":"1"}}\n',
         -32602, '"timeout" must be a number'),
        (b'{"jsonrpc":"2.0","id":3,"method":"run","params":{"argv":["true"],"env":{"A":1}}}\n',
         -32602, '"env".A must be a string'),
        (b'{"jsonrpc":"2.0","id":4,"method":"run","params":{"argv":["true"],"bogus":1}}\n',
         -32602, 'unknown parameter "bogus"'),
        (b'{"jsonrpc":"2.0","id":5,"method":"format.disk"}\n', -32601, 'unknown method'),
        (b'{"jsonrpc":"2.0","id":6,"method":"run","params":[1]}\n', -32602, "must be an object"),
        (b'{"jsonrpc":"1.0","id":7,"method":"health"}\n', -32600, "invalid request"),
        (b'[1,2]\n', -32600, "invalid request"),
        (b'{"jsonrpc":"2.0","id":8,"id":9,"method":"health"}\n', -32700, "parse error"),
    ]
    for line, code, words in cases:
        bad.send_raw(line)
        ans = bad.answer()
        assert ans["error"]["code"] == code and words in ans["error"]["message"], (line, ans)
    # A frame past the cap (16 MiB) is dropped as it arrives, answered, and the
    # connection goes on.
    bad.send_raw(b'{"jsonrpc":"2.0","id":10,"method":"run","params":{"stdin":"' +
                 b"a" * (17 << 20) + b'"}}\n')
    ans = bad.answer()
    assert ans["error"]["code"] == -32600 and "longer than" in ans["error"]["message"], ans
    assert bad.result("health")["ok"]
    assert good.result("run", {"argv": ["echo", "fine"]})["stdout"] == "fine\n"
    st = good.result("stats")
    assert st["refusals"]["bad_requests"] >= len(cases), st


def test_slow_and_vanished_clients_do_not_disturb_others(daemon):
    d = daemon("--pool", "2")
    mark = marker()
    # A client that asks for a lot of output and never reads it.
    slow = d.connect()
    for i in range(20):
        slow.send("run", {"argv": ["sh", "-c", "head -c 900000 /dev/zero | tr '\\0' a"]})
    # A client that starts a long run and vanishes.
    gone = d.connect()
    gone.send("run", {"argv": ["sh", "-c", f"sleep 60; : {mark}"]})
    assert wait_until(lambda: pids_with(mark), 15)
    gone.close()
    other = d.connect(timeout=30)
    t0 = time.monotonic()
    assert other.result("run", {"argv": ["echo", "ok"]})["stdout"] == "ok\n"
    assert time.monotonic() - t0 < 20
    # The vanished client's run was stopped.
    assert wait_until(lambda: not pids_with(mark), 20), pids_with(mark)
    slow.close()
    assert other.result("health")["ok"]


def test_idle_connections_and_a_burst(daemon):
    d = daemon("--pool", "2", "--max-queued", "32")
    idle = [d.connect() for _ in range(1000)]
    c = d.connect(timeout=120)
    assert c.result("stats")["refusals"]["open_connections"] == 1001
    assert c.result("run", {"argv": ["echo", "still"]})["stdout"] == "still\n"

    # 10,000 calls in a burst on one connection: every one is answered, the
    # ones beyond the connection's share with a clear "busy".
    n = 10000
    answers = {}

    def reader():
        while len(answers) < n:
            msg = c.line()
            if "id" in msg:
                answers[msg["id"]] = msg

    t = threading.Thread(target=reader)
    t.start()
    payload = b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "run",
                                   "params": {"argv": ["true"]}}).encode() + b"\n"
                       for i in range(n))
    c.sock.sendall(payload)
    t.join(300)
    assert not t.is_alive() and len(answers) == n
    ok = [a for a in answers.values() if "result" in a]
    busy = [a for a in answers.values() if "error" in a]
    assert all(a["result"]["exit_code"] == 0 for a in ok), [
        a for a in ok if a["result"]["exit_code"] != 0][:3]
    assert all(a["error"]["code"] == -32002 and a["error"]["message"].startswith("busy")
               for a in busy), busy[:3]
    assert ok and busy
    other = d.connect()
    st = other.result("stats")
    assert st["refusals"]["busy"] == len(busy) and st["runs"]["running"] == 0, st
    for s in idle:
        s.close()


def test_peer_uid_is_checked(root_cordon):
    """A root daemon, probed by uid 65534 (the suite's second identity)."""
    d = Daemon(root_cordon, "--pool", "0")
    st = d.path.stat()
    assert stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o777 == 0o600, oct(st.st_mode)
    os.chmod(d.dir, 0o755)
    os.chmod(d.path, 0o666)  # even with the mode opened up, the uid check holds
    # A refused peer hears why as soon as it connects; an allowed one is answered.
    probe = ("import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
             "s.settimeout(0.5)\n"
             "try: print(s.makefile().readline()); sys.exit()\n"
             "except socket.timeout: pass\n"
             "s.settimeout(10); s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"health\"}\\n'); "
             "print(s.makefile().readline())")
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                 "/usr/bin/python3", "-c", probe, str(d.path)]
    out = subprocess.run(as_nobody, capture_output=True, text=True, timeout=30)
    ans = json.loads(out.stdout)
    assert ans["error"]["code"] == -32004 and "may not use" in ans["error"]["message"], out
    assert d.connect().result("stats")["refusals"]["peers"] == 1
    d.stop()
    d2 = Daemon(root_cordon, "--pool", "0", "--allow-uid", str(NOBODY))
    os.chmod(d2.dir, 0o755)
    os.chmod(d2.path, 0o666)
    as_nobody[-1] = str(d2.path)
    out = subprocess.run(as_nobody, capture_output=True, text=True, timeout=30)
    d2.stop()
    assert json.loads(out.stdout)["result"]["ok"], out


def test_kill_9_leaves_nothing_and_a_restart_serves(daemon, cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "3", "--audit", log)
    d.pool_ready(3)
    mark = marker()
    c = d.connect()
    c.send("run", {"argv": ["sh", "-c", f"sleep 60; : {mark}"]})
    assert wait_until(lambda: pids_with(mark), 15)
    before = {p for p in pids_with("cordon")}
    os.killpg(d.proc.pid, signal.SIGKILL) if False else d.proc.kill()
    d.proc.wait()
    # Its sandboxes, supervisors and watchdogs go (the autouse check covers
    # cgroups and temp entries).
    assert wait_until(lambda: not pids_with(mark), 20), pids_with(mark)
    assert wait_until(lambda: not (set(pids_with(str(d.path))) & before), 20)
    assert d.path.exists()  # stale: the restart replaces it
    d.start()
    assert d.connect().result("run", {"argv": ["echo", "again"]})["stdout"] == "again\n"
    d.stop()
    evs = assert_intact(bins, log)
    starts = [e["run"] for e in evs if e["type"] == "run.start"]
    ends = [e["run"] for e in evs if e["type"] == "run.end"]
    # Pooled runs that never started left no record; the killed one is closed.
    assert sorted(starts) == sorted(ends) and len(starts) == 2, [e["type"] for e in evs]


def test_sigterm_drains_running_calls(daemon):
    d = daemon("--pool", "1", "--grace", "20s")
    c = d.connect()
    c.send("run", {"argv": ["sh", "-c", "sleep 1; echo done"]})
    time.sleep(0.3)
    d.proc.send_signal(signal.SIGTERM)
    ans = c.answer()
    assert ans["result"]["stdout"] == "done\n", ans
    rc, err = d.stop()
    assert rc == 0 and not d.path.exists(), err


def test_second_daemon_on_a_live_socket_is_refused(daemon, cordon):
    d = daemon("--pool", "0")
    r = cordon.raw("serve", "--socket", d.path)
    assert r.status == 125 and r.err == f"cordon: a daemon is already serving on '{d.path}'\n", r
    other = d.dir / "other.sock"
    for opts, msg in [(["--pool", "lots"], "--pool: expected a number from 0 to 64, got 'lots'"),
                      (["--pool", "65"], "--pool: expected a number from 0 to 64, got '65'"),
                      (["--grace", "0"], "--grace: expected a duration like 10s, at most 3600s, got '0'"),
                      (["--max-running", "0"], "serve: --max-running must be at least 1"),
                      (["--max-sessions", "0"], "serve: --max-sessions must be at least 1"),
                      (["--max-connections", "65537"],
                       "--max-connections: expected a number from 0 to 65536, got '65537'"),
                      (["--max-buffered", "16M"],
                       "serve: --max-buffered: expected a size from 32M to 64G, got '16M'"),
                      (["--allow-uid", "x"], "serve: --allow-uid: expected a uid, got 'x'"),
                      (["--result", "/tmp/r"], "serve: --result is for cordon run; each call's "
                                               "result is in its answer"),
                      (["true"], "serve: unexpected argument 'true'; it takes no command"),
                      (["--pool"], "option '--pool' needs a value")]:
        r = cordon.raw("serve", "--socket", other, *opts, timeout=10)
        assert r.status == 125 and r.err == f"cordon: {msg}\n", (opts, r)
        assert not other.exists()
    r = cordon.raw("serve")
    assert r.status == 125 and r.err == "cordon: serve: missing --socket PATH\n", r
    # Another socket on the live daemon's state directory: refused, and the
    # live daemon's sessions are left alone (a second used to empty them).
    c = d.connect()
    sid = c.result("session.create")["session_id"]
    c.result("session.write_file", {"session_id": sid, "path": "f", "content": "kept\n"})
    state = str(d.path) + ".d"
    r = cordon.raw("serve", "--socket", other, "--state-dir", state, timeout=10)
    assert r.status == 125 and r.err == (f"cordon: state directory '{state}' is in use by "
                                         "another daemon\n"), r
    assert not other.exists()
    assert c.result("session.read_file", {"session_id": sid, "path": "f"})["content"] == "kept\n"


def test_cancel_and_policy_check(daemon):
    d = daemon("--pool", "1")
    c = d.connect()
    rid = c.send("run", {"argv": ["sleep", "30"]})
    time.sleep(0.5)
    assert c.call("cancel", {"id": rid})["result"] == {"cancelled": True}
    ans = c.answer(rid)
    assert ans["result"]["signal"] is not None or ans["result"]["reason"] == "killed", ans
    assert c.result("cancel", {"id": 12345}) == {"cancelled": False}
    me = c.result("policy.check")
    assert me["ok"] and len(me["digest"]) == 64
    other = c.result("policy.check", {"policy": "version: 1\nlimits:\n  memory: 64M\n"})
    assert other["ok"] and not other["same_as_daemon"], other
    wrong = c.result("policy.check", {"policy": "version: 1\nlimits:\n  memory: lots\n"})
    assert not wrong["ok"] and "memory" in wrong["error"], wrong


def test_mcp_serve_uses_the_same_pool(cordon):
    """`cordon mcp serve --pool N` hands its calls sandboxes from the jobs module's pool."""
    p = subprocess.Popen(cordon.argv("mcp", "serve", "--pool", "2"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=cordon.ident.env(), cwd=cordon.tmp, start_new_session=True)

    def ask(id, method, params):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id, "method": method,
                                  "params": params}).encode() + b"\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "t", "version": "1"}})
    def children():
        kids = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
                # The pool's cgroups have a watchdog of their own (root: core/cgpool.h).
                if int(stat.rsplit(")", 1)[1].split()[1]) == p.pid and \
                        "(cordon-watchdog)" not in stat:
                    kids.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
        return kids

    # Two supervisors wait, prepared, before any call.
    assert wait_until(lambda: len(children()) == 2, 15), children()
    ans = ask(2, "tools/call", {"name": "run_command", "arguments": {"command": "echo pooled"}})
    assert "pooled" in json.dumps(ans["result"]), ans
    p.stdin.close()
    assert p.wait(30) == 0, p.stderr.read()


def test_sessions_keep_a_workspace_and_confine_file_ops(daemon, cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "1", "--audit", log)
    c = d.connect()
    sid = c.result("session.create")["session_id"]
    assert c.result("session.write_file", {"session_id": sid, "path": "src/a.txt",
                                           "content": "one\n"}) == {"path": "src/a.txt", "bytes": 4}
    r = c.result("session.exec", {"session_id": sid, "argv": [
        "sh", "-c", "cat src/a.txt; echo two > b.txt; ln -s b.txt inlink"]})
    assert r["exit_code"] == 0 and r["stdout"] == "one\n", r
    r2 = c.result("session.exec", {"session_id": sid, "argv": ["cat", "b.txt"]})
    assert r2["stdout"] == "two\n" and not r2["pooled"], r2
    got = c.result("session.read_file", {"session_id": sid, "path": "b.txt"})
    assert (got["content"], got["encoding"], got["size"], got["truncated"]) == ("two\n", "utf-8", 4, False)
    # Links planted while a run is still going (the end-of-run scan removes
    # those that leave); nothing takes a file operation outside the workspace.
    ws = os.path.join(str(d.path) + ".d", sid)
    os.symlink("/etc", os.path.join(ws, "hostlink"))
    os.symlink("/etc/passwd", os.path.join(ws, "src", "passwd"))
    os.mkfifo(os.path.join(ws, "fifo"))
    for path, words in [("../../etc/passwd", "component"), ("/etc/passwd", "relative"),
                        ("hostlink/passwd", "cannot open"), ("src/passwd", "cannot open"),
                        ("inlink", "cannot open"), ("fifo", "not a regular file"),
                        ("nope", "No such file")]:
        ans = c.call("session.read_file", {"session_id": sid, "path": path})
        assert "error" in ans and words in ans["error"]["message"], (path, ans)
    for path in ("hostlink/w", "src/passwd/w", "../w", "hostlink/x/w"):
        ans = c.call("session.write_file", {"session_id": sid, "path": path, "content": "x"})
        assert "error" in ans, (path, ans)
    assert not os.path.exists("/etc/w") and not os.path.exists("/etc/x")
    # Writing over a link replaces the link, never writes through it.
    c.result("session.write_file", {"session_id": sid, "path": "src/passwd", "content": "mine"})
    assert not os.path.islink(os.path.join(ws, "src", "passwd"))
    assert "root:" in open("/etc/passwd").read()

    # fork: independent copies.
    forks = c.result("session.fork", {"session_id": sid, "count": 2})["session_ids"]
    assert len(set(forks)) == 2 and sid not in forks
    c.result("session.exec", {"session_id": forks[0], "argv": ["sh", "-c", "echo three >> b.txt"]})
    assert c.result("session.read_file", {"session_id": forks[0], "path": "b.txt"})["content"] == "two\nthree\n"
    assert c.result("session.read_file", {"session_id": forks[1], "path": "b.txt"})["content"] == "two\n"
    assert c.result("session.read_file", {"session_id": sid, "path": "b.txt"})["content"] == "two\n"

    listed = {s["session_id"] for s in c.result("session.list")["sessions"]}
    assert listed == {sid, *forks}
    for s in (sid, *forks):
        assert c.result("session.destroy", {"session_id": s}) == {"destroyed": True}
    assert c.result("session.list")["sessions"] == []
    ans = c.call("session.exec", {"session_id": sid, "argv": ["true"]})
    assert ans["error"]["code"] == -32602 and "no session" in ans["error"]["message"], ans
    assert os.listdir(str(d.path) + ".d") == []
    d.stop()
    evs = assert_intact(bins, log)
    runs = [e for e in evs if e["type"] in ("run.start", "run.end")]
    assert len(runs) == 6 and all(e["session"] in (sid, *forks) for e in runs), runs


def test_idle_sessions_expire_and_a_restart_clears_stale_ones(daemon):
    d = daemon("--pool", "0", "--session-idle", "1s")
    c = d.connect()
    sid = c.result("session.create")["session_id"]
    state = str(d.path) + ".d"
    assert os.listdir(state) == [sid]
    assert wait_until(lambda: c.result("session.list")["sessions"] == [], 10)
    # Gone from the list at once; its workspace goes in a worker, soon after.
    assert wait_until(lambda: os.listdir(state) == [], 10), os.listdir(state)
    c.result("session.create")
    d.proc.kill()
    d.proc.wait()
    assert len(os.listdir(state)) == 1
    d.start()
    assert os.listdir(state) == []
    assert d.connect().result("session.list")["sessions"] == []


def test_files_are_placed_in_the_scratch_workspace(daemon, cordon, bins):
    log = cordon.hostdir("audit") / "audit.log"
    d = daemon("--pool", "1", "--audit", log)
    c = d.connect()
    d.pool_ready(1)
    r = c.result("run", {"argv": ["sh", "-c", "stat -c '%n %a %s' main.py d/e/run.sh bin; "
                                              "./d/e/run.sh; od -An -tx1 bin"],
                         "files": {"main.py": "print(1)\n",
                                   "d/e/run.sh": {"content": "#!/bin/sh\necho ran\n", "mode": 0o755},
                                   "bin": {"content_base64": base64.b64encode(b"\0\1\2").decode()}}})
    assert r["pooled"] and r["exit_code"] == 0, r
    assert r["stdout"] == "main.py 644 9\nd/e/run.sh 755 19\nbin 644 3\nran\n 00 01 02\n", r
    for files, words in [({"../x": "a"}, '".." component'), ({"/etc/x": "a"}, "relative"),
                         ({"a": 1}, "give a string"), ({"a": {"content": "x", "mode": 0o4755}}, "mode"),
                         ([1], "must be an object")]:
        ans = c.call("run", {"argv": ["true"], "files": files})
        assert ans["error"]["code"] == -32602 and words in ans["error"]["message"], ans
    d.stop()
    start = [e for e in assert_intact(bins, log) if e["type"] == "run.start"][0]
    assert start["files"] == [{"path": "main.py", "bytes": 9}, {"path": "d/e/run.sh", "bytes": 19},
                              {"path": "bin", "bytes": 3}], start


KILL_ALL_DRIVER = r"""
import json, os, socket, subprocess, sys, time
cordon, sock, log, pool = sys.argv[1:5]
d = subprocess.Popen([cordon, "serve", "--socket", sock, "--pool", pool, "--audit", log],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    if os.path.exists(sock):
        break
    time.sleep(0.05)
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    return s, s.makefile("r")
runner, rf = conn()
runner.sendall(b'{"jsonrpc":"2.0","id":1,"method":"run","params":{"argv":["sh","-c",'
               b'"tr \\"\\\\0\\" \\" \\" </proc/1/cmdline >&2; sleep 60"]}}\n')
for _ in range(200):
    if open(log).read().count('"run.start"'):
        break
    time.sleep(0.05)
killer, kf = conn()
killer.sendall(b'{"jsonrpc":"2.0","id":2,"method":"kill_all","params":{"reason":"test"}}\n')
print(kf.readline().strip())
print(rf.readline().strip())
d.terminate()
d.wait(20)
"""


@pytest.mark.parametrize("pool", [0, 2])
def test_kill_all_ends_the_running_sandboxes_and_records_it(root_cordon, pool):
    """In a PID namespace of its own: only this test's sandboxes can be seen and ended,
    a cold one and one from the pool alike (a pooled init is named and blanked as a
    cold one is: it showed the daemon's command line, and kill_all passed it over)."""
    c = root_cordon
    sock, log = c.tmp / "k.sock", c.tmp / "k.jsonl"
    log.write_text("")
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                        KILL_ALL_DRIVER, str(c.bin), str(sock), str(log), str(pool)],
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p
    killed, ran = (json.loads(line) for line in p.stdout.strip().splitlines()[-2:])
    # With a pool, its idle sandboxes are sandboxes too: ended with the call's.
    assert killed["result"]["killed"] == 1 if pool == 0 else killed["result"]["killed"] >= 1, killed
    assert ran["result"]["reason"] == "killed", ran
    assert ran["result"]["pooled"] == (pool > 0), ran
    if c.level == "namespace":  # its init is PID 1: a name, no command line of the daemon's
        assert ran["result"]["stderr"].strip() == "cordon-init", ran
    events = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert "kill.all" in events and events.count("run.end") == 1, events


OTHER = 65533  # a second ordinary uid, made up on the spot: setpriv needs no passwd entry
ADMIN_UID = 65532  # an --admin-uid
STRANGER = 65531  # a uid the daemon does not let in


def no_such_session(method, sid):
    return {"code": -32602, "message": f'session.{method}: no session "{sid}"'}


def test_sessions_belong_to_their_creator(cordon):
    """Three uids (root, nobody, 65533), each with sessions of its own: none
    sees, reads, changes, runs in, forks, decides, destroys or cancels
    another's, each hears exactly what it hears for an id that never
    existed, and the owner's sessions are unchanged afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as three uids")
    d = Daemon(cordon, "--pool", "0", "--allow-uid", str(NOBODY), "--allow-uid", str(OTHER))
    os.chmod(d.dir, 0o755)
    os.chmod(d.path, 0o666)
    state = d.path.parent / (d.path.name + ".d")
    uids = (0, NOBODY, OTHER)
    conn = {u: connect_as(d.path, u) for u in uids}
    mine = {}
    for u, c in conn.items():
        direct = c.result("session.create")["session_id"]
        c.result("session.write_file", {"session_id": direct, "path": "mine.txt",
                                        "content": f"{u}\n"})
        layer = c.result("session.create", {"workspace_mode": "overlay",
                                            "workspace_commit": "manual"})["session_id"]
        c.result("session.write_file", {"session_id": layer, "path": "a.txt", "content": "old\n"})
        r = c.result("session.exec", {"session_id": layer, "argv": ["sh", "-c", "echo new > a.txt"]})
        assert r["transaction"]["outcome"] == "pending", r
        # A long exec, its run id learnt from its first output.
        rid = c.send("session.exec", {"session_id": direct, "stream": True,
                                      "argv": ["sh", "-c", "echo up; sleep 120"]})
        while not c.notes:
            msg = c.line()
            assert "method" in msg, msg
            c.notes.append(msg)
        mine[u] = {"direct": direct, "layer": layer, "req": rid,
                   "run_id": c.notes[0]["params"]["run_id"]}
    before = {u: conn[u].result("session.list")["sessions"] for u in uids}
    for u in uids:
        assert {s["session_id"] for s in before[u]} == {mine[u]["direct"], mine[u]["layer"]}
        assert all(s["owner"] == u for s in before[u]), before[u]
    tree = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}

    never = "0" * 32
    for attacker in uids:
        c = conn[attacker]
        for victim in (v for v in uids if v != attacker):
            for sid in (mine[victim]["direct"], mine[victim]["layer"], never, "x"):
                for method, extra in [("exec", {"argv": ["touch", "/workspace/pwned"]}),
                                      ("write_file", {"path": "mine.txt", "content": "pwned"}),
                                      ("read_file", {"path": "mine.txt"}),
                                      ("fork", {"count": 2}), ("commit", {}), ("discard", {}),
                                      ("destroy", {})]:
                    ans = c.call(f"session.{method}", {"session_id": sid, **extra})
                    assert ans.get("error") == no_such_session(method, sid), (attacker, method, ans)
            # A request id names a request of the caller's own connection; a
            # run id is the one name another could learn (from the audit log).
            assert c.result("cancel", {"run_id": mine[victim]["run_id"]}) == {"cancelled": False}
        listed = c.result("session.list")["sessions"]
        assert {s["session_id"] for s in listed} == {mine[attacker]["direct"],
                                                     mine[attacker]["layer"]}, listed
    ans = conn[OTHER].call("kill_all", {"reason": "not mine to stop"})
    assert ans["error"]["code"] == -32004 and "kill_all" in ans["error"]["message"], ans

    # Nothing of any owner's changed: files, state, and every session still works.
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == tree
    assert not list(state.rglob("pwned"))
    for u, c in conn.items():
        now = c.result("session.list")["sessions"]
        assert [(s["session_id"], s["running"], s["pending"]) for s in now] == \
               [(s["session_id"], s["running"], s["pending"]) for s in before[u]], (before[u], now)
        got = c.result("session.read_file", {"session_id": mine[u]["direct"], "path": "mine.txt"})
        assert got["content"] == f"{u}\n"
        assert c.result("cancel", {"id": mine[u]["req"]}) == {"cancelled": True}
        r = c.answer(mine[u]["req"])["result"]
        assert r["run_id"] == mine[u]["run_id"], r
        assert r["signal"] is not None or r["reason"] == "killed", r
        done = c.result("session.commit", {"session_id": mine[u]["layer"]})
        assert done["transaction"]["outcome"] == "committed", done
        got = c.result("session.read_file", {"session_id": mine[u]["layer"], "path": "a.txt"})
        assert got["content"] == "new\n"
        f = c.result("session.fork", {"session_id": mine[u]["direct"]})["session_ids"]
        for s in (*f, mine[u]["direct"], mine[u]["layer"]):
            assert c.result("session.destroy", {"session_id": s}) == {"destroyed": True}
    assert wait_until(lambda: os.listdir(state) == [], 10), os.listdir(state)
    d.stop()


def test_an_admin_uid_sees_every_session_and_forks_keep_their_owner(cordon):
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as three uids")
    d = Daemon(cordon, "--pool", "0", "--allow-uid", str(NOBODY), "--admin-uid", str(OTHER))
    os.chmod(d.dir, 0o755)
    os.chmod(d.path, 0o666)
    root, nobody, admin = (connect_as(d.path, u) for u in (0, NOBODY, OTHER))
    sid = root.result("session.create")["session_id"]
    root.result("session.write_file", {"session_id": sid, "path": "f", "content": "root's\n"})
    theirs = nobody.result("session.create")["session_id"]
    listed = {s["session_id"]: s["owner"] for s in admin.result("session.list")["sessions"]}
    assert listed == {sid: 0, theirs: NOBODY}, listed
    assert admin.result("session.read_file", {"session_id": sid, "path": "f"})["content"] == "root's\n"
    fork = admin.result("session.fork", {"session_id": sid})["session_ids"][0]
    # The copy is root's, as its origin: root sees and uses it, nobody does not.
    assert {s["session_id"] for s in root.result("session.list")["sessions"]} == {sid, fork}
    assert root.result("session.read_file", {"session_id": fork, "path": "f"})["content"] == "root's\n"
    ans = nobody.call("session.read_file", {"session_id": fork, "path": "f"})
    assert ans["error"] == no_such_session("read_file", fork), ans
    assert admin.result("session.destroy", {"session_id": theirs}) == {"destroyed": True}
    assert nobody.result("session.list")["sessions"] == []
    d.stop()


# 5,000 files in 50 directories.
FILES = ("import os\nfor i in range(50):\n    os.mkdir('d%d' % i)\n"
         "    for j in range(100):\n        open('d%d/f%d' % (i, j), 'w').write('x')\n")


def test_forks_and_a_destroy_do_not_hold_up_other_clients(daemon):
    d = daemon("--pool", "1")
    a, b = d.connect(timeout=300), d.connect()
    state = d.path.parent / (d.path.name + ".d")
    sid = a.result("session.create")["session_id"]
    a.result("session.exec", {"session_id": sid, "argv": ["python3", "-c", FILES], "timeout": 600})
    fork = a.send("session.fork", {"session_id": sid, "count": 8})
    with Stopped(d, "cordon-fork"):
        listed = {s["session_id"]: s["state"] for s in b.result("session.list")["sessions"]}
        assert listed[sid] == "forking" and len(listed) == 9, listed
        assert set(listed.values()) == {"forking"}, listed
        ans = b.call("session.write_file", {"session_id": sid, "path": "x", "content": "x"})
        assert ans["error"]["code"] == -32002 and "forking" in ans["error"]["message"], ans
        assert b.result("run", {"argv": ["echo", "meanwhile"]})["stdout"] == "meanwhile\n"
        assert not a.pending(), "the fork was answered while its worker was stopped"
    copies = a.answer(fork)["result"]["session_ids"]
    assert len(copies) == 8
    for c in copies:
        assert sum(1 for p in (state / c).rglob("f*")) == 5000
    listed = {s["session_id"]: s["state"] for s in b.result("session.list")["sessions"]}
    assert listed == {s: "idle" for s in (sid, *copies)}, listed

    # A destroy: 20,000 files, so that its worker is caught at work.
    a.result("session.exec", {"session_id": sid, "argv": ["python3", "-c", FILES.replace(
        "range(50)", "range(50, 200)")], "timeout": 600})
    gone = a.send("session.destroy", {"session_id": sid})
    with Stopped(d, "cordon-remove"):
        # Gone for everyone at once; its workspace goes in the worker.
        assert sid not in {s["session_id"] for s in b.result("session.list")["sessions"]}
        ans = b.call("session.read_file", {"session_id": sid, "path": "d0/f0"})
        assert ans["error"] == {"code": -32602, "message": f'session.read_file: no session "{sid}"'}
        assert b.result("run", {"argv": ["echo", "meanwhile"]})["stdout"] == "meanwhile\n"
        assert not a.pending()
    assert a.answer(gone)["result"] == {"destroyed": True}
    assert sorted(os.listdir(state)) == sorted(copies)
    # Eight removals at once, each in its own worker.
    asked = {a.send("session.destroy", {"session_id": c}) for c in copies}
    answers = [a.answer() for _ in asked]  # in the order they finish
    assert {m["id"] for m in answers} == asked
    assert all(m["result"] == {"destroyed": True} for m in answers), answers
    assert os.listdir(state) == []



def test_one_user_cannot_take_every_connection_or_session(cordon):
    """No uid holds more than half of the connections or of the sessions:
    one that has its half is told busy (-32002), and another uid is still
    served (one uid once locked every other out of both tables)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as two uids")
    d = Daemon(cordon, "--pool", "0", "--max-connections", "4", "--max-sessions", "4",
               "--allow-uid", str(OTHER))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        hog = [connect_as(d.path, OTHER) for _ in range(2)]
        for c in hog:
            assert c.result("health")["ok"]
        third = connect_as(d.path, OTHER)
        ans = third.line()
        assert ans["error"]["code"] == -32002 and "share of connections" in ans["error"]["message"], ans
        with pytest.raises((EOFError, OSError)):
            third.line()
        # Root still gets in, twice over (once the probe that saw the daemon start is gone).
        mine = []

        def root_served():
            c = connect_as(d.path, 0)
            c.send("health")
            if "result" in c.line():
                mine.append(c)
            else:
                c.close()
            return len(mine) == 2

        assert wait_until(root_served, 30)

        sids = [hog[0].result("session.create")["session_id"] for _ in range(2)]
        ans = hog[1].call("session.create")
        assert ans["error"]["code"] == -32002 and "share of 2 sessions" in ans["error"]["message"], ans
        ans = hog[1].call("session.fork", {"session_id": sids[0]})
        assert ans["error"]["code"] == -32002 and "share of 2 sessions" in ans["error"]["message"], ans
        ours = [mine[0].result("session.create")["session_id"] for _ in range(2)]
        assert len(mine[1].result("session.list")["sessions"]) == 2
        # A session destroyed is room again, for its owner.
        assert hog[0].result("session.destroy", {"session_id": sids[0]}) == {"destroyed": True}
        sids[0] = hog[1].result("session.create")["session_id"]
        for c, s in [(hog[0], sids[0]), (hog[0], sids[1]), (mine[0], ours[0]), (mine[0], ours[1])]:
            assert c.result("session.destroy", {"session_id": s}) == {"destroyed": True}
    finally:
        d.stop()


def health_with_padding(id, size):
    """A health request SIZE bytes long, its id first, and all of it but the newline."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"health","params":{"pad":"' % id
    tail = b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_unfinished_messages_have_a_budget(cordon):
    """Unfinished messages (no newline yet) share one budget, half of it at
    most a uid's: the connection whose message would take its uid past its
    half hears busy (-32002, its id) at once and the message is dropped as
    it arrives, the connection served on; another uid's message still fits
    (one uid's connections once held 16 MiB each with no bound at all)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as two uids")
    d = Daemon(cordon, "--pool", "0", "--max-buffered", "32M", "--allow-uid", str(OTHER))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        a, b = connect_as(d.path, OTHER, timeout=120), connect_as(d.path, OTHER, timeout=120)
        root = connect_as(d.path, 0, timeout=120)
        big = 10 << 20
        a.send_raw(health_with_padding(1, big))
        assert wait_until(lambda: root.result("stats")["buffered"]["bytes"] == big, 60)
        b.send_raw(health_with_padding(2, big))
        ans = b.line()
        assert ans["id"] == 2 and ans["error"]["code"] == -32002, ans
        assert "unfinished messages" in ans["error"]["message"], ans
        assert not a.pending(), "the first message was answered before its end"
        # Another uid's message fits beside it: its half is its own.
        root.send_raw(health_with_padding(3, big) + b"\n")
        assert root.answer(3)["result"]["ok"]
        a.send_raw(b"\n")
        assert a.answer(1)["result"]["ok"]
        # The refused one's end is dropped with it; the connection goes on, and has room again.
        b.send_raw(b"\n")
        assert b.result("health")["ok"]
        b.send_raw(health_with_padding(4, big) + b"\n")
        assert b.answer(4)["result"]["ok"]
        assert root.result("stats")["buffered"] == {"bytes": 0, "max": 32 << 20}
    finally:
        d.stop()


def test_allowed_uids_can_connect_without_opening_the_socket(cordon):
    """--allow-uid and --admin-uid peers connect to the socket as the daemon
    made it (its ACL lets exactly them in); no other uid can, and the socket
    is never world-connectable (it was 0600 with no ACL: every allowed uid
    got EACCES until the operator changed its mode)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as other uids")
    d = Daemon(cordon, "--pool", "0", "--allow-uid", str(OTHER), "--admin-uid", str(ADMIN_UID))
    try:
        os.chmod(d.dir, 0o711)  # the operator's directory: the uids need only pass through it
        mode = stat.S_IMODE(os.stat(d.path).st_mode)
        assert mode & 0o007 == 0, oct(mode)
        for uid in (OTHER, ADMIN_UID):
            assert connect_as(d.path, uid).result("health")["ok"]
        probe = subprocess.run(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}",
                                "--clear-groups", "/usr/bin/python3", "-c",
                                "import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])",
                                str(d.path)], capture_output=True, text=True, timeout=30)
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe
    finally:
        d.stop()
