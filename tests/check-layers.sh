#!/bin/sh
# The layers of src/, lowest first:
#   common < (policy, audit) < (egress, sandbox) < core < broker < daemon < (lib, cli, oci)
# A file may include its own layer and any lower one; never a higher one, nor
# a sibling on its own rank (egress and sandbox know nothing of each other).
# The broker is a front end of its own that the CLI's `mcp` command drives;
# the daemon (cordon serve) uses its JSON-RPC streams.
# And raw syscall() appears only in common/syscalls.h, where each has a wrapper;
# jansson's json_load*() only in common/json.c, which refuses duplicate keys.
# TAP: one test per layer, then those two checks. Usage: check-layers.sh SRCDIR
src=${1:?usage: check-layers.sh SRCDIR}/src

rank() {
    case $1 in
    common) echo 0 ;;
    policy | audit) echo 1 ;;
    egress | sandbox) echo 2 ;;
    core) echo 3 ;;
    broker) echo 4 ;;
    daemon) echo 5 ;;
    lib | cli | oci) echo 6 ;;
    *) echo '' ;;
    esac
}

layers=$(cd "$src" && ls -d */ | tr -d /)
echo "1..$(($(echo "$layers" | wc -w) + 2))"
n=0
fail=0
for layer in $layers; do
    n=$((n + 1))
    mine=$(rank "$layer")
    bad=''
    if [ -z "$mine" ]; then
        bad="src/$layer is in no layer: add it to tests/check-layers.sh"
    else
        # Every '#include "dir/..."' of the layer's files, as "file:dir".
        for hit in $(grep -rHo --include='*.[ch]' '^#include "[a-z_]*/' "$src/$layer" |
                     sed 's#^'"$src"'/##; s#:\#include "#:#; s#/$##'); do
            file=${hit%%:*}
            dep=${hit##*:}
            [ "$dep" = "$layer" ] && continue
            theirs=$(rank "$dep")
            if [ -z "$theirs" ] || [ "$theirs" -ge "$mine" ]; then
                bad="$bad src/$file includes $dep/;"
            fi
        done
    fi
    if [ -n "$bad" ]; then
        echo "not ok $n - $layer:$bad"
        fail=1
    else
        echo "ok $n - $layer includes only lower layers"
    fi
done
n=$((n + 1))
raw=$(cd "$src" && grep -rln --include='*.[ch]' '[^_a-z]syscall *(' . | sed 's#^\./##' |
      grep -vx 'common/syscalls.h' | tr '\n' ' ')
if [ -n "$raw" ]; then
    echo "not ok $n - raw syscall() outside common/syscalls.h: $raw"
    fail=1
else
    echo "ok $n - raw syscall() only in common/syscalls.h"
fi
n=$((n + 1))
loads=$(cd "$src" && grep -rln --include='*.[ch]' 'json_load[a-z_]* *(' . | sed 's#^\./##' |
        grep -vx 'common/json.c' | tr '\n' ' ')
if [ -n "$loads" ]; then
    echo "not ok $n - json_load*() outside common/json.c (use json_parse_strict): $loads"
    fail=1
else
    echo "ok $n - JSON is read only through common/json.c"
fi
exit $fail
