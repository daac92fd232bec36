#!/bin/bash
# A tour of the boundary: one command per property, run for real, with what
# the host saw afterwards. Usage: scripts/demo.sh [path/to/cordon]
set -u
CORDON=${1:-build/cordon}
CORDON=$(readlink -f "$CORDON")
work=$(mktemp -d /tmp/cordon-demo.XXXXXX)
trap 'rm -rf "$work"; [ -n "${lpid:-}" ] && kill "$lpid" 2>/dev/null' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$'; printf ' %q' "$@"; printf '\n'; "$@"; printf '(exit %d)\n' "$?"; }

step "cordon check: what this host supports"
"$CORDON" check

step "a command runs as an unprivileged user in a root built from read-only binds"
show "$CORDON" run -- sh -c 'id; hostname; ls /; grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status'

step "host files stay out of reach: a secret beside the sandbox is not there"
echo "hunter2" > "$work/secret.txt"
show "$CORDON" run -- cat "$work/secret.txt"
show "$CORDON" run -- ls /home /root /var /sys

step "host secrets in the environment do not leak in"
export DEMO_API_TOKEN=sk-demo-do-not-leak
show "$CORDON" run -- sh -c 'env | sort'
show "$CORDON" run -e DEMO_VISIBLE=only-what-you-pass -- sh -c 'echo $DEMO_VISIBLE; echo "token: ${DEMO_API_TOKEN:-absent}"'

step "no network: a listener on the host's loopback receives nothing"
/usr/bin/python3 - "$work/port" "$work/accepted" <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
s.settimeout(8)
n = 0
try:
    while True:
        s.accept(); n += 1
except OSError:
    pass
open(sys.argv[2], "w").write(str(n))
PY
lpid=$!
while [ ! -s "$work/port" ]; do sleep 0.05; done
port=$(cat "$work/port")
show "$CORDON" run -- python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), timeout=2); print('connected?!')"
show "$CORDON" run -- python3 -c "import socket; socket.create_connection(('1.1.1.1', 443), timeout=2)"
kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null; lpid=
echo "host listener on 127.0.0.1:$port accepted: $(cat "$work/accepted" 2>/dev/null || echo 0) connections"

step "the one way out: the egress gateway allows what you name, refuses the rest"
mkdir "$work/site" && echo "hello from an allowed site" > "$work/site/index.html"
/usr/bin/python3 - "$work/site" "$work/site-port" <<'PY' &
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.2", 0), functools.partial(Quiet, directory=sys.argv[1]))
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
spid=$!
while [ ! -s "$work/site-port" ]; do sleep 0.05; done
sport=$(cat "$work/site-port")
# 127.0.0.2 stands in for the internet; --allow-private lets it through the SSRF rules.
net=(--allow "site.example:$sport" --resolve site.example=127.0.0.2 --allow-private 127.0.0.2/32)
show "$CORDON" run "${net[@]}" -- curl -sS "http://site.example:$sport/"
show "$CORDON" run "${net[@]}" -- curl -sS http://169.254.169.254/latest/meta-data/
show "$CORDON" run "${net[@]}" --allow metadata.example --resolve metadata.example=169.254.169.254 \
    -- curl -sS http://metadata.example/
show "$CORDON" run "${net[@]}" -- curl -sS --noproxy '*' "http://127.0.0.2:$sport/"
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null

step "one writable workspace; what the sandbox writes there belongs to you"
mkdir "$work/ws"
show "$CORDON" run -w "$work/ws" -- sh -c 'echo built > artifact.txt; touch /usr/evil 2>&1; ls -l'
ls -ln "$work/ws"

step "limits end runaway commands, and say which limit did"
show "$CORDON" run --timeout 1s -- sleep 100
show "$CORDON" run --output 64K -- sh -c 'yes | head -c 10000000' | wc -c
mem_flags="-m 64M"; [ "$(id -u)" -ne 0 ] && mem_flags="-m 64M --best-effort memory"
show "$CORDON" run $mem_flags --result "$work/result.json" -- python3 -c 'b = bytearray(512 << 20)'
cat "$work/result.json"; echo

step "an MCP server behind the broker: only allowed tools, checked arguments, a sandboxed view"
# tests/mcp/hostile_server.py is a stdlib-only server whose tools try to read host files.
repo=$(cd "$(dirname "$0")/.." && pwd)
printf 'version: 1\ntools:\n  allow: [read]\n  rules:\n    read:\n      paths: { under: [/etc, /root, /workspace] }\n' > "$work/mcp.yaml"
{
    echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}'
    echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    echo '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/x","text":"x"}}}'
    echo '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","arguments":{"paths":["/home/../../proc/1/environ"]}}}'
    echo '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","arguments":{"paths":["/etc/shadow","/root"]}}}'
    sleep 2
} | "$CORDON" mcp wrap -p "$work/mcp.yaml" --ro "$repo/tests/mcp:/opt/mcp" -- \
    python3 /opt/mcp/hostile_server.py exfil 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line); r = m.get("result", {})
    if "tools" in r: print(m["id"], "tools listed:", [t["name"] for t in r["tools"]])
    elif "error" in m: print(m["id"], "error:", m["error"]["message"])
    elif r.get("isError"): print(m["id"], "refused:", r["content"][0]["text"])
    elif "content" in r: print(m["id"], "result:", {p: v.get("error") or v.get("entries") or "read" for p, v in json.loads(r["content"][0]["text"])["paths"].items()})'

step "bad input is refused with one line and exit 125"
show "$CORDON" run --memory lots -- true
show "$CORDON" run --level teleport -- true
