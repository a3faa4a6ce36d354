// Credit concentration (analysis/concentration.ts): the Gini coefficient and effective token ratio of |Â| per episode,
// ARCA's checks that a credit signal has not collapsed onto a few tokens. Expected numbers are worked by hand beside
// each assertion (the Gini also by the mean-absolute-difference form, an independent formula); then a real GRPO run
// logs them per step: exactly 0 and 1 under plain GRPO, and away from them under a strategy that reweights tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { creditConcentration, effectiveTokenRatio, gini } from '../../../src/engine/analysis/concentration';

const close = (a: number | null, b: number, what: string) => assert.ok(a !== null && Math.abs(a - b) < 1e-12, `${what}: ${a} vs ${b}`);

test('Gini and the effective token ratio against hand arithmetic', () => {
  close(gini([1, 1, 1, 1]), 0, 'equal');
  // one token holds it all: (n − 1)/n = 0.75
  close(gini([0, 0, 0, 4]), 0.75, 'one');
  // 1, 2, 3, 4: Σ(2i − n − 1)x = −3 − 2 + 3 + 12 = 10, / (4·10) = 0.25; by the mean absolute difference,
  // Σ_ij |x_i − x_j| = 2·(1 + 2 + 3 + 1 + 2 + 1) = 20 over 2n²μ = 2·16·2.5 = 80: 0.25
  close(gini([4, 1, 3, 2]), 0.25, 'ramp');
  // signs do not matter: credit on a token is credit whichever way it pushes
  close(gini([-4, 1, -3, 2]), 0.25, 'signed');
  assert.equal(gini([0, 0]), null);
  close(effectiveTokenRatio([1, 1, 1, 1]), 1, 'equal');
  close(effectiveTokenRatio([0, 0, 0, 4]), 0.25, 'one of four');
  // (1 + 2 + 3 + 4)² / (4·(1 + 4 + 9 + 16)) = 100/120
  close(effectiveTokenRatio([1, 2, 3, 4]), 100 / 120, 'ramp');
  close(effectiveTokenRatio([-1, 1]), 1, 'signed');
  assert.equal(effectiveTokenRatio([0, 0, 0]), null);
});

test('the step means: padding past each episode is left out, and so are episodes with no credit', () => {
  const m = creditConcentration(
    [
      [0.5, 0.5, 0.5, 9, 9],
      [0, 0, 0, 0],
      [1, 2, 3, 4, 7],
    ],
    [3, 4, 4],
  );
  // episode 0: three equal tokens (Gini 0, ratio 1); episode 1 carries nothing; episode 2: 1..4 (0.25, 100/120)
  close(m['credit/gini'], 0.125, 'mean Gini');
  close(m['credit/effective_token_ratio'], (1 + 100 / 120) / 2, 'mean ratio');
  assert.deepEqual(creditConcentration([[0, 0]], [2]), {});
});

test('a real run logs them per step: plain GRPO is uniform, entropy_weighted is not', { timeout: 180_000 }, async () => {
  const { train } = await import('../../../src/engine/train/train');
  const { sevensConfig } = await import('../fixtures');
  const dir = mkdtempSync(join(tmpdir(), 'cl-concentration-'));
  // the share of 7s as the reward: every group's rewards differ, so every step carries credit
  const cfg = sevensConfig(dir, { name: 'conc', seed: 3, backend: 'wasm', grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 8 }' });
  const rows = async (strategy: string) => {
    const r = await train({ configPath: cfg, sets: [`credit.strategy=${strategy}`, `name=conc-${strategy}`] });
    return readFileSync(join(r.runDir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number | string>)
      .filter((x) => x.phase === 'grpo' && x['credit/gini'] !== undefined);
  };
  const plain = await rows('none');
  assert.equal(plain.length, 2, 'both steps carry credit');
  for (const x of plain) {
    assert.equal(x['credit/gini'], 0);
    assert.ok(Math.abs((x['credit/effective_token_ratio'] as number) - 1) < 1e-12);
  }
  const weighted = await rows('entropy_weighted');
  assert.equal(weighted.length, 2);
  for (const x of weighted) {
    assert.ok((x['credit/gini'] as number) > 0 && (x['credit/gini'] as number) < 1, String(x['credit/gini']));
    assert.ok((x['credit/effective_token_ratio'] as number) < 1, String(x['credit/effective_token_ratio']));
  }
});
