// "Probe This Episode…": Monte Carlo values of the shown episode's prefixes (`credit-lens probe --episode`),
// with a cancellable progress notification, then the episode painted by its MC credit δ. A cancelled probe keeps the
// episodes it finished (none, for one episode), and the same command starts it again.
import * as vscode from 'vscode';
import { readProbeRecord, type ProbeReport } from '../../engine/rundir/probe_record';
import { probeableSteps } from '../../engine/rundir/policies';
import { readRunInfo } from '../../engine/rundir/rundir';
import type { Ctx } from '../ctx';
import { probeArgs } from '../engine_cli';
import { withCancellableProgress } from '../progress';
import { readSettings } from '../vscode_settings';
import { UNTRUSTED_MESSAGE } from '../runs';
import type { EpisodeStore } from './episode_doc';
import { withinNoise, type Painter } from './paint';
import { probeReliability } from './probe_reliability';
import { reliabilityAtRollouts, rolloutsForReliability, RELIABILITY_TARGET } from '../../engine/probe/plan';

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
  const m = await pickRollouts(view.rows.length, { runDir, step, episode }, found, server);
  if (m === undefined) return;
  const args = probeArgs(runDir, step, episode, { rollouts: m, replace: elsewhere || (prior !== null && m !== prior), server: server ?? undefined });
  ctx.log.info(`probe ${runDir} step ${step} episode ${episode} with ${m} rollouts per position${server ? ` on ${server}` : ''}`);
  const report = await runProbe(ctx, args, `Credit Lens: probing step ${step} episode ${episode}`, server);
  if (!report) return;
  await store.reload(runDir, step);
  await painter.state.setMetric('extra.mc_delta');
  ctx.log.info(`probed step ${step} episode ${episode}: ${report.continuations} continuations in ${report.seconds.toFixed(1)} s → ${report.table}`);
  // the noise first: a probed number never shows without it
  const after = probeReliability(runDir, step);
  const shown = painter.activeView();
  const noisy = shown ? withinNoise(shown, 'extra.mc_delta').filter(Boolean).length : 0;
  const more = after?.half != null ? rolloutsForReliability(after.half, after.rollouts, MAX_PICKED_ROLLOUTS) : null;
  const noise =
    after && after.full !== null
      ? `split-half reliability ${after.full.toFixed(2)}${after.warning ? ` (${after.warning})` : ''}; `
      : 'no reliability (the probe kept no independent halves); ';
  const action = more && more > m ? `Probe Again with M = ${more}` : null;
  const choice = await vscode.window.showInformationMessage(
    `Credit Lens: probed episode ${episode} of step ${step} at M = ${m}: ${noise}${noisy} of ${shown?.rows.length ?? '?'} δ within 2 se of 0 are left unpainted. ` +
      `Painted by MC credit δ (${report.continuations} continuations, ${report.seconds.toFixed(1)} s); hover a token for V ± se, δ and M.`,
    ...(action ? [action] : []),
  );
  if (!choice || !more) return;
  const again = probeArgs(runDir, step, episode, { rollouts: more, replace: true, server: server ?? undefined });
  ctx.log.info(`probe ${runDir} step ${step} episode ${episode} again with ${more} rollouts per position`);
  if (await runProbe(ctx, again, `Credit Lens: probing step ${step} episode ${episode} at M = ${more}`, server)) await store.reload(runDir, step);
}

/**
 * M, from a picker whose every row says what that M costs and, from this step's probe where there is one, what
 * reliability of δ it can be expected to give (probe --plan's extrapolation), with the fewest M that reaches 0.7.
 */
async function pickRollouts(
  tokens: number,
  at: { runDir: string; step: number; episode: number },
  found: { rollouts: number; server: string | null } | null,
  server: string | null,
): Promise<number | undefined> {
  const prior = found?.rollouts ?? null;
  const elsewhere = found !== null && found.server !== server;
  const where = (url: string | null) => (url ? `on ${url}` : 'in the engine');
  const rel = found ? probeReliability(at.runDir, at.step) : null;
  const usable = rel?.half != null ? rolloutsForReliability(rel.half, rel.rollouts, MAX_PICKED_ROLLOUTS) : null;
  const counts = [...new Set([prior ?? 8, 8, 16, 32, 4, ...(usable ? [usable] : [])])].sort((a, b) => a - b);
  const expected = (m: number) => {
    const r = rel?.half != null ? reliabilityAtRollouts(rel.half, rel.rollouts, m) : null;
    return r === null ? '' : ` · expected reliability of δ ${r.toFixed(2)}${r < RELIABILITY_TARGET ? ' (mostly noise)' : ''}`;
  };
  const description = (m: number) =>
    elsewhere
      ? `replaces this step's probe (sampled ${where(found!.server)}; this one samples ${where(server)})`
      : prior !== null && m !== prior
        ? `replaces this step's probe (made with ${prior})`
        : m === usable
          ? `the fewest whose δ is expected to reach reliability ${RELIABILITY_TARGET}`
          : m === 8
            ? 'default'
            : '';
  const pick = await vscode.window.showQuickPick(
    counts.map((m) => ({
      label: `${m} rollouts per position`,
      description: description(m),
      detail: `${m} continuations from every prefix of the ${tokens}-token completion: ≈ ${m * tokens} samples; the standard error of V is ≤ ${(0.5 / Math.sqrt(m)).toFixed(2)} × the reward range${expected(m)}`,
      m,
    })),
    {
      title: `Probe step ${at.step} episode ${at.episode}: Monte Carlo values of its prefixes`,
      placeHolder:
        rel?.half != null
          ? `continuations per position; this step's probe at M = ${rel.rollouts} has split-half reliability ${rel.full?.toFixed(2) ?? '—'}`
          : 'continuations per position; at small M most of δ is noise, and a δ within 2 se of 0 is left unpainted',
    },
  );
  return pick?.m;
}

/** A probe with its cancellable progress; on a failure the cause first, then what to do about it. Null if none ran. */
async function runProbe(ctx: Ctx, args: string[], title: string, server: string | null): Promise<ProbeReport | null> {
  try {
    return await withCancellableProgress(
      title,
      (done, total) => `${done} of ${total} continuations`,
      (onProgress, signal) => ctx.engineCli.probe(args, onProgress, signal),
    );
  } catch (e) {
    ctx.log.warn(`probe failed: ${(e as Error).message}`);
    const actions = [...(server ? ['Open Settings'] : []), 'Show Log'];
    void vscode.window.showErrorMessage(`Credit Lens: probe failed: ${(e as Error).message}`, ...actions).then((choice) => {
      if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'creditLens.probe.server');
      else if (choice === 'Show Log') ctx.log.show(true);
    });
    return null;
  }
}

/** The most continuations per position the picker offers or suggests. */
const MAX_PICKED_ROLLOUTS = 256;
