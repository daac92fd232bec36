// The process API and live sessions against a real daemon: CORDON_SOCKET names its
// socket, CORDON_LEVEL its level, CORDON_ROOT=1 when it runs as root
// (tests/integration/test_clients_live.py starts one and runs this file).
import assert from "node:assert/strict";
import net from "node:net";
import { after, test } from "node:test";
import { Client, RpcError } from "../index.js";

const path = process.env.CORDON_SOCKET;
const level = process.env.CORDON_LEVEL ?? "namespace";
const root = process.env.CORDON_ROOT === "1";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every connection is closed at the end, a failed test's too: an open one keeps node running.
const open = [];
async function connect() {
  const c = await Client.connect(path);
  open.push(c);
  return c;
}
after(() => {
  for (const c of open) c.close();
});

// Read P's output until TEXT appears; what was read.
async function until(p, text, ms = 60_000) {
  let seen = "";
  const deadline = Date.now() + ms;
  while (!seen.includes(text)) {
    assert.ok(Date.now() < deadline, `no ${JSON.stringify(text)} in ${JSON.stringify(seen.slice(-2000))}`);
    const got = await p.read();
    assert.ok(got !== null, `ended before ${JSON.stringify(text)}: ${JSON.stringify(seen.slice(-2000))}`);
    seen += got.toString();
  }
  return seen;
}

async function eventually(check, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, "not in time");
    await sleep(100);
  }
}

async function refused(promise, code, text) {
  await assert.rejects(promise, (e) => e instanceof RpcError && e.code === code && e.rpcMessage.includes(text));
}

test("a terminal: a REPL, stty after a resize", async () => {
  const c = await connect();
  const repl = await c.spawn(["python3", "-q", "-i"], { pty: true });
  assert.equal(repl.pty, true);
  await repl.write("2+2\n");
  await until(repl, "\n4\r\n>>> ");
  await repl.closeStdin();
  assert.equal((await repl.wait()).exitCode, 0);
  for await (const _ of repl); // what it said last (a new line), then the end
  assert.equal(await repl.read(), null);
  const sh = await c.spawn(["sh"], { pty: { cols: 100, rows: 30 } });
  await sh.write("stty size\n");
  await until(sh, "30 100");
  await sh.resize(132, 50);
  await sh.write("stty size\n");
  await until(sh, "50 132");
  await sh.write("exit 3\n");
  assert.equal((await sh.wait()).exitCode, 3);
  c.close();
});

test("pipes: stdin round trip, streams apart, env, cwd, exit code", async () => {
  const c = await connect();
  const cat = await c.spawn(["sh", "-c", "cat; echo $V:$(pwd) >&2; exit 5"], { env: { V: "v" }, cwd: "/workspace" });
  await cat.write("one\n");
  await until(cat, "one\n");
  await cat.write(Buffer.alloc(300000, "x"));
  await cat.closeStdin();
  let out = "";
  let err = "";
  for await (const ch of cat) {
    if (ch.stream === "stderr") err += ch.data;
    else out += ch.data;
  }
  assert.equal(out, "x".repeat(300000));
  assert.match(err, /^v:.*\n$/);
  const end = await cat.wait();
  assert.deepEqual([end.exitCode, end.signal, end.reason], [5, null, "exited"]);
  c.close();
});

test("signals: a trapped INT runs its handler, an untrapped one ends the process", async () => {
  const c = await connect();
  const trap = await c.spawn(["sh", "-c", "trap 'echo caught; exit 7' INT; echo ready; while :; do sleep 0.1; done"]);
  await until(trap, "ready\n");
  await trap.signal("INT");
  await until(trap, "caught\n");
  assert.equal((await trap.wait()).exitCode, 7);
  const sleeper = await c.spawn(["sleep", "600"]);
  await sleeper.signal("INT");
  assert.equal((await sleeper.wait()).signal, 2);
  c.close();
});

test("re-attach from a second connection; the daemon's errors are RpcErrors", async () => {
  const first = await connect();
  const counter = await first.spawn(["sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); sleep 0.02; done"]);
  await until(counter, "line3\n");
  first.close();
  const second = await connect();
  const again = await second.attach(counter.id);
  assert.equal(again.exit, null);
  const seen = await until(again, "\n");
  assert.ok(seen.startsWith("line0\nline1\n"), seen.slice(0, 100));
  const last = Number(seen.trim().split("\n").at(-1).slice(4));
  await until(again, `line${last + 5}\n`);
  await again.signal("TERM");
  assert.equal((await again.wait()).signal, 15);
  await refused(again.signal("INT"), -32602, `process "${again.id}" has exited`);
  await refused(second.attach("0".repeat(32)), -32602, `process.attach: no process "${"0".repeat(32)}"`);
  const held = await second.spawn(["sleep", "600"]);
  await refused(held.resize(10, 10), -32602, "has no terminal");
  await held.closeStdin();
  await refused(held.write("x"), -32602, "is closed");
  await held.signal("KILL");
  assert.equal((await held.wait()).signal, 9);
  await refused(second.spawn(["true"], { cwd: "/etc" }), -32602, '"cwd" must lie in /workspace');
  second.close();
});

// GET /index.html from HOST:PORT, or from the unix socket at HOST when PORT is null.
function get(host, port) {
  return new Promise((resolve) => {
    const k = net.createConnection(port === null ? { path: host } : { host, port });
    let data = "";
    k.setEncoding("utf8");
    k.on("data", (d) => { data += d; });
    k.on("end", () => resolve(data));
    k.on("error", () => resolve(""));
    k.write("GET /index.html HTTP/1.0\r\n\r\n");
  });
}

test("a live session: cwd, env and background processes kept; pause, resume, expose", async () => {
  const c = await connect();
  const s = await c.createSession({ live: true });
  assert.equal(s.live, true);
  const sh = async (code) => {
    const r = await s.exec(null, { code, language: "sh" });
    assert.equal(r.exitCode, 0, r.stderr.toString());
    return r.stdout.toString();
  };
  await sh('cd "${TMPDIR:-/tmp}" && mkdir -p sub && cd sub && export GREETING=hello; (sleep 0.3; echo later > bg) >/dev/null 2>&1 &');
  assert.match(await sh("pwd; echo $GREETING"), /\/sub\nhello\n$/);
  await eventually(async () => (await s.exec(["cat", "bg"])).stdout.toString() === "later\n");
  const ticker = await s.spawn(["sh", "-c", "i=0; while :; do i=$((i+1)); echo tick$i; sleep 0.1; done"]);
  assert.equal(ticker.sessionId, s.id);
  await until(ticker, "tick3\n");
  assert.equal(await sh("echo between"), "between\n");
  let seen = await until(ticker, "tick6\n");
  if (root) {
    await s.pause();
    assert.equal((await c.sessions())[0].state, "paused");
    // Drained of what was on its way, it says nothing until resumed (2 s of silence).
    const deadline = Date.now() + 60_000;
    let pending = null;
    for (;;) {
      assert.ok(Date.now() < deadline, "it goes on ticking while paused");
      pending ??= ticker.read();
      const got = await Promise.race([pending, sleep(2000).then(() => "silent")]);
      if (got === "silent") break;
      pending = null;
      seen += got;
    }
    const last = Number(seen.trim().split("tick").at(-1));
    await s.resume();
    // The read left waiting above gets the next tick: none was lost or skipped.
    const next = (await pending).toString();
    assert.ok(next.startsWith(`tick${last + 1}\n`), `${last} ${next.slice(0, 40)}`);
  } else {
    await refused(s.pause(), -32000, "freezer");
  }
  await ticker.signal("KILL");
  assert.equal((await ticker.wait()).signal, 9);
  // The process, gvisor and microvm levels give a session no network namespace of its own.
  if (level === "process" || level === "gvisor" || level === "microvm") {
    await refused(s.expose(8000), -32000, "no network namespace of its own");
  } else {
    await sh("echo served > index.html; python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &");
    const got = await s.expose(8000);
    assert.equal(got.address, `127.0.0.1:${got.host_port}`);
    await eventually(async () => (await get(got.host, got.host_port)).endsWith("\r\n\r\nserved\n"));
    const viaPath = await s.expose(8000, { unix: true });
    assert.ok(viaPath.path.endsWith(`/expose-${s.id}/8000.sock`), viaPath.path);
    assert.ok((await get(viaPath.path, null)).endsWith("\r\n\r\nserved\n"));
    await s.unexpose(8000);
  }
  await refused(s.expose(8001), -32000, "port 8001 is not in the policy's network.expose");
  await s.destroy();
  assert.ok(!(await c.sessions()).some((x) => x.session_id === s.id));
  c.close();
});

test("a slow reader holds the process back; nothing grows without bound", async () => {
  const c = await connect();
  const p = await c.spawn(["sh", "-c", "exec yes slowreader"]);
  let n = 0;
  for await (const ch of p) {
    assert.ok(ch.data.toString().includes("slowreader"));
    await sleep(50);
    if (++n === 20) break;
  }
  const watcher = await connect();
  const written = async () => (await watcher.processes()).find((x) => x.process_id === p.id).output_bytes;
  const samples = [];
  await eventually(async () => {
    samples.push(await written());
    await sleep(500);
    const k = samples.length;
    return k > 2 && samples[k - 1] === samples[k - 2] && samples[k - 2] === samples[k - 3] && samples[k - 1] > 0;
  });
  assert.ok(samples.at(-1) < 16 << 20, String(samples));
  assert.ok(p.buffered <= (1 << 20) + (64 << 10), String(p.buffered));
  assert.equal(p.exit, null);
  let got = 0;
  while (got < 4 << 20) got += (await p.read()).length;
  await eventually(async () => (await written()) > samples.at(-1));
  await p.signal("KILL");
  assert.equal((await p.wait()).signal, 9);
  c.close();
  watcher.close();
});
