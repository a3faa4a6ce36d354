// `credit-lens import`: every format read from its documented keys, malformed lines skipped by line number, tokens
// scored against an independent float64 forward, advantages against hand-worked numbers, and the result an
// ordinary run directory that the readers, analyze and the heatmap use unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { detectFormat, fileStep, readImport } from '../../../src/engine/import/formats';
import { readCsv } from '../../../src/engine/import/csv';
import { importRollouts, lastOf, planSteps } from '../../../src/engine/import/import';
import { advantages, groupAdvantages } from '../../../src/engine/credit/advantages';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { readMetrics, readRunInfo, stepFile } from '../../../src/engine/rundir/rundir';
import { analyzeRun } from '../../../src/engine/analysis/analysis';
import { train } from '../../../src/engine/train/train';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { isUserError } from '../../../src/engine/core/errors';
import { QWEN_TOK, qwenBase, randomWeights, referenceLogits, writeCheckpoint } from '../model/hf_reference';
import { tinyConfig } from '../fixtures';

const jsonl = (rows: unknown[]) => rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';
const quiet = { log: () => {} };
const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'cl-import-'));
}

test('groupAdvantages (imported groups of any size and order): hand-worked values, and advantages() for equal groups', () => {
  // Group {1, 0}: mean 0.5, sample std √((0.25 + 0.25)/1) = 0.707107; A = ±0.5 / 0.707207 = ±0.707007.
  // Group {0.5, 0.5, 0.5}: std 0, A = 0 / 1e-4 = 0.
  const a = groupAdvantages([1, 0, 0.5, 0.5, 0.5], [0, 0, 1, 1, 1], 'group');
  assert.ok(Math.abs(a[0] - 0.707007) < 1e-6 && Math.abs(a[1] + 0.707007) < 1e-6, String(a));
  assert.deepEqual(a.slice(2), [0, 0, 0]);
  // batch: group mean, the step's std. Rewards {1, 0, .5, .5, .5}: mean .5, sample std √(0.5/4) = 0.353553;
  // A_0 = 0.5 / 0.353653 = 1.413816.
  const b = groupAdvantages([1, 0, 0.5, 0.5, 0.5], [0, 0, 1, 1, 1], 'batch');
  assert.ok(Math.abs(b[0] - 1.413816) < 1e-5, String(b));
  assert.deepEqual(groupAdvantages([3, 1], [0, 0], 'none'), [1, -1]);
  // Equal groups: the trainer's own function gives the same numbers (groups given out of order here).
  const r = [1, 0, 0, 1, 1, 1, 0.2, 0.4];
  for (const scale of ['group', 'batch', 'none'] as const) {
    const want = advantages(r, 4, scale);
    const got = groupAdvantages(r, [0, 0, 0, 0, 1, 1, 1, 1], scale);
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]) < 1e-12, `${scale}[${i}]`));
  }
});

test('formats: detection from documented keys; CSV with quoted line breaks equals the W&B table JSON', async () => {
  assert.equal(detectFormat(['r/1.jsonl'], { input: 'p', output: 'c', score: 1, step: 1 }), 'verl');
  assert.equal(detectFormat(['x/token_exports/step_1/rank_0.jsonl'], null), 'prime');
  assert.equal(detectFormat(['a.jsonl'], { token_ids: [1], loss_mask: [true] }), 'prime');
  assert.equal(detectFormat(['a.jsonl'], { prompt: 'p', completion: 'c', reward: 1 }), 'jsonl');
  assert.equal(detectFormat(['a.jsonl'], { step: 1, prompt: 'p', completion: 'c', accuracy_reward: 1, advantage: 0.5 }), 'trl');
  assert.equal(detectFormat(['t.csv'], null), 'trl');
  assert.throws(
    () => detectFormat(['a.jsonl'], { foo: 1 }),
    (e: unknown) => isUserError(e) && /--format/.test((e as Error).message),
  );

  const dir = tmp();
  try {
    const csv = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    assert.deepEqual((await readCsv(csv('q.csv', '\ufeffa,b\n1,"x, ""y""\nz"\n\n2,w\r\n'))).rows, [
      { line: 1, cells: ['a', 'b'] },
      { line: 2, cells: ['1', 'x, "y"\nz'] },
      { line: 5, cells: ['2', 'w'] },
    ]);
    assert.match((await readCsv(csv('open.csv', 'a\n"open'))).error!.reason, /unterminated/);
    // A row past the cap is refused with its line; the rows before it are kept.
    const capped = await readCsv(csv('big.csv', `a,b\n1,2\n3,"${'x'.repeat(5000)}"\n`), { maxRowChars: 1000 });
    assert.deepEqual(
      capped.rows.map((r) => r.cells),
      [
        ['a', 'b'],
        ['1', '2'],
      ],
    );
    assert.match(capped.error!.reason, /a row longer than .* \(the import's limit per row\)/);
    // A 40 M-character cell reads within a 300 MB heap (the old parser needed about 33 bytes per character: 1.3 GB).
    const huge = csv('huge.csv', `step,prompt,completion\n1,p,"${'y'.repeat(40 << 20)}"\n`);
    const probe = spawnSync(
      process.execPath,
      [
        '--max-old-space-size=300',
        '--import',
        'tsx',
        '-e',
        `require(${JSON.stringify(resolve(__dirname, '../../../src/engine/import/csv'))}).readCsv(${JSON.stringify(huge)}).then((r) => console.log(r.rows[1].cells[2].length, r.error))`,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(probe.status, 0, probe.stderr.slice(-500));
    assert.equal(probe.stdout.trim(), `${40 << 20} null`);
    const cols = ['step', 'prompt', 'completion', 'accuracy_reward', 'format_reward', 'advantage'];
    const data = [
      [3, 'Q1', 'line one\nline "two"', 1, 0.5, 0.9],
      [3, 'Q1', 'other', 0, 0.5, -0.9],
    ];
    writeFileSync(join(dir, 'table.json'), JSON.stringify({ columns: cols, data }));
    writeFileSync(join(dir, 'table.csv'), [cols.join(','), '3,Q1,"line one\nline ""two""",1,0.5,0.9', '3,Q1,other,0,0.5,-0.9'].join('\n'));
    const j = await readImport(join(dir, 'table.json'));
    const c = await readImport(join(dir, 'table.csv'));
    assert.equal(j.format, 'trl');
    assert.equal(c.format, 'trl');
    const strip = (r: Awaited<typeof j>) => r.records.map(({ file: _f, line: _l, ...rest }) => rest);
    assert.deepEqual(strip(c), strip(j));
    // TRL logs one column per reward function; the reward is their sum (reward_weights 1), the advantage is TRL's.
    assert.deepEqual(
      j.records.map((r) => [r.step, r.reward, r.advantage, r.completion]),
      [
        [3, 1.5, 0.9, 'line one\nline "two"'],
        [3, 0.5, -0.9, 'other'],
      ],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('import veRL dumps with an HF model: log-probs and entropies match a float64 forward; bad lines skipped by number', async () => {
  await tf.setBackend('cpu');
  const dir = tmp();
  try {
    const hf = join(dir, 'model');
    const cfg = { ...qwenBase, num_hidden_layers: 1 };
    const w = randomWeights(cfg, 11);
    writeCheckpoint(hf, cfg, w, 'F32', false);
    const src = join(dir, 'rollouts');
    mkdirSync(src);
    // trainer.rollout_data_dir: one <step>.jsonl per step; lines {input, output, score, step} (+ gts, extra infos)
    writeFileSync(
      join(src, '1.jsonl'),
      jsonl([
        { input: 'Using 3, 5: make 8.', output: ' 3 + 5 = 8', gts: '8', score: 1, step: 1 },
        { input: 'Using 3, 5: make 8.', output: ' 5 - 3', gts: '8', score: 0, step: 1 },
        { input: 'Using 2, 2: make 4.', output: ' 2 * 2', gts: '4', score: 0.5, step: 1 },
        { input: 'Using 2, 2: make 4.', output: ' 2 + 2', gts: '4', score: 0.5, step: 1 },
      ]),
    );
    writeFileSync(
      join(src, '2.jsonl'),
      jsonl([
        { input: 'Using 1, 4: make 5.', output: ' 1 + 4', score: 1, step: 2 },
        '{not json',
        { input: 'Using 1, 4: make 5.', output: ' 4' },
        { input: 'Using 1, 4: make 5.', output: ' 4 - 1', score: 0, step: 2 },
      ]),
    );
    const progress: [number, number][] = [];
    const r = await importRollouts({
      source: src,
      model: hf,
      out: join(dir, 'runs'),
      sets: ['backend=cpu'],
      progress: (d, t) => progress.push([d, t]),
      ...quiet,
    });
    assert.equal(r.format, 'verl');
    assert.equal(r.records, 6);
    assert.equal(r.skipped, 2);
    assert.deepEqual(
      r.problems.map((p) => [p.file, p.line]),
      [
        ['2.jsonl', 2],
        ['2.jsonl', 3],
      ],
    );
    assert.match(r.problems[0].reason, /not valid JSON/);
    assert.match(r.problems[1].reason, /score: missing/);
    assert.deepEqual(progress.at(-1), [6, 6]);
    assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /skipped 2\.jsonl:3: score: missing/);

    const info = readRunInfo(r.runDir)!;
    assert.equal(info.status, 'completed');
    assert.deepEqual(
      { ...info.imported, source: undefined },
      { source: undefined, format: 'verl', model: hf, records: 6, skipped: 2, tokenizer: hf, chat_template: 'auto' },
    );

    const tok = HfTokenizer.fromDir(hf, { useChatTemplate: false });
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', 1));
    const tt = readTokenTable(stepFile(r.runDir, 'tokens', 1));
    assert.deepEqual([...ep.reward], [1, 0, 0.5, 0.5]);
    // Hand-worked: group {1, 0} → ±0.707007 (see the first test); group {0.5, 0.5} → 0.
    assert.ok(Math.abs(ep.advantage[0] - 0.707007) < 1e-5 && Math.abs(ep.advantage[1] + 0.707007) < 1e-5);
    assert.deepEqual([...ep.advantage.slice(2)], [0, 0]);
    assert.deepEqual([...ep.prompt_idx], [0, 0, 1, 1]);
    let checked = 0;
    for (let e = 0; e < 4; e++) {
      const prompt = ep.prompt[e];
      const comp = tok.encode(ep.completion[e]);
      const pIds = tok.encodePrompt(prompt);
      const logits = referenceLogits(cfg, w, [...pIds, ...comp]);
      const rows = [...tt.episode.keys()].filter((i) => tt.episode[i] === e);
      assert.equal(rows.length, comp.length);
      rows.forEach((row, t) => {
        // float64 log-softmax and entropy of the logits at the position that predicts completion token t
        const z = logits[pIds.length - 1 + t];
        const m = z.reduce((a, v) => Math.max(a, v), -Infinity);
        const lse = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0));
        const lp = z[comp[t]] - lse;
        const ent = -z.reduce((a, v) => a + Math.exp(v - lse) * (v - lse), 0);
        assert.ok(Math.abs(tt.logprob[row] - lp) < 2e-4, `ℓ ${tt.logprob[row]} vs ${lp}`);
        assert.ok(Math.abs(tt.entropy[row] - ent) < 2e-4, `H ${tt.entropy[row]} vs ${ent}`);
        assert.equal(tt.token_id[row], comp[t]);
        // strategy none: w = 1, Â = A, c = Â·ℓ
        assert.equal(tt.weight[row], 1);
        assert.ok(Math.abs(tt.contribution[row] - Math.fround(ep.advantage[e] * tt.logprob[row])) < 1e-6);
        checked++;
      });
    }
    assert.ok(checked >= 12);
    // The bare prompts were scored under Qwen's chat template (auto), and engine.log says so.
    assert.equal(ep.prompt[0], tok.renderChat('Using 3, 5: make 8.'));
    assert.match(readFileSync(join(r.runDir, 'engine.log'), 'utf8'), /chat template \(auto.*: 6 had no template: applied/);
    const m = readMetrics(r.runDir);
    assert.deepEqual(
      m.map((x) => x.step),
      [1, 2],
    );
    assert.equal(m[0].reward_mean, 0.5);
    assert.equal(m[0].success_rate, 0.75); // success = reward ≥ 0.5 without a success field
    // groups {1, 0} and {0.5, 0.5}: one of the two has a reward spread
    assert.equal(m[0].effective_groups, 0.5);
    // scored with a model: the gradient norm |Â|·√(1 − 2π + Σπ²) (T = 1) is logged, 0 where Â = 0 (the second group)
    assert.ok(tt.grad_norm && [...tt.episode.keys()].every((i) => (tt.episode[i] >= 2 ? tt.grad_norm![i] === 0 : tt.grad_norm![i] > 0)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('import prime-rl token exports: per-token values kept, extra columns paintable, no model needed', async () => {
  const dir = tmp();
  try {
    const tok = HfTokenizer.fromDir(QWEN_TOK, { useChatTemplate: false });
    const prompt = tok.encode('Make 8 from 3 and 5.');
    const comp = tok.encode(' 3 + 5 = 8');
    const n = prompt.length + comp.length;
    const onComp = <T>(vals: T[], fill: T) => [...prompt.map(() => fill), ...vals];
    const seq = (adv: number, reward: number, lps: number[]) => ({
      schema_version: 2,
      step: 7,
      export_step: 7,
      rank: 0,
      micro_step: 0,
      sample_id: null,
      run_id: null,
      env_name: 'math',
      token_ids: [...prompt, ...comp],
      position_ids: Array.from({ length: n }, (_, i) => i),
      loss_mask: onComp(
        comp.map(() => true),
        false,
      ),
      temperatures: Array(n).fill(1),
      advantages: onComp(
        comp.map(() => adv),
        0,
      ),
      rewards: onComp(
        comp.map(() => reward),
        null,
      ),
      inference_logprobs: onComp(
        lps.map((x) => x - 0.01),
        0,
      ),
      trainer_logprobs: onComp(lps, 0),
      entropy: onComp(
        comp.map((_, i) => 0.1 * (i + 1)),
        0,
      ),
      importance_ratio: onComp(
        comp.map((_, i) => 1 + 0.01 * i),
        null,
      ),
      mismatch_kl: onComp(
        comp.map(() => 0.002),
        null,
      ),
      log_importance_ratio: null,
      prob_delta: null,
    });
    const lps = comp.map((_, i) => -0.5 * (i + 1));
    const src = join(dir, 'out', 'token_exports', 'step_7');
    mkdirSync(src, { recursive: true });
    writeFileSync(
      join(src, 'rank_0.jsonl'),
      jsonl([seq(0.5, 1, lps), seq(-0.5, 0, lps), { token_ids: [1, 2], loss_mask: [false, false], advantages: [0, 0], trainer_logprobs: [0, 0] }]),
    );
    // The trainer's output folder also holds other JSONL (logs): only token_exports/ is read from it.
    writeFileSync(join(dir, 'out', 'orchestrator.jsonl'), jsonl([{ level: 'info', msg: 'step 7' }]));
    assert.deepEqual(
      (await readImport(join(dir, 'out'))).files.map((f) => f.slice(dir.length)),
      [join('/out', 'token_exports', 'step_7', 'rank_0.jsonl')],
    );
    const r = await importRollouts({ source: join(dir, 'out', 'token_exports'), tokenizer: QWEN_TOK, out: join(dir, 'runs'), ...quiet });
    assert.equal(r.format, 'prime');
    assert.equal(r.records, 2);
    assert.deepEqual(
      r.problems.map((p) => [p.file, p.line, /no completion token/.test(p.reason)]),
      [[join('step_7', 'rank_0.jsonl'), 3, true]],
    );
    assert.equal(readRunInfo(r.runDir)!.imported!.model, null);
    const tt = readTokenTable(stepFile(r.runDir, 'tokens', 7));
    const ep = readEpisodeTable(stepFile(r.runDir, 'episodes', 7));
    assert.equal(ep.completion[0], ' 3 + 5 = 8');
    assert.equal(ep.prompt[0], 'Make 8 from 3 and 5.');
    assert.deepEqual([...ep.advantage], [0.5, -0.5]);
    assert.deepEqual([...ep.reward], [1, 0]);
    const k = comp.length;
    assert.deepEqual([...tt.logprob.slice(0, k)], lps.map(Math.fround));
    assert.deepEqual(
      [...tt.entropy.slice(0, k)],
      comp.map((_, i) => Math.fround(0.1 * (i + 1))),
    );
    // c = Â·ℓ with Â the exported per-token advantage: 0.5 × −0.5 = −0.25 at the first token
    assert.equal(tt.contribution[0], -0.25);
    assert.equal(tt.contribution[k], 0.25);
    assert.deepEqual(Object.keys(tt.extra).sort(), ['importance_ratio', 'inference_logprob', 'mismatch_kl']);
    assert.deepEqual([...tt.extra.importance_ratio.slice(0, 3)], [1, 1.01, 1.02].map(Math.fround));
    assert.ok(Math.abs((readMetrics(r.runDir)[0].mismatch_kl_mean as number) - 0.002) < 1e-12);

    // Without a tokenizer the tokens are their ids.
    const r2 = await importRollouts({ source: join(dir, 'out', 'token_exports'), out: join(dir, 'runs2'), ...quiet });
    assert.equal(readTokenTable(stepFile(r2.runDir, 'tokens', 7)).token[0], `⟨${comp[0]}⟩`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('import plain JSONL scored by a run folder: a strategy without training, analyze reads it, resume is refused', async () => {
  const dir = tmp();
  try {
    const cfgPath = tinyConfig(dir, 'countdown');
    const run = await train({ configPath: cfgPath });
    assert.equal(run.status, 'completed');
    const ep = readEpisodeTable(stepFile(run.runDir, 'episodes', 3));
    const src = join(dir, 'plain.jsonl');
    const rows = [...ep.prompt.keys()].map((i) => ({ prompt: ep.prompt[i], completion: ep.completion[i], reward: ep.reward[i], step: 5 }));
    // one completion with both sections, written by hand in the task's alphabet
    rows.push({ prompt: ep.prompt[0], completion: 'think 2+3=5</think> <answer>2+3</answer>', reward: 1, step: 5 });
    writeFileSync(src, jsonl(rows));
    const r = await importRollouts({
      source: src,
      model: run.runDir,
      out: join(dir, 'runs'),
      sets: ['backend=cpu', 'credit.strategy=outcome_conditional', 'credit.think_discount=0.25'],
      ...quiet,
    });
    assert.equal(r.format, 'jsonl');
    // every row is imported but one the importer skips, with its reason (an empty completion: the policy's EOS at once)
    assert.equal(r.records + r.skipped, ep.prompt.length + 1, JSON.stringify(r.problems));
    assert.ok(
      r.problems.every((p) => /empty/i.test(p.reason)),
      JSON.stringify(r.problems),
    );
    assert.ok(r.records >= ep.prompt.length);
    const tt = readTokenTable(stepFile(r.runDir, 'tokens', 5));
    // outcome_conditional (seed doc 001): weight 1 on <answer> tokens, think_discount elsewhere
    for (let i = 0; i < tt.weight.length; i++) assert.equal(tt.weight[i], tt.section[i] === 'answer' ? 1 : 0.25);
    assert.ok(tt.section.includes('answer') && tt.section.includes('think'));
    const a = analyzeRun(r.runDir);
    assert.ok(a.meta.tokens === tt.weight.length || a.meta.tokens > 0);
    await assert.rejects(train({ resume: r.runDir }), (e: unknown) => isUserError(e) && /imported run/.test((e as Error).message));
    // A format that carries no per-token values needs a model; a strategy that needs training is refused.
    await assert.rejects(importRollouts({ source: src, out: join(dir, 'runs'), ...quiet }), /pass --model/);
    await assert.rejects(
      importRollouts({ source: src, model: run.runDir, out: join(dir, 'runs'), sets: ['credit.strategy=attribution'], ...quiet }),
      /needs training/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('import: prompts logged without their template markers are scored as the policy saw them; as-logged keeps them', async () => {
  await tf.setBackend('cpu');
  const dir = tmp();
  try {
    const hf = join(dir, 'model');
    const cfg = { ...qwenBase, num_hidden_layers: 1 };
    writeCheckpoint(hf, cfg, randomWeights(cfg, 5), 'F32', false);
    const tok = HfTokenizer.fromDir(hf, { useChatTemplate: false });
    const q = 'Using 3, 5: make 8.';
    // veRL's dump: the templated prompt decoded with skip_special_tokens, markers gone
    const stripped = tok.decode(tok.encode(tok.renderChat(q)));
    assert.ok(!stripped.includes('<|im_start|>'));
    const dump = (name: string, input: string) => {
      const src = join(dir, name);
      mkdirSync(src);
      writeFileSync(
        join(src, '1.jsonl'),
        jsonl([
          { input, output: ' 3 + 5 = 8', score: 1, step: 1 },
          { input, output: ' 5 - 3', score: 0, step: 1 },
        ]),
      );
      return src;
    };
    const run = async (src: string, chatTemplate?: 'as-logged') =>
      (await importRollouts({ source: src, model: hf, out: join(dir, 'runs'), sets: ['backend=cpu'], ...(chatTemplate ? { chatTemplate } : {}), ...quiet }))
        .runDir;
    const templatedRun = await run(dump('templated', tok.renderChat(q)));
    const restoredRun = await run(dump('stripped', stripped));
    const asLoggedRun = await run(dump('stripped2', stripped), 'as-logged');
    const lp = (d: string) => [...readTokenTable(stepFile(d, 'tokens', 1)).logprob];
    assert.deepEqual(lp(restoredRun), lp(templatedRun), 'markers restored: the same context, the same log-probs');
    assert.notDeepEqual(lp(asLoggedRun), lp(templatedRun), 'as logged: another context, other log-probs');
    assert.equal(readEpisodeTable(stepFile(restoredRun, 'episodes', 1)).prompt[0], tok.renderChat(q));
    assert.match(readFileSync(join(restoredRun, 'engine.log'), 'utf8'), /2 were the template's text with its markers stripped/);
    assert.match(readFileSync(join(templatedRun, 'engine.log'), 'utf8'), /2 already carried the template's markers/);
    assert.match(readFileSync(join(asLoggedRun, 'engine.log'), 'utf8'), /as-logged: 2 prompts encoded exactly as logged/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an import whose every completion is skipped ends failed with the reasons; a cancelled one (SIGTERM) ends stopped (exit 130), never "running"', async () => {
  const dir = tmp();
  try {
    const run = await train({ configPath: tinyConfig(dir, 'countdown') });
    // Every completion is longer than the tiny model's 64-token context.
    const long = join(dir, 'long.jsonl');
    writeFileSync(long, jsonl([1, 2, 3].map((step) => ({ prompt: '3 4 ->', completion: '1+2='.repeat(40), reward: 0, step }))));
    const out = join(dir, 'runs-long');
    await assert.rejects(
      importRollouts({ source: long, model: run.runDir, out, sets: ['backend=cpu'], ...quiet }),
      /every one of the 3 completions was skipped; nothing to show:\n .*long\.jsonl:1: completion is \d+ tokens, the model's context is 64/,
    );
    const [failed] = readdirSync(out);
    const info = readRunInfo(join(out, failed))!;
    assert.equal(info.status, 'failed');
    assert.match(info.error ?? '', /every one of the 3 completions was skipped/);

    // A large import stopped by SIGTERM (the extension's Cancel) after its first progress line.
    const big = join(dir, 'big.jsonl');
    writeFileSync(
      big,
      jsonl(Array.from({ length: 3000 }, (_, i) => ({ prompt: '3 4 ->', completion: 'think 3+4=7</think> <answer>3+4</answer>', reward: 1, step: i + 1 }))),
    );
    const outBig = join(dir, 'runs-big');
    const child = spawn(process.execPath, [CLI, 'import', big, '--model', run.runDir, '--out', outBig, '--progress-json', '--set', 'backend=cpu'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    await new Promise<void>((res) =>
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (/"done":[1-9]/.test(err)) res();
      }),
    );
    const [cancelledDir] = readdirSync(outBig);
    assert.equal(readRunInfo(join(outBig, cancelledDir))!.pid, child.pid, 'the import records its pid');
    child.kill('SIGTERM');
    const code = await new Promise((res) => child.on('exit', res));
    // a stop, not a failure: exit 130 and status stopped, as a stopped training run
    assert.equal(code, 130);
    const end = readRunInfo(join(outBig, cancelledDir))!;
    assert.equal(end.status, 'stopped', err);
    assert.match(end.error ?? '', /^import cancelled after \d+ of 3000 completions; run it again/);
    assert.ok(!existsSync(join(outBig, cancelledDir, '.lock')), 'the lock is released');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('import edge cases: an empty first file, prime-rl rank files, ids outside the tokenizer, 100,000 steps', async () => {
  const dir = tmp();
  try {
    // An empty first file (a step that logged nothing) does not decide the format.
    mkdirSync(join(dir, 'dump'));
    writeFileSync(join(dir, 'dump', '1.jsonl'), '');
    writeFileSync(join(dir, 'dump', '2.jsonl'), jsonl([{ input: 'p', output: 'c', score: 1 }]));
    const r = await readImport(join(dir, 'dump'));
    assert.equal(r.format, 'verl');
    assert.deepEqual(
      r.records.map((x) => x.step),
      [2],
    );
    // prime-rl's rank_<R>.jsonl is a rank, not a step: the step is its step_<N> folder.
    assert.equal(fileStep(join('out', 'token_exports', 'step_5', 'rank_3.jsonl')), 5);
    assert.equal(fileStep(join('dump', '12.jsonl')), 12);
    assert.equal(fileStep('rank_3.jsonl'), 0);

    // Token ids outside a character tokenizer's vocabulary skip their line with the reason; the others import.
    const run = await train({ configPath: tinyConfig(dir, 'countdown') });
    const seq = (ids: number[]) => ({
      token_ids: ids,
      loss_mask: ids.map((_, i) => i > 0),
      advantages: ids.map(() => 1),
      trainer_logprobs: ids.map(() => -0.5),
    });
    mkdirSync(join(dir, 'token_exports', 'step_4'), { recursive: true });
    writeFileSync(join(dir, 'token_exports', 'step_4', 'rank_3.jsonl'), jsonl([seq([3, 4, 5]), seq([3, 999, 5])]));
    const imp = await importRollouts({ source: join(dir, 'token_exports'), model: run.runDir, out: join(dir, 'runs'), sets: ['backend=cpu'], ...quiet });
    assert.deepEqual(imp.steps, [4]);
    assert.equal(imp.records, 1);
    assert.deepEqual(
      imp.problems.map((p) => [p.line, p.reason]),
      [[2, "token id 999 is outside the tokenizer's vocabulary [0, 34): exported with another tokenizer?"]],
    );

    // 100,000 steps of one record, and one step of 20,000 prompts: planned in one linear pass, grouped in first-seen
    // order, and the last step found without a spread (Math.max(...steps) threw RangeError).
    const many = Array.from({ length: 100_000 }, (_, i) => ({
      file: 'f',
      line: i + 1,
      step: 100_000 - i,
      group: null,
      prompt: `p${i % 7}`,
      completion: '',
      reward: 0,
      advantage: null,
      success: null,
    }));
    const plan = planSteps(many);
    assert.equal(plan.length, 100_000);
    assert.equal(plan[0].step, 1);
    assert.equal(lastOf(plan.map((p) => p.step)), 100_000);
    const wide = Array.from({ length: 20_000 }, (_, i) => ({ ...many[0], line: i + 1, step: 1, prompt: `p${(i * 7919) % 5000}` }));
    const [one] = planSteps(wide);
    assert.equal(new Set(one.group).size, 5000);
    assert.ok(
      one.group.every((g, i) => i === 0 || g >= one.group[i - 1]),
      'members of a group are consecutive',
    );
    assert.equal(one.records[0].prompt, one.records[1].prompt, 'p0 appears 4 times: first');
    assert.deepEqual(
      one.records.filter((x) => x.prompt === 'p0').map((x) => x.line),
      wide.filter((x) => x.prompt === 'p0').map((x) => x.line),
      'in their order',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
