// Runs against a real daemon: CORDON_SOCKET names its socket
// (tests/integration/test_clients.py starts one and runs this file).
import assert from "node:assert/strict";
import { test } from "node:test";
import { BusyError, Client, RpcError } from "../index.js";

const path = process.env.CORDON_SOCKET;

test("run answers with bytes and the exit status", async () => {
  const c = await Client.connect(path);
  const r = await c.run(["sh", "-c", "read x; echo got:$x:$V; exit 4"], { stdin: "in\n", env: { V: "v" } });
  assert.equal(r.exitCode, 4);
  assert.equal(r.stdout.toString(), "got:in:v\n");
  assert.equal(r.runId.length, 32);
  const bin = await c.run(null, { code: "import sys; sys.stdout.buffer.write(bytes([0, 255, 1]))" });
  assert.deepEqual([...bin.stdout], [0, 255, 1]);
  c.close();
});

test("errors carry the JSON-RPC error", async () => {
  const c = await Client.connect(path);
  await assert.rejects(c.call("no.such.method"), (e) => e instanceof RpcError && e.code === -32601);
  await assert.rejects(c.call("run", { argv: "sh" }), (e) => e instanceof RpcError && e.code === -32602 && !(e instanceof BusyError));
  c.close();
});

test("output streams before the run ends", async () => {
  const c = await Client.connect(path);
  const seen = [];
  let res = null;
  for await (const item of c.stream(["sh", "-c", "echo a; sleep 0.2; echo b"])) {
    if (item.result) res = item.result;
    else seen.push(item.data.toString());
  }
  assert.equal(seen.join(""), "a\nb\n");
  assert.equal(res.exitCode, 0);
  c.close();
});

test("sessions keep files and fork", async () => {
  const c = await Client.connect(path);
  const s = await c.session();
  await s.writeFile("x.txt", "one\n");
  const r = await s.exec(["sh", "-c", "cat x.txt; echo two >> x.txt"]);
  assert.equal(r.stdout.toString(), "one\n");
  const [f] = await s.fork();
  await f.exec(["sh", "-c", "echo three >> x.txt"]);
  assert.equal((await s.readFile("x.txt")).toString(), "one\ntwo\n");
  assert.equal((await f.readFile("x.txt")).toString(), "one\ntwo\nthree\n");
  await s.destroy();
  await f.destroy();
  const o = await c.session({ workspaceMode: "overlay", workspaceCommit: "manual" });
  const t = (await o.exec(["sh", "-c", "echo one > z"])).transaction;
  assert.equal(t.outcome, "pending");
  assert.equal((await o.commit()).outcome, "committed");
  assert.equal((await o.readFile("z")).toString(), "one\n");
  await o.exec(["rm", "z"]);
  assert.equal((await o.discard()).removed, 1);
  assert.equal((await o.readFile("z")).toString(), "one\n");
  await o.destroy();
  assert.deepEqual(await c.sessions(), []);
  c.close();
});
