// The Runs view: config → run → logged step → episode (sorted by reward). Runs come from disk (so runs
// trained elsewhere and runs from before a reload appear) merged with this window's live and queued runs.
import { statSync } from 'node:fs';
import { basename, join } from 'node:path';
import * as vscode from 'vscode';
import type { MetricsRow, RunInfo } from '../protocol/index';
import { ENGINE_LOG, listLoggedSteps, readMetrics, stepFile } from '../engine/rundir/rundir';
import { onSettingChange } from './vscode_settings';
import type { RunDirWatcher } from './run_watcher';
import { codeBlock, escapeMarkdown, inlineCode } from './markdown';
import { engineAlive, findConfigs, runRoots, scanRuns } from './discovery';
import { percent, summarizeMetrics, type MetricsSummary } from './metrics_summary';
import { shortRunNames } from '../protocol/run_names';
import { isEnded, isTraining, placeWarmStarts, startedShort, type LiveStatus } from './run_status';
import { runTooltip } from './run_tooltip';
import { isResumable, type LiveRun, type RunManager } from './runs';
import { slurmTaskActive } from './slurm_status';
import type { SweepManager } from './sweeps';
import type { TableReader } from './worker_client';
import { formatFixed } from '../protocol/number_format';

export interface ConfigNode {
  kind: 'config';
  key: string;
  label: string;
  configPath: string | null;
  runs: RunNode[];
}
export interface RunNode {
  kind: 'run';
  runDir: string | null;
  info: RunInfo | null;
  live: LiveRun | null;
  status: LiveStatus;
  /** A `running` run.json whose engine process is gone (its window closed or crashed). */
  interrupted: boolean;
  /** run.json exists but cannot be used: why (the run is listed, not opened) */
  unreadable?: string;
  /** what the row is labelled by: the run's name without what every run of its config shares (run_status.ts) */
  short?: string;
  /** a shared SFT warm start, shown under the runs that start from it */
  warmStart?: boolean;
  /** A run of a Slurm sweep: its array task, Slurm's state and pending reason, and which sweep and task it is. */
  slurm?: { job: string; state: string | null; reason: string | null; sweepId: string; index: number; name: string };
}
export interface StepNode {
  kind: 'step';
  runDir: string;
  step: number;
  row: MetricsRow | null;
}
export interface EpisodeNode {
  kind: 'episode';
  runDir: string;
  step: number;
  episode: number;
  reward: number;
  success: boolean;
  prompt: string;
  completion: string;
}
export type RunsTreeNode = ConfigNode | RunNode | StepNode | EpisodeNode;

interface MetricsCacheEntry {
  mtimeMs: number;
  size: number;
  rows: MetricsRow[];
  summary: MetricsSummary;
}

const STATUS_ICON: Record<LiveStatus, [string, string?]> = {
  queued: ['clock'],
  starting: ['loading~spin'],
  running: ['sync~spin', 'charts.blue'],
  stopping: ['loading~spin', 'charts.yellow'],
  completed: ['pass', 'testing.iconPassed'],
  failed: ['error', 'testing.iconFailed'],
  stopped: ['debug-stop', 'charts.yellow'],
  cancelled: ['circle-slash'],
};

export class RunsTreeProvider implements vscode.TreeDataProvider<RunsTreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<RunsTreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly metricsCache = new Map<string, MetricsCacheEntry>();
  private refreshTimer: NodeJS.Timeout | undefined;
  private roots: ConfigNode[] = [];
  private sweeps: SweepManager | null = null;

  constructor(
    private readonly runs: RunManager,
    watcher: RunDirWatcher,
    private readonly tables: TableReader,
  ) {
    this.disposables.push(
      this.changed,
      runs.onDidChange(() => this.scheduleRefresh(), null),
      onSettingChange('runDirectories', () => this.scheduleRefresh()),
      watcher.onDidChange(() => this.scheduleRefresh()),
      watcher.onDidChangeConfigs(() => this.scheduleRefresh()),
    );
  }

  /** Slurm sweeps: their tasks' states show beside their runs, and tasks without a run directory yet show as queued. */
  setSweeps(sweeps: SweepManager): void {
    this.sweeps = sweeps;
    this.disposables.push(sweeps.onDidChange(() => this.scheduleRefresh()));
  }

  /** Progress notifications arrive several times a second; the tree repaints at most twice a second. */
  scheduleRefresh(delayMs = 500): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      this.changed.fire(undefined);
    }, delayMs);
  }

  refresh(): void {
    this.changed.fire(undefined);
  }

  /** The run folders of the last scan (and the unreadable ones): what a missed watcher event would leave stale. */
  private scanned = '';
  private rescanTimer: NodeJS.Timeout | undefined;

  /**
   * While the view is visible, rescan every `everyMs` and refresh when the set of run folders changed. The file
   * watcher can miss a run.json written right after its folder was created (inotify watches a new folder only once it
   * sees it); an engine's run then shows at its next write, but a run written once (another tool's, a copy, an
   * import that finished) would stay missing until Refresh.
   */
  startRescan(view: vscode.TreeView<RunsTreeNode>, everyMs = 10_000): void {
    let busy = false;
    this.rescanTimer = setInterval(async () => {
      if (!view.visible || busy) return;
      busy = true;
      try {
        const scan = await scanRuns(runRoots(await findConfigs()));
        if (scanKey(scan) !== this.scanned) this.refresh();
      } catch {
        // a scan that fails now is retried at the next tick
      } finally {
        busy = false;
      }
    }, everyMs);
  }

  /** A run on disk as the tree shows it: its live state, or Slurm's, or what its run.json says; and its config. */
  private runNode(runDir: string, info: RunInfo): { node: RunNode; configPath: string | null } {
    const live = this.runs.match(runDir, info.pid) ?? null;
    const liveActive = live && !isEnded(live.status);
    const slurm = this.sweeps?.slurmTaskOf(runDir);
    // A Slurm run's engine lives on a compute node, where its pid means nothing here: Slurm's state says whether
    // it still runs. A requeued task waits again although its run.json says stopped.
    const interrupted = !liveActive && isTraining(info.status) && (slurm ? slurm.task !== null && !slurmTaskActive(slurm.task) : !engineAlive(info));
    const requeued = slurm?.task?.slurm_state === 'PENDING' && info.status !== 'running';
    const status: LiveStatus = liveActive ? live.status : interrupted ? 'failed' : requeued ? 'queued' : info.status;
    const configPath =
      info.config_path && !/[\\/]slurm[\\/]configs[\\/]/.test(info.config_path)
        ? info.config_path
        : (slurm?.sweep.configPath ?? live?.request.configPath ?? null);
    return { node: { kind: 'run', runDir, info, live, status, interrupted, slurm: slurmOf(slurm) }, configPath };
  }

  /** Every run on disk or live, grouped by the config it was trained from. */
  async collect(): Promise<ConfigNode[]> {
    const configs = await findConfigs();
    const scan = await scanRuns(runRoots(configs));
    this.scanned = scanKey(scan);
    const found = scan.runs;
    for (const t of scan.truncated) this.noteOnce(t);
    const groups = new Map<string, ConfigNode>();
    const group = (configPath: string | null, name: string): ConfigNode => {
      const key = configPath ?? `name:${name}`;
      let g = groups.get(key);
      if (!g) {
        const rel = configPath && vscode.workspace.asRelativePath(configPath, false);
        g = { kind: 'config', key, label: configPath ? basename(configPath) : name, configPath, runs: [] };
        if (rel && rel !== basename(configPath!)) g.label = rel;
        groups.set(key, g);
      }
      return g;
    };
    for (const c of configs) group(c, basename(c));
    const claimed = new Set<number>();
    for (const { runDir, info } of found) {
      const { node, configPath } = this.runNode(runDir, info);
      if (node.live) claimed.add(node.live.key);
      group(configPath, info.name).runs.push(node);
    }
    // Folders whose run.json this version cannot use: listed with the reason, never dropped, never a crash.
    for (const u of scan.unreadable) {
      group(null, 'unreadable runs').runs.push({
        kind: 'run',
        runDir: u.runDir,
        info: null,
        live: null,
        status: 'failed',
        interrupted: false,
        unreadable: u.reason,
      });
    }
    // Slurm tasks still waiting for a node: no run directory yet.
    for (const { sweep, task } of this.sweeps?.pendingSlurmTasks() ?? []) {
      if (found.some((f) => f.runDir === task.run_dir)) continue;
      group(sweep.configPath, task.name).runs.push({
        kind: 'run',
        runDir: null,
        info: null,
        live: null,
        status: 'queued',
        interrupted: false,
        slurm: slurmOf({ sweep, task, index: task.index }),
      });
    }
    // Queued runs, and started ones whose run.json is not readable yet.
    for (const live of this.runs.runs()) {
      // A run that failed before creating its directory (e.g. a config error) stays listed until a reload.
      if (claimed.has(live.key) || live.status === 'cancelled' || (isEnded(live.status) && live.runDir)) continue;
      group(live.request.configPath, live.request.label).runs.push({
        kind: 'run',
        runDir: live.runDir,
        info: null,
        live,
        status: live.status,
        interrupted: false,
      });
    }
    placeWarmStarts(groups);
    for (const g of groups.values()) {
      g.runs.sort((a, b) => Number(!!a.warmStart) - Number(!!b.warmStart) || startedOf(b).localeCompare(startedOf(a)));
      // short names: at the side bar's default width a full folder name (with its timestamp) pushed the status, the
      // reward and the eval past the edge, and a sweep's runs read as identical "countdown-short-…" rows
      const named = g.runs.filter((r) => r.info?.name && !r.warmStart);
      shortRunNames(named.map((r) => r.info!.name)).forEach((n, i) => (named[i].short = n));
    }
    // Stop Run in the palette stops a follow too (import --follow, this window's or a terminal's)
    const following = found.some(({ info }) => info.imported?.following && info.status === 'running' && engineAlive(info));
    void vscode.commands.executeCommand('setContext', 'creditLens.following', following);
    this.roots = [...groups.values()].sort((a, b) => a.label.localeCompare(b.label));
    return this.roots;
  }

  /**
   * The run node last handed to the view for `runDir`. TreeView.reveal needs that very object: a node from a
   * fresh collect() is a different element to VS Code, and the reveal silently finds nothing.
   */
  shownRun(runDir: string): RunNode | undefined {
    return this.roots.flatMap((g) => g.runs).find((r) => r.runDir === runDir);
  }

  metrics(runDir: string): MetricsCacheEntry {
    const path = join(runDir, 'metrics.jsonl');
    let st: { mtimeMs: number; size: number };
    try {
      st = statSync(path);
    } catch {
      st = { mtimeMs: 0, size: 0 };
    }
    const hit = this.metricsCache.get(runDir);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
    const rows = st.size ? readMetrics(runDir) : [];
    const entry = { mtimeMs: st.mtimeMs, size: st.size, rows, summary: summarizeMetrics(rows) };
    this.metricsCache.set(runDir, entry);
    return entry;
  }

  async getChildren(node?: RunsTreeNode): Promise<RunsTreeNode[]> {
    if (!node) {
      const roots = await this.collect();
      // With no config and no run, the view's welcome content (New Experiment) shows instead.
      return roots.length === 1 && !roots[0].runs.length && !roots[0].configPath ? [] : roots;
    }
    if (node.kind === 'config') return node.runs;
    if (node.kind === 'run') {
      if (!node.runDir) return [];
      const rows = new Map(
        this.metrics(node.runDir)
          .rows.filter((r) => r.phase === 'grpo')
          .map((r) => [r.step, r]),
      );
      return listLoggedSteps(node.runDir, 'episodes').map((step) => ({ kind: 'step', runDir: node.runDir!, step, row: rows.get(step) ?? null }));
    }
    if (node.kind === 'step') {
      let t;
      try {
        t = await this.tables.episodes(node.runDir, node.step);
      } catch (e) {
        this.log?.warn(`${stepFile(node.runDir, 'episodes', node.step)}: ${(e as Error).message}`);
        return [];
      }
      const eps: EpisodeNode[] = [];
      for (let i = 0; i < t.episode.length; i++) {
        eps.push({
          kind: 'episode',
          runDir: node.runDir,
          step: node.step,
          episode: t.episode[i],
          reward: t.reward[i],
          success: t.success[i],
          prompt: t.prompt[i],
          completion: t.completion[i],
        });
      }
      return eps.sort((a, b) => b.reward - a.reward || a.episode - b.episode);
    }
    return [];
  }

  getParent(node: RunsTreeNode): RunsTreeNode | undefined {
    if (node.kind === 'run') return this.roots.find((g) => g.runs.includes(node));
    return undefined;
  }

  getTreeItem(node: RunsTreeNode): vscode.TreeItem {
    switch (node.kind) {
      case 'config': {
        const item = new vscode.TreeItem(node.label, node.runs.length ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
        // A group that gets its first run gets a new id, so it opens expanded instead of keeping the
        // "no children" state VS Code remembered for the old id.
        item.id = `config:${node.key}:${node.runs.length ? 'runs' : 'empty'}`;
        item.iconPath = new vscode.ThemeIcon('file-code');
        item.description = `${node.runs.length} run${node.runs.length === 1 ? '' : 's'}`;
        item.contextValue = node.configPath ? 'config' : 'configMissing';
        if (node.configPath) {
          item.resourceUri = vscode.Uri.file(node.configPath);
          item.tooltip = node.configPath;
          item.command = { command: 'vscode.open', title: 'Open Config', arguments: [vscode.Uri.file(node.configPath)] };
        }
        return item;
      }
      case 'run':
        return this.runItem(node);
      case 'step': {
        const item = new vscode.TreeItem(`step ${node.step}`, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `step:${node.runDir}:${node.step}`;
        const r = node.row;
        if (r) {
          const parts = [r.reward_mean !== undefined ? `reward ${formatFixed(r.reward_mean, 3)}` : '', `success ${percent(r.success_rate)}`];
          if (r.eval_success !== undefined) parts.push(`eval ${percent(r.eval_success)}`);
          item.description = parts.filter(Boolean).join(' · ');
        }
        item.iconPath = new vscode.ThemeIcon('debug-step-over');
        item.contextValue = 'step';
        return item;
      }
      case 'episode': {
        const item = new vscode.TreeItem(`${formatFixed(node.reward, 2)} ${node.success ? '✓' : '✗'} #${node.episode}`, vscode.TreeItemCollapsibleState.None);
        item.id = `episode:${node.runDir}:${node.step}:${node.episode}`;
        item.description = node.completion.replace(/\s+/g, ' ').slice(0, 80);
        const md = new vscode.MarkdownString();
        md.appendMarkdown(
          `**episode ${node.episode}** · step ${node.step} · reward ${formatFixed(node.reward, 3)} · ${node.success ? 'solved' : 'not solved'}\n\n`,
        );
        md.appendMarkdown(codeBlock(node.prompt + node.completion));
        item.tooltip = md;
        item.iconPath = new vscode.ThemeIcon(
          node.success ? 'check' : 'dash',
          new vscode.ThemeColor(node.success ? 'testing.iconPassed' : 'disabledForeground'),
        );
        item.contextValue = 'episode';
        item.command = {
          command: 'creditLens.openEpisode',
          title: 'Open Episode',
          arguments: [{ runDir: node.runDir, step: node.step, episode: node.episode }],
        };
        return item;
      }
    }
  }

  private readonly noted = new Set<string>();
  /** A scan that stopped early says so once in the log, not on every refresh. */
  private noteOnce(message: string): void {
    if (this.noted.has(message)) return;
    this.noted.add(message);
    this.log?.warn(`runs: ${message}`);
  }

  setLog(log: vscode.LogOutputChannel): void {
    this.log = log;
  }

  private log: vscode.LogOutputChannel | null = null;

  private runItem(node: RunNode): vscode.TreeItem {
    if (node.unreadable !== undefined) {
      const item = new vscode.TreeItem(basename(node.runDir ?? 'run'), vscode.TreeItemCollapsibleState.None);
      item.id = `unreadable:${node.runDir}`;
      item.description = `unreadable (${node.unreadable})`;
      item.iconPath = new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
      const md = new vscode.MarkdownString();
      md.appendMarkdown(`**unreadable run** — ${escapeMarkdown(node.unreadable)}\n\n${inlineCode(node.runDir ?? '')}`);
      item.tooltip = md;
      item.contextValue = 'run.unreadable';
      item.accessibilityInformation = { label: `${basename(node.runDir ?? 'run')}, unreadable (${node.unreadable})` };
      return item;
    }
    const live = node.live && !isEnded(node.live.status) ? node.live : null;
    const folder = node.runDir ? basename(node.runDir) : (node.live?.request.label ?? node.slurm?.name ?? 'run');
    const label = node.warmStart ? 'shared warm start' : (node.short ?? folder);
    const hasSteps = !!node.runDir && listLoggedSteps(node.runDir, 'episodes').length > 0;
    const item = new vscode.TreeItem(label, hasSteps || live ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
    item.id = `run:${node.runDir ?? (node.slurm ? `slurm-${node.slurm.job}` : `live-${node.live?.key}`)}`;
    const [icon, color] = STATUS_ICON[node.status];
    item.iconPath = new vscode.ThemeIcon(icon, color ? new vscode.ThemeColor(color) : undefined);

    const summary = node.runDir ? this.metrics(node.runDir).summary : null;
    const total = live?.total ?? node.info?.total_steps;
    const step = live ? live.step : (summary?.lastGrpoStep ?? node.info?.last_step ?? 0);
    const phase = live?.phase && live.phase !== 'grpo' ? `${live.phase} ` : '';
    // a followed run has no total: it grows as its trainer writes steps
    const following = node.status === 'running' && !!node.info?.imported?.following;
    const parts: string[] = [node.interrupted ? 'interrupted' : following ? 'following' : node.status];
    // status, reward and eval first: what a default-width side bar must not cut off; the step count after them
    if (summary?.latestReward !== null && summary?.latestReward !== undefined) parts.push(`reward ${formatFixed(summary.latestReward, 3)}`);
    if (summary?.latestEvalSuccess !== null && summary?.latestEvalSuccess !== undefined) parts.push(`eval ${percent(summary.latestEvalSuccess)}`);
    if (following) {
      const n = node.info!.total_steps ?? 0;
      const last = node.info!.last_step ?? 0;
      parts.push(`${n} step${n === 1 ? '' : 's'}${last !== n ? `, last ${last}` : ''}`);
    } else if (node.status !== 'queued') parts.push(`${phase}${step}/${total ?? '?'}`);
    if (node.slurm) parts.push(`slurm ${node.slurm.job}${node.slurm.state ? ` ${node.slurm.state}` : ''}${node.slurm.reason ? ` (${node.slurm.reason})` : ''}`);
    // the date last: the label no longer carries the folder's timestamp
    const when = node.info ? startedShort(node.info.started) : '';
    if (when) parts.push(when);
    item.description = parts.join(' · ');

    const resumable = (node.status === 'stopped' || node.status === 'failed') && !!node.runDir && isResumable(node.runDir);
    item.contextValue = `run.${isTraining(node.status) ? 'running' : node.status}${resumable ? '.resumable' : ''}`;

    item.tooltip = runTooltip(node, label, summary);
    // a screen reader hears the whole folder name (the name and the time it started), then the row's description
    item.accessibilityInformation = { label: `${folder}, ${item.description}` };
    return item;
  }

  dispose(): void {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    if (this.rescanTimer) clearInterval(this.rescanTimer);
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

function scanKey(scan: { runs: { runDir: string }[]; unreadable: { runDir: string }[] }): string {
  return [...scan.runs.map((r) => r.runDir), '|', ...scan.unreadable.map((u) => u.runDir)].join('\n');
}

function startedOf(n: RunNode): string {
  return n.info?.started ?? `~${String(n.live?.key ?? 0).padStart(8, '0')}`;
}

/** engine.log of a run, for "Show Engine Log". */
export function engineLogPath(runDir: string): string {
  return join(runDir, ENGINE_LOG);
}

function slurmOf(s: ReturnType<SweepManager['slurmTaskOf']>): RunNode['slurm'] {
  if (!s?.sweep.slurm) return undefined;
  return {
    job: s.task?.slurm_job ?? `${s.sweep.slurm.jobId}_${s.index}`,
    state: s.task?.slurm_state ?? null,
    reason: s.task?.slurm_reason ?? null,
    sweepId: s.sweep.id,
    index: s.index,
    name: s.task?.name ?? s.sweep.runs[s.index]?.name ?? `task ${s.index}`,
  };
}
