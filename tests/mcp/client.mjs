#!/usr/bin/env node
// A scripted MCP client for the integration tests, built on the official SDK
// (Client + StdioClientTransport), so that what cordon is tested against is
// what real MCP hosts run.
//
//   node client.mjs SCRIPT.json        or        node client.mjs < SCRIPT.json
//
// It starts `command args...`, does the initialize handshake, runs the steps
// in order (a failed step does not stop the later ones) and prints ONE JSON
// document on stdout. The script format and the output are described in
// README.md beside this file.
//
// Exit status: 0 when the script ran, whatever its steps did; 2 when the
// driver could not connect (spawn or initialize failed: the error is on
// stderr, and stdout still carries a JSON document with "connected": false);
// 3 when the whole run overran deadline_ms (stdout has what was gathered);
// 64 for a script it cannot read.

import fs from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StdioClientTransport,
  getDefaultEnvironment,
} from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  McpError,
  ResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

const DEFAULT_TIMEOUT_MS = 30000;
const DEFAULT_MAX_RECORDED = 1000;
const DEFAULT_STDERR_LIMIT = 1 << 20;
const CLIP_STRING = 64 * 1024;

function die(code, message) {
  process.stderr.write(`client.mjs: ${message}\n`);
  process.exit(code);
}

function readScript() {
  const path = process.argv[2];
  let text;
  try {
    text = fs.readFileSync(path && path !== "-" ? path : 0, "utf8");
  } catch (e) {
    die(64, `cannot read script: ${e.message}`);
  }
  let script;
  try {
    script = JSON.parse(text);
  } catch (e) {
    die(64, `script is not JSON: ${e.message}`);
  }
  if (!script || typeof script.command !== "string")
    die(64, 'script needs "command" (a string)');
  return script;
}

// Long strings in recorded traffic (a 20 MB notification, say) are cut so the
// report stays readable; results of steps are never cut.
function clip(v) {
  if (typeof v === "string")
    return v.length > CLIP_STRING
      ? `${v.slice(0, CLIP_STRING)}...[clipped ${v.length - CLIP_STRING} chars]`
      : v;
  if (Array.isArray(v)) return v.map(clip);
  if (v && typeof v === "object") {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = clip(x);
    return o;
  }
  return v;
}

function errorOf(e) {
  if (e instanceof McpError || (e && typeof e.code === "number"))
    return {
      code: e.code,
      message: e.message,
      ...(e.data !== undefined ? { data: e.data } : {}),
    };
  return { code: null, message: e && e.message ? e.message : String(e) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const script = readScript();
const timeoutMs = script.timeout_ms ?? DEFAULT_TIMEOUT_MS;
const maxRecorded = script.max_recorded ?? DEFAULT_MAX_RECORDED;
const stderrLimit = script.stderr_limit ?? DEFAULT_STDERR_LIMIT;
const steps = Array.isArray(script.steps) ? script.steps : [];
const handlers = script.handlers ?? {};

const report = {
  connected: false,
  server: null,
  results: [],
  notifications: [],
  notification_count: 0,
  notification_counts: {},
  server_requests: [],
  transport_errors: [],
  transport_error_count: 0,
  closed_early: false,
  exit: null,
  stderr: "",
};
if (script.record_messages) report.messages = [];

function push(list, item) {
  if (list.length < maxRecorded) list.push(item);
}

// --- the transport, wrapped so that every message in both directions is seen
// before the SDK acts on it (the SDK drops what it does not expect).

let stderrBytes = 0;
let stderrTruncated = false;
const stderrChunks = [];
let initId = null;
let stepsDone = false;
let currentStep = null; // index of the step running, null before the first
const pendingServerRequests = new Map(); // JSON of id -> entry in server_requests
let exitInfo = null;
let child = null; // the server process, for its exit status and a last kill
let exitWaiters = [];

class RecordingTransport {
  constructor(inner) {
    this.inner = inner;
    inner.onmessage = (m, extra) => this._in(m, extra);
    inner.onerror = (e) => {
      report.transport_error_count++;
      const msg = e && e.message ? e.message : String(e);
      push(report.transport_errors, msg.length > 2000 ? `${msg.slice(0, 2000)}...[clipped]` : msg);
      this.onerror?.(e);
    };
    const early = () => {
      if (!stepsDone && !report.closed_early) {
        report.closed_early = true;
        report.closed_during_step = currentStep;
      }
    };
    inner.onclose = () => {
      early();
      this.onclose?.();
    };
    // The SDK also closes the transport by itself, before the server has
    // exited, when it gives up on the stream (over max_buffer_bytes).
    const innerClose = inner.close.bind(inner);
    inner.close = () => {
      early();
      return innerClose();
    };
    const err = inner.stderr;
    if (err)
      err.on("data", (chunk) => {
        if (stderrBytes >= stderrLimit) {
          stderrTruncated = true;
          return;
        }
        const part = chunk.subarray(0, stderrLimit - stderrBytes);
        if (part.length < chunk.length) stderrTruncated = true;
        stderrBytes += part.length;
        stderrChunks.push(part);
      });
  }
  async start() {
    await this.inner.start();
    // The SDK keeps the child private; its exit status is worth reporting.
    child = this.inner._process;
    if (child)
      child.once("exit", (code, signal) => {
        exitInfo = { code, signal };
        for (const w of exitWaiters) w();
        exitWaiters = [];
      });
  }
  async send(message, options) {
    if (message.method === "initialize") initId = message.id;
    if (message.method === undefined && message.id !== undefined) {
      const entry = pendingServerRequests.get(JSON.stringify(message.id));
      if (entry) {
        pendingServerRequests.delete(JSON.stringify(message.id));
        entry.response =
          message.error !== undefined ? { error: message.error } : { result: message.result };
      }
    }
    return this.inner.send(message, options);
  }
  async close() {
    return this.inner.close();
  }
  _in(m, extra) {
    if (report.messages) push(report.messages, clip(m));
    const isResponse = m.method === undefined && m.id !== undefined;
    if (isResponse && initId !== null && m.id === initId && m.result)
      report.server = {
        serverInfo: m.result.serverInfo ?? null,
        capabilities: m.result.capabilities ?? null,
        protocolVersion: m.result.protocolVersion ?? null,
        ...(m.result.instructions !== undefined
          ? { instructions: clip(m.result.instructions) }
          : {}),
      };
    if (m.method !== undefined && m.id === undefined) {
      report.notification_count++;
      report.notification_counts[m.method] = (report.notification_counts[m.method] ?? 0) + 1;
      const n = clip({ method: m.method, params: m.params });
      push(report.notifications, n);
      report.last_notification = n;
    } else if (m.method !== undefined) {
      const entry = clip({ id: m.id, method: m.method, params: m.params });
      push(report.server_requests, entry);
      pendingServerRequests.set(JSON.stringify(m.id), entry);
    }
    this.onmessage?.(m, extra);
  }
}

// --- the client, with the capabilities and canned answers the script asks for

const capabilities = {};
if (handlers.sampling !== undefined) capabilities.sampling = {};
if (handlers.roots !== undefined) capabilities.roots = { listChanged: true };
if (handlers.elicitation !== undefined) capabilities.elicitation = {};
Object.assign(capabilities, script.capabilities ?? {});

const client = new Client(
  script.client_info ?? { name: "cordon-test-client", version: "1.0.0" },
  { capabilities },
);

// A canned reply of the form {"error": {"code", "message"}} is sent as a
// JSON-RPC error instead of a result.
function canned(reply) {
  return async () => {
    if (reply && typeof reply === "object" && reply.error && !Array.isArray(reply)) {
      // A plain Error with a code: the SDK sends its message as it is (an
      // McpError's message would carry an "MCP error N: " prefix).
      const e = new Error(reply.error.message ?? "error");
      e.code = reply.error.code ?? -32603;
      if (reply.error.data !== undefined) e.data = reply.error.data;
      throw e;
    }
    return reply;
  };
}
if (handlers.sampling !== undefined)
  client.setRequestHandler(CreateMessageRequestSchema, canned(handlers.sampling));
if (handlers.elicitation !== undefined)
  client.setRequestHandler(ElicitRequestSchema, canned(handlers.elicitation));
if (handlers.roots !== undefined)
  client.setRequestHandler(
    ListRootsRequestSchema,
    canned(Array.isArray(handlers.roots) ? { roots: handlers.roots } : handlers.roots),
  );
// Errors the SDK reports (bad lines, responses to unknown ids, ...) are
// recorded by the transport wrapper; this only keeps them off stderr.
client.onerror = () => {};

const env = script.inherit_env
  ? { ...process.env, ...(script.env ?? {}) }
  : { ...getDefaultEnvironment(), ...(script.env ?? {}) };
const inner = new StdioClientTransport({
  command: script.command,
  args: script.args ?? [],
  env,
  cwd: script.cwd,
  stderr: "pipe",
  ...(script.max_buffer_bytes ? { maxBufferSize: script.max_buffer_bytes } : {}),
});
const transport = new RecordingTransport(inner);

// --- the steps

async function listAll(op, key, step, opts) {
  const maxPages = step.max_pages ?? 100;
  const items = [];
  let cursor = step.cursor;
  let pages = 0;
  for (;;) {
    const params = cursor !== undefined ? { cursor } : undefined;
    const page = await client[op](params, opts);
    pages++;
    items.push(...(page[key] ?? []));
    cursor = page.nextCursor;
    if (cursor === undefined || step.all_pages === false || pages >= maxPages) break;
  }
  const value = { [key]: items, pages };
  if (cursor !== undefined) value.nextCursor = cursor;
  return value;
}

function waitFor(step) {
  const limit = step.timeout_ms ?? timeoutMs;
  const count = step.count ?? 1;
  const seen = () => {
    if (step.notification !== undefined)
      return (report.notification_counts[step.notification] ?? 0) >= count;
    if (step.server_request !== undefined)
      return report.server_requests.filter((r) => r.method === step.server_request).length >= count;
    if (step.exit) return exitInfo !== null;
    throw new Error('wait needs "notification", "server_request" or "exit"');
  };
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const poll = () => {
      let done;
      try {
        done = seen();
      } catch (e) {
        reject(e);
        return;
      }
      if (done) resolve(step.exit ? exitInfo : true);
      else if (Date.now() - t0 >= limit)
        reject(new Error(`timed out after ${limit} ms waiting for ${JSON.stringify(step)}`));
      else setTimeout(poll, 10);
    };
    poll();
  });
}

async function runStep(step) {
  const opts = { timeout: step.timeout_ms ?? timeoutMs };
  switch (step.op) {
    case "listTools":
      return listAll("listTools", "tools", step, opts);
    case "listResources":
      return listAll("listResources", "resources", step, opts);
    case "listResourceTemplates":
      return listAll("listResourceTemplates", "resourceTemplates", step, opts);
    case "listPrompts":
      return listAll("listPrompts", "prompts", step, opts);
    case "callTool":
      // "progress": true asks for progress notifications (the SDK then sends
      // a progressToken); they are recorded with the other notifications.
      if (step.progress) opts.onprogress = () => {};
      return client.callTool(
        { name: step.name, arguments: step.arguments ?? {} },
        undefined,
        opts,
      );
    case "readResource":
      return client.readResource({ uri: step.uri }, opts);
    case "getPrompt":
      return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, opts);
    case "setLoggingLevel":
      return client.setLoggingLevel(step.level, opts);
    case "ping":
      return client.ping(opts);
    case "request":
      return client.request(
        { method: step.method, ...(step.params !== undefined ? { params: step.params } : {}) },
        ResultSchema,
        opts,
      );
    case "notify":
      await client.notification({
        method: step.method,
        ...(step.params !== undefined ? { params: step.params } : {}),
      });
      return null;
    case "sleep":
      await sleep(step.ms ?? 0);
      return null;
    case "wait":
      return waitFor(step);
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

function finish(code) {
  // Never leave the server behind (one that ignores stdin's end and SIGTERM).
  if (child && exitInfo === null) {
    report.killed_by_driver = true;
    try {
      child.kill("SIGKILL");
    } catch {}
  }
  report.stderr = Buffer.concat(stderrChunks).toString("utf8");
  if (stderrTruncated) report.stderr_truncated = true;
  report.exit = exitInfo;
  process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(code));
}

const deadline =
  script.deadline_ms ??
  timeoutMs * (steps.length + 2) +
    steps.reduce((a, s) => a + (s.op === "sleep" ? s.ms ?? 0 : 0), 0) +
    10000;
setTimeout(() => {
  report.deadline_exceeded = true;
  process.stderr.write(`client.mjs: deadline of ${deadline} ms exceeded\n`);
  finish(3);
}, deadline).unref();

async function waitExit(ms) {
  if (exitInfo !== null) return;
  await Promise.race([new Promise((r) => exitWaiters.push(r)), sleep(ms)]);
}

try {
  await client.connect(transport, { timeout: timeoutMs });
} catch (e) {
  const err = errorOf(e);
  report.error = err;
  process.stderr.write(`client.mjs: could not connect to ${script.command}: ${err.message}\n`);
  try {
    await transport.close();
  } catch {}
  await waitExit(3000);
  finish(2);
}

if (!report.error) {
  report.connected = true;
  if (!report.server)
    report.server = {
      serverInfo: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
      protocolVersion: null,
    };

  for (const [i, step] of steps.entries()) {
    currentStep = i;
    const t0 = Date.now();
    let r;
    try {
      const value = await runStep(step);
      r = { ok: true, value: value === undefined ? null : value };
    } catch (e) {
      r = { ok: false, error: errorOf(e) };
    }
    r.op = step.op;
    r.ms = Date.now() - t0;
    report.results.push(r);
  }
  stepsDone = true;

  try {
    await client.close();
  } catch {}
  await waitExit(5000);
  finish(0);
}
