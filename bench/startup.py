#!/usr/bin/python3
"""bench/startup.py: start-up cost of one sandboxed command, in one run.

Called by bench/run.sh with the cases as tab-separated "name<TAB>command"
lines on stdin. Cases are interleaved (one run of each in turn, N rounds), so
a slow minute of the machine hits every case alike.

Wall time is fork to the exit of the direct child. CPU time counts every
descendant: this process is a child subreaper and reaps each run's whole tree
before the next one (bwrap's outer process exits without reaping its sandbox's
init, so the outer process's own rusage would miss the sandbox's part).
"""
import ctypes
import os
import resource
import statistics
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(argv):
    """(wall ms, cpu ms) of ARGV and everything it left behind."""
    devnull = os.open(os.devnull, os.O_RDWR)
    cpu0 = cpu_of_children()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    os.close(devnull)
    while True:                          # orphans reparented to us
        try:
            os.wait()
        except ChildProcessError:
            break
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(argv)} failed ({status})")
    return wall, (cpu_of_children() - cpu0) * 1000


def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]


def main():
    n = int(os.environ.get("N", "30"))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("bench: cannot become a child subreaper")
    cases = [line.rstrip("\n").split("\t", 1) for line in sys.stdin if line.strip()]
    wall = {name: [] for name, _ in cases}
    cpu = {name: [] for name, _ in cases}
    for _ in range(3):                   # warm-up: page cache, dentries
        for _, cmd in cases:
            one_run(cmd.split())
    for _ in range(n):
        for name, cmd in cases:
            w, c = one_run(cmd.split())
            wall[name].append(w)
            cpu[name].append(c)

    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    print("%-24s%10s%9s%10s" % ("case", "wall ms", "p90 ms", "cpu ms"))
    for name, _ in cases:
        print(f"{name:<24}{med[name]:>10.2f}{p90(wall[name]):>9.2f}{cmed[name]:>10.2f}")
    print()
    # Ratios: each cordon case against bwrap and bare for the same program,
    # and a case with default limits against its "nolimits" twin.
    for name, _ in cases:
        if name.startswith(("bare ", "bwrap ")):
            continue
        prog = name.split()[-1]
        parts = []
        for peer in ("bwrap", "bare"):
            ref = f"{peer} {prog}"
            if ref in med and ref != name:
                parts.append(f"/{peer} wall {med[name] / med[ref]:.2f}x"
                             f" cpu {cmed[name] / max(cmed[ref], 1e-3):.2f}x")
        twin = name.replace(" nolimits", "")
        if twin != name and twin in med:
            parts.append(f"limits cost {med[twin] / med[name]:.2f}x wall")
        if parts:
            print(f"{name:<24}" + "   ".join(parts))


main()
