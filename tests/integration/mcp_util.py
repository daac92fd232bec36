"""
What the MCP tests share: where the npm packages are, policies, the SDK
client driver (tests/mcp/client.mjs) and a raw-pipe client for what no SDK
client would send.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import REPO

MCP = REPO / "tests" / "mcp"
NODE = shutil.which("node") or "/usr/bin/node"


def require_npm_packages():
    if not (MCP / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("tests/mcp/node_modules is missing: run scripts/install-test-deps.sh")


def policy(cordon, text, name="mcp.yaml"):
    """A policy file (version 1 and TEXT) in a fresh directory."""
    p = cordon.hostdir() / name
    p.write_text("version: 1\n" + text)
    return p


def clean(stderr):
    """No report of a memory or undefined-behaviour bug (under -Db_sanitize)."""
    assert "Sanitizer" not in stderr and "runtime error:" not in stderr, stderr[-5000:]


def sdk(cordon, argv, steps, handlers=None, timeout_ms=60000, env=None):
    """Run the official SDK client against ARGV with STEPS; its one JSON report."""
    script = {"command": argv[0], "args": argv[1:], "env": cordon.ident.env(env),
              "steps": steps, "timeout_ms": timeout_ms, "deadline_ms": timeout_ms * 3}
    if handlers is not None:
        script["handlers"] = handlers
    # A file, not stdin: node's synchronous read of a large script from a pipe hits EAGAIN.
    path = cordon.hostdir() / "script.json"
    path.write_text(json.dumps(script))
    p = subprocess.run([NODE, str(MCP / "client.mjs"), str(path)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=cordon.tmp, timeout=timeout_ms / 1000 * 4)
    assert p.returncode == 0, f"client.mjs failed ({p.returncode}): {p.stderr.decode()[-3000:]}"
    rep = json.loads(p.stdout)
    assert rep["connected"], rep
    clean(rep["stderr"])
    return rep


class RawClient:
    """A client on raw pipes: newline-delimited JSON-RPC, by hand."""

    def __init__(self, argv, env, cwd=None, stdin=subprocess.PIPE):
        self.p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, cwd=cwd,
                                  start_new_session=True)
        self.buf = b""
        self.seen = []

    def send(self, msg):
        data = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.p.stdin.write(data + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout=30):
        """The next message, or None when none came in TIMEOUT seconds or the stream ended."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            d = os.read(self.p.stdout.fileno(), 1 << 20)
            if not d:
                return None
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        m = json.loads(line)
        self.seen.append(m)
        return m

    def answers(self, n, timeout=60):
        """The next N messages."""
        got = []
        end = time.monotonic() + timeout
        while len(got) < n:
            m = self.recv(max(0.0, end - time.monotonic()))
            assert m is not None, f"only {len(got)} of {n} answers came: {got}"
            got.append(m)
        return got

    def answer(self, rid, timeout=60):
        """The response to RID, passing over notifications and other answers."""
        end = time.monotonic() + timeout
        while True:
            m = self.recv(max(0.0, end - time.monotonic()))
            if m is None or ("method" not in m and m.get("id") == rid):
                return m

    def request(self, rid, method, params=None, timeout=60):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        m = self.answer(rid, timeout)
        assert m is not None, f"no answer to {method} (id {rid})"
        return m

    def initialize(self, version="2025-06-18"):
        r = self.request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                           "clientInfo": {"name": "raw", "version": "1"}})
        assert "result" in r, r
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r["result"]

    def close(self, timeout=30):
        """Close stdin; the exit status, what else was written, and stderr."""
        if self.p.stdin:
            self.p.stdin.close()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            pytest.fail("cordon did not end after its stdin closed")
        rest = self.buf + self.p.stdout.read()
        # A process that gave up on a client not reading may end mid-line.
        lines = rest.split(b"\n")[:-1]
        extra = [json.loads(l) for l in lines if l.strip()]
        self.seen.extend(extra)
        err = self.p.stderr.read().decode("utf-8", "replace")
        clean(err)
        return rc, extra, err

    def ended(self, timeout=20):
        """The exit status of a process ended by other means than its stdin."""
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("cordon did not end")
        clean(self.p.stderr.read().decode("utf-8", "replace"))
        return rc

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
