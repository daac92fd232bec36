"""
Request rules and presets (issue 27, item 6).

A rule of network.allow may hold a host to methods and a path prefix
("GET,HEAD registry.example.test", "POST host/a/b"); the gateway reads the
request where it can (plain HTTP, and TLS it intercepts with the run's CA for
a host only such rules allow) and refuses the rest with a 403 and a record.
`--allow @npm` stands for the npm preset (data/presets/npm.yaml): read-only,
so `npm install` works and `npm publish` (PUT) is refused.

"The registry" is an HTTPS server on the host with a test CA: a plain one on
127.0.0.2 named registry.example.test (--resolve, --allow-private), and a fake
npm registry on a random loopback address at port 443 named
registry.npmjs.org, which serves one package (is-number 7.0.0) and records
every request. cordon itself trusts the test CA (SSL_CERT_FILE), the sandbox
the run's CA.
"""

import base64
import hashlib
import http.server
import io
import json
import os
import random
import shutil
import socketserver
import ssl
import tarfile
import threading

import pytest

import egress_servers as es

NAME = "registry.example.test"
EG = "/eg"


class Registry(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A fake npm registry over TLS: is-number's packument and tarball; every
    request recorded, PUT answered 201 (none must arrive)."""

    daemon_threads = True

    def __init__(self, addr, port, ctx, host):
        self.lock = threading.Lock()
        self.requests = []
        self.host = host
        self.tarball = self._tarball()
        super().__init__((addr, port), RegistryHandler)
        self.ctx = ctx
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def server_bind(self):  # no getfqdn()
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]

    def finish_request(self, request, peer):
        request.settimeout(10)
        super().finish_request(self.ctx.wrap_socket(request, server_side=True), peer)

    def handle_error(self, request, peer):
        pass

    @staticmethod
    def _tarball():
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as t:
            for name, data in (("package/package.json",
                                b'{"name": "is-number", "version": "7.0.0", "main": "index.js"}'),
                               ("package/index.js",
                                b"module.exports = n => typeof n === 'number';\n")):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
        return out.getvalue()

    def packument(self):
        tgz = f"https://{self.host}/is-number/-/is-number-7.0.0.tgz"
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(self.tarball).digest()).decode()
        version = {"name": "is-number", "version": "7.0.0",
                   "dist": {"tarball": tgz, "integrity": integrity,
                            "shasum": hashlib.sha1(self.tarball).hexdigest()}}
        return {"name": "is-number", "dist-tags": {"latest": "7.0.0"},
                "versions": {"7.0.0": version}}

    def seen(self, method):
        return [r for r in self.requests if r[0] == method]

    def close(self):
        self.shutdown()
        self.server_close()


class RegistryHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        with self.server.lock:
            self.server.requests.append((self.command, self.path))
        status, body = 404, b"{}"
        if self.command == "PUT":
            status, body = 201, b'{"ok": true}'
        elif self.path.split("?")[0] == "/is-number":
            status, body = 200, json.dumps(self.server.packument()).encode()
        elif self.path == "/is-number/-/is-number-7.0.0.tgz":
            status, body = 200, self.server.tarball
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, cert, key = es.make_ca(d, [NAME, "registry.npmjs.org"], ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.tls = es.Server("tls", "127.0.0.2", tls=ctx)
        self.web = es.Server("web", "127.0.0.2")
        self.npm = None
        if os.geteuid() == 0:
            # Port 443, where npm goes, on an address no other suite is likely to hold.
            self.npm_addr = f"127.{random.randint(64, 127)}.{random.randint(1, 254)}.7"
            self.npm = Registry(self.npm_addr, 443, ctx, "registry.npmjs.org")
        os.chmod(d / "ca.pem", 0o644)

    def opts(self, *rules):
        allow = [a for r in rules for a in ("--allow", r)]
        return [*allow, "--allow-private", "127.0.0.2/32", "--resolve", f"{NAME}=127.0.0.2",
                "-t", "60s"]

    def servers(self):
        return (self.tls, self.web) + ((self.npm,) if self.npm else ())


@pytest.fixture(scope="module")
def net():
    with es.scratch_net("cit-presets-", Net) as n:
        yield n


@pytest.fixture(autouse=True)
def fresh(net):
    for s in (net.tls, net.web):
        s.reset()
    if net.npm:
        with net.npm.lock:
            net.npm.requests.clear()
    yield


def told(r):
    return [l for l in r.err.splitlines() if l.startswith("cordon: egress")]


def decisions(log):
    out = []
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("type") == "egress.decision":
            out.append(ev)
    return out


def audit_log(cordon):
    return cordon.hostdir("audit") / "audit.jsonl"


CURL = "curl -sS --max-time 20 -o /dev/null -w '%{http_code} '"


def test_request_rule_passes_get_and_refuses_put(cordon, net):
    """GET,HEAD only: a GET reaches the server, a PUT is 403 with its record,
    through the proxy and transparently (both over intercepted TLS), and the
    server never sees the PUT."""
    url = f"https://{NAME}:{net.tls.port}"
    cmd = (f"{CURL} {url}/get; {CURL} -X PUT -d x {url}/put; "
           f"{CURL} --noproxy '*' {url}/get2; {CURL} --noproxy '*' -X PUT -d y {url}/put2")
    log = audit_log(cordon)
    r = cordon.run(["sh", "-c", cmd], *net.opts(f"GET,HEAD {NAME}:{net.tls.port}"),
                   "--audit", log, env={"SSL_CERT_FILE": str(net.ca)})
    assert r.status == 0, r
    assert r.out.split() == ["200", "403", "200", "403"], r
    assert [(q["method"], q["path"]) for q in net.tls.requests] == [("GET", "/get"),
                                                                    ("GET", "/get2")]
    subject = f"{NAME}:{net.tls.port}"
    assert told(r) == [f"cordon: egress refused: PUT {subject} (no rule for PUT; "
                       f"--allow 'PUT {subject}')"], r
    got = [(d["method"], d["allowed"], d["rule"], d.get("intercepted", False))
           for d in decisions(log)]
    rule = f"allow:GET,HEAD {subject}"
    assert got.count(("GET", True, rule, True)) == 2, got
    assert got.count(("PUT", False, "method_not_allowed", True)) == 2, got
    assert all(d["status"] == 403 for d in decisions(log) if d["method"] == "PUT")


def test_path_prefix_holds_every_spelling(cordon, net):
    """A path rule admits its prefix, segment by segment; what a server could
    read as another path (dot segments, escapes, '//') is refused unsent."""
    base = f"http://{NAME}:{net.web.port}"
    paths = ["/api/v1/x?q=1", "/api/v1", "/api/v10", "/api/v1/../../admin", "/api/v1/%2e%2e/admin",
             "/api/v1/..%2Fadmin", "/api//v1/x", "/api/v1\\..\\admin", "/admin",
             "/api/v1/..;/admin", "/api/v1/%252e%252e/admin"]
    cmd = "; ".join(f"{CURL} --path-as-is '{base}{p}'" for p in paths)
    # A GET a framework would take as a DELETE, where the rule holds the method.
    cmd += f"; {CURL} -H 'X-HTTP-Method-Override: DELETE' '{base}/api/v1/x'"
    r = cordon.run(["sh", "-c", cmd], *net.opts(f"GET {NAME}:{net.web.port}/api/v1"))
    assert r.status == 0, r
    assert r.out.split() == ["200", "200"] + ["403"] * 10, r
    assert [q["path"] for q in net.web.requests] == ["/api/v1/x?q=1", "/api/v1"]


def test_policy_check_shows_the_expansion(cordon, net):
    pol = cordon.hostdir("pol") / "policy.yaml"
    pol.write_text("version: 1\nnetwork:\n  allow: ['@npm', '@github@1', example.com]\n")
    os.chmod(pol, 0o644)
    r = cordon.raw("policy", "check", pol)
    assert r.status == 0, r
    out = json.loads(r.out)
    assert out["policy"]["network"]["presets"] == ["github@1", "npm@1"], out
    assert out["presets"]["npm"]["version"] == 1, out
    assert out["presets"]["npm"]["allow"] == ["GET,HEAD registry.npmjs.org",
                                              "POST registry.npmjs.org/-/npm/v1/security"], out
    assert out["presets"]["npm"]["file"].endswith("/presets/npm.yaml"), out
    assert "POST github.com/*/*/git-upload-pack" in out["presets"]["github"]["allow"], out
    assert set(out["presets"]["npm"]["allow"]) <= set(out["policy"]["network"]["allow"]), out
    r = cordon.run(["true"], "--allow", "@nope")
    assert r.status == 125, r
    assert "unknown preset \"@nope\" (presets here: crates, debian, github, go, maven, npm, " \
           "pypi, rubygems)" in r.err, r


NPM_PROJECT = ('{"name": "app", "version": "1.0.0", "dependencies": {"is-number": "^7.0.0"}}')
NPM_PKG = '{"name": "cordon-publish-test", "version": "1.0.0"}'
NPM = ("cd \"$HOME\" && mkdir app pub && cd app && printf '%s' '" + NPM_PROJECT + "' > package.json"
       " && npm install --no-audit --no-fund --no-update-notifier && "
       "node -e \"console.log('is-number', require('is-number')(7))\" && cd ../pub && "
       "printf '%s' '" + NPM_PKG + "' > package.json && "
       "printf '//registry.npmjs.org/:_authToken=not-a-token\\n' > .npmrc && "
       "npm publish --no-update-notifier; echo publish=$?")


def test_npm_preset_installs_and_refuses_publish(cordon, net):
    if not net.npm:
        pytest.skip("needs root to serve the fake registry on port 443")
    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    log = audit_log(cordon)
    r = cordon.run(["sh", "-c", NPM], "--allow", "@npm", "--resolve",
                   f"registry.npmjs.org={net.npm_addr}", "--allow-private", f"{net.npm_addr}/32",
                   "-t", "120s", "--audit", log, env={"SSL_CERT_FILE": str(net.ca)}, timeout=150)
    assert r.status == 0, r
    assert "is-number true" in r.out, r
    assert "publish=0" not in r.out and "E403" in r.err, r
    assert net.npm.seen("GET") and not net.npm.seen("PUT"), net.npm.requests
    assert told(r) == ["cordon: egress refused: PUT registry.npmjs.org (no rule for PUT; "
                       "--allow 'PUT registry.npmjs.org')"], r
    put = [d for d in decisions(log) if d["method"] == "PUT"]
    assert put and all(not d["allowed"] and d["rule"] == "method_not_allowed" for d in put), put
    start = [json.loads(l) for l in log.read_text().splitlines()
             if json.loads(l).get("type") == "run.start"]
    assert start[0]["network"]["presets"] == ["npm@1"], start
