#!/bin/sh
# One format for every C file of src/, guest/, include/ and tests/ (unit and
# fuzz): .clang-format at the top, applied with clang-format 14 (Debian 12's).
# TAP: one test. Usage: check-format.sh SRCDIR
# To format a file: clang-format -i FILE (the project's .clang-format is found).
top=${1:?usage: check-format.sh SRCDIR}
cd "$top" || exit 1
echo "1..1"
if ! command -v clang-format >/dev/null 2>&1; then
    echo "not ok 1 - clang-format is not installed (scripts/install-deps.sh installs it)"
    exit 1
fi
bad=$(find src guest include tests/unit tests/fuzz tests/integration -name '*.[ch]' | sort |
      while read -r f; do
          clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || printf '%s ' "$f"
      done)
if [ -n "$bad" ]; then
    echo "not ok 1 - not in .clang-format's format (clang-format -i FILE): $bad"
    exit 1
fi
echo "ok 1 - every C file is in .clang-format's format"
