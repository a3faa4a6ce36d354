// One engine subprocess and its JSON-RPC connection (design.md#protocol). Everything that lives exactly as long as
// the process — the connection, its listeners, the kill timer — goes on this object's own cleanup list
// (rust-analyzer's "client cleanup"), so a process that exits, crashes or is killed leaks nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Duplex } from 'node:stream';
import * as rpc from 'vscode-jsonrpc/node';
import {
  RpcMethods,
  type RunFinishedParams,
  type RunLogParams,
  type RunMetricsParams,
  type RunProgressParams,
  type RunStartedParams,
  type RunStopResult,
} from '../protocol/index';
import type { NodeChoice } from './node_runtime';

export interface EngineEvents {
  started(p: RunStartedParams): void;
  progress(p: RunProgressParams): void;
  metrics(p: RunMetricsParams): void;
  log(p: RunLogParams): void;
  finished(p: RunFinishedParams): void;
  stderr(line: string): void;
}

export interface EngineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Disposable {
  dispose(): unknown;
}

export class EngineProcess {
  readonly exited: Promise<EngineExit>;
  private readonly proc: ChildProcess;
  private readonly conn: rpc.MessageConnection;
  private readonly cleanup: Disposable[] = [];
  private hasExited = false;

  constructor(node: NodeChoice, cliPath: string, args: string[], cwd: string, events: EngineEvents) {
    this.proc = spawn(node.command, [cliPath, ...args], {
      cwd,
      env: { ...process.env, ...node.env },
      // fd 3 carries JSON-RPC and nothing else (engine/cli/rpc.ts); stdout is whatever the engine's code prints.
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      // Its own process group, so stopping can kill the engine and anything it started in one signal.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.hasExited = true;
        resolve({ code, signal });
      });
      // spawn() failing (ENOENT for a wrong nodePath) emits 'error' and never 'exit'.
      this.proc.once('error', (err) => {
        events.stderr(`could not start ${node.command}: ${err.message}`);
        this.hasExited = true;
        resolve({ code: null, signal: null });
      });
    });

    const channel = this.proc.stdio[3] as Duplex;
    this.conn = rpc.createMessageConnection(new rpc.StreamMessageReader(channel), new rpc.StreamMessageWriter(channel));
    this.cleanup.push(
      this.conn.onNotification(RpcMethods.started, (p: RunStartedParams) => events.started(p)),
      this.conn.onNotification(RpcMethods.progress, (p: RunProgressParams) => events.progress(p)),
      this.conn.onNotification(RpcMethods.metrics, (p: RunMetricsParams) => events.metrics(p)),
      this.conn.onNotification(RpcMethods.log, (p: RunLogParams) => events.log(p)),
      this.conn.onNotification(RpcMethods.finished, (p: RunFinishedParams) => events.finished(p)),
      // A torn frame from a dying process is reported here; the exit handler says what happened.
      this.conn.onError(([err]) => events.stderr(`rpc: ${err.message}`)),
    );
    this.conn.listen();
    this.cleanup.push(this.conn);

    for (const stream of [this.proc.stderr!, this.proc.stdout!]) {
      const lines = createInterface({ input: stream });
      lines.on('line', (l) => events.stderr(l));
      this.cleanup.push({ dispose: () => lines.close() });
    }

    void this.exited.then(() => this.dispose());
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get running(): boolean {
    return !this.hasExited;
  }

  /**
   * Ask the engine to checkpoint and exit (`run/stop`); if it has not exited after `graceMs`, kill its
   * process tree. Resolves with the checkpoint the engine reported (null if it had to be killed).
   */
  async stop(graceMs: number): Promise<string | null> {
    if (this.hasExited) return null;
    let checkpoint: string | null = null;
    const timer = new Promise<'timeout'>((resolve) => {
      const t = setTimeout(() => resolve('timeout'), graceMs);
      this.cleanup.push({ dispose: () => clearTimeout(t) });
    });
    const asked = this.conn
      .sendRequest<RunStopResult>(RpcMethods.stop, {})
      .then((r) => {
        checkpoint = r.checkpoint;
      })
      .catch(() => undefined); // the connection closes as the engine exits; the exit is what counts
    const outcome = await Promise.race([Promise.all([asked, this.exited]).then(() => 'exited' as const), timer]);
    if (outcome === 'timeout') {
      this.kill();
      await this.exited;
      return null;
    }
    return checkpoint;
  }

  /**
   * The window is closing: ask the engine to checkpoint and stop, then let it finish on its own. It runs in its own
   * process group and also stops when its pipes close (engine/cli/rpc.ts), within its own bounded grace, so the
   * host can exit at once without SIGKILLing a run in the middle of writing its checkpoint.
   */
  release(): void {
    if (this.hasExited) return;
    void this.conn.sendRequest(RpcMethods.stop, {}).catch(() => undefined);
    this.proc.unref();
  }

  /** SIGKILL the engine's whole process group (taskkill /T on Windows). */
  kill(): void {
    if (this.hasExited || this.proc.pid === undefined) return;
    try {
      if (process.platform === 'win32') {
        spawn('taskkill', ['/pid', String(this.proc.pid), '/T', '/F'], { windowsHide: true });
      } else {
        process.kill(-this.proc.pid, 'SIGKILL');
      }
    } catch {
      this.proc.kill('SIGKILL'); // the group is already gone; make sure the leader is too
    }
  }

  private dispose(): void {
    for (const d of this.cleanup.splice(0).reverse()) {
      try {
        d.dispose();
      } catch {
        // a connection already torn down by the exit throws on dispose; nothing is left to release
      }
    }
  }
}
