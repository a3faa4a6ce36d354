// import --follow against a writer process that appends a prime-rl run's steps on a timer, one file written in two
// halves with a pause between (cut mid-line), a line appended to a step already imported, and the trainer's metrics:
// the imported run ends with every step whole and none twice. Also: prime-rl's traces.jsonl episodes, read as records.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { followImport } from '../../../src/engine/import/follow';
import { importRollouts } from '../../../src/engine/import/import';
import { readImport } from '../../../src/engine/import/formats';
import { trainerMetricsRow } from '../../../src/engine/import/trainer_metrics';
import { readEpisodeTable } from '../../../src/engine/rundir/arrow_tables';
import { listLoggedSteps, readMetrics, readRunInfo, stepFile } from '../../../src/engine/rundir/rundir';

const tmp = () => mkdtempSync(join(tmpdir(), 'cl-follow-'));
const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

/** One prime-rl token-export line: a 2-token prompt and a completion of `n` tokens, with its advantage and reward. */
function line(step: number, i: number, n: number): string {
  const comp = Array.from({ length: n }, (_, t) => 10 + ((step * 7 + i * 3 + t) % 50));
  const adv = i % 2 ? -0.5 : 0.5;
  return JSON.stringify({
    token_ids: [1, 2, ...comp],
    loss_mask: [false, false, ...comp.map(() => true)],
    trainer_logprobs: [0, 0, ...comp.map((_, t) => -0.1 * (t + 1))],
    advantages: [0, 0, ...comp.map(() => adv)],
    rewards: [null, null, ...comp.map(() => (adv > 0 ? 1 : 0))],
  });
}

/**
 * The writer: steps 1–4 of 4 completions each under out/token_exports/step_N/rank_0.jsonl, 300 ms apart; step 3's file
 * in two halves, the first ending mid-line, with 1.5 s between; the trainer's metrics.jsonl a line per step; and, after
 * step 4, one more line appended to step 1 (already imported by then).
 */
const WRITER = `
const fs = require('fs'), path = require('path');
const [out, linesJson] = process.argv.slice(1);
const lines = JSON.parse(linesJson);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  for (const step of [1, 2, 3, 4]) {
    const dir = path.join(out, 'token_exports', 'step_' + step);
    fs.mkdirSync(dir, { recursive: true });
    const text = lines[step].join('\\n') + '\\n';
    const f = path.join(dir, 'rank_0.jsonl');
    if (step === 3) {
      const cut = Math.floor(text.length / 2) + 7;
      fs.writeFileSync(f, text.slice(0, cut));
      await sleep(1500);
      fs.appendFileSync(f, text.slice(cut));
    } else fs.writeFileSync(f, text);
    fs.appendFileSync(path.join(out, 'metrics.jsonl'), JSON.stringify({ step, time: Date.now() / 1000, 'loss/mean': 0.1 * step, 'entropy/mean': 2 - 0.1 * step }) + '\\n');
    await sleep(300);
  }
  await sleep(1200);
  fs.appendFileSync(path.join(out, 'token_exports', 'step_1', 'rank_0.jsonl'), lines[1][0] + '\\n');
})();
`;

test('--follow imports a growing prime-rl folder step by step: every step whole, none twice, the trainer metrics beside', async () => {
  const dir = tmp();
  const out = join(dir, 'out');
  mkdirSync(out);
  const lines: Record<number, string[]> = {};
  for (const step of [1, 2, 3, 4]) lines[step] = [0, 1, 2, 3].map((i) => line(step, i, 5 + i + step));
  const writer = spawn(process.execPath, ['-e', WRITER, out, JSON.stringify(lines)], { stdio: 'inherit' });
  const logs: string[] = [];
  const seen: number[] = [];
  const r = await followImport({
    source: out,
    out: join(dir, 'runs'),
    untilIdle: 5,
    // well above the writer's 1.5 s pause inside step 3's file
    settleMs: 4000,
    pollMs: 100,
    log: (_, m) => logs.push(m),
    onStep: (s) => seen.push(s),
  });
  await new Promise((res) => (writer.exitCode !== null ? res(null) : writer.on('exit', res)));
  assert.deepEqual(seen, [1, 2, 3, 4], 'each step once, in order');
  assert.deepEqual(r.steps, [1, 2, 3, 4]);
  assert.equal(r.records, 16);
  assert.deepEqual(r.problems, [], 'the half-written line was never read as a line');
  assert.deepEqual(listLoggedSteps(r.runDir, 'tokens'), [1, 2, 3, 4]);
  for (const step of [1, 2, 3, 4]) {
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', step));
    assert.deepEqual(
      [...ep.length],
      [0, 1, 2, 3].map((i) => 5 + i + step),
      `step ${step} whole`,
    );
    assert.deepEqual([...ep.advantage], [0.5, -0.5, 0.5, -0.5]);
  }
  // the import's own row per step, once; the trainer's metrics beside them, under prime/
  const rows = readMetrics(r.runDir);
  assert.deepEqual(
    rows.filter((x) => x.success_rate !== undefined).map((x) => x.step),
    [1, 2, 3, 4],
  );
  assert.deepEqual(
    rows.filter((x) => x['prime/loss/mean'] !== undefined).map((x) => [x.step, x['prime/loss/mean']]),
    [1, 2, 3, 4].map((s) => [s, 0.1 * s]),
  );
  assert.ok(
    logs.some((m) => /step 1 changed after it was imported/.test(m)),
    logs.join('\n'),
  );
  const info = readRunInfo(r.runDir)!;
  assert.equal(info.status, 'completed');
  assert.equal(info.imported!.following, false);
  assert.equal(info.last_step, 4);
});

test('--follow keeps a step it had read when its file is truncated, rotated away or renamed under it, and says what changed', async () => {
  const dir = tmp();
  const out = join(dir, 'out');
  const file = (step: number, name = 'rank_0.jsonl') => join(out, 'token_exports', `step_${step}`, name);
  const lines = (step: number) => [0, 1, 2, 3].map((i) => line(step, i, 5 + i + step));
  const write = (step: number, ls: string[]) => {
    mkdirSync(join(out, 'token_exports', `step_${step}`), { recursive: true });
    writeFileSync(file(step), ls.join('\n') + '\n');
  };
  write(1, lines(1));
  write(2, lines(2));
  const at = (ms: number, fn: () => void) => setTimeout(fn, ms);
  const timers = [
    // step 2 is the newest, waiting to settle: its file loses its last two lines (the trainer rewrote it shorter) ...
    at(600, () => writeFileSync(file(2), lines(2).slice(0, 2).join('\n') + '\n')),
    // ... then the file is rotated to a name the import does not read
    at(1200, () => renameSync(file(2), file(2, 'rank_0.jsonl.old'))),
    // step 3 arrives (so step 2 is whole), and is then renamed to a name the import reads: its records are there once
    at(1800, () => write(3, lines(3))),
    at(2400, () => renameSync(file(3), file(3, 'rank_0.moved.jsonl'))),
  ];
  const logs: string[] = [];
  const seen: number[] = [];
  const r = await followImport({
    source: out,
    out: join(dir, 'runs'),
    untilIdle: 5,
    settleMs: 3000,
    pollMs: 100,
    log: (_, m) => logs.push(m),
    onStep: (x) => seen.push(x),
  });
  timers.forEach(clearTimeout);
  assert.deepEqual(seen, [1, 2, 3]);
  for (const step of [1, 2, 3]) {
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', step));
    assert.deepEqual(
      [...ep.length].sort((a, b) => a - b),
      [0, 1, 2, 3].map((i) => 5 + i + step),
      `step ${step}: every record, once`,
    );
  }
  const said = logs.join('\n');
  assert.match(said, /step_2\/rank_0\.jsonl was truncated under the follow: the 2 records of step 2 read from it before are kept/);
  assert.match(said, /step_2\/rank_0\.jsonl disappeared \(rotated, moved or deleted\) under the follow: the 2 records of step 2/);
  assert.equal(readRunInfo(r.runDir)!.status, 'completed');
});

test('links in the source folder: step folders and files behind links are imported, a file linked twice once; a broken link and a loop are listed as skipped', async () => {
  const dir = tmp();
  const out = join(dir, 'out', 'token_exports');
  const elsewhere = join(dir, 'elsewhere');
  const lines = (step: number) => [0, 1, 2, 3].map((i) => line(step, i, 5 + i + step)).join('\n') + '\n';
  mkdirSync(join(out, 'step_1'), { recursive: true });
  writeFileSync(join(out, 'step_1', 'rank_0.jsonl'), lines(1));
  mkdirSync(join(elsewhere, 'step_2'), { recursive: true });
  writeFileSync(join(elsewhere, 'step_2', 'rank_0.jsonl'), lines(2));
  writeFileSync(join(elsewhere, 'three.jsonl'), lines(3));
  symlinkSync(join(elsewhere, 'step_2'), join(out, 'step_2'));
  mkdirSync(join(out, 'step_3'));
  symlinkSync(join(elsewhere, 'three.jsonl'), join(out, 'step_3', 'rank_0.jsonl'));
  symlinkSync(join(elsewhere, 'three.jsonl'), join(out, 'step_3', 'rank_1.jsonl'));
  symlinkSync(join(dir, 'gone.jsonl'), join(out, 'step_1', 'rank_9.jsonl'));
  symlinkSync(out, join(out, 'step_1', 'loop'));
  const r = await importRollouts({ source: join(dir, 'out'), out: join(dir, 'runs'), log: () => {} });
  assert.deepEqual(r.steps, [1, 2, 3]);
  assert.equal(r.records, 12, 'each step once, the file linked twice read once');
  assert.deepEqual(r.problems.map((p) => [p.file, p.reason.replace(/\(.*\)/, '(…)')]).sort(), [
    ['token_exports/step_1/loop', 'a link to a folder already read (…): read once'],
    ['token_exports/step_1/rank_9.jsonl', 'a link whose target does not exist'],
    ['token_exports/step_3/rank_1.jsonl', 'a link to a file already read (…): read once'],
  ]);
  assert.equal(r.skipped, 3);
});

test('--follow through the CLI: an existing folder is imported at once (its files settled long ago), then --until-idle ends it', () => {
  const dir = tmp();
  const src = join(dir, 'out', 'token_exports');
  for (const step of [1, 2]) {
    mkdirSync(join(src, `step_${step}`), { recursive: true });
    writeFileSync(join(src, `step_${step}`, 'rank_0.jsonl'), [0, 1].map((i) => line(step, i, 4)).join('\n') + '\n');
  }
  // written "an hour ago": a follow started now counts the last step whole without waiting 10 s
  const old = new Date(Date.now() - 3600_000);
  for (const step of [1, 2]) spawnSync('touch', ['-d', old.toISOString(), join(src, `step_${step}`, 'rank_0.jsonl')]);
  const t0 = Date.now();
  const res = spawnSync(process.execPath, [CLI, 'import', join(dir, 'out'), '--follow', '--until-idle', '2', '--out', join(dir, 'runs')], { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  assert.ok(Date.now() - t0 < 8000, 'no settle wait for files written long ago');
  assert.match(res.stderr, /step 1 imported/);
  assert.match(res.stderr, /step 2 imported/);
  assert.match(res.stdout, /imported 4 completions \(prime, 2 steps, 0 skipped\)/);
  // nothing arrives: a clear error, exit 2, no run folder
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  const none = spawnSync(process.execPath, [CLI, 'import', empty, '--follow', '--until-idle', '1', '--out', join(dir, 'runs2')], { encoding: 'utf8' });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /no whole step arrived in .* within 1 s; nothing was imported/);
  assert.match(spawnSync(process.execPath, [CLI, 'import', empty, '--until-idle', '1'], { encoding: 'utf8' }).stderr, /--until-idle goes with --follow/);
});

test("prime-rl's traces.jsonl: one sample per branch, tokens with their log-probs and advantages, reward Σ score × weight; effective over all", async () => {
  const dir = tmp();
  const node = (o: Record<string, unknown>) => ({ timestamp: 0, ...o });
  const episode = (step: number, group: string, adv: number[] | null, extraBranch = false) => ({
    id: `e${step}${group}`,
    env: { id: 'gsm8k' },
    task: { type: 'gsm8k', data: {} },
    group: { id: group },
    run: { type: 'train', id: 'r', work: { type: 'train', step } },
    ok: true,
    traces: [
      {
        version: 1,
        task: { type: 'gsm8k', data: {} },
        agent: { config: {}, name: 'agent' },
        nodes: [
          node({ parent: null, message: { role: 'user', content: 'What is 2+2?' }, token_ids: [5, 6, 7], mask: [false, false, false] }),
          node({
            parent: 0,
            message: { role: 'assistant', content: '4' },
            sampled: true,
            token_ids: [8, 9, 10],
            mask: [false, true, true],
            logprobs: [-0.5, -0.25],
            advantages: adv,
          }),
          ...(extraBranch
            ? [
                node({
                  parent: 0,
                  message: { role: 'assistant', content: '5' },
                  sampled: true,
                  token_ids: [8, 11],
                  mask: [false, true],
                  logprobs: [-2],
                  advantages: adv ? [adv[0]] : null,
                }),
              ]
            : []),
        ],
        rewards: { correct: { score: 1, weight: 0.5 }, format: { score: 1, weight: 0.5 }, judge: null },
        metrics: {},
        is_completed: true,
        ok: true,
        stop_condition: 'completed',
      },
    ],
  });
  const put = (rel: string, rows: unknown[]) => {
    mkdirSync(join(dir, 'out', rel, '..'), { recursive: true });
    writeFileSync(join(dir, 'out', rel), rows.map((x) => JSON.stringify(x)).join('\n') + '\n');
  };
  put('rollouts/step_1/train/all/traces.jsonl', [episode(1, 'g', [0.5, 0.5]), episode(1, 'h', null)]);
  put('rollouts/step_1/train/effective/traces.jsonl', [episode(1, 'g', [0.5, 0.5], true)]);
  put('rollouts/step_1/eval/all/traces.jsonl', [episode(1, 'x', null)]);
  put('rollouts/step_2/train/all/traces.jsonl', [
    episode(2, 'g', null),
    { id: 'bad', task: {}, traces: [], errors: [{ type: 'Timeout', message: 'sandbox timed out' }] },
  ]);
  const r = await readImport(join(dir, 'out'));
  assert.equal(r.format, 'prime');
  assert.deepEqual(
    r.files.map((f) => f.slice(join(dir, 'out').length + 1)),
    [join('rollouts', 'step_1', 'train', 'effective', 'traces.jsonl'), join('rollouts', 'step_2', 'train', 'all', 'traces.jsonl')],
  );
  assert.equal(r.records.length, 3, 'two branches of step 1, one of step 2');
  const [a, b, c] = r.records;
  assert.deepEqual([a.step, a.group, a.reward], [1, 'g', 1]);
  assert.deepEqual(a.tokens!.promptIds, [5, 6, 7, 8]);
  assert.deepEqual(a.tokens!.ids, [9, 10]);
  assert.deepEqual(a.tokens!.logprob, [-0.5, -0.25]);
  assert.deepEqual(a.tokens!.advantage, [0.5, 0.5]);
  assert.deepEqual(b.tokens!.ids, [11]);
  assert.deepEqual(c.step, 2);
  assert.ok(c.tokens!.advantage.every(Number.isNaN), 'no advantage assigned: recomputed from the rewards on import');
  assert.match(r.problems[0].reason, /no trace \(sandbox timed out\)/);
});

test("the trainer's metrics lines: veRL's {step, data} and prime-rl's flat rows, our names for loss, KL, |g|, clip fraction and step time", () => {
  assert.deepEqual(
    trainerMetricsRow({ step: 3, data: { 'actor/pg_loss': 0.2, 'actor/kl_loss': 0.01, 'critic/rewards/mean': 0.5, 'timing_s/step': 12 } }, 'verl'),
    {
      step: 3,
      phase: 'grpo',
      'verl/actor/pg_loss': 0.2,
      loss: 0.2,
      'verl/actor/kl_loss': 0.01,
      kl: 0.01,
      'verl/critic/rewards/mean': 0.5,
      'verl/timing_s/step': 12,
      step_time_s: 12,
    },
  );
  assert.deepEqual(trainerMetricsRow({ step: 1, time: 5, 'loss/mean': 0.3, tag: 'x' }, 'prime'), { step: 1, phase: 'grpo', 'prime/loss/mean': 0.3 });
  assert.equal(trainerMetricsRow({ time: 1 }, 'prime'), null);
});

test('--follow on a veRL rollout_data_dir scores each step with --model as it arrives; the last step once its file settles', async () => {
  const dir = tmp();
  // the model: a tiny trained run, whose own completions are the veRL dump's text
  const { train } = await import('../../../src/engine/train/train');
  const { tinyConfig } = await import('../fixtures');
  const model = await train({ configPath: tinyConfig(dir, 'countdown'), sets: ['logging.tensorboard=false'] });
  const dump = join(dir, 'verl');
  mkdirSync(dump);
  const stepLines = (step: number) => {
    const ep = readEpisodeTable(stepFile(model.runDir, 'episodes', step));
    return ep.prompt.map((p, i) => JSON.stringify({ input: p, output: ep.completion[i], score: ep.reward[i], step })).join('\n') + '\n';
  };
  writeFileSync(join(dump, '1.jsonl'), stepLines(1));
  writeFileSync(join(dump, 'metrics.jsonl'), '');
  const verlMetrics = join(dir, 'verl-metrics.jsonl');
  writeFileSync(verlMetrics, JSON.stringify({ step: 1, data: { 'actor/pg_loss': 0.25, 'critic/rewards/mean': 0.1 } }) + '\n');
  const seen: number[] = [];
  const t0 = Date.now();
  const timer = setTimeout(() => writeFileSync(join(dump, '2.jsonl'), stepLines(2)), 1500);
  const r = await followImport({
    source: dump,
    model: model.runDir,
    metrics: verlMetrics,
    out: join(dir, 'runs'),
    untilIdle: 3,
    settleMs: 2000,
    pollMs: 100,
    log: () => {},
    onStep: (s) => seen.push(s),
  });
  clearTimeout(timer);
  assert.deepEqual(seen, [1, 2]);
  assert.equal(r.format, 'verl');
  assert.ok(Date.now() - t0 >= 1500 + 2000, 'step 2, the last, waited for its file to settle');
  const rows = readMetrics(r.runDir);
  assert.deepEqual(
    rows.filter((x) => x['verl/actor/pg_loss'] !== undefined).map((x) => [x.step, x.loss]),
    [[1, 0.25]],
  );
  // scored by the model: every token has a finite log-prob
  const { readTokenTable } = await import('../../../src/engine/rundir/arrow_tables');
  for (const s of [1, 2]) assert.ok([...readTokenTable(stepFile(r.runDir, 'tokens', s)).logprob].every(Number.isFinite));
});
