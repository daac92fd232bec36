#!/bin/sh
# Packs the build directory BUILD as a Debian package in OUTDIR (default .),
# compiling nothing again: the build is staged for prefix /usr with
# `meson install --destdir` (cordon finds its installed helpers relative to
# its own executable, so the prefix changes no object; BUILD's own prefix is
# put back afterwards) and packed with dpkg-deb. Depends are the packages of
# the shared libraries the staged programs load (the static cordon loads
# none; libcordon.so does); QEMU and gVisor are recommended, for the microvm
# and gvisor levels. Prints the package's path.
#   make-deb.sh BUILD [OUTDIR]
set -eu

build=$(cd "${1:?usage: make-deb.sh BUILD [OUTDIR]}" && pwd)
out=$(cd "${2:-.}" && pwd)

option() {
    meson introspect "$build" "$1" | python3 -c "import json, sys
d = json.load(sys.stdin)
print(d['$2'] if isinstance(d, dict) else [o['value'] for o in d if o['name'] == '$2'][0])"
}
version=$(option --projectinfo version)
prefix=$(option --buildoptions prefix)
arch=$(dpkg --print-architecture)

stage=$(mktemp -d "${TMPDIR:-/tmp}/cordon-deb.XXXXXX")
restore() {
    rm -rf "$stage"
    [ "$prefix" = /usr ] || meson configure "$build" -Dprefix="$prefix" >/dev/null
}
trap restore EXIT
trap 'exit 1' INT TERM
root="$stage/root"
meson configure "$build" -Dprefix=/usr >/dev/null
meson install -C "$build" --destdir "$root" --quiet >/dev/null

# Debian keeps manual pages compressed, and the package's copyright beside its docs.
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
doc="$root/usr/share/doc/cordon"
mkdir -p "$doc"
printf 'cordon %s\nLicense: Apache-2.0\n' "$version" >"$doc/copyright"

# The packages that hold the libraries the staged programs are linked against.
depends=$(
    find "$root" -type f -perm -u+x -o -type f -name '*.so*' | while read -r f; do
        [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
        ldd "$f" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'
    done | sort -u | while read -r lib; do
        dpkg-query -S "$lib" 2>/dev/null || dpkg-query -S "$(realpath "$lib")" 2>/dev/null
    done | sed 's/:.*//; s/, .*//' | sort -u | paste -sd, | sed 's/,/, /g'
)

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<EOF
Package: cordon
Version: $version
Architecture: $arch
Maintainer: cordon developers <cordon@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: ${depends:-libc6}
Recommends: qemu-system-x86, runsc
Suggests: linux-source-6.1, python3, nodejs
Section: admin
Priority: optional
Description: sandbox for AI agents' tool calls
 cordon runs a command, a program a model wrote or an MCP server inside a
 boundary (namespaces, seccomp, Landlock, cgroups, gVisor or a QEMU
 microVM), with an egress gateway and a hash-chained audit log.
 .
 The microvm level's guest kernel is built once per machine by
 /usr/libexec/cordon/build-guest-kernel (about 6 minutes).
EOF
deb="$out/cordon_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
