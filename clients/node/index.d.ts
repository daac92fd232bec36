// Types for cordon-client (index.js).

export declare const BUSY: -32002;

export declare class CordonError extends Error {}

/** A JSON-RPC error answer from the daemon. */
export declare class RpcError extends CordonError {
  readonly code: number;
  readonly rpcMessage: string;
  readonly data: unknown;
}

/** The daemon's queue (or this connection's share) is full, or the session is
 * busy (committing, discarding, forking, being destroyed): retry later. */
export declare class BusyError extends RpcError {}

export interface RunOptions {
  /** Source to run instead of argv, in `language` (default "python"). */
  code?: string;
  language?: "python" | "node" | "sh";
  stdin?: string | Uint8Array;
  env?: Record<string, string>;
  /** Seconds; lowers the policy's wall-clock limit. */
  timeout?: number;
}

export interface Result {
  runId: string;
  exitCode: number | null;
  signal: number | null;
  reason: string;
  status: number;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  pooled: boolean;
  error: string | null;
  times: { wall_ms: number | null; cpu_ms: number | null; total_ms: number };
  /** On an overlay workspace: what the run changed and what became of it. */
  transaction: Transaction | null;
  raw: Record<string, unknown>;
}

export interface Transaction {
  outcome: "committed" | "discarded" | "refused" | "pending" | "failed";
  committed: boolean;
  added: number;
  changed: number;
  removed: number;
  bytes: number;
  digest: string;
  paths: string[];
  reason?: string;
}

export interface SessionOptions {
  workspaceMode?: "direct" | "overlay";
  workspaceCommit?: "on_success" | "always" | "manual";
  /** One long-lived sandbox whose processes share cwd, environment, /tmp and
   * background processes between execs, like a terminal. */
  live?: boolean;
}

export interface ConnectOptions {
  /** Bytes of a process's output kept while read past on the way to an answer
   * (default 8 MiB); beyond it the oldest is dropped and counted in `dropped`. */
  outputBuffer?: number;
}

export interface SpawnOptions extends RunOptions {
  /** A terminal: true (80x24) or its size. With one, output is one stream. */
  pty?: boolean | { cols: number; rows: number } | [number, number];
  /** Inside /workspace: absolute, or relative to it. */
  cwd?: string;
}

export interface ProcessExit {
  exitCode: number | null;
  signal: number | null;
  /** "exited", "start_failed", "output_limit", "killed", "lost", ... */
  reason: string;
  error: string | null;
  outputBytes: number;
  raw: Record<string, unknown>;
}

export interface ProcessInfo {
  process_id: string;
  num: number;
  session_id?: string;
  run_id: string;
  command: string;
  state: "starting" | "running" | "exited";
  pty: boolean;
  age_s: number;
  output_bytes: number;
  exit_code?: number | null;
  signal?: number | null;
  reason?: string;
}

export interface Exposed {
  session_id: string;
  port: number;
  /** "127.0.0.1:PORT" on the host (not with unix). */
  address?: string;
  host?: string;
  host_port?: number;
  /** With unix: the unix socket's path. */
  path?: string;
}

/** A process started with spawn() (or found with attach()). Output is read
 * from the daemon as it is consumed: a consumer that reads slowly holds the
 * process back (it blocks on its output), nothing grows without bound. */
export declare class Process implements AsyncIterable<Chunk> {
  readonly client: Client;
  /** The daemon's process id: what attach() takes. */
  readonly id: string;
  readonly pid: string;
  readonly num: number | null;
  readonly runId: string | null;
  readonly sessionId: string | null;
  readonly pty: boolean;
  /** How it ended, once this connection has heard; null while it runs. */
  readonly exit: ProcessExit | null;
  /** Bytes of output lost: past the replay, or past the buffer while nobody read. */
  readonly dropped: number;
  /** Bytes of output this client holds unread. */
  readonly buffered: number;
  /** Waits while the process has not read what was written before. */
  write(data: string | Uint8Array, opts?: { timeout?: number }): Promise<void>;
  closeStdin(): Promise<void>;
  /** The next piece of output (either stream); null once it ended and all is read. */
  read(): Promise<Buffer | null>;
  readChunk(): Promise<Chunk | null>;
  [Symbol.asyncIterator](): AsyncIterator<Chunk>;
  /** To its process group. */
  signal(sig?: "INT" | "TERM" | "KILL" | "HUP" | number): Promise<void>;
  resize(cols: number, rows: number): Promise<void>;
  wait(): Promise<ProcessExit>;
}

export interface SessionInfo {
  session_id: string;
  /** The uid that created it (a fork's: its origin's). */
  owner: number;
  state: "idle" | "running" | "paused" | "committing" | "discarding" | "forking" | "destroying";
  running: number;
  age_s: number;
  idle_s: number;
  workspace_mode: "direct" | "overlay";
  workspace_commit: "on_success" | "always" | "manual";
  pending: boolean;
  live: boolean;
  paused: boolean;
}

export interface Chunk {
  stream: "stdout" | "stderr";
  data: Buffer;
}

export type StreamItem = Chunk | { result: Result };

export declare class Client {
  static connect(path: string, opts?: ConnectOptions): Promise<Client>;
  call(method: string, params?: Record<string, unknown>): Promise<any>;
  run(argv: readonly string[] | null, opts?: RunOptions): Promise<Result>;
  stream(argv: readonly string[] | null, opts?: RunOptions): AsyncGenerator<StreamItem>;
  health(): Promise<{ ok: boolean; version: string; draining: boolean; uptime_s: number }>;
  stats(): Promise<Record<string, any>>;
  policyCheck(policy?: string): Promise<Record<string, any>>;
  session(opts?: SessionOptions): Promise<Session>;
  createSession(opts?: SessionOptions): Promise<Session>;
  /** In a fresh sandbox of its own; answers as soon as it started. */
  spawn(argv: readonly string[] | null, opts?: SpawnOptions): Promise<Process>;
  /** Re-attach to a running (or ended) process of this uid's, by id. */
  attach(processId: string): Promise<Process>;
  processes(sessionId?: string): Promise<ProcessInfo[]>;
  /** This uid's own sessions (every uid's for a daemon's --admin-uid). */
  sessions(): Promise<SessionInfo[]>;
  close(): void;
}

export declare class Session {
  readonly client: Client;
  readonly id: string;
  readonly live: boolean;
  /** In its live sandbox if it is live, else a fresh one on its workspace. */
  spawn(argv: readonly string[] | null, opts?: SpawnOptions): Promise<Process>;
  processes(): Promise<ProcessInfo[]>;
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** The policy's network.expose must list PORT. */
  expose(port: number, opts?: { unix?: boolean }): Promise<Exposed>;
  unexpose(port: number): Promise<void>;
  exec(argv: readonly string[] | null, opts?: RunOptions): Promise<Result>;
  stream(argv: readonly string[] | null, opts?: RunOptions): AsyncGenerator<StreamItem>;
  writeFile(path: string, content: string | Uint8Array, mode?: number): Promise<void>;
  readFile(path: string): Promise<Buffer>;
  fork(count?: number): Promise<Session[]>;
  commit(): Promise<Transaction>;
  discard(): Promise<Transaction>;
  destroy(): Promise<void>;
}
