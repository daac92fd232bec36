"""
Transparent egress: clients that ignore HTTP(S)_PROXY (node's fetch, a raw
socket, urllib without the proxy variables) reach an allowed host through
the sandbox's DNS stub and a synthetic address, and the gateway applies the
proxy's checks to them.

"The internet" is an HTTP and an HTTPS server on 127.0.0.2 (test CA), named
example.test through --resolve and --allow-private 127.0.0.2/32, as in
test_egress.py. The gateway's own nameserver (--dns) is a UDP server on the
host that records every name it is asked: a name the sandbox was refused
must never reach it. Every test ends with the "internal" service on
127.0.0.1 untouched.
"""

import json
import os
import shutil
import ssl

import pytest

import egress_servers as es

NAME = "example.test"
EG = "/eg"
NO_PROXY_ENV = ["env", "-u", "HTTP_PROXY", "-u", "HTTPS_PROXY", "-u", "ALL_PROXY", "-u",
                "http_proxy", "-u", "https_proxy", "-u", "all_proxy"]

# Runs inside: each step one JSON line. A DNS query by hand (rcode and the
# A records), a request through a connection to an address, TLS with a
# chosen server name.
CLIENT = r'''
import json, socket, ssl, struct, sys

def query(name, qtype=1):
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack("!HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q, ("127.0.0.53", 53))
    a = s.recv(1500)
    rcode, an = struct.unpack("!H", a[2:4])[0] & 0xf, struct.unpack("!H", a[6:8])[0]
    return {"rcode": rcode, "a": [socket.inet_ntoa(a[-4:])] if an else []}

def http(addr, port, host, path="/t"):
    s = socket.create_connection((addr, port), timeout=20)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    denied = [l.split(":", 1)[1].strip() for l in head.split("\r\n")
              if l.lower().startswith("x-cordon-denied:")]
    return {"status": int(head.split()[1]) if head else 0, "denied": denied[0] if denied else None,
            "body": data.split(b"\r\n\r\n", 1)[-1].decode("latin-1")}

def tls(addr, port, sni, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    try:
        with socket.create_connection((addr, port), timeout=20) as raw:
            with ctx.wrap_socket(raw, server_hostname=sni) as s:
                s.sendall(f"GET /tls HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
                return {"ok": s.recv(100).split(b"\r\n")[0].decode()}
    except (OSError, ssl.SSLError) as e:
        return {"error": type(e).__name__}

def connect(addr, port):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect((addr, port))
        s.settimeout(10)
        return {"connected": True, "data": s.recv(100).decode("latin-1")}
    except OSError as e:
        return {"errno": e.__class__.__name__}

def read_head(s):
    """A response's head, and what of its body came with it."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            break
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body

def proxied(name, port, n):
    """N proxy requests, each for a name of its own under NAME: the request
    indexes by status and X-Cordon-Denied."""
    import os, urllib.parse
    proxy = urllib.parse.urlsplit(os.environ["http_proxy"])
    seen = {}
    for i in range(n):
        host = f"p{i}.{name}:{port}"
        s = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
        s.sendall(f"GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        head = read_head(s)[0].decode("latin-1").split("\r\n")
        s.close()
        denied = [l.split(":", 1)[1].strip() for l in head if l.lower().startswith("x-cordon-denied:")]
        seen.setdefault(head[0].split()[1] + " " + (denied[0] if denied else "-"), []).append(i)
    return seen

def burst(addr, port, host, n):
    """N requests in a row, each on its own connection, which the client
    closes first: as soon as the body is in (its Content-Length)."""
    statuses = []
    addr = addr or socket.gethostbyname(host)  # through resolv.conf: the stub
    for i in range(n):
        s = socket.create_connection((addr, port), timeout=20)
        s.sendall(f"GET /burst{i} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        head, body = read_head(s)
        length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length:")]
        while length and len(body) < length[0]:
            d = s.recv(65536)
            if not d:
                break
            body += d
        s.close()
        statuses.append(int(head.split()[1]) if head else 0)
    return {"statuses": statuses}

for step in json.loads(sys.argv[1]):
    fn = {"query": query, "http": http, "tls": tls, "connect": connect, "burst": burst,
          "proxied": proxied}[step[0]]
    try:
        print(json.dumps(fn(*step[1:])), flush=True)
    except Exception as e:
        print(json.dumps({"exception": repr(e)}), flush=True)
'''


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, cert, key = es.make_ca(d, [NAME, f"*.{NAME}"], ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.web = es.Server("web", "127.0.0.2")
        self.tls = es.Server("tls", "127.0.0.2", tls=ctx)
        self.internal = es.Server("internal", "127.0.0.1")
        self.dns = es.DnsStub("127.0.0.3", 0, {})
        (d / "client.py").write_text(CLIENT)
        for f in ("ca.pem", "client.py"):
            os.chmod(d / f, 0o644)

    def opts(self, *extra, allow=None):
        allow = allow or [f"{NAME}:{self.web.port}", f"{NAME}:{self.tls.port}"]
        return [*[a for r in allow for a in ("--allow", r)], "--allow-private", "127.0.0.2/32",
                "--resolve", f"{NAME}=127.0.0.2", "--dns", f"127.0.0.3:{self.dns.port}",
                "--ro", f"{self.dir}:{EG}", "-t", "60s", *extra]

    def servers(self):
        return (self.web, self.tls, self.internal)

    def others(self):
        return (self.dns,)


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-tegress-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def untouched(net):
    for s in net.servers():
        s.reset()
    net.dns.seen.clear()
    yield
    assert net.internal.count() == 0, net.internal.requests


def steps(cordon, net, steps_, *opts, allow=None):
    """The client's STEPS inside, without any proxy variable: its replies and the Run."""
    r = cordon.run([*NO_PROXY_ENV, "python3", f"{EG}/client.py", json.dumps(steps_)],
                   *net.opts(*opts, allow=allow))
    assert r.status == 0, r
    return [json.loads(l) for l in r.out.splitlines()], r


def decisions(r):
    return [json.loads(d) if isinstance(d, str) else d for d in r.result["egress"]["recent"]]


def synthetic(addr):
    a = [int(x) for x in addr.split(".")]
    return a[0] == 198 and a[1] in (18, 19)


def test_node_fetch_reaches_allowed_host(cordon, net):
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    js = ("(async () => { for (const u of process.argv.slice(1)) {"
          " const r = await fetch(u); console.log(r.status, await r.text()); } })()"
          ".catch(e => { console.log('ERR', e.cause && e.cause.code); process.exit(3); })")
    urls = [f"http://{NAME}:{net.web.port}/node", f"https://{NAME}:{net.tls.port}/node-tls"]
    r = cordon.run(["env", f"NODE_EXTRA_CA_CERTS={EG}/ca.pem", "node", "-e", js, *urls],
                   *net.opts())
    assert r.status == 0, r
    assert r.out == "200 hello from web\n\n200 hello from tls\n\n", r
    assert [q["path"] for q in net.web.requests] == ["/node"], net.web.requests
    assert [q["path"] for q in net.tls.requests] == ["/node-tls"], net.tls.requests
    d = decisions(r)
    assert {(x["method"], x["host"], x["allowed"]) for x in d if x.get("transparent")} >= {
        ("GET", NAME, True), ("TLS", NAME, True)}, d
    assert net.dns.seen == []  # the pin answered: the gateway asked no one


def test_python_without_proxy_variables(cordon, net):
    out, r = steps(cordon, net, [["query", NAME], ["query", NAME, 28]])
    (a, aaaa) = out
    assert a["rcode"] == 0 and len(a["a"]) == 1 and synthetic(a["a"][0]), out
    assert aaaa == {"rcode": 0, "a": []}, out  # IPv4 only: AAAA is empty, not refused
    addr = a["a"][0]
    py = ("import json, sys, ssl, urllib.request as u\n"
          f"print(u.urlopen('http://{NAME}:{net.web.port}/py', timeout=20).read().decode())\n"
          f"c = ssl.create_default_context(cafile='{EG}/ca.pem')\n"
          f"print(u.urlopen('https://{NAME}:{net.tls.port}/py-tls', timeout=20, context=c).status)\n")
    r = cordon.run([*NO_PROXY_ENV, "python3", "-c", py], *net.opts())
    assert r.status == 0, r
    assert r.out.splitlines()[-1] == "200", r
    assert [q["path"] for q in net.web.requests] == ["/py"]
    assert [q["path"] for q in net.tls.requests] == ["/py-tls"]
    # The same address for the same name, all run long; a raw socket too.
    out, r = steps(cordon, net, [["query", NAME], ["query", NAME.upper()],
                                 ["http", addr, net.web.port, NAME, "/raw"]])
    assert out[0]["a"] == out[1]["a"] == [addr], out
    assert out[2]["status"] == 200, out
    assert net.web.requests[-1]["path"] == "/raw"
    assert net.web.requests[-1]["headers"].get("Host") == f"{NAME}:{net.web.port}"


def test_connections_in_a_row_each_reach_the_host(cordon, net):
    """More connections than a relay has ids for (a microvm guest: 64), one
    after another, each closed by the client first: each reaches the host as
    its own request, none lands on an earlier connection's way out."""
    n = 80
    out, r = steps(cordon, net, [["burst", None, net.web.port, NAME, n]])
    assert out == [{"statuses": [200] * n}], out
    assert sorted(q["path"] for q in net.web.requests) == sorted(f"/burst{i}" for i in range(n))


FORGE = r"""
import json, os, socket, struct, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
MAGIC = b"\0cordon-relay1"  # common/relay_wire.h

def talk(data, want=None):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
    s.sendall(data)
    got = b""
    try:
        while want is None or len(got) < want:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    return got

port = int(sys.argv[1])
# A connection "to" the internal service's address, as a relay would open it.
head = MAGIC + b"T" + socket.inet_aton("127.0.0.1") + struct.pack("!H", port)
web = talk(head + f"GET /forged HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
# A DNS stream asking for a name no rule allows.
q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x06secret\x04evil\x04test\x00"
q += struct.pack("!HH", 1, 1)
a = talk(MAGIC + b"D" + struct.pack("!H", len(q)) + q, want=2 + 12)
# Where no relay was agreed the gateway refuses the head as HTTP: no DNS at all.
print(json.dumps({"web": web[:12].decode("latin-1"),
                  "dns": a[:12].decode("latin-1") if a.startswith(b"HTTP/") else
                  a[5] & 0xf if len(a) >= 6 else None}))
"""


def test_forged_relay_preface_gets_nothing_more(cordon, net):
    """The command opens the proxy port itself with a relay's preface (where
    a level relays, the gateway takes them there): one naming the internal
    service's address, one a DNS stream asking for a refused name. It gets
    what a connection to that address or that query gets: a reset, NXDOMAIN
    or nothing at all; the internal service and the nameserver see nothing."""
    (net.dir / "forge.py").write_text(FORGE)
    os.chmod(net.dir / "forge.py", 0o644)
    r = cordon.run(["python3", f"{EG}/forge.py", str(net.internal.port)], *net.opts())
    assert r.status == 0, r
    out = json.loads(r.out)
    assert not out["web"].startswith("HTTP/1.1 2"), out
    assert out["dns"] in (None, 3, "HTTP/1.1 400"), out  # NXDOMAIN, or refused outright
    assert net.dns.seen == []
    assert all(s.count() == 0 for s in net.servers())


DNS_FLOOD = r"""
import json, os, socket, struct, sys, urllib.parse, urllib.request
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x01x\x04evil\x04test\x00"
q += struct.pack("!HH", 1, 1)
held, answered = [], 0
for _ in range(300):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
    s.sendall(b"\0cordon-relay1D" + struct.pack("!H", len(q)) + q)
    try:
        d = s.recv(2)
    except OSError:
        d = b""
    answered += len(d) == 2 and not d.startswith(b"HT")
    held.append(s)
status = urllib.request.urlopen(sys.argv[1], timeout=20).status
print(json.dumps({"answered": answered, "status": status}))
"""


def test_dns_streams_the_command_opens_are_bounded(cordon, net):
    """The command speaks a relay's DNS preface on 300 connections and holds them: at
    most 256 are taken as DNS streams (they took no connection budget, without a
    bound: 6,500 fds and 171 MB of the gateway's), and a request still gets through."""
    (net.dir / "flood.py").write_text(DNS_FLOOD)
    os.chmod(net.dir / "flood.py", 0o644)
    r = cordon.run(["python3", f"{EG}/flood.py", f"http://{NAME}:{net.web.port}/after"],
                   *net.opts(), timeout=120)
    assert r.status == 0, r
    out = json.loads(r.out)
    assert out["answered"] <= 256 and out["status"] == 200, out
    assert net.dns.seen == []


def test_refused_name_never_leaves_the_sandbox(cordon, net):
    names = ["secret-payload.evil.test", "agvsbg8.exfil.test", f"x.{NAME}", "localhost.test"]
    out, r = steps(cordon, net, [["query", n] for n in names] + [["query", "other.test", 28]])
    assert out == [{"rcode": 3, "a": []}] * 5, out
    py = ("import socket\ntry:\n socket.getaddrinfo('evil.test', 443)\n print('resolved')\n"
          "except socket.gaierror as e:\n print('gaierror', e.errno == socket.EAI_NONAME)\n")
    r2 = cordon.run([*NO_PROXY_ENV, "python3", "-c", py], *net.opts())
    assert r2.out.strip() == "gaierror True", r2
    assert net.dns.seen == []  # zero queries reached the host's nameserver
    refused = [d for d in decisions(r) if d["method"] == "DNS"]
    assert {d["host"] for d in refused} == set(names) | {"other.test"}, refused
    assert all(not d["allowed"] and d["rule"] == "not_allowed" for d in refused), refused
    assert all(s.count() == 0 for s in net.servers())


def test_ports_and_addresses_the_policy_does_not_allow(cordon, net):
    out, r = steps(cordon, net, [["query", NAME]])
    addr = out[0]["a"][0]
    unassigned = "198.18.1.200"
    out, r = steps(cordon, net, [["query", NAME], ["connect", addr, net.internal.port],
                                 ["connect", unassigned, net.web.port],
                                 ["connect", "127.0.0.2", net.web.port],
                                 ["http", unassigned, net.web.port, NAME]])
    assert out[1] == {"errno": "ConnectionRefusedError"}, out  # no listener on that port
    # An address the stub never gave out, or loopback on an allowed port:
    # the gateway's listener takes it and resets it, having connected nowhere.
    # The process level has no loopback of its own: there loopback is the
    # host's, refused at connect() like every address but the synthetic ones.
    own_loopback = cordon.level != "process"
    for reply in out[2:4] if own_loopback else out[2:3]:
        assert reply.get("errno") == "ConnectionResetError" or reply.get("data") == "", out
    if not own_loopback:
        assert out[3] == {"errno": "ConnectionRefusedError"}, out
    assert out[4].get("status", 0) == 0, out  # reset: no answer of any kind
    assert all(s.count() == 0 for s in net.servers())
    d = [x for x in decisions(r) if x.get("transparent") and x["method"] != "DNS"]
    assert d and all(not x["allowed"] and x["rule"] == "not_allowed" for x in d), d


def test_tls_server_name_must_be_the_host_behind_the_address(cordon, net):
    out, r = steps(cordon, net, [["query", NAME], ["query", f"www.{NAME}"]],
                   allow=[f"{NAME}:{net.tls.port}", f"www.{NAME}:{net.tls.port}"])
    addr, other = out[0]["a"][0], out[1]["a"][0]
    ca = f"{EG}/ca.pem"
    out, r = steps(cordon, net, [["query", NAME], ["tls", addr, net.tls.port, f"evil.{NAME}", ca],
                                 ["tls", addr, net.tls.port, None, ca],
                                 ["tls", addr, net.tls.port, NAME, ca]])
    assert "error" in out[1] and "error" in out[2], out
    assert out[3] == {"ok": "HTTP/1.1 200 OK"}, out
    assert net.tls.count() == 1  # only the honest one reached the server
    fronting = [x for x in decisions(r) if x["rule"] == "fronting"]
    assert len(fronting) == 2 and all(not x["allowed"] and x["host"] == NAME for x in fronting), \
        decisions(r)
    assert other != addr


def test_http_host_must_be_the_host_behind_the_address(cordon, net):
    out, r = steps(cordon, net, [["query", NAME]])
    addr = out[0]["a"][0]
    out, r = steps(cordon, net, [["query", NAME],
                                 ["http", addr, net.web.port, "other.test"],
                                 ["http", addr, net.web.port, f"{NAME}:1"],
                                 ["http", addr, net.web.port, "127.0.0.1"]])
    for reply in out[1:]:
        assert reply["status"] == 403 and reply["denied"] == "fronting", out
    assert net.web.count() == 0
    assert [x["rule"] for x in decisions(r) if x.get("transparent") and x["method"] == "GET"] == \
        ["fronting"] * 3


def test_wildcard_rule_caps_distinct_names(cordon, net):
    names = [f"n{i}.{NAME}" for i in range(257)]
    out, r = steps(cordon, net, [["query", n] for n in names] + [["query", names[0]]],
                   allow=[f"*.{NAME}:{net.web.port}"])
    got = [o["a"][0] for o in out[:256]]
    assert all(o["rcode"] == 0 for o in out[:256]) and len(set(got)) == 256, out[:3]
    assert all(synthetic(a) for a in got)
    assert out[256] == {"rcode": 3, "a": []}, out[256]      # the 257th name
    assert out[257]["a"] == [got[0]]                        # a known name still answers
    capped = [x for x in decisions(r) if x["rule"] == "budget:dns_names"]
    assert [x["host"] for x in capped] == [names[256]], capped
    assert net.dns.seen == []


def test_wildcard_cap_counts_the_names_the_proxy_resolves_too(cordon, net):
    """The proxy door is the same channel as the stub: a name the gateway
    resolves for a proxy request counts against the run's 256 distinct names,
    and past them no query reaches the host's nameserver."""
    n_stub, n_proxy = 200, 100
    steps_ = [["query", f"s{i}.{NAME}"] for i in range(n_stub)]
    r = cordon.run(["python3", f"{EG}/client.py",  # with the proxy variables
                    json.dumps(steps_ + [["proxied", NAME, net.web.port, n_proxy]])],
                   *net.opts(allow=[f"*.{NAME}:{net.web.port}"]))
    assert r.status == 0, r
    *stub, got = [json.loads(l) for l in r.out.splitlines()]
    assert all(o["rcode"] == 0 for o in stub) and len(stub) == n_stub, stub[:3]
    room = 256 - n_stub
    assert got.get("429 budget:dns_names") == list(range(room, n_proxy)), got
    assert sorted(i for k, v in got.items() if k.startswith("502") for i in v) == \
        list(range(room)), got  # resolved: the host's nameserver has no answer
    asked = set(net.dns.seen)
    assert asked == {f"p{i}.{NAME}" for i in range(room)}, sorted(asked)[:5]
    assert any(x["rule"] == "budget:dns_names" and x["status"] == 429 for x in decisions(r)), \
        decisions(r)


def test_tls_to_port_80_is_refused_as_connect_there_is(cordon, net):
    """TLS passed through on port 80 would carry plain HTTP past the
    per-request checks, as a CONNECT to port 80 would: refused, and the
    server on port 80 sees no connection."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(net.dir / "srv.pem", net.dir / "srv.key")
    tls80 = es.Server("tls80", "127.0.0.2", tls=ctx, port=80)
    try:
        out, _ = steps(cordon, net, [["query", NAME]], allow=[f"{NAME}:80"])
        addr = out[0]["a"][0]  # the same in the next run: one stable address per name
        out, r = steps(cordon, net, [["query", NAME], ["tls", addr, 80, NAME, f"{EG}/ca.pem"]],
                       allow=[f"{NAME}:80"])
        assert "error" in out[1], out
        assert tls80.count() == 0
    finally:
        tls80.close()
    refused = [x for x in decisions(r) if x["rule"] == "connect_port"]
    assert len(refused) == 1 and not refused[0]["allowed"] and refused[0]["host"] == NAME, \
        decisions(r)


def test_proxy_aware_clients_are_unchanged(cordon, net):
    cmd = ["curl", "-sS", "--max-time", "20", f"http://{NAME}:{net.web.port}/proxied"]
    r = cordon.run(cmd, *net.opts())
    assert r.status == 0 and r.out == "hello from web\n", r
    assert [q["path"] for q in net.web.requests] == ["/proxied"]
    (d,) = decisions(r)
    assert d["method"] == "GET" and d["allowed"] and "transparent" not in d, d


def test_tls_to_a_host_a_secret_is_bound_to_is_intercepted(cordon, net):
    """Without the proxy, too: the gateway ends the client's TLS (with the
    run's CA, which the sandbox trusts) and swaps the placeholder in."""
    value = "real-" + os.urandom(16).hex()
    py = ("import os, urllib.request as u\n"
          f"q = u.Request('https://{NAME}:{net.tls.port}/headers', headers={{'X-Api-Key': os.environ['A']}})\n"
          "print(u.urlopen(q, timeout=20).read().decode())\n")
    r = cordon.run([*NO_PROXY_ENV, "python3", "-c", py],
                   *net.opts("--secret", f"A=env:VAL_A@{NAME}:{net.tls.port}"),
                   env={"SSL_CERT_FILE": str(net.ca), "VAL_A": value})
    assert r.status == 0, r
    (q,) = net.tls.requests
    assert q["headers"]["X-Api-Key"] == value, q
    assert value.encode() not in r.stdout, r  # the echo was scrubbed on its way back
    (d,) = [x for x in decisions(r) if x.get("transparent")]
    assert d["allowed"] and d.get("intercepted") and d["secrets"] == ["A"], d
