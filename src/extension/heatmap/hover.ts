// One hover provider for every episode document (as GitLens does): the token under the pointer is found by
// binary search over the rebuilt offsets and its row read from the step's columns, instead of attaching a
// hoverMessage to each of thousands of decorated ranges.
import * as vscode from 'vscode';
import { positionOf, tokenAt, tokenFields, type HeatmapEpisode } from './episode';
import type { EpisodeStore } from './episode_doc';
import { escapeMarkdown, inlineCode } from '../markdown';
import { formatValue, isProbeMetric, type MetricId } from './scales';

const isMc = (m: MetricId | null) => m !== null && isProbeMetric(m);

/** A token's text as code, with whitespace made visible: a hover of " " or "\n" would otherwise look empty. */
function shownText(s: string): string {
  const visible = s.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/ /g, '·');
  return visible.length ? visible : '(empty)';
}

export class EpisodeHoverProvider implements vscode.HoverProvider {
  constructor(
    private readonly store: EpisodeStore,
    private readonly metricOf: (view: HeatmapEpisode) => MetricId,
  ) {}

  provideHover(doc: vscode.TextDocument, pos: vscode.Position): vscode.Hover | undefined {
    const view = this.store.view(doc.uri);
    if (!view) return undefined;
    const offset = doc.offsetAt(pos) - view.completionOffset;
    const i = tokenAt(view.starts, view.ends, offset);
    if (i < 0) return undefined;
    const f = tokenFields(view, i);
    const painted = this.metricOf(view);
    // Painted by a Monte Carlo metric: V, its se, δ and M first (a hover taller than the window is cut at the bottom).
    const mcFirst = isProbeMetric(painted);
    const values = mcFirst ? [...f.values].sort((a, b) => Number(isMc(b.metric)) - Number(isMc(a.metric))) : f.values;
    const rows = values.map((v) => [escapeMarkdown(v.label), formatValue(v.value), v.metric] as const);
    const md = new vscode.MarkdownString();
    md.appendMarkdown(
      `${inlineCode(shownText(f.text))} — token id ${f.id} · position ${f.position} · section ${escapeMarkdown(f.section)} · ${escapeMarkdown(f.tokenType)}\n\n`,
    );
    md.appendMarkdown('| | |\n|---|---:|\n');
    // The painted metric is in bold, so the hover says which number the colour stands for.
    for (const [name, value, metric] of rows) md.appendMarkdown(metric === painted ? `| **${name}** | **${value}** |\n` : `| ${name} | ${value} |\n`);
    for (const note of f.notes) md.appendMarkdown(`\n_${escapeMarkdown(note)}_\n`);
    const [l0, c0] = positionOf(view.lineStarts, view.completionOffset + view.starts[i]);
    const [l1, c1] = positionOf(view.lineStarts, view.completionOffset + view.ends[i]);
    return new vscode.Hover(md, new vscode.Range(l0, c0, l1, c1));
  }
}
