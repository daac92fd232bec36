#!/usr/bin/env python3
"""
bench/pool.py: per-call latency and throughput of `cordon serve` with its
warm pool, against `cordon run` (cold), bwrap configured like cordon's
namespace level, and bare fork+exec, in one run; then the memory an idle
pooled sandbox costs, and 10,000 calls through the daemon with the daemon's
descriptors, memory and the host's mounts measured before and after.

    bench/pool.py [-b BUILD_DIR] [--seconds S] [--clients 1,2,4,16] [--pool N]
                  [--calls 10000] [--no-bwrap]

Latency is request to first byte of output (`echo x`: the first run.output
notification for the daemon, the first byte on the pipe otherwise) and
request to answer for /bin/true; calls/s is /bin/true with C clients each
calling back to back. Never asserted by tests: the numbers are the machine's.
"""

import argparse
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


def bwrap_argv():
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr"]
    for l in ("/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"):
        if os.path.islink(l):
            argv += ["--symlink", os.readlink(l), l]
        elif os.path.isdir(l):
            argv += ["--ro-bind", l, l]
    for f in ("/etc/ld.so.cache", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
              "/etc/ssl/certs", "/etc/alternatives"):
        if os.path.exists(f):
            argv += ["--ro-bind", f, f]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/workspace",
             "--chdir", "/workspace", "--clearenv", "--setenv", "PATH",
             "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace", "--"]
    return argv


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0

    def send(self, method, params):
        self.n += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                   "params": params}).encode() + b"\n")

    def first_byte_and_answer(self, params):
        """Seconds to the first output notification (or None) and to the answer."""
        t0 = time.perf_counter()
        self.send("run", params)
        first = None
        while True:
            msg = json.loads(self.f.readline())
            if msg.get("method") == "run.output":
                if first is None:
                    first = time.perf_counter() - t0
                continue
            if "error" in msg:
                raise RuntimeError(msg["error"])
            return first, time.perf_counter() - t0, msg["result"]

    def close(self):
        self.s.close()


def subprocess_first_byte(argv):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    os.read(p.stdout.fileno(), 1)
    first = time.perf_counter() - t0
    p.stdout.read()
    p.wait()
    return first, time.perf_counter() - t0


def subprocess_call(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def measure(case, clients, seconds, sock, cordon, bw):
    """(first-byte latencies, call latencies, calls per second) for CASE at CLIENTS."""
    firsts, calls, counts = [], [], [0] * clients
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def worker(i):
        conn = Conn(sock) if case == "daemon" else None
        while time.monotonic() < stop:
            if case == "daemon":
                f, _, _ = conn.first_byte_and_answer({"argv": ["echo", "x"], "stream": True})
                _, c, _ = conn.first_byte_and_answer({"argv": ["/bin/true"]})
            else:
                prefix = {"cold": [cordon, "run", "--"], "bwrap": bw, "fork": []}[case]
                f, _ = subprocess_first_byte(prefix + ["echo", "x"])
                c = subprocess_call(prefix + ["/bin/true"])
            with lock:
                firsts.append(f)
                calls.append(c)
            counts[i] += 2
        if conn:
            conn.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return firsts, calls, sum(counts) / (time.monotonic() - t0)


def tree(pid):
    """PID and every descendant."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def pss_kib(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def mounts():
    with open("/proc/self/mountinfo") as f:
        return sum(1 for _ in f)


class Daemon:
    def __init__(self, cordon, tmp, pool, max_running=16, max_queued=4096):
        self.path = str(tmp / f"bench-{pool}.sock")
        self.proc = subprocess.Popen([cordon, "serve", "--socket", self.path, "--pool", str(pool),
                                      "--max-running", str(max_running), "--max-queued",
                                      str(max_queued)], stderr=subprocess.PIPE)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                Conn(self.path).close()
                break
            except OSError:
                time.sleep(0.05)
        self.wait_pool(pool)

    def stats(self):
        c = Conn(self.path)
        c.send("stats", {})
        r = json.loads(c.f.readline())["result"]
        c.close()
        return r

    def wait_pool(self, n, timeout=60):
        end = time.monotonic() + timeout
        while self.stats()["pool"]["ready"] < n and time.monotonic() < end:
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--build", default=str(REPO / "build"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", default="1,2,4,16")
    ap.add_argument("--pool", type=int, default=8)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--no-bwrap", action="store_true")
    ap.add_argument("--cases", default="daemon,cold,bwrap,fork")
    ap.add_argument("--no-extras", action="store_true", help="only the latency table")
    a = ap.parse_args()
    cordon = str(pathlib.Path(a.build) / "cordon")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cordon-bench-"))
    bw = bwrap_argv() if not a.no_bwrap and shutil.which("bwrap") else None
    cases = [c for c in a.cases.split(",") if c != "bwrap" or bw]
    clients = [int(c) for c in a.clients.split(",")]
    try:
        d = Daemon(cordon, tmp, a.pool)
        print(f"# {os.cpu_count()} CPUs, {a.seconds:.0f}s per cell, daemon pool {a.pool}, "
              f"uid {os.geteuid()}")
        print("| case | clients | first byte p50 | p99 | /bin/true p50 | p99 | calls/s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for case in cases:
            for c in clients:
                firsts, calls, rate = measure(case, c, a.seconds, d.path, cordon, bw)
                ms = lambda x: f"{x * 1000:.2f} ms"
                print(f"| {case} | {c} | {ms(pct(firsts, 50))} | {ms(pct(firsts, 99))} | "
                      f"{ms(pct(calls, 50))} | {ms(pct(calls, 99))} | {rate:.0f} |", flush=True)
        st = d.stats()
        print(f"\ndaemon stats: pooled {st['runs']['pooled']} cold {st['runs']['cold']}, "
              f"start latency p50 {st['start_latency_us']['p50']} us "
              f"p99 {st['start_latency_us']['p99']} us")
        d.stop()
        if a.no_extras:
            return

        # Memory per idle pooled sandbox: the daemon's whole process tree.
        d0 = Daemon(cordon, tmp, 0)
        time.sleep(0.5)
        base = pss_kib(tree(d0.proc.pid))
        d0.stop()
        n = 16
        dn = Daemon(cordon, tmp, n)
        time.sleep(0.5)
        full = pss_kib(tree(dn.proc.pid))
        procs = len(tree(dn.proc.pid)) - 1
        dn.stop()
        print(f"\nidle pool of {n}: {procs} processes, PSS {full} KiB vs {base} KiB without: "
              f"{(full - base) / n:.0f} KiB per pooled sandbox (cgroup and tmpfs pages not "
              f"counted: an idle sandbox has written none)")

        # 10,000 calls: nothing grows.
        d = Daemon(cordon, tmp, a.pool)
        warm = Conn(d.path)
        for _ in range(50):
            warm.first_byte_and_answer({"argv": ["/bin/true"]})
        time.sleep(1)
        before = (fd_count(d.proc.pid), rss_kib(d.proc.pid), mounts(), len(tree(d.proc.pid)))
        per = a.calls // 4
        t0 = time.monotonic()

        def burst():
            c = Conn(d.path)
            for _ in range(per):
                c.first_byte_and_answer({"argv": ["/bin/true"]})
            c.close()

        ts = [threading.Thread(target=burst) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        took = time.monotonic() - t0
        time.sleep(2)
        d.wait_pool(a.pool)
        after = (fd_count(d.proc.pid), rss_kib(d.proc.pid), mounts(), len(tree(d.proc.pid)))
        warm.close()
        d.stop()
        print(f"\n{per * 4} calls in {took:.1f}s ({per * 4 / took:.0f}/s, 4 clients): daemon fds "
              f"{before[0]} -> {after[0]}, daemon RSS {before[1]} -> {after[1]} KiB, host mounts "
              f"{before[2]} -> {after[2]}, daemon tree processes {before[3]} -> {after[3]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
