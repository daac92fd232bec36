"""
`cordon mcp wrap`: real MCP servers (the reference filesystem and everything
servers from npm, and a hostile one) in real sandboxes, driven by the
official TypeScript SDK client (tests/mcp/client.mjs), the inspector's CLI,
and raw pipes where a client must misbehave.

What a refused call never reached is proved with tests/mcp/tee_server.py,
which logs every line the server is sent to the workspace before passing it
on.
"""

import json
import os
import subprocess
import time

import pytest

from conftest import HOST_TOKEN, REPO, marker, pids_with, wait_until
from mcp_util import MCP, NODE, RawClient, policy, require_npm_packages, sdk
INSIDE = "/opt/mcp"
FS_SERVER = [NODE, f"{INSIDE}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
             "/workspace"]
EVERYTHING = [NODE, f"{INSIDE}/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
              "stdio"]
TEE = ["/usr/bin/python3", f"{INSIDE}/tee_server.py", "--log", "/workspace/.tee.log", "--"]


def hostile(mode, *args):
    return ["/usr/bin/python3", f"{INSIDE}/hostile_server.py", mode, *args]


@pytest.fixture(scope="module", autouse=True)
def npm_packages():
    require_npm_packages()


def wrap_argv(cordon, pol, server, *opts):
    return cordon.argv("mcp", "wrap", "-p", pol, "--ro", f"{MCP}:{INSIDE}", *opts, "--",
                       *server)


def tool_names(step):
    assert step["ok"], step
    return sorted(t["name"] for t in step["value"]["tools"])


def text_of(step):
    assert step["ok"], step
    return "".join(c.get("text", "") for c in step["value"]["content"])


def refused(step, *words):
    """A call answered by the broker: an isError result or a JSON-RPC error."""
    if step["ok"]:
        assert step["value"].get("isError") is True, step
        msg = text_of(step)
    else:
        msg = step["error"]["message"]
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def tee_calls(ws):
    """The tools/call requests the server was sent, from the tee log."""
    log = ws / ".tee.log"
    if not log.exists():
        return []
    calls = []
    for line in log.read_text().splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if isinstance(m, dict) and m.get("method") == "tools/call":
            calls.append(m["params"])
    return calls


def raw(cordon, argv):
    return RawClient(argv, cordon.ident.env())


FS_POLICY = """\
tools:
  allow: [read_text_file, list_directory, search_files, write_file]
  rules:
    read_text_file:
      path: { under: [/workspace], deny: ["**/.env", "**/.git/**"] }
    list_directory:
      path: { under: [/workspace] }
    write_file:
      path: { under: [/workspace/out] }
    search_files:
      pattern: { max_length: 20 }
"""


@pytest.fixture
def fs_ws(cordon):
    ws = cordon.hostdir("ws")
    (ws / "hello.txt").write_text("hello from the workspace\n")
    (ws / ".env").write_text("API_KEY=do-not-read\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "out").mkdir()
    for f in ws.rglob("*"):
        os.chown(f, cordon.ident.uid, cordon.ident.gid)
    return ws


def fs_wrap(cordon, ws, text=FS_POLICY, *opts):
    return wrap_argv(cordon, policy(cordon, text), TEE + FS_SERVER, "-w", ws, *opts)


# --- the tool list -----------------------------------------------------------


def test_tool_list_is_filtered_to_the_allowlist(cordon, fs_ws):
    rep = sdk(cordon, fs_wrap(cordon, fs_ws), [{"op": "listTools"}])
    assert tool_names(rep["results"][0]) == ["list_directory", "read_text_file", "search_files",
                                             "write_file"]
    # What the server offers beyond that is neither listed nor advertised.
    caps = rep["server"]["capabilities"]
    assert set(caps) <= {"tools", "logging"}, caps


def test_inspector_cli_sees_the_filtered_list(cordon, fs_ws):
    argv = fs_wrap(cordon, fs_ws)
    inspector = MCP / "node_modules" / ".bin" / "mcp-inspector"
    # Its own options first: everything after the command's "--" belongs to cordon.
    p = subprocess.run([str(inspector), "--cli", "--method", "tools/list", *argv],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cordon.tmp,
                       env={**cordon.ident.env(), "HOME": str(cordon.tmp)}, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    names = sorted(t["name"] for t in json.loads(p.stdout)["tools"])
    assert names == ["list_directory", "read_text_file", "search_files", "write_file"]


def test_pagination_and_list_changed_are_filtered(cordon):
    ws = cordon.hostdir("ws")
    pol = policy(cordon, "tools:\n  allow: [echo, change]\n")
    argv = wrap_argv(cordon, pol, TEE + hostile("tools_lie"), "-w", ws)
    rep = sdk(cordon, argv, [
        {"op": "listTools"},
        {"op": "callTool", "name": "change", "arguments": {}},
        {"op": "wait", "notification": "notifications/tools/list_changed", "timeout_ms": 10000},
        {"op": "listTools"},
        {"op": "callTool", "name": "exec_shell", "arguments": {"cmd": "id"}},
        {"op": "callTool", "name": "exfiltrate", "arguments": {"path": "/"}},
        {"op": "callTool", "name": "hidden", "arguments": {}},
    ])
    first, _, _, second, *calls = rep["results"]
    assert tool_names(first) == ["change", "echo"]
    assert first["value"]["pages"] == 3
    assert tool_names(second) == ["change", "echo"]
    for step in calls:
        refused(step, "Unknown tool")
    assert [c["name"] for c in tee_calls(ws)] == ["change"]


# --- calls that pass ---------------------------------------------------------


def test_allowed_calls_return_the_servers_real_results(cordon, fs_ws):
    rep = sdk(cordon, fs_wrap(cordon, fs_ws), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
        {"op": "callTool", "name": "list_directory", "arguments": {"path": "/workspace"}},
        {"op": "callTool", "name": "write_file",
         "arguments": {"path": "/workspace/out/new.txt", "content": "written through cordon"}},
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "hello.txt"}},
    ])
    read, listing, write, relative = rep["results"]
    assert text_of(read) == "hello from the workspace\n"
    assert "hello.txt" in text_of(listing) and "out" in text_of(listing)
    assert not write["value"].get("isError"), write
    assert (fs_ws / "out" / "new.txt").read_text() == "written through cordon"
    assert text_of(relative) == "hello from the workspace\n"
    assert len(tee_calls(fs_ws)) == 4


# --- refusals: each class, and the server never sees it ------------------------


REFUSALS = [
    ("not-allowed", "edit_file", {"path": "/workspace/hello.txt", "edits": []}, ["Unknown tool"]),
    ("not-allowed-move", "move_file", {"source": "/workspace/hello.txt",
                                       "destination": "/workspace/x"}, ["Unknown tool"]),
    ("schema-type", "read_text_file", {"path": "/workspace/hello.txt", "head": "ten"},
     ["arguments.head"]),
    ("schema-required", "read_text_file", {}, ["path"]),
    ("schema-extra", "read_text_file", {"path": "/workspace/hello.txt", "mode": "x"},
     ["mode"]),
    ("rule-max-length", "search_files", {"path": "/workspace", "pattern": "a" * 21},
     ["arguments.pattern", "longer than 20"]),
    ("deny-env", "read_text_file", {"path": "/workspace/.env"}, ["**/.env"]),
    ("deny-git", "read_text_file", {"path": "/workspace/.git/config"}, [".git"]),
    ("write-outside", "write_file", {"path": "/workspace/hello.txt", "content": "x"},
     ["outside /workspace/out"]),
]


@pytest.mark.parametrize("tool,args,words", [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_refused_calls_never_reach_the_server(cordon, fs_ws, tool, args, words):
    before = (fs_ws / "hello.txt").read_text()
    rep = sdk(cordon, fs_wrap(cordon, fs_ws), [
        {"op": "callTool", "name": tool, "arguments": args},
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
    ])
    refused(rep["results"][0], *words)
    # The session goes on, and only the good call reached the server.
    assert text_of(rep["results"][1]) == before
    assert [c["name"] for c in tee_calls(fs_ws)] == ["read_text_file"]
    assert tee_calls(fs_ws)[0]["arguments"] == {"path": "/workspace/hello.txt"}
    assert (fs_ws / "hello.txt").read_text() == before


ESCAPES = [
    "../../etc/passwd",
    "/etc/passwd",
    "/workspace/../etc/passwd",
    "/workspace/./../../etc/shadow",
    "//etc//passwd",
    "%2e%2e/%2e%2e/etc/passwd",
    "/workspace/%2e%2e/etc/passwd",
    "/workspace/%252e%252e/etc/passwd",
    "file:///etc/passwd",
    "\uff0fetc\uff0fpasswd",
    "/workspace/\uff0e\uff0e/etc/passwd",
    "..\\..\\etc\\passwd",
    "~/../../etc/passwd",
    "/workspace/hello.txt\u0000/etc/passwd",
    "/workspace/\n/etc/passwd",
    "/workspace2/x",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_path_escapes_fail_at_the_broker(cordon, fs_ws, path):
    rep = sdk(cordon, fs_wrap(cordon, fs_ws), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": path}},
    ])
    msg = refused(rep["results"][0])
    assert "arguments.path" in msg or "NUL character" in msg, msg
    assert "root:" not in msg
    assert tee_calls(fs_ws) == []


def test_symlink_out_of_the_workspace_fails_at_the_sandbox(cordon, fs_ws, host_secret):
    """The broker sees /workspace/link (allowed); the sandbox has no such target."""
    secret_file, value = host_secret
    os.symlink(secret_file, fs_ws / "link")
    os.symlink("/etc/shadow", fs_ws / "shadow")
    os.lchown(fs_ws / "link", cordon.ident.uid, cordon.ident.gid)
    rep = sdk(cordon, fs_wrap(cordon, fs_ws), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/link"}},
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/shadow"}},
    ])
    assert len(tee_calls(fs_ws)) == 2  # the broker let them through: the sandbox stops them
    for step in rep["results"]:
        out = json.dumps(step)
        assert value not in out
        assert "root:" not in out
        assert (not step["ok"]) or step["value"].get("isError") is True, step


# --- limits of a session -------------------------------------------------------


def test_max_calls_per_session(cordon, fs_ws):
    text = FS_POLICY + "  max_calls: 2\n"
    call = {"op": "callTool", "name": "read_text_file",
            "arguments": {"path": "/workspace/hello.txt"}}
    rep = sdk(cordon, fs_wrap(cordon, fs_ws, text), [call, call, call])
    assert text_of(rep["results"][0]) == text_of(rep["results"][1])
    refused(rep["results"][2], "limit of 2 tool calls")
    assert len(tee_calls(fs_ws)) == 2


def test_oversized_result_is_replaced_by_an_error(cordon, fs_ws):
    (fs_ws / "big.txt").write_text("x" * 300_000)
    text = FS_POLICY + "  max_result_bytes: 100K\n"
    rep = sdk(cordon, fs_wrap(cordon, fs_ws, text), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/big.txt"}},
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
    ])
    msg = refused(rep["results"][0], "exceeds max_result_bytes")
    assert "xxxx" not in msg
    assert text_of(rep["results"][1]) == "hello from the workspace\n"


def test_hung_server_call_times_out_and_the_session_goes_on(cordon):
    pol = policy(cordon, "tools:\n  allow: ['*']\n  call_timeout: 1s\n")
    argv = wrap_argv(cordon, pol, hostile("hang"))
    rep = sdk(cordon, argv, [
        {"op": "callTool", "name": "wait", "arguments": {}},
        {"op": "listTools"},
    ])
    step = rep["results"][0]
    assert not step["ok"] and "did not answer" in step["error"]["message"], step
    assert rep["results"][1]["ok"]


# --- resources, prompts, server-to-client requests ----------------------------


def test_resources_and_prompts_hidden_unless_allowed(cordon):
    steps = [{"op": "listResources"}, {"op": "listPrompts"},
             {"op": "request", "method": "resources/read",
              "params": {"uri": "demo://resource/static/document/architecture.md"}}]
    hidden = sdk(cordon, wrap_argv(cordon, policy(cordon, "tools:\n  allow: [echo]\n"),
                                   EVERYTHING), steps)
    assert "resources" not in hidden["server"]["capabilities"]
    assert "prompts" not in hidden["server"]["capabilities"]
    for step in hidden["results"]:
        assert not step["ok"] and step["error"]["code"] == -32601, step
    shown = sdk(cordon, wrap_argv(cordon, policy(
        cordon, "tools:\n  allow: [echo]\n  resources: true\n  prompts: true\n"), EVERYTHING),
        steps[:2])
    assert all(s["ok"] for s in shown["results"]), shown["results"]
    assert shown["results"][0]["value"]["resources"]
    assert shown["results"][1]["value"]["prompts"]


def test_everything_server_echo_through_the_broker(cordon):
    rep = sdk(cordon, wrap_argv(cordon, policy(cordon, "tools:\n  allow: [echo]\n"),
                                EVERYTHING), [
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": {"message": "through cordon"}},
        {"op": "callTool", "name": "echo", "arguments": {"message": 42}},
    ])
    assert tool_names(rep["results"][0]) == ["echo"]
    assert "through cordon" in text_of(rep["results"][1])
    refused(rep["results"][2], "arguments.message")


HANDLERS = {"sampling": {"role": "assistant", "content": {"type": "text", "text": "canned"},
                         "model": "test"},
            "roots": [{"uri": "file:///home/user/project", "name": "project"}],
            "elicitation": {"action": "decline"}}


def test_server_requests_refused_by_default(cordon):
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [report]\n"),
                     hostile("server_requests"))
    rep = sdk(cordon, argv, [{"op": "sleep", "ms": 1000},
                             {"op": "callTool", "name": "report", "arguments": {}}],
              handlers=HANDLERS)
    assert rep["server_requests"] == []
    report = json.loads(text_of(rep["results"][1]))
    # The server was not told the client can sample, elicit or list roots,
    # and each of its requests was refused by the broker.
    assert not set(report["client_capabilities"]) & {"sampling", "roots", "elicitation"}, report
    answers = {r["method"]: r["answer"] for r in report["requests"]}
    assert set(answers) == {"roots/list", "sampling/createMessage", "elicitation/create"}
    for method, answer in answers.items():
        assert answer and answer["error"]["code"] == -32601, (method, answer)
    assert "/home/user/project" not in json.dumps(report)


def test_server_requests_forwarded_when_allowed(cordon):
    pol = "tools:\n  allow: [report]\n  sampling: true\n  roots: true\n"
    argv = wrap_argv(cordon, policy(cordon, pol), hostile("server_requests"))
    rep = sdk(cordon, argv, [{"op": "sleep", "ms": 1000},
                             {"op": "callTool", "name": "report", "arguments": {}}],
              handlers=HANDLERS)
    methods = sorted(r["method"] for r in rep["server_requests"])
    assert methods == ["roots/list", "sampling/createMessage"], methods
    report = json.loads(text_of(rep["results"][1]))
    assert set(report["client_capabilities"]) >= {"sampling", "roots"}
    assert "elicitation" not in report["client_capabilities"]
    answers = {r["method"]: r["answer"] for r in report["requests"]}
    assert "canned" in json.dumps(answers["sampling/createMessage"])
    assert "/home/user/project" in json.dumps(answers["roots/list"])
    assert answers["elicitation/create"]["error"]["code"] == -32601


# --- hostile servers -----------------------------------------------------------


def test_garbage_from_the_server_harms_nothing(cordon):
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [echo, spew]\n"),
                     hostile("garbage", "12"))
    rep = sdk(cordon, argv, [
        {"op": "wait", "notification": "notifications/message", "timeout_ms": 20000},
        {"op": "callTool", "name": "spew", "arguments": {}},
        {"op": "callTool", "name": "echo", "arguments": {"text": "still here"}},
    ], timeout_ms=60000)
    assert "spewed" in text_of(rep["results"][1])
    assert "still here" in text_of(rep["results"][2])
    data = [n.get("params", {}).get("data") for n in rep["notifications"]]
    assert "after-garbage" in data
    # Neither the batch nor the 12 MB line got through.
    assert "batch-1" not in data
    assert not any(isinstance(d, str) and d.startswith("huge:") for d in data)


def test_lying_ids_are_dropped(cordon):
    pol = policy(cordon, "tools:\n  allow: ['*']\n  call_timeout: 3s\n")
    rep = sdk(cordon, wrap_argv(cordon, pol, hostile("lying_ids")), [
        {"op": "callTool", "name": "lie", "arguments": {}},
        {"op": "callTool", "name": "wrong_only", "arguments": {}},
        {"op": "callTool", "name": "lie", "arguments": {}},
    ])
    assert text_of(rep["results"][0]) == "real"
    assert not rep["results"][1]["ok"]
    assert "did not answer" in rep["results"][1]["error"]["message"]
    assert text_of(rep["results"][2]) == "real"


def test_server_json_with_a_key_twice_is_dropped(cordon):
    """Two results, or two ids, in one answer: ambiguous, so never forwarded (a
    reader keeping the last key would see a success, one keeping the first an
    error); recorded as a protocol violation, and the session goes on."""
    log = cordon.hostdir("log", mode=0o777) / "audit.jsonl"
    pol = policy(cordon, f"tools:\n  allow: ['*']\n  call_timeout: 3s\naudit:\n  file: {log}\n")
    rep = sdk(cordon, wrap_argv(cordon, pol, hostile("dup_keys")), [
        {"op": "callTool", "name": "dup", "arguments": {}},
        {"op": "callTool", "name": "dup_id", "arguments": {}},
        {"op": "callTool", "name": "echo", "arguments": {"text": "still here"}},
    ])
    for step in rep["results"][:2]:
        assert not step["ok"] and "did not answer" in step["error"]["message"], step
    assert text_of(rep["results"][2]) == "still here"
    seen = json.dumps(rep)
    assert "second-result" not in seen and "first-result" not in seen
    assert "dup-id-result" not in seen
    problems = [e["problem"] for e in map(json.loads, log.read_text().splitlines())
                if e["type"] == "mcp.protocol" and e["from"] == "server"]
    assert len([p for p in problems if "duplicate object key" in p]) == 2, problems


def test_flooding_server_is_throttled_and_the_session_ends_cleanly(cordon):
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [echo]\n"), hostile("flood"))
    r = raw(cordon, argv)
    r.initialize()
    time.sleep(1.0)  # we do not read: the broker must not buffer without bound
    rss = broker_rss(r.p.pid)
    assert rss < 200 << 20, f"broker RSS {rss} bytes while the client does not read"
    r.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert r.answer(7, timeout=60) is not None
    rc, _, err = r.close()
    assert rc == 0, err


def test_endless_tool_pages_are_not_remembered_without_bound(cordon):
    """With allow: ["*"], the broker keeps at most 10000 tools; the rest are left out of lists."""
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: ['*']\n"),
                     hostile("tools_lie", "endless"))
    r = raw(cordon, argv)
    r.initialize()
    sizes = []
    for page in range(3):
        params = {"cursor": f"bulk-{page}"} if page else {}
        m = r.request(10 + page, "tools/list", params)
        sizes.append(len(m["result"]["tools"]))
    assert sizes == [5000, 5000, 0], sizes
    m = r.request(20, "tools/call", {"name": "bulk_1_7", "arguments": {}})
    assert m["result"]["content"][0]["text"].startswith("called bulk_1_7"), m
    rc, _, err = r.close()
    assert rc == 0, err


def test_server_that_outstays_the_client_is_stopped_without_a_trace(cordon):
    """A server that ignores SIGTERM and its stdin's end is still gone soon after."""
    mark = marker()
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [wait]\n"),
                     hostile("hang", "stubborn", mark))
    r = raw(cordon, argv)
    r.initialize()
    r.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "wait", "arguments": {}}})
    assert wait_until(lambda: pids_with(mark), 10)
    t0 = time.monotonic()
    rc, _, err = r.close(timeout=30)
    assert rc == 0, err
    # The broker's grace (5 s) and the supervisor's (2 s), then a kill.
    assert time.monotonic() - t0 < 20
    assert wait_until(lambda: not pids_with(mark), 5), pids_with(mark)


def test_answer_written_just_before_the_server_exits_is_delivered(cordon):
    """The server's exit does not overtake what it wrote first (here held back by a slow client)."""
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [bye]\n"), hostile("quit"))
    r = raw(cordon, argv)
    r.initialize()
    r.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bye", "arguments": {"log_bytes": 1500000}}})
    time.sleep(3)  # not reading: the log line fills the broker's queue, the server exits
    m = r.answer(1)
    assert m is not None and "result" in m, m
    assert m["result"]["content"][0]["text"] == "bye", m
    rc, _, err = r.close()
    assert rc == 0, err


def test_server_that_stops_reading_cannot_keep_the_broker_after_the_client(cordon):
    """With reading from the client paused for a server that reads nothing, the client's end is still seen."""
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [deaf]\n"), hostile("quit"))
    r = raw(cordon, argv)
    r.initialize()
    r.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "deaf", "arguments": {}}})
    time.sleep(1)
    r.send({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "z" * (3 << 20)}})
    r.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    t0 = time.monotonic()
    rc, _, err = r.close(timeout=30)
    assert rc == 0, err
    assert time.monotonic() - t0 < 20
    assert {m.get("id") for m in r.seen} >= {1, 2, 3}, r.seen


def test_long_non_ascii_names_are_still_answered(cordon):
    """A refusal quoting a name cut mid-character is still valid UTF-8, so it is sent."""
    log = cordon.hostdir("audit") / "audit.jsonl"
    pol = policy(cordon, f"tools:\n  allow: [echo]\naudit:\n  file: {log}\n")
    r = raw(cordon, wrap_argv(cordon, pol, hostile("tools_lie")))
    r.initialize()
    m = r.request(1, "\u00e9" * 300)
    assert m["error"]["code"] == -32601, m
    m = r.request(2, "tools/call", {"name": "\u00e9" * 125, "arguments": {}})
    assert m["error"]["code"] == -32602, m
    rc, _, err = r.close()
    assert rc == 0, err
    # The audit record keeps its (cut) reason too.
    calls = [json.loads(l) for l in log.read_text().splitlines() if '"mcp.call"' in l]
    assert calls and calls[0]["reason"].startswith("Unknown tool: \u00e9"), calls


def test_oversized_values_do_not_make_audit_events_vanish(cordon):
    """The log refuses an event over 1 MiB: large arguments and server info are left out, not the event."""
    log = cordon.hostdir("audit") / "audit.jsonl"
    pol = policy(cordon, f"tools:\n  allow: [echo]\n  record_arguments: true\naudit:\n  file: {log}\n")
    r = raw(cordon, wrap_argv(cordon, pol, hostile("tools_lie", "big-info")))
    r.initialize()
    m = r.request(1, "tools/call", {"name": "echo", "arguments": {"text": "a" * 1500000}})
    assert "result" in m, str(m)[:300]
    rc, _, err = r.close()
    assert rc == 0, err
    events = [json.loads(l) for l in log.read_text().splitlines()]
    calls = [e for e in events if e["type"] == "mcp.call"]
    assert len(calls) == 1 and calls[0]["arguments_bytes"] > 1500000, str(calls)[:300]
    assert "arguments" not in calls[0]
    sessions = [e for e in events if e["type"] == "mcp.session"]
    assert len(sessions) == 1 and sessions[0]["server"] == "(too large to record)"


def broker_rss(pid):
    """The cordon process's RSS (the one setpriv became, or itself)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_server_cannot_read_host_files_or_env(cordon, host_secret):
    secret_file, value = host_secret
    pol = policy(cordon, "tools:\n  allow: [read]\n")
    rep = sdk(cordon, wrap_argv(cordon, pol, hostile("exfil")), [
        {"op": "callTool", "name": "read", "arguments": {
            "paths": [str(secret_file), "/etc/shadow", "/root", str(REPO), "/proc/1/environ"]}},
    ])
    out = text_of(rep["results"][0])
    assert value not in out
    assert HOST_TOKEN not in out
    seen = json.loads(out)
    assert not seen["paths"][str(secret_file)]["exists"]
    assert not seen["paths"][str(REPO)]["exists"]
    assert "content" not in seen["paths"]["/etc/shadow"]
    assert "CORDON_TEST_TOKEN" not in seen["env"]


def test_secrets_are_placeholders_inside(cordon):
    pol = policy(cordon, "tools:\n  allow: [read]\n")
    value = "real-secret-value-" + os.urandom(6).hex()
    rep = sdk(cordon, wrap_argv(cordon, pol, hostile("exfil"), "--secret",
                                "API_TOKEN=env:MY_TOKEN@api.example.com"),
              [{"op": "callTool", "name": "read", "arguments": {"paths": ["/workspace"]}}],
              env={"MY_TOKEN": value})
    out = text_of(rep["results"][0])
    env = json.loads(out)["env"]
    assert "API_TOKEN" in env and env["API_TOKEN"] != value
    assert value not in out and value not in json.dumps(rep)


# --- hostile clients (raw pipes) -------------------------------------------------


def test_hostile_client_messages_get_protocol_errors(cordon, fs_ws):
    # One cap for both directions: above the server's tool list (about 15K).
    text = FS_POLICY + "  max_message_bytes: 64K\n"
    r = raw(cordon, fs_wrap(cordon, fs_ws, text))
    r.initialize()
    r.send(b"this is not json")
    m = r.recv()
    assert m["id"] is None and m["error"]["code"] == -32700, m
    r.send(b"[" + json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode() + b"]")
    m = r.recv()
    assert m["id"] is None and m["error"]["code"] == -32600 and "batch" in m["error"]["message"]
    r.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping",
                       "params": {"pad": "p" * 100_000}}).encode())
    m = r.recv()
    assert m["error"]["code"] == -32600 and "65536" in m["error"]["message"], m
    r.send(b'{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}')
    m = r.recv()
    assert m["error"]["code"] == -32700, m
    m = r.request(9, "no/such/method")
    assert m["error"]["code"] == -32601, m
    m = r.request(10, "resources/list")
    assert m["error"]["code"] == -32601, m
    # A response to a request the server never made is dropped; the session goes on.
    r.send({"jsonrpc": "2.0", "id": 4242, "result": {}})
    m = r.request(11, "tools/call", {"name": "read_text_file",
                                     "arguments": {"path": "/workspace/hello.txt"}})
    assert "result" in m, m
    assert m["result"]["content"][0]["text"] == "hello from the workspace\n", m
    # Two requests with the same id in flight: the second is refused.
    r.send({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
            "params": {"name": "search_files", "arguments": {"path": "/workspace",
                                                             "pattern": "*.txt"}}})
    r.send({"jsonrpc": "2.0", "id": "dup", "method": "ping"})
    got = [r.recv(), r.recv()]
    assert any("error" in g and "already in use" in g["error"]["message"] for g in got), got
    assert any("result" in g for g in got), got
    rc, _, err = r.close()
    assert rc == 0, err
    assert [c["name"] for c in tee_calls(fs_ws)] == ["read_text_file", "search_files"]


# --- audit -----------------------------------------------------------------------


def test_every_call_is_audited_with_digests(cordon, fs_ws):
    log = cordon.hostdir("audit") / "audit.jsonl"
    text = FS_POLICY + f"audit:\n  file: {log}\n"
    sdk(cordon, fs_wrap(cordon, fs_ws, text), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/.env"}},
        {"op": "callTool", "name": "edit_file", "arguments": {"path": "/workspace/hello.txt"}},
    ])
    events = [json.loads(l) for l in log.read_text().splitlines()]
    calls = [e for e in events if e["type"] == "mcp.call"]
    assert [(c["tool"], c["decision"]) for c in calls] == [
        ("read_text_file", "allowed"), ("read_text_file", "refused"), ("edit_file", "refused")]
    assert calls[1]["rule"] == "rule:path" and calls[2]["rule"] == "not_allowed"
    assert all(len(c["arguments_digest"]) == 64 and "arguments" not in c for c in calls)
    assert calls[0]["result_bytes"] > 0 and "duration_ms" in calls[0]
    runs = {e["run"] for e in events if e["type"] in ("run.start", "mcp.call", "run.end")}
    assert len(runs) == 1, "the broker's events and the sandbox run share one run id"
    assert any(e["type"] == "mcp.session.end" for e in events)
    v = subprocess.run(cordon.argv("audit", "verify", log), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=cordon.ident.env())
    assert v.returncode == 0, v.stdout + v.stderr


def test_recorded_arguments_when_the_policy_says_so(cordon, fs_ws):
    log = cordon.hostdir("audit") / "audit.jsonl"
    text = FS_POLICY + f"  record_arguments: true\naudit:\n  file: {log}\n"
    sdk(cordon, fs_wrap(cordon, fs_ws, text), [
        {"op": "callTool", "name": "read_text_file", "arguments": {"path": "/workspace/hello.txt"}},
    ])
    calls = [json.loads(l) for l in log.read_text().splitlines() if '"mcp.call"' in l]
    assert calls[0]["arguments"] == {"path": "/workspace/hello.txt"}


# --- bad invocations ---------------------------------------------------------------


@pytest.mark.parametrize("args,words", [
    (["mcp"], ["missing subcommand"]),
    (["mcp", "bogus"], ["unknown subcommand 'bogus'"]),
    (["mcp", "wrap"], ["missing server command"]),
    (["mcp", "wrap", "--bogus", "--", "x"], ["unknown option '--bogus'"]),
    (["mcp", "wrap", "--allow-tool", "a b", "--", "x"], ["--allow-tool", "not a tool name"]),
    (["run", "--allow-tool", "x", "--", "true"], ["unknown option"]),
    (["mcp", "wrap", "--result", "/tmp/r.json", "--", "x"], ["--result is for cordon run"]),
    (["mcp", "serve", "--result", "/tmp/r.json"], ["--result is for cordon run"]),
    (["mcp", "serve", "extra"], ["unexpected argument 'extra'"]),
], ids=["no-sub", "bad-sub", "no-command", "bad-option", "bad-tool-name", "run-has-no-tools",
        "wrap-result", "serve-result", "serve-extra"])
def test_bad_invocations_are_refused(cordon, args, words):
    r = cordon.raw(*args)
    assert r.status == 125, r
    assert len(r.err.strip().splitlines()) == 1, r.err
    for w in words:
        assert w in r.err


def test_missing_server_binary_ends_the_session_with_127(cordon):
    argv = wrap_argv(cordon, policy(cordon, "tools:\n  allow: [x]\n"), ["/no/such/server"])
    p = subprocess.run(argv, input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cordon.ident.env(),
                       timeout=60)
    assert p.returncode == 127, p
    out = [json.loads(l) for l in p.stdout.splitlines()]
    assert out and out[0]["id"] == 1 and "error" in out[0], out


def test_no_allowlist_means_no_tools(cordon):
    """Without tools.allow nothing is forwarded, and cordon says so on stderr."""
    ws = cordon.hostdir("ws")
    argv = wrap_argv(cordon, policy(cordon, "limits:\n  wall: 5m\n"), TEE + hostile("tools_lie"),
                     "-w", ws)
    rep = sdk(cordon, argv, [{"op": "listTools"},
                             {"op": "callTool", "name": "echo", "arguments": {"text": "x"}}])
    assert tool_names(rep["results"][0]) == []
    refused(rep["results"][1], "Unknown tool")
    assert tee_calls(ws) == []
    assert "tools.allow is empty" in rep["stderr"]


NO_LIST_SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "no-list", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
    elif "id" in m:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                          "error": {"code": -32603, "message": "no"}}), flush=True)
"""


def test_a_call_the_broker_cannot_check_is_refused_and_recorded(cordon):
    """No tool list, no schema: the call fails, never reaches the server, and is audited."""
    log = cordon.hostdir("audit") / "audit.jsonl"
    pol = policy(cordon, f"tools:\n  allow: ['*']\naudit:\n  file: {log}\n")
    r = raw(cordon, wrap_argv(cordon, pol, ["/usr/bin/python3", "-c", NO_LIST_SERVER]))
    r.initialize()
    m = r.request(1, "tools/call", {"name": "anything", "arguments": {"x": 1}})
    assert m["error"]["code"] == -32603 and "list its tools" in m["error"]["message"], m
    rc, _, err = r.close()
    assert rc == 0, err
    calls = [json.loads(l) for l in log.read_text().splitlines() if '"mcp.call"' in l]
    assert [(c["tool"], c["decision"], c["rule"]) for c in calls] == [
        ("anything", "refused", "no_tool_list")], calls
