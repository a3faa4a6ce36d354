// The charts, one card each: a uPlot chart per spec of metrics_series.ts, created as its first value arrives and kept
// in chartsFor's order, with its PNG and CSV buttons, its "before GRPO" caption and its empty state.
import { html, render } from 'lit';
import { MetricChart, type ChartTheme } from '../../charts';
import { alignChart, beforeGrpo, chartsFor, emptyState, firstVisibleX, type ChartSpec } from '../../metrics_series';
import type { DashboardActions } from '../actions';
import { beforeGrpoText, colourOf, runLabel, xLabel, type DashboardState } from '../state';

interface Card {
  chart: MetricChart;
  card: HTMLElement;
  caption: HTMLElement;
  empty: HTMLElement;
}

export class ChartGrid {
  private readonly cards = new Map<string, Card>();

  constructor(
    readonly element: HTMLElement,
    private readonly state: DashboardState,
    private readonly actions: DashboardActions,
  ) {}

  private card(spec: ChartSpec): Card {
    const s = this.state;
    const el = document.createElement('section');
    el.className = 'chart';
    el.dataset.chart = spec.id;
    const title = document.createElement('header');
    const caption = document.createElement('p');
    caption.className = 'muted before-grpo';
    const empty = document.createElement('p');
    empty.className = 'empty-state';
    empty.hidden = true;
    const plot = document.createElement('div');
    plot.className = 'plot';
    el.append(title, caption, empty, plot);
    const chart = new MetricChart(plot, spec, s.theme, { colour: (c) => colourOf(s, c), xLabel: (x) => xLabel(s, x) });
    render(
      html`<h2 title=${spec.hint}>${spec.title}</h2>
        <span class="tools">
          <vscode-button secondary class="png" title="Save this chart as a PNG image" @click=${() => this.actions.exportPng(chart)}>PNG</vscode-button>
          <vscode-button secondary class="csv" title="Save this chart's data as CSV" @click=${() => this.actions.exportCsv(chart)}>CSV</vscode-button>
        </span>`,
      title,
    );
    return { chart, card: el, caption, empty };
  }

  /** Charts appear as their first value arrives (e.g. eval success), in the fixed order of chartsFor. */
  draw(): void {
    const s = this.state;
    const specs = chartsFor(s.runs.map((r) => r.points));
    const inputs = s.runs.map((r) => ({ label: runLabel(s, r), points: r.points }));
    const from = firstVisibleX(
      s.runs.map((r) => r.points),
      s.view,
    );
    let prev: HTMLElement | null = null;
    for (const spec of specs) {
      let entry = this.cards.get(spec.id);
      if (!entry) {
        entry = this.card(spec);
        this.cards.set(spec.id, entry);
        if (prev) prev.after(entry.card);
        else this.element.prepend(entry.card);
      }
      entry.chart.update(alignChart(spec, inputs, s.view));
      entry.card.dataset.points = String(entry.chart.pointCount);
      entry.card.dataset.firstX = String(entry.chart.aligned.x[0] ?? '');
      // Not drawn at x = 0 when the charts start at GRPO step 1: the starting point said in words instead.
      const start = from > 0 ? beforeGrpo(spec, inputs) : [];
      entry.caption.textContent = start.length ? `before GRPO: ${beforeGrpoText(spec, start, s.runs.length)}` : '';
      entry.caption.hidden = !start.length;
      const why = emptyState(
        spec.id,
        s.runs.map((r) => r.data),
      );
      entry.empty.textContent = why ?? '';
      entry.empty.hidden = why === null;
      entry.card.classList.toggle('is-empty', why !== null);
      prev = entry.card;
    }
    document.body.dataset.charts = String(specs.length);
  }

  setTheme(theme: ChartTheme): void {
    for (const { chart } of this.cards.values()) chart.setTheme(theme);
  }

  resize(): void {
    for (const { chart } of this.cards.values()) chart.resize();
  }

  /** Every chart removed (a new init: other runs, another mode). */
  clear(): void {
    for (const { chart, card } of this.cards.values()) {
      chart.destroy();
      card.remove();
    }
    this.cards.clear();
  }
}
