// "Probe This Episode…": Monte Carlo values of the shown episode's prefixes (`credit-lens probe --episode`),
// with a cancellable progress notification, then the episode painted by its MC credit δ. A cancelled probe keeps the
// episodes it finished (none, for one episode), and the same command starts it again.
import * as vscode from 'vscode';
import { readProbeRecord } from '../../engine/rundir/probe_record';
import { probeableSteps } from '../../engine/rundir/policies';
import { readRunInfo } from '../../engine/rundir/rundir';
import type { Ctx } from '../ctx';
import { probeArgs } from '../engine_cli';
import { withCancellableProgress } from '../progress';
import { readSettings } from '../vscode_settings';
import { UNTRUSTED_MESSAGE } from '../runs';
import type { EpisodeStore } from './episode_doc';
import type { Painter } from './paint';

/** The rollouts an earlier probe of the step used and where it sampled (a server's URL, or null: the engine), or null. */
function priorProbe(runDir: string, step: number): { rollouts: number; server: string | null } | null {
  try {
    const r = readProbeRecord(runDir, step);
    return r ? { rollouts: r.rollouts, server: r.sampler?.url ?? null } : null;
  } catch {
    return null; // an unreadable record: the probe replaces it
  }
}

export async function probeEpisodeCommand(ctx: Ctx, store: EpisodeStore, painter: Painter): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(`Credit Lens: ${UNTRUSTED_MESSAGE}`);
    return;
  }
  const view = painter.activeView();
  if (!view) {
    void vscode.window.showInformationMessage('Credit Lens: open an episode first (Open Episode…), then probe it.');
    return;
  }
  const { runDir, step, episode } = view.ref;
  const found = priorProbe(runDir, step);
  const prior = found?.rollouts ?? null;
  // creditLens.probe.server: sampled there; a step probed elsewhere is probed again, not extended
  const server = readSettings().probeServer || null;
  // Here, a probe samples from the policy that sampled the step: a run keeps it for some steps only. Say so before
  // asking for M, and offer the nearest step that can be probed. (A server serves whatever policy it was given; an
  // imported run's policy is there, not here.)
  if (!server && !readRunInfo(runDir)?.imported) {
    const ok = probeableSteps(runDir);
    if (!ok.includes(step)) {
      const why = `step ${step} cannot be probed here: the run kept neither the policy that sampled it nor checkpoint ${step - 1}`;
      if (!ok.length) {
        void vscode.window.showInformationMessage(
          `Credit Lens: ${why}, and no step of this run can be. Runs keep the sampling policy of step 1 and every logging.probe_every-th step; set it before training.`,
        );
        return;
      }
      const nearest = ok.reduce((a, b) => (Math.abs(b - step) < Math.abs(a - step) ? b : a));
      const choice = await vscode.window.showInformationMessage(`Credit Lens: ${why}. The nearest step that can is ${nearest}.`, `Open Step ${nearest}`);
      if (choice) await vscode.commands.executeCommand('creditLens.openRollouts', { runDir, step: nearest });
      return;
    }
  }
  const elsewhere = found !== null && found.server !== server;
  const where = (url: string | null) => (url ? `on ${url}` : 'in the engine');
  const counts = [...new Set([prior ?? 8, 8, 16, 32, 4])];
  const pick = await vscode.window.showQuickPick(
    counts.map((m) => ({
      label: `${m} rollouts per position`,
      description: elsewhere
        ? `replaces this step's probe (sampled ${where(found!.server)}; this one samples ${where(server)})`
        : prior !== null && m !== prior
          ? `replaces this step's probe (made with ${prior})`
          : m === 8
            ? 'default'
            : '',
      detail: `${m} continuations from every prefix of the ${view.rows.length}-token completion: ≈ ${m * view.rows.length} samples; the standard error of V is ≤ ${(0.5 / Math.sqrt(m)).toFixed(2)} × the reward range`,
      m,
    })),
    { title: `Probe step ${step} episode ${episode}: Monte Carlo values of its prefixes`, placeHolder: 'continuations per position' },
  );
  if (!pick) return;
  const args = probeArgs(runDir, step, episode, { rollouts: pick.m, replace: elsewhere || (prior !== null && pick.m !== prior), server: server ?? undefined });
  ctx.log.info(`probe ${runDir} step ${step} episode ${episode} with ${pick.m} rollouts per position${server ? ` on ${server}` : ''}`);
  let report;
  try {
    report = await withCancellableProgress(
      `Credit Lens: probing step ${step} episode ${episode}`,
      (done, total) => `${done} of ${total} continuations`,
      (onProgress, signal) => ctx.engineCli.probe(args, onProgress, signal),
    );
    if (report === null) return;
  } catch (e) {
    ctx.log.warn(`probe failed: ${(e as Error).message}`);
    void vscode.window.showErrorMessage(`Credit Lens: probe failed: ${(e as Error).message}`);
    return;
  }
  await store.reload(runDir, step);
  await painter.state.setMetric('extra.mc_delta');
  ctx.log.info(`probed step ${step} episode ${episode}: ${report.continuations} continuations in ${report.seconds.toFixed(1)} s → ${report.table}`);
  void vscode.window.showInformationMessage(
    `Credit Lens: probed episode ${episode} of step ${step} (${report.continuations} continuations, ${report.seconds.toFixed(1)} s); painted by MC credit δ. Hover a token for V ± se, δ and M.`,
  );
}
