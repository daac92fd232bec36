#!/usr/bin/env bash
# bench/run.sh: start-up cost of one sandboxed command, cordon against bare
# execution and against bwrap configured equivalently, in one run.
#
#   bench/run.sh [-n N] [-b BUILD_DIR] [--before BUILD_DIR] [--no-bwrap] [BUILD_DIR]
#
# Prints per case the median and p90 wall time and the median CPU time (every
# descendant counted) in ms of N interleaved runs (default 30, after 3 warm-up
# rounds); the ratios cordon/bwrap and cordon/bare, wall and CPU; and what the
# default limits cost (a run with them against one with limits off).
# --before adds the same cases for another build (say, main before a change).
# Not part of the test suite: numbers depend on the machine; nothing here
# passes or fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
N=${N:-30}
BUILD=${CORDON_BUILD:-$here/../build}
BWRAP=1
BEFORE=
while [ $# -gt 0 ]; do
    case $1 in
    -n) N=$2; shift 2 ;;
    -b) BUILD=$2; shift 2 ;;
    --before) BEFORE=$2; shift 2 ;;
    --no-bwrap) BWRAP=0; shift ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bench/run.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done

CORDON=$(cd "$BUILD" && pwd)/cordon
[ -x "$CORDON" ] || { echo "bench/run.sh: $CORDON is not built (make)" >&2; exit 2; }
if [ -n "$BEFORE" ]; then
    BEFORE=$(cd "$BEFORE" && pwd)/cordon
    [ -x "$BEFORE" ] || { echo "bench/run.sh: $BEFORE is not built" >&2; exit 2; }
fi
PY=/usr/bin/python3
if [ "$BWRAP" = 1 ] && ! command -v bwrap >/dev/null; then
    echo "bench/run.sh: bwrap not found (apt-get install bubblewrap); skipping it" >&2
    BWRAP=0
fi

. "$here/bwrap_argv.sh"

cases=()
add_case() { cases+=("$1"$'\t'"$2"); }
# Limits off, to see what the default ones (memory, pids, CPU: a cgroup) cost.
nolimits=$(mktemp /tmp/cordon-bench-XXXXXX.yaml)
trap 'rm -f "$nolimits"' EXIT
printf 'version: 1\nlimits:\n  memory: unlimited\n  pids: unlimited\n  cpu: unlimited\n' >"$nolimits"
for prog in true python; do
    if [ $prog = true ]; then cmd="/bin/true"; else cmd="$PY -c pass"; fi
    add_case "bare $prog" "$cmd"
    add_case "cordon $prog" "$CORDON run -- $cmd"
    add_case "cordon nolimits $prog" "$CORDON run -p $nolimits -- $cmd"
    if [ -n "$BEFORE" ]; then
        add_case "before $prog" "$BEFORE run -- $cmd"
    fi
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
     "N=$N, as $(id -un), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${cases[@]}" | N=$N $PY "$here/startup.py"
