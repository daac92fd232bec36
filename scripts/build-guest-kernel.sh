#!/bin/sh
# Builds the microvm level's guest kernel from Debian's linux-source-6.1:
# `make tinyconfig` plus the fragment guest/kernel.config. The result is
# cached outside any build tree, keyed by the digest of the fragment, the
# source package's version and the recipe's number, so a machine pays the ~6 minute
# build once (about 6 minutes on 2 cores, 3 on 8; it says what it is doing
# every 30 s). Builds are serialised by a lock in the cache: a second build
# started meanwhile waits for the first and then finds its kernel. Prints the cache directory (holding vmlinux, which QEMU boots
# through its PVH note, and bzImage) on stdout.
#   build-guest-kernel.sh            build when missing, print the directory
#   build-guest-kernel.sh --print    print the directory, build nothing
#                                    (exit 1 when it is not built)
# Installed by `meson install` as LIBEXECDIR/cordon/build-guest-kernel.
# CORDON_GUEST_KERNEL_CACHE overrides /var/cache/cordon/guest-kernel.
set -eu

# The fragment: a source tree's guest/kernel.config, or, installed (as
# LIBEXECDIR/cordon/build-guest-kernel), the kernel.config beside it.
here=$(cd "$(dirname "$0")" && pwd)
fragment="$here/../guest/kernel.config"
[ -f "$fragment" ] || fragment="$here/kernel.config"
cache_root=${CORDON_GUEST_KERNEL_CACHE:-/var/cache/cordon/guest-kernel}
pkg=linux-source-6.1
deps="$pkg bc bison flex libelf-dev xz-utils make gcc"

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=""
for p in $deps; do
    installed "$p" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "${1:-}" = --print ] && exit 1
    echo "build-guest-kernel: installing:$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
fi

# Bump when the way the kernel is built changes (not for comments).
recipe=1
version=$(dpkg-query -W -f='${Version}' "$pkg")
digest=$( (cat "$fragment"; echo "$pkg $version recipe $recipe") | sha256sum | cut -c1-16)
out="$cache_root/$digest"
# "current" names the newest build: what cordon boots unless
# CORDON_GUEST_KERNEL names another directory.
if [ -s "$out/vmlinux" ] && [ -s "$out/bzImage" ]; then
    [ "${1:-}" = --print ] || ln -sfn "$digest" "$cache_root/current"
    echo "$out"
    exit 0
fi
[ "${1:-}" = --print ] && exit 1

mkdir -p "$cache_root"
# One build at a time: a second one waits, then finds the first's kernel.
exec 9>>"$cache_root/.lock"
if ! flock -n 9; then
    echo "build-guest-kernel: another build of the guest kernel is running; waiting for it" >&2
    flock 9
fi
if [ -s "$out/vmlinux" ] && [ -s "$out/bzImage" ]; then
    ln -sfn "$digest" "$cache_root/current"
    echo "$out"
    exit 0
fi
work=$(mktemp -d "$cache_root/build.XXXXXX")
ticker=""
trap 'rm -rf "$work"; [ -z "$ticker" ] || kill "$ticker" 2>/dev/null' EXIT INT TERM
start=$(date +%s)
say() { echo "build-guest-kernel: $*" >&2; }
say "building $pkg $version in $work (about 6 minutes on 2 cores)"
say "extracting the source"
tar -xJf "/usr/src/$pkg.tar.xz" -C "$work"
src="$work/$pkg"
jobs=$(nproc)
say "configuring (tinyconfig and guest/kernel.config)"
: >"$work/log"
# The log is printed if the build fails; meanwhile a line every 30 s says
# how far the compile got (files compiled so far, of about 1,200).
(
    while sleep 30; do
        say "compiling: $(grep -c '^  [A-Z]' "$work/log" 2>/dev/null) files done," \
            "$(( $(date +%s) - start )) s so far"
    done
) &
ticker=$!
if ! (
    cd "$src" &&
    make -s tinyconfig &&
    scripts/kconfig/merge_config.sh -m .config "$fragment" &&
    make -s olddefconfig &&
    make -j"$jobs" vmlinux bzImage
) >"$work/log" 2>&1; then
    tail -50 "$work/log" >&2
    say "kernel build failed"
    exit 1
fi
kill "$ticker" 2>/dev/null
ticker=""
say "built in $(( $(date +%s) - start )) s"
# Every option of the fragment must have survived olddefconfig: a dropped
# dependency would otherwise give a kernel that boots and then lacks 9p.
if ! grep -E '^(CONFIG_[A-Z0-9_]+=.*|# CONFIG_[A-Z0-9_]+ is not set)$' "$fragment" |
    while read -r line; do grep -qxF "$line" "$src/.config" || { echo "$line"; exit 1; }; done >"$work/dropped"; then
    echo "build-guest-kernel: options not in the built config: $(cat "$work/dropped")" >&2
    exit 1
fi
stage="$cache_root/.stage.$$"
mkdir -p "$stage"
cp "$src/vmlinux" "$src/arch/x86/boot/bzImage" "$src/.config" "$stage/"
rm -rf "$out"
mv "$stage" "$out"
ln -sfn "$digest" "$cache_root/current"
echo "$out"
