"""
The clients' process API and live sessions (issue 26) against a real daemon:
the Python client (installed with pip) and the Node one (node's own test
runner, clients/node/test/process.test.mjs), each run as the daemon's own
identity (root, and nobody) at each level: terminals, stdin, signals,
resize, wait, re-attach from a second connection, a live session's cwd, env
and background processes, pause and resume, an exposed port, a reader too
slow for its process, and the daemon's errors as the clients' error type.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import REPO, marker, pids_with, wait_until
from serve_util import Daemon

PY_CLIENT = REPO / "clients" / "python"
NODE_CLIENT = REPO / "clients" / "node"


@pytest.fixture(scope="module")
def py_client():
    """The Python client, installed with pip where every identity can import it."""
    target = tempfile.mkdtemp(prefix="cit-pyclient-")
    os.chmod(target, 0o755)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                          "--no-deps", "--target", target, str(PY_CLIENT)],
                         capture_output=True, text=True, timeout=300)
    for junk in ("build", "cordon_client.egg-info"):
        shutil.rmtree(PY_CLIENT / junk, ignore_errors=True)
    assert pip.returncode == 0, pip.stderr
    yield target
    shutil.rmtree(target, ignore_errors=True)


@pytest.fixture
def daemon(cordon):
    """A daemon as the test's identity at its level, whose policy lets port 8000 out."""
    pol = cordon.hostdir() / "expose.yaml"
    pol.write_text("version: 1\nnetwork:\n  expose: [8000]\n")
    os.chmod(pol, 0o644)
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "--output", "unlimited",
               "-p", pol)
    yield d
    if d.proc.poll() is None:
        d.stop()


# Shared by the Python scripts: read a process's output until TEXT (or its end).
PRELUDE = textwrap.dedent("""
    import os, sys, time, socket, cordon
    path, level, root = sys.argv[1], sys.argv[2], sys.argv[3] == "1"

    def until(p, text, timeout=60):
        text = text.encode() if isinstance(text, str) else text
        seen, end = b"", time.monotonic() + timeout
        while text not in seen:
            left = end - time.monotonic()
            assert left > 0, (text, seen[-2000:])
            got = p.read(timeout=left)
            assert got, ("ended before", text, seen[-2000:], p.exit)
            seen += got
        return seen

    def eventually(check, timeout=60):
        end = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < end, "not in time"
            time.sleep(0.1)
""")


def run_py(cordon, daemon, target, body):
    script = cordon.tmp / "client_script.py"      # a file: a traceback shows its lines
    script.write_text(PRELUDE + textwrap.dedent(body))
    os.chmod(script, 0o644)
    env = cordon.ident.env({"PYTHONPATH": target})
    argv = cordon.ident.wrap(["/usr/bin/python3", str(script), str(daemon.path), cordon.level,
                              "1" if cordon.root else "0"])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                       cwd=cordon.tmp)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_python_processes(cordon, daemon, py_client):
    """Terminal and pipes, stdin round trips, a trapped ^C, resize, wait, and
    re-attach from a second connection after the first went away."""
    run_py(cordon, daemon, py_client, """
        c = cordon.Client(path)
        # A REPL on a terminal: 2+2 answers 4; EOF (^D) ends it.
        repl = c.spawn(["python3", "-q", "-i"], pty=True)
        assert repl.pty and repl.pid == repl.id
        repl.write("2+2\\n")
        until(repl, "\\n4\\r\\n>>> ")
        repl.close_stdin()
        assert repl.wait().exit_code == 0
        list(repl)                          # what it said last (a new line), then the end
        assert repl.read(timeout=60) == b""

        # stty sees the size asked for, then the resize.
        sh = c.spawn(["sh"], pty={"cols": 100, "rows": 30})
        sh.write("stty size\\n")
        until(sh, "30 100")
        sh.resize(132, 50)
        sh.write("stty size\\n")
        until(sh, "50 132")
        sh.write("exit 3\\n")
        assert sh.wait().exit_code == 3

        # Pipes: stdout and stderr apart, stdin to EOF, env and cwd as given.
        cat = c.spawn(["sh", "-c", "cat; echo $V:$(pwd) >&2; exit 5"], env={"V": "v"},
                      cwd="/workspace")
        cat.write(b"one\\n")
        until(cat, "one\\n")
        cat.write("x" * 300000 + "\\n")      # more than the daemon takes at once
        cat.close_stdin()
        chunks = list(cat)
        out = b"".join(ch.data for ch in chunks if ch.stream == "stdout")
        err = b"".join(ch.data for ch in chunks if ch.stream == "stderr")
        assert out.endswith(b"x" * 300000 + b"\\n"), len(out)
        assert err.startswith(b"v:") and err.endswith(b"\\n"), err
        end = cat.wait()
        assert (end.exit_code, end.signal, end.reason) == (5, None, "exited"), end
        assert cat.exit is not None and cat.exit.exit_code == 5, cat.exit

        # INT to a process that traps it: its handler runs, its status is its own.
        trap = c.spawn(["sh", "-c", "trap 'echo caught; exit 7' INT; echo ready; "
                                    "while :; do sleep 0.1; done"])
        until(trap, "ready\\n")
        trap.signal("INT")
        until(trap, "caught\\n")
        assert trap.wait().exit_code == 7
        # An untrapped one dies of it.
        sleeper = c.spawn(["sleep", "600"])
        sleeper.signal("INT")
        assert (sleeper.wait().signal, sleeper.exit.reason) == (2, "exited"), sleeper.exit

        # Re-attach: the first connection leaves, a second takes the process by id,
        # with what it said meanwhile.
        first = cordon.Client(path)
        counter = first.spawn(["sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; "
                                           "i=$((i+1)); sleep 0.02; done"])
        until(counter, "line3\\n")
        pid = counter.id
        first.close()
        second = cordon.Client(path)
        again = second.attach(pid)
        assert again.exit is None and again.id == pid
        seen = until(again, "\\n")
        assert seen.startswith(b"line0\\nline1\\n"), seen[:100]
        last = int(seen.strip().split(b"\\n")[-1][4:])
        until(again, f"line{last + 5}\\n")
        again.signal("TERM")
        assert again.wait().signal == 15
        second.close()
        print("ok")
    """)


def test_python_errors_are_rpc_errors(cordon, daemon, py_client):
    """What the daemon refuses comes back as RpcError with its code and message."""
    run_py(cordon, daemon, py_client, """
        c = cordon.Client(path)
        def refused(fn, code, text):
            try:
                fn()
            except cordon.RpcError as e:
                assert e.code == code and text in e.message, (e.code, e.message)
                return
            raise AssertionError(f"no error, expected {text!r}")
        refused(lambda: c.attach("0" * 32), -32602, f'process.attach: no process "{"0" * 32}"')
        done = c.spawn(["true"])
        assert done.wait().ok
        refused(lambda: done.signal("INT"), -32602, f'process "{done.id}" has exited')
        refused(lambda: done.write("late"), -32602, "has exited")
        refused(lambda: done.resize(10, 10), -32602, "has exited")
        held = c.spawn(["sleep", "600"])
        refused(lambda: held.resize(10, 10), -32602, "has no terminal")
        refused(lambda: held.signal("STOP"), -32602, '"signal" must be')
        held.close_stdin()
        refused(lambda: held.write("x"), -32602, "is closed")
        held.signal("KILL")
        assert held.wait().signal == 9
        refused(lambda: c.spawn(["true"], cwd="/etc"), -32602, '"cwd" must lie in /workspace')
        refused(lambda: c.spawn(["true"], pty={"cols": 0, "rows": 1}), -32602, '"pty" must be')
        try:
            c.spawn(["true"], bogus=1)
            raise AssertionError("no error")
        except TypeError as e:
            assert "bogus" in str(e)
        print("ok")
    """)


def test_python_live_session(cordon, daemon, py_client):
    """A live session keeps cwd, env and background processes between calls;
    pause stops a ticker, resume restarts it at the next tick (root: an ordinary
    user has no freezer, refused and said); expose serves a port to the host
    (a level with a network namespace of its own; the process, gvisor and
    microvm levels refuse)."""
    run_py(cordon, daemon, py_client, """
        c = cordon.Client(path)
        s = c.create_session(live=True)
        assert s.live and [x["live"] for x in c.sessions()] == [True], c.sessions()
        def sh(code):
            r = s.exec(code=code, language="sh")
            assert r.exit_code == 0, (r.stdout, r.stderr, r.error)
            return r.stdout.decode()
        sh('cd "${TMPDIR:-/tmp}" && mkdir -p sub && cd sub && export GREETING=hello; '
           '(sleep 0.3; echo later > bg) >/dev/null 2>&1 &')
        assert sh("pwd; echo $GREETING").endswith("/sub\\nhello\\n")
        eventually(lambda: s.exec(["cat", "bg"]).stdout == b"later\\n")

        # A process of the session's left running between calls: it ticks.
        ticker = s.spawn(["sh", "-c", "i=0; while :; do i=$((i+1)); echo tick$i; "
                                      "sleep 0.1; done"])
        assert ticker.session_id == s.id
        until(ticker, "tick3\\n")
        assert sh("echo between") == "between\\n"
        seen = until(ticker, "tick6\\n")
        assert [p["process_id"] for p in s.processes() if p["state"] == "running"] == \\
            [ticker.id]
        if root:
            s.pause()
            assert c.sessions()[0]["state"] == "paused"
            # Drained of what was on its way, it says nothing until resumed (2 s of
            # silence from a process that ticks 10 times a second)...
            end = time.monotonic() + 60
            while True:
                assert time.monotonic() < end, "it goes on ticking while paused"
                try:
                    seen += ticker.read(timeout=2)
                except TimeoutError:
                    break
            last = int(seen.strip().split(b"tick")[-1])
            s.resume()
            # ... and then goes on from the next tick: none was lost or skipped.
            nxt = until(ticker, "\\n")
            assert nxt.startswith(f"tick{last + 1}\\n".encode()), (last, nxt[:40])
        else:
            try:
                s.pause()
                raise AssertionError("paused without a freezer")
            except cordon.RpcError as e:
                assert e.code == -32000 and "freezer" in e.message, e
        ticker.signal("KILL")
        assert ticker.wait().signal == 9

        if level in ("process", "gvisor", "microvm"):
            try:
                s.expose(8000)
                raise AssertionError("exposed without a network namespace")
            except cordon.RpcError as e:
                assert "no network namespace of its own" in e.message, e
        else:
            sh("echo served > index.html; python3 -m http.server 8000 --bind 127.0.0.1 "
               ">/dev/null 2>&1 &")
            got = s.expose(8000)
            host, port = got["address"].rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) == got["host_port"], got
            def fetch(path=None):
                try:
                    if path:
                        k = socket.socket(socket.AF_UNIX)
                        k.settimeout(10)
                        k.connect(path)
                    else:
                        k = socket.create_connection((host, int(port)), timeout=10)
                    with k:
                        k.sendall(b"GET /index.html HTTP/1.0\\r\\n\\r\\n")
                        data = b""
                        while (part := k.recv(65536)):
                            data += part
                    return data
                except OSError:
                    return b""
            eventually(lambda: fetch().endswith(b"\\r\\n\\r\\nserved\\n"))
            via_path = s.expose(8000, unix=True)["path"]
            assert via_path.endswith(f"/expose-{s.id}/8000.sock"), via_path
            assert fetch(via_path).endswith(b"\\r\\n\\r\\nserved\\n")
            s.unexpose(8000)
        try:
            s.expose(8001)
            raise AssertionError("exposed a port the policy refuses")
        except cordon.RpcError as e:
            assert e.message == "session.expose: port 8001 is not in the policy's network.expose"
        s.destroy()
        assert s.id not in [x["session_id"] for x in c.sessions()]
        print("ok")
    """)


def test_python_slow_reader_holds_the_process_back(cordon, daemon, py_client):
    """A consumer that reads slowly, then not at all: the process blocks on its
    output (the daemon counts no more of it, far below what `yes` would write),
    the client holds nothing of it, and reading again lets it go on."""
    mark = marker()
    run_py(cordon, daemon, py_client, f"""
        c = cordon.Client(path)
        p = c.spawn(["sh", "-c", "exec yes {mark}"])
        for _ in range(20):
            assert b"{mark}" in p.read(timeout=60)
            time.sleep(0.05)
        watcher = cordon.Client(path)
        def written():
            return [x for x in watcher.processes() if x["process_id"] == p.id][0]["output_bytes"]
        samples = []
        def settled():
            samples.append(written())
            time.sleep(0.5)
            return len(samples) > 2 and samples[-1] == samples[-2] == samples[-3] > 0
        eventually(settled)
        assert samples[-1] < 16 << 20, samples
        assert p.buffered <= 64 << 10 and p.exit is None, (p.buffered, p.exit)   # one recv at most
        assert [x["state"] for x in watcher.processes() if x["process_id"] == p.id] == ["running"]
        got = 0
        while got < 4 << 20:                   # it goes on once read again
            got += len(p.read(timeout=60))
        eventually(lambda: written() > samples[-1])
        p.signal("KILL")
        assert p.wait().signal == 9
        print("ok")
    """)
    assert wait_until(lambda: not pids_with(mark), 30)


def test_node_processes(cordon, daemon):
    """The same through the Node client (clients/node/test/process.test.mjs)."""
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    # A copy every identity can read.
    where = cordon.hostdir("node-client")
    shutil.copytree(NODE_CLIENT, where / "c", dirs_exist_ok=True)
    for dirpath, dirs, files in os.walk(where):
        for n in dirs:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in files:
            os.chmod(os.path.join(dirpath, n), 0o644)
    env = cordon.ident.env({"CORDON_SOCKET": str(daemon.path), "CORDON_LEVEL": cordon.level,
                            "CORDON_ROOT": "1" if cordon.root else "0"})
    r = subprocess.run(cordon.ident.wrap([node, "--test", str(where / "c" / "test" /
                                                              "process.test.mjs")]),
                       capture_output=True, text=True, timeout=300, env=env, cwd=cordon.tmp)
    assert r.returncode == 0 and "# pass 6" in r.stdout and "# fail 0" in r.stdout, \
        r.stdout[-4000:] + r.stderr[-2000:]
