#!/usr/bin/env bash
# bench/calls.sh: bench/calls.py as root and then as an ordinary user (uid
# 65534), the two paths through cordon (root: a mapped unprivileged uid and
# cgroups; a user: a plain user namespace and rlimits where no cgroup can be
# made). Arguments go to calls.py; -b BUILD picks the build (default build/).
#
#   bench/calls.sh [-b BUILD] [calls.py options]     e.g. -r 3 -n 100
#
# As root only: the gvisor rows (bare runsc runs as root). Nothing here
# passes or fails; the numbers belong to the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$here/../build
args=()
while [ $# -gt 0 ]; do
    case $1 in
    -b|--build) BUILD=$2; shift 2 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
    esac
done
[ -x "$BUILD/cordon" ] || { echo "bench/calls.sh: $BUILD/cordon is not built (make)" >&2; exit 2; }
PY=/usr/bin/python3
echo "## as $(id -un) (uid $(id -u))"
$PY "$here/calls.py" -b "$BUILD" "${args[@]}"
[ "$(id -u)" = 0 ] || exit 0
# The ordinary user runs a copy it can reach, from a directory it can enter.
tmp=$(mktemp -d /tmp/bench-calls-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
cp "$BUILD/cordon" "$tmp/cordon"
echo
echo "## as nobody (uid 65534)"
(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent LANG=C.UTF-8 \
    $PY "$here/calls.py" -b "$tmp" --rows "${ROWS_USER:-pooled,rate,cpu,cold,burst,gateway,mcp}" \
    "${args[@]}")
