// What the dashboard's controls do: a message to the host (open a run, compare, export, choose the comparison's step
// or baseline), or a change of the page's own view, which the app saves and redraws.
import type { MetricsProtocol } from '../../protocol/metrics_view';
import type { MetricChart } from '../charts';
import type { Host } from '../ipc';
import { chartCsv, type ChartView } from '../metrics_series';
import { colourOf, runLabel, type DashboardState } from './state';

export interface DashboardActions {
  openRun(runDir: string): void;
  compareWith(runDirs: string[]): void;
  openAnalysis(runDir: string): void;
  setStep(step: number | null): void;
  setBaseline(group: string): void;
  exportPng(chart: MetricChart): void;
  exportCsv(chart: MetricChart): void;
  setView(view: ChartView): void;
}

export function dashboardActions(host: Host<MetricsProtocol>, state: DashboardState, onView: () => void): DashboardActions {
  const command = (m: MetricsProtocol['toHost']) => host.post(m);
  const labels = () => state.runs.map((r) => runLabel(state, r));
  return {
    openRun: (runDir) => command({ kind: 'command', method: 'metrics/openRun', params: { runDir } }),
    compareWith: (runDirs) => command({ kind: 'command', method: 'metrics/compareWith', params: { runDirs } }),
    openAnalysis: (runDir) => command({ kind: 'command', method: 'metrics/openAnalysis', params: { runDir } }),
    setStep: (step) => command({ kind: 'command', method: 'metrics/setStep', params: { step } }),
    setBaseline: (group) => command({ kind: 'command', method: 'metrics/setBaseline', params: { group } }),
    exportPng(chart) {
      const title = `${chart.spec.title} — ${state.mode === 'compare' ? labels().join(' vs ') : labels()[0]}`;
      const legend = chart.aligned.columns.map((c, index) => ({ label: c.label, colour: colourOf(state, { run: c.run, index }) }));
      command({ kind: 'command', method: 'metrics/exportPng', params: { chartId: chart.spec.id, title, dataUrl: chart.toPng(title, legend) } });
    },
    exportCsv(chart) {
      const csv = chartCsv(chart.spec, chart.aligned, labels());
      command({ kind: 'command', method: 'metrics/exportCsv', params: { chartId: chart.spec.id, title: chart.spec.title, csv } });
    },
    setView(view) {
      state.view = view;
      host.setState({ mode: state.mode, runDirs: state.runs.map((r) => r.data.runDir), view });
      onView();
    },
  };
}
