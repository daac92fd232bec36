#!/usr/bin/env python3
"""
bench/egress.py: the egress gateway's cost, side by side with a direct
connection on loopback, in one run:

  throughput  a 100 MB download with curl: direct from the host, and from
              inside a sandbox through the gateway (CONNECT-free plain HTTP)
  latency     1,000 small GETs, each on a new connection (the gateway closes
              every connection after one request, so direct does the same):
              median and p90 per request

Usage: bench/egress.py [BUILD_DIR] [--mb N] [--requests N] [--level L [--accel A]]
(--level microvm --accel tcg: through the guest's egress port, where no KVM is)
Prints the numbers and the ratios; asserts nothing.
"""
import argparse
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading

HOST = "127.0.0.2"

CLIENT = r'''
import socket, sys, time, statistics
host, port, n, proxy = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "proxy"
req_target = f"http://{host}:{port}/small" if proxy else "/small"
dst = ("127.0.0.1", 3128) if proxy else (host, port)
lat = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection(dst)
    s.sendall(f"GET {req_target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
    while s.recv(65536):
        pass
    s.close()
    lat.append((time.perf_counter() - t) * 1000)
lat.sort()
print(statistics.median(lat), lat[int(len(lat) * 0.9)])
'''


class Handler(http.server.BaseHTTPRequestHandler):
    big = b""

    def do_GET(self):
        body = self.big if self.path == "/big" else b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--level", help="the isolation level (cordon's default if not given)")
    ap.add_argument("--accel", help="microvm's accelerator (kvm, tcg)")
    a = ap.parse_args()
    cordon = os.path.abspath(os.path.join(a.build, "cordon"))
    Handler.big = os.urandom(1 << 20) * a.mb
    srv = http.server.ThreadingHTTPServer((HOST, 0), Handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    level = (["--level", a.level] if a.level else []) + (["--accel", a.accel] if a.accel else [])
    gw = [cordon, "run", *level, "--allow", f"{HOST}:{port}", "--allow-private", f"{HOST}/32", "--"]

    def curl(prefix):
        out = subprocess.run(prefix + ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}",
                                       f"http://{HOST}:{port}/big"],
                             capture_output=True, text=True, check=True).stdout
        return float(out) / 1e6

    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "client.py")
        with open(script, "w") as f:
            f.write(CLIENT)
        os.chmod(d, 0o755)
        os.chmod(script, 0o644)

        def latency(prefix, mode):
            out = subprocess.run(prefix + ["python3", "/opt/client.py" if prefix else script, HOST,
                                           str(port), str(a.requests), mode],
                                 capture_output=True, text=True, check=True).stdout.split()
            return float(out[0]), float(out[1])

        direct_tp = statistics.median(curl([]) for _ in range(3))
        gw_tp = statistics.median(curl(gw) for _ in range(3))
        direct_lat = latency([], "direct")
        gw_lat = latency(gw[:-1] + ["--ro", f"{script}:/opt/client.py", "--"], "proxy")

    print(f"egress gateway, {a.mb} MB download, {a.requests} small requests"
          f"{', level ' + a.level if a.level else ''}")
    print(f"{'case':<22}{'direct':>12}{'gateway':>12}{'ratio':>10}")
    print(f"{'throughput MB/s':<22}{direct_tp:>12.1f}{gw_tp:>12.1f}{gw_tp / direct_tp:>9.2f}x")
    print(f"{'latency median ms':<22}{direct_lat[0]:>12.3f}{gw_lat[0]:>12.3f}"
          f"{gw_lat[0] - direct_lat[0]:>+9.3f}ms")
    print(f"{'latency p90 ms':<22}{direct_lat[1]:>12.3f}{gw_lat[1]:>12.3f}"
          f"{gw_lat[1] - direct_lat[1]:>+9.3f}ms")
    srv.shutdown()


if __name__ == "__main__":
    sys.exit(main())
