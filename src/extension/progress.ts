// A long engine command (an import, a probe) in a notification: a bar that follows its `{"progress"}` lines, a message
// saying what is done, and Cancel, which aborts the command (the engine keeps what it finished).
import * as vscode from 'vscode';
import { CancelledError } from './engine_cli';

/**
 * Runs `command` with a cancellable progress notification titled `title`; `message` says what the done/total counts
 * are. Resolves with the command's answer, or null where the user cancelled. Other errors are the caller's to show.
 */
export async function withCancellableProgress<T>(
  title: string,
  message: (done: number, total: number) => string,
  command: (onProgress: (done: number, total: number) => void, signal: AbortSignal) => Promise<T>,
): Promise<T | null> {
  try {
    return await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, async (progress, token) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      let shown = 0;
      return command((done, total) => {
        const pct = total ? (100 * done) / total : 0;
        progress.report({ increment: pct - shown, message: message(done, total) });
        shown = pct;
      }, abort.signal);
    });
  } catch (e) {
    if (e instanceof CancelledError) return null;
    throw e;
  }
}
