// cordon-client: talks to `cordon serve` (JSON-RPC 2.0, one object per line,
// on a unix socket). No dependencies. See index.d.ts for the surface.
import net from "node:net";

export const BUSY = -32002;

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

export class Client {
  #sock;
  #buf = "";
  #next = 1;
  #pending = new Map();
  #closed = null;

  static connect(path) {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection(path);
      sock.once("connect", () => resolve(new Client(sock)));
      sock.once("error", (e) => reject(new CordonError(`cannot connect to ${path}: ${e.message}`)));
    });
  }

  constructor(sock) {
    this.#sock = sock;
    sock.setEncoding("utf8");
    sock.on("data", (d) => this.#data(d));
    const end = (why) => {
      this.#closed = new CordonError(why);
      for (const p of this.#pending.values()) p.reject(this.#closed);
      this.#pending.clear();
    };
    sock.on("close", () => end("the daemon closed the connection"));
    sock.on("error", (e) => end(e.message));
  }

  #data(d) {
    this.#buf += d;
    let nl;
    while ((nl = this.#buf.indexOf("\n")) >= 0) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
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
  }

  call(method, params, onOutput) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#next++;
    const msg = { jsonrpc: "2.0", id, method };
    if (params !== undefined) msg.params = params;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onOutput });
      this.#sock.write(JSON.stringify(msg) + "\n");
    });
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
    const r = await this.call("session.create", p);
    return new Session(this, r.session_id);
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
  constructor(client, id) {
    this.client = client;
    this.id = id;
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
    return r.session_ids.map((id) => new Session(this.client, id));
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
