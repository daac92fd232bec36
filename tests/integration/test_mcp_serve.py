"""
`cordon mcp serve`: cordon itself as an MCP server whose tools (run_command,
run_code) run each call in a fresh sandbox. Driven by the official
TypeScript SDK client (tests/mcp/client.mjs), and by raw pipes where a
client must misbehave or send several requests at once.

Every boundary test ends as the others do: a controlled refusal inside the
sandbox, and no trace of it on the host (no file, no connection, no
process, no cgroup or temp entry: see the autouse no_leftovers fixture).
"""

import hashlib
import json
import os
import pathlib
import secrets
import signal
import subprocess
import time

import pytest

from conftest import HOST_TOKEN, REPO, host_ipv4_addresses, marker, pids_with, wait_until
from mcp_util import MCP, NODE, RawClient, clean, policy, require_npm_packages
from mcp_util import sdk as run_sdk
VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
RESULT_KEYS = {"exit_code", "signal", "reason", "stdout", "stderr", "stdout_truncated",
               "stderr_truncated", "run_id", "wall_ms"}


@pytest.fixture(scope="module")
def sdk_client():
    require_npm_packages()
    return MCP / "client.mjs"


def serve_argv(cordon, *opts):
    return cordon.argv("mcp", "serve", *opts)


def sdk(client, cordon, steps, *opts, timeout_ms=60000, env=None):
    """Run the SDK client against `cordon mcp serve OPTS`; its one JSON report."""
    rep = run_sdk(cordon, serve_argv(cordon, *opts), steps, timeout_ms=timeout_ms, env=env)
    assert rep["exit"] == {"code": 0, "signal": None}, rep["exit"]
    return rep


def call(name, **arguments):
    return {"op": "callTool", "name": name, "arguments": arguments}


def code(language, source):
    return call("run_code", language=language, source=source)


def sh(command, **more):
    return call("run_command", command=command, **more)


def ran(step):
    """A call that ran: its structured result, checked against the declared shape."""
    assert step["ok"], step
    v = step["value"]
    sc = v.get("structuredContent")
    assert sc is not None, v
    assert RESULT_KEYS <= set(sc), sc
    failed = sc["reason"] != "exited" or sc["exit_code"] != 0
    assert v.get("isError", False) is failed, v
    text = "".join(c.get("text", "") for c in v["content"])
    assert sc["run_id"] in text, v
    return sc


def ok(step):
    sc = ran(step)
    assert sc["reason"] == "exited" and sc["exit_code"] == 0, sc
    return sc


def invalid(step, *words):
    """Refused arguments: an isError result with no run, naming the problem."""
    assert step["ok"], step
    v = step["value"]
    assert v.get("isError") is True, v
    assert "structuredContent" not in v, v
    text = "".join(c.get("text", "") for c in v["content"])
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    return text


@pytest.fixture
def raw(cordon):
    servers = []

    def start(*opts, stdin=subprocess.PIPE):
        r = RawClient(serve_argv(cordon, *opts), cordon.ident.env(), cordon.tmp, stdin)
        servers.append(r)
        return r

    yield start
    for r in servers:
        r.kill()


def tool_call(rid, name, **arguments):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


# --- the protocol, through the SDK ------------------------------------------


def test_sdk_lists_both_tools_with_schemas(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [{"op": "listTools"}, {"op": "ping"}])
    srv = rep["server"]
    assert srv["serverInfo"]["name"] == "cordon", srv
    assert srv["protocolVersion"] == VERSIONS[0], srv  # the SDK asks for the newest
    assert srv["capabilities"]["tools"] == {"listChanged": False}, srv
    assert "/workspace" in srv["instructions"] and "fresh" in srv["instructions"], srv
    tools = {t["name"]: t for t in rep["results"][0]["value"]["tools"]}
    assert sorted(tools) == ["run_code", "run_command"], tools
    rc = tools["run_command"]["inputSchema"]
    assert rc["type"] == "object" and rc["additionalProperties"] is False, rc
    assert set(rc["properties"]) == {"argv", "command", "stdin"}, rc
    assert rc["properties"]["argv"]["items"] == {"type": "string"}, rc
    code_schema = tools["run_code"]["inputSchema"]
    assert code_schema["properties"]["language"]["enum"] == ["python", "node", "sh"]
    assert sorted(code_schema["required"]) == ["language", "source"]
    for t in tools.values():
        out = t["outputSchema"]
        assert set(out["required"]) == RESULT_KEYS, out
        d = t["description"]
        # What the sandbox can reach, told truthfully for the default policy.
        assert "fresh sandbox" in d and "/workspace" in d and "discarded" in d, d
        assert "Network: none" in d and "Credentials: none" in d, d
        assert "wall-clock time 60s" in d, d  # the default when the policy sets none
    assert rep["results"][1]["ok"], rep


def test_descriptions_follow_the_policy(sdk_client, cordon):
    ws = cordon.hostdir("ws")
    rep = sdk(sdk_client, cordon, [{"op": "listTools"}], "-w", ws, "--net", "gateway",
              "--allow", "pypi.org", "--allow", "*.pythonhosted.org", "-m", "300M",
              "--best-effort", "memory",  # serve refuses at start what it cannot enforce
              "--timeout", "90s")
    d = rep["results"][0]["value"]["tools"][0]["description"]
    assert "host directory shared by every call" in d and "persist" in d, d
    assert "egress gateway" in d and "pypi.org" in d and "*.pythonhosted.org" in d, d
    assert "memory 300 MiB" in d and "wall-clock time 90s" in d, d


def test_run_code_python_node_sh(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [
        code("python", "import hashlib\nprint(sum(range(10**6)), "
                       "hashlib.sha256(b'cordon').hexdigest()[:12])"),
        code("node", "const xs = [3, 4, 5]; console.log(JSON.stringify(xs.map(x => x * x)));"
                     "console.error('to stderr')"),
        code("sh", 'i=0; while [ $i -lt 5 ]; do i=$((i+1)); done; echo "i=$i $0"'),
    ])
    py, node, shell = (ok(s) for s in rep["results"])
    want = hashlib.sha256(b"cordon").hexdigest()[:12]
    assert py["stdout"] == f"499999500000 {want}\n", py
    assert node["stdout"] == "[9,16,25]\n" and node["stderr"] == "to stderr\n", node
    assert shell["stdout"] == "i=5 sh\n", shell
    assert len({py["run_id"], node["run_id"], shell["run_id"]}) == 3


def test_run_command_argv_shell_and_stdin(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [
        call("run_command", argv=["python3", "-c", "import sys; print(sys.argv[1:])",
                                  "a b", "$HOME", "*"]),
        sh("echo $((6 * 7)) | tr 4 x; echo \"$HOME\""),
        call("run_command", argv=["tr", "a-z", "A-Z"], stdin="hello, sandbox\n"),
        sh("wc -c; head -c 3", stdin="x" * 200000),
        call("run_command", argv=["cat"]),
    ])
    argv_run, shell, upper, big, empty = (ok(s) for s in rep["results"])
    assert argv_run["stdout"] == "['a b', '$HOME', '*']\n", argv_run  # no shell in between
    assert shell["stdout"] == "x2\n/tmp/home\n", shell
    assert upper["stdout"] == "HELLO, SANDBOX\n", upper
    assert big["stdout"] == "200000\n", big  # wc took it all, head saw EOF
    assert empty["stdout"] == "", empty  # no stdin given: an empty one, not ours


def test_non_zero_exit_and_missing_command_are_errors(sdk_client, cordon):
    # listTools first: the SDK then checks each structuredContent against outputSchema.
    rep = sdk(sdk_client, cordon, [
        {"op": "listTools"},
        sh("echo partial; echo oops >&2; exit 7"),
        call("run_command", argv=["no-such-program-cordon"]),
        code("python", "raise SystemExit('bad input')"),
        code("sh", "kill -KILL $$"),
        sh("sleep 5"),
    ], "--timeout", "1s")
    del rep["results"][0]
    failed, missing, py, killed, slow = (ran(s) for s in rep["results"])
    assert (failed["exit_code"], failed["reason"]) == (7, "exited"), failed
    assert failed["stdout"] == "partial\n" and failed["stderr"] == "oops\n", failed
    assert "exit code 7" in rep["results"][0]["value"]["content"][0]["text"]
    assert missing["exit_code"] == 127 and missing["reason"] == "setup_error", missing
    assert "no-such-program-cordon" in missing["error"], missing
    assert py["exit_code"] == 1 and "bad input" in py["stderr"], py
    assert killed["exit_code"] is None and killed["signal"] == signal.SIGKILL, killed
    assert slow["reason"] == "timeout", slow


def test_timeout(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [sh("echo started; sleep 30"), sh("echo quick")],
              "--timeout", "1s")
    slow = ran(rep["results"][0])
    assert slow["reason"] == "timeout" and slow["exit_code"] is None, slow
    assert slow["stdout"] == "started\n", slow
    assert rep["results"][0]["ms"] < 15000, rep["results"][0]
    assert "wall-clock limit of 1s" in rep["results"][0]["value"]["content"][0]["text"]
    ok(rep["results"][1])


def test_output_over_the_cap_is_cut_and_flagged(sdk_client, cordon):
    pol = policy(cordon, "tools:\n  max_result_bytes: 64K\n")
    rep = sdk(sdk_client, cordon, [
        code("python", "import sys\nsys.stdout.write('x' * 3_000_000)\n"
                       "sys.stderr.write('e' * 100)\nprint('done', file=sys.stderr)"),
        code("python", "print('y' * 1000)"),
    ], "-p", pol)
    big = ok(rep["results"][0])  # the command was never blocked on its output
    assert big["stdout"] == "x" * 32768 and big["stdout_truncated"] is True, len(big["stdout"])
    assert big["stderr"] == "e" * 100 + "done\n" and big["stderr_truncated"] is False, big
    text = rep["results"][0]["value"]["content"][0]["text"]
    assert "first 32768 of 3000000 bytes" in text, text[-300:]
    small = ok(rep["results"][1])
    assert small["stdout_truncated"] is False and len(small["stdout"]) == 1001


def test_output_limit_of_the_run_still_applies(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [code("python", "print('z' * 5_000_000)")],
              "--output", "100K")
    r = ran(rep["results"][0])
    assert r["reason"] == "output_limit", r
    assert len(r["stdout"]) <= 100 * 1024, len(r["stdout"])


def test_binary_output_comes_back_as_valid_text(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [code("python", "import sys\n"
                                                  "sys.stdout.buffer.write(b'a\\xff\\xc3(b\\x00c')")])
    r = ok(rep["results"][0])
    assert r["stdout"] == "a\ufffd\ufffd(b\x00c", repr(r["stdout"])


# --- the boundary ------------------------------------------------------------


def test_code_cannot_reach_the_host(sdk_client, cordon, tcp_listener):
    mark = marker()
    host_file = pathlib.Path("/tmp") / f"cordon-mcp-escape-{secrets.token_hex(6)}"
    listeners = [tcp_listener(a) for a in host_ipv4_addresses()[:1]] + [tcp_listener("127.0.0.1")]
    connect = "\n".join(
        f"try:\n    socket.create_connection(('{l.addr}', {l.port}), timeout=3)\n"
        f"    print('connected {l.addr}')\n"
        f"except OSError as e:\n    print('refused {l.addr}', e.errno)" for l in listeners)
    rep = sdk(sdk_client, cordon, [
        # a file under the sandbox's /tmp: its own tmpfs, not the host's
        code("python", f"open('{host_file}', 'w').write('escaped')\nprint('wrote')"),
        code("sh", "cat /etc/shadow"),
        code("python", "import socket\n" + connect),
        code("sh", "touch /usr/cordon-escape 2>&1 || echo read-only; env"),
        code("sh", f"python3 -c 'import time; time.sleep(1000)' {mark} &\n"
                   "sleep 0.2; kill -0 $! && echo left behind"),
    ])
    wrote, shadow, net, env, bg = rep["results"]
    assert ok(wrote)["stdout"] == "wrote\n"
    assert not host_file.exists(), f"{host_file} appeared on the host"
    sc = ran(shadow)
    assert sc["exit_code"] != 0 and "shadow" in sc["stderr"], sc
    out = ok(net)["stdout"]
    for l in listeners:
        assert f"refused {l.addr}" in out, out
        assert l.count() == 0, f"{l.addr} accepted a connection from the sandbox"
    e = ok(env)["stdout"]
    assert "read-only" in e and HOST_TOKEN not in e, e
    assert not pathlib.Path("/usr/cordon-escape").exists()
    assert ok(bg)["stdout"] == "left behind\n"
    assert wait_until(lambda: not pids_with(mark), 10), \
        f"a process of the call outlived it: {pids_with(mark)}"


def test_every_call_is_a_fresh_sandbox(sdk_client, cordon):
    write = sh("echo one > /workspace/note; echo two > /tmp/note; ls /workspace /tmp")
    look = sh("cat /workspace/note /tmp/note 2>&1; true")
    rep = sdk(sdk_client, cordon, [write, look])
    assert "note" in ok(rep["results"][0])["stdout"]
    after = ok(rep["results"][1])["stdout"]
    assert "one" not in after and "two" not in after and "No such file" in after, after

    ws = cordon.hostdir("ws")
    rep = sdk(sdk_client, cordon, [write, look], "-w", ws)
    ok(rep["results"][0])
    after = ok(rep["results"][1])["stdout"]
    assert after.startswith("one\n") and "two" not in after, after  # /tmp is still fresh
    assert (ws / "note").read_text() == "one\n"


def test_invalid_arguments_name_the_problem(sdk_client, cordon):
    rep = sdk(sdk_client, cordon, [
        call("run_command", argv=["echo"], command="echo"),
        call("run_command"),
        call("run_command", argv=[]),
        call("run_command", argv=["echo", 3]),
        call("run_command", command="true", env={"A": "1"}),
        call("run_command", command="true", stdin=["x"]),
        call("run_code", language="ruby", source="puts 1"),
        call("run_code", language="python"),
        call("run_code", language="sh", source="x" * (1024 * 1024 + 1)),
        call("run_command", command="x" * (128 * 1024)),
        {"op": "callTool", "name": "no_such_tool", "arguments": {}},
        code("sh", "echo still serving"),
    ])
    r = rep["results"]
    invalid(r[0], "exactly one of", "argv", "command")
    invalid(r[1], "exactly one of")
    invalid(r[2], "argv", "non-empty array")
    invalid(r[3], "argv[1]", "must be a string", "number")
    invalid(r[4], 'unknown argument "env"')
    invalid(r[5], '"stdin" must be a string')
    invalid(r[6], '"language" must be', "python")
    invalid(r[7], 'missing "source"')
    invalid(r[8], '"source" is 1048577 bytes long', "1048576")
    invalid(r[9], '"command" is 131072 bytes long')
    assert not r[10]["ok"] and r[10]["error"]["code"] == -32602, r[10]
    assert "no_such_tool" in r[10]["error"]["message"]
    assert ok(r[11])["stdout"] == "still serving\n"


def test_large_source_through_stdin(sdk_client, cordon):
    # Near the 1 MiB cap: more than a pipe holds, so the write goes on the loop.
    body = "x = 0\n" + "x += 1\n" * 140000 + "print(x)\n"
    assert 900_000 < len(body) < 1 << 20
    rep = sdk(sdk_client, cordon, [code("python", body), code("sh", "echo after")])
    assert ok(rep["results"][0])["stdout"] == "140000\n"
    assert ok(rep["results"][1])["stdout"] == "after\n"


# --- several calls, cancellation, the end of a session ------------------------


def test_concurrent_calls_are_all_answered(raw):
    r = raw()
    r.initialize()
    ids = list(range(10, 17))  # more than run at once: the rest queue
    for i in ids:
        r.send(tool_call(i, "run_command", command=f"sleep 0.5; echo call {i}"))
    got = {m["id"]: m for m in r.answers(len(ids))}
    assert sorted(got) == ids, got
    for i in ids:
        sc = got[i]["result"]["structuredContent"]
        assert sc["stdout"] == f"call {i}\n" and sc["exit_code"] == 0, sc
    assert len({got[i]["result"]["structuredContent"]["run_id"] for i in ids}) == len(ids)
    rc, extra, err = r.close()
    assert rc == 0 and extra == [], (rc, extra, err)


def test_cancel_kills_the_run(raw):
    mark = marker()
    r = raw()
    r.initialize()
    r.send(tool_call(5, "run_command", argv=["python3", "-c", "import time; time.sleep(1000)",
                                             mark]))
    r.send(tool_call(6, "run_code", language="sh", source="sleep 0.3; echo other"))
    assert wait_until(lambda: pids_with(mark), 15), "the call never started"
    r.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "test"}})
    assert wait_until(lambda: not pids_with(mark), 10), \
        f"the cancelled run goes on: {pids_with(mark)}"
    other = r.request(7, "ping")
    assert other["result"] == {}
    # The other call is answered; the cancelled one never is.
    rc, extra, err = r.close()
    assert rc == 0, err
    answered = [m.get("id") for m in r.seen]
    assert 6 in answered and 5 not in answered, r.seen
    # Its id is free again once cancelled.


def test_cancel_of_a_queued_call(raw):
    r = raw()
    r.initialize()
    for i in range(1, 5):
        r.send(tool_call(i, "run_command", command="sleep 1"))
    r.send(tool_call(9, "run_command", command="echo never"))
    r.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    got = r.answers(4)
    assert sorted(m["id"] for m in got) == [1, 2, 3, 4], got
    rc, extra, _ = r.close()
    assert rc == 0 and extra == [], extra


def test_sigterm_stops_running_calls(raw):
    mark = marker()
    r = raw()
    r.initialize()
    r.send(tool_call(1, "run_command", argv=["python3", "-c", "import time; time.sleep(1000)",
                                             mark]))
    assert wait_until(lambda: pids_with(mark), 15), "the call never started"
    t0 = time.monotonic()
    os.kill(r.p.pid, signal.SIGTERM)
    assert r.ended() == 0
    assert time.monotonic() - t0 < 15
    assert wait_until(lambda: not pids_with(mark), 10), pids_with(mark)


def test_queue_is_bounded_and_sigterm_refuses_what_waits(raw):
    mark = marker()
    r = raw()
    r.initialize()
    slow = ["python3", "-c", "import time; time.sleep(1000)", mark]
    for i in range(4):
        r.send(tool_call(i, "run_command", argv=slow))
    assert wait_until(lambda: len(pids_with(mark)) >= 4, 20), pids_with(mark)
    for i in range(100, 164):  # 64 wait their turn
        r.send(tool_call(i, "run_command", command="echo queued"))
    over = r.request(999, "tools/call", {"name": "run_command", "arguments": {"command": "true"}})
    assert over["error"]["code"] == -32000 and "waiting" in over["error"]["message"], over
    os.kill(r.p.pid, signal.SIGTERM)
    got = r.answers(68)
    queued = [m for m in got if m["id"] >= 100]
    assert len(queued) == 64 and all(m["error"]["code"] == -32000 for m in queued), queued
    stopped = [m["result"]["structuredContent"] for m in got if m["id"] < 4]
    assert len(stopped) == 4 and all(sc["reason"] != "exited" or sc["exit_code"] != 0
                                     for sc in stopped), stopped
    assert r.ended() == 0
    assert wait_until(lambda: not pids_with(mark), 10), pids_with(mark)


def test_a_client_that_goes_away_stops_the_runs(raw):
    mark = marker()
    r = raw()
    r.initialize()
    r.send(tool_call(1, "run_command", argv=["python3", "-c", "import time; time.sleep(1000)",
                                             mark]))
    assert wait_until(lambda: pids_with(mark), 15), "the call never started"
    r.p.stdout.close()  # the next answer has nowhere to go
    r.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert wait_until(lambda: not pids_with(mark), 15), pids_with(mark)
    assert r.ended() == 0


def test_requests_in_a_file_are_all_answered(raw, cordon):
    # stdin a regular file (no epoll for it); stdin's end is not the session's.
    reqs = cordon.hostdir() / "requests.jsonl"
    reqs.write_text("\n".join(json.dumps(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                    "clientInfo": {"name": "file", "version": "1"}}},
        tool_call(2, "run_code", language="python", source="print(2 ** 10)"),
        tool_call(3, "run_command", command="echo three"),
    ]))  # the last line has no newline
    with open(reqs, "rb") as f:
        r = raw(stdin=f)
        rc, extra, err = r.close()
    assert rc == 0, err
    got = {m["id"]: m for m in extra}
    assert got[1]["result"]["protocolVersion"] == "2024-11-05"
    assert got[2]["result"]["structuredContent"]["stdout"] == "1024\n"
    assert got[3]["result"]["structuredContent"]["stdout"] == "three\n"


# --- hostile input -------------------------------------------------------------


@pytest.mark.parametrize("asked,answered", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25"), (7, "2025-11-25"),
])
def test_protocol_version_negotiation(raw, asked, answered):
    r = raw()
    m = r.request(1, "initialize", {"protocolVersion": asked, "capabilities": {},
                                    "clientInfo": {"name": "v", "version": "1"}})
    assert m["result"]["protocolVersion"] == answered, m
    assert m["result"]["serverInfo"]["name"] == "cordon"
    r.close()


def test_hostile_input_gets_errors_and_the_server_goes_on(raw, cordon):
    pol = policy(cordon, "tools:\n  max_message_bytes: 4096\n")
    r = raw("-p", pol)
    r.initialize()

    def one(data):
        r.send(data)
        m = r.recv(30)
        assert m is not None, f"no answer to {data[:200]!r}"
        return m

    def error(m, code, rid=None):
        assert "error" in m and m["error"]["code"] == code, m
        assert m["id"] == rid, m
        return m["error"]["message"]

    error(one(b"this is not json"), -32700)
    error(one(b'{"jsonrpc":"2.0","id":1,"method":'), -32700)
    error(one(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]'), -32600)
    error(one(b"[]"), -32600)
    error(one(b'{"jsonrpc":"1.0","id":2,"method":"ping"}'), -32600, 2)
    error(one(b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}'), -32600)
    error(one(b'{"jsonrpc":"2.0","id":3,"method":7}'), -32600, 3)
    error(one(b'{"jsonrpc":"2.0","id":4,"method":"ping","method":"x"}'), -32700)
    error(one(b'{"jsonrpc":"2.0","id":5,"method":"resources/list"}'), -32601, 5)
    error(one(b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":[1]}'), -32602, 6)
    error(one(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}'), -32602, 7)
    msg = error(one(b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x"}}'),
                -32602, 8)
    assert '"x"' in msg
    bad = one(json.dumps(tool_call(9, "run_code", language="python", source=3)).encode())
    assert bad["id"] == 9 and bad["result"]["isError"] is True, bad
    assert '"source" must be a string' in bad["result"]["content"][0]["text"]
    bad = one(b'{"jsonrpc":"2.0","id":10,"method":"tools/call",'
              b'"params":{"name":"run_command","arguments":"echo hi"}}')
    assert "arguments must be an object" in bad["result"]["content"][0]["text"], bad
    # An oversized line is dropped unread; its id is still found and answered.
    big = json.dumps(tool_call(11, "run_code", language="sh", source="#" * 10000)).encode()
    msg = error(one(big), -32600, 11)
    assert "4096" in msg, msg
    error(one(b'{"jsonrpc":"2.0","method":"x","id":null}'), -32600)
    # A NUL would cut a C string short: the whole message is refused, by its id.
    nul = tool_call(13, "run_command", command="cat", stdin="a\u0000b")
    error(one(json.dumps(nul).encode()), -32600, 13)
    # Invalid, so answered (JSON-RPC's own example), though it has no id.
    error(one(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}'), -32600)
    # Notifications and responses get no answer; the next request is the next answer.
    r.send(b'{"jsonrpc":"2.0","method":"notifications/whatever"}')
    r.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}')
    r.send(b'{"jsonrpc":"2.0","id":77,"result":{}}')
    r.send(b"")
    assert r.request(12, "ping")["result"] == {}

    # A duplicate id while the first is in flight: refused, and the first still answered.
    r.send(tool_call(20, "run_command", command="sleep 1; echo first"))
    dup = one(json.dumps(tool_call(20, "run_command", command="echo second")).encode())
    error(dup, -32600, 20)
    first = r.recv(30)
    assert first["id"] == 20 and first["result"]["structuredContent"]["stdout"] == "first\n"
    # Once answered, the id may be used again.
    again = one(json.dumps(tool_call(20, "run_command", command="echo again")).encode())
    assert again["result"]["structuredContent"]["stdout"] == "again\n"
    # A string id is not the integer with the same digits.
    r.send(tool_call(21, "run_command", command="sleep 0.5; echo int"))
    r.send(tool_call("21", "run_command", command="echo str"))
    got = {json.dumps(m["id"]): m for m in r.answers(2)}
    assert got['"21"']["result"]["structuredContent"]["stdout"] == "str\n"
    assert got["21"]["result"]["structuredContent"]["stdout"] == "int\n"

    rc, extra, err = r.close()
    assert rc == 0 and extra == [], (extra, err)
    ids = [m.get("id") for m in r.seen if "id" in m and m["id"] is not None]
    # Every request answered exactly once, the deliberate duplicate aside.
    assert sorted(map(str, ids)) == sorted(map(str, [0, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20,
                                                     20, 20, 21, "21"])), ids


def test_a_json_scalar_is_an_invalid_request(raw):
    r = raw()
    r.send(b'"just a string"')
    m = r.recv(30)
    r.close()
    assert m["id"] is None and m["error"]["code"] == -32600, m


def test_max_calls_refuses_beyond_the_limit(raw, cordon):
    pol = policy(cordon, "tools:\n  max_calls: 2\n")
    r = raw("-p", pol)
    r.initialize()
    for i in (1, 2):
        m = r.request(i, "tools/call", {"name": "run_command", "arguments": {"command": "true"}})
        assert m["result"]["isError"] is False, m
    m = r.request(3, "tools/call", {"name": "run_command", "arguments": {"command": "true"}})
    assert m["error"]["code"] == -32000 and "limit of 2" in m["error"]["message"], m
    r.close()


# --- the record ------------------------------------------------------------------


def digest(args):
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def read_log(path):
    return [json.loads(l) for l in pathlib.Path(path).read_text().splitlines()]


@pytest.mark.parametrize("record", [False, True], ids=["digest-only", "record-arguments"])
def test_audit_records_each_call(sdk_client, cordon, record):
    d = cordon.hostdir("audit")
    log = d / "audit.jsonl"
    opts = ["--audit", log]
    if record:
        opts += ["-p", policy(cordon, "tools:\n  record_arguments: true\n")]
    good = {"language": "python", "source": "print('audited')"}
    bad = {"argv": "not a list"}
    rep = sdk(sdk_client, cordon, [call("run_code", **good), call("run_command", **bad),
                                   sh("exit 3")], *opts)
    run = ok(rep["results"][0])
    invalid(rep["results"][1])
    assert ran(rep["results"][2])["exit_code"] == 3

    v = subprocess.run(cordon.argv("audit", "verify", log), capture_output=True,
                       env=cordon.ident.env(), timeout=30)
    assert v.returncode == 0, v.stdout + v.stderr

    events = read_log(log)
    calls = [e for e in events if e["type"] == "mcp.call"]
    assert len(calls) == 3, calls
    first, second, third = calls
    assert first["tool"] == "run_code" and first["decision"] == "allowed", first
    assert first["run"] == run["run_id"] and first["exit_code"] == 0, first
    assert first["reason"] == "exited" and first["is_error"] is False, first
    assert isinstance(first["duration_ms"], int), first
    assert first["arguments_digest"] == digest(good), first
    assert second["decision"] == "refused" and second["rule"] == "arguments", second
    assert second["run"] is None and "argv" in second["reason"], second
    assert second["arguments_digest"] == digest(bad), second
    assert third["exit_code"] == 3 and third["is_error"] is True, third
    for e in calls:
        assert ("arguments" in e) is record, e
    if record:
        assert first["arguments"] == good and second["arguments"] == bad
    # cordon_run's own record of the same run, under the same id.
    starts = {e["run"]: e for e in events if e["type"] == "run.start"}
    ends = {e["run"]: e for e in events if e["type"] == "run.end"}
    assert run["run_id"] in starts and run["run_id"] in ends, events
    assert starts[run["run_id"]]["argv"] == ["python3", "-"]  # the source is not in argv
    assert len(starts) == 2  # the invalid call ran nothing
