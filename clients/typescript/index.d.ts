// Types of deskbox's Node client (index.js).  Timestamps are RFC 3339 UTC
// strings; see docs/api.md and docs/openapi.yaml for every field.

export declare class DeskboxError extends Error {
  /** The HTTP status; 0 when the server could not be reached. */
  status: number;
  /** The server's error code ("not_found", "insufficient_storage", ...). */
  code: string;
  serverMessage: string;
}

export interface SandboxInfo {
  id: string;
  name?: string;
  status: "creating" | "running" | "paused" | "stopped" | "failed" | string;
  display: { width: number; height: number };
  memory_mb: number;
  created_at: string;
  expires_at?: string | null;
  metadata?: Record<string, string>;
  [field: string]: unknown;
}

export interface CreateSpec {
  display?: { width: number; height: number };
  agent_display?: { width: number; height: number };
  memory_mb?: number;
  pids_max?: number;
  cpu_millis?: number;
  disk_mb?: number;
  env?: Record<string, string>;
  network?: "none" | "internet" | { allow: string[] };
  name?: string;
  metadata?: Record<string, string>;
  read_only_root?: boolean;
  template?: string;
  image?: string;
  timeout_s?: number;
  [field: string]: unknown;
}

export interface RunOptions {
  timeout_s?: number;
  env?: Record<string, string>;
  cwd?: string;
  stdin?: string;
}

export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  oom_killed: boolean;
  truncated: boolean;
  duration_ms: number;
  /** exit code 0 and not timed out */
  ok: boolean;
  stdoutBytes: Buffer;
  stderrBytes: Buffer;
  [field: string]: unknown;
}

export type OutputEvent =
  | { type: "stdout" | "stderr"; text: string; data: Buffer }
  | { type: "result"; result: ExecResult };

export declare class Desktop {
  screenshot(opts?: { region?: [number, number, number, number]; format?: "png" | "jpeg" | "webp" }): Promise<Buffer>;
  info(): Promise<{ width: number; height: number; frame: number; pointer: { x: number; y: number } }>;
  /** Any action of docs/actions.md by name. */
  action(name: string, body?: Record<string, unknown>): Promise<Record<string, unknown>>;
  click(x?: number, y?: number, opts?: { button?: string; modifiers?: string[] }): Promise<Record<string, unknown>>;
  doubleClick(x?: number, y?: number, opts?: { button?: string }): Promise<Record<string, unknown>>;
  move(x: number, y: number): Promise<Record<string, unknown>>;
  drag(path: Array<[number, number] | { x: number; y: number }>, opts?: { button?: string }): Promise<Record<string, unknown>>;
  scroll(x: number, y: number, dx?: number, dy?: number): Promise<Record<string, unknown>>;
  typeText(text: string, opts?: { delay_ms?: number }): Promise<Record<string, unknown>>;
  key(keys: string | string[]): Promise<Record<string, unknown>>;
  wait(opts?: { until?: string; quiet_ms?: number; timeout_ms?: number }): Promise<Record<string, unknown>>;
  launch(argv: string[], opts?: { timeout_ms?: number }): Promise<Record<string, unknown>>;
  windows(): Promise<Array<Record<string, unknown>>>;
  cursor(): Promise<[number, number]>;
  actions(actions: Array<Record<string, unknown>>, opts?: Record<string, unknown>): Promise<Record<string, unknown>>;
}

export declare class Process {
  /** argv (an array) directly, or a string through /bin/sh -c; waits. */
  exec(cmd: string | string[], opts?: RunOptions): Promise<ExecResult>;
  /** A background run; returns its pid. */
  start(cmd: string | string[], opts?: Omit<RunOptions, "timeout_s">): Promise<number>;
  /** Output as it arrives, the result last; leaving the loop kills the run. */
  execStream(cmd: string | string[], opts?: RunOptions): AsyncGenerator<OutputEvent>;
  codeRun(code: string, opts?: RunOptions & { language?: "python" | "bash" | "node"; context?: string }): Promise<ExecResult>;
  codeRunStream(code: string, opts?: RunOptions & { language?: "python" | "bash" | "node"; context?: string }): AsyncGenerator<OutputEvent>;
  status(pid: number): Promise<Record<string, unknown>>;
  kill(pid: number): Promise<Record<string, unknown>>;
  logs(pid: number): Promise<Record<string, unknown>>;
}

export interface FileEntry { name: string; type: string; size: number; mode: string; mtime: number }

export declare class Files {
  upload(path: string, data: string | Uint8Array, opts?: { parents?: boolean; mode?: number }): Promise<{ path: string; size: number; sha256: string }>;
  download(path: string): Promise<Buffer>;
  list(path?: string): Promise<FileEntry[]>;
  stat(path: string): Promise<Record<string, unknown>>;
  mkdir(path: string): Promise<Record<string, unknown>>;
  move(from: string, to: string): Promise<Record<string, unknown>>;
  remove(path: string, opts?: { recursive?: boolean }): Promise<void>;
}

export interface TerminalInfo { id: string; pid: number; command: string[]; cols: number; rows: number; status: string; created_at: string; [field: string]: unknown }

export declare class Terminals {
  create(opts?: { command?: string[]; cols?: number; rows?: number; env?: Record<string, string>; cwd?: string }): Promise<TerminalInfo>;
  list(): Promise<TerminalInfo[]>;
  get(tid: string): Promise<TerminalInfo>;
  delete(tid: string): Promise<void>;
  /** The terminal page's URL with a fresh viewer token. */
  url(tid: string, opts?: { ttl_s?: number; view_only?: boolean }): Promise<string>;
  /** Its WebSocket: binary frames are bytes both ways (Node >= 22). */
  connect(tid: string, opts?: { ttl_s?: number; view_only?: boolean }): Promise<WebSocket>;
}

export declare class Sandbox {
  readonly id: string;
  info: SandboxInfo;
  readonly status: string;
  readonly desktop: Desktop;
  readonly process: Process;
  readonly files: Files;
  readonly terminals: Terminals;
  refresh(): Promise<Sandbox>;
  stop(): Promise<Sandbox>;
  start(): Promise<Sandbox>;
  pause(): Promise<Sandbox>;
  resume(): Promise<Sandbox>;
  setTimeout(timeout_s: number): Promise<Sandbox>;
  delete(opts?: { missingOk?: boolean }): Promise<void>;
  checkpoint(name: string): Promise<{ name: string; created_at: string; size_bytes: number; [field: string]: unknown }>;
  checkpoints(): Promise<Array<{ name: string; created_at: string; size_bytes: number }>>;
  restore(name: string): Promise<Sandbox>;
  deleteCheckpoint(name: string): Promise<void>;
  fork(opts?: { checkpoint?: string; name?: string }): Promise<Sandbox>;
  vncUrl(opts?: { viewOnly?: boolean; ttlS?: number }): Promise<string>;
  portUrl(port: number, opts?: { ttlS?: number }): Promise<string>;
}

export declare class Deskbox {
  /** url: DESKBOX_URL or http://127.0.0.1:8080; token: DESKBOX_TOKEN. */
  constructor(opts?: { url?: string; token?: string });
  readonly url: string;
  create(spec?: CreateSpec): Promise<Sandbox>;
  list(opts?: { metadata?: Record<string, string> }): Promise<Sandbox[]>;
  get(id: string): Promise<Sandbox>;
}
