// Shared machinery for every webview panel (GitLens' security model, the samples' panel pattern):
// a per-load nonce in a strict CSP, local resources limited to the bundle folder, the bundle built from
// `src/webviews/<name>.main.ts`, and messages typed and checked by the panel's protocol module in src/protocol/.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from '../protocol/webview';

type AnyProtocol = WebviewProtocol<IpcNotification<string, unknown>, IpcCommand<string, unknown>, unknown>;

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return {
    enableScripts: true,
    localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist', 'webviews')],
    // Rebuilding a sortable table from its state is cheap; keeping a hidden iframe alive is not free.
    retainContextWhenHidden: false,
  };
}

/**
 * The page: no inline script or style, only the nonce'd bundle. Lit components style themselves through
 * constructable stylesheets, which CSP's style-src does not govern, and the page's own CSS is adopted the
 * same way by the bundle.
 */
export function webviewHtml(webview: vscode.Webview, extensionUri: vscode.Uri, bundle: string, title: string): string {
  const nonce = randomBytes(16).toString('base64');
  const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'dist', 'webviews', `${bundle}.js`));
  const csp = [
    `default-src 'none'`,
    `img-src ${webview.cspSource} data:`,
    `font-src ${webview.cspSource}`,
    `style-src ${webview.cspSource} 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(title)}</title>
</head>
<body>
<main id="root" aria-busy="true"></main>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

/**
 * A webview panel speaking protocol `P`. Subclasses implement `onMessage`; everything registered through
 * `disposables` dies with the panel.
 */
export abstract class WebviewPanelHost<P extends AnyProtocol> implements vscode.Disposable {
  protected readonly disposables: vscode.Disposable[] = [];
  private disposed = false;

  protected constructor(
    readonly panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    bundle: string,
    checks: ProtocolChecks<P>,
    log?: vscode.LogOutputChannel,
  ) {
    panel.webview.options = webviewOptions(extensionUri);
    panel.webview.html = webviewHtml(panel.webview, extensionUri, bundle, panel.title);
    panel.onDidDispose(() => this.dispose(), null, this.disposables);
    panel.webview.onDidReceiveMessage(
      (m: unknown) => {
        const r = checks.toHost(m);
        if (r.ok) this.onMessage(r.message);
        else log?.warn(`${bundle} webview: dropped a message (${r.why})`);
      },
      null,
      this.disposables,
    );
  }

  protected abstract onMessage(message: P['toHost']): void;

  protected post(message: P['toWebview']): void {
    if (!this.disposed) void this.panel.webview.postMessage(message);
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.panel.dispose();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}
