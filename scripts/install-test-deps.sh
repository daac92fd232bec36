#!/bin/sh
# Installs what the tests need beyond scripts/install-deps.sh: a few Debian
# packages (below), and the npm packages pinned in tests/mcp/package-lock.json
# (the MCP SDK, reference servers and inspector that the MCP tests drive).
# Quick and silent when they are already installed; installs Debian's npm
# only when there is none.
set -eu
cd "$(dirname "$0")/.."

# Debian packages only the tests use: chromium renders `cordon audit report`'s
# page (test_audit_report.py); pip, setuptools and venv install the Python
# client offline, and man-db reads the installed man page (test_install.py).
# tests/oci: the engines cordon-oci runs under (containerd with its runc shim,
# Docker, Podman with conmon), runc to compare with, busybox-static for the
# test images, umoci, and python3-yaml for examples/k8s. grpcio, protobuf
# and protoc: a real gRPC client for sandboxd (test_sandboxd.py). No service is
# started: an install must not start the engines' daemons (the tests start
# private ones), so policy-rc.d refuses while they install.
PACKAGES="chromium python3-pip python3-setuptools python3-venv man-db
containerd runc docker.io podman conmon catatonit uidmap slirp4netns
fuse-overlayfs umoci busybox-static iptables python3-yaml dpkg-dev bats gawk
python3-grpcio python3-protobuf protobuf-compiler libprotobuf-dev"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-test-deps: installing:$missing" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    RCD=/usr/sbin/policy-rc.d
    made_rcd=""
    if [ ! -e "$RCD" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$RCD" >/dev/null
        $SUDO chmod 755 "$RCD"
        made_rcd=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing
    if [ -n "$made_rcd" ]; then
        $SUDO rm -f "$RCD"
    fi
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
