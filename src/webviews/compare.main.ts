// Run comparison: several runs' metrics overlaid, one colour per run (src/extension/panels/compare_panel.ts).
import { mountMetricsView } from './metrics_view';

mountMetricsView('compare');
