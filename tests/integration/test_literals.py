"""
Proxy-unaware clients and IP literals (issue 27, item 8).

Node's fetch, Go and the JVM ignore HTTP_PROXY. They reach an allowed name
through the DNS stub and a synthetic address; an allowed address they named
themselves (`--allow 127.0.0.2:PORT` with `--allow-private 127.0.0.2/32`, a
`localhost` port) reaches the gateway too, handed over by the keeper of the
command's connect() calls (the namespace level's init, the process level's
supervisor) or the level's relay, and is checked as a CONNECT to it would be:
address classes, budgets, the record. An address no rule allows is refused,
and the person is told once, with the flags that would allow it.

The servers are HTTP servers on an address of the host's own (not
loopback: at the namespace level loopback is the run's own unless a rule
takes a port of it over) and on 127.0.0.1 for `localhost`, each counting
what reaches it. The host's address here is in a documentation range, so
like a private one it needs --allow-private; the tests name it either way.
"""

import json
import shutil

import pytest

import egress_servers as es
from conftest import host_ipv4_addresses

NO_PROXY_ENV = ["env", "-u", "HTTP_PROXY", "-u", "HTTPS_PROXY", "-u", "ALL_PROXY", "-u",
                "http_proxy", "-u", "https_proxy", "-u", "all_proxy"]

NODE = ("(async () => { for (const u of process.argv.slice(1)) { try {"
        " const r = await fetch(u); console.log(r.status, (await r.text()).trim()); }"
        " catch (e) { console.log('ERR', e.cause && e.cause.code); } } })()")

PY = """import sys, urllib.request, urllib.error
for u in sys.argv[1:]:
    try:
        r = urllib.request.urlopen(u, timeout=20)
        print(r.status, r.read().decode().strip())
    except urllib.error.HTTPError as e:
        print(e.code, e.headers.get("X-Cordon-Denied"))
    except OSError as e:
        print("ERR", type(getattr(e, "reason", e)).__name__)
"""


class Net:
    def __init__(self, d):
        self.dir = d
        self.addr = host_ipv4_addresses()[0]
        self.web = es.Server("web", self.addr)
        self.other = es.Server("other", self.addr)     # same address, a port no rule names
        self.local = es.Server("local", "127.0.0.1")   # the host's localhost

    def servers(self):
        return (self.web, self.other, self.local)


@pytest.fixture(scope="module")
def net():
    if not host_ipv4_addresses():
        pytest.skip("this host has no non-loopback IPv4 address (ip -4 addr)")
    with es.scratch_net("cit-literals-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def fresh(net):
    for s in net.servers():
        s.reset()
    yield


def told(r):
    return [l for l in r.err.splitlines() if l.startswith("cordon: egress")]


def decisions(r):
    return [json.loads(d) if isinstance(d, str) else d for d in r.result["egress"]["recent"]]


def test_node_and_python_reach_an_allowed_literal(cordon, net):
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    url = f"http://{net.addr}:{net.web.port}"
    opts = ["--allow", f"{net.addr}:{net.web.port}", "--allow-private", f"{net.addr}/32",
            "-t", "60s"]
    r = cordon.run([*NO_PROXY_ENV, "node", "-e", NODE, f"{url}/node"], *opts)
    assert r.status == 0, r
    assert r.out == "200 hello from web\n", r
    r = cordon.run([*NO_PROXY_ENV, "python3", "-c", PY, f"{url}/py"], *opts)
    assert r.status == 0, r
    assert r.out == "200 hello from web\n", r
    assert [q["path"] for q in net.web.requests] == ["/node", "/py"]
    # Checked and recorded as any request: transparent, by its rule.
    d = [x for x in decisions(r) if x.get("transparent")]
    assert [(x["method"], x["host"], x["port"], x["allowed"]) for x in d] == \
        [("GET", net.addr, net.web.port, True)], d
    assert d[0]["rule"] == f"allow:{net.addr}:{net.web.port}", d
    assert told(r) == [], r


def test_localhost_port_of_the_host(cordon, net):
    """`--allow 127.0.0.1:PORT` with --allow-private names the host's port:
    `localhost:PORT` reaches it (the rule takes it over from the run's own
    loopback), and only that port."""
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    urls = [f"http://localhost:{net.local.port}/node", f"http://127.0.0.1:{net.web.port}/no"]
    r = cordon.run([*NO_PROXY_ENV, "node", "-e", NODE, *urls], "--allow",
                   f"127.0.0.1:{net.local.port}", "--allow-private", "127.0.0.1/32", "-t", "60s")
    assert r.status == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "200 hello from local", r
    assert lines[1].startswith("ERR"), r  # nothing of the run's, nor the host's, there
    assert [q["path"] for q in net.local.requests] == ["/node"]
    assert net.web.count() == 0


def test_literals_no_rule_allows_are_refused_and_told(cordon, net):
    """The same address on another port, an allowed port without its private
    range, and a public literal: refused at connect, nothing reaches the
    servers, one line each with the flags that would allow it."""
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    urls = [f"http://{net.addr}:{net.other.port}/other", f"http://{net.addr}:{net.web.port}/web",
            "http://198.51.100.9/public"]
    # ADDR:web is allowed, but its range is not: the SSRF rules hold it.
    r = cordon.run([*NO_PROXY_ENV, "node", "-e", NODE, *urls], "--allow",
                   f"{net.addr}:{net.web.port}", "-t", "60s")
    assert r.status == 0, r
    assert r.out.splitlines() == ["ERR ECONNREFUSED"] * 3, r
    assert all(s.count() == 0 for s in net.servers())
    other, web = f"{net.addr}:{net.other.port}", f"{net.addr}:{net.web.port}"
    got = told(r)
    assert f"cordon: egress refused: {other} (no rule; --allow {other} --allow-private " \
           f"{net.addr}/32)" in got, r
    assert any(l.startswith(f"cordon: egress refused: {web} (ssrf:") for l in got), r
    assert "cordon: egress refused: 198.51.100.9 (no rule; --allow 198.51.100.9 " \
           "--allow-private 198.51.100.9/32)" in got, r
    assert len(got) == 3, r
    d = {(x["host"], x["port"]): x["rule"] for x in decisions(r)}
    assert d[(net.addr, net.other.port)] == "not_allowed", d
    assert d[(net.addr, net.web.port)].startswith("ssrf:"), d
    assert d[("198.51.100.9", 80)] == "not_allowed", d


def test_with_no_network_a_literal_is_told_too(cordon, net):
    r = cordon.run([*NO_PROXY_ENV, "python3", "-c", PY, f"http://{net.addr}:{net.web.port}/x"],
                   "-t", "60s")
    assert r.status == 0, r
    assert r.out.startswith("ERR"), r
    subject = f"{net.addr}:{net.web.port}"
    assert told(r) == [f"cordon: egress refused: {subject} (no rule: --net none; --allow "
                       f"{subject} --allow-private {net.addr}/32 imply --net gateway)"], r
    assert net.web.count() == 0


DUAL = """import socket, sys
def get(host, port, hostname):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)  # dual-stack, as a JVM's
    s.settimeout(20)
    try:
        s.connect(("::ffff:" + host, port))
        s.sendall(f"GET /dual HTTP/1.1\\r\\nHost: {hostname}:{port}\\r\\n\\r\\n".encode())
        return s.recv(100).split(b"\\r\\n")[0].decode()
    except OSError as e:
        return type(e).__name__
name, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(get(socket.gethostbyname(name), port, name))
print(get(addr, port, addr))
"""


def test_dual_stack_socket_reaches_a_name_and_a_literal(cordon, net):
    """An IPv6 socket connecting to an IPv4-mapped address (a JVM's way)
    reaches the allowed name's synthetic address and the allowed literal."""
    name = "dual.test"
    r = cordon.run([*NO_PROXY_ENV, "python3", "-c", DUAL, name, net.addr, str(net.web.port)],
                   "--allow", f"{name}:{net.web.port}", "--resolve", f"{name}={net.addr}",
                   "--allow", f"{net.addr}:{net.web.port}", "--allow-private", f"{net.addr}/32",
                   "-t", "60s")
    assert r.status == 0, r
    assert r.out.splitlines() == ["HTTP/1.1 200 OK"] * 2, r
    assert [q["path"] for q in net.web.requests] == ["/dual", "/dual"]
