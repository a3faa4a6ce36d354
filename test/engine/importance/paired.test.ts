// Paired rollouts (seed doc 004, part 1): pair structure, group statistics, and the Parquet file read back by an
// independent reader (hyparquet).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { parquetMetadata, parquetReadObjects, parquetSchema } from 'hyparquet';
import { initBackend } from '../../../src/engine/model/backend';
import { isUserError } from '../../../src/engine/core/errors';
import { Transformer } from '../../../src/engine/model/model';
import { cmdRollouts } from '../../../src/engine/cli/data_commands';
import {
  drawPairs,
  generatePairedGroups,
  meanVar,
  pairedRollouts,
  pairedRows,
  type PairDraw,
  type PairedGroup,
  type RowSampler,
} from '../../../src/engine/importance/paired';
import { childSeed, makeRng } from '../../../src/engine/core/rng';
import { scratchModelConfig } from '../../../src/engine/session/session';
import { loadConfig } from '../../../src/engine/config/config';
import { makeTask } from '../../../src/engine/tasks';
import { CharTokenizer } from '../../../src/engine/model/tokenizer';
import { tinyConfig } from '../fixtures';

const dir = mkdtempSync(join(tmpdir(), 'cl-paired-'));

test('pairs share exactly split_token_idx tokens and both members go on from there; rows stop like the sampler', async () => {
  await initBackend('wasm');
  const cfg = loadConfig(tinyConfig(dir, 'countdown')).config;
  const task = makeTask(cfg.task, 11);
  const tok = CharTokenizer.fromAlphabet(task.alphabet());
  const model = Transformer.init(scratchModelConfig(cfg, tok.vocabSize), 5);
  const maxNew = 24;
  const groups = await generatePairedGroups(
    model,
    tok,
    task,
    task.train.slice(0, 24),
    Array.from({ length: 24 }, (_, k) => 100 + k),
    6,
    { maxNewTokens: maxNew, temperature: 1, topP: 1, rng: makeRng(9) },
  );
  model.dispose();
  assert.equal(groups.length, 24);
  const splits: number[] = [];
  for (const [k, g] of groups.entries()) {
    assert.equal(g.groupId, 100 + k);
    assert.deepEqual(
      g.completions.map((c) => c.completionId),
      [1, 2, 3, 4, 5, 6],
    );
    assert.deepEqual(
      g.completions.map((c) => c.pairId),
      [1, 1, 2, 2, 3, 3],
    );
    for (let p = 0; p < 3; p++) {
      const [a, b] = [g.completions[2 * p], g.completions[2 * p + 1]];
      assert.equal(a.split, b.split);
      assert.ok(a.split >= 0 && a.split < a.ids.length && a.split < b.ids.length, `split ${a.split} of ${a.ids.length}- and ${b.ids.length}-token members`);
      assert.deepEqual(b.ids.slice(0, b.split), a.ids.slice(0, a.split));
      splits.push(a.split);
    }
    for (const c of g.completions) {
      assert.ok(c.ids.length >= 1 && c.ids.length <= maxNew);
      const eos = c.ids.indexOf(tok.eosId);
      assert.ok(eos === -1 || eos === c.ids.length - 1, 'nothing after EOS');
      // A completion holding "</answer>" ends with the token that completes it.
      const at = c.text.indexOf('</answer>');
      if (at >= 0) assert.equal(at + '</answer>'.length, tok.decode(c.ids.filter((id) => id !== tok.eosId)).length);
      assert.equal(c.text, tok.decode(c.ids));
      assert.deepEqual(c.reward, task.reward(c.text, g.example));
    }
  }
  // t is drawn in 0..max_new_tokens − 1 (redrawn when the prefix had ended): the 72 pairs spread over many values.
  assert.ok(new Set(splits).size >= 10 && Math.max(...splits) < maxNew, `splits ${splits}`);
});

/** Exact two-sided sign test: P(a Binomial(n, ½) count at least as far from n/2 as k). */
function signTestP(k: number, n: number): number {
  const logC = (m: number) => {
    let s = 0;
    for (let i = 1; i <= m; i++) s += Math.log(i);
    return s;
  };
  const lf = logC(n);
  const pmf = (j: number) => Math.exp(lf - logC(j) - logC(n - j) - n * Math.LN2);
  const far = Math.abs(k - n / 2);
  let p = 0;
  for (let j = 0; j <= n; j++) if (Math.abs(j - n / 2) >= far - 1e-9) p += pmf(j);
  return Math.min(1, p);
}

test("exchangeable pairs (seed doc 004): on a synthetic policy the members' lengths and rewards are equally distributed; the old scheme fails the same test", async () => {
  // A synthetic policy with a geometric length: after any token, EOS (id 2) with probability 0.12, else one of ids 3..9.
  // The reward: 1 when a completion holds three or more id-3 tokens (depends on length and content).
  const EOS = 2,
    MAX = 40;
  const policy = makeRng(123);
  const sampleNow = (rows: Parameters<RowSampler>[0]) =>
    rows.map((r) => {
      const out: number[] = [];
      while (out.length < r.budget) {
        if (policy() < 0.12) {
          out.push(EOS);
          break;
        }
        out.push(3 + Math.floor(policy() * 7));
      }
      return out;
    });
  const sample: RowSampler = async (rows) => sampleNow(rows);
  const reward = (ids: number[]) => (ids.filter((x) => x === 3).length >= 3 ? 1 : 0);
  const N = 600;
  const prompts = Array.from({ length: N }, () => [1]);
  const { pairs, fallbacks } = await drawPairs(prompts, MAX, sample, makeRng(7), (ids) => ids[ids.length - 1] === EOS);
  assert.equal(fallbacks, 0);
  const signs = (f: (p: PairDraw) => [number, number]) => {
    let gt = 0,
      n = 0;
    for (const p of pairs) {
      const [a, b] = f(p);
      if (a !== b) {
        n++;
        if (a > b) gt++;
      }
    }
    return { gt, n, p: signTestP(gt, n) };
  };
  const len = signs((p) => [p.first.length, p.second.length]);
  const rew = signs((p) => [reward(p.first), reward(p.second)]);
  for (const p of pairs) assert.deepEqual(p.first.slice(0, p.split), p.second.slice(0, p.split));
  // Exchangeable members: P(L1 > L2) = ½ among unequal pairs; a sign test at the 1 % level must not reject.
  assert.ok(len.p > 0.01, `lengths: ${len.gt} of ${len.n} first-longer, p = ${len.p}`);
  assert.ok(rew.p > 0.01, `rewards: ${rew.gt} of ${rew.n} first-better, p = ${rew.p}`);
  // The scheme before this fix, reproduced here: the first member is a full sample and keeps its continuation, t is
  // uniform over its own length, only the second is resampled from prefix t. E[L2] = E[t] + E[L] ≈ 1.5·E[L1] for a
  // geometric length, so the second member is longer far more often than not.
  const old = makeRng(7);
  const firsts = sampleNow(prompts.map((p) => ({ prefix: p, budget: MAX })));
  const ts = firsts.map((f) => Math.floor(old() * f.length));
  const seconds = sampleNow(firsts.map((f, i) => ({ prefix: [1, ...f.slice(0, ts[i])], budget: MAX - ts[i] }))).map((c, i) => [
    ...firsts[i].slice(0, ts[i]),
    ...c,
  ]);
  let gt = 0,
    n = 0;
  firsts.forEach((f, i) => {
    if (f.length !== seconds[i].length) {
      n++;
      if (f.length > seconds[i].length) gt++;
    }
  });
  const pOld = signTestP(gt, n);
  process.stderr.write(
    `paired scheme: lengths ${len.gt}/${len.n} p=${len.p.toFixed(3)}, rewards ${rew.gt}/${rew.n} p=${rew.p.toFixed(3)}; old scheme lengths ${gt}/${n} p=${pOld.toExponential(1)}\n`,
  );
  assert.ok(pOld < 1e-6, `old scheme: ${gt} of ${n} first-longer, p = ${pOld}`);
});

test('group statistics: mean and unbiased (N−1) variance of the total and of each partial reward', () => {
  const ex = { id: 3, prompt: 'p' };
  const rr = (total: number, format: number, answer: number) => ({ total, format, answer, parts: { format, answer } });
  const g: PairedGroup = {
    groupId: 0,
    example: ex,
    completions: [
      { completionId: 1, pairId: 1, split: 2, ids: [5, 6, 7], text: 'abc', reward: rr(0, 0, 0) },
      { completionId: 2, pairId: 1, split: 2, ids: [5, 6, 8], text: 'abd', reward: rr(1.1, 1, 1) },
      { completionId: 3, pairId: 2, split: 0, ids: [9], text: 'e', reward: rr(1.1, 1, 1) },
      { completionId: 4, pairId: 2, split: 0, ids: [8, 2], text: 'd', reward: rr(0.1, 1, 0) },
    ],
  };
  const same: PairedGroup = { ...g, groupId: 1, completions: g.completions.map((c) => ({ ...c, reward: rr(0.1, 1, 0) })) };
  const t = pairedRows([g, same]);
  assert.deepEqual(t.partialNames, ['format', 'answer']);
  assert.equal(t.zeroVarianceGroups, 1);
  // total: mean (0 + 1.1 + 1.1 + 0.1)/4 = 0.575; deviations −0.575, 0.525, 0.525, −0.475, squares summing to
  // 0.330625 + 0.275625·2 + 0.225625 = 1.1075, over N−1 = 3: 0.369166…
  assert.ok(Math.abs((t.columns.reward_group_mean[0] as number) - 0.575) < 1e-12);
  assert.ok(Math.abs((t.columns.reward_group_var[0] as number) - 1.1075 / 3) < 1e-12);
  // format [0, 1, 1, 1]: mean 0.75, var (0.5625 + 3·0.0625)/3 = 0.25; answer [0, 1, 1, 0]: mean 0.5, var 1/3.
  assert.deepEqual(t.columns.partial_reward_1.slice(0, 4), [0, 1, 1, 1]);
  assert.equal(t.columns.partial_reward_1_group_mean[0], 0.75);
  assert.equal(t.columns.partial_reward_1_group_var[0], 0.25);
  assert.ok(Math.abs((t.columns.partial_reward_2_group_var[3] as number) - 1 / 3) < 1e-12);
  assert.equal(t.columns.reward_group_var[4], 0);
  assert.deepEqual(meanVar([2]), { mean: 2, var: 0 });
  // eight equal rewards of 0.1 sum to 0.7999999999999999, so a plain two-pass variance is 2.2e-34, not 0
  assert.deepEqual(meanVar(Array(8).fill(0.1)), { mean: 0.1, var: 0 });
});

test('rollouts paired writes rollouts_g<G>.parquet that hyparquet reads, and the metadata', async () => {
  const cfg = tinyConfig(dir, 'countdown');
  const out = join(dir, 'out');
  const r = await pairedRollouts({ configPath: cfg, groups: 5, outputDir: out, argv: ['rollouts', 'paired', cfg, '--groups', '5'] });
  assert.equal(basename(r.parquet), 'rollouts_g4.parquet');
  assert.equal(dirname(r.parquet), r.dir);
  assert.match(basename(r.dir), /^tiny-countdown-paired-\d{8}-\d{6}$/);
  assert.deepEqual(readdirSync(r.dir).sort(), ['rollouts_g4.parquet', 'rollouts_metadata.json']);
  assert.equal(r.rows, 20);

  const buf = readFileSync(r.parquet);
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const meta = parquetMetadata(file);
  const fields = parquetSchema(meta).children.map((c) => c.element.name);
  const seedColumns = [
    'prompt_id',
    'prompt_text',
    'group_id',
    'completion_id',
    'split_token_idx',
    'completion_text',
    'reward',
    'reward_group_mean',
    'reward_group_var',
  ];
  for (const c of seedColumns) assert.ok(fields.includes(c), `column ${c}`);
  // countdown's partial rewards: format, answer, uses_all_numbers, valid_expression
  for (let k = 1; k <= 4; k++)
    for (const s of ['', '_group_mean', '_group_var']) assert.ok(fields.includes(`partial_reward_${k}${s}`), `partial_reward_${k}${s}`);
  const kv = Object.fromEntries((meta.key_value_metadata ?? []).map((e) => [e.key, e.value]));
  assert.deepEqual(JSON.parse(kv.partial_rewards!), {
    partial_reward_1: 'format',
    partial_reward_2: 'answer',
    partial_reward_3: 'uses_all_numbers',
    partial_reward_4: 'valid_expression',
  });

  const rows = await parquetReadObjects({ file });
  assert.equal(rows.length, 20);
  const c = loadConfig(cfg).config;
  const task = makeTask(c.task, childSeed(c.task.split_seed, 'task'));
  for (let g = 0; g < 5; g++) {
    const grp = rows.filter((x) => x.group_id === g);
    assert.deepEqual(
      grp.map((x) => x.completion_id),
      [1, 2, 3, 4],
    );
    const { mean, var: v } = meanVar(grp.map((x) => x.reward as number));
    for (const x of grp) {
      assert.ok(Math.abs((x.reward_group_mean as number) - mean) < 1e-12);
      assert.ok(Math.abs((x.reward_group_var as number) - v) < 1e-12);
      assert.equal(typeof x.prompt_text, 'string');
      assert.equal(typeof x.completion_text, 'string');
      assert.equal(typeof x.split_token_idx, 'number');
      const ex = task.train.find((e) => e.id === x.prompt_id)!;
      assert.equal(x.prompt_text, ex.prompt);
      // the reward recomputed from the stored text, by the task's reward function
      const rw = task.reward(x.completion_text as string, ex);
      assert.equal(x.reward, rw.total);
      assert.equal(x.partial_reward_1, rw.parts!.format);
      assert.equal(x.partial_reward_4, rw.parts!.valid_expression);
    }
    for (const p of [1, 2]) {
      const [a, b] = grp.filter((x) => x.pair_id === p);
      assert.equal(a.split_token_idx, b.split_token_idx);
      const t = a.split_token_idx as number;
      assert.deepEqual([...(b.completion_token_ids as number[])].slice(0, t), [...(a.completion_token_ids as number[])].slice(0, t));
    }
  }
  const md = JSON.parse(readFileSync(r.metadata, 'utf8'));
  assert.equal(md.arguments.groups, 5);
  assert.deepEqual(md.arguments.argv, ['rollouts', 'paired', cfg, '--groups', '5']);
  assert.ok(md.runtime_s > 0);
  assert.ok(!Number.isNaN(Date.parse(md.date)));
  assert.equal(md.model.source, 'scratch');
  assert.equal(md.model.d_model, 32);
  assert.equal(md.task.name, 'countdown');
  assert.equal(typeof md.engine_version, 'string');
  assert.equal(md.sampling.group_size, 4);
});

test('an odd group size and bad arguments are user errors', async () => {
  const cfg = tinyConfig(dir, 'arithmetic');
  await assert.rejects(
    pairedRollouts({ configPath: cfg, sets: ['grpo.group_size=5'], groups: 1, outputDir: join(dir, 'odd') }),
    (e) => isUserError(e) && /group_size: got 5.*even/.test((e as Error).message),
  );
  await assert.rejects(cmdRollouts(['serial', cfg]), (e) => isUserError(e) && /or the subcommand paired/.test((e as Error).message));
  await assert.rejects(cmdRollouts(['paired', cfg, '--groups', '0']), (e) => isUserError(e) && /--groups/.test((e as Error).message));
  await assert.rejects(cmdRollouts(['paired', cfg, '--checkpoint', join(dir, 'nope')]), (e) => isUserError(e) && /no such folder/.test((e as Error).message));
});
