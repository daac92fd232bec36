// cordon-client: talks to `cordon serve` (JSON-RPC 2.0, one object per line,
// on a unix socket). No dependencies. See index.d.ts for the surface.
import net from "node:net";

export const BUSY = -32002;
// Output of a process this client holds unread: past HIGH_WATER the socket is no longer
// read (unless an answer or a reader waits), so the daemon stops giving the process credit
// and it blocks; read past on the way to an answer, a process keeps OUTPUT_BUFFER at most.
const HIGH_WATER = 1 << 20;
const OUTPUT_BUFFER = 8 << 20;
// The daemon takes at most 256 KiB of stdin at a time.
const STDIN_PIECE = 64 << 10;
// How long a call retries while a live session's sandbox is still starting.
const START_WAIT_MS = 120_000;

export class CordonError extends Error {}

export class RpcError extends CordonError {
  constructor(code, message, data) {
    super(`${message} (code ${code})`);
    this.code = code;
    this.rpcMessage = message;
    this.data = data;
  }
}

export class BusyError extends RpcError {}

function toError(e) {
  const Cls = e.code === BUSY ? BusyError : RpcError;
  return new Cls(e.code, e.message, e.data);
}

function bytes(text, encoding) {
  return encoding === "base64" ? Buffer.from(text, "base64") : Buffer.from(text, "utf8");
}

function result(a) {
  return {
    runId: a.run_id,
    exitCode: a.exit_code,
    signal: a.signal,
    reason: a.reason,
    status: a.status,
    stdout: bytes(a.stdout, a.stdout_encoding),
    stderr: bytes(a.stderr, a.stderr_encoding),
    stdoutTruncated: a.stdout_truncated,
    stderrTruncated: a.stderr_truncated,
    pooled: a.pooled,
    error: a.error ?? null,
    times: a.times,
    transaction: a.transaction ?? null,
    raw: a,
  };
}

function runParams(argv, opts = {}) {
  const p = {};
  if (argv) p.argv = [...argv];
  if (opts.code !== undefined) {
    p.code = opts.code;
    p.language = opts.language ?? "python";
  }
  if (typeof opts.stdin === "string") p.stdin = opts.stdin;
  else if (opts.stdin) p.stdin_base64 = Buffer.from(opts.stdin).toString("base64");
  if (opts.env) p.env = { ...opts.env };
  if (opts.timeout !== undefined) p.timeout = opts.timeout;
  return p;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function exitInfo(a) {
  return {
    exitCode: a.exit_code ?? null,
    signal: a.signal ?? null,
    reason: a.reason ?? "exited",
    error: a.error ?? null,
    outputBytes: a.output_bytes ?? 0,
    raw: a,
  };
}

function ptyParam(pty) {
  if (pty === undefined || pty === null || pty === false) return undefined;
  if (pty === true) return true;
  if (Array.isArray(pty)) return { cols: pty[0], rows: pty[1] };
  return { cols: pty.cols, rows: pty.rows };
}

function spawnParams(argv, opts = {}) {
  const p = runParams(argv, opts);
  const pty = ptyParam(opts.pty);
  if (pty !== undefined) p.pty = pty;
  if (opts.cwd !== undefined) p.cwd = opts.cwd;
  return p;
}

// One process's output as this connection received it and nobody has read yet.
class Output {
  chunks = [];
  buffered = 0;
  dropped = 0;
  end = null;
  claimed = false;
  waiters = [];
  constructor(limit) {
    this.limit = limit;
  }

  add(chunk) {
    this.chunks.push(chunk);
    this.buffered += chunk.data.length;
    while (this.buffered > this.limit && this.chunks.length > 1) {
      const old = this.chunks.shift();
      this.buffered -= old.data.length;
      this.dropped += old.data.length;
    }
  }

  wake() {
    const all = this.waiters;
    this.waiters = [];
    for (const w of all) w();
  }
}

export class Client {
  #sock;
  #buf = "";
  #next = 1;
  #pending = new Map();
  #closed = null;
  #outputs = new Map();
  #held = 0; // bytes of output held unread, every process's
  #readers = 0; // readers waiting for a chunk
  #paused = false;
  #outputBuffer;

  static connect(path, opts = {}) {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection(path);
      sock.once("connect", () => resolve(new Client(sock, opts)));
      sock.once("error", (e) => reject(new CordonError(`cannot connect to ${path}: ${e.message}`)));
    });
  }

  constructor(sock, opts = {}) {
    this.#sock = sock;
    this.#outputBuffer = opts.outputBuffer ?? OUTPUT_BUFFER;
    sock.setEncoding("utf8");
    sock.on("data", (d) => this.#data(d));
    const end = (why) => {
      if (this.#closed) return;
      this.#closed = new CordonError(why);
      for (const p of this.#pending.values()) p.reject(this.#closed);
      this.#pending.clear();
      for (const o of this.#outputs.values()) o.wake();
    };
    sock.on("close", () => end("the daemon closed the connection"));
    sock.on("error", (e) => end(e.message));
  }

  #data(d) {
    this.#buf += d;
    // Only new data can end a line: a long answer is not searched again at each chunk.
    if (!d.includes("\n")) return;
    const lines = this.#buf.split("\n");
    this.#buf = lines.pop();
    for (const line of lines) {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.method === "process.output" || msg.method === "process.exit") {
        this.#processNote(msg.method, msg.params ?? {});
        continue;
      }
      if (msg.method === "run.output") {
        const p = this.#pending.get(msg.params?.id);
        if (p?.onOutput) {
          const data = msg.params.data !== undefined
            ? Buffer.from(msg.params.data, "utf8")
            : Buffer.from(msg.params.data_base64, "base64");
          p.onOutput({ stream: msg.params.stream, data });
        }
        continue;
      }
      const p = this.#pending.get(msg.id);
      if (!p) continue;
      this.#pending.delete(msg.id);
      if (msg.error) p.reject(toError(msg.error));
      else p.resolve(msg.result);
    }
    this.#flow();
  }

  #processNote(method, params) {
    if (typeof params.process_id !== "string") return;
    const out = this.output(params.process_id);
    if (method === "process.exit") {
      out.end = exitInfo(params);
      if (out.claimed) this.#outputs.delete(params.process_id);
    } else {
      const data = params.data !== undefined
        ? Buffer.from(params.data, "utf8")
        : Buffer.from(params.data_base64 ?? "", "base64");
      const before = out.buffered;
      out.add({ stream: params.stream, data });
      this.#held += out.buffered - before;
    }
    out.wake();
  }

  // Read the socket while an answer or a reader waits, or while little is held unread.
  #flow() {
    const want = this.#pending.size > 0 || this.#readers > 0 || this.#held < HIGH_WATER;
    if (want && this.#paused) {
      this.#paused = false;
      this.#sock.resume();
    } else if (!want && !this.#paused && !this.#closed) {
      this.#paused = true;
      this.#sock.pause();
    }
  }

  /** @internal The output state of process ID on this connection. */
  output(id, fresh = false) {
    let out = this.#outputs.get(id);
    if (!out || fresh) {
      if (out) this.#held -= out.buffered;
      out = new Output(this.#outputBuffer);
      this.#outputs.set(id, out);
    }
    return out;
  }

  /** @internal Claim process ID's output for a Process object. */
  claim(id) {
    const out = this.output(id);
    out.claimed = true;
    if (out.end) this.#outputs.delete(id);
    return out;
  }

  /** @internal The next chunk of OUT, or null once its process has ended and all is read. */
  async nextChunk(out) {
    for (;;) {
      if (out.chunks.length) {
        const c = out.chunks.shift();
        out.buffered -= c.data.length;
        this.#held -= c.data.length;
        this.#flow();
        return c;
      }
      if (out.end) return null;
      if (this.#closed) throw this.#closed;
      this.#readers++;
      this.#flow();
      try {
        await new Promise((r) => { out.waiters.push(r); });
      } finally {
        this.#readers--;
      }
    }
  }

  /** @internal An attach answer's replay, as OUT's first chunks. */
  replay(id, ans) {
    const out = this.output(id, true);
    out.dropped = ans.replay_dropped ?? 0;
    for (const stream of ["stdout", "stderr"]) {
      const data = bytes(ans[`replay_${stream}`] ?? "", ans[`replay_${stream}_encoding`] ?? "utf-8");
      const before = out.buffered;
      if (data.length) out.add({ stream, data });
      this.#held += out.buffered - before;
    }
    if (ans.state === "exited") out.end = exitInfo(ans);
  }

  call(method, params, onOutput) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#next++;
    const msg = { jsonrpc: "2.0", id, method };
    if (params !== undefined) msg.params = params;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onOutput });
      this.#flow();
      this.#sock.write(JSON.stringify(msg) + "\n");
    });
  }

  // Start ARGV (or opts.code) in a fresh sandbox of its own; answers at once.
  async spawn(argv, opts = {}) {
    return new Process(this, await this.call("process.start", spawnParams(argv, opts)));
  }

  // A process of this uid's started elsewhere: its bounded replay, then its output.
  async attach(processId) {
    const ans = await this.call("process.attach", { process_id: processId });
    this.replay(processId, ans);
    return new Process(this, ans);
  }

  async processes(sessionId) {
    return (await this.call("process.list", sessionId ? { session_id: sessionId } : {})).processes;
  }

  createSession(opts = {}) {
    return this.session(opts);
  }

  async run(argv, opts = {}) {
    return result(await this.call("run", runParams(argv, opts)));
  }

  async *stream(argv, opts = {}) {
    yield* streamCall(this, "run", runParams(argv, opts));
  }

  health() { return this.call("health"); }
  stats() { return this.call("stats"); }
  policyCheck(policy) { return this.call("policy.check", policy === undefined ? {} : { policy }); }

  async session(opts = {}) {
    const p = {};
    if (opts.workspaceMode) p.workspace_mode = opts.workspaceMode;
    if (opts.workspaceCommit) p.workspace_commit = opts.workspaceCommit;
    if (opts.live) p.live = true;
    const r = await this.call("session.create", p);
    return new Session(this, r.session_id, !!opts.live);
  }

  async sessions() {
    return (await this.call("session.list")).sessions;
  }

  close() {
    this.#sock.end();
  }
}

// Yields {stream, data} chunks, then {result} once the run has ended.
async function* streamCall(client, method, params) {
  const queue = [];
  let wake = null;
  let done = false;
  let failure = null;
  let final = null;
  client.call(method, { ...params, stream: true }, (chunk) => {
    queue.push(chunk);
    if (wake) wake();
  }).then((r) => { final = result(r); }, (e) => { failure = e; })
    .finally(() => { done = true; if (wake) wake(); });
  for (;;) {
    if (queue.length) {
      yield queue.shift();
      continue;
    }
    if (done) break;
    await new Promise((r) => { wake = r; });
    wake = null;
  }
  if (failure) throw failure;
  yield { result: final };
}

export class Session {
  constructor(client, id, live = false) {
    this.client = client;
    this.id = id;
    this.live = live;
  }

  // As Client.spawn, on this session: in its live sandbox if it is live.
  async spawn(argv, opts = {}) {
    const p = { ...spawnParams(argv, opts), session_id: this.id };
    return new Process(this.client, await this.client.call("process.start", p));
  }

  processes() {
    return this.client.processes(this.id);
  }

  // METHOD, retried while the live sandbox is still starting.
  async #starting(method, extra = {}) {
    const deadline = Date.now() + START_WAIT_MS;
    for (;;) {
      try {
        return await this.client.call(method, { ...extra, session_id: this.id });
      } catch (e) {
        if (!(e instanceof BusyError) || !e.rpcMessage.includes("is starting") || Date.now() > deadline) throw e;
      }
      await sleep(50);
    }
  }

  async pause() {
    await this.#starting("session.pause");
  }

  async resume() {
    await this.#starting("session.resume");
  }

  // Reach PORT of the live sandbox from the host: {address, host, host_port, port}; with
  // {unix: true}, {path, port}: a unix socket only the session's owner, root and an admin
  // uid may connect to.
  expose(port, opts = {}) {
    return this.#starting("session.expose", opts.unix ? { port, unix: true } : { port });
  }

  // Close PORT's listeners, the loopback one and the unix socket both.
  async unexpose(port) {
    await this.client.call("session.unexpose", { session_id: this.id, port });
  }

  async exec(argv, opts = {}) {
    return result(await this.client.call("session.exec", { ...runParams(argv, opts), session_id: this.id }));
  }

  stream(argv, opts = {}) {
    return streamCall(this.client, "session.exec", { ...runParams(argv, opts), session_id: this.id });
  }

  async writeFile(path, content, mode = 0o644) {
    const p = { session_id: this.id, path, mode };
    if (typeof content === "string") p.content = content;
    else p.content_base64 = Buffer.from(content).toString("base64");
    await this.client.call("session.write_file", p);
  }

  async readFile(path) {
    const r = await this.client.call("session.read_file", { session_id: this.id, path });
    return bytes(r.content, r.encoding);
  }

  async fork(count = 1) {
    const r = await this.client.call("session.fork", { session_id: this.id, count });
    return r.session_ids.map((id) => new Session(this.client, id, this.live));
  }

  async commit() {
    return (await this.client.call("session.commit", { session_id: this.id })).transaction;
  }

  async discard() {
    return (await this.client.call("session.discard", { session_id: this.id })).transaction;
  }

  async destroy() {
    await this.client.call("session.destroy", { session_id: this.id });
  }
}

// A process started with spawn() (or found with attach()).
export class Process {
  #out;
  constructor(client, answer) {
    this.client = client;
    this.id = answer.process_id;
    this.num = answer.num ?? null;
    this.runId = answer.run_id ?? null;
    this.sessionId = answer.session_id ?? null;
    this.pty = !!answer.pty;
    this.#out = client.claim(this.id);
  }

  get pid() { return this.id; }
  // How it ended, once this connection has heard; null while it runs.
  get exit() { return this.#out.end; }
  get dropped() { return this.#out.dropped; }
  get buffered() { return this.#out.buffered; }

  #call(method, extra = {}) {
    return this.client.call(`process.${method}`, { ...extra, process_id: this.id });
  }

  // Write to its stdin; waits while the process has not read what came before.
  async write(data, opts = {}) {
    const raw = Buffer.from(data);
    const deadline = opts.timeout === undefined ? Infinity : Date.now() + opts.timeout * 1000;
    for (let at = 0; at < raw.length; at += STDIN_PIECE) {
      const piece = raw.subarray(at, at + STDIN_PIECE).toString("base64");
      for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
        try {
          await this.#call("write_stdin", { data_base64: piece });
          break;
        } catch (e) {
          if (!(e instanceof BusyError) || !e.rpcMessage.includes("stdin") || Date.now() > deadline) throw e;
        }
        await sleep(pause);
      }
    }
  }

  async closeStdin() {
    await this.#call("write_stdin", { eof: true });
  }

  // The next chunk {stream, data}, or null once it has ended and all is read.
  readChunk() {
    return this.client.nextChunk(this.#out);
  }

  // The next piece of output (either stream), or null once it has ended and all is read.
  async read() {
    const c = await this.readChunk();
    return c ? c.data : null;
  }

  async *[Symbol.asyncIterator]() {
    for (let c; (c = await this.readChunk()) !== null;) yield c;
  }

  async signal(sig = "TERM") {
    await this.#call("signal", { signal: sig });
  }

  async resize(cols, rows) {
    await this.#call("resize", { cols, rows });
  }

  // Its end; output that arrives meanwhile is kept for read().
  async wait() {
    const end = exitInfo(await this.#call("wait"));
    if (!this.#out.end) {
      this.#out.end = end;
      this.#out.wake();
    }
    return end;
  }
}
