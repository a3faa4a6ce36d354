// Bad input gets a clear message and a non-zero exit, never a bare stack trace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { claimFolder } from '../../../src/engine/rundir/rundir';
import { isLocalSweepJson, type LocalSweepJson } from '../../../src/protocol/sweep_record';

// The bundled CLI users run (`npm test` builds it first).
const CLI = resolve(__dirname, '../../../dist/engine/cli.js');
const dir = mkdtempSync(join(tmpdir(), 'cl-cli-'));

function run(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir, timeout: 120_000 });
  return { code: r.status, err: r.stderr, out: r.stdout };
}

function cfg(name: string, body: string): string {
  const p = join(dir, name);
  writeFileSync(p, body);
  return p;
}

const base = (over: Record<string, string>) => {
  const parts = {
    head: 'name: t\nseed: 1\nbackend: wasm\n',
    model: 'model: { source: scratch, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 32, max_seq_len: 64 }\n',
    task: 'task: { name: arithmetic, numbers: [2, 2], max_number: 5, max_target: 20, train_size: 20, eval_size: 4 }\n',
    grpo: 'grpo: { steps: 1, prompts_per_step: 1, group_size: 2, max_new_tokens: 8 }\n',
    credit: '',
    ...over,
  };
  return Object.values(parts).join('');
};

function assertClean(r: { code: number | null; err: string }, re: RegExp) {
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, re);
  assert.doesNotMatch(r.err, /^\s+at .+\(.*:\d+:\d+\)$/m, 'no stack trace');
  assert.doesNotMatch(r.err, /internal error/);
}

test('missing config file', () => assertClean(run('train', 'nope.credit.yaml'), /nope\.credit\.yaml/));

test('malformed YAML', () => assertClean(run('train', cfg('bad.credit.yaml', 'name: [unclosed\nseed: 1\n')), /bad\.credit\.yaml/));

test('unknown strategy names the field and the allowed values', () =>
  assertClean(run('train', cfg('s.credit.yaml', base({ credit: 'credit: { strategy: magic }\n' }))), /credit\.strategy.*magic[\s\S]*outcome_conditional/));

test('negative size names the field', () => assertClean(run('train', cfg('n.credit.yaml', base({ grpo: 'grpo: { steps: -3 }\n' }))), /grpo\.steps/));

test('unreadable model path', () =>
  assertClean(run('train', cfg('m.credit.yaml', base({ model: 'model: { source: hf, path: ./no-such-model }\n' }))), /no-such-model/));

test('a reward module that throws', () => {
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 12 }, (_, i) => JSON.stringify({ prompt: `q${i} <think>`, answer: String(i) })).join('\n'));
  writeFileSync(join(dir, 'reward.js'), 'module.exports.reward = () => { throw new Error("boom in user code"); };\n');
  const r = run(
    'train',
    cfg('j.credit.yaml', base({ task: 'task: { name: jsonl, path: data.jsonl, reward_module: reward.js, train_size: 8, eval_size: 2 }\n' })),
  );
  assert.notEqual(r.code, 0);
  assert.match(r.err, /reward\.js/);
  assert.match(r.err, /boom in user code/);
  assert.doesNotMatch(r.err, /internal error/);
});

test('unknown command and option', () => {
  assertClean(run('fly'), /unknown command/);
  assertClean(run('train', 'x.yaml', '--bogus'), /unknown option --bogus/);
});

test('import: bad input is one clear message, and a good prime-rl export prints where the run went', () => {
  assertClean(run('import', 'no-such-rollouts'), /import: cannot read .*no-such-rollouts: no such file or folder/);
  const verl = cfg('3.jsonl', '{"input": "p", "output": "c", "score": 1, "step": 3}\n');
  assertClean(run('import', verl), /verl rollouts carry no per-token values; pass --model/);
  assertClean(run('import', verl, '--format', 'parquet'), /--format parquet: expected auto, verl_shard, verl, prime, trl or jsonl/);
  assertClean(run('import', verl, '--model', join(dir, 'nowhere')), /--model .*nowhere: no such folder/);
  const prime = cfg(
    'rank_0.jsonl',
    JSON.stringify({ step: 4, token_ids: [1, 2, 3], loss_mask: [false, true, true], advantages: [0, 1, 1], trainer_logprobs: [0, -0.5, -1] }) + '\n{oops\n',
  );
  const ok = run('import', prime, '--format', 'prime', '--out', join(dir, 'imported'));
  assert.equal(ok.code, 0, ok.err);
  assert.match(ok.out, /imported 1 completions \(prime, 1 step, 1 skipped\) → .*imported[/\\]import-rank_0-\d{8}-\d{6}/);
  assert.match(ok.err, /skipped rank_0\.jsonl:2: not valid JSON/);
});

test('sweep --dry-run on the local executor lists the runs (seeds from --set sweep.seeds) and trains nothing', () => {
  const out = join(dir, 'dry-runs');
  const p = cfg('dry.credit.yaml', base({}) + `output_dir: ${out}\n`);
  const r = run('sweep', p, '--set', 'sweep.seeds=[4, 5]', '--set', 'sweep.grid={credit.strategy: [none, inverse_logprob]}', '--dry-run', '--json');
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out) as { executor: string; runs: { name: string; overrides: Record<string, unknown> }[] };
  assert.equal(j.executor, 'local');
  assert.deepEqual(
    j.runs.map((x) => [x.name, x.overrides.seed, x.overrides['credit.strategy']]),
    [
      ['t-none-seed4', 4, 'none'],
      ['t-none-seed5', 5, 'none'],
      ['t-inverse_logprob-seed4', 4, 'inverse_logprob'],
      ['t-inverse_logprob-seed5', 5, 'inverse_logprob'],
    ],
  );
  assert.equal(existsSync(out), false, 'a dry run writes no run directory');
  const text = run('sweep', p, '--set', 'sweep.seeds=2', '--dry-run');
  assert.match(text.out, /^2 runs \(dry run: nothing trained\)\n  t-seed1  seed=1\n  t-seed2  seed=2$/m);
  assertClean(run('sweep', p, '--set', 'sweep.seed=2', '--dry-run'), /did you mean `sweep\.seeds`/);
});

test('a terminal sweep keeps its record in <output_dir>/sweep-<ts>/sweep.json: every run, its strategy and knob, its folder, and no live process at the end', () => {
  const out = join(dir, 'recorded-runs');
  const p = cfg('rec.credit.yaml', base({}) + `output_dir: ${out}\n`);
  const r = run('sweep', p, '--set', 'sweep.grid={credit.strategy: [none, outcome_conditional]}');
  assert.equal(r.code, 0, r.err);
  const sweeps = readdirSync(out).filter((d) => d.startsWith('sweep-'));
  assert.equal(sweeps.length, 1, readdirSync(out).join(', '));
  const rec = JSON.parse(readFileSync(join(out, sweeps[0], 'sweep.json'), 'utf8')) as LocalSweepJson;
  assert.equal(isLocalSweepJson(rec), true);
  assert.equal(rec.sweep_dir, join(out, sweeps[0]));
  assert.equal(rec.config, p);
  assert.equal(rec.name, 't');
  assert.equal(rec.pid, null, 'the sweep has ended');
  assert.deepEqual(
    rec.tasks.map((t) => [t.index, t.name, t.strategy, t.params, t.outcome]),
    [
      [0, 't-none', 'none', {}, undefined],
      // the strategy's own knob is named even though the grid does not vary it (the config's default, 0.5)
      [1, 't-outcome_conditional', 'outcome_conditional', { 'credit.think_discount': 0.5 }, undefined],
    ],
  );
  for (const t of rec.tasks) {
    assert.ok(t.run_dir && t.run_dir.startsWith(join(out, `${t.name}-`)), String(t.run_dir));
    assert.equal(JSON.parse(readFileSync(join(t.run_dir, 'run.json'), 'utf8')).status, 'completed');
  }
  // A second sweep in the same second gets a folder of its own (claimed, not tested with existsSync).
  mkdirSync(join(out, `${sweeps[0]}-2`));
  assert.equal(claimFolder(join(out, sweeps[0])), join(out, `${sweeps[0]}-3`));
});

test('probe: bad input is one clear message; a probe prints its accuracy JSON and writes its table', () => {
  const config = cfg('p.credit.yaml', base({ head: 'name: probe-cli\nseed: 1\nbackend: wasm\n' }));
  const trained = run('train', config);
  assert.equal(trained.code, 0, trained.err);
  const runDir = join(
    dir,
    'runs',
    readdirSync(join(dir, 'runs')).find((d) => /^probe-cli-\d{8}-\d{6}$/.test(d))!,
  );
  assertClean(run('probe', runDir), /probe needs --step N/);
  assertClean(run('probe', join(dir, 'nowhere'), '--step', '1'), /nowhere is not a run folder/);
  assertClean(run('probe', runDir, '--step', '1', '--positions', 'all'), /--positions: got "all"; expected every, segments:S/);
  assertClean(run('probe', runDir, '--step', '1', '--rollouts', '1'), /--rollouts/);
  assertClean(run('probe', runDir, '--step', '1', '--episode', '0,x'), /--episode: "x" is not an episode index/);
  assertClean(run('probe', runDir, '--step', '1', '--episode', '9'), /--episode: 9 not in step 1, whose episodes are 0–1/);
  const r = run('probe', runDir, '--step', '1', '--rollouts', '2', '--json');
  assert.equal(r.code, 0, r.err);
  const report = JSON.parse(r.out) as { complete: boolean; episodes: number[]; accuracy: Record<string, { spearman: { n: number } }> | null; table: string };
  assert.equal(report.complete, true);
  assert.deepEqual(report.episodes, [0, 1]);
  assert.ok(report.accuracy && 'entropy_mask' in report.accuracy && report.accuracy.none.spearman.n === 0, 'uniform credit ranks nothing');
  assert.ok(existsSync(report.table));
  assert.ok(existsSync(join(runDir, 'probes', 'step-000001.json')));
});
