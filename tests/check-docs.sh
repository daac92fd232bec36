#!/bin/sh
# The README names only what the repository holds: every relative link and
# every `path` in backquotes that looks like a file of ours resolves inside
# the tree, and none reaches outside it (../). TAP. Usage: check-docs.sh SRCDIR
top=${1:?usage: check-docs.sh SRCDIR}
cd "$top" || exit 1
echo "1..2"
out=$(grep -o '](\.\./[^)]*)\|`\.\./[^`]*`' README.md | tr '\n' ' ')
if [ -n "$out" ]; then
    echo "not ok 1 - README.md points outside the repository: $out"
    fail=1
else
    echo "ok 1 - README.md points nowhere outside the repository"
fi
missing=""
for link in $(grep -o '](\([a-z][^):#]*\))' README.md | sed 's/^](//; s/)$//'); do
    case $link in http*|mailto*) continue ;; esac
    [ -e "$link" ] || missing="$missing $link"
done
if [ -n "$missing" ]; then
    echo "not ok 2 - README.md links to missing files:$missing"
    fail=1
else
    echo "ok 2 - every relative link of README.md resolves"
fi
exit ${fail:-0}
