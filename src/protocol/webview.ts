// What every webview protocol is made of (design.md#shape, GitLens' protocol pattern). Each webview has its own
// module next to this one — sweep_view.ts, metrics_view.ts, analysis_view.ts — that declares its messages and
// their runtime checks; the panel in src/extension/panels/ and the bundle in src/webviews/ import that same
// file, so a renamed field breaks the build, and a malformed message is dropped, not acted on.
import type { Check } from './validate';

/** Host → webview. `P` is what the webview receives. */
export interface IpcNotification<M extends string, P> {
  readonly kind: 'notification';
  readonly method: M;
  readonly params: P;
}

/** Webview → host. */
export interface IpcCommand<M extends string, P> {
  readonly kind: 'command';
  readonly method: M;
  readonly params: P;
}

/** A webview's whole protocol: what the host may send it, what it may send the host, what it persists. */
export interface WebviewProtocol<ToWebview extends IpcNotification<string, unknown>, ToHost extends IpcCommand<string, unknown>, State> {
  toWebview: ToWebview;
  toHost: ToHost;
  /** Kept by `vscode.setState` and handed back to the host's `WebviewPanelSerializer` after a reload. */
  state: State;
}

/** How one end checks what the other sent: one `messageCheck` per direction. */
export interface ProtocolChecks<P extends WebviewProtocol<IpcNotification<string, unknown>, IpcCommand<string, unknown>, unknown>> {
  toHost: (v: unknown) => { ok: true; message: P['toHost'] } | { ok: false; why: string };
  toWebview: (v: unknown) => { ok: true; message: P['toWebview'] } | { ok: false; why: string };
  /** What a restored panel's serializer was handed is checked too: it was written by an older page. */
  state: Check<P['state']>;
}
