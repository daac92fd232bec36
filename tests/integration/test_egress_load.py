"""
The gateway under a run's own load: connections that trickle their request
head (slowloris) or sit idle must not starve the run's other requests, and
what the run may hold is the gateway's connection cap, at every level (the
relays of gvisor and microvm included: no process, pids or relay slot per
connection decides it instead).

"The internet" is an HTTP server, an HTTPS one (test CA) and a server that
accepts and never answers, on 127.0.0.2, named example.test, as in
test_egress.py; each counts the connections it accepted, so a connection the
gateway cut is seen never to have gone upstream.
"""

import json
import os
import selectors
import socket
import ssl
import threading

import pytest

import egress_servers as es

NAME = "example.test"
EG = "/eg"
# The gateway's head budget (egress/gateway_int.h): connections still sending
# their request head at once; past it the oldest is cut.
HEAD_BUDGET = 32

# Runs inside: one JSON line per step.
CLIENT = r'''
import json, os, socket, ssl, sys, time, urllib.parse

PROXY = urllib.parse.urlsplit(os.environ.get("http_proxy") or "http://127.0.0.1:3128")
FIRST = {"proxy": b"G", "plain": b"G",
         # A TLS record header announcing a ClientHello, and its first byte.
         "tls": b"\x16\x03\x01\x02\x00\x01"}

def where(mode, host, port):
    if mode == "proxy":
        return (PROXY.hostname, PROXY.port)
    return (socket.gethostbyname(host), port)  # the stub's synthetic address

def read_all(s):
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except ConnectionResetError:
        if not data:
            return None
    return data

def status_of(data):
    if data is None:
        return "reset"
    if not data:
        return "eof"
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    denied = [l.split(":", 1)[1].strip() for l in head if l.lower().startswith("x-cordon-denied:")]
    return head[0].split()[1] + " " + (denied[0] if denied else "-")

def request(mode, host, port, path, ca):
    """One whole request, as a client sends it: the answer's status."""
    addr = where("plain" if mode == "tls" else mode, host, port)
    s = socket.create_connection(addr, timeout=30)
    if mode == "tls":
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(s, server_hostname=host)
    target = f"http://{host}:{port}{path}" if mode == "proxy" else path
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
              .encode())
    got = status_of(read_all(s))
    s.close()
    return got

def slow(mode, host, port, n, ca):
    """N connections that send their first byte, then one more a second; a
    whole request meanwhile; then how each slow one ended, waiting until all
    but the head budget's are cut."""
    addr = where(mode, host, port)
    conns = []
    for _ in range(n):
        s = socket.create_connection(addr, timeout=30)
        s.sendall(FIRST[mode])
        conns.append(s)
    normal = request(mode, host, port, "/normal", ca)
    ends, still = {}, list(conns)
    deadline = time.monotonic() + 60
    while still and len(conns) - len(still) < n - %d and time.monotonic() < deadline:
        time.sleep(1)
        left = []
        for s in still:
            s.setblocking(False)
            try:
                d = s.recv(65536)
            except BlockingIOError:
                try:
                    s.send(b"E")  # one more byte of the head
                    left.append(s)
                except OSError:
                    ends["send failed"] = ends.get("send failed", 0) + 1
                continue
            except ConnectionResetError:
                d = None
            if d:
                s.setblocking(True)
                s.settimeout(10)
                d += read_all(s) or b""
            k = status_of(d)
            ends[k] = ends.get(k, 0) + 1
        still = left
    return {"normal": normal, "ends": ends, "open": len(still)}

def tunnels(hold, to, mode, host, port, ca):
    """HOLD idle CONNECT tunnels to TO; then one more (its status), a whole
    request (its status); one tunnel closed, the request again."""
    held, statuses = [], []
    for _ in range(hold):
        s = socket.create_connection((PROXY.hostname, PROXY.port), timeout=30)
        s.sendall(f"CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n".encode())
        statuses.append(int(s.recv(4096).split()[1]))
        held.append(s)
    s = socket.create_connection((PROXY.hostname, PROXY.port), timeout=30)
    s.sendall(f"CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n".encode())
    extra = status_of(read_all(s))
    full = request(mode, host, port, "/full", ca)
    # One tunnel ends: the server closes it on a byte, and the gateway's
    # close reaches the client only once its place is free.
    t = held.pop()
    t.sendall(b"bye")
    ended = read_all(t) == b""
    after = request(mode, host, port, "/after", ca)
    for s in held:
        s.close()
    return {"held": statuses.count(200), "other": [x for x in statuses if x != 200],
            "extra": extra, "full": full, "ended": ended, "after": after}

fn = {"slow": slow, "tunnels": tunnels}[sys.argv[1]]
print(json.dumps(fn(*json.loads(sys.argv[2]))), flush=True)
'''.replace("%d", str(HEAD_BUDGET))


class Sink:
    """Accepts connections and holds them, answering nothing; closes one as
    soon as it gets a byte (or its end). ACCEPTED counts them."""

    def __init__(self, addr):
        self.sock = socket.create_server((addr, 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held = set()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ)
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop:
            for key, _ in self.sel.select(0.1):
                if key.fileobj is self.sock:
                    try:
                        c, _ = self.sock.accept()
                    except OSError:
                        continue
                    self.accepted += 1
                    self.held.add(c)
                    self.sel.register(c, selectors.EVENT_READ)
                    continue
                c = key.fileobj
                self.sel.unregister(c)
                self.held.discard(c)
                c.close()

    def reset(self):
        self.accepted = 0

    def close(self):
        self._stop = True
        self._t.join()
        for c in list(self.held):
            c.close()
        self.sock.close()


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, cert, key = es.make_ca(d, [NAME, f"*.{NAME}"], ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.web = es.Server("web", "127.0.0.2")
        self.tls = es.Server("tls", "127.0.0.2", tls=ctx)
        self.sink = Sink("127.0.0.2")
        self.internal = es.Server("internal", "127.0.0.1")
        (d / "load.py").write_text(CLIENT)
        for f in ("ca.pem", "load.py"):
            os.chmod(d / f, 0o644)

    def opts(self, *extra):
        rules = [f"{NAME}:{p}" for p in (self.web.port, self.tls.port, self.sink.port)]
        return [*[a for r in rules for a in ("--allow", r)], "--allow-private", "127.0.0.2/32",
                "--resolve", f"{NAME}=127.0.0.2", "--ro", f"{self.dir}:{EG}", "-t", "240s",
                *extra]

    def servers(self):
        return (self.web, self.tls, self.internal, self.sink)


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-eload-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def untouched(net):
    for s in net.servers():
        s.reset()
    yield
    assert net.internal.count() == 0, net.internal.requests


def load(cordon, net, step, args, *opts):
    r = cordon.run(["python3", f"{EG}/load.py", step, json.dumps(args)], *net.opts(*opts),
                   timeout=300)
    assert r.status == 0 and r.result["reason"] == "exited", r
    return json.loads(r.out.splitlines()[-1]), r


def audit_decisions(log):
    return [e for e in map(json.loads, log.read_text().splitlines())
            if e["type"] == "egress.decision"]


# (mode, the port the slow ones and the whole request go to, what a cut slow one sees)
SLOW = [("proxy", "web", {"429 budget:heads", "408 bad_request"}),
        ("plain", "web", {"429 budget:heads", "408 bad_request"}),
        ("tls", "tls", {"reset", "eof"})]


@pytest.mark.parametrize("mode,port,cut_as", SLOW, ids=[m for m, _, _ in SLOW])
def test_slow_heads_do_not_starve_the_run(cordon, net, mode, port, cut_as):
    """300 connections trickling a head one byte a second, through the proxy
    door or to a synthetic address (plain HTTP, or a ClientHello that never
    ends): a whole request made after them is answered; all but the head
    budget's are cut (429, or a reset where TLS was coming), each with its
    record; none of them reached the server."""
    server = getattr(net, port)
    log = cordon.hostdir("audit") / "audit.jsonl"
    n = 300
    out, r = load(cordon, net, "slow", [mode, NAME, server.port, n, f"{EG}/ca.pem"],
                  "--audit", log)
    assert out["normal"] == "200 -", (out, r)
    assert out["open"] <= HEAD_BUDGET, out
    assert set(out["ends"]) <= cut_as, out
    assert sum(out["ends"].values()) >= n - HEAD_BUDGET, out
    assert server.count() == 1, server.connections       # the whole request's, and only it
    assert [q["path"] for q in server.requests] == ["/normal"]
    # Each cut one has its record: the head budget's 429, or the head deadline's 408.
    decided = audit_decisions(log)
    cut = [d for d in decided if d["rule"] == "budget:heads"]
    late = [d for d in decided if d["status"] == 408]
    assert cut and all(d["status"] == 429 and not d["allowed"] for d in cut), cut[:3]
    assert len(cut) + len(late) >= n - HEAD_BUDGET, (len(cut), len(late))
    v = cordon.raw("audit", "verify", log)
    assert v.status == 0, v


@pytest.mark.parametrize("mode", ["proxy", "plain"])
def test_idle_tunnels_count_against_the_connection_cap(cordon, net, mode):
    """200 idle tunnels under a cap of 200: the run is not ended (no pids
    limit: a relay's connection is no process), the next connection gets the
    gateway's 429 (at microvm too, not a reset), and once one tunnel closes a
    request goes through again."""
    policy = cordon.hostdir() / "policy.yaml"
    policy.write_text("version: 1\nnetwork:\n  budgets:\n    connections: 200\n")
    hold = 200
    out, r = load(cordon, net, "tunnels",
                  [hold, f"{NAME}:{net.sink.port}", mode, NAME, net.web.port, f"{EG}/ca.pem"],
                  "-p", policy)
    assert out["held"] == hold and out["other"] == [], out
    assert out["extra"] == "429 budget:connections", out
    assert out["full"] == "429 budget:connections", out
    assert out["ended"] and out["after"] == "200 -", out
    assert net.sink.accepted == hold, net.sink.accepted   # the refused ones went nowhere
    assert [q["path"] for q in net.web.requests] == ["/after"]
