#!/bin/sh
# libcordon's public surface: the header stands alone as C and as C++, and
# the shared library exports cordon_ symbols only.
set -eu
src=$1 lib=$2
cc -std=c17 -Wall -Wextra -Werror -fsyntax-only -x c "$src/include/cordon.h"
echo "ok 1 - cordon.h compiles alone as C"
if command -v c++ >/dev/null 2>&1; then
    c++ -Wall -Wextra -Werror -fsyntax-only -x c++ "$src/include/cordon.h"
    echo "ok 2 - cordon.h compiles alone as C++"
else
    echo "not ok 2 - no C++ compiler to check cordon.h with"
fi
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^cordon_' || true)
if [ -z "$others" ] && nm -D --defined-only "$lib" | grep -q ' cordon_prepare$'; then
    echo "ok 3 - libcordon.so exports cordon_ symbols only"
else
    echo "not ok 3 - libcordon.so exports: $others"
fi
echo "1..3"
