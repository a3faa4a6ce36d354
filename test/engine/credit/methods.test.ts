// The literature's token-credit methods against numbers worked out by hand from the formulas in docs/methods.md
// and the authors' code, then trained end to end on a tiny run with invariants read back from the token table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { otbAdvantages } from '../../../src/engine/credit/otb';
import { fisherExactP, informationGain, keyTokenBonus, stdScaled } from '../../../src/engine/credit/ktae';
import { rewardParts, tagTokens } from '../../../src/engine/credit/reward_decomposition';
import { gtpoPaperAdvantages } from '../../../src/engine/credit/gtpo';
import { mcBoundaries, segmentAdvantages } from '../../../src/engine/credit/mc_value';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { train } from '../../../src/engine/train/train';
import { tinyConfig } from '../fixtures';

const close = (a: number, b: number, tol = 1e-9, what = '') => assert.ok(Math.abs(a - b) <= tol, `${what} ${a} ≉ ${b}`);

test('otb: r − B_t with the realized-energy baseline, and the lone longest tail at baseline 0', () => {
  // A: r 1, π 0.5, Σπ² 0.5 → w = 1 − 1 + 0.5 = 0.5, W = 0.5, 1.0.  B: r 0.5, π 0.25, Σπ² 0.25 → w = 0.75, W = 0.75, 1.5, 2.25.
  // t = 0: B = (1·0.5 + 0.5·0.75)/1.25 = 0.7; t = 1: (1·1 + 0.5·1.5)/2.5 = 0.7; t = 2: B alone.
  const A = { reward: 1, logprobs: [Math.log(0.5), Math.log(0.5)], probSq: [0.5, 0.5] };
  const B = { reward: 0.5, logprobs: [Math.log(0.25), Math.log(0.25), Math.log(0.25)], probSq: [0.25, 0.25, 0.25] };
  const [a, b] = otbAdvantages([A, B], true);
  [0.3, 0.3].forEach((v, t) => close(a[t], v, 1e-7, `A t${t}`));
  // t = 2 with handle_zero_tail: baseline 0, Â = r = 0.5; without: the baseline is its own reward, Â 0
  [-0.2, -0.2, 0.5].forEach((v, t) => close(b[t], v, 1e-7, `B t${t}`));
  close(otbAdvantages([A, B], false)[1][2], 0, 1e-7);
});

test('ktae: Fisher exact p, information gain and the key-token bonus by hand', () => {
  // [[2, 0], [0, 2]]: hypergeometric n 4, row 2, column 2: P(k) = 1/6, 4/6, 1/6; observed k = 2 → p = 1/6 + 1/6
  close(fisherExactP(2, 0, 0, 2), 1 / 3, 1e-12);
  // [[1, 1], [1, 1]]: observed the most likely table → every table counts, p = 1
  close(fisherExactP(1, 1, 1, 1), 1, 1e-12);
  close(informationGain(2, 0, 0, 2), 1, 1e-12);
  close(informationGain(1, 1, 1, 1), 0, 1e-12);
  // correct rollouts [5, 7], [5, 8]; wrong [6, 7], [6, 8]
  const ids = [
    [5, 7],
    [5, 8],
    [6, 7],
    [6, 8],
  ];
  const correct = [true, true, false, false];
  const noTf = keyTokenBonus(ids, correct, { alpha: 1, beta: 1, tf: false });
  // token 5: F = exp(−2/3), IG = 1, Cohen's h = asin(1) − asin(0) = π/2; key = (F + IG)·h/2; KT = (σ(key) − ½)·2
  const key5 = ((Math.exp(-2 / 3) + 1) * (Math.PI / 2)) / 2;
  close(noTf.get(5)!, (1 / (1 + Math.exp(-key5)) - 0.5) * 2, 1e-12, 'KT[5]');
  close(noTf.get(6)!, -noTf.get(5)!, 1e-12, 'KT[6] mirrors KT[5]');
  // tokens 7 and 8 split the group evenly: p = 1 → F = 0, IG = 0 → no bonus
  close(noTf.get(7)!, 0, 1e-12);
  // with the authors' TF term, token 5's x gains tf_c/1e-5 (tf_c = 0.5·3/(0.5 + 2) = 0.6): saturated near 1
  const withTf = keyTokenBonus(ids, correct, { alpha: 1, beta: 1, tf: true });
  assert.ok(withTf.get(5)! > 0.999 && withTf.get(6)! < -0.999);
  // the end-of-sequence id gets none; a group of successes only gets none
  assert.equal(keyTokenBonus(ids, correct, { alpha: 1, beta: 1, tf: false }, new Set([5])).get(5), 0);
  assert.equal(keyTokenBonus(ids, [true, true, true, true], { alpha: 1, beta: 1, tf: true }).size, 0);
});

test("ktae adds its bonus to the authors' std-scaled advantage, whatever grpo.scale_rewards is", () => {
  // rewards 1, 0, 0, 0 under scale_rewards none: A = r − mean = 0.75, −0.25, −0.25, −0.25; sample std 0.5, so the
  // authors' (r − mean)/(std + 1e-6) = 1.5, −0.5, −0.5, −0.5 (÷ 1.000002). Under scale_rewards group the same group's
  // A = (r − mean)/(0.5 + 1e-4) already has std ≈ 1 (0.9998), and scaling leaves it within 1e-5.
  const none = stdScaled([0.75, -0.25, -0.25, -0.25]);
  [1.5, -0.5, -0.5, -0.5].forEach((v, k) => close(none[k], v / (1 + 2e-6), 1e-12, `none ${k}`));
  const group = stdScaled([0.75, -0.25, -0.25, -0.25].map((a) => a / (0.5 + 1e-4)));
  [1.5, -0.5, -0.5, -0.5].forEach((v, k) => close(group[k], v, 1e-5, `group ${k}`));
  // a group of equal rewards stays 0 (no bonus either: keyTokenBonus needs both outcomes)
  assert.deepEqual(stdScaled([0, 0, 0, 0]), [0, 0, 0, 0]);
});

test('reward_decomposition: tag tokens, the parts and the reasoning share of holding steps', () => {
  const completion = '5+3=8\n4*2=9</think>\n<answer>8</answer>';
  const tokens = [...completion].map((ch, i) => ({ id: i, text: ch, start: i, end: i + 1 }));
  const tags = tagTokens({ prefill: '<think>', completion, tokens });
  // characters of "</think>", "<answer>" and "</answer>" are tags; the steps and the answer's "8" are not
  assert.equal(tags.filter(Boolean).length, '</think>'.length + '<answer>'.length + '</answer>'.length);
  assert.equal(tags[0], false);
  // 5+3=8 holds, 4*2=9 does not: reasoning 1/2; grpo_zero's total 0.1·1 + 1 → format part 0.1
  const parts = rewardParts({ prefill: '<think>', completion, reward: { total: 1.1, format: 1, answer: 1 } });
  close(parts.reasoning, 0.5, 1e-12);
  close(parts.format, 0.1, 1e-12);
  assert.equal(parts.answer, 1);
});

test("gtpo's paper form: entropy-shared rewards, successes and failures standardised apart", () => {
  // successes S1 H = (1, 3), S2 H = (3, 1), r = 1; α₁ 1, α₂ 0.1, d = 2: t0 S1 1 + 0.1·2·1/4 = 1.05, S2 1.15; t1 reversed.
  // failures F1 H = (1, 2), F2 H = (2, 1), h = 2: t0 Σ1/H = 1.5, F1 −1 − 0.1·2·1/1.5 = −1.1333…, F2 −1.0666…; t1 reversed.
  const [s1, s2, f1, f2] = gtpoPaperAdvantages(
    [
      { success: true, reward: 1, entropies: [1, 3] },
      { success: true, reward: 1, entropies: [3, 1] },
      { success: false, reward: 0, entropies: [1, 2] },
      { success: false, reward: 0, entropies: [2, 1] },
    ],
    { alpha1: 1, alpha2: 0.1, entropyClip: null },
  );
  // each set: values mean ± 0.05 (successes) or ± 1/30 (failures), sample std √(4·d²/3)
  const zs = 0.05 / (Math.sqrt((4 * 0.05 ** 2) / 3) + 1e-4);
  const zf = 1 / 30 / (Math.sqrt((4 * (1 / 30) ** 2) / 3) + 1e-4);
  [-zs, zs].forEach((v, t) => close(s1[t], v, 1e-9, `S1 t${t}`));
  [zs, -zs].forEach((v, t) => close(s2[t], v, 1e-9, `S2 t${t}`));
  // the confident failure token (low H, larger 1/H share) is penalised most
  [-zf, zf].forEach((v, t) => close(f1[t], v, 1e-9, `F1 t${t}`));
  [zf, -zf].forEach((v, t) => close(f2[t], v, 1e-9, `F2 t${t}`));
  // Eq. 6's separate standardisation: Â sums to 0 over the successes' tokens (half of each correct answer pushed down)
  close(s1[0] + s1[1] + s2[0] + s2[1], 0, 1e-12, 'Σ Â over successes');
  // A group of one outcome gets Â = 0 (the paper trains on DAPO's dynamic sampling, which drops such groups). Without
  // that, failures F1 H = (1, 0.1), F2 H = (2, 0.1) alone would be standardised to ± about 0.87–1.5 from entropy alone.
  const wrong = gtpoPaperAdvantages(
    [
      { success: false, reward: 0, entropies: [1, 0.1] },
      { success: false, reward: 0, entropies: [2, 0.1] },
    ],
    { alpha1: 1, alpha2: 0.1, entropyClip: null },
  );
  assert.deepEqual(wrong, [
    [0, 0],
    [0, 0],
  ]);
});

test('mc_value: boundaries (fixed, cutpoints), segment advantages and the probability mask', () => {
  const p = { segments: 'fixed' as const, segment_len: 3, cutpoint_tau: 0.5, cutpoints_per_segment: 1, prob_mask: false };
  assert.deepEqual(mcBoundaries(new Array(7).fill(0), p).bounds, [0, 3, 6, 7]);
  // π: 0.9 0.2 0.9 0.3 0.9 → cutpoints at tokens 1 and 3; boundaries before them
  const lp = [0.9, 0.2, 0.9, 0.3, 0.9].map(Math.log);
  const c = mcBoundaries(lp, { ...p, segments: 'cutpoints' });
  assert.deepEqual(c.bounds, [0, 1, 3, 5]);
  assert.deepEqual(c.cut, [false, true, false, true, false]);
  assert.deepEqual(mcBoundaries(lp, { ...p, segments: 'cutpoints', cutpoints_per_segment: 2 }).bounds, [0, 1, 5]);
  // V̂ 0.2, 0.5, 0.4, 1 at boundaries 0, 1, 3, 5: segment advantages 0.3, −0.1, 0.6 on their tokens
  const v = [0.2, 0.5, 0.4, 1];
  segmentAdvantages(5, c.bounds, v, c.cut, false).forEach((x, t) => close(x, [0.3, -0.1, -0.1, 0.6, 0.6][t], 1e-12));
  segmentAdvantages(5, c.bounds, v, c.cut, true).forEach((x, t) => close(x, [0, -0.1, 0, 0.6, 0][t], 1e-12));
});

test('ktae, otb, reward_decomposition, gtpo (paper form) and mc_value train end to end; their Â read back as the methods define them', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-methods-'));
  const strategies: [string, string][] = [
    ['ktae', ''],
    ['otb', ''],
    ['reward_decomposition', ''],
    ['gtpo', ', gtpo: { form: gtpo }'],
    ['mc_value', ', mc_value: { segment_len: 4, rollouts: 2 }'],
  ];
  for (const [strategy, extra] of strategies) {
    const cfg = tinyConfig(dir, 'countdown', `credit: { strategy: ${strategy}${extra} }\n`);
    const r = await train({ configPath: cfg, sets: ['sft.steps=30', 'sft.lr=5e-3', `name=m-${strategy}`] });
    assert.equal(r.status, 'completed', strategy);
    const rows = readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
    for (const m of rows) for (const [k, v] of Object.entries(m)) if (typeof v === 'number') assert.ok(Number.isFinite(v), `${strategy}: ${k} finite`);
    const tok = readTokenTable(join(r.runDir, 'tokens', 'step-000002.arrow'));
    const eps = readEpisodeTable(join(r.runDir, 'episodes', 'step-000002.arrow'));
    assert.ok(tok.effective_advantage.every(Number.isFinite) && tok.weight.every(Number.isFinite), strategy);
    const G = 4;
    if (strategy === 'ktae') {
      // the bonus Â − A_std belongs to the token id within its group: the same on every occurrence (A_std: the group's
      // episode advantages over their sample std, the authors' scaling)
      const episodeAdv = new Map<number, number>();
      for (let k = 0; k < tok.episode.length; k++) episodeAdv.set(tok.episode[k], tok.advantage[k]);
      const scaled = new Map<number, number>();
      for (let g = 0; g * G < 8; g++) {
        const members = Array.from({ length: G }, (_, j) => g * G + j);
        stdScaled(members.map((e) => episodeAdv.get(e) ?? 0)).forEach((a, j) => scaled.set(members[j], a));
      }
      const bonus = new Map<string, number>();
      for (let k = 0; k < tok.episode.length; k++) {
        const key = `${Math.floor(tok.episode[k] / G)}:${tok.token_id[k]}`;
        const b = tok.effective_advantage[k] - scaled.get(tok.episode[k])!;
        if (bonus.has(key)) close(b, bonus.get(key)!, 1e-5, key);
        else bonus.set(key, b);
        assert.ok(Math.abs(b) < 1);
      }
    }
    if (strategy === 'mc_value') {
      // one Â per segment of 4 tokens, and the last segment's Â ends at the reward
      assert.ok(rows.every((m) => (m['mc_value/rollouts'] as number) > 0 && (m['mc_value/seconds'] as number) >= 0));
      for (let k = 1; k < tok.episode.length; k++)
        if (tok.episode[k] === tok.episode[k - 1] && tok.position[k] % 4 !== 0) close(tok.effective_advantage[k], tok.effective_advantage[k - 1], 1e-6);
    }
    if (strategy === 'reward_decomposition') {
      // an episode's answer tokens (not tags) share one Â: the answer part's advantage, zero-mean over the group
      const answerAdv = new Map<number, number>();
      for (let k = 0; k < tok.episode.length; k++) {
        if (tok.section[k] !== 'answer' || /[<>/]/.test(tok.token[k])) continue;
        if (answerAdv.has(tok.episode[k])) close(tok.effective_advantage[k], answerAdv.get(tok.episode[k])!, 1e-6);
        else answerAdv.set(tok.episode[k], tok.effective_advantage[k]);
      }
    }
    assert.equal(eps.episode.length, 8);
  }
});
