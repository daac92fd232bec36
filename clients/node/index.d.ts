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
}

export interface SessionInfo {
  session_id: string;
  /** The uid that created it (a fork's: its origin's). */
  owner: number;
  state: "idle" | "running" | "committing" | "discarding" | "forking" | "destroying";
  running: number;
  age_s: number;
  idle_s: number;
  workspace_mode: "direct" | "overlay";
  workspace_commit: "on_success" | "always" | "manual";
  pending: boolean;
}

export interface Chunk {
  stream: "stdout" | "stderr";
  data: Buffer;
}

export type StreamItem = Chunk | { result: Result };

export declare class Client {
  static connect(path: string): Promise<Client>;
  call(method: string, params?: Record<string, unknown>): Promise<any>;
  run(argv: readonly string[] | null, opts?: RunOptions): Promise<Result>;
  stream(argv: readonly string[] | null, opts?: RunOptions): AsyncGenerator<StreamItem>;
  health(): Promise<{ ok: boolean; version: string; draining: boolean; uptime_s: number }>;
  stats(): Promise<Record<string, any>>;
  policyCheck(policy?: string): Promise<Record<string, any>>;
  session(opts?: SessionOptions): Promise<Session>;
  /** This uid's own sessions (every uid's for a daemon's --admin-uid). */
  sessions(): Promise<SessionInfo[]>;
  close(): void;
}

export declare class Session {
  readonly client: Client;
  readonly id: string;
  exec(argv: readonly string[] | null, opts?: RunOptions): Promise<Result>;
  stream(argv: readonly string[] | null, opts?: RunOptions): AsyncGenerator<StreamItem>;
  writeFile(path: string, content: string | Uint8Array, mode?: number): Promise<void>;
  readFile(path: string): Promise<Buffer>;
  fork(count?: number): Promise<Session[]>;
  commit(): Promise<Transaction>;
  discard(): Promise<Transaction>;
  destroy(): Promise<void>;
}
