#!/usr/bin/env bash
# bench/run.sh: start-up cost of one sandboxed command, cordon against bare
# execution and against bwrap configured equivalently, in one run.
#
#   bench/run.sh [-n N] [-b BUILD_DIR] [--no-bwrap] [BUILD_DIR]
#
# Prints per case the median and p90 wall time in ms of N runs (default 30,
# after 3 warm-up runs), and the ratios cordon/bare and cordon/bwrap.
# Not part of the test suite: numbers depend on the machine; nothing here
# passes or fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
N=${N:-30}
BUILD=${CORDON_BUILD:-$here/../build}
BWRAP=1
while [ $# -gt 0 ]; do
    case $1 in
    -n) N=$2; shift 2 ;;
    -b) BUILD=$2; shift 2 ;;
    --no-bwrap) BWRAP=0; shift ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bench/run.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done

CORDON=$(cd "$BUILD" && pwd)/cordon
[ -x "$CORDON" ] || { echo "bench/run.sh: $CORDON is not built (make)" >&2; exit 2; }
PY=/usr/bin/python3
if [ "$BWRAP" = 1 ] && ! command -v bwrap >/dev/null; then
    echo "bench/run.sh: bwrap not found (apt-get install bubblewrap); skipping it" >&2
    BWRAP=0
fi

. "$here/bwrap_argv.sh"

cases=()
add_case() { cases+=("$1"$'\t'"$2"); }
for prog in true python; do
    if [ $prog = true ]; then cmd="/bin/true"; else cmd="$PY -c pass"; fi
    add_case "bare $prog" "$cmd"
    add_case "cordon $prog" "$CORDON run -- $cmd"
    [ "$BWRAP" = 1 ] && add_case "bwrap $prog" "${bwrap_argv[*]} -- $cmd"
done

# Sanity first: every case must succeed, or its timing means nothing.
for c in "${cases[@]}"; do
    name=${c%%$'\t'*}; cmd=${c#*$'\t'}
    if ! out=$($cmd 2>&1 </dev/null); then
        echo "bench/run.sh: '$name' fails: $out" >&2
        exit 1
    fi
done

echo "cordon $("$CORDON" --version 2>/dev/null | head -1), $(uname -r), $(nproc) cpus," \
     "N=$N, as $(id -un)"
printf '%s\n' "${cases[@]}" | N=$N $PY -c '
import os, statistics, subprocess, sys, time

n = int(os.environ["N"])
cases = [l.rstrip("\n").split("\t", 1) for l in sys.stdin if l.strip()]
times = {}
for name, cmd in cases:
    argv = cmd.split()
    for _ in range(3):                      # warm-up: page cache, dentries
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       check=True)
        t.append((time.perf_counter() - t0) * 1000)
    times[name] = t

def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]

print("%-16s%11s%10s" % ("case", "median ms", "p90 ms"))
for name, _ in cases:
    print(f"{name:<16}{statistics.median(times[name]):>11.2f}{p90(times[name]):>10.2f}")
print()
for prog in ("true", "python"):
    c = statistics.median(times[f"cordon {prog}"])
    b = statistics.median(times[f"bare {prog}"])
    line = f"{prog:<8} cordon/bare {c / b:6.2f}x"
    if f"bwrap {prog}" in times:
        w = statistics.median(times[f"bwrap {prog}"])
        line += f"   cordon/bwrap {c / w:6.2f}x"
    print(line)
'
