"""
The gateway's bulk path (src/egress/bulk.c): bytes nothing must read go socket
to socket by splice(2). Its boundaries, each through a real sandbox and real
servers on 127.0.0.2 (reached as bulk.test):

  - a large tunnel both ways arrives byte for byte (sha256 on both ends),
    with the client's half-close passed on to the server;
  - a plain request body of known length and its answer, likewise;
  - the run's byte budget cuts a spliced tunnel exactly where it runs out,
    and the record says so.

Nothing here may be intercepted: the run has no secrets and no request rules,
so the tunnels and bodies are all the bulk path's.
"""

import hashlib
import json
import os
import resource
import socket
import threading

import pytest

import egress_servers as es

NAME = "bulk.test"
EG = "/eg"
DOWN = 24 << 20  # what the tunnel's server sends
UP = 12 << 20  # what the client sends through it

CLIENT = r'''
import hashlib, json, os, socket, sys
to, up = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(f"CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    got = s.recv(65536)
    if not got:
        break
    head += got
head, _, rest = head.partition(b"\r\n\r\n")
status = int(head.split()[1]) if head else 0
sent = hashlib.sha256()
block = os.urandom(1 << 20)
left = up
while left > 0:
    piece = block[: min(left, len(block))]
    s.sendall(piece)
    sent.update(piece)
    left -= len(piece)
if up:
    s.shutdown(socket.SHUT_WR)
got_sha, n = hashlib.sha256(rest), len(rest)
while True:
    try:
        b = s.recv(1 << 20)
    except ConnectionResetError:
        break
    if not b:
        break
    got_sha.update(b)
    n += len(b)
print(json.dumps({"status": status, "sent": sent.hexdigest(), "got": got_sha.hexdigest(),
                  "len": n}))
'''

POST = r'''
import hashlib, http.client, json, os, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = os.urandom(n)
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=30)
c.request("POST", f"http://{host}:{port}/echo", body=body,
          headers={"Host": f"{host}:{port}", "Content-Length": str(n)})
r = c.getresponse()
got = r.read()
print(json.dumps({"status": r.status, "sent": hashlib.sha256(body).hexdigest(),
                  "got": hashlib.sha256(got).hexdigest(), "len": len(got)}))
'''


class Bulk:
    """A TCP server: per connection, reads until the client's half-close (or
    not, when PUSH), then sends DOWN random bytes and closes; it records the
    sha256 and length of what it received and what it sent."""

    def __init__(self, push):
        self.push = push
        self.data = os.urandom(DOWN)
        self.sent_sha = hashlib.sha256(self.data).hexdigest()
        self.got, self.lock = [], threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.2", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        s.settimeout(60)
        h, n = hashlib.sha256(), 0
        try:
            while not self.push:
                b = s.recv(1 << 20)
                if not b:
                    break
                h.update(b)
                n += len(b)
            s.sendall(self.data)
        except OSError:
            pass
        finally:
            with self.lock:
                self.got.append({"sha": h.hexdigest(), "len": n})
            s.close()

    def reset(self):
        with self.lock:
            self.got = []

    def close(self):
        self.sock.close()


class Net:
    def __init__(self, d):
        self.dir = d
        self.sink = Bulk(push=False)
        self.push = Bulk(push=True)
        self.web = es.Server("web", "127.0.0.2")
        (d / "client.py").write_text(CLIENT)
        (d / "post.py").write_text(POST)
        for f in ("client.py", "post.py"):
            os.chmod(d / f, 0o644)

    def opts(self, *extra):
        return [*(a for s in self.servers() for a in ("--allow", f"{NAME}:{s.port}")),
                "--allow-private", "127.0.0.2/32", "--resolve", f"{NAME}=127.0.0.2",
                "--ro", f"{self.dir}:{EG}", "-t", "120s", *extra]

    def servers(self):
        return (self.sink, self.push, self.web)


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-bulk-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def fresh(net):
    for s in net.servers():
        s.reset()


def tunnel(cordon, net, server, up, *opts):
    cmd = ["python3", f"{EG}/client.py", f"{NAME}:{server.port}", str(up)]
    r = cordon.run(cmd, *net.opts(*opts), timeout=180)
    assert r.status == 0, r
    return json.loads(r.out), r


def test_large_tunnel_both_ways_byte_for_byte_with_half_close(cordon, net):
    # The server answers only after the client's half-close has reached it
    # through the gateway: the answer proves the half-close went on, after
    # every byte the client sent.
    out, r = tunnel(cordon, net, net.sink, UP)
    assert out["status"] == 200, out
    assert net.sink.got == [{"sha": out["sent"], "len": UP}], (net.sink.got, out)
    assert (out["got"], out["len"]) == (net.sink.sent_sha, DOWN), out
    eg = r.result["egress"]
    assert (eg["bytes_up"], eg["bytes_down"]) == (UP, DOWN), eg
    assert [d["reason"] for d in eg["recent"]] == [""], eg


def test_without_pipes_to_spare_the_tunnel_copies_intact(cordon, net):
    # Under 700 descriptors the gateway keeps every one for the connections
    # its caps admit (src/egress/gateway.c, pipe_budget): no pipe, the
    # copying path carries the same bytes.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (700, hard))
    try:
        out, r = tunnel(cordon, net, net.sink, UP)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert out["status"] == 200, out
    assert net.sink.got == [{"sha": out["sent"], "len": UP}], (net.sink.got, out)
    assert (out["got"], out["len"]) == (net.sink.sent_sha, DOWN), out
    eg = r.result["egress"]
    assert (eg["bytes_up"], eg["bytes_down"]) == (UP, DOWN), eg


def test_large_request_body_and_answer_byte_for_byte(cordon, net):
    n = 16 << 20
    cmd = ["python3", f"{EG}/post.py", NAME, str(net.web.port), str(n)]
    r = cordon.run(cmd, *net.opts(), timeout=180)
    assert r.status == 0, r
    out = json.loads(r.out)
    assert out["status"] == 200 and out["len"] == n and out["got"] == out["sent"], out
    [req] = net.web.requests
    assert len(req["body"]) == n and hashlib.sha256(req["body"]).hexdigest() == out["sent"]
    eg = r.result["egress"]
    assert eg["bytes_up"] > n and eg["bytes_down"] > n, eg


def budget_policy(cordon, n):
    p = cordon.hostdir() / "policy.yaml"
    p.write_text(f"version: 1\nnetwork:\n  budgets:\n    bytes: {n}\n")
    return ["-p", p]


def test_byte_budget_cuts_a_spliced_tunnel_exactly(cordon, net):
    # 24 MB offered, 1,000,000 allowed: the client gets exactly the budget's
    # bytes (a tunnel's CONNECT head is not counted), the first of what the
    # server sent, and the record says the budget cut it.
    budget = 1_000_000
    out, r = tunnel(cordon, net, net.push, 0, *budget_policy(cordon, budget))
    assert out["status"] == 200, out
    assert out["len"] == budget, out
    assert out["got"] == hashlib.sha256(net.push.data[:budget]).hexdigest(), out
    eg = r.result["egress"]
    assert eg["bytes_down"] == budget and eg["bytes_up"] == 0, eg
    [d] = eg["recent"]
    assert (d["rule"], d["reason"]) == ("budget:bytes", "byte budget exhausted"), d
    assert d["bytes_down"] == budget, d
