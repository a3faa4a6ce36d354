// What a command was handed, resolved in one place. VS Code passes different things to the same command
// depending on where it was invoked: a Runs-tree node (plus the whole multi-selection as the second argument),
// an explorer Uri, a run directory string from another command or a webview, a plain {runDir, step, episode}.
// Pure (no vscode import: a Uri is recognised by its shape), so the resolution is unit-tested.
import type { EpisodeRef } from './types';

function isFileUri(a: unknown): a is { scheme: 'file'; fsPath: string } {
  return !!a && typeof a === 'object' && (a as { scheme?: unknown }).scheme === 'file' && typeof (a as { fsPath?: unknown }).fsPath === 'string';
}

/** A run directory: a string, a file Uri, or a Runs-tree run node that has one (a queued run has none yet). */
export function runDirOf(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg || undefined;
  if (isFileUri(arg)) return arg.fsPath;
  if (arg && typeof arg === 'object' && (arg as { kind?: unknown }).kind === 'run') {
    const d = (arg as { runDir?: unknown }).runDir;
    return typeof d === 'string' ? d : undefined;
  }
  return undefined;
}

/**
 * The run directories of a multi-run command: the tree's multi-selection when there is one, else an array of
 * directories, else the one run; duplicates and arguments that name no run are dropped, order is kept.
 */
export function runDirsOf(arg: unknown, selection?: unknown): string[] {
  const list: unknown[] = Array.isArray(selection) && selection.length ? selection : Array.isArray(arg) ? arg : [arg];
  return [...new Set(list.map(runDirOf).filter((d): d is string => !!d))];
}

/** An episode: a Runs-tree episode node or a plain {runDir, step, episode}. */
export function episodeOf(arg: unknown): EpisodeRef | null {
  if (!arg || typeof arg !== 'object') return null;
  const a = arg as Partial<EpisodeRef>;
  return typeof a.runDir === 'string' && Number.isInteger(a.step) && Number.isInteger(a.episode)
    ? { runDir: a.runDir, step: a.step!, episode: a.episode! }
    : null;
}
