"""
A git token that never enters the sandbox (issue 27, item 7).

`--secret GH=env:GH_TOKEN@HOST` binds a token to a git host. The sandbox
holds a placeholder and a credential helper for https://HOST that answers
it; git sends it as git does, `Authorization: Basic base64(user:password)`,
and the gateway decodes the credentials, swaps the value in and encodes them
again, on an intercepted connection. So clone and push work while the token
is nowhere in the sandbox: not in its environment, not in a file it writes,
not in an answer (an endpoint that echoes Authorization gets scrubbed), and
a host the secret is not bound to never sees it.

"The git host" is `git http-backend` behind a small HTTPS server on 127.0.0.2
(test CA, trusted by cordon through SSL_CERT_FILE) that runs the backend only
for the real token in Basic credentials and answers 401 otherwise; it also
serves /echo-auth, which answers the Authorization it got.
"""

import base64
import http.server
import os
import pathlib
import secrets
import socketserver
import ssl
import subprocess
import threading

import pytest

import egress_servers as es

HOST, OTHER = "git.example.test", "other.example.test"
TOKEN = "ghp_" + secrets.token_hex(16)


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "HOME": "/nonexistent",
                               "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
                               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t"}).stdout


class GitServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """git's smart HTTP over TLS, for the real token only."""

    daemon_threads = True

    def __init__(self, root, ctx, token):
        self.root, self.ctx, self.token = root, ctx, token
        self.lock = threading.Lock()
        self.seen = []  # (method, path, the password it was given or None)
        super().__init__(("127.0.0.2", 0), GitHandler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]

    def finish_request(self, request, peer):
        request.settimeout(20)
        super().finish_request(self.ctx.wrap_socket(request, server_side=True), peer)

    def handle_error(self, request, peer):
        pass

    def close(self):
        self.shutdown()
        self.server_close()


class GitHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _password(self):
        auth = self.headers.get("Authorization", "")
        if not auth.lower().startswith("basic "):
            return None
        try:
            return base64.b64decode(auth[6:].strip(), validate=True).decode().split(":", 1)[1]
        except (ValueError, IndexError, UnicodeDecodeError):
            return "?"

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline(1024).split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline(1024)
                    return data
                data += self.rfile.read(n)
                self.rfile.readline(8)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _serve(self):
        body = self._body()
        password = self._password()
        with self.server.lock:
            self.server.seen.append((self.command, self.path, password))
        if self.path == "/echo-auth":
            self._send(200, [("Content-Type", "text/plain")],
                       self.headers.get("Authorization", "").encode())
            return
        if password != self.server.token:
            self._send(401, [("WWW-Authenticate", 'Basic realm="git"')], b"no\n")
            return
        path, _, query = self.path.partition("?")
        env = {"GIT_PROJECT_ROOT": str(self.server.root), "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "t", "REMOTE_ADDR": "127.0.0.1",
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "PATH": os.environ["PATH"]}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                             timeout=30).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self._send(status, headers, payload)

    do_GET = do_POST = _serve


class Net:
    def __init__(self, d):
        self.dir = d
        self.ca, cert, key = es.make_ca(d, [HOST, OTHER], ["127.0.0.2"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.repos = d / "repos"
        self.repos.mkdir()
        git("init", "-q", "--bare", "-b", "main", str(self.repos / "repo.git"))
        seed = d / "seed"
        git("init", "-q", "-b", "main", str(seed))
        (seed / "README").write_text("seed\n")
        git("add", "README", cwd=seed)
        git("commit", "-q", "-m", "seed", cwd=seed)
        git("push", "-q", str(self.repos / "repo.git"), "main", cwd=seed)
        git("config", "http.receivepack", "true", cwd=self.repos / "repo.git")
        self.git = GitServer(self.repos, ctx, TOKEN)
        self.other = GitServer(self.repos, ctx, TOKEN)
        self.web = es.Server("web", "127.0.0.2")

    def opts(self, *extra):
        return ["--secret", f"GH=env:GH_TOKEN@{HOST}:{self.git.port}",
                "--allow", f"{OTHER}:{self.other.port}", "--allow-private", "127.0.0.2/32",
                "--resolve", f"{HOST}=127.0.0.2", "--resolve", f"{OTHER}=127.0.0.2",
                "-t", "120s", *extra]

    def env(self):
        return {"GH_TOKEN": TOKEN, "SSL_CERT_FILE": str(self.ca)}

    def head(self):
        return git("rev-parse", "main", cwd=self.repos / "repo.git").strip()

    def servers(self):
        return (self.git, self.other, self.web)


@pytest.fixture(scope="module")
def net():
    if not shutil_which("git"):
        pytest.skip("git is not installed")
    with es.scratch_net("cit-gittoken-", Net) as n:
        yield n


def shutil_which(name):
    import shutil
    return shutil.which(name)


@pytest.fixture(autouse=True)
def fresh(net):
    for s in (net.git, net.other):
        with s.lock:
            s.seen.clear()
    net.web.reset()
    yield


PUSH = """set -e
ws="$PWD"
cd src  # the process level's workspace root is read-only beside protected names
git clone -q https://{host}:{port}/repo.git clone
cd clone
git -c user.name=agent -c user.email=agent@example.test commit -q --allow-empty -m "from the sandbox"
git push -q origin main
git log -1 --format=%s origin/main
tr '\\0' '\\n' < /proc/self/environ > "$HOME/environ"
env > "$HOME/env"
grep -rl -- "$1" "$ws" "$HOME" /proc/self/environ || echo no-token-inside
"""


def test_clone_and_push_with_a_token_that_never_enters(cordon, net):
    before = net.head()
    ws = cordon.hostdir("ws")
    (ws / "src").mkdir()
    os.chown(ws / "src", cordon.ident.uid, cordon.ident.gid)
    r = cordon.run(["sh", "-c", PUSH.format(host=HOST, port=net.git.port), "sh", TOKEN],
                   *net.opts("-w", ws), env=net.env(), timeout=150)
    assert r.status == 0, r.err[-3000:]
    assert r.out.splitlines()[-2:] == ["from the sandbox", "no-token-inside"], r
    after = net.head()
    assert after != before, "the push did not land"
    assert git("log", "-1", "--format=%s", "main", cwd=net.repos / "repo.git").strip() == \
        "from the sandbox"
    # git's own round: a request without credentials (401), then with them:
    # every authenticated request came with the real token, swapped in.
    passwords = {p for _, _, p in net.git.seen}
    assert passwords == {None, TOKEN}, net.git.seen
    assert any(m == "POST" and "git-receive-pack" in p and pw == TOKEN
               for m, p, pw in net.git.seen), net.git.seen
    # Nothing the run left holds the token: the workspace, as the host sees it.
    for f in ws.rglob("*"):
        if f.is_file() and not f.is_symlink():
            assert TOKEN.encode() not in f.read_bytes(), f
    assert TOKEN not in r.out and TOKEN not in r.err, r
    assert r.result["egress"]["allowed"] >= 3, r


ECHO = """curl -sS -u "x-access-token:$GH" https://{host}:{port}/echo-auth; echo
curl -sS -o /dev/null -w '%{{http_code}}\\n' -u "x-access-token:$GH" http://{other}:{wport}/echo-auth
curl -sSk -u "x-access-token:$GH" https://{other}:{oport}/echo-auth; echo
git clone -q https://{other}:{oport}/repo.git "$HOME/o" 2>/dev/null; echo clone=$?
printf '%s' "$GH"
"""


def test_echoed_credentials_and_other_hosts_get_no_token(cordon, net):
    """An endpoint that answers the Authorization it got sends back the
    placeholder's encoding, not the token's. To a host the secret is not
    bound to: in plain HTTP the gateway reads the Basic placeholder and
    refuses it (exfil), that host hears nothing; through TLS it does not
    read, the host gets the placeholder, worthless, never the token; and git
    there has no helper and sends no credentials at all."""
    cmd = ECHO.format(host=HOST, port=net.git.port, other=OTHER, oport=net.other.port,
                      wport=net.web.port)
    r = cordon.run(["sh", "-c", cmd], *net.opts("--allow", f"{OTHER}:{net.web.port}"),
                   env=net.env())
    assert r.status == 0, r.err[-3000:]
    assert len(r.out.splitlines()) == 5, (r.out, r.err)
    echoed, code, other, clone, placeholder = r.out.splitlines()
    assert placeholder.startswith("cordon-placeholder-") and TOKEN not in r.out, r
    want = "Basic " + base64.b64encode(f"x-access-token:{placeholder}".encode()).decode()
    assert echoed == want, r
    assert code == "403" and net.web.count() == 0, r
    assert other == want, r
    assert clone != "clone=0", r
    assert net.git.seen == [("GET", "/echo-auth", TOKEN)], net.git.seen
    assert [pw for _, p, pw in net.other.seen if p == "/echo-auth"] == [placeholder]
    assert all(pw is None for _, p, pw in net.other.seen if p != "/echo-auth"), net.other.seen
    refused = [d for d in r.result["egress"]["recent"] if "exfil:GH" in str(d)]
    assert refused, r.result["egress"]
