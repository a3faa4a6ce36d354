// JSON-RPC for the extension (DESIGN §7): notifications out, `run/stop` in. It runs on file descriptor 3, a pipe the
// extension opens for it and nothing else writes to: on stdout, one line printed by a reward module, a worker or a
// dependency made vscode-jsonrpc drop every later message, and a completed run read as "exited unexpectedly".
// stdout is left to whatever prints there; the extension logs it.
import { Socket } from 'node:net';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { RpcMethods, type RunStopResult } from '../../protocol';
import type { Reporter, RunController } from '../train/train';

/** The descriptor the extension's pipe arrives on (its spawn's stdio[3]). */
export const RPC_FD = 3;

export function rpcReporter(controller: RunController): { reporter: Reporter; connection: MessageConnection } {
  const channel = new Socket({ fd: RPC_FD, readable: true, writable: true });
  const connection = createMessageConnection(new StreamMessageReader(channel), new StreamMessageWriter(channel));
  connection.onRequest(RpcMethods.stop, async (): Promise<RunStopResult> => {
    const checkpoint = await controller.stop();
    return { ok: true, checkpoint };
  });
  // The extension host went away (crash, window closed without deactivate): checkpoint and stop rather than
  // train on unobserved or be killed mid-write, so the run directory ends as `stopped` and can be resumed.
  connection.onClose(() => void controller.stop());
  channel.on('end', () => void controller.stop());
  process.stdin.on('end', () => void controller.stop());
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
