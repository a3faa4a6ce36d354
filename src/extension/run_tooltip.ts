// A run's hover in the Runs tree: its status, where it comes from (its backend, or an imported run's source and how
// far a followed one has come), its times, its evals and its folder.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { escapeMarkdown, inlineCode } from './markdown';
import { percent, type summarizeMetrics } from './metrics_summary';
import { formatCount, formatFixed } from '../protocol/number_format';
import { isTraining, startedShort, timesOf } from './run_status';
import type { RunNode } from './runs_tree';

/** A run's hover: its status, where it comes from (a backend, or an import's source), its times, evals and folder. */
export function runTooltip(node: RunNode, label: string, summary: ReturnType<typeof summarizeMetrics> | null): vscode.MarkdownString {
  const md = new vscode.MarkdownString(undefined, true);
  md.appendMarkdown(
    `**${escapeMarkdown(node.info?.name ?? label)}** — ${node.interrupted ? 'interrupted (its engine is no longer running)' : node.status}\n\n`,
  );
  const imp = node.info?.imported;
  if (imp) {
    // an imported or followed run trained elsewhere: where it comes from and how far it has come, not a backend
    const steps = node.info!.total_steps ?? 0;
    const updated = node.runDir ? lastWritten(node.runDir) : null;
    md.appendMarkdown(
      `${imp.following ? 'following' : 'imported from'} ${inlineCode(imp.source)} (${escapeMarkdown(imp.format)}) · ${steps} step${steps === 1 ? '' : 's'}, ` +
        `${formatCount(imp.records)} completions${imp.skipped ? ` (${formatCount(imp.skipped)} skipped)` : ''}` +
        `${updated ? ` · last update ${updated}` : ''} · strategy ${inlineCode(node.info!.strategy ?? '?')}\n\n`,
    );
  } else if (node.info) {
    md.appendMarkdown(
      `strategy ${inlineCode(node.info.strategy ?? '?')} · backend ${inlineCode(String(node.info.backend))}${node.info.backend_reason ? ` (${escapeMarkdown(node.info.backend_reason)})` : ''}\n\n`,
    );
  }
  if (node.info) {
    md.appendMarkdown(`${escapeMarkdown(timesOf(node.info.started, node.info.ended, isTraining(node.status) && !node.interrupted))}\n\n`);
    if (node.info.error) md.appendMarkdown(`error: ${escapeMarkdown(String(node.info.error))}\n\n`);
  }
  // an imported run has no evals of its own: no line of dashes
  if (summary && (summary.finalEvalSuccess !== null || !imp)) {
    md.appendMarkdown(
      `final eval ${percent(summary.finalEvalSuccess, 1)} · best eval ${percent(summary.bestEvalSuccess, 1)} · mean grad norm ${formatFixed(summary.meanGradNorm, 3)}\n\n`,
    );
  }
  if (node.slurm)
    md.appendMarkdown(
      `Slurm job ${inlineCode(node.slurm.job)}: ${escapeMarkdown(node.slurm.state ?? 'state not known yet')}${node.slurm.reason ? ` (${escapeMarkdown(node.slurm.reason)})` : ''}\n\n`,
    );
  if (node.runDir) md.appendMarkdown(inlineCode(node.runDir));
  return md;
}

/** When the run's record last changed (a followed run's last step), as the tree's dates read; null without one. */
function lastWritten(runDir: string): string | null {
  const st = statSync(join(runDir, 'run.json'), { throwIfNoEntry: false });
  return st ? startedShort(new Date(st.mtimeMs).toISOString()) : null;
}
