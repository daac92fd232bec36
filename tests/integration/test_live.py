"""
Processes over the daemon's API and live sessions (issue 26): a real daemon,
real sandboxes with cordon-live-agent inside, real terminals. Each process
is driven as an agent would drive a terminal (a REPL, stty, ^C, a server left
running); the hostile side tries another uid's process ids, a terminal that
floods, stdin after the end, and a client that never reads. Every test ends
with the autouse check that no cgroup or temp entry of its runs is left.
"""

import base64
import collections
import hashlib
import json
import os
import signal
import socket
import stat
import time

import pytest

from conftest import NOBODY, host_state, marker, mounts_snapshot, pids_with, wait_until
from serve_util import Daemon, Rpc, children, connect_as

OTHER = 65533  # a second ordinary uid: setpriv needs no passwd entry
ADMIN = 65532  # an --admin-uid


@pytest.fixture
def daemon(cordon):
    made = []

    def make(*opts, **kw):
        # The daemon's sandboxes at the level under test (serve's default is namespace).
        d = Daemon(cordon, *cordon.level_opts(), *opts, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc.poll() is None:
            d.stop(signal.SIGTERM)


class Procs:
    """process.* on one connection, its notifications filed per process."""

    def __init__(self, rpc):
        self.c = rpc
        self.out = collections.defaultdict(bytes)  # both streams, as they came
        self.err = collections.defaultdict(bytes)  # stderr alone
        self.exits = {}

    def _file(self):
        for n in self.c.notes:
            p = n["params"]
            if n["method"] == "process.output":
                data = p.get("data")
                data = data.encode() if data is not None else base64.b64decode(p["data_base64"])
                self.out[p["process_id"]] += data
                if p["stream"] == "stderr":
                    self.err[p["process_id"]] += data
            elif n["method"] == "process.exit":
                self.exits[p["process_id"]] = p
        self.c.notes.clear()

    def pump(self, until, timeout=60):
        end = time.monotonic() + timeout
        self._file()
        while not until():
            if time.monotonic() > end:
                return False
            self.c.sock.settimeout(max(0.05, min(1.0, end - time.monotonic())))
            try:
                msg = self.c.line()
            except (socket.timeout, TimeoutError):
                continue
            finally:
                self.c.sock.settimeout(60)
            assert "method" in msg, msg
            self.c.notes.append(msg)
            self._file()
        return True

    def start(self, **params):
        r = self.c.result("process.start", params)
        return r["process_id"]

    def write(self, pid, data=None, eof=False):
        params = {"process_id": pid, "eof": eof}
        if data is not None:
            params["data"] = data
        return self.c.result("process.write_stdin", params)

    def read_until(self, pid, text, timeout=60):
        ok = self.pump(lambda: text.encode() in self.out[pid] or pid in self.exits, timeout)
        assert ok and text.encode() in self.out[pid], (text, self.out[pid][-2000:],
                                                       self.exits.get(pid))

    def wait_exit(self, pid, timeout=60):
        assert self.pump(lambda: pid in self.exits, timeout), (pid, self.out[pid][-2000:])
        return self.exits[pid]


def test_terminal_repl_resize_and_interrupt(daemon):
    """A Python REPL on a terminal answers 2+2, stty sees a resize, ^C (SIGINT
    to the process group) interrupts a sleep, and EOF ends the REPL."""
    d = daemon("--pool", "0")
    p = Procs(d.connect())
    repl = p.start(argv=["python3", "-q", "-i"], pty={"cols": 80, "rows": 24})
    p.write(repl, "2+2\n")
    # The next prompt first: readline reads ^D as EOF once the terminal is its own again.
    p.read_until(repl, "\n4\r\n>>> ")
    p.write(repl, eof=True)
    end = p.wait_exit(repl)
    assert (end["exit_code"], end["reason"]) == (0, "exited"), end

    sh = p.start(argv=["sh"], pty=True)
    p.write(sh, "tty; stty size\n")
    p.read_until(sh, "24 80")
    assert b"/dev/pts/" in p.out[sh], p.out[sh]
    assert p.c.result("process.resize", {"process_id": sh, "cols": 132, "rows": 50})["ok"]
    p.write(sh, "stty size\n")
    p.read_until(sh, "50 132")
    # ^C reaches the foreground job through the terminal's own line discipline too.
    # (An interactive shell drops the rest of a line ^C interrupted: the status is asked after.)
    p.write(sh, "sleep 600\n")
    time.sleep(0.5)
    p.write(sh, "\x03")
    p.write(sh, "echo status=$?\n")
    p.read_until(sh, "status=130")
    p.write(sh, "exit 3\n")
    assert p.wait_exit(sh)["exit_code"] == 3

    sleeper = p.start(argv=["sleep", "600"])
    assert p.c.result("process.signal", {"process_id": sleeper, "signal": "INT"})["ok"]
    end = p.wait_exit(sleeper)
    assert (end["exit_code"], end["signal"], end["reason"]) == (None, 2, "exited"), end


def test_pipes_stdin_eof_and_errors_after_the_end(daemon):
    d = daemon("--pool", "0")
    p = Procs(d.connect())
    cat = p.start(argv=["sh", "-c", "cat; echo done >&2"])
    p.write(cat, "one\n")
    p.read_until(cat, "one\n")
    p.write(cat, "two\n", eof=True)
    end = p.wait_exit(cat)
    assert p.err[cat] == b"done\n" and end["exit_code"] == 0, (p.out[cat], end)
    assert p.out[cat].replace(b"done\n", b"") == b"one\ntwo\n", p.out[cat]
    # Its stdin closed, then the process gone: each write is refused, and says why.
    ans = p.c.call("process.write_stdin", {"process_id": cat, "data": "late\n"})
    assert ans["error"] == {"code": -32602, "message":
                            f'process.write_stdin: process "{cat}" has exited'}, ans
    for method, extra in [("signal", {"signal": "TERM"}), ("resize", {"cols": 10, "rows": 10})]:
        ans = p.c.call(f"process.{method}", {"process_id": cat, **extra})
        assert ans["error"]["message"] == f'process.{method}: process "{cat}" has exited', ans
    waited = p.c.result("process.wait", {"process_id": cat})
    assert (waited["exit_code"], waited["reason"]) == (0, "exited"), waited

    held = p.start(argv=["sleep", "600"])
    p.write(held, eof=True)
    ans = p.c.call("process.write_stdin", {"process_id": held, "data": "x"})
    assert ans["error"]["message"] == \
        f'process.write_stdin: the stdin of process "{held}" is closed', ans
    ans = p.c.call("process.resize", {"process_id": held, "cols": 10, "rows": 10})
    assert ans["error"]["message"] == f'process.resize: process "{held}" has no terminal', ans
    p.c.result("process.signal", {"process_id": held, "signal": "KILL"})
    assert p.wait_exit(held)["signal"] == 9

    missing = p.start(argv=["no-such-command-here"])
    end = p.wait_exit(missing)
    assert (end["exit_code"], end["reason"]) == (127, "start_failed"), end
    assert "no-such-command-here" in end["error"], end


def test_reattach_after_disconnect(daemon):
    """A client leaves; the process goes on; another connection attaches by
    id, gets what was said meanwhile (bounded replay) and what follows."""
    d = daemon("--pool", "0")
    first = Procs(d.connect())
    pid = first.start(argv=["sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i; "
                                        "i=$((i+1)); sleep 0.02; done"])
    first.read_until(pid, "line3\n")
    first.c.close()
    time.sleep(0.5)
    second = Procs(d.connect())
    got = second.c.result("process.attach", {"process_id": pid})
    assert got["state"] == "running", got
    assert got["replay_stdout"].startswith("line0\nline1\n"), got["replay_stdout"][:100]
    seen = int(got["replay_stdout"].strip().split("\n")[-1][4:])
    second.read_until(pid, f"line{seen + 5}\n")
    second.c.result("process.signal", {"process_id": pid, "signal": "TERM"})
    assert second.wait_exit(pid)["signal"] == 15


def test_an_exec_is_not_taken_from_its_caller(daemon):
    """A live session's exec is answered to its caller: another connection of
    the same uid sees it listed but cannot attach it away."""
    d = daemon("--pool", "0")
    a, b = d.connect(), Procs(d.connect())
    sid = a.result("session.create", {"live": True})["session_id"]
    call = a.send("session.exec", {"session_id": sid, "language": "sh",
                                   "code": "until [ -e go ]; do sleep 0.05; done; "
                                           "echo answered"})
    assert wait_until(lambda: b.c.result("process.list", {"session_id": sid})["processes"], 60)
    pid = b.c.result("process.list", {"session_id": sid})["processes"][0]["process_id"]
    ans = b.c.call("process.attach", {"process_id": pid})
    assert "is answered by the call that started it" in ans["error"]["message"], ans
    b.c.result("session.write_file", {"session_id": sid, "path": "go", "content": ""})
    got = a.answer(call)
    assert got["result"]["stdout"] == "answered\n", got


def test_live_session_keeps_cwd_env_tmp_and_background(daemon, cordon):
    """One sandbox for the session: cd and exports carry to the next exec,
    /tmp and a background loop stay; pause stops the loop's ticks, resume
    restarts them (counted, never timed); destroy leaves nothing."""
    audit = cordon.hostdir() / "audit.jsonl"
    d = daemon("--pool", "0", "--audit", audit)
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    assert c.result("session.list")["sessions"][0]["live"] is True
    # Idle a while first: a box whose agent said hello with nothing to send it once took
    # that for its end (the session's sandbox was gone at the first exec).
    time.sleep(1.0)

    def sh(code):
        r = c.result("session.exec", {"session_id": sid, "code": code, "language": "sh"})
        assert r["exit_code"] == 0, (r["stdout"], r["stderr"], r.get("error"))
        return r["stdout"]

    # At the process level the workspace's root holds protected names and is read-only
    # (levels.WS_SPLIT; a directory made later inherits that): the session works in its
    # TMPDIR there, a host path the test reads; elsewhere in /workspace/work.
    sh('if mkdir -p work 2>/dev/null; then export W="$PWD/work"; else export W="$TMPDIR/work"; '
       'mkdir -p "$W"; fi; cd "$W" && mkdir -p sub && cd sub && export GREETING=hello && '
       'echo kept > "${TMPDIR:-/tmp}/note-$$" && echo $$ > "$W/shell.pid"')
    work = sh("echo $W").strip()
    assert work.endswith("/work") and (cordon.level == "process") != (work == "/workspace/work")

    def read(name):
        if cordon.level == "process":
            with open(f"{work}/{name}") as f:
                return f.read()
        return c.result("session.read_file", {"session_id": sid, "path": f"work/{name}"})["content"]

    pid = read("shell.pid")
    assert sh("pwd; echo $GREETING").endswith("/work/sub\nhello\n")
    r = c.result("session.exec", {"session_id": sid, "argv": ["sh", "-c", "echo $GREETING"]})
    assert r["stdout"] == "hello\n", r
    # The run's own temporary directory (the process level's TMPDIR) is kept between execs.
    assert sh(f'cat "${{TMPDIR:-/tmp}}/note-{pid.strip()}"') == "kept\n"
    sh("cd ..; (i=0; while :; do i=$((i+1)); [ $((i % 2000)) = 0 ] && echo $i > t.new "
       "&& mv t.new ticks; done) >/dev/null 2>&1 &")

    def ticks():
        try:
            return int(read("ticks"))
        except (AssertionError, OSError, ValueError):
            return 0

    first = ticks()
    assert wait_until(lambda: ticks() > first, 60), "the background loop does not run"
    ans = c.call("session.pause", {"session_id": sid})
    if cordon.root:
        assert ans.get("result") == {"session_id": sid, "paused": True}, ans
        assert c.result("session.list")["sessions"][0]["state"] == "paused"
        frozen = ticks()
        time.sleep(1.0)
        assert ticks() == frozen, "ticks went on while paused"
        refused = c.call("session.exec", {"session_id": sid, "argv": ["true"]})
        assert "is paused" in refused["error"]["message"], refused
        assert c.result("session.resume", {"session_id": sid})["paused"] is False
        assert wait_until(lambda: ticks() > frozen, 60), "ticks did not come back"
    else:
        # No cgroup of the run's own for an ordinary user here: refused, and says why.
        assert ans["error"]["code"] == -32000 and "freezer" in ans["error"]["message"], ans
        assert sh("echo still") == "still\n"
    assert c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    state = d.path.parent / (d.path.name + ".d")
    assert wait_until(lambda: not [e for e in os.listdir(state) if len(e) == 32], 30)
    d.stop()
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    types = [e["type"] for e in events]
    assert types.count("process.start") >= 4 and types.count("process.end") >= 4, types
    assert types.count("run.start") == types.count("run.end") == 1, types
    if cordon.root:
        assert "session.pause" in types and "session.resume" in types, types
    starts = [e for e in events if e["type"] == "process.start"]
    assert all(e["session"] == sid and e["live"] for e in starts), starts


KEEPER_BUSY = ("import socket\n"
               "while True:\n"
               "    try:\n"
               "        socket.create_connection(('127.0.0.1', 9), timeout=0.2).close()\n"
               "    except OSError:\n"
               "        pass\n")


def test_pause_holds_while_the_keeper_is_busy(daemon, cordon):
    """A command that connects without pause (each connect() a call its
    keeper answers): a freeze that caught the keeper between taking a call
    and answering it never held, since the caller waits killable, which no
    freezer stops ("did not freeze"). Every pause must hold."""
    d = daemon("--pool", "0")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    r = c.result("session.exec", {"session_id": sid, "argv": [
        "sh", "-c", f"python3 -c \"{KEEPER_BUSY}\" >/dev/null 2>&1 &"]})
    assert r["exit_code"] == 0, r
    for _ in range(30 if cordon.root else 1):
        ans = c.call("session.pause", {"session_id": sid})
        if not cordon.root:  # no cgroup of the run's own for an ordinary user here
            assert ans["error"]["code"] == -32000 and "freezer" in ans["error"]["message"], ans
            break
        assert ans.get("result") == {"session_id": sid, "paused": True}, ans
        assert c.result("session.resume", {"session_id": sid})["paused"] is False
    assert c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    d.stop()


@pytest.mark.parametrize("paused", [False, True], ids=["running", "paused"])
def test_destroy_leaves_nothing_behind(daemon, cordon, paused):
    """Processes that try to outlive their session (a new session of their
    own, a double fork, TERM and HUP ignored, a stdin never closed), in a
    session destroyed running or paused: afterwards no process of it, no
    mount, cgroup or temporary entry, no run directory is left on the host."""
    mounts, state_before = mounts_snapshot(), host_state()
    d = daemon("--pool", "0")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    mark = marker()
    stay = f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           f"signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(3600)"
    r = c.result("session.exec", {"session_id": sid, "language": "sh", "code":
                                  f"setsid python3 -c '{stay}' {mark}-setsid </dev/null >/dev/null "
                                  f"2>&1 & (nohup python3 -c '{stay}' {mark}-nohup </dev/null "
                                  f">/dev/null 2>&1 &) ; echo started"})
    assert r["stdout"] == "started\n", r
    held = c.result("process.start", {"session_id": sid, "pty": True,
                                      "argv": ["python3", "-c", stay, f"{mark}-held"]})
    assert wait_until(lambda: len(pids_with(mark)) >= 3, 60), pids_with(mark)
    if paused and cordon.root:
        assert c.result("session.pause", {"session_id": sid})["paused"] is True
    elif paused:
        # An ordinary user's daemon has no freezer: the pause is refused, saying so,
        # and the session is destroyed running.
        ans = c.call("session.pause", {"session_id": sid})
        assert ans.get("error", {}).get("code") == -32000, ans
        assert "freezer" in ans["error"]["message"], ans
    assert c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    end = c.result("process.wait", {"process_id": held["process_id"]})
    assert end["reason"] in ("killed", "lost", "exited"), end
    assert wait_until(lambda: not pids_with(mark), 60), pids_with(mark)
    state = d.path.parent / (d.path.name + ".d")
    assert wait_until(lambda: not [e for e in os.listdir(state) if len(e) == 32], 30), \
        os.listdir(state)
    assert wait_until(lambda: host_state() <= state_before, 30), host_state() - state_before
    assert mounts_snapshot() == mounts
    assert c.result("session.list")["sessions"] == []
    listed = c.result("process.list")["processes"]
    assert [p["state"] for p in listed] == ["exited"] * len(listed), listed


def test_processes_belong_to_their_starter(cordon):
    """root, nobody and 65533 each run a process: every other uid hears of
    it exactly what it hears of an id that never was, and cannot touch it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as three uids")
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "--allow-uid", str(NOBODY),
               "--allow-uid", str(OTHER))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        uids = (0, NOBODY, OTHER)
        conn = {u: Procs(connect_as(d.path, u)) for u in uids}
        mine = {}
        for u, p in conn.items():
            mine[u] = p.start(argv=["sh", "-c", "read x; echo got:$x"], pty=True)
        never = "0" * 32
        for attacker in uids:
            c = conn[attacker].c
            for victim in (v for v in uids if v != attacker):
                for pid in (mine[victim], never):
                    for method, extra in [("write_stdin", {"data": "pwned\n"}),
                                          ("signal", {"signal": "KILL"}),
                                          ("resize", {"cols": 9, "rows": 9}),
                                          ("attach", {}), ("wait", {})]:
                        ans = c.call(f"process.{method}", {"process_id": pid, **extra})
                        assert ans.get("error") == {"code": -32602, "message":
                                                    f'process.{method}: no process "{pid}"'}, \
                            (attacker, method, ans)
            listed = c.result("process.list")["processes"]
            assert [x["process_id"] for x in listed] == [mine[attacker]], listed
        for u, p in conn.items():
            p.write(mine[u], f"{u}\n")
            p.read_until(mine[u], f"got:{u}")
            assert b"pwned" not in p.out[mine[u]]
            assert p.wait_exit(mine[u])["exit_code"] == 0
    finally:
        d.stop()


def test_a_live_session_belongs_to_its_owner(cordon):
    """nobody's live session, its process and its exposed port: to another
    uid each is a session or process that never was (no start, exec, signal,
    pause, expose or destroy gets through), and the session runs on."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as two uids")
    # The process level has no network namespace to forward into, gvisor and microvm none of
    # the session's own (its sockets are the Sentry's, the guest kernel's): expose is refused.
    exposes = cordon.level not in ("process", "gvisor", "microvm")
    pol = cordon.hostdir() / "expose.yaml"
    pol.write_text("version: 1\nnetwork:\n  expose: [8000]\n")
    os.chmod(pol, 0o644)
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "-p", pol,
               "--allow-uid", str(NOBODY), "--allow-uid", str(OTHER))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        owner, other = Procs(connect_as(d.path, NOBODY)), Procs(connect_as(d.path, OTHER))
        sid = owner.c.result("session.create", {"live": True})["session_id"]
        held = owner.start(session_id=sid, argv=["sh", "-c", "read x; echo got:$x"])
        call_when_ready(owner.c, "session.pause", {"session_id": sid})
        owner.c.result("session.resume", {"session_id": sid})
        mine = call_when_ready(owner.c, "session.expose", {"session_id": sid, "port": 8000})
        assert ("result" in mine) == exposes, mine
        for method, params in [("process.start", {"session_id": sid, "argv": ["true"]}),
                               ("session.exec", {"session_id": sid, "argv": ["true"]}),
                               ("session.pause", {"session_id": sid}),
                               ("session.resume", {"session_id": sid}),
                               ("session.expose", {"session_id": sid, "port": 8000}),
                               ("session.unexpose", {"session_id": sid, "port": 8000}),
                               ("session.destroy", {"session_id": sid})]:
            ans = other.c.call(method, params)
            assert ans.get("error") == {"code": -32602, "message":
                                        f'{method}: no session "{sid}"'}, (method, ans)
        for method, extra in [("write_stdin", {"data": "pwned\n"}), ("signal", {"signal": "KILL"}),
                              ("attach", {}), ("wait", {})]:
            ans = other.c.call(f"process.{method}", {"process_id": held, **extra})
            assert ans.get("error", {}).get("message") == f'process.{method}: no process "{held}"'
        assert other.c.result("process.list", {"session_id": sid})["processes"] == []
        assert other.c.result("session.list")["sessions"] == []
        # Its port answers its owner's connections only: OTHER's is refused.
        if exposes:
            owner.c.result("session.exec", {"session_id": sid, "language": "sh", "code":
                                            "echo served > index.html; python3 -m http.server "
                                            "8000 --bind 127.0.0.1 >/dev/null 2>&1 &"})
            address = mine["result"]["address"]
            assert wait_until(lambda: http_get(address, "index.html", uid=NOBODY) == b"served\n",
                              60)
            assert http_get(address, "index.html", uid=OTHER) is None
        owner.write(held, "mine\n")
        owner.read_until(held, "got:mine")
        assert b"pwned" not in owner.out[held]
        assert owner.wait_exit(held)["exit_code"] == 0
        assert owner.c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    finally:
        d.stop()


def test_hostile_params_get_an_error_not_a_crash(daemon):
    """Out-of-range sizes, ids of the wrong type, signals not offered, stdin
    after EOF and in one piece larger than the window, paths out of the
    workspace: each is one JSON-RPC error naming what is wrong, the daemon
    goes on and the process it was aimed at is untouched."""
    d = daemon("--pool", "0")
    p = Procs(d.connect())
    victim = p.start(argv=["sh", "-c", "read x; echo got:$x"], pty={"cols": 80, "rows": 24})
    bad = "process.%s: "
    cases = [
        ("resize", {"process_id": victim, "cols": 1 << 40, "rows": 24}, "must be 1 to 65535"),
        ("resize", {"process_id": victim, "cols": 65536, "rows": 24}, "must be 1 to 65535"),
        ("resize", {"process_id": victim, "cols": -1, "rows": -1}, "must be 1 to 65535"),
        ("resize", {"process_id": victim, "cols": 0, "rows": 24}, "must be 1 to 65535"),
        ("resize", {"process_id": victim, "cols": "80", "rows": 24}, "must be 1 to 65535"),
        ("resize", {"process_id": victim, "cols": 80.5, "rows": 24}, "must be 1 to 65535"),
        ("signal", {"process_id": victim, "signal": "STOP"}, '"signal" must be'),
        ("signal", {"process_id": victim, "signal": "SIGKILLX"}, '"signal" must be'),
        ("signal", {"process_id": victim, "signal": 19}, '"signal" must be'),
        ("signal", {"process_id": victim, "signal": -9}, '"signal" must be'),
        ("signal", {"process_id": victim, "signal": 1 << 62}, '"signal" must be'),
        ("signal", {"process_id": victim, "signal": None}, '"signal" must be'),
        ("signal", {"process_id": victim}, '"signal" must be'),
        ("write_stdin", {"process_id": victim, "data": 5}, '"data" must be a string'),
        ("write_stdin", {"process_id": victim, "data_base64": "%%%"}, "must be a base64"),
        ("write_stdin", {"process_id": victim, "data": "a", "data_base64": "YQ=="}, "not both"),
        ("write_stdin", {"process_id": victim, "eof": "yes"}, '"eof" must be true or false'),
        ("write_stdin", {"process_id": victim, "data": "x" * (300 << 10)}, "at most"),
        ("start", {"argv": ["true"], "pty": {"cols": 1 << 40, "rows": 1}}, '"pty" must be'),
        ("start", {"argv": ["true"], "pty": {"cols": -5, "rows": 10}}, '"pty" must be'),
        ("start", {"argv": ["true"], "pty": "yes"}, '"pty" must be'),
        ("start", {"argv": ["true"], "timeout": -1}, '"timeout" must be'),
        ("start", {"argv": ["true"], "timeout": 1e300}, '"timeout" must be'),
        ("start", {"argv": ["true"], "cwd": "../.."}, '"cwd" must lie in /workspace'),
        ("start", {"argv": ["true"], "cwd": "/workspace/../etc"}, '"cwd" must lie in /workspace'),
        ("start", {"argv": ["true"], "cwd": "/etc"}, '"cwd" must lie in /workspace'),
        ("start", {"argv": ["true"], "env": {"A=B": "x"}}, "is not a variable name"),
        ("start", {"argv": ["true"], "env": {"X": 1}}, "must be a string"),
        ("start", {"argv": []}, '"argv" must be'),
        ("start", {"argv": ["true"], "session_id": 7}, 'no session ""'),
        ("start", {"argv": ["true"], "bogus": 1}, 'unknown parameter "bogus"'),
        ("list", {"session_id": 7}, '"session_id" must be a string'),
    ]
    for pid in (-1, 0, -(1 << 63), None, {}, [], 1.5, True):
        for method in ("write_stdin", "signal", "resize", "wait", "attach"):
            cases.append((method, {"process_id": pid}, '"process_id" must be a string'))
    for pid in ("../../etc", "", "A" * 100000):
        cases.append(("signal", {"process_id": pid, "signal": "KILL"}, "no process"))
    for method, params, expect in cases:
        ans = p.c.call(f"process.{method}", params)
        err = ans.get("error")
        assert err and err["code"] == -32602 and err["message"].startswith(bad % method) and \
            expect in err["message"] and len(err["message"]) < 300, (method, params, ans)
    for params in ([1, 2], "x", 5):
        ans = p.c.call("process.signal", params)
        # JSON-RPC lets params be an array: that is the method's to refuse, a scalar the wire's.
        assert ans["error"]["code"] in (-32600, -32602) and "must be an object" in \
            ans["error"]["message"], ans
    # A NUL in a string is refused whole, before any method sees it.
    ans = p.c.call("process.signal", {"process_id": "\u0000", "signal": "KILL"})
    assert ans["error"] == {"code": -32600, "message": "invalid request: a string contains a "
                                                       "NUL character"}, ans
    # An integer past int64 is no JSON the daemon takes: a parse error (id null), not a crash.
    p.c.send_raw(b'{"jsonrpc": "2.0", "id": 99, "method": "process.signal", "params": '
                 b'{"process_id": 9223372036854775808, "signal": "KILL"}}\n')
    ans = p.c.line()
    assert ans["id"] is None and ans["error"]["code"] == -32700, ans
    ans = p.c.call("process.nonesuch", {})
    assert ans["error"]["code"] == -32601, ans
    # stdin after EOF, and after the end.
    assert p.write(victim, "ok\n", eof=True)["written"] == 3
    for params in ({"data": "more"}, {"eof": True}, {"data": ""}):
        ans = p.c.call("process.write_stdin", {"process_id": victim, **params})
        assert ans.get("error", {}).get("message") in (
            f'process.write_stdin: the stdin of process "{victim}" is closed',
            f'process.write_stdin: process "{victim}" has exited'), ans
    p.read_until(victim, "got:ok")
    assert p.wait_exit(victim)["exit_code"] == 0
    ans = p.c.call("process.write_stdin", {"process_id": victim, "data": "late"})
    assert ans["error"]["message"] == f'process.write_stdin: process "{victim}" has exited', ans
    # The daemon is whole: a new process runs to its end.
    again = p.start(argv=["echo", "alive"])
    p.read_until(again, "alive\n")
    assert p.wait_exit(again)["exit_code"] == 0
    assert d.proc.poll() is None


def test_a_terminal_that_floods_is_cut_at_the_output_limit(daemon):
    """In a sandbox of its own (the run's limit) and in a live session (the
    process's, counted by the daemon): cut at the limit, the rest never sent,
    and the session goes on."""
    d = daemon("--pool", "0", "--output", "1M")
    p = Procs(d.connect())
    flood = p.start(argv=["yes", "flood"], pty=True)
    end = p.wait_exit(flood, timeout=120)
    assert end["reason"] == "output_limit", end
    assert (1 << 19) < len(p.out[flood]) <= 1 << 20, len(p.out[flood])
    sid = p.c.result("session.create", {"live": True})["session_id"]
    flood = p.start(argv=["yes", "flood"], pty=True, session_id=sid)
    end = p.wait_exit(flood, timeout=120)
    assert (end["reason"], end["signal"]) == ("output_limit", 9), end
    assert (1 << 19) < len(p.out[flood]) <= 1 << 20, len(p.out[flood])
    r = p.c.result("session.exec", {"session_id": sid, "argv": ["echo", "after"]})
    assert r["stdout"] == "after\n", r


def test_a_client_that_never_reads_holds_the_process_back(daemon):
    """The process blocks on its own pipe: its output stops growing, bounded
    (window and queue), long before the output limit."""
    d = daemon("--pool", "0", "--output", "unlimited")
    mark = marker()
    mute = socket.socket(socket.AF_UNIX)
    mute.connect(str(d.path))
    mute.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "process.start", "params": {
        "argv": ["sh", "-c", f"exec yes {mark}"]}}).encode() + b"\n")
    watcher = d.connect()

    def written():
        listed = watcher.result("process.list")["processes"]
        return listed[0]["output_bytes"] if listed else -1

    samples = []

    def settled():
        samples.append(written())
        time.sleep(0.5)
        return len(samples) > 2 and samples[-1] == samples[-2] == samples[-3] > 0

    assert wait_until(settled, 60), samples
    assert samples[-1] < 16 << 20, samples
    pid = watcher.result("process.list")["processes"][0]["process_id"]
    assert watcher.result("process.list")["processes"][0]["state"] == "running"
    mute.close()
    ans = watcher.call("process.signal", {"process_id": pid, "signal": "KILL"})
    assert ans.get("result") == {"ok": True} or "has exited" in ans["error"]["message"], ans
    assert wait_until(lambda: not pids_with(mark), 30)


def call_when_ready(c, method, params, timeout=60):
    """METHOD's answer once the session's sandbox has started (until then: busy, try again)."""
    ans = None

    def answered():
        nonlocal ans
        ans = c.call(method, params)
        return not (ans.get("error", {}).get("code") == -32002 and
                    "is starting" in ans["error"]["message"])

    assert wait_until(answered, timeout), ans
    return ans


def daemon_listeners(d):
    """Inodes of the TCP sockets the daemon's process listens on."""
    mine = set()
    for fd in os.listdir(f"/proc/{d.proc.pid}/fd"):
        try:
            link = os.readlink(f"/proc/{d.proc.pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in mine:
                    found.add(cols[9])
    return found


# A connection to sys.argv[1]: HOST:PORT, or a unix socket's path.
CONNECT = ("import socket, sys\n"
           "if sys.argv[1].startswith('/'):\n"
           "    s = socket.socket(socket.AF_UNIX)\n"
           "    s.settimeout(10)\n"
           "    s.connect(sys.argv[1])\n"
           "else:\n"
           "    h, p = sys.argv[1].rsplit(':', 1)\n"
           "    s = socket.create_connection((h, int(p)), timeout=10)\n")


def http_get(address, path, uid=None, timeout=10):
    """GET http://ADDRESS/PATH (ADDRESS: HOST:PORT or a unix socket's path), as UID if
    given: the body, or None when refused."""
    code = (CONNECT +
            "s.sendall(b'GET /' + sys.argv[2].encode() + b' HTTP/1.0\\r\\n\\r\\n')\n"
            "data = b''\n"
            "try:\n"
            "    while (c := s.recv(65536)):\n"
            "        data += c\n"
            "except OSError:\n"
            "    pass\n"
            "sys.stdout.buffer.write(data)\n")
    argv = ["/usr/bin/python3", "-c", code, address, path]
    if uid is not None:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    r = __import__("subprocess").run(argv, capture_output=True, timeout=timeout)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    return body if head.startswith(b"HTTP/") else None


def test_expose_a_server_of_a_live_session(daemon, cordon):
    """A server left running in a live session is reached from the host
    through session.expose, only on a port the policy lists, only by the
    session's owner (or root), each connection in the audit log; a port the
    policy refuses gets no listener."""
    pol = cordon.hostdir() / "expose.yaml"
    pol.write_text("version: 1\nnetwork:\n  expose: [8000]\n")
    os.chmod(pol, 0o644)
    audit = cordon.hostdir() / "audit.jsonl"
    d = daemon("--pool", "0", "-p", pol, "--audit", audit)
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    before = daemon_listeners(d)
    ans = c.call("session.expose", {"session_id": sid, "port": 8001})
    assert ans["error"] == {"code": -32000, "message": "session.expose: port 8001 is not in "
                                                       "the policy's network.expose"}, ans
    assert daemon_listeners(d) == before
    if cordon.level == "process":
        ans = call_when_ready(c, "session.expose", {"session_id": sid, "port": 8000})
        assert "no network namespace of its own" in ans.get("error", {}).get("message", ""), ans
        assert daemon_listeners(d) == before
        return
    c.result("session.exec", {"session_id": sid, "language": "sh", "code":
                              "echo served > index.html; python3 -m http.server 8000 "
                              "--bind 127.0.0.1 >/dev/null 2>&1 &"})
    got = c.result("session.expose", {"session_id": sid, "port": 8000})
    host, port = got["address"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == got["host_port"], got
    assert wait_until(lambda: http_get(got["address"], "index.html") == b"served\n", 60)
    if os.geteuid() == 0:
        assert http_get(got["address"], "index.html", uid=OTHER) is None
    assert c.result("session.unexpose", {"session_id": sid, "port": 8000})["exposed"] is False
    assert daemon_listeners(d) == before
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=10)
    c.result("session.destroy", {"session_id": sid})
    d.stop()
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    exposed = [(e["port"], e["exposed"]) for e in events if e["type"] == "session.expose"]
    assert exposed == [(8001, False), (8000, True)], exposed
    outcomes = {e["outcome"] for e in events if e["type"] == "expose.connection"}
    assert "forwarded" in outcomes, outcomes
    if os.geteuid() == 0:
        assert "refused: not the session's owner" in outcomes, outcomes


def test_a_running_process_keeps_its_live_session(daemon):
    """The idle clock of a live session runs only while nothing runs in it:
    a background process keeps the session (it was once removed under it);
    once the process is gone the session idles out as any does."""
    d = daemon("--pool", "0", "--session-idle", "2s")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    p = Procs(c)
    sleeper = call_when_ready(c, "process.start", {"session_id": sid, "argv": ["sleep", "600"]})
    pid = sleeper["result"]["process_id"]
    # Three idle periods and more: the session and its process are still there.
    time.sleep(7)
    listed = {s["session_id"]: s for s in c.result("session.list")["sessions"]}
    assert sid in listed and listed[sid]["state"] != "idle", listed
    assert c.result("process.list")["processes"], "the session's process is gone"
    c.result("process.signal", {"process_id": pid, "signal": "KILL"})
    assert p.wait_exit(pid)["signal"] == 9
    # Now idle: it goes (the timer ticks, however late).
    assert wait_until(lambda: sid not in {s["session_id"] for s in
                                          c.result("session.list")["sessions"]}, 120)


def test_live_exec_takes_stdin_base64_and_the_policy_caps_a_timeout(daemon):
    """stdin_base64 reaches a live exec's command byte for byte (it was once
    dropped without a word); a process's timeout above the policy's wall
    clock is the policy's (a caller lowers it, never raises it)."""
    d = daemon("--pool", "0", "--timeout", "3s")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    data = bytes(range(256)) * 4
    r = call_when_ready(c, "session.exec", {"session_id": sid, "argv": ["sha256sum"],
                                            "stdin_base64": base64.b64encode(data).decode()})
    r = r.get("result", r)
    assert r["exit_code"] == 0 and r["stdout"].split()[0] == hashlib.sha256(data).hexdigest(), r
    ans = c.call("session.exec", {"session_id": sid, "argv": ["cat"], "stdin": "a",
                                  "stdin_base64": "YQ=="})
    assert ans["error"]["code"] == -32602 and "not both" in ans["error"]["message"], ans
    p = Procs(c)
    pid = p.start(session_id=sid, argv=["sleep", "600"], timeout=86400)
    end = p.wait_exit(pid, timeout=120)
    assert end["reason"] == "timeout", end


# A server for an exposed port that appends what each connection sent to /workspace/got.
RECORDER = ("python3 -c 'import socket\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind((\"127.0.0.1\", 8000)); s.listen()\n"
            "while True:\n"
            "    c, _ = s.accept(); d = b\"\"\n"
            "    while (x := c.recv(4096)): d += x\n"
            "    open(\"/workspace/got\", \"ab\").write(d + b\"\\n\"); c.close()\n"
            "' >/dev/null 2>&1 &")

SEND_AND_CLOSE = (CONNECT +
                  "s.sendall(sys.argv[2].encode())\n"
                  "if sys.argv[3] == 'half':\n"
                  "    s.shutdown(socket.SHUT_WR)\n"
                  "    s.settimeout(30)\n"
                  "    while s.recv(4096):\n"
                  "        pass\n"
                  "s.close()\n")


def send_as(uid, address, data, how, check=True):
    """UID sends DATA to ADDRESS and closes (HOW: "close" at once, "half": after the
    server's end); did it connect and send?"""
    r = __import__("subprocess").run(["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                      "--clear-groups", "/usr/bin/python3", "-c", SEND_AND_CLOSE,
                                      address, data, how], check=check, timeout=60,
                                     capture_output=not check)
    return r.returncode == 0


def test_an_exposed_port_refuses_a_peer_gone_before_it_is_asked(cordon):
    """Another uid connects to nobody's exposed port, sends, and closes
    before the daemon looks at it (the daemon is stopped meanwhile): its
    socket's end is then the kernel's (time-wait, uid 0 in /proc/net/tcp),
    which must not pass for root's. The bytes never reach the server inside,
    the audit says refused; the owner's own half-closed connection goes
    through."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as two uids")
    pol = cordon.hostdir() / "expose.yaml"
    pol.write_text("version: 1\nnetwork:\n  expose: [8000]\n")
    os.chmod(pol, 0o644)
    audit = cordon.hostdir() / "audit.jsonl"
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "-p", pol, "--audit", audit,
               "--allow-uid", str(NOBODY), "--allow-uid", str(OTHER))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        owner = connect_as(d.path, NOBODY)
        sid = owner.result("session.create", {"live": True})["session_id"]
        call_when_ready(owner, "session.exec", {"session_id": sid, "language": "sh",
                                                "code": RECORDER})
        address = call_when_ready(owner, "session.expose",
                                  {"session_id": sid, "port": 8000})["result"]["address"]
        mark = marker()
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            for i in range(3):
                send_as(OTHER, address, f"{mark}-{i}", "close")
            time.sleep(0.5)  # their ends are the kernel's by now (not a timing assertion)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)

        def heard():
            events = [json.loads(l) for l in audit.read_text().splitlines()]
            return [e["outcome"] for e in events if e["type"] == "expose.connection"]

        assert wait_until(lambda: len(heard()) >= 3, 60), heard()
        assert heard() == ["refused: not the session's owner"] * 3, heard()
        send_as(NOBODY, address, "from-the-owner", "half")

        def got():
            r = owner.result("session.exec", {"session_id": sid, "language": "sh",
                                              "code": "cat /workspace/got 2>/dev/null; true"})
            return r["stdout"]

        assert wait_until(lambda: "from-the-owner" in got(), 60), got()
        assert mark not in got()
        assert owner.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    finally:
        d.stop()
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    conns = [(e["uid"], e["outcome"]) for e in events if e["type"] == "expose.connection"]
    assert conns.count((NOBODY, "forwarded")) == 1 and len(conns) == 4, conns


def test_expose_through_a_unix_socket(cordon):
    """session.expose {unix: true}: nobody's server in a live session is
    reached through a socket in the daemon's state directory by its owner
    and an --admin-uid (as the daemon's uid, which is root or nobody: the
    socket's ACL lets the others in), never by another uid (the server hears
    nothing); a link or file planted at the path is refused, not followed;
    unexpose, destroy and the daemon's exit each remove socket and directory;
    each connection is audited with the path."""
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as several uids")
    pol = cordon.hostdir() / "expose.yaml"
    pol.write_text("version: 1\nnetwork:\n  expose: [8000]\n")
    os.chmod(pol, 0o644)
    audit = cordon.hostdir() / "audit.jsonl"
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "-p", pol, "--audit", audit,
               "--allow-uid", str(NOBODY), "--allow-uid", str(OTHER), "--admin-uid", str(ADMIN))
    try:
        os.chmod(d.dir, 0o755)
        os.chmod(d.path, 0o666)
        state = d.path.parent / (d.path.name + ".d")
        owner = connect_as(d.path, NOBODY)
        sid = owner.result("session.create", {"live": True})["session_id"]
        sockdir = state / f"expose-{sid}"
        params = {"session_id": sid, "port": 8000, "unix": True}
        if cordon.level == "process":
            ans = call_when_ready(owner, "session.expose", params)
            assert "no network namespace of its own" in ans.get("error", {}).get("message",
                                                                                 ""), ans
            assert not sockdir.exists()
            return
        call_when_ready(owner, "session.exec", {"session_id": sid, "language": "sh",
                                                "code": RECORDER})
        # Planted by the daemon's uid, the only one but root that can write there.
        target = cordon.hostdir() / "planted-target"
        os.mkdir(sockdir, 0o711)
        os.chown(sockdir, cordon.ident.uid, cordon.ident.gid)
        for plant in (lambda p: os.symlink(target, p), lambda p: p.write_text("mine")):
            plant(sockdir / "8000.sock")
            ans = owner.call("session.expose", params)
            assert ans.get("error") == {"code": -32000, "message": "session.expose: cannot "
                                        f"listen on '{sockdir}/8000.sock': something is already "
                                        "there"}, ans
            assert not os.path.lexists(target)
            os.unlink(sockdir / "8000.sock")
        os.rmdir(sockdir)
        path = owner.result("session.expose", params)["path"]
        assert path == f"{sockdir}/8000.sock"
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and st.st_uid == cordon.ident.uid, st
        assert stat.S_IMODE(st.st_mode) & 0o007 == 0, oct(st.st_mode)
        assert stat.S_IMODE(os.stat(sockdir).st_mode) == 0o711

        def got():
            r = owner.result("session.exec", {"session_id": sid, "language": "sh",
                                              "code": "cat /workspace/got 2>/dev/null; true"})
            return r["stdout"]

        mark = marker()
        assert not send_as(OTHER, path, mark, "close", check=False)
        # Until the server inside listens, a connection is refused there: sent again.
        assert wait_until(lambda: send_as(ADMIN, path, "from-the-admin", "half", check=False) and
                          "from-the-admin" in got(), 60), got()
        send_as(NOBODY, path, "from-the-owner", "half")
        assert wait_until(lambda: "from-the-owner" in got(), 60), got()
        assert mark not in got()
        assert owner.result("session.expose", params)["path"] == path  # the one there is
        assert owner.result("session.unexpose", {"session_id": sid, "port": 8000}) == \
            {"session_id": sid, "port": 8000, "exposed": False}
        assert not os.path.lexists(path) and not sockdir.exists()
        assert owner.result("session.expose", params)["path"] == path
        assert owner.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
        assert not sockdir.exists()
        # The daemon's exit takes a live session's socket with it: nothing is left.
        sid = owner.result("session.create", {"live": True})["session_id"]
        path = call_when_ready(owner, "session.expose",
                               {**params, "session_id": sid})["result"]["path"]
        assert os.path.exists(path)
    finally:
        d.stop()
    assert not state.exists(), list(state.iterdir())
    events = [json.loads(l) for l in audit.read_text().splitlines()]
    conns = [(e["uid"], e["outcome"]) for e in events
             if e["type"] == "expose.connection" and e.get("path", "").endswith("/8000.sock")]
    assert (NOBODY, "forwarded") in conns and (ADMIN, "forwarded") in conns, conns
    assert [o for u, o in conns if u == OTHER] == [], conns  # its connect() was refused


# Stops the live agent from inside its own session (a co-process, the same user).
STOP_AGENT = ("import os, signal\n"
              "for p in os.listdir('/proc'):\n"
              "    try:\n"
              "        exe = os.readlink('/proc/%s/exe' % p) if p.isdigit() else ''\n"
              "    except OSError:\n"
              "        continue\n"
              "    if exe == '/.cordon/agent' or exe.endswith('/cordon-live-agent'):\n"
              "        os.kill(int(p), signal.SIGSTOP)\n"
              "        print(p)\n")


def test_control_frames_for_an_agent_that_reads_none_are_bounded(daemon):
    """A process of the session stops the live agent, and its client sends
    signals without end: what the daemon queues for the agent is bounded
    (a signal past it is busy, try again) instead of growing the daemon
    without limit; once the agent goes on, signals pass again."""
    d = daemon("--pool", "0")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    ignore = ("import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
              "time.sleep(3600)")
    held = call_when_ready(c, "process.start", {"session_id": sid,
                                                "argv": ["python3", "-c", ignore]})
    held = held["result"]["process_id"]
    # Started, not exec'd: the agent that would report its end is what it stops.
    c.result("process.start", {"session_id": sid, "argv": ["python3", "-c", STOP_AGENT]})

    def descendants(pid):
        kids = children(pid)
        return kids + [g for k in kids for g in descendants(k)]

    def stopped():
        found = []
        for p in descendants(d.proc.pid):
            try:
                if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
                    found.append(p)
            except OSError:
                pass
        return found

    assert wait_until(stopped, 60), "the live agent was not stopped"
    answers, busy = 0, None
    while busy is None and answers < 400000:
        for _ in range(2000):
            c.send("process.signal", {"process_id": held, "signal": "HUP"})
        for _ in range(2000):
            ans = c.answer()
            answers += 1
            if "error" in ans and busy is None:
                busy = ans["error"]
    assert busy is not None, answers
    assert busy["code"] == -32002 and busy["message"].startswith(
        f'process.signal: busy: the sandbox of process "{held}" has not read'), busy
    # The agent goes on (from the host: it is ours to stop and continue): signals pass again.
    agent = stopped()
    assert len(agent) == 1, agent
    for p in agent:
        os.kill(p, signal.SIGCONT)
    assert wait_until(lambda: "result" in c.call("process.signal", {"process_id": held,
                                                                     "signal": "KILL"}), 120)
    end = c.result("process.wait", {"process_id": held})
    assert end["signal"] == signal.SIGKILL, end
    assert c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}


def test_a_process_without_a_timeout_gets_the_policys_wall_clock(daemon):
    """A live session's process.start without a timeout ends at the policy's
    wall clock, as one that asks for more does and as session.exec does (it
    once ran with no wall clock at all); a process of its own sandbox too."""
    d = daemon("--pool", "0", "--timeout", "3s")
    c = d.connect()
    sid = c.result("session.create", {"live": True})["session_id"]
    p = Procs(c)
    ans = call_when_ready(c, "process.start", {"session_id": sid, "argv": ["sleep", "60"]})
    end = p.wait_exit(ans["result"]["process_id"], timeout=120)
    assert (end["reason"], end["signal"]) == ("timeout", 9), end
    end = p.wait_exit(p.start(argv=["sleep", "60"]), timeout=120)
    assert end["reason"] == "timeout", end
    r = c.result("session.exec", {"session_id": sid, "argv": ["echo", "after"]})
    assert r["stdout"] == "after\n", r


def test_live_sandboxes_count_against_max_running(daemon):
    """A live session's sandbox is one of --max-running, as a process's own
    is: past the limit session.create {live} and process.start are busy
    (-32002), and a session destroyed is room again (one uid once ran 41
    live sandboxes under --max-running 16)."""
    d = daemon("--pool", "0", "--max-running", "2")
    c = d.connect()
    sids = [c.result("session.create", {"live": True})["session_id"] for _ in range(2)]
    ans = c.call("session.create", {"live": True})
    assert ans["error"]["code"] == -32002 and "--max-running" in ans["error"]["message"], ans
    ans = c.call("process.start", {"argv": ["true"]})
    assert ans["error"]["code"] == -32002 and "--max-running" in ans["error"]["message"], ans
    assert c.result("stats")["sandboxes"] == {"running": 2, "max": 2}
    # Not a live one: it needs no sandbox until it runs.
    plain = c.result("session.create")["session_id"]
    assert c.result("session.destroy", {"session_id": sids.pop()}) == {"destroyed": True}
    # Room once its sandbox has ended (the destroy's answer does not wait for that).
    made = []

    def room():
        ans = c.call("session.create", {"live": True})
        made.extend([ans["result"]["session_id"]] if "result" in ans else [])
        assert made or ans["error"]["code"] == -32002, ans
        return made

    assert wait_until(room, 60)
    for s in (*sids, *made, plain):
        assert c.result("session.destroy", {"session_id": s}) == {"destroyed": True}


def test_a_process_of_its_own_gets_what_fits_its_output_limit(daemon):
    """In a sandbox of its own, a process over the output limit gets what
    fits delivered, then is killed (output_limit), as in a live session: the
    agent's framing is not counted (it was killed with nothing delivered)."""
    d = daemon("--pool", "0", "--output", "1K")
    p = Procs(d.connect())
    writer = p.start(argv=["python3", "-c", "import sys, time; sys.stdout.write('x' * 5000); "
                           "sys.stdout.flush(); time.sleep(600)"])
    end = p.wait_exit(writer, timeout=120)
    assert (end["reason"], end["signal"]) == ("output_limit", 9), end
    assert p.out[writer] == b"x" * 1024, (len(p.out[writer]), end)
    small = p.start(argv=["python3", "-c", "print('y' * 1000)"])
    end = p.wait_exit(small, timeout=120)
    assert (end["reason"], end["exit_code"]) == ("exited", 0), end
    assert p.out[small] == b"y" * 1000 + b"\n"
