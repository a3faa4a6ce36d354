// "Credit Lens: Import Rollouts…": another trainer's rollouts (veRL, TRL, prime-rl, plain JSONL) made into a run
// (`credit-lens import`, src/engine/import). A file or folder picker, a model picker (a run of this workspace with a
// checkpoint, a Hugging Face model folder, or none for prime-rl's per-token exports), then a cancellable progress
// notification while the engine scores. The new run lands in `<workspace>/runs/`, where the Runs tree finds it.
// "Credit Lens: Follow a Training Run…" does the same for a run still training (`import --follow`): its steps appear
// in the tree as the trainer writes them, until Stop.
import { formatCount } from '../protocol/number_format';
import { IMPORT_FORMAT_DEFS, carriesTokens, type ImportFormat } from '../protocol/import_formats';
import { WARM_START_DIR } from '../protocol/index';
import { existsSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import * as vscode from 'vscode';
import { listCheckpoints } from '../engine/rundir/checkpoint';
import type { Ctx } from './ctx';
import { findConfigs, findRuns, runRoots } from './discovery';
import { followArgs, importArgs } from './engine_cli';
import { detectFollowFormat, findTrainerFolders } from './follow_detect';
import { withCancellableProgress } from './progress';
import { UNTRUSTED_MESSAGE } from './runs';

type ModelItem = vscode.QuickPickItem & { model: string | null | 'browse' };

/** A run folder, an HF model folder or none; undefined when the person cancelled. */
async function pickModel(source: string, title = 'Import Rollouts: the model that scores the tokens'): Promise<string | null | undefined> {
  const runs = (await findRuns(runRoots(await findConfigs())))
    .filter((r) => !r.info.imported && !WARM_START_DIR.test(r.runDir) && listCheckpoints(r.runDir).length > 0)
    .sort((a, b) => b.info.started.localeCompare(a.info.started));
  const prime = /token_exports/.test(source);
  const none: ModelItem = {
    label: '$(circle-slash) No model',
    model: null,
    detail: prime
      ? 'prime-rl token exports carry their own log-probs, entropies and advantages'
      : 'only for prime-rl token exports, which carry per-token values',
  };
  const browse: ModelItem = {
    label: '$(folder-opened) Hugging Face model folder…',
    model: 'browse',
    detail: 'config.json, model.safetensors and tokenizer.json: scores every token teacher-forced',
  };
  const items: ModelItem[] = [
    ...(prime ? [none] : []),
    ...runs.map((r): ModelItem => ({
      label: `$(beaker) ${basename(r.runDir)}`,
      description: `run · strategy ${r.info.strategy ?? '?'} · newest checkpoint`,
      detail: r.runDir,
      model: r.runDir,
    })),
    browse,
    ...(prime ? [] : [none]),
  ];
  const pick = await vscode.window.showQuickPick(items, {
    title,
    placeHolder: 'log-probs and entropies come from this model',
    matchOnDetail: true,
  });
  if (!pick) return undefined;
  if (pick.model !== 'browse') return pick.model;
  const dir = await vscode.window.showOpenDialog({
    canSelectFiles: false,
    canSelectFolders: true,
    canSelectMany: false,
    openLabel: 'Score with this model',
    title: 'Hugging Face model folder',
  });
  return dir?.[0]?.fsPath;
}

/**
 * Where an import or a follow reads from: the Uri it was given (the explorer's context menu), else the picked one; null
 * when the workspace is untrusted (a model folder's code could run) or the person cancelled.
 */
async function pickSource(arg: unknown, o: { files: boolean; openLabel: string; title: string }): Promise<string | null> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(`Credit Lens: ${UNTRUSTED_MESSAGE}`);
    return null;
  }
  if (arg instanceof vscode.Uri) return arg.fsPath;
  const picked = await vscode.window.showOpenDialog({
    canSelectFiles: o.files,
    canSelectFolders: true,
    canSelectMany: false,
    openLabel: o.openLabel,
    title: o.title,
  });
  return picked?.[0]?.fsPath ?? null;
}

export async function importRolloutsCommand(ctx: Ctx, arg?: unknown): Promise<void> {
  const source = await pickSource(arg, { files: true, openLabel: 'Import', title: 'Import Rollouts: a veRL, TRL, prime-rl or JSONL file or folder' });
  if (!source) return;
  const model = await pickModel(source);
  if (model === undefined) return;
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (!folder) {
    void vscode.window.showWarningMessage('Credit Lens: open a folder first; imported runs are written to its runs/ folder.');
    return;
  }
  const out = join(folder, 'runs');
  ctx.log.info(`import ${source}${model ? ` scored with ${model}` : ''} → ${out}`);
  let result;
  try {
    result = await withCancellableProgress(
      `Credit Lens: importing ${basename(source)}`,
      (done, total) => `${model ? 'scored' : 'read'} ${formatCount(done)} of ${formatCount(total)} completions`,
      (onProgress, signal) => ctx.engineCli.importRollouts(importArgs(source, { model, out }), onProgress, signal),
    );
    if (result === null) return;
  } catch (e) {
    ctx.log.warn(`import failed: ${(e as Error).message}`);
    void vscode.window.showErrorMessage(`Credit Lens: import failed: ${(e as Error).message}`);
    return;
  }
  ctx.tree.refresh();
  ctx.log.info(`imported ${result.records} completions (${result.format}, ${result.skipped} skipped) → ${result.runDir}`);
  for (const p of result.problems) ctx.log.warn(`import: skipped ${p.file}:${p.line}: ${p.reason}`);
  const skipped = result.skipped ? `; ${result.skipped} malformed line${result.skipped === 1 ? '' : 's'} skipped (see the engine log)` : '';
  const choice = await vscode.window.showInformationMessage(
    `Credit Lens: imported ${formatCount(result.records)} ${result.format} completions in ${result.steps.length} step${result.steps.length === 1 ? '' : 's'}${skipped}.`,
    'Open Episode',
    'Show Engine Log',
  );
  if (choice === 'Open Episode') await vscode.commands.executeCommand('creditLens.openRollouts', { runDir: result.runDir });
  else if (choice === 'Show Engine Log' && existsSync(join(result.runDir, 'engine.log')))
    await vscode.commands.executeCommand('creditLens.showEngineLog', result.runDir);
}

type FormatItem = vscode.QuickPickItem & { format: 'auto' | ImportFormat };

const FOLLOW_FORMATS: FormatItem[] = [
  { label: 'Detect from the files', format: 'auto', detail: 'the first file written decides' },
  ...IMPORT_FORMAT_DEFS.map((f) => ({ label: f.label, format: f.id, detail: f.detail })),
];

/** The follows this window started, stopped when it closes (each leaves a completed run of its whole steps). */
const follows = new Set<AbortController>();

export function stopFollows(): void {
  for (const c of follows) c.abort();
}

/**
 * The folder to follow: one the workspace's trainers already write to, taken in one click, else the folder dialog
 * (whose first click on a folder opens it rather than choosing it).
 */
async function pickFollowSource(arg: unknown): Promise<string | null> {
  const dialog = () =>
    pickSource(arg, {
      files: false,
      openLabel: 'Follow',
      title: "Follow a Training Run: the trainer's rollout folder (veRL, its Credit Lens shards, prime-rl, TRL)",
    });
  const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (arg instanceof vscode.Uri || !root || !vscode.workspace.isTrusted) return dialog();
  const found = findTrainerFolders(root);
  if (!found.length) return dialog();
  const label = (f: ImportFormat) => IMPORT_FORMAT_DEFS.find((d) => d.id === f)?.label ?? f;
  const pick = await vscode.window.showQuickPick(
    [
      ...found.map((f) => ({ label: `$(folder) ${relative(root, f.dir)}`, description: label(f.format), dir: f.dir as string | null })),
      { label: '$(folder-opened) Another folder…', description: 'choose it in the folder dialog', dir: null },
    ],
    { title: "Follow a Training Run: the trainer's rollout folder", placeHolder: 'folders of this workspace a trainer writes to' },
  );
  if (!pick) return null;
  return pick.dir ?? dialog();
}

export async function followRunCommand(ctx: Ctx, arg?: unknown): Promise<void> {
  const source = await pickFollowSource(arg);
  if (!source) return;
  // what the folder already holds says what writes it: that trainer first, so a folder whose format carries its own
  // log-probs is never asked for a scoring model
  const detected = detectFollowFormat(source);
  const items = detected
    ? [
        ...FOLLOW_FORMATS.filter((f) => f.format === detected).map((f) => ({ ...f, description: 'detected in this folder' })),
        ...FOLLOW_FORMATS.filter((f) => f.format !== detected),
      ]
    : FOLLOW_FORMATS;
  const format = await vscode.window.showQuickPick(items, { title: 'Follow a Training Run: what writes this folder?', matchOnDetail: true });
  if (!format) return;
  const effective = format.format === 'auto' ? detected : format.format;
  const model = effective && carriesTokens(effective) ? null : await pickModel(source, 'Follow a Training Run: the model that scores the tokens');
  if (model === undefined) return;
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (!folder) {
    void vscode.window.showWarningMessage('Credit Lens: open a folder first; followed runs are written to its runs/ folder.');
    return;
  }
  const out = join(folder, 'runs');
  const stop = new AbortController();
  follows.add(stop);
  ctx.log.info(`follow ${source} (${format.format})${model ? ` scored with ${model}` : ''} → ${out}`);
  void vscode.window.showInformationMessage(
    `Credit Lens: following ${basename(source)}. Its steps appear in the Runs tree as the trainer writes them; Stop on the run ends the follow.`,
  );
  ctx.tree.scheduleRefresh(0);
  try {
    const result = await ctx.engineCli.follow(followArgs(source, { model, out, format: format.format }), stop.signal);
    ctx.tree.refresh();
    ctx.log.info(`follow ended: ${result.records} completions in ${result.steps.length} steps → ${result.runDir}`);
    const choice = await vscode.window.showInformationMessage(
      `Credit Lens: stopped following ${basename(source)}: ${result.steps.length} step${result.steps.length === 1 ? '' : 's'} (${formatCount(result.records)} completions) imported.`,
      'Open Episode',
    );
    if (choice === 'Open Episode') await vscode.commands.executeCommand('creditLens.openRollouts', { runDir: result.runDir });
  } catch (e) {
    ctx.log.warn(`follow failed: ${(e as Error).message}`);
    void vscode.window.showErrorMessage(`Credit Lens: following ${basename(source)} failed: ${(e as Error).message}`);
  } finally {
    follows.delete(stop);
  }
}
