"""
The egress gateway: the one door out of a sandbox, and `cordon fetch`.

"The internet" is a pair of servers on 127.0.0.2 (plain HTTP and HTTPS with a
test CA), reached as example.test through --resolve and --allow-private
127.0.0.2/32. An "internal" service on 127.0.0.1 and a "metadata" one on
127.0.0.5 stand for what SSRF goes after: every test ends by checking that
neither saw a single connection. Clients inside are real (curl, urllib,
http.client, node) or egress_servers.py sending exact bytes to the proxy.
"""

import json
import os
import pathlib
import resource
import shutil
import ssl
import subprocess
import time

import pytest

import egress_servers as es
from conftest import marker, pids_with, wait_until

NAME = "example.test"
EG = "/eg"  # where the helper directory is bound inside
CLIENT = ["python3", f"{EG}/egress_servers.py"]
CURL = ["curl", "-sS", "--max-time", "20"]


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, srv_cert, srv_key = es.make_ca(d, [NAME, f"*.{NAME}"], ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(srv_cert, srv_key)
        self.web = es.Server("web", "127.0.0.2")
        self.tls = es.Server("tls", "127.0.0.2", tls=ctx)
        self.internal = es.Server("internal", "127.0.0.1")
        self.metadata = es.Server("metadata", "127.0.0.5")
        self.hang = es.Hang("127.0.0.2")
        self.body = es.pattern(200_000)[::-1] + bytes(range(256)) * 4
        (d / "body.bin").write_bytes(self.body)
        shutil.copy(pathlib.Path(es.__file__), d / "egress_servers.py")
        for f in ("ca.pem", "body.bin", "egress_servers.py"):
            os.chmod(d / f, 0o644)
        self.http = f"http://{NAME}:{self.web.port}"
        self.https = f"https://{NAME}:{self.tls.port}"

    def opts(self, *extra):
        """Gateway flags for example.test on both ports, plus EXTRA."""
        return ["--allow", f"{NAME}:{self.web.port}", "--allow", f"{NAME}:{self.tls.port}",
                "--allow-private", "127.0.0.2/32", "--resolve", f"{NAME}=127.0.0.2",
                "--ro", f"{self.dir}:{EG}", "-t", "60s", *extra]

    def servers(self):
        return (self.web, self.tls, self.internal, self.metadata)

    def others(self):
        return (self.hang,)


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-egress-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def untouched(net):
    """Fresh counters per test; the internal and metadata services see nothing."""
    for s in net.servers():
        s.reset()
    yield
    assert net.internal.count() == 0, net.internal.requests
    assert net.metadata.count() == 0, net.metadata.requests


def inside(cordon, net, cmd, *opts, gateway=True, **kw):
    if not gateway:
        return cordon.run(cmd, "--ro", f"{net.dir}:{EG}", "-t", "60s", *opts, **kw)
    return cordon.run(cmd, *net.opts(*opts), **kw)


def client(cordon, net, mode, arg, *opts, gateway=True):
    """egress_servers.py MODE ARG in the sandbox; its JSON lines and the Run."""
    r = inside(cordon, net, [*CLIENT, mode, json.dumps(arg)], *opts, gateway=gateway)
    assert r.status == 0, r
    return [json.loads(l) for l in r.out.splitlines()], r


def assert_refused(reply, status, rule, r=None):
    assert reply.get("status") == status, f"{reply}\n{r or ''}"
    assert reply["denied"] == rule, f"{reply}\n{r or ''}"
    assert reply["body"].endswith("\n") and reply["body"].count("\n") == 1, reply


# --- the door ---------------------------------------------------------------

PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
              "all_proxy"]


def test_proxy_variables_inside(cordon, net):
    r = inside(cordon, net, ["env"])
    env = dict(l.split("=", 1) for l in r.out.splitlines() if "=" in l)
    for v in PROXY_VARS:
        assert env.get(v) == "http://127.0.0.1:3128", r
    # Loopback only is exempt: the run's own, or (process level) the keeper's to refuse.
    assert env.get("NO_PROXY") == env.get("no_proxy") == "localhost,127.0.0.1,::1", r


def test_net_none_is_default(cordon, net):
    """No flag, no network: nothing gets out, and yet a client is not left to
    wait out its retries. The gateway allows nothing, answers at once (a 403
    through the proxy, NXDOMAIN from the stub), and the person is told each
    name once, with the flags that would allow it."""
    cmd = ["sh", "-c", f"env; for i in 1 2; do {' '.join(CURL)} {net.http}/hello; echo; done; "
                       f"{' '.join(CURL)} --noproxy '*' {net.http}/hello; echo curl=$?"]
    r = inside(cordon, net, cmd, "--resolve", f"{NAME}=127.0.0.2", gateway=False)
    assert r.status == 0, r
    assert all(f"{v}=http://127.0.0.1:3128" in r.out for v in PROXY_VARS), r
    assert r.out.count(f"{NAME}:{net.web.port} is not on the allowlist") == 2, r
    assert "curl=6" in r.out, r  # the stub knows no name (the pin is the gateway's)
    subject = f"{NAME}:{net.web.port}"
    told = [l for l in r.err.splitlines() if "egress" in l]
    assert told == [f"cordon: egress refused: {subject} (no rule: --net none; --allow {subject} "
                    f"implies --net gateway)",
                    f"cordon: egress refused: {NAME} (no rule: --net none; --allow {NAME} implies "
                    f"--net gateway)"], r
    assert r.result["egress"]["allowed"] == 0 and r.result["egress"]["refused"] == 3, r
    out, r = client(cordon, net, "direct", [["127.0.0.2", net.web.port]], gateway=False)
    # 127.0.0.0/8 inside is the sandbox's own loopback (at the process level
    # the keeper refuses what no rule allows): nothing listens there.
    assert out == [{"errno": "ECONNREFUSED"}], r
    assert net.web.count() == 0


def test_curl_http_and_https(cordon, net):
    cmd = ["sh", "-c", f"{' '.join(CURL)} {net.http}/hello && "
                       f"{' '.join(CURL)} --cacert {EG}/ca.pem {net.https}/hello"]
    r = inside(cordon, net, cmd)
    assert r.status == 0, r
    assert r.out == "hello from web\nhello from tls\n", r
    assert [q["path"] for q in net.web.requests] == ["/hello"]
    assert [q["path"] for q in net.tls.requests] == ["/hello"]
    assert net.web.requests[0]["headers"].get("Connection") == "close"
    assert r.result["egress"]["allowed"] == 2 and r.result["egress"]["refused"] == 0, r


PY_CLIENTS = f"""
import http.client, ssl, urllib.request
print(urllib.request.urlopen("{{http}}/u", timeout=20).read().decode(), end="")
print(urllib.request.urlopen("{{https}}/u", timeout=20).read().decode(), end="")
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
c.request("GET", "{{http}}/hc")
print(c.getresponse().read().decode(), end="")
ctx = ssl.create_default_context(cafile="{EG}/ca.pem")
c = http.client.HTTPSConnection("127.0.0.1", 3128, timeout=20, context=ctx)
c.set_tunnel("{NAME}", {{tls_port}})
c.request("GET", "/hc")
print(c.getresponse().read().decode(), end="")
"""


def test_python_clients(cordon, net):
    script = PY_CLIENTS.format(http=net.http, https=net.https, tls_port=net.tls.port)
    r = inside(cordon, net, ["python3", "-c", script], "-e", f"SSL_CERT_FILE={EG}/ca.pem")
    assert r.status == 0, r
    assert r.out == "hello from web\nhello from tls\n" * 2, r
    assert [q["path"] for q in net.web.requests] == ["/u", "/hc"]
    assert [q["path"] for q in net.tls.requests] == ["/u", "/hc"]


@pytest.mark.parametrize("coding", ["length", "chunked"])
def test_post_body_arrives_intact(cordon, net, coding):
    te = ["-H", "Transfer-Encoding: chunked"] if coding == "chunked" else []
    for url, tls in ((net.http, []), (net.https, ["--cacert", f"{EG}/ca.pem"])):
        r = inside(cordon, net, [*CURL, *tls, *te, "--data-binary", f"@{EG}/body.bin",
                                 "-o", "/tmp/echo", "-w", "%{http_code} %{size_download}",
                                 f"{url}/echo"])
        assert r.status == 0 and r.out == f"200 {len(net.body)}", r
        (d,) = r.result["egress"]["recent"]
        assert d["bytes_up"] >= len(net.body) and d["bytes_down"] > len(net.body), d
    for srv in (net.web, net.tls):
        (q,) = srv.requests
        assert q["method"] == "POST" and q["body"] == net.body, srv.name
        assert q["chunked"] == (coding == "chunked"), srv.name


def test_node_fetch_to_a_name_not_allowed_gets_nothing(cordon, net):
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    js = (f"fetch('http://other.test:{net.web.port}/node').then(r => r.text())"
          ".then(t => console.log('GOT', t),"
          " e => { console.log('ERR', e.cause && e.cause.code); process.exit(3); })")
    r = inside(cordon, net, ["node", "-e", js], "--resolve", "other.test=127.0.0.2")
    # node 20's fetch does not read HTTP_PROXY: it resolves the name itself.
    # The sandbox's resolver (the namespace level's DNS stub, see
    # test_transparent_egress.py) knows no name the policy does not allow;
    # elsewhere there is no resolver and no route at all.
    assert r.status == 3 and r.out.startswith("ERR"), r
    assert net.web.count() == 0


def test_socket_ignoring_proxy_gets_nothing(cordon, net):
    out, r = client(cordon, net, "direct",
                    [["127.0.0.2", net.web.port], ["127.0.0.2", net.tls.port],
                     ["127.0.0.1", net.internal.port], ["127.0.0.5", net.metadata.port]])
    # The sandbox's own loopback: nothing listens there, except at the
    # namespace level the transparent gateway on the ports the policy allows
    # a name on, which resets a connection that came to no synthetic address.
    # (The reset may land before connect() returns, or after.)
    nothing = {"errno": "ECONNREFUSED"}
    reset = ({"connected": True, "got": "reset"}, {"errno": "ECONNRESET"})
    assert out[0] in (nothing, *reset), r
    assert out[1] in (nothing, *reset), r
    assert out[2:] == [nothing] * 2, r
    assert net.web.count() == 0 and net.tls.count() == 0


# --- refusals by rule -------------------------------------------------------


def test_not_allowed_host(cordon, net):
    cmd = [*CURL, "-i", f"http://other.test:{net.web.port}/x"]
    r = inside(cordon, net, cmd, "--resolve", "other.test=127.0.0.2")
    assert r.status == 0 and r.out.startswith("HTTP/1.1 403 "), r
    assert "X-Cordon-Denied: not_allowed\r\n" in r.out, r
    assert r.out.endswith(f"other.test:{net.web.port} is not on the allowlist\n"), r
    assert net.web.count() == 0


def test_deny_beats_allow(cordon, net):
    out, r = client(cordon, net, "hc", [["GET", f"{net.http}/d", f"{NAME}:{net.web.port}"],
                                        ["CONNECT", f"{NAME}:{net.tls.port}", NAME]],
                    "--deny", f"{NAME}:{net.web.port}", "--deny", f"{NAME}:{net.tls.port}")
    assert_refused(out[0], 403, f"deny:{NAME}:{net.web.port}", r)
    assert_refused(out[1], 403, f"deny:{NAME}:{net.tls.port}", r)
    assert net.web.count() == 0 and net.tls.count() == 0


def test_connect_to_allowed_name_on_other_port(cordon, net):
    r = inside(cordon, net, [*CURL, "-w", "%{http_connect}", "--cacert", f"{EG}/ca.pem",
                             f"https://{NAME}:{net.web.port}/", f"https://{NAME}:22/"])
    # web.port is allowed for the name: the tunnel opens and TLS fails against
    # the plain server. Port 22 is not: the CONNECT itself is refused.
    assert r.out.endswith("403"), r
    out, r = client(cordon, net, "hc", [["CONNECT", f"{NAME}:22", f"{NAME}:22"]])
    assert_refused(out[0], 403, "not_allowed", r)
    assert net.tls.count() == 0


# Address of each class: (id, address as a pin, as a URL host, class).
CLASSES = [
    ("loopback", "127.0.0.1", "127.0.0.1", "loopback"),
    ("rfc1918-10", "10.0.0.1", "10.0.0.1", "private"),
    ("rfc1918-172", "172.16.0.1", "172.16.0.1", "private"),
    ("rfc1918-192", "192.168.1.1", "192.168.1.1", "private"),
    ("metadata", "169.254.169.254", "169.254.169.254", "link_local"),
    ("cgnat", "100.64.0.1", "100.64.0.1", "cgnat"),
    ("unspecified", "0.0.0.0", "0.0.0.0", "unspecified"),
    ("this-network", "0.1.2.3", "0.1.2.3", "this_network"),
    ("multicast", "224.0.0.1", "224.0.0.1", "multicast"),
    ("broadcast", "255.255.255.255", "255.255.255.255", "broadcast"),
    ("documentation", "192.0.2.1", "192.0.2.1", "documentation"),
    ("benchmark", "198.18.0.1", "198.18.0.1", "benchmark"),
    ("reserved", "240.0.0.1", "240.0.0.1", "reserved"),
    ("v6-loopback", "[::1]", "[::1]", "loopback"),
    ("v6-unspecified", "[::]", "[::]", "unspecified"),
    ("ula", "[fc00::1]", "[fc00::1]", "ula"),
    ("v6-link-local", "[fe80::1]", "[fe80::1]", "link_local"),
    ("v6-multicast", "[ff02::1]", "[ff02::1]", "multicast"),
    ("mapped", "[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]", "loopback"),
    ("mapped-metadata", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "link_local"),
    ("compat", "[::127.0.0.1]", "[::127.0.0.1]", "loopback"),
    ("nat64", "[64:ff9b::7f00:1]", "[64:ff9b::7f00:1]", "loopback"),
    ("6to4", "[2002:7f00:1::]", "[2002:7f00:1::]", "loopback"),
    ("v6-documentation", "[2001:db8::1]", "[2001:db8::1]", "documentation"),
]


@pytest.mark.parametrize("pin,host,cls", [c[1:] for c in CLASSES], ids=[c[0] for c in CLASSES])
def test_refused_address_class(cordon, net, pin, host, cls):
    # Every destination is allowed by rule, so what refuses is the SSRF class.
    reqs = [["GET", "http://target.test/", "target.test"],
            ["CONNECT", "target.test:443", "target.test:443"],
            ["GET", f"http://{host}/", host],
            ["CONNECT", f"{host}:443", f"{host}:443"]]
    out, r = client(cordon, net, "hc", reqs, "--resolve", f"target.test={pin}",
                    "--allow", "target.test", "--allow", "0.0.0.0/0", "--allow", "[::]/0")
    for reply in out:
        assert_refused(reply, 403, f"ssrf:{cls}", r)
    decisions = r.result["egress"]["recent"]
    assert [d["rule"] for d in decisions] == [f"ssrf:{cls}"] * 4, r
    assert all(d["address"] is None or d["address"] == pin.strip("[]") for d in decisions)


# Spellings a client would parse to the internal (127.0.0.1) or metadata
# (127.0.0.5) service: all refused as loopback, never string-matched.
def spellings(net):
    i, m = net.internal.port, net.metadata.port
    return [f"2130706433:{i}", f"0177.0.0.1:{i}", f"0x7f.1:{i}", f"127.1:{i}",
            f"0x7f000001:{i}", f"0x7F.0.0.1:{i}", f"[::ffff:7f00:1]:{i}",
            f"[::ffff:127.0.0.1]:{i}", f"127.0.0.1.:{i}", f"%31%32%37.0.0.1:{i}",
            f"127.0.0.%31:{i}", f"{NAME}@127.0.0.1:{i}", f"{NAME}:{net.web.port}@127.1:{i}",
            f"017700000001:{i}", f"2130706437:{m}",
            f"127.0.0.5:{m}", f"0x7f.0.0.5:{m}"]


def test_literal_spellings_of_loopback(cordon, net):
    targets = spellings(net)
    reqs = [["GET", f"http://{t}/", t.split("@")[-1]] for t in targets]
    reqs += [["CONNECT", t.split("@")[-1], t.split("@")[-1]] for t in targets]
    out, r = client(cordon, net, "hc", reqs, "--allow", f"0.0.0.0/0:{net.internal.port}", "--allow", f"0.0.0.0/0:{net.metadata.port}",
                    "--allow", f"[::]/0:{net.internal.port}")
    for t, reply in zip(targets * 2, out):
        assert reply.get("status") == 403 and reply["denied"] in ("ssrf:loopback",
                                                                  "not_allowed"), (t, reply)
    assert sum(o["denied"] == "ssrf:loopback" for o in out) >= len(targets), out


def test_spellings_do_name_the_internal_service(cordon, net):
    """Control: with 127.0.0.0/8 let through, the same spellings reach it."""
    t = spellings(net)
    reqs = [["GET", f"http://{h}/ctl", h.split("@")[-1]] for h in (t[0], t[2], t[6], t[14])]
    out, r = client(cordon, net, "hc", reqs, "--allow", f"0.0.0.0/0:{net.internal.port}",
                    "--allow", f"0.0.0.0/0:{net.metadata.port}", "--allow",
                    f"[::]/0:{net.internal.port}", "--allow-private", "127.0.0.0/8")
    assert [o.get("body") for o in out] == ["hello from internal\n"] * 3 + [
        "hello from metadata\n"], r
    assert net.internal.count() == 3 and net.metadata.count() == 1
    net.internal.reset()
    net.metadata.reset()


# --- the parser ------------------------------------------------------------

SMUGGLING = [
    ("cl-and-te", "POST {u} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 5\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("two-cl", "POST {u} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 5\r\n"
               "Content-Length: 6\r\n\r\nhello!", 400),
    ("obs-fold", "GET {u} HTTP/1.1\r\nHost: {h}\r\nX-A: a\r\n b\r\n\r\n", 400),
    ("space-in-target", "GET {u}/a b HTTP/1.1\r\nHost: {h}\r\n\r\n", 400),
    ("crlf-in-target", "GET {u}/a\r\nX-Injected: 1 HTTP/1.1\r\nHost: {h}\r\n\r\n", 400),
    ("bare-lf-header", "GET {u} HTTP/1.1\r\nHost: {h}\nX-B: 1\r\n\r\n", 400),
    ("huge-head", "GET {u} HTTP/1.1\r\nHost: {h}\r\nX-Big: " + "a" * 20000 + "\r\n\r\n",
     431),
    ("te-gzip", "POST {u} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ("origin-form", "GET /hello HTTP/1.1\r\nHost: {h}\r\n\r\n", 400),
]


@pytest.mark.parametrize("data,status", [s[1:] for s in SMUGGLING],
                         ids=[s[0] for s in SMUGGLING])
def test_smuggling_shapes_refused(cordon, net, data, status):
    data = data.format(u=f"{net.http}/hello", h=f"{NAME}:{net.web.port}")
    out, r = client(cordon, net, "raw", data)
    assert out[0]["status"] == status and out[0]["denied"] == "bad_request", (out, r)
    assert net.web.count() == 0, net.web.requests


def test_very_huge_head_gets_431_not_a_reset(cordon, net):
    data = f"GET {net.http}/ HTTP/1.1\r\nHost: {NAME}\r\nX-Big: @PAD@\r\n\r\n"
    out, r = client(cordon, net, "raw", [data, 1_000_000])
    assert out[0]["status"] == 431 and out[0]["denied"] == "bad_request", (out, r)
    assert net.web.count() == 0


def test_pipelined_request_is_dropped(cordon, net):
    i = net.internal.port
    data = (f"GET {net.http}/first HTTP/1.1\r\nHost: {NAME}:{net.web.port}\r\n\r\n"
            f"GET http://127.0.0.1:{i}/second HTTP/1.1\r\nHost: 127.0.0.1:{i}\r\n\r\n"
            f"GET {net.http}/third HTTP/1.1\r\nHost: {NAME}:{net.web.port}\r\n\r\n")
    out, r = client(cordon, net, "raw", data, "--allow-private", "127.0.0.1/32",
                    "--allow", f"127.0.0.1:{i}")
    assert out[0]["status"] == 200 and out[0]["responses"] == 1, (out, r)
    assert out[0]["body"] == "hello from web\n", out
    assert [q["path"] for q in net.web.requests] == ["/first"]


# --- DNS rebinding ------------------------------------------------------------


def test_dns_rebinding_cannot_reach_internal(cordon, net, bins):
    help_ = subprocess.run([str(bins / "cordon"), "run", "--help"], capture_output=True,
                           text=True).stdout
    if "--dns" not in help_:
        pytest.skip("cordon run has no --dns option yet (stub resolver for the gateway)")
    port = net.internal.port
    # "The internet" at 127.0.0.2 on the internal service's port: a rebinding
    # that worked would show up at 127.0.0.1 instead.
    twin = es.Server("twin", "127.0.0.2", port=port)
    stub = es.DnsStub("127.0.0.3", 0, {"flip.test": [["127.0.0.2"], ["127.0.0.1"]],
                                       "both.test": [["127.0.0.2", "127.0.0.1"]]})
    try:
        reqs = [["GET", f"http://flip.test:{port}/r{n}", f"flip.test:{port}"]
                for n in range(8)] + [["GET", f"http://both.test:{port}/", "both.test"]]
        out, r = client(cordon, net, "hc", reqs, "--dns", stub.address, "--allow",
                        f"flip.test:{port}", "--allow", f"both.test:{port}")
    finally:
        stub.close()
        twin.close()
    assert stub.queries.get("flip.test", 0) >= 2 and stub.queries.get("both.test"), stub.queries
    reached = [o for o in out[:-1] if o.get("body") == "hello from twin\n"]
    refused = [o for o in out[:-1] if o.get("denied") == "ssrf:loopback"]
    assert len(reached) + len(refused) == 8 and reached and refused, out
    assert len(twin.requests) == len(reached)
    assert_refused(out[-1], 403, "ssrf:loopback", r)  # one bad address refuses all


def test_unallowed_name_is_never_looked_up(cordon, net):
    """An address rule does not make the gateway resolve names to test them:
    otherwise any name could be sent out as a DNS query."""
    stub = es.DnsStub("127.0.0.3", 0, {})
    leak = f"secret-{os.urandom(4).hex()}.exfil.test"
    try:
        out, r = client(cordon, net, "hc", [["GET", f"http://{leak}/", leak],
                                            ["CONNECT", f"{leak}:443", leak]],
                        "--dns", stub.address, "--allow", "10.0.0.0/8",
                        "--allow", "127.0.0.2/32")
    finally:
        stub.close()
    assert_refused(out[0], 403, "not_allowed", r)
    assert_refused(out[1], 403, "not_allowed", r)
    assert not any(leak in n for n in stub.seen), stub.seen


# --- budgets ------------------------------------------------------------------


def budget_policy(cordon, **budgets):
    p = cordon.hostdir() / "policy.yaml"
    p.write_text("version: 1\nnetwork:\n  budgets:\n" +
                 "".join(f"    {k}: {v}\n" for k, v in budgets.items()))
    return ["-p", p]


@pytest.mark.parametrize("budget,value", [("requests", 3), ("request_rate", 1)])
def test_request_budgets(cordon, net, budget, value):
    reqs = [["GET", f"{net.http}/n{n}", f"{NAME}:{net.web.port}"] for n in range(6)]
    out, r = client(cordon, net, "hc", reqs, *budget_policy(cordon, **{budget: value}))
    ok = [o for o in out if o.get("status") == 200]
    cut = [o for o in out if o.get("status") != 200]
    if budget == "requests":
        assert len(ok) == 3 and out[:3] == ok, out
    assert cut and all(o["status"] == 429 and o["denied"] == f"budget:{budget}"
                       for o in cut), out
    assert len(net.web.requests) == len(ok)


def test_byte_budget_cuts_download(cordon, net):
    cmd = ["sh", "-c", f"{' '.join(CURL)} -o /tmp/big {net.http}/big/1000000; echo curl=$?; "
                       f"wc -c </tmp/big; {' '.join(CURL)} -i {net.http}/after"]
    r = inside(cordon, net, cmd, *budget_policy(cordon, bytes="100K"))
    lines = r.out.splitlines()
    assert lines[0] == "curl=18", r  # transfer closed with bytes remaining
    assert 0 < int(lines[1]) <= 100 * 1024, r
    assert "X-Cordon-Denied: budget:bytes\r" in r.out and " 429 " in lines[2], r
    assert [q["path"] for q in net.web.requests] == ["/big/1000000"]
    eg = r.result["egress"]
    assert 0 < eg["bytes_up"] + eg["bytes_down"] <= 100 * 1024, eg


def test_connection_budget(cordon, net):
    spec = {"hold": 2, "to": f"{NAME}:{net.tls.port}",
            "then": ["GET", f"{net.http}/third", f"{NAME}:{net.web.port}"]}
    out, r = client(cordon, net, "tunnels", spec, *budget_policy(cordon, connections=2))
    assert [o["status"] for o in out[:2]] == [200, 200], out
    assert_refused(out[2], 429, "budget:connections", r)
    assert net.web.count() == 0


# --- the record ------------------------------------------------------------


def test_result_and_audit_record_every_decision(cordon, net):
    log = cordon.hostdir("audit") / "audit.log"
    reqs = [["GET", f"{net.http}/a", f"{NAME}:{net.web.port}"],
            ["GET", f"http://nope.test:{net.web.port}/", "nope.test"],
            ["GET", f"http://127.1:{net.internal.port}/", "127.1"],
            ["CONNECT", f"{NAME}:22", NAME],
            ["GET", f"{net.http}/b", f"{NAME}:{net.web.port}"]]
    # With an IP rule in the allowlist, names not allowed by name are resolved
    # (an IP rule could allow their address): pin nope.test.
    out, r = client(cordon, net, "hc", reqs, "--audit", log, "--allow",
                    f"0.0.0.0/0:{net.internal.port}", "--resolve", "nope.test=127.0.0.2")
    assert [o["status"] for o in out] == [200, 403, 403, 403, 200], out
    eg = r.result["egress"]
    assert (eg["allowed"], eg["refused"]) == (2, 3), r
    want = [(True, "GET", NAME, net.web.port, "127.0.0.2", f"allow:{NAME}:{net.web.port}", 200),
            (False, "GET", "nope.test", net.web.port, None, "not_allowed", 403),
            (False, "GET", "127.0.0.1", net.internal.port, None, "ssrf:loopback", 403),
            (False, "CONNECT", NAME, 22, None, "not_allowed", 403),
            (True, "GET", NAME, net.web.port, "127.0.0.2", f"allow:{NAME}:{net.web.port}", 200)]
    keys = ("allowed", "method", "host", "port", "address", "rule", "status")
    # In the order the gateway recorded them: a refusal is recorded at once, an
    # allowed request when its connection ends, which may be after the next
    # request's refusal on a loaded machine.
    got = [tuple(d[k] for k in keys) for d in eg["recent"]]
    assert sorted(got, key=repr) == sorted(want, key=repr), eg
    assert eg["bytes_down"] == sum(d["bytes_down"] for d in eg["recent"]) > 0, eg
    for d in eg["recent"]:
        assert (d["reason"] == "") == d["allowed"] and d["duration_ms"] >= 0, d
        if not d["allowed"]:
            assert d["bytes_up"] == d["bytes_down"] == 0, d
    events = [json.loads(l) for l in log.read_text().splitlines()]
    decisions = [e for e in events if e["type"] == "egress.decision"]
    assert [tuple(e[k] for k in keys) for e in decisions] == got, decisions
    assert all(e["run"] == r.result["run_id"] for e in decisions)
    v = cordon.raw("audit", "verify", log)
    assert v.status == 0 and ": intact: " in v.out, v


# --- cordon fetch -------------------------------------------------------------


def fetch(cordon, net, *args, env=None):
    base = ["--allow", f"{NAME}:{net.web.port}", "--allow", f"{NAME}:{net.tls.port}",
            "--allow", f"{NAME}:{net.hang.port}", "--allow-private", "127.0.0.2/32",
            "--resolve", f"{NAME}=127.0.0.2"]
    return cordon.raw("fetch", *base, *args, env=env, timeout=30)


def test_fetch_allowed(cordon, net):
    r = fetch(cordon, net, f"{net.http}/f")
    assert (r.status, r.out, r.err) == (0, "hello from web\n", ""), r
    r = fetch(cordon, net, f"{net.https}/f", env={"SSL_CERT_FILE": str(net.ca)})
    assert (r.status, r.out, r.err) == (0, "hello from tls\n", ""), r
    r = fetch(cordon, net, f"{net.https}/f")  # the test CA is not in the host store
    assert r.status == 125 and "TLS" in r.err, r
    r = fetch(cordon, net, f"{net.http}/big/300000")
    assert r.status == 0 and r.stdout == es.pattern(300000), r.status


@pytest.mark.parametrize("url,why", [
    ("http://127.0.0.1:{i}/", "a loopback address"),
    ("http://2130706433:{i}/", "a loopback address"),
    ("http://{n}@127.0.0.1:{i}/", "a loopback address"),
    ("http://[::ffff:7f00:1]:{i}/", "a loopback address"),
    ("http://meta.test:{i}/", "a link_local address"),
    ("http://intra.test:{i}/", "a private address"),
    ("http://other.test:{w}/", "is not on the allowlist"),
    ("http://{n}:{t}/", "deny"),
])
def test_fetch_refused(cordon, net, url, why):
    url = url.format(i=net.internal.port, n=NAME, w=net.web.port, t=net.tls.port)
    out = cordon.hostdir() / "out"
    r = fetch(cordon, net, "--allow", "0.0.0.0/0:%d" % net.internal.port, "--allow",
              f"[::]/0:{net.internal.port}", "--allow", f"meta.test:{net.internal.port}",
              "--allow", f"intra.test:{net.internal.port}", "--resolve",
              "meta.test=169.254.169.254", "--resolve", "intra.test=10.1.2.3",
              "--resolve", "other.test=127.0.0.2", "--deny", f"{NAME}:{net.tls.port}", "-o", out, url)
    assert r.status == 125 and r.out == "", r
    assert r.err.startswith("cordon: fetch: refused: ") and why in r.err, r
    assert r.err.count("\n") == 1 and not out.exists(), r
    assert net.web.count() == 0 and net.tls.count() == 0


def test_fetch_output_file_and_status(cordon, net):
    out = cordon.hostdir() / "out"
    r = fetch(cordon, net, "-o", out, f"{net.http}/big/5000")
    assert (r.status, r.out) == (0, ""), r
    assert out.read_bytes() == es.pattern(5000)
    assert net.web.requests[0]["headers"].get("Connection") == "close"


def test_fetch_max_size(cordon, net):
    out = cordon.hostdir() / "out"
    r = fetch(cordon, net, "--max-size", "4K", "-o", out, f"{net.http}/big/5000")
    assert r.status == 125 and "--max-size" in r.err and not out.exists(), r
    r = fetch(cordon, net, "--max-size", "4K", f"{net.http}/big/4096")
    assert r.status == 0 and r.stdout == es.pattern(4096), r


@pytest.mark.parametrize("url", ["ftp://example.test/", "http://", "example.test/x",
                                 "http://exa mple.test/", "http://example.test:99999/",
                                 "http://[::1/", ""])
def test_fetch_bad_url(cordon, net, url):
    r = fetch(cordon, net, url)
    assert r.status == 125 and r.out == "" and r.err.startswith("cordon: fetch: "), r
    assert r.err.count("\n") == 1, r


def test_fetch_timeout(cordon, net):
    t0 = time.monotonic()
    r = fetch(cordon, net, "-t", "1s", f"http://{NAME}:{net.hang.port}/")
    wall = time.monotonic() - t0
    assert r.status == 125 and r.err.startswith("cordon: fetch: "), r
    assert wall < 10, r


def test_fetch_other_status_and_upstream_errors(cordon, net):
    r = fetch(cordon, net, f"{net.http}/status/404")
    assert r.status == 1 and r.out == "hello from web\n" and "HTTP 404" in r.err, r
    r = fetch(cordon, net, f"https://{NAME}:{net.web.port}/")  # TLS to a plain server
    assert r.status == 125 and r.err.startswith("cordon: fetch: "), r


# --- the gateway itself -------------------------------------------------------


# What the sandbox runs to reach the gateway's door: a connection, nothing sent.
REACH = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 3128)).close()'"


def unnamed_children(pid):
    """PID's children but the sandbox's and the watchdog (which name themselves): its gateway."""
    kids = [int(k) for k in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    named = ("cordon-init", "cordon-process", "cordon-gvisor", "cordon-vm", "cordon-watchdog")
    out = []
    for k in kids:
        try:
            if pathlib.Path(f"/proc/{k}/comm").read_text().strip() not in named:
                out.append(k)
        except OSError:
            pass  # gone meanwhile
    return out


def test_gateway_starts_at_the_first_connection(cordon, net):
    """
    A run that never reaches out forks no gateway: its door waits, listening,
    and the first connection starts it; that request is answered as ever.
    """
    fetch = "curl -sS --max-time 20 -o /dev/null -w '%{http_code}\\n' http://refused.invalid/"
    p = cordon.popen(["sh", "-c", f"echo ready; read go; {fetch}; sleep 30"], *net.opts(),
                     stdin=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        # setpriv execs cordon, so p.pid is the supervisor either way. The
        # watchdog names itself once it runs, which on a loaded machine may
        # come after the command's first line: wait for that.
        assert wait_until(lambda: not unnamed_children(p.pid), 10), unnamed_children(p.pid)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == b"403"
        assert len(unnamed_children(p.pid)) == 1
    finally:
        p.kill()
        p.wait()


def test_gateway_runs_confined(cordon, net):
    """The gateway parses what the sandbox sends: started by root it must not
    be root, and it may never gain privileges."""
    p = cordon.popen(["sh", "-c", f"{REACH}; echo ready; sleep 30"], *net.opts())
    try:
        assert p.stdout.readline().strip() == b"ready"
        # The watchdog names itself once it runs, which on a loaded machine
        # may come after the command's first line: the gateway is the one
        # child left unnamed.
        gateways = wait_until(lambda: len(g := unnamed_children(p.pid)) == 1 and g, 10) \
            or unnamed_children(p.pid)
        assert len(gateways) == 1, gateways
        # The sandbox may print before the gateway has confined itself: it
        # confines before it accepts (and so parses) anything, so wait for it.
        path = pathlib.Path(f"/proc/{gateways[0]}/status")
        status = wait_until(lambda: (t := path.read_text()) and "NoNewPrivs:\t1" in t and t,
                            10) or path.read_text()
        uids = status.split("Uid:")[1].split("\n")[0].split()
        assert "0" not in uids, status
        assert "NoNewPrivs:\t1" in status, status
    finally:
        p.kill()
        p.wait()


def test_gateway_dies_with_a_killed_supervisor(cordon, net):
    """kill -9 of cordon leaves no gateway behind (its uid change had cleared
    the parent-death signal, so it outlived the run, orphaned)."""
    m = marker()
    p = cordon.popen(["sh", "-c", f"{REACH}; echo ready; sleep 30; : {m}"], *net.opts())
    try:
        assert p.stdout.readline().strip() == b"ready"
        assert wait_until(lambda: len(unnamed_children(p.pid)) == 1, 10), "no gateway started"
        assert pids_with(m), "the run's processes carry the marker"
    finally:
        p.kill()
        p.wait()
    # The gateway's command line is the supervisor's, marker and all.
    assert wait_until(lambda: not pids_with(m), 5), f"left running: {pids_with(m)}"


# --- relay edge cases (found in review) ----------------------------------------

RELAY_CLIENT = r'''
import json, socket, sys, time
host, pieces, delay, half, read_after = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1", float(sys.argv[5])
s = socket.create_connection(("127.0.0.1", 3128))
for p in pieces:
    s.sendall(p.encode("latin-1"))
    time.sleep(delay)
if half:
    s.shutdown(socket.SHUT_WR)
time.sleep(read_after)
data = b""
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
print(json.dumps({"status": head.split(b"\r\n")[0].decode(), "len": len(body),
                  "body": body[:200].decode("latin-1")}))
'''


def script_inside(cordon, net, text, *args, opts=()):
    """Python TEXT run inside with ARGS, through the gateway (net.opts, and OPTS)."""
    script = cordon.hostdir() / "script.py"
    script.write_text(text)
    os.chmod(script.parent, 0o755)
    os.chmod(script, 0o644)
    return inside(cordon, net, ["python3", "/opt/script.py", *map(str, args)],
                  "--ro", f"{script}:/opt/script.py", *opts)


def relay(cordon, net, pieces, delay=0.0, half=False, read_after=0.0):
    r = script_inside(cordon, net, RELAY_CLIENT, NAME, json.dumps(pieces), delay,
                      "1" if half else "0", read_after)
    assert r.status == 0, r
    return json.loads(r.out)


def test_slow_reader_gets_the_whole_answer(cordon, net):
    # 5 MB queued behind a client that reads nothing for 2 s: none may be lost.
    head = f"GET {net.http}/big/5000000 HTTP/1.1\r\nHost: {NAME}\r\n\r\n"
    out = relay(cordon, net, [head], read_after=2.0)
    assert out["status"] == "HTTP/1.1 200 OK" and out["len"] == 5_000_000, out


UNREAD_CLIENT = r'''
import json, select, socket, sys
host, web, hang = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def proxy(head):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(head.encode())
    return s
# A download nobody reads...
down = proxy(f"GET http://{host}:{web}/big/20000000 HTTP/1.1\r\nHost: {host}\r\n\r\n")
# ...and an upload nobody reads, sent until no byte more goes for 2 s.
up = proxy(f"POST http://{host}:{hang}/ HTTP/1.1\r\nHost: {host}\r\n"
           "Content-Length: 100000000\r\n\r\n")
up.setblocking(False)
sent = 0
while sent < 90_000_000:
    try:
        sent += up.send(b"u" * 65536)
    except BlockingIOError:
        if not select.select([], [up], [], 2)[1]:
            break
# A third connection meanwhile, read to its end.
third = proxy(f"GET http://{host}:{web}/x HTTP/1.1\r\nHost: {host}\r\n\r\n")
data = b""
while d := third.recv(65536):
    data += d
print(json.dumps({"answer": data.partition(b"\r\n\r\n")[2].decode(), "sent": sent}), flush=True)
'''


def test_unread_connections_hold_up_no_other(cordon, net):
    # A client that does not read its download, and an upload the server
    # does not read, each stall their own connection only: a third gets its
    # answer, and the run its stdout and its exit. microvm's egress port had
    # no flow control: the run hung until its time limit.
    r = script_inside(cordon, net, UNREAD_CLIENT, NAME, net.web.port, net.hang.port,
                      opts=("--allow", f"{NAME}:{net.hang.port}"))
    assert r.status == 0 and r.result["reason"] == "exited", r
    out = json.loads(r.out)
    assert out["answer"] == "hello from web\n" and out["sent"] > 0, out


FILL_THEN_CONNECT = r'''
import os, signal, socket, sys, time
kids = []
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"GET {sys.argv[1]}/x HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    print("answered", s.recv(100))
except OSError as e:
    print("refused", e)
for k in kids:
    os.kill(k, signal.SIGKILL)
'''


def tasks_of(uid):
    """The tasks (threads too: the process limit counts them) UID has now."""
    n = 0
    for t in pathlib.Path("/proc").glob("[0-9]*/task/[0-9]*"):
        try:
            n += t.stat().st_uid == uid
        except OSError:
            pass
    return n


def test_a_gateway_that_cannot_start_is_recorded(user_cordon, net):
    # The gateway is forked when the run first reaches its door. An ordinary
    # user's process limit, filled by the run's own processes (the user's at
    # these levels), leaves no fork for it: the connection is refused, and
    # with no gateway there is no decision to record, so the result and the
    # audit log record the failure (they had said nothing).
    cordon = user_cordon
    log = cordon.hostdir("audit") / "audit.log"
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    # The suite's own process is root's, which no process limit holds; the
    # run's processes are the user's: room for its own and 40 more.
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks_of(cordon.ident.uid) + 48, hard))
    try:
        r = script_inside(cordon, net, FILL_THEN_CONNECT, net.http, opts=("--audit", log))
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    assert r.status == 0 and r.out.startswith("refused"), r
    why = r.result["egress"].get("error", "")
    assert why.startswith("cannot start the egress gateway"), r.result["egress"]
    events = [json.loads(l) for l in log.read_text().splitlines()]
    assert [e["error"] for e in events if e["type"] == "egress.error"] == [why], events
    assert net.web.count() == 0, net.web.requests


ABANDONED = r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(f"GET {sys.argv[1]}/big/100000000 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
got = 0
while got < 100_000:
    got += len(s.recv(65536))
s.close()
time.sleep(5)
print(got)
"""


def test_an_abandoned_download_is_not_relayed_on(cordon, net):
    # A client that closes its socket mid-download: its reset reaches the
    # gateway, which stops. At microvm the guest took the close for a half
    # close and the host relayed the rest of the 100 MB to nobody, counted
    # against the run's byte budget.
    r = script_inside(cordon, net, ABANDONED, net.http)
    assert r.status == 0, r
    assert r.result["egress"]["bytes_down"] < 40_000_000, r.result["egress"]


CLOSED_AND_NEW = r"""
import json, socket, sys, threading, time
host, web = sys.argv[1], int(sys.argv[2])
head = f"GET http://{host}:{web}/x HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
stop = time.time() + 6
bad = {}
got = []
def gone():
    # A request, and gone at once: the answer meets a closed socket.
    while time.time() < stop:
        try:
            s = socket.create_connection(("127.0.0.1", 3128))
            s.sendall(head)
            s.close()
        except OSError:
            pass
        time.sleep(0.002)
def asks():
    n = 0
    while time.time() < stop:
        try:
            s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
            s.sendall(head)
            data = b""
            while d := s.recv(65536):
                data += d
            s.close()
            # An answer (the gateway's 429, once the gone ones fill its
            # budget, is one too), never a connection cut without one.
            ok, why = data.startswith(b"HTTP/1.1 ") and data.endswith(b"\n"), repr(data[:40])
        except OSError as e:
            ok, why = False, repr(e)
        n += ok
        if not ok:
            bad[why] = bad.get(why, 0) + 1
    got.append(n)
ts = [threading.Thread(target=gone) for _ in range(3)] + [threading.Thread(target=asks) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(json.dumps({"ok": sum(got), "bad": bad}), flush=True)
"""


def test_a_new_connection_is_not_cut_for_a_closed_ones_hang_up(cordon, net):
    # Clients gone before their answer, among ones that read theirs. At
    # microvm a descriptor closed on the host's end came back from accept()
    # in the same round, and the old client's hang-up, polled for it, closed
    # the new connection unanswered (a reset); and a flood of short
    # connections outran the guest's one frame a round until every
    # connection id was taken (the guest's own 429). Found by a review.
    r = script_inside(cordon, net, CLOSED_AND_NEW, NAME, net.web.port)
    assert r.status == 0 and r.result["reason"] == "exited", r
    out = json.loads(r.out)
    assert out["ok"] > 0 and out["bad"] == {}, out


@pytest.mark.parametrize("split", [["1", "a\r\n" + "A" * 26 + "\r\n0\r\n\r\n"],
                                   ["1a\r\n" + "A" * 26 + "\r", "\n0\r\n\r\n"],
                                   ["1a\r\n" + "A" * 26 + "\r\n0\r\nX-T: 1", "\r\n\r\n"]],
                         ids=["size-line", "data-crlf", "trailer"])
def test_chunked_body_split_anywhere_arrives_intact(cordon, net, split):
    head = (f"POST {net.http}/echo HTTP/1.1\r\nHost: {NAME}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n")
    out = relay(cordon, net, [head, *split], delay=0.3)
    assert out["status"] == "HTTP/1.1 200 OK" and out["body"] == "A" * 26, out


def test_half_closed_request_still_gets_its_answer(cordon, net):
    out = relay(cordon, net, [f"GET {net.http}/x HTTP/1.1\r\nHost: {NAME}\r\n\r\n"], half=True)
    assert out["status"] == "HTTP/1.1 200 OK" and out["body"] == "hello from web\n", out


def test_connect_to_port_80_is_refused(cordon, net):
    # Default rules cover 80 and 443: a tunnel to 80 would carry plain HTTP
    # past the per-request checks.
    out, r = client(cordon, net, "hc", [["CONNECT", f"{NAME}:80", f"{NAME}:80"]],
                    "--allow", NAME)
    assert_refused(out[0], 403, "connect_port", r)
