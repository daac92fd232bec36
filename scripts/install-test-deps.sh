#!/bin/sh
# Installs what the tests need beyond scripts/install-deps.sh: a few Debian
# packages (below), and the npm packages pinned in tests/mcp/package-lock.json
# (the MCP SDK, reference servers and inspector that the MCP tests drive). Quick and silent when
# they are already installed; installs Debian's npm only when there is none.
set -eu
cd "$(dirname "$0")/.."

# Debian packages only the tests use: chromium renders `cordon audit report`'s
# page (test_audit_report.py); pip, setuptools and venv install the Python
# client offline, and man-db reads the installed man page (test_install.py).
PACKAGES="chromium python3-pip python3-setuptools python3-venv man-db"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-test-deps: installing:$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

MCP=tests/mcp
# npm writes this hidden lockfile last, so it marks a finished install.
STAMP=$MCP/node_modules/.package-lock.json

if [ -f "$STAMP" ] && [ ! "$MCP/package-lock.json" -nt "$STAMP" ] \
        && [ ! "$MCP/package.json" -nt "$STAMP" ]; then
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install-test-deps: installing npm" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends npm
fi

echo "install-test-deps: npm ci in $MCP" >&2
npm ci --prefix "$MCP" --no-audit --no-fund
