#!/usr/bin/python3
"""What the MCP broker costs: one session and N tools/call round trips to the
reference everything server, run bare, under bubblewrap (a sandbox, no
broker) and under `cordon mcp wrap` (sandbox and broker), in one run.

    bench/mcp.py [-b BUILD] [-n CALLS] [-s SESSIONS]

Reports, per case, the median time from spawn to the initialize answer
(start-up), and the median and p90 of one echo call (round trip), with the
ratios cordon/bare and cordon/bwrap. Run by hand: the numbers belong to the
machine. Needs tests/mcp/node_modules (scripts/install-test-deps.sh).
"""

import argparse
import json
import os
import pathlib
import select
import shutil
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
MCP = REPO / "tests" / "mcp"
SERVER = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node") or "/usr/bin/node"


class Session:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.buf = b""
        self.next_id = 0

    def call(self, method, params):
        self.next_id += 1
        rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            while b"\n" not in self.buf:
                r, _, _ = select.select([self.p.stdout], [], [], 30)
                if not r:
                    raise SystemExit(f"no answer to {method}")
                d = os.read(self.p.stdout.fileno(), 1 << 16)
                if not d:
                    raise SystemExit(f"server ended during {method}")
                self.buf += d
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            if m.get("id") == rid and "method" not in m:
                if "error" in m:
                    raise SystemExit(f"{method}: {m['error']}")
                return m["result"]

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def one_session(argv, calls):
    t0 = time.perf_counter()
    s = Session(argv)
    s.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "1"}})
    startup = time.perf_counter() - t0
    s.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    s.p.stdin.flush()
    rtts = []
    for i in range(calls):
        t = time.perf_counter()
        r = s.call("tools/call", {"name": "echo", "arguments": {"message": f"m{i}"}})
        rtts.append(time.perf_counter() - t)
        assert f"m{i}" in json.dumps(r)
    s.close()
    return startup, rtts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--build", default=str(REPO / "build"))
    ap.add_argument("-n", "--calls", type=int, default=300)
    ap.add_argument("-s", "--sessions", type=int, default=5)
    a = ap.parse_args()
    if not (MCP / SERVER).exists():
        raise SystemExit("tests/mcp/node_modules is missing: run scripts/install-test-deps.sh")
    cordon = str(pathlib.Path(a.build) / "cordon")
    policy = pathlib.Path("/tmp/cordon-bench-mcp.yaml")
    policy.write_text("version: 1\ntools:\n  allow: [echo]\n")
    cases = {
        "bare": [NODE, str(MCP / SERVER), "stdio"],
        "bwrap": ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                  "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                  "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                  "--ro-bind", str(MCP), "/opt/mcp", "--proc", "/proc", "--dev", "/dev",
                  "--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
                  "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
                  NODE, f"/opt/mcp/{SERVER}", "stdio"],
        "cordon": [cordon, "mcp", "wrap", "-p", str(policy), "--ro", f"{MCP}:/opt/mcp", "--",
                   NODE, f"/opt/mcp/{SERVER}", "stdio"],
    }
    if not shutil.which("bwrap"):
        del cases["bwrap"]
    res = {}
    for name, argv in cases.items():
        one_session(argv, 3)  # warm-up, and a check that the case works
        starts, rtts = [], []
        for _ in range(a.sessions):
            st, rt = one_session(argv, a.calls)
            starts.append(st)
            rtts.extend(rt)
        rtts.sort()
        res[name] = (statistics.median(starts), statistics.median(rtts),
                     rtts[int(len(rtts) * 0.9)])
    print(f"{a.sessions} sessions x {a.calls} echo calls each, uid {os.getuid()}")
    print(f"{'case':8} {'start-up ms':>12} {'call median ms':>15} {'call p90 ms':>12}")
    for name, (st, med, p90) in res.items():
        print(f"{name:8} {st * 1000:12.1f} {med * 1000:15.3f} {p90 * 1000:12.3f}")
    c = res["cordon"]
    for base in ("bare", "bwrap"):
        if base in res:
            b = res[base]
            print(f"cordon/{base}: start-up {c[0] / b[0]:.2f}x, call median {c[1] / b[1]:.2f}x "
                  f"(+{(c[1] - b[1]) * 1000:.3f} ms)")
    policy.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
