// Run comparison: several runs' charts overlaid, one colour per run; runs can be added in place.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import { listEvalSteps } from '../../engine/rundir/eval_table';
import { readRunInfo } from '../../engine/rundir/rundir';
import type { MetricsComparison, MetricsPanelState } from '../../protocol/metrics_view';
import { isTraining } from '../run_status';
import { MetricsPanel, stateRunDirs, type PanelDeps } from './metrics_panel';
import { runLegendNames } from '../../protocol/run_names';

export const COMPARE_VIEW_TYPE = 'creditLens.compareRuns';

export class ComparePanel extends MetricsPanel {
  private static readonly open = new Set<ComparePanel>();

  /** The panel already showing exactly these runs, else a new one. */
  static show(deps: PanelDeps, runDirs: string[]): ComparePanel {
    const dirs = [...new Set(runDirs)];
    const key = [...dirs].sort().join('\n');
    const existing = [...ComparePanel.open].find((p) => !p.isDisposed && p.key === key);
    if (existing) {
      existing.panel.reveal(undefined, false);
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(COMPARE_VIEW_TYPE, `Compare ${dirs.length} runs`, vscode.ViewColumn.Active, { enableScripts: true });
    return new ComparePanel(panel, deps, dirs);
  }

  static serializer(deps: PanelDeps): vscode.WebviewPanelSerializer<MetricsPanelState> {
    return {
      async deserializeWebviewPanel(panel, state) {
        const dirs = stateRunDirs(state);
        if (!dirs.length) {
          panel.dispose();
          return;
        }
        new ComparePanel(panel, deps, dirs);
      },
    };
  }

  /** The configuration the others are tested against: chosen on the page, else plain GRPO's, else the first run's. */
  private baseline: string | null = null;

  private constructor(panel: vscode.WebviewPanel, deps: PanelDeps, runDirs: string[]) {
    super(panel, deps, 'compare', runDirs);
    ComparePanel.open.add(this);
    this.disposables.push({ dispose: () => ComparePanel.open.delete(this) });
    this.disposables.push(deps.analysis.subscribe(() => this.isReady && this.afterInit()));
  }

  protected override afterInit(): void {
    this.post({ kind: 'notification', method: 'metrics/comparison', params: this.comparison() });
  }

  protected override onStatusChange(): void {
    this.afterInit();
  }

  protected override setBaseline(group: string): void {
    this.baseline = group;
    this.afterInit();
  }

  /** The step picked on the page (null: the runs' last evals); kept while it is still one every run evaluated. */
  private step: number | null = null;

  protected override setStep(step: number | null): void {
    this.step = step;
    this.afterInit();
  }

  /**
   * The compared runs grouped by configuration (their names without `-seedN`), every other group against the
   * baseline's on the same eval instances, through `credit-lens compare` (in the background; this is called again
   * when it is done). Runs still training are left out until they end.
   */
  private comparison(): MetricsComparison {
    const runs = this.runDirs.flatMap((dir) => {
      const info = readRunInfo(dir);
      return info ? [{ dir, name: info.name, strategy: info.strategy ?? null, ready: !isTraining(info.status), ended: info.ended ?? '' }] : [];
    });
    const ready = runs.filter((r) => r.ready);
    const evalSteps = ready.map((r) => listEvalSteps(r.dir));
    const steps = evalSteps.length ? evalSteps[0].filter((s) => evalSteps.every((l) => l.includes(s))) : [];
    const step = this.step !== null && steps.includes(this.step) ? this.step : null;
    const c = this.deps.analysis.compareGroups(runs, this.baseline, ready.map((r) => r.ended).join(','), step ?? undefined);
    const training = runs.length - c.ready;
    const skipped = training
      ? `${training} run${training === 1 ? '' : 's'} still training ${training === 1 ? 'is' : 'are'} left out until ${training === 1 ? 'it ends' : 'they end'}.`
      : '';
    const note = {
      single: 'Add runs of another configuration (for example a second strategy, each with its seeds) to test their difference on the same eval instances.',
      waiting: `Waiting for ended runs of ${c.baseline} and another configuration. ${skipped}`.trim(),
      running: `Comparing with ${c.baseline} on the same eval instances…`,
      failed: `credit-lens compare failed: ${c.error}`,
      done: skipped,
    }[c.state];
    return { groups: c.groups, baseline: c.baseline, steps, step, report: c.report, note };
  }

  protected retitle(): void {
    // the names the legend shows: what tells the runs apart, not their folders' timestamps
    const names = runLegendNames(this.runDirs.map((d) => ({ id: basename(d), name: readRunInfo(d)?.name ?? basename(d) })));
    this.panel.title = names.length <= 2 ? `Compare: ${names.join(' vs ')}` : `Compare ${names.length} runs`;
  }

  protected compareWith(runDirs: string[]): void {
    this.setRuns([...this.runDirs, ...runDirs]);
  }
}
