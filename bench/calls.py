#!/usr/bin/env python3
"""
bench/calls.py: what a call costs, every row of issue 24's table against its
peer, in one interleaved run (driven by bench/calls.sh as root and as an
ordinary user).

    bench/calls.py [-b BUILD] [-r REPEATS] [-n N] [--seconds S] [--clients 1,2,4,8]
                   [--rows pooled,rate,cpu,cold,burst,gvisor,gateway,mcp] [--before BUILD]

--before adds the daemon and `cordon run` cases of another build to the
rows that have them, interleaved with this build's: a change measured
side by side in one run.

Each repeat runs every row; within a row the cases alternate call by call
(or cell by cell), so a slow minute of a shared machine hits every case
alike. A row prints, per case, the range over the repeats of its statistic,
and the range of the per-repeat ratios to the row's peer. The load average
is printed at the start of each repeat and at the end.

The peers: bwrap configured like cordon's namespace level (bench/bwrap_argv.sh's
command line), `unshare` as the namespace floor (user, PID, mount, net, IPC
and UTS namespaces, nothing mounted), fork+exec of the command alone, and
bare runsc (`runsc run` of a minimal bundle; `runsc exec` into one running).

CPU is every descendant's: the cold cases run under a child subreaper that
reaps the whole tree of each run; the daemon's is the sum, over its live
process tree, of each process's own and reaped children's time, so work
done after an answer (teardown, the pool's refill) counts too. Never
asserted anywhere: the numbers are the machine's.
"""

import argparse
import ctypes
import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "clients" / "python"))
from cordon.client import Client, CordonError  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
NOLIMITS = ["--memory", "unlimited", "--pids", "unlimited", "--cpu", "unlimited"]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def bwrap_argv():
    out = subprocess.run(["bash", "-c", f"source {REPO}/bench/bwrap_argv.sh; "
                          "printf '%s\\0' \"${bwrap_argv[@]}\""],
                         capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1] + ["--"]


UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net",
           "--ipc", "--uts", "--"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


# ---- the cold runner: a child subreaper that times and reaps whole trees ----

RUNNER = r'''
import ctypes, json, os, resource, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
spec = json.load(sys.stdin)
null = os.open("/dev/null", os.O_RDWR)
acts = [(0, null, 0), (1, null, 1), (2, null, 2)]
def spawn(argv):
    fa = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1),
          (os.POSIX_SPAWN_DUP2, null, 2)]
    return os.posix_spawnp(argv[0], argv, os.environ, file_actions=fa)
def reap_all(direct):
    """Wait for every descendant; the exit time of each of DIRECT."""
    ended = {}
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return ended
        if pid in direct:
            ended[pid] = (time.perf_counter(), st)
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
out = {name: {"wall": [], "cpu": []} for name in spec["cases"]}
if spec["mode"] == "serial":
    for _ in range(spec["n"]):
        for name, argv in spec["cases"].items():
            c0 = cpu(); t0 = time.perf_counter()
            pid = spawn(argv)
            ended = reap_all({pid})
            t1, st = ended[pid]
            if st != 0:
                sys.exit(f"{name}: exit status {st}")
            out[name]["wall"].append(t1 - t0)
            out[name]["cpu"].append(cpu() - c0)
else:  # burst: N at once per case, cases in turn
    for _ in range(spec["rounds"]):
        for name, argv in spec["cases"].items():
            c0 = cpu()
            starts = {}
            for _ in range(spec["n"]):
                t = time.perf_counter()
                starts[spawn(argv)] = t
            ended = reap_all(set(starts))
            bad = [st for _, st in ended.values() if st != 0]
            if bad:
                sys.exit(f"{name}: {len(bad)} of {spec['n']} failed ({bad[0]})")
            out[name]["wall"] += [ended[p][0] - t for p, t in starts.items()]
            out[name]["cpu"].append((cpu() - c0) / spec["n"])
json.dump(out, sys.stdout)
'''


def run_cold(cases, n, mode="serial", rounds=1):
    spec = {"cases": cases, "n": n, "mode": mode, "rounds": rounds}
    r = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(spec),
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench/calls.py: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


# ---- the daemon ----

def proc_tree(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def tree_cpu(root):
    """Seconds of CPU of ROOT's live tree: each process's own and its reaped children's."""
    total = 0
    for p in proc_tree(root):
        try:
            with open(f"/proc/{p}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in v[11:15])
        except (OSError, ValueError, IndexError):
            pass
    return total / TICK


LIVE = []  # daemons to stop, whatever happens


class Daemon:
    def __init__(self, cordon, tmp, name, opts, pool):
        self.path = str(tmp / f"{name}.sock")
        self.pool = pool
        self.proc = subprocess.Popen([cordon, "serve", "--socket", self.path, "--pool", str(pool),
                                      "--max-running", "16", "--max-queued", "4096", *opts],
                                     stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        LIVE.append(self)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                Client(self.path).close()
                break
            except (OSError, CordonError):
                if self.proc.poll() is not None:
                    sys.exit(f"bench/calls.py: cordon serve failed: {self.proc.stderr.read()}")
                time.sleep(0.05)
        self.settle()
        self.rest_size = len(proc_tree(self.proc.pid))

    def rest(self):
        """Between two measured calls: the pool refilled and the last call's
        teardown over, so neither lands on the next case's time."""
        end = time.monotonic() + 30
        self.wait_ready()
        while len(proc_tree(self.proc.pid)) > self.rest_size and time.monotonic() < end:
            time.sleep(0.002)

    def stats(self):
        with Client(self.path) as c:
            return c.stats()

    def wait_ready(self, timeout=120):
        """The pool full and nothing running: the daemon is at rest."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.stats()
            if st["pool"]["ready"] >= min(self.pool, st["pool"]["target"]) and \
                    st["runs"]["running"] == 0:
                return
            time.sleep(0.02)

    def settle(self):
        """At rest, and the work of finished calls done: the daemon's process
        tree the same size three times in a row."""
        self.wait_ready()
        sizes = []
        end = time.monotonic() + 30
        while time.monotonic() < end and (len(sizes) < 3 or len(set(sizes[-3:])) > 1):
            sizes.append(len(proc_tree(self.proc.pid)))
            time.sleep(0.1)
        self.wait_ready()

    def stop(self):
        if self in LIVE:
            LIVE.remove(self)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def call_latency(client, argv):
    t0 = time.perf_counter()
    r = client.run(argv)
    dt = time.perf_counter() - t0
    if r.exit_code != 0:
        sys.exit(f"bench/calls.py: a pooled call failed: {r}")
    return dt, r.pooled


def spawn_wait(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


# ---- the rows ----

class Table:
    def __init__(self):
        self.rows = {}   # (row, case) -> [value per repeat]
        self.order = []
        self.meta = {}   # row -> (unit, peer case, goal)

    def add(self, row, case, value):
        key = (row, case)
        if key not in self.rows:
            self.rows[key] = []
            self.order.append(key)
        self.rows[key].append(value)

    def describe(self, row, unit, peer, goal, diff=False):
        """DIFF: the row's goal is a difference to the peer, not a ratio."""
        self.meta[row] = (unit, peer, goal, diff)

    def print(self):
        print("| row | case | value (range over repeats) | / peer | goal |")
        print("|---|---|---:|---:|---|")
        for row, case in self.order:
            unit, peer, goal, diff = self.meta.get(row, ("", None, "", False))
            vals = self.rows[(row, case)]
            rng = fmt_range(vals, unit)
            ratio = ""
            if peer and case != peer and (row, peer) in self.rows:
                pv = self.rows[(row, peer)]
                if diff:
                    ds = [(a - b) * 1000 for a, b in zip(vals, pv)]
                    ratio = (f"{min(ds):+.2f}–{max(ds):+.2f} ms" if len(ds) > 1
                             else f"{ds[0]:+.2f} ms")
                rs = [a / b for a, b in zip(vals, pv) if b]
                if rs and not diff:
                    ratio = f"{min(rs):.2f}–{max(rs):.2f}x" if len(rs) > 1 else f"{rs[0]:.2f}x"
            print(f"| {row} | {case} | {rng} | {ratio} | {goal if case != peer else ''} |")


def fmt_range(vals, unit):
    def f(v):
        if unit == "ms":
            return f"{v * 1000:.2f}"
        if unit == "/s":
            return f"{v:.0f}"
        if unit == "MB/s":
            return f"{v:.0f}"
        return f"{v:.3g}"
    lo, hi = min(vals), max(vals)
    return (f"{f(lo)}–{f(hi)} {unit}" if len(vals) > 1 and f(lo) != f(hi)
            else f"{f(lo)} {unit}")


def row_pooled(t, a, daemons, bw):
    """Request to answer of a pooled /bin/true, one client, call by call against the peers."""
    lat = {name: [] for name in daemons}
    lat.update({"bwrap": [], "unshare": [], "fork+exec": []})
    cold = 0
    clients = {name: Client(d.path) for name, d in daemons.items()}
    for _ in range(a.n):
        for name, d in daemons.items():
            d.rest()
            dt, pooled = call_latency(clients[name], ["/bin/true"])
            lat[name].append(dt)
            cold += not pooled
        for d in daemons.values():
            d.rest()
        lat["bwrap"].append(spawn_wait(bw + ["/bin/true"]))
        lat["unshare"].append(spawn_wait(UNSHARE + ["/bin/true"]))
        lat["fork+exec"].append(spawn_wait(["/bin/true"]))
    for c in clients.values():
        c.close()
    for q in (50, 99):
        row = f"request→answer p{q}, /bin/true, 1 client"
        t.describe(row, "ms", "bwrap", "p50 ≤ 1.5 ms" if q == 50 else "p99 ≤ 5 ms")
        for case, xs in lat.items():
            t.add(row, case, pct(xs, q))
    if cold:
        print(f"  ({cold} of {a.n * len(daemons)} calls found no prepared sandbox)")


def row_rate(t, a, daemons, bw, clients):
    """Calls per second at C clients, each calling back to back, cell by cell."""
    for c in clients:
        row = f"calls/s, {c} client{'s' if c > 1 else ''}"
        t.describe(row, "/s", "bwrap", "≥ 2x bwrap")
        for case in (*daemons, "bwrap", "fork+exec"):
            d = daemons.get(case)
            for other in daemons.values():
                other.settle()
            counts = [0] * c
            stop = time.monotonic() + a.seconds

            def worker(i):
                cl = Client(d.path) if d else None
                while time.monotonic() < stop:
                    if cl:
                        call_latency(cl, ["/bin/true"])
                    else:
                        spawn_wait((bw if case == "bwrap" else []) + ["/bin/true"])
                    counts[i] += 1
                if cl:
                    cl.close()

            t0 = time.monotonic()
            ts = [threading.Thread(target=worker, args=(i,)) for i in range(c)]
            for th in ts:
                th.start()
            for th in ts:
                th.join()
            t.add(row, case, sum(counts) / (time.monotonic() - t0))


def cold_cases(cordons, bw, limits=True):
    """The cold `cordon run` of each build (with and without the default limits) and the peers."""
    cases = {}
    for suffix, cordon in cordons.items():
        cases["cordon run" + suffix] = [cordon, "run", "--", "/bin/true"]
        if limits:
            cases["cordon run, no limits" + suffix] = [cordon, "run", *NOLIMITS, "--", "/bin/true"]
    cases.update({"bwrap": bw + ["/bin/true"], "unshare": UNSHARE + ["/bin/true"],
                  "fork+exec": ["/bin/true"]})
    return cases


def row_cpu(t, a, daemons, cordons, bw):
    """CPU per call: the daemon's tree over N pooled calls (teardown and refill
    included), against cold runs under the subreaper."""
    row = "CPU per call, /bin/true"
    t.describe(row, "ms", "bwrap", "pooled ≤ 0.5x bwrap")
    for name, d in daemons.items():
        d.settle()
        c0 = tree_cpu(d.proc.pid)
        with Client(d.path) as c:
            for _ in range(a.n):
                call_latency(c, ["/bin/true"])
        d.settle()
        t.add(row, name, (tree_cpu(d.proc.pid) - c0) / a.n)
    cold = run_cold(cold_cases(cordons, bw), max(10, a.n // 4))
    for name, v in cold.items():
        t.add(row, name, statistics.median(v["cpu"]))


def row_cold(t, a, cordons, bw):
    """A cold `cordon run -- true`, run by run against the peers."""
    res = run_cold(cold_cases(cordons, bw), max(10, a.n // 4))
    for what, key, goal in (("wall p50", "wall", "≤ 0.75x bwrap"),
                            ("CPU p50", "cpu", "≤ 0.75x bwrap; limits ≤ +10%")):
        row = f"cold run -- true, {what}"
        t.describe(row, "ms", "bwrap", goal)
        for name, v in res.items():
            t.add(row, name, statistics.median(v[key]))


def row_burst(t, a, daemons, cordons, bw):
    """100 starts at once: each one's wall from its spawn to its exit."""
    n = 100
    cases = {k: v for k, v in cold_cases(cordons, bw).items() if k not in ("unshare", "fork+exec")}
    res = run_cold(cases, n, mode="burst")
    row = "100 concurrent starts, p50"
    t.describe(row, "ms", "bwrap", "≤ bwrap")
    # The daemon: 100 connections, one call each, all sent before any answer is read.
    for name, d in daemons.items():
        d.settle()
        conns = [Client(d.path) for _ in range(n)]
        starts, ends = {}, {}

        def one(i):
            starts[i] = time.perf_counter()
            conns[i].run(["/bin/true"])
            ends[i] = time.perf_counter()

        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        for c in conns:
            c.close()
        t.add(row, name.replace("pooled", "serve (pool)"),
              statistics.median(ends[i] - starts[i] for i in range(n)))
    for name, v in res.items():
        t.add(row, name, statistics.median(v["wall"]))


GVISOR_BUNDLE = {
    "ociVersion": "1.0.2",
    "process": {"args": ["/bin/true"], "cwd": "/workspace", "user": {"uid": 0, "gid": 0},
                "env": ["PATH=/usr/bin:/bin"], "noNewPrivileges": True},
    "root": {"path": "rootfs", "readonly": True}, "hostname": "cordon",
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/usr", "type": "bind", "source": "/usr",
                "options": ["rbind", "ro"]},
               {"destination": "/etc/ld.so.cache", "type": "bind", "source": "/etc/ld.so.cache",
                "options": ["rbind", "ro"]},
               {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                "options": ["size=64m"]},
               {"destination": "/workspace", "type": "tmpfs", "source": "tmpfs"}],
    "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]},
}


def gvisor_bundle(dir, args):
    root = dir / "rootfs"
    for sub in ("usr", "etc", "tmp", "workspace"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        if not (root / link).is_symlink():
            (root / link).symlink_to(f"usr/{link}")
    (root / "etc" / "ld.so.cache").touch()
    spec = json.loads(json.dumps(GVISOR_BUNDLE))
    spec["process"]["args"] = args
    (dir / "config.json").write_text(json.dumps(spec))


def row_gvisor(t, a, cordon, tmp):
    """`--level gvisor`: cold against `runsc run`, pooled against `runsc exec`."""
    if os.geteuid() != 0 or not shutil.which("runsc"):
        print("  (gvisor rows: root and runsc only)")
        return
    runsc = ["runsc", f"--root={tmp}/runsc", "--platform=ptrace", "--network=none",
             "--ignore-cgroups"]
    gvisor_bundle(tmp / "true", ["/bin/true"])
    gvisor_bundle(tmp / "warm", ["/usr/bin/sleep", "infinity"])
    warm = f"bench-warm-{os.getpid()}"
    # Its sandbox keeps whatever stdout it was given: never a pipe we would wait on.
    subprocess.run(runsc + ["run", "--detach", "--bundle", str(tmp / "warm"), warm],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    script = tmp / "bare-runsc"
    script.write_text(f"#!/bin/sh\nexec {' '.join(runsc)} run --bundle {tmp}/true b$$ "
                      "</dev/null\n")
    script.chmod(0o755)
    n = max(3, a.n // 20)
    try:
        res = run_cold({"cordon run --level gvisor": [cordon, "run", "--level", "gvisor", "--",
                                                      "/bin/true"],
                        "runsc run": [str(script)]}, n)
        row = "gvisor cold true, wall p50"
        t.describe(row, "ms", "runsc run", "≤ 1.1x runsc")
        for name, v in res.items():
            t.add(row, name, statistics.median(v["wall"]))
        d = Daemon(cordon, tmp, "gvisor", ["--level", "gvisor"], 2)
        lat = {"cordon pooled": [], "runsc exec": []}
        with Client(d.path) as c:
            for _ in range(n):
                d.rest()
                lat["cordon pooled"].append(call_latency(c, ["/bin/true"])[0])
                d.rest()
                lat["runsc exec"].append(spawn_wait(runsc + ["exec", warm, "/bin/true"]))
        d.stop()
        row = "gvisor pooled call, p50"
        t.describe(row, "ms", "runsc exec", "≤ 1.2x runsc exec")
        for name, xs in lat.items():
            t.add(row, name, pct(xs, 50))
    finally:
        subprocess.run(runsc + ["delete", "--force", warm], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def row_gateway(t, a, cordon):
    """A 100 MB plain-HTTP download with curl, direct and through the gateway."""
    import http.server
    host = "127.0.0.2"
    big = os.urandom(1 << 20) * 100

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(big)))
            self.end_headers()
            self.wfile.write(big)

        def log_message(self, *x):
            pass

    srv = http.server.ThreadingHTTPServer((host, 0), H)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}", f"http://{host}:{port}/"]
    gw = [cordon, "run", "--allow", f"{host}:{port}", "--allow-private", f"{host}/32", "--"]
    row = "gateway 100 MB download"
    t.describe(row, "MB/s", "direct", "≥ 0.9x direct")
    speeds = {"through the gateway": [], "direct": []}
    for _ in range(3):
        for name, prefix in (("through the gateway", gw), ("direct", [])):
            out = subprocess.run(prefix + curl, capture_output=True, text=True, check=True)
            speeds[name].append(float(out.stdout) / 1e6)
    srv.shutdown()
    for name, xs in speeds.items():
        t.add(row, name, statistics.median(xs))


def row_mcp(t, a, cordon):
    """`cordon mcp serve --pool 2`: run_code python 'pass', against python3 -c pass."""
    p = subprocess.Popen([cordon, "mcp", "serve", "--pool", "2"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seq = [0]

    def ask(method, params):
        seq[0] += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": seq[0], "method": method,
                                  "params": params}).encode() + b"\n")
        p.stdin.flush()
        while True:
            msg = json.loads(p.stdout.readline())
            if msg.get("id") == seq[0]:
                return msg

    ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    time.sleep(1)
    n = max(10, a.n // 4)
    lat = {"run_code python": [], "python3 -c pass": []}
    for _ in range(n):
        time.sleep(0.05)  # the pool refills between calls, as between an agent's
        t0 = time.perf_counter()
        ans = ask("tools/call", {"name": "run_code",
                                 "arguments": {"language": "python", "source": "pass"}})
        lat["run_code python"].append(time.perf_counter() - t0)
        if ans.get("result", {}).get("isError"):
            sys.exit(f"bench/calls.py: run_code failed: {ans}")
        lat["python3 -c pass"].append(spawn_wait([sys.executable, "-c", "pass"]))
    p.stdin.close()
    p.wait(30)
    row = "MCP run_code python, pooled, p50"
    t.describe(row, "ms", "python3 -c pass", "≤ +3 ms over python3", diff=True)
    for name, xs in lat.items():
        t.add(row, name, pct(xs, 50))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--build", default=str(REPO / "build"))
    ap.add_argument("-r", "--repeats", type=int, default=3)
    ap.add_argument("-n", type=int, default=100, help="calls per case per repeat")
    ap.add_argument("--seconds", type=float, default=2.0, help="per calls/s cell")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--pool", type=int, default=8)
    ap.add_argument("--rows", default="pooled,rate,cpu,cold,burst,gvisor,gateway,mcp")
    ap.add_argument("--before", help="another build whose cordon runs beside, as 'X (before)'")
    a = ap.parse_args()
    cordon = str(pathlib.Path(a.build, "cordon").resolve())
    cordons = {"": cordon}
    if a.before:
        cordons[" (before)"] = str(pathlib.Path(a.before, "cordon").resolve())
    rows = a.rows.split(",")
    clients = [int(c) for c in a.clients.split(",")]
    bw = bwrap_argv()
    for argv in (bw + ["/bin/true"], UNSHARE + ["/bin/true"], [cordon, "run", "--", "/bin/true"]):
        if subprocess.run(argv, capture_output=True).returncode != 0:
            sys.exit(f"bench/calls.py: '{' '.join(argv[:3])} ...' fails here")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-calls-"))
    os.chmod(tmp, 0o755)
    t = Table()
    print(f"# {os.cpu_count()} CPUs, uid {os.geteuid()}, {os.uname().release}, "
          f"{a.repeats} repeats, n {a.n}, daemon pool {a.pool}")
    try:
        for r in range(a.repeats):
            print(f"repeat {r + 1}: load {load()}", flush=True)
            ds, nds = {}, {}
            if {"pooled", "rate", "cpu", "burst"} & set(rows):
                for suffix, c in cordons.items():
                    ds["cordon pooled" + suffix] = Daemon(c, tmp, f"d{r}{len(ds)}", [], a.pool)
            if "cpu" in rows:
                for suffix, c in cordons.items():
                    nds["cordon pooled, no limits" + suffix] = Daemon(c, tmp, f"n{r}{len(nds)}",
                                                                      NOLIMITS, a.pool)
            if "pooled" in rows:
                row_pooled(t, a, ds, bw)
            if "rate" in rows:
                row_rate(t, a, ds, bw, clients)
            if "cpu" in rows:
                row_cpu(t, a, {**ds, **nds}, cordons, bw)
                for d in nds.values():
                    d.stop()
            if "cold" in rows:
                row_cold(t, a, cordons, bw)
            if "burst" in rows:
                row_burst(t, a, ds, cordons, bw)
            for d in ds.values():
                d.stop()
            if "gvisor" in rows:
                row_gvisor(t, a, cordon, tmp)
            if "gateway" in rows:
                row_gateway(t, a, cordon)
            if "mcp" in rows:
                row_mcp(t, a, cordon)
            if r + 1 < a.repeats:
                print(f"after repeat {r + 1}:")
                t.print()
        print(f"end: load {load()}\n")
        t.print()
    finally:
        for d in list(LIVE):
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
