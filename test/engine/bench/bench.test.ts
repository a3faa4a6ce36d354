// The bench's FLOP count: worked by hand for a tiny shape, and equal to bench/torch_ref.py's count of the
// same model (the GFLOP/s of both sides must divide the same number).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { REFERENCE, SMALL, trainStepFlops } from '../../../src/engine/bench/bench';

test('train-step FLOPs by hand: d 4, 2 heads, kv 4, ff 8, V 10, 1 layer, B 2 × T 3', () => {
  // Per token: 2·4·4 (q, o) + 2·4·4 (k, v) + 3·4·8 (MLP) + 2·3·4 (QKᵀ, PV over T = 3) = 32 + 32 + 96 + 24 = 184,
  // plus the LM head 4·10 = 40 → 224 multiply-adds; × B·T = 6 tokens → 1344; × 2 (FLOPs) × 3 (fwd + bwd) = 8064.
  const c = { ...REFERENCE, dModel: 4, nHeads: 2, nKvHeads: 2, dFf: 8, vocabSize: 10, nLayers: 1 };
  assert.equal(trainStepFlops(c, 2, 3), 8064);
  // The reference model [32, 64]: 2·(2·128² + 2·128·128 + 3·128·512 + 2·64·128) + 128·64 = 2·278,528 + 8,192 = 565,248
  // per token, × 2,048 tokens × 6.
  assert.equal(trainStepFlops(REFERENCE, 32, 64), 6 * 2048 * 565_248);
});

test('the same count as bench/torch_ref.py for both models', { skip: !existsSync('/usr/bin/python3') }, () => {
  const py = `import sys; sys.path.insert(0, 'bench'); import torch_ref as t; print(t.train_step_flops(t.CONFIG), t.train_step_flops(t.SMALL))`;
  const r = spawnSync('/usr/bin/python3', ['-c', py], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const [ref, small] = r.stdout.trim().split(/\s+/).map(Number);
  assert.equal(ref, trainStepFlops(REFERENCE, 32, 64));
  assert.equal(small, trainStepFlops(SMALL, 16, 128));
});

test('profile tables: kernels grouped by name, largest first, shares of the wall time, and the time outside kernels', async () => {
  const { aggregate, profileMarkdown } = await import('../../../src/engine/bench/profile');
  // 10 ms wall: BatchMatMul 3 + 2 ms (2 calls), Add 1 ms, a kernel whose time is a promise (0.5 ms), one that failed.
  const t = await aggregate('step', 10, [
    { name: 'BatchMatMul', kernelTimeMs: 3 },
    { name: 'Add', kernelTimeMs: 1 },
    { name: 'BatchMatMul', kernelTimeMs: 2 },
    { name: 'Exp', kernelTimeMs: Promise.resolve(0.5) },
    { name: 'Sum', kernelTimeMs: { error: 'no timer' } },
  ]);
  assert.deepEqual(
    t.rows.map((r) => [r.op, r.calls, r.ms, r.share]),
    [
      ['BatchMatMul', 2, 5, 0.5],
      ['Add', 1, 1, 0.1],
      ['Exp', 1, 0.5, 0.05],
      ['Sum', 1, 0, 0],
    ],
  );
  assert.equal(t.kernelMs, 6.5);
  const md = profileMarkdown(t, 2);
  assert.match(md, /\| BatchMatMul \| 2 \| 5\.00 \| 50\.0 \|/);
  assert.match(md, /\| 2 other ops \| 2 \| 0\.50 \| 5\.0 \|/);
  assert.match(md, /\| outside kernels .* \| \| 3\.50 \| 35\.0 \|/);
});

test("paired rounds: sides alternate which goes first, each round's ratio is its medians' ratio, the summary their median and range", async () => {
  const { benchRounds, summarize } = await import('../../../src/engine/bench/rounds');
  const { median } = await import('../../../src/engine/core/stats');
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  const order: string[] = [];
  let round = 0;
  // ours: [10, 12, 11] then [20, 22, 21] …; torch: [5, 5, 6] then [10, 11, 10] …: round ratios 11/5, 21/10, 31/15
  const ours = () => {
    order.push('ours');
    const k = ++round;
    return [10 * k, 10 * k + 2, 10 * k + 1];
  };
  let t = 0;
  const torch = async () => {
    order.push('torch');
    const k = ++t;
    return [5 * k, 5 * k + (k === 1 ? 0 : 1), 5 * k + (k === 1 ? 1 : 0)];
  };
  const r = await benchRounds(3, ours, torch, 0);
  assert.deepEqual(order, ['torch', 'ours', 'ours', 'torch', 'torch', 'ours']);
  assert.deepEqual(r.ratios, [11 / 5, 21 / 10, 31 / 15]);
  const s = summarize(r);
  assert.equal(s.ratio, 21 / 10);
  assert.deepEqual(s.ratio_range, [31 / 15, 11 / 5]);
  assert.equal(s.ours, 21); // median of all nine samples of ours
  assert.equal(s.rounds, 3);
});

const torchImportable = existsSync('/usr/bin/python3') && spawnSync('/usr/bin/python3', ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;

test(
  'bench/torch_ref.py --serve answers timing requests line by line, and a bad request with an error',
  { skip: !torchImportable && 'no torch under /usr/bin/python3' },
  async () => {
    const { TorchServer } = await import('../../../src/engine/bench/rounds');
    const started = await TorchServer.start();
    assert.ok(!('error' in started), 'error' in started ? started.error : '');
    const { server, threads, sgemm_gflops } = started as Exclude<typeof started, { error: string }>;
    try {
      assert.ok(threads >= 1 && sgemm_gflops > 0);
      const ms = await server.train('reference', 2);
      assert.equal(ms.length, 2);
      assert.ok(
        ms.every((x) => x > 0 && x < 60_000),
        String(ms),
      );
      const rate = await server.rollout('reference', 1);
      assert.equal(rate.length, 1);
      assert.ok(rate[0] > 0);
      await assert.rejects(server.ask({ op: 'train', model: 'huge' }), /torch_ref\.py: unknown request/);
      // still serving after the bad request
      assert.equal((await server.train('reference', 1)).length, 1);
    } finally {
      server.close();
    }
  },
);

test("the bench's TRL row trains TRL on the example's model shape and batch (its parameter count is the engine's)", { timeout: 300_000 }, async () => {
  const { trlStepBench } = await import('../../../src/engine/bench/trl');
  const { loadConfig } = await import('../../../src/engine/config/config');
  const { paramCount } = await import('../../../src/engine/model/memory');
  const { scratchModelConfig } = await import('../../../src/engine/session/session');
  const { makeTask } = await import('../../../src/engine/tasks');
  const { CharTokenizer } = await import('../../../src/engine/model/tokenizer');
  const path = resolve(__dirname, '../../../examples/countdown-tiny.credit.yaml');
  const { config } = loadConfig(path, ['grpo.prompts_per_step=2', 'grpo.group_size=4', 'grpo.gradient_accumulation_steps=1', 'grpo.max_new_tokens=8']);
  // the engine's scratch model of the example: its character tokenizer's vocabulary
  const vocab = CharTokenizer.fromAlphabet(makeTask(config.task, 1).alphabet()).vocabSize;
  const r = trlStepBench(config, path, true, vocab, resolve(__dirname, '../../../dist/engine/cli.js'));
  assert.ok(!('error' in r), 'error' in r ? r.error : '');
  assert.equal(r.completions, 8);
  assert.equal(r.steps, 1);
  assert.ok(r.trl_step_s > 0);
  assert.equal(r.parameters, paramCount(scratchModelConfig(config, vocab)));
});
