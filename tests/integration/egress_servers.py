"""
The test "internet" for test_egress.py, and the client it runs in the sandbox.

On the host: HTTP and HTTPS servers that count every connection and record
every request, a server that accepts and never answers, a UDP DNS stub whose
answers change between queries, and a test CA made with the openssl CLI.

Inside the sandbox this file runs as a script (python3 egress_servers.py MODE
JSON): exact requests through the gateway at 127.0.0.1:3128, one JSON line
per request, so that tests can send request lines no library would.
"""

import contextlib
import errno
import gzip
import http.client
import http.server
import json
import os
import pathlib
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

PROXY = ("127.0.0.1", 3128)


def pattern(n):
    """N bytes that are not all alike, the same on every call."""
    block = bytes(range(256))
    return (block * (n // 256 + 1))[:n]


# --- host side --------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline(1024).split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return data, True
                data += self.rfile.read(n)
                self.rfile.readline(8)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0)), False

    def _reflect(self):
        """/reflect?pre=&post=&mode=length|chunked|close&split=N&hdr=1&trailer=1&gzip=1:
        a careless endpoint that echoes the Authorization it got (pre + value +
        post) in its body (and a header, a trailer), the body written in two
        pieces cut at SPLIT with a pause between, so they arrive in two reads."""
        q = {k: v[0] for k, v in urllib.parse.parse_qs(
            urllib.parse.urlsplit(self.path).query, keep_blank_values=True).items()}
        val = self.headers.get("Authorization", "")
        body = (q.get("pre", "") + val + q.get("post", "")).encode("latin-1")
        if "gzip" in q:
            body = gzip.compress(body)
        mode, split = q.get("mode", "length"), int(q.get("split", "-1"))
        pieces = [body[:split], body[split:]] if 0 <= split <= len(body) else [body]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if "hdr" in q:
            self.send_header("X-Echo", val)
        if "gzip" in q:
            self.send_header("Content-Encoding", "gzip")
        if mode == "length":
            self.send_header("Content-Length", str(len(body)))
        elif mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        for i, p in enumerate(pieces):
            if i:
                self.wfile.flush()
                time.sleep(0.03)
            if mode == "chunked":
                if p:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p))
            else:
                self.wfile.write(p)
        if mode == "chunked":
            trailer = f"X-Trailer: {val}\r\n".encode("latin-1") if "trailer" in q else b""
            self.wfile.write(b"0\r\n" + trailer + b"\r\n")
        self.close_connection = True

    def do_TRACE(self):
        """What TRACE is for: the request, echoed back whole."""
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path,
                                         "headers": dict(self.headers), "body": b"",
                                         "chunked": False})
        out = (self.requestline + "\r\n" + str(self.headers)).encode("latin-1")
        self.send_response(200)
        self.send_header("Content-Type", "message/http")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _serve(self):
        srv = self.server
        body, chunked = self._body()
        with srv.lock:
            srv.requests.append({"method": self.command, "path": self.path,
                                 "headers": dict(self.headers), "body": body,
                                 "chunked": chunked})
        if self.path.startswith("/reflect"):
            self._reflect()
            return
        if self.path.startswith("/big/"):
            out = pattern(int(self.path[5:]))
        elif self.path.startswith("/slow/"):
            time.sleep(float(self.path[6:]))
            out = b"slow\n"
        elif self.path == "/echo":
            out = body
        elif self.path.startswith("/headers"):
            out = "".join(f"{h}={self.headers.get(h, '')}\n"
                          for h in ("Authorization", "X-Api-Key")).encode()
        else:
            out = f"hello from {srv.name}\n".encode()
        self.send_response(int(self.path[8:]) if self.path.startswith("/status/") else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_HEAD = _serve
    do_trace = do_TRACE  # a server that reads methods in any case


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """HTTP (or, given an SSLContext, HTTPS) on ADDR:<free port>, counting."""

    daemon_threads = True

    def __init__(self, name, addr, tls=None, port=0):
        self.name, self.tls = name, tls
        self.lock = threading.Lock()
        self.requests, self.connections = [], 0
        super().__init__((addr, port), _Handler)
        self.addr, self.port = addr, self.server_address[1]
        self._t = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._t.start()

    def server_bind(self):  # no getfqdn(): this host has no reachable DNS
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]

    def get_request(self):
        sock, peer = self.socket.accept()
        with self.lock:
            self.connections += 1
        return sock, peer

    def finish_request(self, request, peer):
        request.settimeout(10)
        if self.tls:
            request = self.tls.wrap_socket(request, server_side=True)
        super().finish_request(request, peer)

    def handle_error(self, request, peer):
        pass

    def count(self):
        """Connections so far, after letting any in flight land."""
        time.sleep(0.2)
        return self.connections

    def reset(self):
        with self.lock:
            self.requests, self.connections = [], 0

    def close(self):
        self.shutdown()
        self.server_close()


class Hang:
    """Accepts connections and never answers."""

    def __init__(self, addr):
        self.sock = socket.create_server((addr, 0))
        self.port = self.sock.getsockname()[1]
        self.held = []
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for s in self.held:
            s.close()


class UdpServer:
    """A host UDP server on ADDR:PORT (0: the kernel's choice) answering each
    datagram with what reply(data) returns (None: no answer); GOT keeps them."""

    def __init__(self, addr, port=0):
        self.got = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, port))
        self.addr, self.port = self.sock.getsockname()
        self.address = "%s:%d" % (self.addr, self.port)
        self.sock.settimeout(0.1)
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def reply(self, data):
        return data  # an echo

    def _loop(self):
        while not self._stop:
            try:
                d, peer = self.sock.recvfrom(2048)
            except OSError:
                continue
            self.got.append(d)
            try:
                answer = self.reply(d)
                if answer is not None:
                    self.sock.sendto(answer, peer)
            except (IndexError, struct.error, OSError):
                pass

    def close(self):
        self._stop = True
        self._t.join()
        self.sock.close()


class DnsStub(UdpServer):
    """UDP DNS on ADDR:PORT. ANSWERS maps a name to a list of A-record sets,
    served in turn, one per A query; other query types get no answer."""

    def __init__(self, addr, port, answers):
        self.answers = answers
        self.queries = {}
        self.seen = []      # every name asked about, answered or not
        super().__init__(addr, port)

    def reply(self, q):
        return self._answer(q)

    def _answer(self, q):
        labels, i = [], 12
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode().lower())
            i += 1 + q[i]
        qtype = struct.unpack("!H", q[i + 1:i + 3])[0]
        question = q[12:i + 5]
        name = ".".join(labels)
        self.seen.append(name)
        addrs = []
        if qtype == 1 and name in self.answers:
            n = self.queries.get(name, 0)
            self.queries[name] = n + 1
            sets = self.answers[name]
            addrs = sets[n % len(sets)]
        rcode = 0 if name in self.answers else 3
        head = struct.pack("!HHHHHH", struct.unpack("!H", q[:2])[0], 0x8180 | rcode, 1,
                           len(addrs), 0, 0)
        recs = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(a)
                        for a in addrs)
        return head + question + recs



def make_ca(d, names, ips):
    """A CA and a server certificate for NAMES and IPS, in directory D."""
    def ssl_(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ssl_("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
         "ca.pem", "-days", "2", "-subj", "/CN=cordon test CA")
    ssl_("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
         "-subj", f"/CN={names[0]}")
    san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{a}" for a in ips])
    (d / "ext.cnf").write_text(f"subjectAltName={san}\n")
    ssl_("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")
    return d / "ca.pem", d / "srv.pem", d / "srv.key"


# --- sandbox side -----------------------------------------------------------


def _reply(status, headers, body):
    return {"status": status, "denied": headers.get("x-cordon-denied"),
            "body": body.decode("latin-1")}


def hc(reqs):
    """[[METHOD, TARGET, HOST], ...] through the proxy with http.client, the
    request line exactly as given."""
    for method, target, host in reqs:
        c = http.client.HTTPConnection(*PROXY, timeout=10)
        try:
            c.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            c.putheader("Host", host)
            c.endheaders()
            r = c.getresponse()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            # A CONNECT that succeeds leaves an open tunnel: do not read to EOF.
            body = b"" if method == "CONNECT" and r.status == 200 else r.read()
            yield _reply(r.status, hdrs, body)
        except OSError as e:
            yield {"error": type(e).__name__}
        finally:
            c.close()


def raw(data):
    """Send DATA (latin-1 text) as is; read the answer until the gateway closes.
    [DATA, N]: DATA with @PAD@ replaced by N bytes (too long for argv)."""
    if isinstance(data, list):
        data = data[0].replace("@PAD@", "a" * data[1])
    s = socket.create_connection(PROXY, timeout=10)
    out, err = b"", None
    try:
        s.sendall(data.encode("latin-1"))
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError as e:
        err = type(e).__name__
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = dict((k.strip().lower(), v.strip()) for k, _, v in
                (l.partition(":") for l in lines[1:]))
    status = int(lines[0].split()[1]) if lines[0] else None
    return dict(_reply(status, hdrs, body), error=err, first=lines[0],
                responses=out.count(b"HTTP/1."))


def direct(targets):
    """Connect straight to [HOST, PORT] pairs, ignoring the proxy: errno names."""
    for host, port in targets:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.settimeout(5)
        try:
            s.connect((host, port))
            # What answered: the transparent gateway's listener resets a
            # connection to an address it stands for no name behind.
            try:
                got = s.recv(100).decode("latin-1")
            except ConnectionResetError:
                got = "reset"
            except OSError as e:
                got = errno.errorcode.get(e.errno, str(e.errno))
            yield {"connected": True, "got": got}
        except OSError as e:
            yield {"errno": errno.errorcode.get(e.errno, str(e.errno))}
        finally:
            s.close()


def tunnels(spec):
    """Hold SPEC["hold"] CONNECT tunnels to SPEC["to"] open, then send one more
    request SPEC["then"] ([METHOD, TARGET, HOST]): the tunnel answers, then it."""
    held, out = [], []
    for _ in range(spec["hold"]):
        s = socket.create_connection(PROXY, timeout=10)
        s.sendall(f"CONNECT {spec['to']} HTTP/1.1\r\nHost: {spec['to']}\r\n\r\n".encode())
        out.append({"status": int(s.recv(4096).split()[1])})
        held.append(s)
    out.extend(hc([spec["then"]]))
    for s in held:
        s.close()
    return out


if __name__ == "__main__":
    mode, arg = sys.argv[1], json.loads(sys.argv[2])
    fn = {"hc": hc, "raw": raw, "direct": direct, "tunnels": tunnels}[mode]
    res = fn(arg)
    for r in ([res] if isinstance(res, dict) else res):
        print(json.dumps(r), flush=True)


@contextlib.contextmanager
def scratch_net(prefix, make):
    """A test module's servers: MAKE(dir) in a fresh 0755 directory; afterwards
    each of its servers() and others() closed and the directory removed."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(d, 0o755)
    n = make(d)
    try:
        yield n
    finally:
        for s in (*n.servers(), *getattr(n, "others", tuple)()):
            s.close()
        shutil.rmtree(d, ignore_errors=True)
