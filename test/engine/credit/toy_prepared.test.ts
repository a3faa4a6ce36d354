// What adding a strategy whose Â comes from a prepare() step takes, shown by doing it on a copy of src/: its file, one
// catalog entry, one registry line, as for any strategy (toy_strategy.test.ts). The entry also carries what the engine
// must know of it beyond its parameters, and each part is seen to act through the CLI:
//   offline  'prepare': its prepare() reads only the episodes and the config, so the probe can score it offline;
//   check    a rule across sections, refused with the key and what is allowed;
//   warnings a valid but doubtful setting, logged when the run starts;
// and the step's one effectiveAdvantages() takes its prepared Â, which the token table logs beside its weight Â/A.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { addStrategy, buildCli, copySources } from '../source_copy';
import { sevensConfig } from '../fixtures';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';

// 1. The strategy's file: a ramp over each episode's valid tokens, Â_t = A_i · slope · (t + 1) / n_i, set in prepare().
const TOY_FILE = `// Toy: a ramp of credit toward the end of each completion, set as Â in prepare().
import { PREPARED_CREDIT, tokenAdvantageBatch, type CreditStrategy } from './types';

export const ramp: CreditStrategy = {
  name: 'ramp',
  rowLocal: true,
  prepare: async (episodes, ctx) => {
    const slope = ctx.cfg.credit.ramp_slope;
    const adv = episodes.map((e) => e.ids.map((_, t) => (e.advantage * slope * (t + 1)) / e.ids.length));
    return { batch: tokenAdvantageBatch(adv, episodes) };
  },
  ...PREPARED_CREDIT,
};
`;
// 2. Its catalog entry: the parameter, and what the engine must know of it.
const CATALOG_ENTRY = `  {
    name: 'ramp', summary: 'ramp: credit rising toward the end of the completion (a test toy)', offline: 'prepare',
    params: { ramp_slope: num({ gt: 0 }, 'ramp: the last token gets A · ramp_slope.').default(1) },
    check: (c) => (c.credit.ramp_slope > 1 && c.grpo.scale_rewards === 'none' ? [{ path: ['credit', 'ramp_slope'], expected: 'at most 1 with grpo.scale_rewards: none' }] : []),
    warnings: (c) => (c.grpo.group_size < 8 ? [\`ramp with grpo.group_size \${c.grpo.group_size}: a toy warning\`] : []),
  },
`;

test(
  'a strategy with prepared Â is one file, one catalog entry and one registry line; its check, warning and offline kind act',
  { timeout: 180_000 },
  async () => {
    const dir = copySources('cl-toy-prepared-');
    addStrategy(dir, { file: 'ramp.ts', source: TOY_FILE, exportName: 'ramp', entry: CATALOG_ENTRY });
    // The probe's offline rows come from the catalog: the copy's list now holds the toy.
    writeFileSync(
      join(dir, 'offline.ts'),
      "import { offlineStrategies } from './src/engine/credit/catalog';\nconsole.log(JSON.stringify(offlineStrategies('prepare')));\n",
    );
    const offline = spawnSync(process.execPath, ['--import', 'tsx', 'offline.ts'], { cwd: dir, encoding: 'utf8' });
    assert.equal(offline.status, 0, offline.stderr);
    assert.ok(JSON.parse(offline.stdout).includes('ramp'), offline.stdout);
    const cli = await buildCli(dir);

    // A task where every group's rewards differ (the share of "7"s), so every step has tokens with A ≠ 0.
    const config = sevensConfig(dir, { name: 'toy', seed: 7, backend: 'wasm', grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 12 }' });
    appendFileSync(config, 'credit: { strategy: ramp, ramp_slope: 0.5 }\n');
    // The entry's check sees the whole config: a grpo setting makes the credit key wrong, and the error names both.
    const bad = cli('train', config, '--set', 'credit.ramp_slope=2', '--set', 'grpo.scale_rewards=none');
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /credit\.ramp_slope: got 2, expected at most 1 with grpo\.scale_rewards: none/);

    const r = cli('train', config);
    assert.equal(r.status, 0, r.stderr);
    const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);
    assert.match(readFileSync(join(runDir, 'engine.log'), 'utf8'), /WARN +ramp with grpo\.group_size 4: a toy warning/);
    // Per episode of n tokens: Â_t = A · 0.5 · (t + 1) / n, and the logged weight Â/A (1 where A = 0), at both steps.
    let signal = 0;
    for (const step of ['step-000001.arrow', 'step-000002.arrow']) {
      const t = readTokenTable(join(runDir, 'tokens', step));
      let start = 0;
      for (let i = 0; i < t.weight.length; i++) {
        if (i + 1 < t.weight.length && t.episode[i + 1] === t.episode[i]) continue;
        const n = i + 1 - start;
        for (let k = start; k <= i; k++) {
          const want = (t.advantage[k] * 0.5 * (k - start + 1)) / n;
          assert.ok(Math.abs(t.effective_advantage[k] - want) < 1e-6, `${step} row ${k}: Â ${t.effective_advantage[k]} vs ${want}`);
          const w = t.advantage[k] !== 0 ? want / t.advantage[k] : 1;
          assert.ok(Math.abs(t.weight[k] - w) < 1e-6, `${step} row ${k}: weight ${t.weight[k]} vs ${w}`);
          if (t.advantage[k] !== 0) signal++;
        }
        start = i + 1;
      }
    }
    assert.ok(signal > 0, 'some tokens with A ≠ 0, so the ramp is seen');
  },
);
