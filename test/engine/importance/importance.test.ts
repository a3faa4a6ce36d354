// The importance network (seed doc 004, part 2): its likelihood, the constant baseline, the split, the checkpoint,
// and learning on synthetic pairs whose true correlation is a known function of the prefix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../../src/engine/model/backend';
import { isUserError } from '../../../src/engine/core/errors';
import {
  F_CLAMP,
  fitConstantCorrelation,
  ImportanceNet,
  pairNll,
  pairsFromTable,
  splitByPrompt,
  trainImportance,
  type PairExample,
} from '../../../src/engine/importance/importance';
import { encodeParquet, readParquetTable } from '../../../src/engine/importance/parquet';
import { makeRng, randNormal } from '../../../src/engine/core/rng';
import { CharTokenizer } from '../../../src/engine/model/tokenizer';

const dir = mkdtempSync(join(tmpdir(), 'cl-importance-'));

/** −log of the bivariate normal density from Σ itself: Σ⁻¹ by the 2×2 adjugate, det Σ = Σ11·Σ22 − Σ12². */
function nllFromCovariance(r1: number, r2: number, m: number, v: number, f: number): number {
  const s11 = v,
    s22 = v,
    s12 = f * v;
  const det = s11 * s22 - s12 * s12;
  const d1 = r1 - m,
    d2 = r2 - m;
  const quad = (s22 * d1 * d1 - 2 * s12 * d1 * d2 + s11 * d2 * d2) / det;
  // −log[exp(−½ quad) / (2π √det)], in log form so a near-singular Σ does not underflow
  return 0.5 * quad + Math.log(2 * Math.PI) + 0.5 * Math.log(det);
}

test('pairNll is the bivariate normal NLL; f is clamped to ±(1 − 1e-4)', () => {
  for (const [r1, r2, m, v, f] of [
    [0.3, 0.9, 0.5, 0.2, 0.4],
    [1, 0, 0.5, 0.25, -0.7],
    [0.1, 0.1, 0.1, 1e-3, 0],
    [2, -1, 0, 3, 0.999],
  ]) {
    const a = pairNll(r1, r2, m, v, f),
      b = nllFromCovariance(r1, r2, m, v, f);
    assert.ok(Math.abs(a - b) < 1e-9 * Math.max(1, Math.abs(b)), `${a} vs ${b}`);
  }
  assert.ok(Math.abs(pairNll(1, 1, 0, 1, 1) - nllFromCovariance(1, 1, 0, 1, 1 - F_CLAMP)) < 1e-9);
  assert.ok(Math.abs(pairNll(1, -1, 0, 1, -1) - nllFromCovariance(1, -1, 0, 1, -1 + F_CLAMP)) < 1e-9);
});

test('the constant baseline is the maximum-likelihood correlation', () => {
  // By hand: z pairs (1, 1) and (1, −1) give A = mean(z1² + z2²) = 2 and C = mean(z1·z2) = 0; the f-dependent NLL
  // ½ log(1 − f²) + (A − 2fC)/(2(1 − f²)) has derivative −f/(1 − f²) + … that vanishes at f = 0.
  assert.ok(
    Math.abs(
      fitConstantCorrelation([
        { z1: 1, z2: 1 },
        { z1: 1, z2: -1 },
      ]),
    ) < 1e-6,
  );
  // (1, 1) and (−1, −1): C = 1, the NLL ½ log(1 − f²) + 1/(1 + f) decreases all the way to the clamp.
  assert.ok(
    Math.abs(
      fitConstantCorrelation([
        { z1: 1, z2: 1 },
        { z1: -1, z2: -1 },
      ]) -
        (1 - F_CLAMP),
    ) < 1e-6,
  );
  // Independently: a brute-force grid over pairNll itself on random pairs with correlation 0.6.
  const rng = makeRng(4);
  const zs = Array.from({ length: 300 }, () => {
    const a = randNormal(rng);
    return { z1: a, z2: 0.6 * a + 0.8 * randNormal(rng) };
  });
  let best = 0,
    bestV = Infinity;
  for (let i = -9999; i <= 9999; i++) {
    const f = i / 10000;
    const v = zs.reduce((s, z) => s + pairNll(z.z1, z.z2, 0, 1, f), 0);
    if (v < bestV) {
      bestV = v;
      best = f;
    }
  }
  assert.ok(Math.abs(fitConstantCorrelation(zs) - best) < 2e-4, `${fitConstantCorrelation(zs)} vs grid ${best}`);
});

test('the split is by prompt, and one prompt cannot be split', () => {
  const pairs = Array.from({ length: 40 }, (_, i) => ({ prompt: i % 10, prefix: [1], r1: 0, r2: 1, mean: 0.5, var: 0.5 }));
  const { train, test: held } = splitByPrompt(pairs, 0.2, 1);
  const a = new Set(train.map((p) => p.prompt)),
    b = new Set(held.map((p) => p.prompt));
  assert.equal(b.size, 2); // round(0.2 · 10)
  assert.equal(a.size, 8);
  for (const p of b) assert.ok(!a.has(p));
  assert.equal(train.length + held.length, 40);
  assert.throws(
    () =>
      splitByPrompt(
        pairs.filter((p) => p.prompt === 3),
        0.2,
        1,
      ),
    (e) => isUserError(e) && /at least 2/.test((e as Error).message),
  );
});

test('pairs come from the parquet columns; zero-variance groups are skipped and counted', async () => {
  const tok = CharTokenizer.fromAlphabet('abc>');
  const ids = (s: string) => Int32Array.from(tok.encode(s));
  // group 0: two pairs with variance; group 1: every reward 0.5 (zero variance).
  const rows = [
    { g: 0, c: 1, p: 1, t: 2, s: 'abca', r: 1 },
    { g: 0, c: 2, p: 1, t: 2, s: 'abb', r: 0 },
    { g: 0, c: 3, p: 2, t: 0, s: 'c', r: 1 },
    { g: 0, c: 4, p: 2, t: 0, s: 'ba', r: 0 },
    { g: 1, c: 1, p: 1, t: 1, s: 'aa', r: 0.5 },
    { g: 1, c: 2, p: 1, t: 1, s: 'ab', r: 0.5 },
    { g: 1, c: 3, p: 2, t: 0, s: 'b', r: 0.5 },
    { g: 1, c: 4, p: 2, t: 0, s: 'c', r: 0.5 },
  ];
  const cols = {
    prompt_id: rows.map((x) => x.g + 7),
    prompt_text: rows.map((x) => (x.g ? 'b>' : 'a>')),
    group_id: rows.map((x) => x.g),
    completion_id: rows.map((x) => x.c),
    pair_id: rows.map((x) => x.p),
    split_token_idx: rows.map((x) => x.t),
    completion_text: rows.map((x) => x.s),
    completion_token_ids: rows.map((x) => ids(x.s)),
    reward: rows.map((x) => x.r),
    // group 0 rewards [1, 0, 1, 0]: mean 0.5, unbiased variance 1/3
    reward_group_mean: rows.map(() => 0.5),
    reward_group_var: rows.map((x) => (x.g ? 0 : 1 / 3)),
  };
  const path = join(dir, 'pairs.parquet');
  writeFileSync(path, await encodeParquet(cols, {}));
  const data = pairsFromTable(await readParquetTable(path), tok);
  assert.equal(data.groups, 2);
  assert.equal(data.skippedGroups, 1);
  assert.equal(data.skippedPairs, 2);
  assert.equal(data.pairs.length, 2);
  const [p1, p2] = data.pairs;
  assert.deepEqual(p1.prefix, [...tok.encodePrompt('a>'), ...tok.encode('ab')]);
  assert.deepEqual(p2.prefix, tok.encodePrompt('a>'));
  assert.deepEqual([p1.r1, p1.r2, p1.mean, p1.prompt], [1, 0, 0.5, 7]);
  assert.ok(Math.abs(p1.var - 1 / 3) < 1e-12);
  // a pair that does not share its first split_token_idx tokens is refused
  const bad = { ...cols, split_token_idx: cols.split_token_idx.map((t, i) => (i < 2 ? 3 : t)) };
  writeFileSync(path, await encodeParquet(bad, {}));
  await assert.rejects(
    async () => pairsFromTable(await readParquetTable(path), tok),
    (e) => isUserError(e) && /does not share/.test((e as Error).message),
  );
});

/**
 * Synthetic truth: 100 prompts, 4 pairs each. A pair's shared prefix is the prompt plus 1–8 random letters of
 * "abc", in half of them one letter replaced by "x". The true correlation is 0.9 when the prefix holds an "x",
 * else 0.1 — so it depends on a token anywhere in the prefix, not on its length or last token. Rewards are drawn
 * from N((m, m), v[[1, ρ], [ρ, 1]]) with a per-group m ~ U(0, 1), v ~ U(0.05, 0.5), and those m, v given as the
 * group statistics.
 */
function synthetic(tok: CharTokenizer): { pairs: PairExample[]; truth: number[] } {
  const rng = makeRng(3);
  const pairs: PairExample[] = [];
  const truth: number[] = [];
  const promptIds = tok.encodePrompt('ab>');
  for (let q = 0; q < 100; q++) {
    const m = rng(),
      v = 0.05 + 0.45 * rng();
    for (let k = 0; k < 4; k++) {
      const len = 1 + Math.floor(rng() * 8);
      const s = Array.from({ length: len }, () => 'abc'[Math.floor(rng() * 3)]);
      if (rng() < 0.5) s[Math.floor(rng() * len)] = 'x';
      const rho = s.includes('x') ? 0.9 : 0.1;
      const z1 = randNormal(rng);
      const z2 = rho * z1 + Math.sqrt(1 - rho * rho) * randNormal(rng);
      pairs.push({ prompt: q, prefix: [...promptIds, ...tok.encode(s.join(''))], r1: m + Math.sqrt(v) * z1, r2: m + Math.sqrt(v) * z2, mean: m, var: v });
      truth.push(rho);
    }
  }
  return { pairs, truth };
}

test('on synthetic pairs with a known correlation, the net beats the constant baseline on held-out prompts; checkpoint round trip', async (t) => {
  await initBackend('wasm');
  const tok = CharTokenizer.fromAlphabet('abcx>');
  const { pairs, truth } = synthetic(tok);
  const { net, metrics } = await trainImportance(
    { pairs, skippedGroups: 0, skippedPairs: 0, groups: 100 },
    {
      tokenizer: { kind: 'char', alphabet: tok.alphabet },
      net: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32 },
      steps: 250,
      lr: 3e-3,
      seed: 1,
    },
  );
  try {
    // The held-out pairs, recovered with the same split, and the NLL of the true correlation on them.
    const { test: held } = splitByPrompt(pairs, 0.2, 1);
    const rhoOf = new Map(pairs.map((p, i) => [p, truth[i]]));
    const oracle = held.reduce((s, p) => s + pairNll(p.r1, p.r2, p.mean, p.var, rhoOf.get(p)!), 0) / held.length;
    t.diagnostic(
      `held-out NLL/pair: net ${metrics.heldout_nll.toFixed(4)}, constant f=${metrics.constant_f.toFixed(3)} ${metrics.heldout_nll_constant.toFixed(4)}, ` +
        `independent ${metrics.heldout_nll_independent.toFixed(4)}, true ρ ${oracle.toFixed(4)} (${metrics.heldout_pairs} pairs)`,
    );
    assert.equal(metrics.heldout_pairs, held.length);
    assert.equal(metrics.heldout_prompts, 20);
    // The expected gap between the constant and the truth is ≈ 0.27 nats/pair (E NLL at f: ½ log(1 − f²) +
    // (1 − fρ)/(1 − f²); at f = ρ: 0.170 for ρ = .9 and 0.995 for ρ = .1, mean 0.583; best constant f = .5: 0.856).
    assert.ok(oracle < metrics.heldout_nll_constant - 0.1, 'the generator puts information in the prefix');
    assert.ok(metrics.heldout_nll < metrics.heldout_nll_constant - 0.08, `net ${metrics.heldout_nll} vs constant ${metrics.heldout_nll_constant}`);
    // And it learned the function: ρ̂ on held-out prefixes with an "x" is well above ρ̂ on those without.
    const f = await net.prefixRho(held.map((p) => p.prefix));
    const withX = f.filter((_, i) => rhoOf.get(held[i]) === 0.9),
      without = f.filter((_, i) => rhoOf.get(held[i]) === 0.1);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    t.diagnostic(`mean ρ̂: ${mean(withX).toFixed(3)} with an x (truth 0.9), ${mean(without).toFixed(3)} without (truth 0.1)`);
    assert.ok(mean(withX) - mean(without) > 0.4);

    // Checkpoint: reload gives the same ρ̂, and meta.json carries config, tokenizer and metrics.
    const ck = join(dir, 'ck');
    await net.save(ck);
    const back = ImportanceNet.load(ck);
    try {
      const g = await back.prefixRho(held.map((p) => p.prefix));
      g.forEach((x, i) => assert.ok(Math.abs(x - f[i]) < 1e-6));
      const meta = JSON.parse(readFileSync(join(ck, 'meta.json'), 'utf8'));
      assert.deepEqual(meta.net, { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 192 });
      assert.deepEqual(meta.tokenizer, { kind: 'char', alphabet: tok.alphabet });
      assert.equal(meta.metrics.heldout_nll, metrics.heldout_nll);
      // the ids of the fitted prefixes: BOS, '>' and the letters a, b, c, x
      assert.deepEqual(
        meta.vocab,
        [tok.bosId, ...tok.encode('>abcx')].sort((a, b) => a - b),
      );
      assert.ok(meta.metrics.selected_step > 0, 'training improved on the starting constant');

      // One causal pass over prompt + completion gives, at completion token t, the ρ̂ of the prefix ending there
      // (and ρ_0 at the last prompt token), whatever the padding of the batch.
      const prompts = [tok.encodePrompt('ab>'), tok.encodePrompt('>')];
      const comps = [tok.encode('abxcab'), tok.encode('cb')];
      const r = await back.episodeRho(prompts, comps);
      for (const [b, c] of comps.entries()) {
        assert.equal(r.tokens[b].length, c.length);
        const direct = await back.prefixRho(Array.from({ length: c.length + 1 }, (_, t) => [...prompts[b], ...c.slice(0, t)]));
        assert.ok(Math.abs(r.prompt[b] - direct[0]) < 1e-5);
        // ρ after the final token is defined as 1 (the finished completion fixes the reward), not the net's output.
        r.tokens[b].forEach((x, t) =>
          assert.ok(t === c.length - 1 ? x === 1 : Math.abs(x - direct[t + 1]) < 1e-5, `episode ${b} token ${t + 1}: ${x} vs ${direct[t + 1]}`),
        );
      }
    } finally {
      back.dispose();
    }
  } finally {
    net.dispose();
  }
});

test('the weights kept are those of the step with the best validation NLL (step 0: the constant it starts at)', async (t) => {
  await initBackend('wasm');
  // Prefixes starting with "a" get correlation +0.9 and with "b" −0.9 on the prompts the net is fitted on, and the
  // reverse on the validation prompts (found with the same seeded splits trainImportance makes). Whatever the net
  // learns from the fitted pairs makes validation worse, so selection must return to step 0.
  const tok = CharTokenizer.fromAlphabet('ab>');
  const rng = makeRng(8);
  const shells = Array.from({ length: 160 }, (_, i) => ({
    prompt: Math.floor(i / 4),
    prefix: tok.encodePrompt(`${'ab'[i % 2]}${'ab'[Math.floor(rng() * 2)]}`),
    r1: 0,
    r2: 0,
    mean: 0,
    var: 1,
  }));
  const { train } = splitByPrompt(shells, 0.2, 2);
  const { test: val } = splitByPrompt(train, 0.15, 2, 'importance-validation');
  const valPrompts = new Set(val.map((p) => p.prompt));
  const pairs = shells.map((p) => {
    const sign = (tok.decode(p.prefix)[0] === 'a' ? 1 : -1) * (valPrompts.has(p.prompt) ? -1 : 1);
    const z1 = randNormal(rng);
    return { ...p, r1: z1, r2: sign * 0.9 * z1 + Math.sqrt(1 - 0.81) * randNormal(rng) };
  });
  const opts = {
    tokenizer: { kind: 'char' as const, alphabet: tok.alphabet },
    net: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32 },
    steps: 60,
    lr: 1e-2,
    seed: 2,
    evalEvery: 10,
  };
  const kept = await trainImportance({ pairs, skippedGroups: 0, skippedPairs: 0, groups: 40 }, opts);
  const last = await trainImportance({ pairs, skippedGroups: 0, skippedPairs: 0, groups: 40 }, { ...opts, validation: 0 });
  try {
    const probe = [tok.encodePrompt('aa'), tok.encodePrompt('ab'), tok.encodePrompt('ba'), tok.encodePrompt('bb')];
    const fk = await kept.net.prefixRho(probe),
      fl = await last.net.prefixRho(probe);
    t.diagnostic(
      `ρ̂ for aa ab ba bb: kept (step ${kept.metrics.selected_step}) ${fk.map((x) => x.toFixed(3)).join(' ')}; last step ${fl.map((x) => x.toFixed(3)).join(' ')}`,
    );
    assert.equal(kept.metrics.selected_step, 0);
    // step 0 is the freshly created net (same seed, head bias atanh f0), before any update
    const fresh = ImportanceNet.create(
      { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 192 },
      [tok.bosId, ...tok.encode('ab')].sort((a, b) => a - b),
      opts.tokenizer,
      2,
      kept.metrics.constant_f,
    );
    (await fresh.prefixRho(probe)).forEach((f, i) => assert.ok(Math.abs(f - fk[i]) < 1e-6, `${fk[i]} vs fresh ${f}`));
    fresh.dispose();
    // validation_nll is the NLL of the kept net on the validation pairs
    const valPairs = splitByPrompt(splitByPrompt(pairs, 0.2, 2).train, 0.15, 2, 'importance-validation').test;
    const fv = await kept.net.prefixRho(valPairs.map((p) => p.prefix));
    const vNll = valPairs.reduce((a, p, i) => a + pairNll(p.r1, p.r2, 0, 1, fv[i]), 0) / valPairs.length;
    assert.ok(Math.abs(vNll - kept.metrics.validation_nll!) < 1e-9);
    // without a validation split the last step is kept, and it has learned the fitted prompts' sign
    assert.equal(last.metrics.selected_step, 60);
    assert.ok(fl[0] > 0 && fl[1] > 0 && fl[2] < 0 && fl[3] < 0 && fl[0] - fl[3] > 0.8);
  } finally {
    kept.net.dispose();
    last.net.dispose();
  }
});

test('no pair with variance is a user error', async () => {
  await assert.rejects(
    () => trainImportance({ pairs: [], skippedGroups: 3, skippedPairs: 6, groups: 3 }, { tokenizer: { kind: 'hf', vocab_size: 10 } }),
    (e) => isUserError(e) && /3 of 3 groups have zero variance/.test((e as Error).message),
  );
});
