// Every webview panel's commands and serializers (each panel's class is in this folder). Each command takes what its callers hand it — a Runs-tree
// node (and, from a multi-selection, every selected node), a run directory string, a Uri — and asks with a
// QuickPick when called bare from the palette.
import { basename } from 'node:path';
import * as vscode from 'vscode';
import type { Ctx } from '../ctx';
import { ANALYSIS_VIEW_TYPE, AnalysisPanel, hasTokenTables, type AnalysisDeps } from './analysis_panel';
import { BROWSE_VIEW_TYPE, BrowsePanel } from './browse_panel';
import { COMPARE_VIEW_TYPE, ComparePanel } from './compare_panel';
import { DASHBOARD_VIEW_TYPE, DashboardPanel } from './dashboard_panel';
import type { PanelDeps } from './metrics_panel';
import { SWEEP_VIEW_TYPE, SweepPanel } from './sweep_panel';
import { runDirOf, runDirsOf } from '../args';
import { pickRunDir, pickRunDirs } from '../pick';

export function registerPanels(ctx: Ctx): void {
  const deps: PanelDeps & AnalysisDeps = {
    extensionUri: ctx.extensionUri,
    runs: ctx.runs,
    log: ctx.log,
    cli: ctx.engineCli,
    runWatcher: ctx.runWatcher,
    analysis: ctx.analysis,
  };
  const reg = (id: string, fn: (...args: unknown[]) => unknown) => ctx.registerCommand(id, fn as (...args: never[]) => unknown);

  reg('creditLens.openDashboard', async (arg) => {
    const runDir = runDirOf(arg) ?? (await pickRunDir('open the dashboard of'));
    if (runDir) DashboardPanel.show(deps, runDir);
  });

  reg('creditLens.compareRuns', async (arg, selection) => {
    let dirs = runDirsOf(arg, selection);
    if (dirs.length === 1) dirs = [...dirs, ...(await pickRunDirs(`compare ${basename(dirs[0])} with`, { exclude: dirs }))];
    else if (!dirs.length) dirs = await pickRunDirs('runs to compare', { minimum: 2 });
    if (dirs.length < 2) {
      if (dirs.length) void vscode.window.showInformationMessage('Credit Lens: pick at least one more run to compare with.');
      return;
    }
    ComparePanel.show(deps, dirs);
  });

  reg('creditLens.openAnalysis', async (arg, baseline) => {
    const runDir = runDirOf(arg) ?? (await pickRunDir('analyse', { filter: hasTokenTables }));
    if (runDir) AnalysisPanel.show(deps, runDir, { baselineDir: typeof baseline === 'string' ? baseline : undefined });
  });

  const browse = { extensionUri: ctx.extensionUri, log: ctx.log, queries: ctx.queries };
  reg('creditLens.browseRollouts', async (arg) => {
    const runDir = runDirOf(arg) ?? (await pickRunDir('browse the rollouts of', { filter: hasTokenTables }));
    if (runDir) BrowsePanel.show(browse, runDir);
  });
  ctx.pushExtCleanup(vscode.window.registerWebviewPanelSerializer(BROWSE_VIEW_TYPE, BrowsePanel.serializer(browse)));

  ctx.pushExtCleanup(vscode.window.registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, DashboardPanel.serializer(deps)));
  ctx.pushExtCleanup(vscode.window.registerWebviewPanelSerializer(COMPARE_VIEW_TYPE, ComparePanel.serializer(deps)));
  ctx.pushExtCleanup(vscode.window.registerWebviewPanelSerializer(ANALYSIS_VIEW_TYPE, AnalysisPanel.serializer(deps)));
  ctx.pushExtCleanup(vscode.window.registerWebviewPanelSerializer(SWEEP_VIEW_TYPE, SweepPanel.serializer(ctx)));
}
