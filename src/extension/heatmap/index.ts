// The token heatmap: episode documents, their painting, the hover, the status-bar item and the
// commands, registered on the extension's cleanup list.
import * as vscode from 'vscode';
import type { Ctx } from '../ctx';
import { compareWith } from './compare';
import { EPISODE_SCHEME, EpisodeStore } from './episode_doc';
import { EpisodeHoverProvider } from './hover';
import { navigate, type Move } from './navigate';
import { probeEpisodeCommand } from './probe';
import { openRollouts } from './open_rollouts';
import { HeatmapState, Painter, type PaintResult } from './paint';
import { formatScale, metricDef, METRICS } from './scales';

export function registerHeatmap(ctx: Ctx): void {
  const store = ctx.pushExtCleanup(new EpisodeStore(ctx.tables));
  const state = ctx.pushExtCleanup(new HeatmapState(ctx.extCtx.globalState));
  const painter = ctx.pushExtCleanup(new Painter(store, state, ctx.log));
  ctx.pushExtCleanup(vscode.workspace.registerFileSystemProvider(EPISODE_SCHEME, store, { isReadonly: true, isCaseSensitive: true }));
  ctx.pushExtCleanup(vscode.languages.registerHoverProvider({ scheme: EPISODE_SCHEME }, new EpisodeHoverProvider(store, (v) => painter.metricFor(v))));

  const reg = (id: string, fn: (...args: never[]) => unknown) => ctx.registerCommand(id, fn as (...args: never[]) => unknown);

  reg('creditLens.openEpisode', async (arg?: unknown) => {
    await openRollouts(ctx.tables, arg);
    // Browse Rollouts' search hit: the token it starts in, selected and scrolled to
    const position = (arg as { position?: unknown } | undefined)?.position;
    if (typeof position === 'number') revealToken(store, position);
  });
  reg('creditLens.openRollouts', (arg?: unknown) => openRollouts(ctx.tables, arg));
  reg('creditLens.heatmap.compareWith', (arg?: unknown) => compareWith(store, arg));
  reg('creditLens.heatmap.probeEpisode', () => probeEpisodeCommand(ctx, store, painter));
  reg('creditLens.heatmap.cycleMetric', () => painter.cycleMetric(1));
  reg('creditLens.heatmap.chooseMetric', () => chooseMetric(painter));
  reg('creditLens.heatmap.toggleNormalization', () => state.setNormalization(state.normalization === 'episode' ? 'step' : 'episode'));
  for (const move of ['nextEpisode', 'previousEpisode', 'nextStep', 'previousStep'] as Move[]) {
    reg(`creditLens.heatmap.${move}`, () => navigate(store, move));
  }
  // For tests and benchmarks: what the last paint did and how long it took in this extension host.
  reg('creditLens._lastPaint', (): PaintResult | null => painter.last);

  painter.paintVisible();
}

async function chooseMetric(painter: Painter): Promise<void> {
  const available = painter.availableMetrics();
  const view = painter.activeView();
  const current = view ? painter.metricFor(view) : painter.state.metric;
  const items = available.map(metricDef).map((m) => ({
    label: m.label,
    description: `${m.signed ? 'diverging' : 'sequential'}${m.id === current && view ? ` · ${formatScale(painter.scaleOf(view, m.id))}` : ''}`,
    detail: m.description,
    picked: m.id === current,
    id: m.id,
  }));
  const missing = METRICS.filter((m) => !available.includes(m.id)).map((m) => m.label);
  const pick = await vscode.window.showQuickPick(items, {
    title: `Heatmap metric (now ${metricDef(current).label})`,
    placeHolder: missing.length ? `this run logs no ${missing.join(', ')}` : 'paint the tokens by',
    matchOnDetail: true,
  });
  if (pick) await painter.state.setMetric(pick.id);
}

/** Select the token at `position` of the active episode document once its view is built (its text may still be loading). */
function revealToken(store: EpisodeStore, position: number, tries = 50): void {
  const ed = vscode.window.activeTextEditor;
  const view = ed && ed.document.uri.scheme === EPISODE_SCHEME ? store.view(ed.document.uri) : undefined;
  if (!ed || !view || ed.document.getText() !== view.text) {
    if (tries > 0) setTimeout(() => revealToken(store, position, tries - 1), 100);
    return;
  }
  const i = Math.min(position, view.rows.length - 1);
  if (i < 0) return;
  const range = new vscode.Range(ed.document.positionAt(view.completionOffset + view.starts[i]), ed.document.positionAt(view.completionOffset + view.ends[i]));
  ed.selection = new vscode.Selection(range.start, range.end);
  ed.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}
