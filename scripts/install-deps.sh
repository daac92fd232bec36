#!/bin/sh
# Installs every Debian package cordon needs to build, test and benchmark.
# runsc is gVisor, for --level gvisor (Debian 12's 2022 build: ptrace platform).
# cppcheck is the static analyser `meson test` runs (tests/check-analyser.sh),
# clang-format (14, Debian 12's) the format it checks (tests/check-format.sh).
# Does nothing when they are all present. Needs root (or sudo) only to install.
# `install-deps.sh fuzz` adds clang and its libFuzzer runtime (make fuzz):
# Debian's clang does not pull in libclang-rt-dev, which holds libFuzzer.
set -eu

PACKAGES="gcc make meson ninja-build pkg-config libc6-dev
libseccomp-dev libfyaml-dev libjansson-dev libssl-dev libevent-dev libpcre2-dev zlib1g-dev
libnghttp2-dev
python3 python3-pytest bubblewrap util-linux procps iproute2
curl openssl ca-certificates nodejs qemu-system-x86 runsc cppcheck
clang-format"
if [ "${1:-}" = fuzz ]; then
    PACKAGES="clang libclang-rt-dev"
fi

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
