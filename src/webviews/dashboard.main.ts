// The run dashboard: one run's metrics, live while it trains (src/extension/panels/dashboard_panel.ts).
import { mountMetricsView } from './metrics_view';

mountMetricsView('dashboard');
