#!/bin/sh
# Installs what the tests need beyond scripts/install-deps.sh: the npm
# packages pinned in tests/mcp/package-lock.json (the MCP SDK, reference
# servers and inspector that the MCP tests drive). Quick and silent when
# they are already installed; installs Debian's npm only when there is none.
set -eu
cd "$(dirname "$0")/.."

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
