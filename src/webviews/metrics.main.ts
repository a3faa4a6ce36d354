// The run dashboard and the run comparison: one bundle, one page (src/extension/panels/metrics_panel.ts);
// which of the two it is comes with its `metrics/init` message. The page is the dashboard/ folder.
import { mountDashboard } from './dashboard/app';

mountDashboard();
