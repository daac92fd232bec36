#!/usr/bin/env bash
# bench/levels.sh: cold start of one sandboxed command at each isolation
# level against bwrap, in one run: `true` and `python3 -c pass`.
#
#   bench/levels.sh [-n N] [-b BUILD_DIR]
#
# Prints per level the median and p90 wall time in ms of N runs (default 30,
# after 3 warm-up runs) and the ratio to bwrap. A level `cordon check` says
# cannot run here is listed with its reason, not timed. Slots: gvisor and
# microvm are timed once cordon has them (bare runsc beside gvisor).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
N=${N:-30}
BUILD=${CORDON_BUILD:-$here/../build}
while [ $# -gt 0 ]; do
    case $1 in
    -n) N=$2; shift 2 ;;
    -b) BUILD=$2; shift 2 ;;
    -h|--help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench/levels.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
CORDON=$(cd "$BUILD" && pwd)/cordon
[ -x "$CORDON" ] || { echo "bench/levels.sh: $CORDON is not built (make)" >&2; exit 2; }
PY=/usr/bin/python3
command -v bwrap >/dev/null || { echo "bench/levels.sh: needs bwrap" >&2; exit 2; }
. "$here/bwrap_argv.sh"

# The levels this host runs, from cordon check ("yes", "yes (default)",
# "yes, TCG: ..." for a microvm that needs the policy's consent to TCG).
check=$("$CORDON" check)
available=$(awk '/^levels:/ {on=1; next} on && /^  [a-z]/ && $2 ~ /^yes/ {print $1}' <<<"$check")
microvm_accel=kvm
grep -Eq '^  microvm +yes, TCG' <<<"$check" && microvm_accel=tcg
no_snapshot="env CORDON_MICROVM_SNAPSHOTS=/proc/cordon-no-snapshots"

cases=()
add_case() { cases+=("$1"$'\t'"$2"); }
for prog in true python; do
    if [ $prog = true ]; then cmd="/bin/true"; else cmd="$PY -c pass"; fi
    add_case "bwrap $prog" "${bwrap_argv[*]} -- $cmd"
    for level in namespace process gvisor microvm; do
        grep -qx "$level" <<<"$available" || continue
        if [ $level = microvm ]; then
            run="$CORDON run --level microvm --accel $microvm_accel"
            [ $prog = true ] && add_case "microvm cold $prog" "$no_snapshot $run -- $cmd"
            add_case "microvm $prog" "$run -- $cmd"  # restored: the warm-up saved it
        else
            add_case "$level $prog" "$CORDON run --level $level -- $cmd"
        fi
    done
    # slot: bare runsc (a bundle of the same root) goes here with the gvisor level
done
for level in namespace process gvisor microvm; do
    grep -qx "$level" <<<"$available" ||
        echo "$level: not timed: $(awk -v l="$level" '$1 == l {$1=""; print}' <<<"$check")"
done

for c in "${cases[@]}"; do
    name=${c%%$'\t'*}; cmd=${c#*$'\t'}
    if ! out=$($cmd 2>&1 </dev/null); then
        echo "bench/levels.sh: '$name' fails: $out" >&2
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
    for _ in range(3):
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
        t.append((time.perf_counter() - t0) * 1000)
    times[name] = t

def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]

print("%-18s%11s%10s%10s" % ("case", "median ms", "p90 ms", "/bwrap"))
for name, _ in cases:
    prog = name.split()[-1]
    ratio = statistics.median(times[name]) / statistics.median(times[f"bwrap {prog}"])
    print(f"{name:<18}{statistics.median(times[name]):>11.2f}{p90(times[name]):>10.2f}"
          f"{ratio:>9.2f}x")
'
grep -qx microvm <<<"$available" && "$here/microvm.sh" -b "$BUILD" --memory
exit 0
