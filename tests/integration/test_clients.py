"""
The Python (clients/python) and Node (clients/node) clients of `cordon serve`,
each against a real daemon: the Python package is installed with pip into a
temporary directory and driven from a separate interpreter; the Node module
is tested with node's own test runner.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from serve_util import Daemon

PY_CLIENT = REPO / "clients" / "python"
NODE_CLIENT = REPO / "clients" / "node"


@pytest.fixture
def running(root_cordon):
    d = Daemon(root_cordon, "--pool", "2")
    yield d
    d.stop()


def test_python_client(running, hosttmp):
    target = hosttmp / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                          "--no-deps", "--target", str(target), str(PY_CLIENT)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    for junk in ("build", "cordon_client.egg-info"):
        shutil.rmtree(PY_CLIENT / junk, ignore_errors=True)
    script = textwrap.dedent("""
        import sys, cordon
        from typing import List
        path = sys.argv[1]
        with cordon.Client(path) as c:
            r = c.run(["sh", "-c", "read x; echo got:$x:$V; exit 4"], stdin="in\\n", env={"V": "v"})
            assert (r.exit_code, r.stdout, r.signal, r.reason) == (4, b"got:in:v\\n", None, "exited"), r
            r = c.run(code="import sys; sys.stdout.buffer.write(bytes([0, 255]))")
            assert r.stdout == b"\\x00\\xff" and r.ok, r
            try:
                c.call("no.such.method")
                raise SystemExit("no error")
            except cordon.RpcError as e:
                assert e.code == -32601 and "unknown method" in e.message, e
            try:
                c.run(["true"], timeout=-1)
                raise SystemExit("no error")
            except cordon.RpcError as e:
                assert e.code == -32602 and not isinstance(e, cordon.BusyError), e
            chunks: List[cordon.Chunk] = []
            s = c.stream(["sh", "-c", "echo a; sleep 0.2; echo b >&2"])
            for ch in s:
                chunks.append(ch)
            assert [(x.stream, x.data) for x in chunks] == [("stdout", b"a\\n"), ("stderr", b"b\\n")], chunks
            assert s.result is not None and s.result.exit_code == 0
            with c.session() as ses:
                ses.write_file("x.bin", b"\\x00one")
                assert ses.exec(["sh", "-c", "cat x.bin; echo two > y"]).stdout == b"\\x00one"
                [f] = ses.fork()
                f.exec(["sh", "-c", "echo three >> y"])
                assert ses.read_file("y") == b"two\\n" and f.read_file("y") == b"two\\nthree\\n"
                f.destroy()
            with c.session(workspace_mode="overlay", workspace_commit="manual") as ses:
                t = ses.exec(["sh", "-c", "echo one > z"]).transaction
                assert t is not None and (t["outcome"], t["added"]) == ("pending", 1), t
                assert ses.commit()["outcome"] == "committed" and ses.read_file("z") == b"one\\n"
                ses.exec(["rm", "z"])
                assert ses.discard()["removed"] == 1 and ses.read_file("z") == b"one\\n"
            assert c.sessions() == []
            assert c.stats()["runs"]["pooled"] >= 1
        # An answer with a key twice (an error, then a result) is no answer at all.
        import os, socket, tempfile, threading
        fake = os.path.join(tempfile.mkdtemp(), "fake.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(fake)
        srv.listen(1)
        def answer():
            conn, _ = srv.accept()
            conn.makefile("rb").readline()
            conn.sendall(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"},'
                         b'"error":null,"result":{"ok":true}}\\n')
        threading.Thread(target=answer, daemon=True).start()
        with cordon.Client(fake) as c:
            try:
                c.call("stats")
                raise SystemExit("no error")
            except cordon.RpcError as e:
                raise SystemExit(f"read as an answer: {e}")
            except cordon.CordonError as e:
                assert "not JSON" in str(e), e
        print("python client ok")
    """)
    env = {"PYTHONPATH": str(target), "PATH": os.environ["PATH"]}
    r = subprocess.run([sys.executable, "-c", script, str(running.path)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=hosttmp)
    assert r.returncode == 0 and r.stdout == "python client ok\n", r.stderr


def test_node_client(running):
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    r = subprocess.run([node, "--test", str(NODE_CLIENT / "test" / "client.test.mjs")], capture_output=True,
                       text=True, timeout=120,
                       env={"CORDON_SOCKET": str(running.path), "PATH": os.environ["PATH"]})
    assert r.returncode == 0 and "# pass 4" in r.stdout and "# fail 0" in r.stdout, r.stdout + r.stderr
