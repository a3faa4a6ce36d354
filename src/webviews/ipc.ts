// The webview half of the shared machinery: the VS Code API acquired once, typed by the panel's protocol
// (src/protocol/webview.ts), and the page's CSS adopted as a constructable stylesheet so the CSP needs no
// 'unsafe-inline'.
import type { IpcCommand, IpcNotification, WebviewProtocol } from '../protocol/webview';

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

export function connect<P extends AnyProtocol>(): Host<P> {
  const api = acquireVsCodeApi<P['state']>();
  return {
    post: (m) => api.postMessage(m),
    onMessage: (handler) => window.addEventListener('message', (e: MessageEvent<P['toWebview']>) => {
      // Only the extension host posts into this frame; anything else (a stray extension-less message) is ignored.
      if (e.data && typeof e.data === 'object' && e.data.kind === 'notification') handler(e.data);
    }),
    getState: () => api.getState(),
    setState: (s) => api.setState(s),
  };
}

export function adoptCss(css: string): void {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(css);
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}
