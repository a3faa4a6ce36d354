// Every policy-loss variant of the catalog (src/engine/losses/), checked the same way: its gradients against central
// finite differences of its own loss, at token level, at GSPO's sequence level where the variant allows it, and with
// respect to Â (a trained head's gradient). A variant whose ratio is a stop-gradient weight (CISPO) is differentiated
// with ρ held fixed, by moving the old log-prob with the new one; GSPO-token's ratio s_{i,t} = sg(s)·π/sg(π) the same
// way, plus its term's derivative at s·e^(±h), the token's own factor. Then a new variant is added on a copy of src/, as
// toy_strategy.test.ts adds a strategy, and trained through the CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOSSES } from '../../../src/engine/losses/catalog';
import type { PolicyLossSpec } from '../../../src/engine/losses/types';
import { aggregationWeights, policyLossAndGrad, type LossAgg } from '../../../src/engine/train/grpo';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { buildCli, copySources } from '../source_copy';
import { POLICY_FIXTURE_REF, tinyConfig } from '../fixtures';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

// The policy fixture: ratios inside, at and beyond both clip bounds, advantages of both signs, a reference policy for
// the KL term. No ratio sits exactly on a bound (a kink).
const x = POLICY_FIXTURE_REF;

for (const spec of LOSSES as readonly PolicyLossSpec[]) {
  const levels = spec.sequence ? (['token', 'sequence'] as const) : (['token'] as const);
  test(`policy loss ${spec.name}: gradients against central finite differences (${levels.join(' and ')} level, every loss_agg, with KL)`, () => {
    const h = 1e-6;
    for (const level of levels)
      for (const lossAgg of ['token_mean', 'seq_mean_token_mean', 'seq_mean_token_sum_norm'] as LossAgg[]) {
        const o = { clipEps: 0.2, clipEpsHigh: 0.2, klBeta: 0.05, maxNewTokens: 4, lossAgg, policyLoss: spec.name as never, importanceSamplingLevel: level };
        const r = policyLossAndGrad(x, o);
        for (let i = 0; i < 3; i++)
          for (let t = 0; t < 3; t++) {
            if (!x.mask[i][t]) continue;
            const moveLogprob = (d: number) => {
              const lp = structuredClone(x.logprobs);
              lp[i][t] += d;
              const old = structuredClone(x.oldLogprobs);
              if (spec.detachedRatio || spec.ratioLevel) old[i][t] += d;
              return policyLossAndGrad({ ...x, logprobs: lp, oldLogprobs: old }, o).loss;
            };
            let fd = (moveLogprob(h) - moveLogprob(-h)) / (2 * h);
            if (spec.ratioLevel === 'sequence_token') {
              // the ratio held fixed above gave the KL part; the ratio's part is s_{i,t} = sg(s)·e^(ℓ − sg(ℓ)): the
              // token's term at s·e^(±h), times its aggregation weight
              const c = aggregationWeights(x.mask, lossAgg, 4)[i][t];
              let sum = 0;
              let n = 0;
              for (let u = 0; u < 3; u++)
                if (x.mask[i][u]) {
                  sum += x.logprobs[i][u] - x.oldLogprobs[i][u];
                  n++;
                }
              const sRatio = Math.exp(sum / n);
              const at = (d: number) =>
                spec.term({
                  ratio: sRatio * Math.exp(d),
                  logprob: x.logprobs[i][t],
                  advantage: x.advantages[i][t],
                  lo: 0.8,
                  hi: 1.2,
                  clipEpsHigh: 0.2,
                  options: {},
                }).loss;
              fd += (c * (at(h) - at(-h))) / (2 * h);
            }
            close(r.grad[i][t], fd, 1e-7, `${level} ${lossAgg} ∂/∂ℓ[${i}][${t}]`);
            const moveAdvantage = (d: number) => {
              const adv = structuredClone(x.advantages);
              adv[i][t] += d;
              return policyLossAndGrad({ ...x, advantages: adv }, o).loss;
            };
            close(r.gradAdv[i][t], (moveAdvantage(h) - moveAdvantage(-h)) / (2 * h), 1e-7, `${level} ${lossAgg} ∂/∂Â[${i}][${t}]`);
          }
      }
  });
}

// A new variant: its file (the per-token term) and one catalog entry. −min(ρ, capped_max)·Â, the gradient cut above the
// cap: a one-sided clip with its own option.
const TOY_FILE = `// Toy: a one-sided cap on the ratio.
import { num } from '../core/fields';
import type { PolicyLossSpec } from './types';

export const capped = {
  name: 'capped' as const,
  summary: 'capped: −min(ρ, capped_max)·Â (a test toy)',
  options: { capped_max: num({ gt: 1 }, 'capped: the largest ratio that carries a gradient.').default(2) },
  sequence: true,
  sweep: { label: 'Capped', description: 'grpo.policy_loss capped (a test toy)' },
  term: ({ ratio, advantage: A, options }) => {
    const cap = options.capped_max as number;
    const cut = ratio > cap;
    return { loss: -Math.min(ratio, cap) * A, dLogprob: cut ? 0 : -ratio * A, dRatio: cut ? 0 : -A, dAdvantage: -Math.min(ratio, cap), isWeight: cut ? 0 : ratio, cut };
  },
} satisfies PolicyLossSpec;
`;

test(
  'a new policy loss is one file and one catalog entry: the config takes it and its option, and it trains through the CLI',
  { timeout: 180_000 },
  async () => {
    const dir = copySources('cl-toy-loss-');
    const losses = join(dir, 'src/engine/losses');
    writeFileSync(join(losses, 'capped.ts'), TOY_FILE);
    const catalog = readFileSync(join(losses, 'catalog.ts'), 'utf8');
    assert.match(catalog, /^export const LOSSES = \[ppo, cispo, gspo\] as const/m);
    writeFileSync(
      join(losses, 'catalog.ts'),
      catalog
        .replace("import { ppo } from './ppo';", "import { ppo } from './ppo';\nimport { capped } from './capped';")
        .replace('export const LOSSES = [ppo, cispo, gspo] as const', 'export const LOSSES = [ppo, cispo, gspo, capped] as const'),
    );
    const cli = await buildCli(dir);
    const config = tinyConfig(dir, 'countdown', 'credit: { strategy: none }\n');
    // The schema knows the variant and its option from the catalog entry: a bad value is refused with the key and range.
    const bad = cli('train', config, '--set', 'grpo.policy_loss=capped', '--set', 'grpo.capped_max=0.5');
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /grpo\.capped_max: got 0\.5, expected a number > 1/);
    const schema = JSON.parse(cli('schema').stdout);
    assert.ok(schema.properties.grpo.properties.policy_loss.enum.includes('capped'), JSON.stringify(schema.properties.grpo.properties.policy_loss));
    assert.ok(schema.properties.grpo.properties.capped_max, "the JSON Schema has the variant's option");

    const r = cli('train', config, '--set', 'grpo.policy_loss=capped', '--set', 'grpo.capped_max=1.5', '--set', 'grpo.epochs_per_step=2');
    assert.equal(r.status, 0, r.stderr);
    const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);
    const t = readTokenTable(join(runDir, 'tokens', 'step-000002.arrow'));
    // The logged importance weight is the variant's: ρ where it carries the gradient, 0 above the cap.
    const iw = t.is_weight;
    assert.ok(iw, 'the token table logs is_weight');
    let cut = 0;
    for (let k = 0; k < iw.length; k++) {
      assert.ok(iw[k] === 0 || (iw[k] > 0 && iw[k] <= 1.5), `row ${k}: is_weight ${iw[k]}`);
      if (iw[k] === 0) cut++;
    }
    assert.ok(iw.length > 0 && cut < iw.length, `${cut} of ${iw.length} tokens cut`);
  },
);
