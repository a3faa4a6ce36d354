// The bench's PyTorch rows beside its anchor: a PyTorch measured on its own (medians of its train steps and rollouts),
// with wasm-blas's figures of the same run over them. bench.ts runs Debian's 1.13 and the anchor with torch.compile so.
import { median } from '../core/stats';
import { TorchServer } from './rounds';

/** What a row is compared with: wasm-blas's figures of the same run (bench.ts's result). */
interface EngineFigures {
  train_step_ms: { wasm_blas: number | null };
  rollout_tokens_per_s: { wasm_blas: number | null };
  small: { train_step_ms: { wasm_blas: number | null }; rollout_tokens_per_s: { wasm_blas: number | null } };
}

/** A PyTorch row of the bench: its version, its figures (medians), and wasm-blas's over them. */
export interface TorchRow {
  python: string;
  torch_version: string;
  train_step_ms: { reference: number; small: number };
  rollout_tokens_per_s: { reference: number; small: number } | null;
  /** wasm-blas's train-step time over this row's, and its rollout speed over this row's */
  wasm_blas_ratio: { reference_train: number | null; small_train: number | null; reference_rollout: number | null; small_rollout: number | null };
}

/** The PyTorch of the bench's headline figures: PyTorch 2.x from the package index (CREDIT_LENS_PYTHON, else python3). */
export const ANCHOR_PYTHON = () => process.env.CREDIT_LENS_PYTHON || 'python3';

/** A PyTorch row measured on its own (medians, not paired): train steps of both models, rollouts unless compiled. */
export async function torchRow(python: string, args: string[], quick: boolean, result: EngineFigures): Promise<TorchRow | { error: string }> {
  const server = TorchServer.spawn('torch_ref.py', ['--serve', ...args], python);
  if ('error' in server) return server;
  try {
    const info = await server.ask<{ torch_version: string }>({ op: 'info' });
    const train = { reference: median(await server.train('reference', quick ? 3 : 8)), small: median(await server.train('small', quick ? 2 : 4)) };
    const rollout = args.includes('--compile')
      ? null
      : { reference: median(await server.rollout('reference', quick ? 1 : 3)), small: median(await server.rollout('small', quick ? 1 : 2)) };
    const over = (x: number | null, y: number | null | undefined) => (x && y ? x / y : null);
    return {
      python,
      torch_version: info.torch_version,
      train_step_ms: train,
      rollout_tokens_per_s: rollout,
      wasm_blas_ratio: {
        reference_train: over(result.train_step_ms.wasm_blas, train.reference),
        small_train: over(result.small.train_step_ms.wasm_blas, train.small),
        reference_rollout: over(result.rollout_tokens_per_s.wasm_blas, rollout?.reference),
        small_rollout: over(result.small.rollout_tokens_per_s.wasm_blas, rollout?.small),
      },
    };
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  } finally {
    server.close();
  }
}

/** The second rows, said as they are measured. */
export async function torchRows(
  anchor: string,
  quick: boolean,
  result: EngineFigures,
  say: (m: string) => void,
): Promise<Record<'debian' | 'compiled', TorchRow | { error: string }>> {
  const rows = {} as Record<'debian' | 'compiled', TorchRow | { error: string }>;
  for (const [key, python, args, label] of [
    ['debian', '/usr/bin/python3', [], "Debian's PyTorch (/usr/bin/python3)"],
    ['compiled', anchor, ['--compile'], 'the anchor with torch.compile (train step)'],
  ] as const) {
    const row = await torchRow(python, [...args], quick, result);
    rows[key] = row;
    if ('error' in row) {
      say(`${label}: unavailable (${row.error})`);
      continue;
    }
    const f = (x: number | null) => (x === null ? '–' : `${x.toFixed(2)}×`);
    say(
      `${label}, torch ${row.torch_version}: train step ${row.train_step_ms.reference.toFixed(1)} ms (wasm-blas ${f(row.wasm_blas_ratio.reference_train)} its time), ` +
        `small ${row.train_step_ms.small.toFixed(1)} ms (${f(row.wasm_blas_ratio.small_train)})` +
        (row.rollout_tokens_per_s
          ? `; rollout ${row.rollout_tokens_per_s.reference.toFixed(0)} tok/s (wasm-blas ${f(row.wasm_blas_ratio.reference_rollout)} its speed), small ${row.rollout_tokens_per_s.small.toFixed(0)} tok/s (${f(row.wasm_blas_ratio.small_rollout)})`
          : ''),
    );
  }
  return rows;
}
