// Every command of the extension. Each takes what its callers hand it (a Uri from CodeLens or the explorer,
// a tree node, a run directory string, a live run key) and asks with a QuickPick when called bare.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { RunInfo } from '../protocol';
import { parseDocument } from 'yaml';
import { parseConfigText, STRATEGIES, type CreditConfig, type SweepGrid } from '../engine/config/config';
import { readRunInfo } from '../engine/rundir/rundir';
import { describeSweepRun, expandSweep, KNOB_VALUES, STRATEGY_PARAMS } from '../engine/sweep/sweep';
import { readSettings } from './vscode_settings';
import type { Ctx } from './ctx';
import { runDirOf } from './args';
import { engineAlive, findConfigs, findRuns, findSweeps, runRoots } from './discovery';
import { pickRunDir } from './pick';
import { setArg } from './metrics_summary';
import { isEnded } from './run_status';
import { isResumable, UNTRUSTED_MESSAGE, type LiveRun } from './runs';
import { engineLogPath, type RunNode, type RunsTreeNode } from './runs_tree';
import { SweepPanel } from './panels/sweep_panel';
import { followRunCommand, importRolloutsCommand } from './import';
import { LOSSES } from '../engine/losses/catalog';
import { strategySpec } from '../engine/credit/catalog';
import type { PolicyLossSpec } from '../engine/losses/types';

export function registerCommands(ctx: Ctx): void {
  const reg = (id: string, fn: (...args: never[]) => unknown) => ctx.registerCommand(id, fn as (...args: never[]) => unknown);

  reg('creditLens.run', (arg?: unknown) => runConfig(ctx, arg));
  reg('creditLens.stop', (arg?: unknown) => stopRun(ctx, arg));
  reg('creditLens.resume', (arg?: unknown) => resumeRun(ctx, arg));
  reg('creditLens.sweep', (arg?: unknown) => runSweep(ctx, arg));
  reg('creditLens.validate', (arg?: unknown) => validateConfig(ctx, arg));
  reg('creditLens.openRunFolder', (arg?: unknown) => openRunFolder(ctx, arg));
  reg('creditLens.showEngineLog', (arg?: unknown) => showEngineLog(ctx, arg));
  reg('creditLens.newExperiment', () => newExperiment(ctx));
  reg('creditLens.refreshRuns', () => ctx.tree.refresh());
  reg('creditLens.openSweepSummary', (arg?: unknown) => openSweepSummary(ctx, arg));
  reg('creditLens.cancelSweep', (arg?: unknown) => cancelSweep(ctx, arg));
  reg('creditLens.openRun', (arg?: unknown) => revealRun(ctx, arg));
  reg('creditLens.importRollouts', (arg?: unknown) => importRolloutsCommand(ctx, arg));
  reg('creditLens.followRun', (arg?: unknown) => followRunCommand(ctx, arg));
}

// ---- which config / which run ----

async function configFrom(arg: unknown, purpose: string): Promise<vscode.Uri | undefined> {
  if (arg instanceof vscode.Uri) return arg;
  if (arg && typeof arg === 'object' && (arg as RunsTreeNode).kind === 'config') {
    const p = (arg as { configPath: string | null }).configPath;
    if (p) return vscode.Uri.file(p);
  }
  const active = vscode.window.activeTextEditor?.document.uri;
  if (active && /\.credit\.yaml$/i.test(active.path)) return active;
  const configs = await findConfigs();
  if (!configs.length) {
    const b = await vscode.window.showWarningMessage('Credit Lens: no *.credit.yaml config in this workspace.', 'New Experiment');
    if (b) await vscode.commands.executeCommand('creditLens.newExperiment');
    return undefined;
  }
  const pick = await vscode.window.showQuickPick(
    configs.map((c) => ({ label: basename(c), description: vscode.workspace.asRelativePath(dirname(c)), path: c })),
    { title: `Credit Lens: config to ${purpose}`, placeHolder: 'a *.credit.yaml file' },
  );
  return pick && vscode.Uri.file(pick.path);
}

/** Saves the editor's text (the engine reads the file) and validates it; undefined when it has problems. */
async function loadValidConfig(ctx: Ctx, uri: vscode.Uri): Promise<CreditConfig | undefined> {
  const doc = await vscode.workspace.openTextDocument(uri);
  if (doc.isDirty) await doc.save();
  const issues = ctx.diagnostics.validate(doc);
  const { config } = parseConfigText(doc.getText(), { file: uri.fsPath });
  if (!config || issues.length) {
    const first = issues[0]?.message ?? 'it does not parse';
    const b = await vscode.window.showErrorMessage(
      `Credit Lens: ${basename(uri.fsPath)} has ${issues.length || 1} problem${issues.length === 1 ? '' : 's'} (${first}). Fix ${issues.length === 1 ? 'it' : 'them'} to run.`,
      'Show Problems',
    );
    if (b) await vscode.commands.executeCommand('workbench.actions.view.problems');
    return undefined;
  }
  return config;
}

function refuseIfUntrusted(): boolean {
  if (vscode.workspace.isTrusted) return false;
  void vscode.window.showErrorMessage(UNTRUSTED_MESSAGE, 'Manage Workspace Trust').then((b) => {
    if (b) void vscode.commands.executeCommand('workbench.trust.manage');
  });
  return true;
}

// ---- commands ----

async function runConfig(ctx: Ctx, arg: unknown): Promise<LiveRun | undefined> {
  const uri = await configFrom(arg, 'run');
  if (!uri) return undefined;
  if (refuseIfUntrusted()) return undefined;
  const config = await loadValidConfig(ctx, uri);
  if (!config) return undefined;
  if ((config.sweep?.executor ?? readSettings().executor) === 'slurm') {
    // One run on Slurm is a one-task job array: the config itself (an empty grid point), on its own seed.
    const sets = ['sweep.grid=[{}]', ...(config.sweep?.seeds !== undefined ? [`sweep.seeds=[${config.seed}]`] : [])];
    const rec = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Credit Lens: submitting ${config.name} to Slurm…` },
      () => ctx.sweeps.startSlurm(config.name, uri.fsPath, sets, [{ name: config.name, strategy: config.credit.strategy, params: {} }]),
    );
    void vscode.window.showInformationMessage(`Credit Lens: ${config.name} submitted as Slurm job ${rec.slurm?.jobId}.`);
    ctx.tree.scheduleRefresh(0);
    await vscode.commands.executeCommand('creditLens.runs.focus');
    return undefined;
  }
  const run = ctx.runs.enqueue({ configPath: uri.fsPath, sets: [], label: config.name });
  await vscode.commands.executeCommand('creditLens.runs.focus');
  return run;
}

async function stopRun(ctx: Ctx, arg: unknown): Promise<void> {
  // A run of a Slurm sweep is cancelled through Slurm: its engine gets SIGTERM, checkpoints and ends `stopped`.
  const node = arg && typeof arg === 'object' && (arg as RunNode).kind === 'run' ? (arg as RunNode) : null;
  const slurmDir = runDirOf(arg);
  const slurm = node?.slurm ?? (slurmDir ? ctx.sweeps.slurmTaskOf(slurmDir) : undefined);
  if (slurm) {
    const [sweepId, index] = 'sweepId' in slurm ? [slurm.sweepId, slurm.index] : [slurm.sweep.id, slurm.index];
    await ctx.sweeps.cancelSlurmTask(sweepId, index);
    return;
  }
  if (node?.info?.imported?.following && engineAlive(node.info)) return stopFollow(ctx, node.info);
  let run: LiveRun | undefined;
  if (typeof arg === 'number') run = ctx.runs.runs().find((r) => r.key === arg);
  else if (arg && typeof arg === 'object' && (arg as RunNode).kind === 'run') run = (arg as RunNode).live ?? undefined;
  const dir = runDirOf(arg);
  if (!run && dir) run = ctx.runs.byRunDir(dir);
  if (!run) {
    const active = ctx.runs.active();
    const followed = (await findRuns(runRoots(await findConfigs()))).filter((r) => r.info.imported?.following && engineAlive(r.info));
    if (!active.length && !followed.length) {
      void vscode.window.showInformationMessage('Credit Lens: no run is training, queued or followed.');
      return;
    }
    const items = [
      ...active.map((r) => ({ label: r.name ?? r.request.label, description: `${r.status} · step ${r.step}/${r.total ?? '?'}`, run: r, info: null })),
      ...followed.map((r) => ({ label: basename(r.runDir), description: `following · ${r.info.total_steps ?? 0} steps`, run: undefined, info: r.info })),
    ];
    const pick = items.length === 1 ? items[0] : await vscode.window.showQuickPick(items, { title: 'Credit Lens: stop which run?' });
    if (pick?.info) return stopFollow(ctx, pick.info);
    run = pick?.run;
  }
  if (!run || isEnded(run.status)) return;
  await ctx.runs.stop(run);
}

/** A followed run (import --follow, from this window or a terminal): its engine ends the follow on SIGTERM with its whole steps. */
function stopFollow(ctx: Ctx, info: RunInfo): void {
  try {
    process.kill(info.pid!, 'SIGTERM');
  } catch (e) {
    void vscode.window.showErrorMessage(`Credit Lens: could not stop the follow (pid ${info.pid}): ${(e as Error).message}`);
  }
  ctx.tree.scheduleRefresh(1000);
}

async function resumeRun(ctx: Ctx, arg: unknown): Promise<LiveRun | undefined> {
  if (refuseIfUntrusted()) return undefined;
  const runDir =
    runDirOf(arg) ??
    (await pickRunDir('Resume Run', { statusOf: (d) => ctx.runs.statusOf(d), filter: (d, s) => (s === 'stopped' || s === 'failed') && isResumable(d) }));
  if (!runDir) return undefined;
  const live = ctx.runs.byRunDir(runDir);
  if (live && !isEnded(live.status)) {
    void vscode.window.showInformationMessage(`Credit Lens: ${basename(runDir)} is already ${live.status}.`);
    return undefined;
  }
  if (!isResumable(runDir)) {
    void vscode.window.showErrorMessage(`Credit Lens: ${basename(runDir)} has no checkpoint to resume from; start the config again instead.`);
    return undefined;
  }
  const info = readRunInfo(runDir);
  // The engine reads the run's own config.yaml; the original path only keeps the run under its config in the tree.
  const configPath = info?.config_path && existsSync(info.config_path) ? info.config_path : join(runDir, 'config.yaml');
  return ctx.runs.enqueue({ configPath, sets: [], resumeDir: runDir, label: basename(runDir) });
}

async function validateConfig(ctx: Ctx, arg: unknown): Promise<void> {
  const uri = await configFrom(arg, 'validate');
  if (!uri) return;
  const doc = await vscode.workspace.openTextDocument(uri);
  const issues = ctx.diagnostics.validate(doc);
  if (!issues.length) {
    void vscode.window.showInformationMessage(`Credit Lens: ${basename(uri.fsPath)} is valid.`);
    return;
  }
  await vscode.commands.executeCommand('workbench.actions.view.problems');
}

async function openRunFolder(ctx: Ctx, arg: unknown): Promise<void> {
  const runDir = runDirOf(arg) ?? (await pickRunDir('Open Run Folder', { statusOf: (d) => ctx.runs.statusOf(d) }));
  if (!runDir) return;
  const uri = vscode.Uri.file(runDir);
  if (vscode.workspace.getWorkspaceFolder(uri)) await vscode.commands.executeCommand('revealInExplorer', uri);
  else await vscode.commands.executeCommand('revealFileInOS', uri);
}

/** A run's own engine.log (from the palette: which run's); the extension's output only where the run has none. */
async function showEngineLog(ctx: Ctx, arg: unknown): Promise<void> {
  const runDir = runDirOf(arg) ?? (await pickRunDir('show the engine log of'));
  if (!runDir) return;
  const path = engineLogPath(runDir);
  if (!existsSync(path)) {
    const choice = await vscode.window.showInformationMessage(
      `Credit Lens: ${basename(runDir)} has no engine.log (its engine never started).`,
      "Show the Extension's Output",
    );
    if (choice) ctx.log.show(true);
    return;
  }
  await vscode.window.showTextDocument(vscode.Uri.file(path), { preview: true });
}

async function revealRun(ctx: Ctx, arg: unknown): Promise<void> {
  const runDir = runDirOf(arg);
  if (!runDir) return;
  await vscode.commands.executeCommand('creditLens.runs.focus');
  let node = ctx.tree.shownRun(runDir);
  if (!node) {
    // A run the view has not shown yet (just started): let it refresh once, then look again.
    ctx.tree.refresh();
    await new Promise((r) => setTimeout(r, 700));
    node = ctx.tree.shownRun(runDir);
  }
  if (node) await ctx.treeView.reveal(node, { select: true, focus: true, expand: true });
  await vscode.commands.executeCommand('creditLens.openDashboard', runDir);
}

// ---- new experiment ----

async function newExperiment(ctx: Ctx): Promise<void> {
  const examplesDir = ctx.extCtx.asAbsolutePath('examples');
  const examples = existsSync(examplesDir)
    ? readdirSync(examplesDir)
        .filter((f) => f.endsWith('.credit.yaml'))
        .sort()
    : [];
  if (!examples.length) throw new Error(`no bundled examples in ${examplesDir}`);
  const items = examples.map((f) => {
    const text = readFileSync(join(examplesDir, f), 'utf8');
    const firstComment = /^#\s*(.+)$/m.exec(text)?.[1] ?? '';
    return { label: f.replace(/\.credit\.yaml$/, ''), detail: firstComment, file: f, text };
  });
  const pick = await vscode.window.showQuickPick(items, { title: 'Credit Lens: new experiment from an example', matchOnDetail: true });
  if (!pick) return;
  const folder =
    vscode.workspace.workspaceFolders?.length === 1
      ? vscode.workspace.workspaceFolders[0]
      : await vscode.window.showWorkspaceFolderPick({ placeHolder: 'Folder for the new config' });
  if (!folder) {
    void vscode.window.showWarningMessage('Credit Lens: open a folder first; the config and its runs live in it.');
    return;
  }
  const name = await vscode.window.showInputBox({
    title: 'Credit Lens: experiment name',
    prompt: 'Names the config file and prefixes its run directories',
    value: pick.label,
    validateInput: (v) =>
      /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(v)
        ? existsSync(join(folder.uri.fsPath, `${v}.credit.yaml`))
          ? `${v}.credit.yaml already exists`
          : null
        : 'letters, digits, ".", "_" and "-" only',
  });
  if (!name) return;
  // Keep the example's comments: they explain each choice.
  const doc = parseDocument(pick.text);
  doc.set('name', name);
  const target = join(folder.uri.fsPath, `${name}.credit.yaml`);
  writeFileSync(target, doc.toString());
  await vscode.window.showTextDocument(vscode.Uri.file(target));
  ctx.tree.scheduleRefresh(0);
}

// ---- sweeps ----

/** What a strategy does, in one line: its catalog summary without the leading "name: ". */
export function strategyLine(name: string): string {
  const summary = strategySpec(name)?.summary ?? '';
  return summary.startsWith(`${name}: `) ? summary.slice(name.length + 2) : summary;
}

/**
 * QuickPicks for a config without `sweep.grid`: strategies, losses, each picked strategy's knob values, and (when the
 * config has a warm start it does not share yet) whether the runs share one. Titles count the steps: the total is
 * known once the strategies are picked.
 */
async function pickGrid(config: CreditConfig): Promise<{ grid: SweepGrid; sets: string[] } | undefined> {
  const knobsOf = (s: string) => STRATEGY_PARAMS[s as keyof typeof STRATEGY_PARAMS].filter((p) => KNOB_VALUES[p]);
  const offerShare = config.sft.steps > 0 && !config.sft.share;
  const strategies = await vscode.window.showQuickPick(
    STRATEGIES.map((s) => ({
      label: s,
      description: knobsOf(s)
        .map((p) => p.replace('credit.', ''))
        .join(', '),
      detail: strategyLine(s),
      picked: s === 'none' || s === config.credit.strategy,
    })),
    { title: `Sweep ${config.name}: strategies to compare (step 1)`, canPickMany: true, placeHolder: 'none = the GRPO baseline', matchOnDetail: true },
  );
  if (!strategies?.length) return undefined;
  const total = 2 + strategies.reduce((n, s) => n + knobsOf(s.label).length, 0) + (offerShare ? 1 : 0);
  let step = 1;
  const title = (what: string) => `Sweep ${config.name}: ${what} (${++step}/${total})`;
  // the peers' losses, each crossed with every strategy; the config's own loss alone by default
  const losses = await vscode.window.showQuickPick(
    LOSS_VARIANTS.map((v) => ({ label: v.label, description: v.description, picked: v.key === 'config', variant: v })),
    { title: title('losses to train each strategy with'), canPickMany: true, placeHolder: "the config's own loss, or the peers'" },
  );
  if (!losses?.length) return undefined;
  const grid: Record<string, unknown>[] = [];
  let gspoSkipped = false;
  for (const { label: s } of strategies) {
    const knobs = knobsOf(s);
    const entry: Record<string, unknown> = { 'credit.strategy': s };
    for (const knob of knobs) {
      const current = knob.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], config);
      const values = [...new Set([...KNOB_VALUES[knob], ...(typeof current === 'number' ? [current] : [])])].sort((a, b) => a - b);
      const picked = await vscode.window.showQuickPick(
        values.map((v) => ({ label: String(v), value: v, picked: true, description: v === current ? "the config's value" : undefined })),
        { title: title(`${s} — values of ${knob}`), canPickMany: true },
      );
      if (!picked) return undefined;
      if (!picked.length) continue;
      entry[knob] = picked.map((p) => p.value);
    }
    for (const { variant } of losses) {
      // GSPO's one ratio per sequence gives every token its completion's mean advantage: with a strategy it would train
      // plain GRPO under the strategy's name, and the config check refuses it.
      if (variant.set['grpo.importance_sampling_level'] === 'sequence' && s !== 'none') {
        gspoSkipped = true;
        continue;
      }
      grid.push({ ...entry, ...variant.set });
    }
  }
  if (gspoSkipped)
    void vscode.window.showInformationMessage(
      "GSPO is swept with strategy none only: its one importance ratio per sequence averages a strategy's per-token credit away.",
    );
  if (!grid.length) {
    void vscode.window.showErrorMessage('Nothing to sweep: GSPO was the only loss picked, and it combines with strategy none only.');
    return undefined;
  }
  if (!offerShare) return { grid, sets: [] };
  const share = await vscode.window.showQuickPick(
    [
      {
        label: 'Share one SFT warm start',
        description: 'sft.share: true',
        detail: `The ${config.sft.steps} SFT steps are trained once (with sft.seed) and every run starts GRPO from that checkpoint: differences are the strategies', not the warm starts'.`,
        share: true,
      },
      {
        label: 'Each run trains its own warm start',
        description: "the config's sft.share: false",
        detail: 'Every run repeats the SFT steps with its own seed.',
        share: false,
      },
    ],
    { title: title(`the SFT warm start (${config.sft.steps} steps)`) },
  );
  if (!share) return undefined;
  return { grid, sets: share.share ? ['sft.share=true'] : [] };
}

/**
 * The loss variants Run Sweep offers (TRL's and veRL's names; see the config's grpo section): each policy loss of the
 * loss catalog that has a sweep entry, then GSPO's ratio level and DAPO's sampling, which combine with any loss.
 */
const LOSS_VARIANTS: { key: string; label: string; description: string; set: Record<string, unknown> }[] = [
  { key: 'config', label: "the config's loss", description: 'as the config sets grpo.*', set: {} },
  ...(LOSSES as readonly PolicyLossSpec[]).flatMap((l) => (l.sweep ? [{ key: l.name, ...l.sweep, set: { 'grpo.policy_loss': l.name } }] : [])),
  { key: 'gspo', label: 'GSPO', description: 'grpo.importance_sampling_level sequence (TRL)', set: { 'grpo.importance_sampling_level': 'sequence' } },
  { key: 'dapo', label: 'DAPO dynamic sampling', description: 'grpo.dynamic_sampling true (veRL filter_groups)', set: { 'grpo.dynamic_sampling': true } },
];

async function runSweep(ctx: Ctx, arg: unknown): Promise<void> {
  const uri = await configFrom(arg, 'sweep');
  if (!uri) return;
  if (refuseIfUntrusted()) return;
  const config = await loadValidConfig(ctx, uri);
  if (!config) return;
  const picked = config.sweep?.grid ? { grid: config.sweep.grid, sets: [] } : await pickGrid(config);
  if (!picked) return;
  const { grid, sets: extraSets } = picked;
  const runs = expandSweep(config, grid);
  const executor = config.sweep?.executor ?? readSettings().executor;
  const describe = (r: (typeof runs)[number]) => ({ name: r.name, ...describeSweepRun(r) });
  if (executor === 'slurm') {
    const s = config.sweep?.slurm;
    const opts = [s?.partition && `partition ${s.partition}`, s?.time && `time ${s.time}`, s?.max_parallel && `at most ${s.max_parallel} at once`]
      .filter(Boolean)
      .join(', ');
    const submit = `Submit ${runs.length} Run${runs.length === 1 ? '' : 's'} to Slurm`;
    const ok = await vscode.window.showInformationMessage(
      `Sweep ${config.name}: ${runs.length} run${runs.length === 1 ? '' : 's'} as one Slurm job array${opts ? ` (${opts})` : ''}.`,
      {
        modal: true,
        detail: `Each run writes its run directory under ${config.output_dir}, which the compute nodes must see (shared storage). The job script is written next to the runs, in sweep-<time>/slurm/.`,
      },
      submit,
    );
    if (ok !== submit) return;
    const sets = [...(config.sweep?.grid ? [] : [`sweep.grid=${JSON.stringify(grid)}`]), ...extraSets];
    const rec = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Credit Lens: submitting ${config.name} to Slurm…` },
      () => ctx.sweeps.startSlurm(config.name, uri.fsPath, sets, runs.map(describe)),
    );
    void vscode.window.showInformationMessage(`Credit Lens: sweep ${config.name} submitted as Slurm job ${rec.slurm?.jobId} (${rec.runs.length} runs).`);
    SweepPanel.show(ctx, rec.id);
    ctx.tree.scheduleRefresh(0);
    return;
  }
  const max = readSettings().maxConcurrentRuns;
  const names = runs.map((r) => r.name);
  const shown = names.length > 6 ? [...names.slice(0, 5), `… and ${names.length - 5} more`] : names;
  const start = `Start ${runs.length} Run${runs.length === 1 ? '' : 's'}`;
  const ok = await vscode.window.showInformationMessage(
    `Sweep ${config.name}: ${runs.length} run${runs.length === 1 ? '' : 's'} of ${config.grpo.steps} GRPO steps${config.sweep?.grid ? ' (from sweep.grid)' : ''}.`,
    { modal: true, detail: `${shown.join('\n')}\n\nThey train ${max} at a time (creditLens.maxConcurrentRuns).` },
    start,
  );
  if (ok !== start) return;
  const rec = await ctx.sweeps.start(
    config.name,
    uri.fsPath,
    runs.map((r) => ({
      ...describe(r),
      sets: [
        ...Object.entries(r.overrides)
          .filter(([k]) => k !== 'name')
          .map(([k, v]) => setArg(k, v)),
        setArg('name', r.name),
        ...extraSets,
      ],
    })),
  );
  SweepPanel.show(ctx, rec.id);
}

async function pickSweep(ctx: Ctx, arg: unknown, title: string, onlyActive: boolean): Promise<string | undefined> {
  if (typeof arg === 'string' && ctx.sweeps.get(arg)) return arg;
  const all = ctx.sweeps.all().filter((s) => !onlyActive || ctx.sweeps.isActive(s.id));
  // Sweeps started from a terminal (`credit-lens sweep`) or another window keep a record in their sweep folder.
  const known = new Set(ctx.sweeps.all().map((s) => (s.local ?? s.slurm)?.sweepDir));
  const found = onlyActive ? [] : (await findSweeps(runRoots(await findConfigs()))).filter((f) => !known.has(f.sweepDir));
  if (!all.length && !found.length) {
    void vscode.window.showInformationMessage(onlyActive ? 'Credit Lens: no sweep is running.' : 'Credit Lens: no sweep has been run in this workspace.');
    return undefined;
  }
  if (all.length === 1 && !found.length) return all[0].id;
  const items = [
    ...all.map((s) => ({
      label: s.title,
      description: `${s.runs.length} runs · ${new Date(s.created).toLocaleString()}`,
      created: s.created,
      id: s.id,
      found: undefined,
    })),
    ...found.map((f) => {
      const j = 'local' in f ? f.local : f.slurm;
      return {
        label: 'local' in f ? f.local.name : basename(f.slurm.config).replace(/\.credit\.ya?ml$/, ''),
        description: `${j.tasks.length} runs · ${new Date(j.created).toLocaleString()} · ${'local' in f ? 'from a terminal' : 'Slurm'}`,
        detail: f.sweepDir,
        created: j.created,
        id: undefined,
        found: f,
      };
    }),
  ].sort((a, b) => Date.parse(b.created) - Date.parse(a.created));
  const pick = await vscode.window.showQuickPick(items, { title, matchOnDetail: true });
  if (!pick) return undefined;
  return pick.id ?? (await ctx.sweeps.adopt(pick.found!)).id;
}

async function openSweepSummary(ctx: Ctx, arg: unknown): Promise<void> {
  const id = await pickSweep(ctx, arg, 'Credit Lens: open which sweep?', false);
  if (id) SweepPanel.show(ctx, id);
}

async function cancelSweep(ctx: Ctx, arg: unknown): Promise<void> {
  const id = await pickSweep(ctx, arg, 'Credit Lens: cancel which sweep?', true);
  if (id) await ctx.sweeps.cancel(id);
}
