#!/bin/sh
# The calls between the files of src/policy/ form the DAG that the opening
# comment of src/policy/policy_int.h draws, one line per file:
#   " *   policy_gov.c        -> load finalize policy ..."
# (a short name is policy_NAME.c, or NAME.c, or policy.c for "policy").
# Checked on the built objects: every symbol a policy object leaves undefined
# and another policy object defines is a call along an edge of that list; the
# list names every file of src/policy/ and each edge leads down it, so no
# circle can form. TAP, three tests. Usage: check-policy-dag.sh SRCDIR LIBRARY
src=${1:?usage: check-policy-dag.sh SRCDIR LIBRARY}/src/policy
lib=${2:?usage: check-policy-dag.sh SRCDIR LIBRARY}

# "file.c target.c target.c ...", in the order of the comment.
list=$(sed -n 's/^ \*   \([a-z_]*\.c\) *->\(.*\)$/\1 \2/p' "$src/policy_int.h" |
       while read -r file targets; do
           line=$file
           for t in $targets; do
               if [ "$t" = policy ]; then
                   line="$line policy.c"
               elif [ -e "$src/policy_$t.c" ]; then
                   line="$line policy_$t.c"
               else
                   line="$line $t.c"
               fi
           done
           echo "$line"
       done)

echo "1..3"
fail=0

missing=''
for f in "$src"/*.c; do
    f=${f##*/}
    echo "$list" | grep -q "^$f " || echo "$list" | grep -qx "$f" || missing="$missing $f"
done
if [ -n "$missing" ]; then
    echo "not ok 1 - files missing from policy_int.h's list:$missing"
    fail=1
else
    echo "ok 1 - every file of src/policy/ has its line in policy_int.h"
fi

# An edge to a file on its own line or above it would allow a circle.
up=$(echo "$list" | awk '
    { order[$1] = NR; line[NR] = $0 }
    END {
        for (i = 1; i <= NR; i++) {
            n = split(line[i], w, " ")
            for (j = 2; j <= n; j++)
                if (!(w[j] in order) || order[w[j]] <= i)
                    printf "%s -> %s ", w[1], w[j]
        }
    }')
if [ -n "$up" ]; then
    echo "not ok 2 - edges that do not lead down the list (or to a file not in it): $up"
    fail=1
else
    echo "ok 2 - the list is a DAG: every edge leads down it"
fi

# "caller.c callee.c" for each call between two policy objects.
calls=$(nm -A "$lib" 2>/dev/null | awk '
    {
        n = split($1, a, ":"); obj = a[2]
        if (obj !~ /src_policy_[a-z_]*\.c\.o$/) next
        sub(/.*src_policy_/, "", obj); sub(/\.o$/, "", obj)
        if ($2 == "U") used[obj, $3] = 1
        else if ($2 ~ /^[TDBR]$/) def[$3] = obj
    }
    END {
        for (k in used) {
            split(k, p, SUBSEP)
            if ((p[2] in def) && def[p[2]] != p[1]) print p[1], def[p[2]], p[2]
        }
    }' | sort -u)
if [ -z "$(nm -A "$lib" 2>/dev/null | grep -m1 src_policy_)" ]; then
    echo "not ok 3 - no policy objects in $lib"
    fail=1
else
    bad=$(echo "$calls" | while read -r from to sym; do
              [ -n "$from" ] || continue
              echo "$list" | awk -v f="$from" -v t="$to" '
                  $1 == f { for (i = 2; i <= NF; i++) if ($i == t) ok = 1 }
                  END { exit !ok }' || printf '%s -> %s (%s) ' "$from" "$to" "$sym"
          done)
    if [ -n "$bad" ]; then
        echo "not ok 3 - calls off the list: $bad"
        fail=1
    else
        echo "ok 3 - every call between policy files is an edge of the list"
    fi
fi
exit $fail
