#!/usr/bin/env bash
# bench/microvm.sh: what the microvm level costs: a cold start (boot, no
# snapshot), a restored start (from the snapshot), a python call (restored),
# and the memory of one VM. Under TCG where there is no hardware KVM.
#
#   bench/microvm.sh [-n N] [-b BUILD_DIR] [--memory]
#
# Per case: median and p90 of N runs (default 10, after one warm-up) of the
# whole `cordon run` (total) and of its part after the call was handed in
# (--result wall_ms); prepare = total - wall is the boot or restore and the
# setup (shares mounted). Pooled: `cordon serve --pool 1`, request to answer.
# Memory: the run's peak (--result peak_memory_bytes) and QEMU's resident
# and proportional set sampled mid-run. Numbers depend on the machine and
# its load; nothing here passes or fails. --memory: the memory line alone
# (bench/levels.sh prints it beside the other levels).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
N=${N:-10}
MEMORY_ONLY=
BUILD=${CORDON_BUILD:-$here/../build}
while [ $# -gt 0 ]; do
    case $1 in
    -n) N=$2; shift 2 ;;
    -b) BUILD=$2; shift 2 ;;
    --memory) MEMORY_ONLY=1; shift ;;
    -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench/microvm.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
CORDON=$(cd "$BUILD" && pwd)/cordon
[ -x "$CORDON" ] || { echo "bench/microvm.sh: $CORDON is not built (make)" >&2; exit 2; }
ACCEL=kvm
"$CORDON" check | grep -Eq '^  microvm +yes, TCG' && ACCEL=tcg

exec /usr/bin/python3 - "$CORDON" "$N" "$MEMORY_ONLY" "$ACCEL" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time

cordon, n, memory_only, accel = sys.argv[1], int(sys.argv[2]), bool(sys.argv[3]), sys.argv[4]
tmp = tempfile.mkdtemp(prefix="bench-microvm-")
warm = os.path.join(tmp, "snapshots")
base = [cordon, "run", "-l", "microvm", "--accel", accel]

def run(cmd, snapshots, extra=()):
    res = os.path.join(tmp, "r.json")
    env = dict(os.environ, CORDON_MICROVM_SNAPSHOTS=snapshots)
    t0 = time.monotonic()
    p = subprocess.run([*base, "--result", res, *extra, "--", *cmd], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    total = (time.monotonic() - t0) * 1000
    r = json.load(open(res))
    if p.returncode != 0:
        sys.exit(f"bench/microvm.sh: {cmd} failed: {p.stderr.decode()}")
    return total, r

def case(name, cmd, snapshots, want_restored):
    run(cmd, snapshots)  # warm-up (saves the snapshot for the warm cases)
    totals, walls = [], []
    for _ in range(n):
        total, r = run(cmd, snapshots)
        assert r["boundary"]["restored"] == want_restored, r["boundary"]
        totals.append(total)
        walls.append(r["wall_ms"])
    def q(v, p):
        v = sorted(v)
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
    print(f"{name:28s} total median {statistics.median(totals):7.0f} ms  p90 {q(totals, .9):7.0f}"
          f"   in-guest median {statistics.median(walls):6.0f} ms"
          f"   prepare median {statistics.median([t - w for t, w in zip(totals, walls)]):6.0f} ms")
    return r

def timed_cases():
    # Cold: a snapshot directory that cannot exist, so nothing is restored or saved.
    case("cold start (true)", ["true"], "/proc/cordon-no-snapshots", False)
    case("restored start (true)", ["true"], warm, True)
    case("python3 -c pass (restored)", ["python3", "-c", "pass"], warm, True)

# From the daemon's pool: `cordon serve --pool 1` at this level keeps a
# restored guest paused with its shares mounted; a call resumes it. Request
# to answer, the pool refilled (and idle) before each call.
def pooled_cases():
    import socket
    sock = os.path.join(tmp, "serve.sock")
    pol = os.path.join(tmp, "microvm.yaml")
    with open(pol, "w") as f:
        f.write("version: 1\nisolation: microvm\nmicrovm:\n  accel: tcg\n")
    daemon = subprocess.Popen([cordon, "serve", "--socket", sock, "--policy", pol, "--pool", "1"],
                              env=dict(os.environ, CORDON_MICROVM_SNAPSHOTS=warm),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def rpc(s, f, method, params=None, id=[0]):
        id[0] += 1
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": id[0], "method": method,
                              "params": params or {}}).encode() + b"\n")
        while True:
            msg = json.loads(f.readline())
            if msg.get("id") == id[0]:
                if "error" in msg:
                    sys.exit(f"bench/microvm.sh: {method}: {msg['error']}")
                return msg["result"]
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        pooled = {}
        for name, cmd in (("pooled start (true)", ["true"]),
                          ("python3 -c pass (pooled)", ["python3", "-c", "pass"])):
            lat = []
            for i in range(n + 1):
                s = socket.socket(socket.AF_UNIX)
                s.connect(sock)
                f = s.makefile("rb")
                deadline = time.monotonic() + 60
                while rpc(s, f, "stats")["pool"]["ready"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.3)  # the refill's QEMU settled
                t0 = time.monotonic()
                r = rpc(s, f, "run", {"argv": cmd})
                if i:  # the first is a warm-up
                    lat.append((time.monotonic() - t0) * 1000)
                s.close()
                if r.get("exit_code") != 0:
                    sys.exit(f"bench/microvm.sh: pooled {cmd} failed: {r}")
            lat.sort()
            print(f"{name:28s} request to answer median {statistics.median(lat):6.0f} ms"
                  f"  p90 {lat[min(len(lat) - 1, int(round(.9 * (len(lat) - 1))))]:6.0f}")
    finally:
        daemon.terminate()
        daemon.wait()

if memory_only:
    run(["true"], warm)  # saves the snapshot the memory is measured from
else:
    timed_cases()
    pooled_cases()

# Memory of one VM: QEMU's RSS and PSS while the guest idles in a call.
env = dict(os.environ, CORDON_MICROVM_SNAPSHOTS=warm)
res = os.path.join(tmp, "m.json")
p = subprocess.Popen([*base, "--result", res, "--", "sleep", "3"], env=env,
                     stdout=subprocess.DEVNULL)
rss = pss = 0
deadline = time.monotonic() + 20
while time.monotonic() < deadline and p.poll() is None:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if open(f"/proc/{d}/comm").read().strip().startswith("qemu-system") and \
                    warm.encode() in open(f"/proc/{d}/environ", "rb").read():
                for line in open(f"/proc/{d}/smaps_rollup"):
                    if line.startswith("Rss:"):
                        rss = max(rss, int(line.split()[1]))
                    if line.startswith("Pss:"):
                        pss = max(pss, int(line.split()[1]))
        except OSError:
            pass
    time.sleep(0.2)
p.wait()
r = json.load(open(res))
peak, accel = r["peak_memory_bytes"], r["boundary"]["accel"]
print(f"{'memory per VM':28s} QEMU RSS {rss / 1024:.0f} MiB, PSS {pss / 1024:.0f} MiB;"
      f" run peak {peak / 2**20:.0f} MiB (guest -m is the memory limit less 96 MiB)")
print(f"accelerator: {accel}" + ("  (TCG: an emulator, not a hypervisor boundary)" if accel == "tcg" else ""))
subprocess.run(["rm", "-rf", tmp])
PY
