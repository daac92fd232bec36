#!/bin/sh
# By hand (make conformance-oci): conformance passes of cordon-oci against
# other runtimes' own suites, all offline but for Debian's archive:
#   - crun's runtime-agnostic Python tests (tests/test_*.py of Debian's crun
#     source), run with OCI_RUNTIME pointing at cordon-oci;
#   - a curated subset of runc's bats tests (Debian's runc source), RUNC
#     pointing at cordon-oci (`runc spec`, which cordon-oci does not have,
#     stays runc's), busybox-static as their image instead of a download.
# The sources come through the ordinary `apt-get source`, with a deb-src
# list of its own (the host's apt configuration is left alone). Prints each
# test's result and the totals; the figures and the reasons are in doc/oci.md.
# Usage: conformance.sh BUILD_DIR [WORK_DIR]
set -eu
BUILD=${1:?usage: conformance.sh BUILD_DIR [WORK_DIR]}
WORK=${2:-$(mktemp -d /tmp/cordon-conformance-XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK/apt/lists/partial" "$WORK/bin" "$WORK/src"

# Debian's sources for the suite this machine runs (bookworm and its security updates).
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
cat > "$WORK/apt/sources.list" <<LIST
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $suite-security main
LIST
APT="-o Dir::Etc::SourceList=$WORK/apt/sources.list -o Dir::Etc::SourceParts=- -o Dir::State::Lists=$WORK/apt/lists"
if [ ! -d "$WORK/src/crun" ]; then
    # shellcheck disable=SC2086
    apt-get $APT update -qq
    # shellcheck disable=SC2086
    (cd "$WORK/src" && apt-get $APT source -qq crun runc >/dev/null 2>&1)
    mv "$WORK"/src/crun-[0-9]* "$WORK/src/crun"
    mv "$WORK"/src/runc-[0-9]* "$WORK/src/runc"
fi

cp "$BUILD/cordon" "$WORK/bin/cordon"
ln -sf cordon "$WORK/bin/cordon-oci"
# crun's test init, without its configure step: an empty config.h, glibc's error.h.
: > "$WORK/config.h"
gcc -static -O2 -DHAVE_ERROR_H -I"$WORK" -o "$WORK/init" "$WORK/src/crun/tests/init.c"
mkdir -p "$WORK/etc-cordon"
export CORDON_OCI_DIR="$WORK/etc-cordon" # the built-in default policy

# What a test left running (a suite's failure path may skip its own delete, and
# removes the state directory either way): thawed, killed, its cgroups removed.
leftovers() { # a --root prefix of the suite's
    for p in $(pgrep -f -- "--root $1" || true); do kill -9 "$p" 2>/dev/null || true; done
    for d in /sys/fs/cgroup/*/cordon-oci/* /sys/fs/cgroup/*/frozen; do
        [ -d "$d" ] || continue
        case "$d" in */cordon-oci/test*|*/cordon-oci/ct*|*/cordon-oci/test_*|*/frozen) ;; *) continue ;; esac
        [ -f "$d/freezer.state" ] && echo THAWED > "$d/freezer.state" 2>/dev/null
        for t in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$t" 2>/dev/null || true; done
    done
    sleep 1
    for d in /sys/fs/cgroup/*/cordon-oci/test* /sys/fs/cgroup/*/cordon-oci/ct* \
             /sys/fs/cgroup/*/frozen; do
        [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
    done
}

pass=0 fail=0 skip=0
tally() { # FILE: a TAP stream
    p=$(grep -c '^ok ' "$1" | tr -d ' ' || true)
    s=$(grep -ciE '^ok .*#[[:space:]]*skip' "$1" | tr -d ' ' || true)
    f=$(grep -c '^not ok ' "$1" | tr -d ' ' || true)
    pass=$((pass + p - s)); skip=$((skip + s)); fail=$((fail + f))
}

echo "== crun's tests (OCI_RUNTIME=cordon-oci)"
cd "$WORK/src/crun/tests"
CRUN_TESTS=${CRUN_TESTS-"$(echo test_*.py)"}
for t in $CRUN_TESTS; do
    OCI_RUNTIME="$WORK/bin/cordon-oci" INIT="$WORK/init" timeout 600 python3 "$t" \
        > "$WORK/crun-$t.tap" 2>&1 || true
    sed -n 's/^\(not ok\|ok\) [0-9]* *-* */&/p' "$WORK/crun-$t.tap" | sed "s/^/$t: /"
    tally "$WORK/crun-$t.tap"
    leftovers "$WORK/src/crun/tests/.testsuite-run"
done
crun_pass=$pass crun_fail=$fail crun_skip=$skip
pass=0 fail=0 skip=0

echo "== runc's bats tests, a subset (RUNC=cordon-oci)"
RUNC_TESTS=${RUNC_TESTS-"create start_hello start_detached state kill delete exec ps pause run cwd mask umask version list hooks root"}
IT="$WORK/src/runc/tests/integration"
mkdir -p "$IT/testdata"
# The image: busybox-static, as tests/oci builds its own.
img="$WORK/busybox-root"
rm -rf "$img"
mkdir -p "$img/bin" "$img/etc" "$img/tmp" "$img/proc" "$img/sys" "$img/dev" "$img/root"
cp /bin/busybox "$img/bin/busybox"
for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -sf busybox "$img/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$img/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$img/etc/group"
tar -C "$img" -cJf "$IT/testdata/busybox.tar.xz" .
printf '#!/bin/sh\necho BUSYBOX_IMAGE=%s\necho DEBIAN_IMAGE=%s\n' \
    "$IT/testdata/busybox.tar.xz" "$IT/testdata/debian-absent.tar.xz" > "$IT/get-images.sh"
chmod +x "$IT/get-images.sh"
# recvtty (runc's Go helper, not built here): a console socket that takes each
# terminal's master and drains it, as `recvtty --mode null` does.
mkdir -p "$WORK/src/runc/contrib/cmd/recvtty"
cat > "$WORK/src/runc/contrib/cmd/recvtty/recvtty" <<'PY'
#!/usr/bin/python3
import argparse, array, os, socket, threading
a = argparse.ArgumentParser()
a.add_argument("--pid-file")
a.add_argument("--mode", default="null")
a.add_argument("socket")
o = a.parse_args()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(o.socket)
s.listen(16)
if o.pid_file:
    open(o.pid_file, "w").write(str(os.getpid()))
def drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
while True:
    c, _ = s.accept()
    _, anc, _, _ = c.recvmsg(1024, socket.CMSG_SPACE(4))
    for level, kind, data in anc:
        fd = array.array("i", data[:4])[0]
        threading.Thread(target=drain, args=(fd,), daemon=True).start()
    c.close()
PY
chmod +x "$WORK/src/runc/contrib/cmd/recvtty/recvtty"
# runc spec stays runc's; everything else is cordon-oci's.
cat > "$WORK/bin/runc-or-cordon" <<WRAP
#!/bin/sh
for a in "\$@"; do [ "\$a" = spec ] && exec /usr/bin/runc "\$@"; done
exec "$WORK/bin/cordon-oci" "\$@"
WRAP
chmod +x "$WORK/bin/runc-or-cordon"
for t in $RUNC_TESTS; do
    [ -f "$IT/$t.bats" ] || continue
    RUNC="$WORK/bin/runc-or-cordon" timeout 900 bats -t "$IT/$t.bats" > "$WORK/runc-$t.tap" 2>&1 || true
    grep -E '^(not )?ok ' "$WORK/runc-$t.tap" | sed "s/^/$t.bats: /"
    tally "$WORK/runc-$t.tap"
    leftovers /tmp/bats-run
done

# The parent the suites' relative cgroupsPath made, once their containers are gone.
for d in /sys/fs/cgroup/*/cordon-oci; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
done

echo "== totals"
echo "crun: $crun_pass passed, $crun_fail failed, $crun_skip skipped"
echo "runc: $pass passed, $fail failed, $skip skipped"
echo "logs: $WORK"
