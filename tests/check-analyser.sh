#!/bin/sh
# The static analyser's baseline is clean: cppcheck finds nothing in src/ or
# guest/, configured by tests/cppcheck.cfg (what it cannot know: _Noreturn,
# jansson's macros, Linux's mmap) and tests/cppcheck-suppressions.txt (each
# entry with its reason). A finding is fixed in the code, or, if cppcheck is
# wrong, suppressed as narrowly as is true: on its line with
# "/* cppcheck-suppress ID */" and a reason, or in the file.
# Under cppcheck, _cleanup_ variables are static (common/cleanup.h), so a
# second check does what cppcheck then cannot: every one is initialised.
# Tuned for Debian 12's cppcheck 2.10. Without cppcheck the first test is a
# skip, and a failure under CORDON_TESTS_STRICT=1 (CI installs it:
# scripts/install-deps.sh). Whole-program checks need one process (no -j):
# about 15 s on one core.
# TAP. Usage: check-analyser.sh SRCDIR
src=${1:?usage: check-analyser.sh SRCDIR}
cd "$src" || exit 1
echo "1..2"
fail=0

if ! command -v cppcheck >/dev/null 2>&1; then
    if [ "${CORDON_TESTS_STRICT:-}" = 1 ]; then
        echo "not ok 1 - cppcheck is not installed (scripts/install-deps.sh installs it)"
        fail=1
    else
        echo "ok 1 # SKIP cppcheck is not installed (scripts/install-deps.sh installs it)"
    fi
else
    # -D turns off cppcheck's trying of every configuration: this is the one
    # cordon builds (x86_64; usock.c and netnotify.c #error on an unknown arch).
    found=$(cppcheck --quiet --error-exitcode=3 --std=c11 --enable=warning,portability \
                --library=posix --library=tests/cppcheck.cfg \
                --suppressions-list=tests/cppcheck-suppressions.txt --inline-suppr \
                -D_GNU_SOURCE -D__GNUC__ -D__x86_64__ -D__CPPCHECK__ -I src \
                --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
                src guest 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$found" ]; then
        echo "not ok 1 - cppcheck: $(cppcheck --version) exited $rc"
        echo "$found" | sed 's/^/# /'
        fail=1
    else
        echo "ok 1 - cppcheck finds nothing in src/ and guest/"
    fi
fi

# A declaration with a cleanup attribute and no initialiser on its line.
bare=$(grep -rnE --include='*.[ch]' '^[[:space:]]*(_cleanup_[a-z_]*(\([a-z_]*\))?|json_auto_t)[[:space:]]' \
           src guest | grep -v '=' | grep ';')
if [ -n "$bare" ]; then
    echo "not ok 2 - _cleanup_ variables without an initialiser (a cleanup runs on every return):"
    echo "$bare" | sed 's/^/# /'
    fail=1
else
    echo "ok 2 - every _cleanup_ variable is initialised where it is declared"
fi
exit $fail
