// JSON-RPC over stdio for the extension (DESIGN §7): notifications out, `run/stop` in.
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { RpcMethods, type RunStopResult } from '../../protocol';
import type { Reporter, RunController } from '../train/train';

export function rpcReporter(controller: RunController): { reporter: Reporter; connection: MessageConnection } {
  const connection = createMessageConnection(new StreamMessageReader(process.stdin), new StreamMessageWriter(process.stdout));
  connection.onRequest(RpcMethods.stop, async (): Promise<RunStopResult> => {
    const checkpoint = await controller.stop();
    return { ok: true, checkpoint };
  });
  // The extension host went away (crash, window closed without deactivate): checkpoint and stop rather than
  // train on unobserved or be killed mid-write, so the run directory ends as `stopped` and can be resumed.
  connection.onClose(() => void controller.stop());
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
