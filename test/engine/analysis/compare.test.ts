// compare: groups of seeded runs against a baseline on the same test instances. The run directories are written
// here with eval tables whose outcomes are chosen, so every expected figure is worked out by hand below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compareMarkdown, compareSeeds, gainFromStart, gainMarkdown } from '../../../src/engine/analysis/compare';
import { evalFile, readEvalTable, writeEvalTable } from '../../../src/engine/rundir/eval_table';
import { writeRunInfo } from '../../../src/engine/rundir/rundir';
import type { RunStatus } from '../../../src/protocol';
import { seedsText } from '../../../src/protocol/compare';

const root = mkdtempSync(join(tmpdir(), 'cl-compare-'));
const N = 40;

/** A run whose test instances i0…i39 succeed where `ok(i)`; 10 validation instances that must be ignored. */
function run(
  name: string,
  seed: number,
  ok: (i: number) => boolean,
  o: { step?: number; status?: RunStatus; testHash?: string; n?: number; warmStart?: string; stamp?: string } = {},
): string {
  const d = join(root, `${name}-${o.stamp ?? '20260101-000000'}`);
  mkdirSync(join(d, 'eval'), { recursive: true });
  const task = {
    name: 'countdown',
    split_seed: 0,
    sizes: [100, N, 10] as [number, number, number],
    train_hash: 'a',
    test_hash: o.testHash ?? 'b',
    validation_hash: 'c',
  };
  writeRunInfo(d, {
    id: name,
    name,
    status: o.status ?? 'completed',
    started: '2026-01-01T00:00:00Z',
    ended: null,
    backend: 'wasm',
    engine_version: 't',
    task,
    ...(o.warmStart ? { warm_start: o.warmStart } : {}),
  });
  writeFileSync(join(d, 'config.yaml'), `name: ${name}\nseed: ${seed}\n`);
  const n = o.n ?? N;
  const ids = [...Array.from({ length: n }, (_, i) => `test-${i}`), ...Array.from({ length: 10 }, (_, i) => `val-${i}`)];
  writeEvalTable(evalFile(d, o.step ?? 5), {
    instance_id: ids,
    split: ids.map((id) => (id.startsWith('val') ? 'validation' : 'test')),
    success: ids.map((id, i) => (id.startsWith('val') ? true : ok(i))),
    reward: Float32Array.from(ids, (_, i) => (ok(i) ? 1 : 0)),
    completion: ids.map((id) => `<answer>${id}</answer>`),
  });
  return d;
}

/** A run evaluated at step 0 (its start) and at step 5; test instances i < start / i < final succeed. */
function gainRun(name: string, seed: number, start: number, final: number, withStart = true): string {
  const d = join(root, `${name}-20260101-000000`);
  mkdirSync(join(d, 'eval'), { recursive: true });
  writeRunInfo(d, {
    id: name,
    name,
    status: 'completed',
    started: '2026-01-01T00:00:00Z',
    ended: '2026-01-01T00:06:00Z',
    backend: 'wasm',
    engine_version: 't',
  });
  writeFileSync(join(d, 'config.yaml'), `name: ${name}\nseed: ${seed}\ncredit:\n  strategy: none\n`);
  const ids = Array.from({ length: N }, (_, i) => `test-${i}`);
  for (const [step, k] of withStart
    ? [
        [0, start],
        [5, final],
      ]
    : [[5, final]]) {
    writeEvalTable(evalFile(d, step), {
      instance_id: ids,
      split: ids.map(() => 'test'),
      success: ids.map((_, i) => i < k),
      reward: Float32Array.from(ids, (_, i) => (i < k ? 1 : 0)),
      completion: ids.map(() => ''),
    });
  }
  return d;
}

test("compare --from-start: the gain over each run's own step 0, gated with the run as the unit", () => {
  // "learns": every seed starts at 10/40 = 25 % and ends at 14, 16, 18 of 40 → gains 0.10, 0.15, 0.20 (mean 0.15).
  // The run-level gate, worked by hand and by the independent test/engine/analysis/twoway_reference.py (Simpson's
  // rule on the t density): run variance s² = 0.0025 → s²/3 = 0.000833; each instance's mean gain d_i is 1 (i10–13),
  // 2/3 (i14–15), 1/3 (i16–17), else 0: Var_i(d) = 0.107977, minus the within-instance spread over seeds
  // (4·(1/3)/40)/3 = 0.011111 → σ_inst² = 0.096866, /40 = 0.002422. se = √0.003255 = 0.057052, t = 2.6292,
  // Satterthwaite df = 21.29, p = 0.015571.
  // Conditional on these checkpoints: i10–13 gain in all 3 seeds (D = 3), i14–15 in 2 (D = 2), i16–17 in 1 (D = 1);
  // Σ D = 18 is the largest of the 2^8 sign patterns, so the exact sign-flip p = 2/2^8 = 0.0078125.
  // "flat": 10 → 12, 8, 10 → gains +0.05, −0.05, 0: Δ 0, p = 1, n.s.
  // Holm over the 2 groups: learns 2·0.015571 = 0.031143 < 0.05, significant; flat 1.
  const learns = [
    [1, 14],
    [2, 16],
    [3, 18],
  ].map(([s, f]) => gainRun(`learns-seed${s}`, s, 10, f));
  const flat = [
    [1, 12],
    [2, 8],
    [3, 10],
  ].map(([s, f]) => gainRun(`flat-seed${s}`, s, 10, f));
  const r = gainFromStart([...learns, ...flat], { resamples: 2000 });
  const [l, f] = r.rows;
  assert.deepEqual([l.group, f.group], ['learns', 'flat']);
  assert.equal(l.start.mean, 0.25);
  assert.ok(Math.abs(l.final.mean! - 0.4) < 1e-12);
  assert.deepEqual(l.final_steps, [5, 5, 5]);
  const t = l.run_test!;
  assert.ok(Math.abs(t.diff - 0.15) < 1e-12);
  assert.ok(Math.abs(t.se - 0.05705248) < 1e-7, String(t.se));
  assert.ok(Math.abs(t.df - 21.292432) < 1e-5, String(t.df));
  assert.ok(Math.abs(t.p - 0.01557135) < 1e-6, String(t.p));
  assert.deepEqual([t.runs, t.instances], [3, 40]);
  assert.ok(Math.abs(l.p_adjusted! - 2 * t.p) < 1e-12);
  assert.ok(l.diff!.lo > 0 && l.diff!.hi < 0.3, JSON.stringify(l.diff));
  assert.deepEqual([l.conditional.b, l.conditional.c, l.conditional.pairs, l.conditional.instances], [0, 18, 120, 40]);
  assert.equal(l.conditional.p, 0.0078125);
  assert.equal(l.significant, true);
  assert.equal(l.exploratory, false);
  assert.equal(l.verdict_withheld, null);
  assert.deepEqual(r.adjustment, { method: 'holm', family: 2, looks: 1 });
  assert.deepEqual(l.minutes, [6, 6, 6]);
  assert.ok(Math.abs(f.run_test!.diff) < 1e-12);
  assert.deepEqual([f.conditional.b, f.conditional.c, f.conditional.p, f.p_adjusted, f.significant], [2, 2, 1, 1, false]);
  const md = gainMarkdown(r);
  assert.match(
    md,
    /\| learns \| none \| 1, 2, 3 \| 40 \| 25\.0 ± 0\.0 \| 40\.0 ± 12\.4 \| \*\*\+15\.0 \[[^\]]+\]\*\* \| 0\.016 \| \*\*0\.031\*\* \| ± [\d.]+ pp \| 15\.0 pp \(the observed Δ\): [^|]+ \| \+15\.0 \[[^\]]+\], b \/ c 0 \/ 18, p 0\.0078 \|/,
  );
  assert.match(md, /\| flat \| .* 1\.0 n\.s\. \|/);
  assert.match(md, /Holm-adjusted over the 2 rows tested/);
  assert.match(md, /\| 6\.0, 6\.0, 6\.0 \|$/m);
  assert.throws(() => gainFromStart([gainRun('nostart-seed1', 1, 0, 3, false)]), /no eval table at step 0/);
  // Groups of other tasks and lengths side by side (the README's table of every example): each group is checked on its
  // own; a group whose seeds disagree is refused.
  const other = [1, 2, 3].map((s) => run(`othertask-seed${s}`, s, (i) => i < 10, { step: 9, testHash: 'other' }));
  for (const d of other) writeEvalTable(evalFile(d, 0), readEvalTable(evalFile(d, 9)));
  assert.deepEqual(
    gainFromStart([...learns, ...other], { resamples: 100, tokenTypes: false }).rows.map((x) => x.group),
    ['learns', 'othertask'],
  );
  const mixed = [...learns.slice(0, 2), run('learns-seed9', 9, (i) => i < 10, { step: 9 })];
  writeEvalTable(evalFile(mixed[2], 0), readEvalTable(evalFile(mixed[2], 9)));
  assert.throws(() => gainFromStart(mixed, { tokenTypes: false }), /last evaluated at different steps/);

  // "learns" against "flat" at their last evals, unpaired (seed numbers carry nothing): 14, 16, 18 vs 12, 8, 10 of 40;
  // by the reference script: Δ = 0.15, se = 0.056928, df = 13.856, p = 0.019731.
  const cmp = compareSeeds(flat, learns, { resamples: 200, tokenTypes: false });
  const c = cmp.rows[1].run_test!;
  assert.ok(Math.abs(c.diff - 0.15) < 1e-12);
  assert.ok(Math.abs(c.se - 0.0569275) < 1e-6, String(c.se));
  assert.ok(Math.abs(c.df - 13.855858) < 1e-5, String(c.df));
  assert.ok(Math.abs(c.p - 0.01973087) < 1e-6, String(c.p));
  assert.equal(cmp.rows[0].run_test, null);
});

test('eval tables round-trip', () => {
  const d = run('rt', 1, (i) => i % 2 === 0);
  const t = readEvalTable(evalFile(d, 5));
  assert.equal(t.instance_id.length, 50);
  assert.deepEqual([t.instance_id[3], t.split[3], t.success[3], t.reward[3]], ['test-3', 'test', false, 0]);
  assert.equal(t.split[45], 'validation');
});

test('a clear gain is significant; a one-instance difference is n.s.; validation instances are not counted', () => {
  // Baseline seeds 1–3 solve instances 0–9 (25 %). "better" solves 0–19 (50 %) on every seed: per seed 10 instances
  // only it solves, none only the baseline solves: 10 instances with D = 3 summed over seeds, all positive → exact
  // sign-flip p = 2/2^10 = 0.001953125 (pooled McNemar on the 120 pairs would claim 2·2^−30); Δ = +25 pp with a
  // bootstrap interval over the 40 instances. "same" solves 0–8 plus 10 (still 25 %): instance 9 D = −3, instance 10
  // D = +3 → p = 1. Holm over the 2 rows: 0.00390625 and 1. Those are conditional on the checkpoints; the run-level gate
  // (twoway_reference.py): identical seeds have no run variance, so its noise is the instances' σ_inst² = 0.192308
  // ("better") → se 0.069338, t 3.6056, df 39, p 0.00087257; "same": Δ 0, p 1.
  const base = [1, 2, 3].map((s) => run(`base-seed${s}`, s, (i) => i < 10));
  const better = [1, 2, 3].map((s) => run(`better-seed${s}`, s, (i) => i < 20));
  const same = [1, 2, 3].map((s) => run(`same-seed${s}`, s, (i) => i < 9 || i === 10));
  const r = compareSeeds(base, [...better, ...same], { resamples: 2000 });
  // `--baseline runs/base-seed*` in a shell gives one --baseline and the other seeds as positional arguments: the
  // baseline group's other seeds are still the baseline, and the report is the same.
  const globbed = compareSeeds([base[0]], [base[1], base[2], ...better, ...same], { resamples: 2000 });
  assert.deepEqual(
    globbed.rows.map((x) => [x.group, x.seeds]),
    r.rows.map((x) => [x.group, x.seeds]),
  );
  assert.deepEqual(globbed.rows[0].seeds, [1, 2, 3]);
  // the table lists a group's seeds in numeric order, not in the folders' (seed10 sorts before seed2 as a name)
  assert.equal(seedsText([1, 10, 11, 2, null, 3]), '1, 2, 3, 10, 11, ?');
  // runs from three shared warm starts repeat their seeds in each: said once, with the starts
  assert.equal(seedsText([2, 1, 1, 2, 2, 1], 3), '1, 2 × 3 starts');
  assert.deepEqual(globbed.rows[1].run_test, r.rows[1].run_test);
  assert.deepEqual(globbed.rows[1].conditional, r.rows[1].conditional);
  // these fixtures' seeds are copies of one outcome vector (so that the numbers are worked by hand): the note says so
  assert.deepEqual(
    globbed.notes.map((n) => n.replace(/ have the same outcome on every one of their 40 instances; .*/, '')),
    ['base: base-seed1, base-seed2, base-seed3', 'better: better-seed1, better-seed2, better-seed3', 'same: same-seed1, same-seed2, same-seed3'],
  );
  assert.equal(r.baseline, 'base');
  const [b, g, s] = r.rows;
  assert.deepEqual([b.group, g.group, s.group], ['base', 'better', 'same']);
  assert.equal(b.instances, N, 'validation instances excluded');
  assert.equal(b.eval_success.mean, 0.25);
  assert.equal(b.eval_success.half, 0, 'identical seeds: zero width');
  assert.equal(g.eval_success.mean, 0.5);
  // every baseline run against every run of the group: 9 run pairs × 10 instances only "better" solves
  assert.deepEqual([g.conditional!.b, g.conditional!.c, g.conditional!.pairs, g.conditional!.instances], [0, 90, 360, 40]);
  assert.equal(g.conditional!.p, 0.001953125);
  assert.equal(g.conditional!.p_adjusted, 0.00390625);
  assert.ok(Math.abs(g.conditional!.diff.mean - 0.25) < 1e-12);
  assert.ok(Math.abs(g.run_test!.p - 0.00087257) < 1e-7, String(g.run_test!.p));
  assert.ok(Math.abs(g.run_test!.se - 0.0693375) < 1e-6);
  assert.equal(g.run_test!.df, 39);
  assert.ok(Math.abs(g.p_adjusted! - 2 * g.run_test!.p) < 1e-12);
  assert.equal(g.significant, true);
  assert.ok(Math.abs(g.diff!.mean - 0.25) < 1e-12);
  assert.ok(g.diff!.lo > 0.1 && g.diff!.hi <= 0.4, JSON.stringify(g.diff));
  assert.deepEqual([s.conditional!.b, s.conditional!.c, s.conditional!.p, s.run_test!.p, s.p_adjusted, s.significant], [9, 9, 1, 1, 1, false]);
  const md = compareMarkdown(r);
  assert.match(md, /\| better \| — \| 1, 2, 3 \| 40 \| 50\.0 ± 0\.0 \| \*\*\+25\.0 \[/);
  assert.match(md, /\| same \| .* \| 1\.0 n\.s\. \|/);
});

test('fewer than 3 seeds is said; one run a side gets no verdict, only the seeds needed; a missing eval table is a clear error', () => {
  const base = [run('b2-seed1', 1, (i) => i < 5)];
  const r = compareSeeds(base, [run('x2-seed1', 1, (i) => i < 6)], { resamples: 200 });
  assert.ok(r.notes.some((n) => /1 seed, fewer than 3: exploratory/.test(n)));
  assert.deepEqual([r.rows[1].run_test, r.rows[1].p_adjusted, r.rows[1].significant, r.rows[1].diff], [null, null, null, null]);
  assert.match(r.rows[1].verdict_withheld!, /needs at least 2 runs on each side/);
  assert.equal(r.adjustment.family, 0);
  assert.match(compareMarkdown(r), /\| x2 \(exploratory\) \| .* \| no verdict \|/);
  assert.match(compareMarkdown(r), /- x2: 1 run against 1: the run-level test needs at least 2 runs/);
  assert.deepEqual(
    r.rows.map((x) => x.exploratory),
    [true, true],
  );
  assert.match(compareMarkdown(r), /\| x2 \(exploratory\) \|/);
  // 2 runs against 3: the test runs and its Δ and interval are shown, but below 3 runs a side there is no verdict and
  // the row is not in Holm's family
  const b3 = [1, 2, 3].map((s) => run(`b3-seed${s}`, s, (i) => i < 8 + s));
  const x2 = [1, 2].map((s) => run(`x3-seed${s}`, s, (i) => i < 20 + 2 * s));
  const few = compareSeeds(b3, x2, { resamples: 200, tokenTypes: false });
  const row = few.rows[1];
  assert.ok(row.run_test && row.diff && row.diff.mean > 0.2, JSON.stringify(row.diff));
  assert.deepEqual([row.p_adjusted, row.significant, few.adjustment.family], [null, null, 0]);
  assert.match(row.verdict_withheld!, /^2 runs against 3: fewer than 3 runs on a side, so Δ and its interval are shown as a hint and no verdict/);
  assert.match(compareMarkdown(few), /\| x3 \(exploratory\) \| .* \| no verdict \|/);
  const empty = join(root, 'noeval');
  mkdirSync(empty);
  writeRunInfo(empty, { id: 'e', name: 'e', status: 'completed', started: 'x', ended: null, backend: 'wasm', engine_version: 't' });
  assert.throws(() => compareSeeds([empty], []), /no per-instance eval tables/);
  assert.throws(() => compareSeeds([], [empty]), /needs --baseline/);
});

test('real runs write per-instance eval tables, and compare reads them: 3 seeds of two strategies', { timeout: 180_000 }, async () => {
  const { train } = await import('../../../src/engine/train/train');
  const { tinyConfig } = await import('../fixtures');
  const { listEvalSteps } = await import('../../../src/engine/rundir/eval_table');
  const dir = mkdtempSync(join(tmpdir(), 'cl-compare-real-'));
  const cfg = tinyConfig(dir, 'countdown');
  const runs: Record<string, string[]> = { none: [], outcome_conditional: [] };
  for (const strategy of Object.keys(runs)) {
    for (const seed of [1, 2, 3]) {
      const r = await train({ configPath: cfg, sets: [`seed=${seed}`, `credit.strategy=${strategy}`, `name=tiny-${strategy}-seed${seed}`] });
      runs[strategy].push(r.runDir);
      // The eval before GRPO (step 0) and the last one (step 3), one row per held-out instance.
      assert.deepEqual(listEvalSteps(r.runDir), [0, 2, 3]);
      assert.equal(readEvalTable(evalFile(r.runDir, 3)).instance_id.length, 8);
    }
  }
  const report = compareSeeds(runs.none, runs.outcome_conditional, { resamples: 500 });
  assert.deepEqual(
    report.rows.map((x) => [x.group, x.seeds]),
    [
      ['tiny-none', [1, 2, 3]],
      ['tiny-outcome_conditional', [1, 2, 3]],
    ],
  );
  const oc = report.rows[1];
  assert.equal(oc.conditional!.pairs, 72, '3 × 3 run pairs × 8 instances: no pairing by seed number');
  assert.equal(oc.conditional!.instances, 8);
  assert.ok(oc.conditional!.p >= 0 && oc.conditional!.p <= 1);
  assert.equal(oc.run_test?.runs ?? 3, 3);
  assert.equal(oc.step, 3);
  assert.ok(Number.isFinite(oc.eval_success.mean));
});

test('filler and reasoning |c| get a mean ± 95 % t interval over seeds; a glob that includes the baseline does not compare it with itself', async () => {
  const { writeTokenTable } = await import('../../../src/engine/rundir/arrow_tables');
  const { stepFile } = await import('../../../src/engine/rundir/rundir');
  // Each run logs one step of 4 tokens: 2 filler tokens with |A·ℓ| = f and 2 reasoning tokens with |A·ℓ| = 2 (the logged
  // weighted column is 0: compare reads seed doc 002's definition).
  // Seeds 1, 2, 3 have f = 1, 3, 2 → filler |c| mean 2, sample sd 1, half-width t(0.975, 2)·1/√3 = 4.302653·0.577350
  // = 2.484138 (t quantile from a t table); reasoning |c| 2 ± 0; ratio f/2 → 1 ± 1.242069.
  const withTokens = (d: string, f: number) => {
    mkdirSync(join(d, 'tokens'), { recursive: true });
    const n = 4;
    const zeros = () => new Float32Array(n);
    writeTokenTable(stepFile(d, 'tokens', 1), {
      step: Int32Array.from([1, 1, 1, 1]),
      episode: Int32Array.from([0, 0, 0, 0]),
      prompt_idx: new Int32Array(n),
      position: Int32Array.from([0, 1, 2, 3]),
      token_id: new Int32Array(n),
      token: ['so', 'the', '3', '+'],
      // seed doc 002's c = A·ℓ (compare's default): |1·−f|, |−1·−f|, |1·−2|, |−1·−2|
      logprob: Float32Array.from([-f, -f, -2, -2]),
      entropy: zeros(),
      advantage: Float32Array.from([1, -1, 1, -1]),
      weight: zeros(),
      effective_advantage: zeros(),
      contribution: zeros(),
      attribution: null,
      importance: null,
      section: ['think', 'think', 'think', 'think'],
      token_type: ['filler', 'filler', 'reasoning', 'reasoning'],
      reward: zeros(),
    });
    return d;
  };
  const base = [1, 2, 3].map((s) =>
    withTokens(
      run(`tb-seed${s}`, s, (i) => i < 10),
      [1, 3, 2][s - 1],
    ),
  );
  const other = [1, 2, 3].map((s) =>
    withTokens(
      run(`tx-seed${s}`, s, (i) => i < 12),
      2,
    ),
  );
  const r = compareSeeds(base, [...base, ...other], { resamples: 200 });
  assert.deepEqual(
    r.rows.map((x) => x.group),
    ['tb', 'tx'],
    'the baseline runs in the positional list are not a second group',
  );
  const b = r.rows[0];
  assert.equal(b.filler_abs_c!.n, 3);
  assert.ok(Math.abs(b.filler_abs_c!.mean! - 2) < 1e-6);
  assert.ok(Math.abs(b.filler_abs_c!.half! - 2.484138) < 1e-5, String(b.filler_abs_c!.half));
  assert.ok(Math.abs(b.reasoning_abs_c!.mean! - 2) < 1e-6);
  assert.equal(b.reasoning_abs_c!.half, 0);
  assert.ok(Math.abs(b.filler_reasoning_ratio!.half! - 1.242069) < 1e-5);
  const md = compareMarkdown(r);
  assert.match(
    md,
    /\| tb \| — \| 1, 2, 3 \| 40 \| 25\.0 ± 0\.0 \| \(baseline\) \| {2}\| {2}\| {2}\| {2}\| {2}\| 2\.00 ± 2\.48 \| 2\.00 ± 0\.00 \| 1\.00 ± 1\.24 \|/,
  );
  // One seed: no interval, and JSON carries nulls, not NaN.
  const one = compareSeeds([base[0]], [other[0]], { resamples: 100 });
  assert.equal(one.rows[0].filler_abs_c!.half, null);
  assert.equal(JSON.parse(JSON.stringify(one)).rows[0].eval_success.lo, null);
});

test("three identical copies of one seed get that seed's verdict, not a pooled one (the worked case: one seed copied three times)", () => {
  // One run pair on 256 instances: only the baseline solves 10, only the other 20, both 50. McNemar exact (and the
  // sign-flip test with one seed) p = 2·P(X ≤ 10), X ~ Bin(30, ½) = 0.0987: n.s. Three copies as seeds 1–3: each
  // instance's sum triples, the test's p stays 0.0987 (pooled McNemar on 768 pairs would say ≈ 0.002).
  const ok = (b: boolean) => (i: number) => (b ? i < 10 : i >= 10 && i < 30) || (i >= 30 && i < 80);
  const base1 = [run('wc-base-seed1', 1, ok(true), { n: 256 })];
  const other1 = [run('wc-other-seed1', 1, ok(false), { n: 256 })];
  const base3 = [1, 2, 3].map((s) => run(`wc3-base-seed${s}`, s, ok(true), { n: 256 }));
  const other3 = [1, 2, 3].map((s) => run(`wc3-other-seed${s}`, s, ok(false), { n: 256 }));
  const one = compareSeeds(base1, other1, { resamples: 2000, tokenTypes: false }).rows[1];
  const three = compareSeeds(base3, other3, { resamples: 2000, tokenTypes: false }).rows[1];
  // The conditional test (instances as the unit) gives the copies the single seed's p, interval and MDE.
  assert.ok(Math.abs(one.conditional!.p - 0.0987371467) < 1e-9, String(one.conditional!.p));
  assert.equal(three.conditional!.p, one.conditional!.p);
  assert.deepEqual([three.conditional!.diff.lo, three.conditional!.diff.hi], [one.conditional!.diff.lo, one.conditional!.diff.hi], 'the same interval');
  // The MDE of the copies is the single seed's (they add no information): 2.801585·√(0.116115/256) = 0.0597.
  assert.ok(Math.abs(one.conditional!.mde! - 0.059666) < 1e-6 && Math.abs(three.conditional!.mde! - one.conditional!.mde!) < 1e-9);
  // The gate: one run a side leaves the seed variance unknown: no verdict. The copies have zero run variance, so only the
  // instances are noise (twoway_reference.py: σ_inst² 0.116115, se 0.021297, t 1.8342, df 255, p 0.067797): n.s.
  assert.deepEqual([one.run_test, one.significant], [null, null]);
  assert.ok(Math.abs(three.run_test!.p - 0.0677965) < 1e-6, String(three.run_test!.p));
  assert.deepEqual([three.significant, one.exploratory, three.exploratory], [false, true, false]);
  // --power-for: with the copies' variance the instances set a floor of 2.80·0.0213 ≈ 0.060 > 0.03: no number of seeds
  // gets there; one run a side cannot plan at all (the seed variance is unknown).
  const pf = compareSeeds(base3, other3, { resamples: 200, tokenTypes: false, powerFor: 0.03 });
  assert.deepEqual(pf.rows[1].seeds_needed, { diff: 0.03, basis: 'power-for', unit: 'seeds', seeds: null });
  // copies under three seed numbers are named: the comparison holds them, and says they look like one run
  assert.ok(
    pf.notes.some((n) => /^wc3-base: wc3-base-seed1, wc3-base-seed2, wc3-base-seed3 have the same outcome on every one of their 256 instances/.test(n)),
  );
  assert.match(compareMarkdown(pf), /3\.0 pp: not within 1000 seeds/);
  assert.deepEqual(compareSeeds(base1, other1, { resamples: 200, tokenTypes: false, powerFor: 0.03 }).rows[1].seeds_needed, {
    diff: 0.03,
    basis: 'power-for',
    unit: 'seeds',
    seeds: null,
  });

  // --from-start on the copies: 6 instances gained in all 3: the conditional p is the single seed's 2/2^6 = 0.03125; the
  // gate's interval is not of zero width (σ_inst² 0.130769, se 0.057177, df 39, p 0.012359).
  const g = gainFromStart(
    [1, 2, 3].map((s) => gainRun(`wcg-seed${s}`, s, 10, 16)),
    { resamples: 2000, tokenTypes: false },
  ).rows[0];
  assert.ok(g.diff!.hi - g.diff!.lo > 0.05, JSON.stringify(g.diff));
  assert.ok(Math.abs(g.run_test!.p - 0.0123591) < 1e-6, String(g.run_test!.p));
  assert.equal(g.conditional.p, 0.03125);
});

test('compare refuses runs read at different steps or drawn from different splits, and marks unfinished runs exploratory', () => {
  const base = [1, 2, 3].map((s) => run(`st-base-seed${s}`, s, (i) => i < 10));
  const late = [1, 2, 3].map((s) => run(`st-late-seed${s}`, s, (i) => i < 12, { step: 9 }));
  assert.throws(() => compareSeeds(base, late, { tokenTypes: false }), /last evaluated at different steps \(st-base-seed1 5, .*st-late-seed1 9/);
  assert.throws(() => compareSeeds(base, late, { tokenTypes: false, step: 9 }), /st-base-seed1.*no eval table at step 9/s);
  // --common-step (what the sweep summary and Compare Runs ask): read at the latest step every run evaluated, said and
  // marked exploratory. The "late" runs have their eval at step 9 only, the baseline at 5 only: none in common.
  assert.throws(() => compareSeeds(base, late, { tokenTypes: false, commonStep: true }), /no eval step in common/);
  for (const d of late) writeEvalTable(evalFile(d, 5), readEvalTable(evalFile(base[0], 5)));
  const common = compareSeeds(base, late, { tokenTypes: false, commonStep: true, resamples: 200 });
  assert.deepEqual(
    common.rows.map((x) => [x.step, x.exploratory]),
    [
      [5, true],
      [5, true],
    ],
  );
  assert.ok(common.notes.some((n) => /last evals are at different steps \(5, 9\): every run is read at step 5/.test(n)));
  const other = [1, 2, 3].map((s) => run(`st-other-seed${s}`, s, (i) => i < 12, { testHash: 'zz' }));
  assert.throws(() => compareSeeds(base, other, { tokenTypes: false }), /different task splits: .*st-other-seed1.*test split zz/);
  const stopped = [1, 2, 3].map((s) => run(`st-stop-seed${s}`, s, (i) => i < 12, { status: s === 2 ? 'stopped' : 'completed' }));
  const r = compareSeeds(base, stopped, { tokenTypes: false, resamples: 200 });
  assert.deepEqual(
    r.rows.map((x) => x.exploratory),
    [false, true],
  );
  assert.ok(r.notes.some((n) => /st-stop-seed2 is stopped, not completed/.test(n)));
});

test('read at step 0 (the SFT warm starts) the numbers stay but no row gets a verdict, so none is shown as a result', () => {
  // 10 against 20 solved of 40 in all three seeds: at any GRPO step this is significant (the Holm test above gives
  // p = 2/2^10 for it); at step 0 the difference is the warm starts' and is withheld.
  const base = [1, 2, 3].map((s) => run(`ws-base-seed${s}`, s, (i) => i < 10, { step: 0 }));
  const other = [1, 2, 3].map((s) => run(`ws-oc-seed${s}`, s, (i) => i < 20, { step: 0 }));
  const r = compareSeeds(base, other, { tokenTypes: false, resamples: 200 });
  const row = r.rows[1];
  assert.deepEqual([row.step, row.significant, row.p_adjusted, row.run_test, row.diff, row.mde], [0, null, null, null, null, null]);
  assert.match(row.verdict_withheld ?? '', /SFT warm start, before any GRPO step/);
  assert.equal(r.adjustment.family, 0);
  // The instance-clustered difference of these checkpoints is still reported: information about the warm starts.
  assert.ok(Math.abs(row.conditional!.diff.mean - 0.25) < 1e-12);
  assert.doesNotMatch(compareMarkdown(r), /\*\*/);
});

test('Holm over the rows of one comparison: significance uses the adjusted p', () => {
  // Three groups against one baseline (25 %): +10 instances (p = 2/2^10), +5 (p = 2/2^5 = 0.0625 → n.s. anyway), and
  // +6 (p = 2/2^6 = 0.03125 raw, significant alone; Holm: the second smallest of 3 is ×2 = 0.0625 → n.s.).
  const base = [1, 2, 3].map((s) => run(`h-base-seed${s}`, s, (i) => i < 10));
  const a = [1, 2, 3].map((s) => run(`h-a-seed${s}`, s, (i) => i < 20));
  const b = [1, 2, 3].map((s) => run(`h-b-seed${s}`, s, (i) => i < 15));
  const c = [1, 2, 3].map((s) => run(`h-c-seed${s}`, s, (i) => i < 16));
  const r = compareSeeds(base, [...a, ...b, ...c], { tokenTypes: false, resamples: 200 });
  const [, ra, rb, rc] = r.rows;
  assert.deepEqual([ra.conditional!.p, rb.conditional!.p, rc.conditional!.p], [2 / 1024, 0.0625, 0.03125]);
  // sorted: 2/1024·3 = 0.005859375; 0.03125·2 = 0.0625; 0.0625·1 = 0.0625
  assert.deepEqual([ra.conditional!.p_adjusted, rb.conditional!.p_adjusted, rc.conditional!.p_adjusted], [0.005859375, 0.0625, 0.0625]);
  // The gate (twoway_reference.py): p 0.00087257, 0.0233519, 0.0123591; Holm: 0.00261772, then 0.0123591·2 = 0.0247183,
  // then max(0.0233519, 0.0247183) = 0.0247183: all three below 0.05.
  const adj = [ra.p_adjusted!, rb.p_adjusted!, rc.p_adjusted!];
  [0.00261772, 0.0247183, 0.0247183].forEach((v, k) => assert.ok(Math.abs(adj[k] - v) < 1e-6, `${k}: ${adj[k]}`));
  assert.deepEqual([ra.significant, rb.significant, rc.significant], [true, true, true]);
  assert.equal(r.adjustment.family, 3);
  // The same groups on their third look (seeds added in rounds): each p × 3 before Holm. Sorted 0.00261771, 0.0370773,
  // 0.0700557 → Holm ×3, ×2, ×1: 0.00785314, 0.0741546, max(0.0741546, 0.0700557): only the first holds.
  const third = compareSeeds(base, [...a, ...b, ...c], { tokenTypes: false, resamples: 200, looks: 3 });
  const adj3 = third.rows.slice(1).map((x) => x.p_adjusted!);
  [0.00785314, 0.0741546, 0.0741546].forEach((v, k) => assert.ok(Math.abs(adj3[k] - v) < 1e-5, `${k}: ${adj3[k]}`));
  assert.deepEqual(
    third.rows.slice(1).map((x) => x.significant),
    [true, false, false],
  );
  assert.equal(third.adjustment.looks, 3);
  assert.ok(third.notes.some((n) => /looked at 3 times .* every p is multiplied by 3 before Holm/.test(n)));
});

test('one run counted twice in a group (the same seed from the same warm start) is refused by name; one shared start is said', () => {
  const start = join(root, 'sft-warm-start');
  const base = [1, 2, 3].map((s) => run(`dup-base-seed${s}`, s, (i) => i < 8 + s, { warmStart: start }));
  const other = [1, 2, 3].map((s) => run(`dup-x-seed${s}`, s, (i) => i < 12 + s, { warmStart: start }));
  const r = compareSeeds(base, other, { resamples: 200, tokenTypes: false });
  assert.ok(
    r.notes.some(
      (n) =>
        n ===
        'every run starts GRPO from one warm start (sft-warm-start): the verdicts are conditional on it, since a start × method interaction cannot be seen (sweep.warm_starts trains several)',
    ),
    r.notes.join('\n'),
  );
  // ...and each row's verdict carries it, in the JSON and in the table's p_adj cell
  assert.deepEqual([r.rows[0].warm_start, r.rows[1].warm_start, r.rows[1].run_test!.method], ['sft-warm-start', 'sft-warm-start', 'two-way t']);
  assert.match(compareMarkdown(r), /\| dup-x \| .* \| \*\*0\.027 \(from warm start sft-warm-start\)\*\* \|/);
  // the second seed's run again, under another folder name: the same seed and start
  const copy = run('dup-x-seed2', 2, (i) => i < 14, { warmStart: start, stamp: '20260101-000900' });
  assert.throws(
    () => compareSeeds(base, [...other, copy], { resamples: 200, tokenTypes: false }),
    (e: unknown) =>
      e instanceof Error &&
      e.message.startsWith(`compare: dup-x holds two runs of seed 2 from the warm start ${start} (`) &&
      e.message.includes(other[1]) &&
      e.message.includes(copy),
  );
  // the same seed from another start is another run
  const fromOther = run('dup-x-seed2', 2, (i) => i < 14, { warmStart: join(root, 'another-start'), stamp: '20260101-001000' });
  const ok = compareSeeds(base, [...other, fromOther], { resamples: 200, tokenTypes: false });
  assert.equal(ok.rows[1].runs.length, 4);
  assert.ok(!ok.notes.some((n) => /one warm start/.test(n)), 'two starts: no such note');
  // but that start has no baseline run: start and method are confounded, so the row gets no verdict
  assert.deepEqual([ok.rows[1].p_adjusted, ok.rows[1].run_test, ok.rows[1].warm_start], [null, null, null]);
  assert.match(ok.rows[1].verdict_withheld!, /^the warm start another-start has runs on one side only, so the start and the method are confounded; no verdict/);
});

test('runs from three shared warm starts, crossed with the methods, are gated over the starts (the worked case of start_gate.test.ts)', () => {
  // start_reference.py's worked case: per start two runs a side on 6 instances; Δ_s 1/4, 1/6, −1/12, Δ̂ 1/9, se 0.100154,
  // df 2, p 0.382787. The same vectors through compare: read from run folders, grouped, and gated over the starts.
  const B = [
    ['110100', '101100'],
    ['111101', '110110'],
    ['010000', '100100'],
  ];
  const A = [
    ['100100', '001000'],
    ['110100', '101101'],
    ['110000', '000110'],
  ];
  const dirs = (name: string, sides: string[][]) =>
    sides.flatMap((runs, k) =>
      runs.map((bits, j) => run(`${name}-start${k + 1}-seed${j + 1}`, j + 1, (i) => bits[i] === '1', { n: 6, warmStart: join(root, `x-warm-start-${k + 1}`) })),
    );
  const r = compareSeeds(dirs('cross-base', A), dirs('cross-x', B), { resamples: 200, tokenTypes: false, powerFor: 0.2 });
  const row = r.rows[1];
  assert.deepEqual([r.rows[0].group, row.group], ['cross-base', 'cross-x'], 'a start part of the name groups with the seed part');
  const t = row.run_test!;
  assert.equal(t.method, 'over warm starts');
  assert.equal(t.starts, 3);
  assert.ok(Math.abs(t.diff - 1 / 9) < 1e-12 && Math.abs(t.se - 0.10015420209622193) < 1e-12 && Math.abs(t.p - 0.3827866) < 1e-6, JSON.stringify(t));
  assert.equal(t.df, 2);
  assert.ok(Math.abs(t.start_sd! - Math.sqrt(0.030092592592592594)) < 1e-12);
  assert.deepEqual([row.warm_start, row.significant, row.seeds_needed?.unit], [null, false, 'starts']);
  assert.match(compareMarkdown(r), /the gate is over the starts instead/);
  // how the difference moves from start to start, named
  assert.match(
    compareMarkdown(r),
    /^- cross-x: Δ by warm start: x-warm-start-1 \+25\.0 pp \(2 v 2\), x-warm-start-2 \+16\.7 pp \(2 v 2\), x-warm-start-3 -8\.3 pp \(2 v 2\)$/m,
  );
  assert.equal(row.starts, 3);
  assert.match(compareMarkdown(r), /\| cross-x \| — \| 1, 2 × 3 starts \| 6 \|/);
});

test("a row's label names the strategy's headline parameter, nested ones too: gtpo's default is the seeds' form, not GTPO's", () => {
  const base = [1, 2, 3].map((s) => run(`lbl-base-seed${s}`, s, (i) => i < 8 + s));
  const g = [1, 2, 3].map((s) => {
    const d = run(`lbl-g-seed${s}`, s, (i) => i < 10 + s);
    writeFileSync(join(d, 'config.yaml'), `name: lbl-g-seed${s}\nseed: ${s}\ncredit:\n  strategy: gtpo\n  gtpo:\n    form: seed\n`);
    return d;
  });
  const r = compareSeeds(base, g, { resamples: 200, tokenTypes: false });
  assert.equal(r.rows[1].label, 'gtpo (gtpo.form seed)');
});
