// One hover provider for every episode document (GitLens, STYLE.md): the token under the pointer is found by
// binary search over the rebuilt offsets and its row read from the step's columns, instead of attaching a
// hoverMessage to each of thousands of decorated ranges.
import * as vscode from 'vscode';
import { positionOf, tokenAt, type HeatmapEpisode } from './episode';
import type { EpisodeStore } from './episode_doc';
import { escapeMarkdown, inlineCode } from '../markdown';
import { formatValue, metricDef, type MetricId } from './scales';

export interface TokenFields {
  text: string;
  id: number;
  position: number;
  section: string;
  tokenType: string;
  logprob: number;
  entropy: number;
  advantage: number;
  weight: number;
  effectiveAdvantage: number;
  contribution: number;
  attribution: number | null;
  importance: number | null;
  /** the extra columns (an imported trainer's per-token values) with a value at this token */
  extra: [name: string, value: number][];
}

/** Every logged field of the i-th token of a view; attribution/importance null where the run has none. */
export function tokenFields(view: HeatmapEpisode, i: number): TokenFields {
  const t = view.tables.tokens;
  const r = view.rows[i];
  const opt = (c: Float32Array | null) => (c && !Number.isNaN(c[r]) ? c[r] : null);
  return {
    text: t.token[r],
    id: t.token_id[r],
    position: t.position[r],
    section: t.section[r],
    tokenType: t.token_type[r],
    logprob: t.logprob[r],
    entropy: t.entropy[r],
    advantage: t.advantage[r],
    weight: t.weight[r],
    effectiveAdvantage: t.effective_advantage[r],
    contribution: t.contribution[r],
    attribution: opt(t.attribution),
    importance: opt(t.importance),
    extra: Object.entries(t.extra ?? {})
      .filter(([, c]) => !Number.isNaN(c[r]))
      .map(([k, c]) => [k, c[r]]),
  };
}

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
    const rows: [string, string, MetricId | null][] = [
      ['log-prob ℓ', formatValue(f.logprob), 'logprob'],
      ['entropy', formatValue(f.entropy), 'entropy'],
      ['advantage A', formatValue(f.advantage), null],
      ['weight w', formatValue(f.weight), 'weight'],
      ['effective advantage Â', formatValue(f.effectiveAdvantage), 'effective_advantage'],
      ['contribution c', formatValue(f.contribution), 'contribution'],
    ];
    if (f.attribution !== null) rows.push(['attribution α', formatValue(f.attribution), 'attribution']);
    if (f.importance !== null) rows.push(['importance ρ', formatValue(f.importance), 'importance']);
    for (const [name, value] of f.extra) rows.push([escapeMarkdown(metricDef(`extra.${name}`).label), formatValue(value), `extra.${name}`]);
    const md = new vscode.MarkdownString();
    md.appendMarkdown(
      `${inlineCode(shownText(f.text))} — token id ${f.id} · position ${f.position} · section ${escapeMarkdown(f.section)} · ${escapeMarkdown(f.tokenType)}\n\n`,
    );
    md.appendMarkdown('| | |\n|---|---:|\n');
    // The painted metric is in bold, so the hover says which number the colour stands for.
    for (const [name, value, metric] of rows) md.appendMarkdown(metric === painted ? `| **${name}** | **${value}** |\n` : `| ${name} | ${value} |\n`);
    const [l0, c0] = positionOf(view.lineStarts, view.completionOffset + view.starts[i]);
    const [l1, c1] = positionOf(view.lineStarts, view.completionOffset + view.ends[i]);
    return new vscode.Hover(md, new vscode.Range(l0, c0, l1, c1));
  }
}
