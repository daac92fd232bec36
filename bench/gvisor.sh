#!/usr/bin/env bash
# bench/gvisor.sh: what --level gvisor costs to start, in one run: cold
# `cordon run --level gvisor` of true and python3 -c pass against bare runsc
# (runsc run of an equivalent minimal bundle, same flags) and against the
# namespace level; and the warm path, one runsc exec into a sandbox already
# running (what a prepared gvisor run pays at start).
#
#   bench/gvisor.sh [-n N] [BUILD_DIR]
#
# Prints per case the median and p90 wall time and the median CPU time (every
# descendant counted) of N interleaved runs (default 20), via bench/startup.py.
# Numbers depend on the machine; nothing here passes or fails. Run as root
# (bare runsc is run without --rootless).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
N=${N:-20}
BUILD=${CORDON_BUILD:-$here/../build}
while [ $# -gt 0 ]; do
    case $1 in
    -n) N=$2; shift 2 ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bench/gvisor.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
    esac
done
CORDON=$(cd "$BUILD" && pwd)/cordon
[ -x "$CORDON" ] || { echo "bench/gvisor.sh: $CORDON is not built (make)" >&2; exit 2; }
command -v runsc >/dev/null || { echo "bench/gvisor.sh: runsc not found" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/gvisor.sh: run as root" >&2; exit 2; }
PY=/usr/bin/python3

work=$(mktemp -d /tmp/cordon-bench-gvisor-XXXXXX)
warm=cordon-bench-warm-$$
RUNSC=(runsc "--root=$work/state" --platform=ptrace --network=none --ignore-cgroups)
cleanup() {
    "${RUNSC[@]}" delete --force "$warm" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# A minimal bundle like cordon's: read-only root of empty dirs, /usr bound
# read-only, merged-/usr links, tmpfs /tmp and /workspace.
bundle() { # DIR ARGS-JSON
    mkdir -p "$1/rootfs/usr" "$1/rootfs/etc" "$1/rootfs/tmp" "$1/rootfs/workspace"
    for l in bin lib lib64 sbin; do [ -L "$1/rootfs/$l" ] || ln -s "usr/$l" "$1/rootfs/$l"; done
    cat >"$1/config.json" <<EOF
{"ociVersion":"1.0.2","process":{"args":$2,"cwd":"/workspace","user":{"uid":0,"gid":0},
"env":["PATH=/usr/bin:/bin"],"noNewPrivileges":true},"root":{"path":"rootfs","readonly":true},
"hostname":"cordon","mounts":[{"destination":"/proc","type":"proc","source":"proc"},
{"destination":"/usr","type":"bind","source":"/usr","options":["rbind","ro"]},
{"destination":"/etc/ld.so.cache","type":"bind","source":"/etc/ld.so.cache","options":["rbind","ro"]},
{"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["size=64m"]},
{"destination":"/workspace","type":"tmpfs","source":"tmpfs"}],
"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}
EOF
    touch "$1/rootfs/etc/ld.so.cache"
}
bundle "$work/true" '["/bin/true"]'
bundle "$work/python" '["/usr/bin/python3","-c","pass"]'
bundle "$work/warm" '["/usr/bin/sleep","infinity"]'
"${RUNSC[@]}" run --detach --bundle "$work/warm" "$warm" </dev/null >/dev/null 2>&1

# runsc run needs a fresh container id each time.
cat >"$work/bare-runsc" <<EOF
#!/bin/sh
exec ${RUNSC[*]} run --bundle "$work/\$1" "b\$\$-\$1" </dev/null
EOF
chmod 0755 "$work/bare-runsc"

cases=()
add_case() { cases+=("$1"$'\t'"$2"); }
for prog in true python; do
    if [ $prog = true ]; then cmd="/bin/true"; else cmd="$PY -c pass"; fi
    add_case "namespace $prog" "$CORDON run -- $cmd"
    add_case "gvisor $prog" "$CORDON run --level gvisor -- $cmd"
    add_case "bare runsc run $prog" "$work/bare-runsc $prog"
    add_case "warm runsc exec $prog" "${RUNSC[*]} exec $warm $cmd"
done

for c in "${cases[@]}"; do
    name=${c%%$'\t'*}; cmd=${c#*$'\t'}
    if ! out=$($cmd 2>&1 </dev/null); then
        echo "bench/gvisor.sh: '$name' fails: $out" >&2
        exit 1
    fi
done

echo "cordon $("$CORDON" --version 2>/dev/null | head -1), runsc $(runsc --version | head -1 | cut -d' ' -f3)," \
     "$(uname -r), $(nproc) cpus, N=$N, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${cases[@]}" | N=$N $PY "$here/startup.py"
