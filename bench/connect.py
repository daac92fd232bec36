#!/usr/bin/env python3
"""
What a connect() costs inside a run: TCP to a loopback listener and a unix
socket in /tmp, connect + accept + close, N times per round, as the median
microseconds per connect over ROUNDS rounds, for each level (and bare on the
host). At the namespace and process levels every connect() is a seccomp user
notification that a keeper answers (sandbox/usock.h); --before BUILD runs the
same in another build's cordon, side by side, rounds interleaved.

    bench/connect.py [-b BUILD] [--before BUILD] [-n N] [-r ROUNDS] [LEVEL...]

Run by hand; the numbers belong to the machine and its load.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

LOOP = r"""
import os, socket, sys, time
n = int(sys.argv[1])
tmp = os.environ.get("TMPDIR", "/tmp")
u = socket.socket(socket.AF_UNIX); path = os.path.join(tmp, "bench-%d.sock" % os.getpid()); u.bind(path); u.listen(4096)
def run(fam, addr, acc):
    t = time.perf_counter()
    for _ in range(n):
        c = socket.socket(fam); c.connect(addr); s, _ = acc.accept(); s.close(); c.close()
    return (time.perf_counter() - t) / n * 1e6
try:
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4096)
    tcp = run(socket.AF_INET, l.getsockname(), l)
except OSError:
    tcp = float("nan")  # the process level: TCP reaches only the gateway
unix = run(socket.AF_UNIX, path, u)
os.unlink(path)
print("%.1f %.1f" % (tcp, unix))
"""


def once(cordon, level, script, n):
    cmd = ["python3", script, str(n)]
    if cordon:
        cmd = [cordon, "run", "--level", level, "--ro", script, "--", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--build", default=str(pathlib.Path(__file__).parents[1] / "build"))
    ap.add_argument("--before")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("levels", nargs="*", default=["namespace", "process"])
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".py", dir="/tmp", delete=False) as f:
        f.write(LOOP)
    os.chmod(f.name, 0o644)
    cases = [("bare", None, None)]
    for lvl in a.levels:
        cases.append((lvl, os.path.join(a.build, "cordon"), lvl))
        if a.before:
            cases.append((lvl + " (before)", os.path.join(a.before, "cordon"), lvl))
    got = {name: ([], []) for name, _, _ in cases}
    try:
        for _ in range(a.rounds):
            for name, cordon, lvl in cases:
                tcp, unix = once(cordon, lvl, f.name, a.n)
                got[name][0].append(tcp)
                got[name][1].append(unix)
    finally:
        os.unlink(f.name)
    print(f"{'case':<22} {'tcp us':>8} {'unix us':>8}   (median of {a.rounds} x {a.n})")
    for name, (tcp, unix) in got.items():
        print(f"{name:<22} {statistics.median(tcp):8.1f} {statistics.median(unix):8.1f}")


if __name__ == "__main__":
    sys.exit(main())
