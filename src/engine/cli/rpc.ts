// JSON-RPC for the extension (design.md#protocol): notifications out, `run/stop` in. It runs on file descriptor 3, a pipe the
// extension opens for it and nothing else writes to: on stdout, one line printed by a reward module, a worker or a
// dependency made vscode-jsonrpc drop every later message, and a completed run read as "exited unexpectedly".
// stdout is left to whatever prints there; the extension logs it.
import { Socket } from 'node:net';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { RpcMethods, type RunStopResult } from '../../protocol';
import type { Reporter, RunController } from '../train/train';

/** The descriptor the extension's pipe arrives on (its spawn's stdio[3]). */
export const RPC_FD = 3;

/** How long an engine whose extension went away may take to finish its step and checkpoint. */
export const ORPHAN_GRACE_MS = 120_000;

export function rpcReporter(controller: RunController): { reporter: Reporter; connection: MessageConnection } {
  const channel = new Socket({ fd: RPC_FD, readable: true, writable: true });
  const connection = createMessageConnection(new StreamMessageReader(channel), new StreamMessageWriter(channel));
  connection.onRequest(RpcMethods.stop, async (): Promise<RunStopResult> => {
    const checkpoint = await controller.stop();
    return { ok: true, checkpoint };
  });
  // The extension host went away (crash, window closed without deactivate): checkpoint and stop rather than
  // train on unobserved or be killed mid-write, so the run directory ends as `stopped` and can be resumed.
  // A closed window gives no further word: stop after the current step, and if a step (a slow oracle, a large
  // model) still runs after ORPHAN_GRACE_MS, exit; the last checkpoint and run.json are already on disk.
  const orphaned = () => {
    void controller.stop();
    setTimeout(() => process.exit(143), ORPHAN_GRACE_MS).unref();
  };
  connection.onClose(orphaned);
  channel.on('end', orphaned);
  process.stdin.on('end', orphaned);
  connection.listen();
  const reporter: Reporter = {
    started: (p) => void connection.sendNotification(RpcMethods.started, p),
    progress: (p) => void connection.sendNotification(RpcMethods.progress, p),
    metrics: (runDir, row) => void connection.sendNotification(RpcMethods.metrics, { runDir, row }),
    log: (level, message) => void connection.sendNotification(RpcMethods.log, { level, message }),
    finished: (p) => void connection.sendNotification(RpcMethods.finished, p),
  };
  return { reporter, connection };
}
