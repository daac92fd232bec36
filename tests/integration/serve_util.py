"""
Helpers for tests of `cordon serve`: a real daemon on a real unix socket, run
as one identity, and a raw line-oriented JSON-RPC client that can also
misbehave.
"""

import json
import os
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import wait_until


class Rpc:
    """One connection: requests out, answers and notifications in."""

    def __init__(self, path, timeout=60, sock=None):
        if sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(str(path))
        self.sock = sock
        self.sock.settimeout(timeout)
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

    def pending(self):
        """Has anything arrived that was not read yet (without waiting)?"""
        if self.buf:
            return True
        r, _, _ = select.select([self.sock], [], [], 0)
        return bool(r)

    def close(self):
        self.sock.close()


# Connects as another uid and hands the socket back over SCM_RIGHTS: the
# daemon's SO_PEERCRED is the connecting process's, which is that uid.
CONNECT_AS = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
socket.send_fds(socket.socket(fileno=int(sys.argv[2])), [b"x"], [s.fileno()])
"""


def connect_as(path, uid, timeout=60):
    """A connection to the daemon on PATH made by UID (its directory must let UID in)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                        "/usr/bin/python3", "-c", CONNECT_AS, str(path), str(theirs.fileno())],
                       pass_fds=[theirs.fileno()], check=True, timeout=30)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    return Rpc(path, timeout, sock=socket.socket(fileno=fds[0]))


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


def children(pid):
    """PID's child processes."""
    try:
        return [int(k) for k in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def children_named(pid, name):
    """PID's child processes called NAME (its comm: a daemon's worker is "cordon-commit"...)."""
    found = []
    for kid in children(pid):
        try:
            if open(f"/proc/{kid}/comm").read().strip() == name:
                found.append(int(kid))
        except OSError:
            pass
    return found


class Stopped:
    """The daemon's worker NAME, caught while it works and held stopped (SIGSTOP)
    for the with block: its operation is in flight until the block ends."""

    def __init__(self, daemon, name, timeout=60):
        self.daemon, self.name, self.timeout = daemon, name, timeout
        self.pid = None

    def __enter__(self):
        found = []
        assert wait_until(lambda: found.extend(children_named(self.daemon.proc.pid, self.name))
                          or found, self.timeout, interval=0.005), f"no {self.name} appeared"
        self.pid = found[0]
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)
