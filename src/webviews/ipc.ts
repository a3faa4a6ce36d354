// The webview half of the shared machinery: the VS Code API acquired once, typed by the panel's protocol
// module (src/protocol/*_view.ts) and checked at runtime, and the page's CSS adopted as a constructable stylesheet so the CSP needs no
// 'unsafe-inline'.
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from '../protocol/webview';

interface VsCodeApi<S> {
  postMessage(message: unknown): void;
  getState(): S | undefined;
  setState(state: S): void;
}
declare function acquireVsCodeApi<S>(): VsCodeApi<S>;

type AnyProtocol = WebviewProtocol<IpcNotification<string, unknown>, IpcCommand<string, unknown>, unknown>;

export interface Host<P extends AnyProtocol> {
  post(message: P['toHost']): void;
  onMessage(handler: (message: P['toWebview']) => void): void;
  getState(): P['state'] | undefined;
  setState(state: P['state']): void;
}

export function connect<P extends AnyProtocol>(checks: ProtocolChecks<P>): Host<P> {
  const api = acquireVsCodeApi<P['state']>();
  return {
    post: (m) => api.postMessage(m),
    onMessage: (handler) =>
      window.addEventListener('message', (e: MessageEvent<unknown>) => {
        // Only the extension host should post into this frame; anything else, or a message of the wrong shape, is dropped.
        const r = checks.toWebview(e.data);
        if (r.ok) handler(r.message);
        else console.warn(`credit-lens: dropped a message (${r.why})`);
      }),
    // State saved by an older version of the page may not have today's shape.
    getState: () => {
      const s = api.getState();
      return checks.state(s) ? s : undefined;
    },
    setState: (s) => api.setState(s),
  };
}

export function adoptCss(css: string): void {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(css);
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}
