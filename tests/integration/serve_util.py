"""
Helpers for tests of `cordon serve`: a real daemon on a real unix socket, run
as one identity, and a raw line-oriented JSON-RPC client that can also
misbehave.
"""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import wait_until


class Rpc:
    """One connection: requests out, answers and notifications in."""

    def __init__(self, path, timeout=60):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""
        self.next_id = 0
        self.notes = []

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, params=None, id=None):
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")
        return id

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("the daemon closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def answer(self, id=None):
        """The next answer (to ID if given); notifications on the way are kept."""
        while True:
            msg = self.line()
            if "method" in msg:
                self.notes.append(msg)
                continue
            if id is None or msg.get("id") == id:
                return msg

    def call(self, method, params=None):
        return self.answer(self.send(method, params))

    def result(self, method, params=None):
        ans = self.call(method, params)
        assert "result" in ans, ans
        return ans["result"]

    def close(self):
        self.sock.close()


class Daemon:
    def __init__(self, cordon, *opts, env=None):
        self.cordon = cordon
        self.dir = cordon.hostdir(mode=0o700)
        self.path = self.dir / "cordon.sock"
        self.opts = opts
        self.env = env
        self.proc = None
        self.start()

    def start(self, wait=True):
        argv = self.cordon.argv("serve", "--socket", self.path, *self.opts)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.cordon.ident.env(self.env),
                                     cwd=self.cordon.tmp, start_new_session=True)
        if wait:
            ok = wait_until(lambda: self._answers() or self.proc.poll() is not None, 20)
            if not ok or self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"cordon serve did not start: {err.decode()[-2000:]}")

    def _answers(self):
        try:
            Rpc(self.path, 5).close()
            return True
        except OSError:
            return False

    def connect(self, timeout=60):
        return Rpc(self.path, timeout)

    def pool_ready(self, n, timeout=30):
        c = self.connect()
        try:
            return wait_until(lambda: c.result("stats")["pool"]["ready"] >= n, timeout)
        finally:
            c.close()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            pytest.fail("cordon serve did not stop")
        return self.proc.returncode, err.decode()
