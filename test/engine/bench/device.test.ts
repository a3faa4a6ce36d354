// bench/device/run.sh, the one command for a lent GPU machine, kept from rotting between loans: here it runs in its
// local form on Mesa's lavapipe with torch on the CPU (the stages a GPU machine runs, quick), and in its GPU form from
// the carry folder that bench/device/pack.sh builds, which must unpack its own Node and engine and refuse lavapipe as
// a GPU. Both need `npm run build` (test:unit builds first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');
const run = (args: string[], out: string) =>
  spawnSync('bash', ['bench/device/run.sh', ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, OUT: out }, timeout: 600_000 });
const torchHere = spawnSync('/usr/bin/python3', ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;

test('run.sh --local --quick: every stage measures on lavapipe against torch, and the report is one JSON object', { timeout: 600_000 }, (t) => {
  const out = mkdtempSync(join(tmpdir(), 'cl-device-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const r = run(['--local', '--quick'], out);
  assert.equal(r.status, 0, r.stderr + r.stdout);
  const report = JSON.parse(readFileSync(join(out, 'device.json'), 'utf8'));
  assert.deepEqual(JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))), report, 'stdout ends with the same report');
  assert.equal(report.mode, 'local');
  assert.ok(report.adapter && !report.adapter.error, `adapter: ${JSON.stringify(report.adapter)}`);
  assert.equal(report.adapter.software, true, 'here the adapter is lavapipe');
  const train = report.stages.reference_train_step;
  assert.ok(train.webgpu > 0 && !train.error, JSON.stringify(train));
  if (torchHere) assert.ok(train.torch > 0 && train.ratio > 0, JSON.stringify(train));
  const rollout = report.stages.reference_rollout;
  assert.ok(rollout.webgpu > 0 && !rollout.error, JSON.stringify(rollout));
  const step = report.stages.example_grpo_step;
  assert.ok(step.kernels > 0 && step.seconds > 0 && step.uploads.count > 0, JSON.stringify(step));
  // real launches counted at dispatchWorkgroups: fewer than the kernels run (views and CPU-forwarded ops launch none),
  // in fewer submits still, and by kernel, the histogram summing to the total
  assert.ok(step.dispatches > 0 && step.dispatches < step.kernels && step.submits > 0 && step.submits < step.dispatches, JSON.stringify(step).slice(0, 400));
  const sum = (h: Record<string, { dispatches: number }>) => Object.values(h).reduce((a, v) => a + v.dispatches, 0);
  assert.equal(sum(step.by_kernel), step.dispatches);
  assert.ok(step.by_kernel.BatchMatMul?.dispatches > 0, 'the products are among the launches');
  // the dispatch work's targets (the counts are the same on any adapter): 8,918 dispatches and 73 downloads before it
  assert.ok(
    step.dispatches <= step.targets.dispatches && step.downloads.count <= step.targets.downloads && step.meets_targets,
    JSON.stringify(step).slice(0, 300),
  );
  assert.deepEqual(step.targets, { dispatches: 3000, downloads: 10 });
  const d = report.stages.reference_dispatch;
  assert.ok(d.train_step.dispatches > 0 && sum(d.train_step.by_kernel) === d.train_step.dispatches, JSON.stringify(d.train_step).slice(0, 300));
  assert.ok(d.decode_step.dispatches > 0 && d.decode_step.dispatches < d.train_step.dispatches, JSON.stringify(d.decode_step).slice(0, 300));
  // the backend's settings on the same step: a larger submit batch submits less and launches the same; with nothing
  // forwarded to the CPU every kernel launches on the device
  const st = d.train_step_settings;
  assert.equal(st.submit_batch_64.dispatches, st.default.dispatches, JSON.stringify(st));
  assert.ok(st.submit_batch_64.submits < st.default.submits, JSON.stringify(st));
  assert.ok(st.cpu_forward_off.dispatches >= st.default.dispatches, JSON.stringify(st));
  // Dawn's toggles, each in a process of its own: the same launches, timed (what they are worth is a GPU's question)
  const tg = report.stages.dawn_toggles;
  for (const k of ['default', 'skip_validation,disable_robustness']) {
    assert.ok(tg[k]?.train_step?.ms > 0 && tg[k]?.rollout?.ms > 0, JSON.stringify(tg));
    assert.equal(tg[k].train_step.dispatches, tg.default.train_step.dispatches, 'toggles change no launch');
  }
  assert.equal(tg['skip_validation,disable_robustness'].toggles, 'skip_validation,disable_robustness');
  // what the adapter offers for wider types (lavapipe: shader-f16 and subgroups)
  assert.ok(report.adapter.features.includes('shader-f16'), JSON.stringify(report.adapter.features));
  // behind Dawn's unsafe APIs lavapipe offers more, but no subgroup matrices: the report says so, for a lent card too
  assert.ok(Array.isArray(report.adapter.unsafe_apis?.features) && report.adapter.unsafe_apis.features.length > 0, JSON.stringify(report.adapter.unsafe_apis));
  assert.ok(!report.adapter.unsafe_apis.features.includes('shader-f16'), 'only what the safe adapter lacks');
  assert.deepEqual(report.adapter.unsafe_apis.subgroup_matrix_configs, []);
  // the reference model's decoding with its projections and embedding in bfloat16 (model.torch_dtype): half the bytes,
  // and no more launches than in float32
  const h = d.half_weights;
  assert.equal(h.format, 'bfloat16');
  assert.equal(h.weights, 9, 'two layers × four projections, and the tied embedding');
  assert.ok(h.bytes_saved > 0 && h.decode_step.dispatches > 0 && h.decode_step.dispatches <= d.decode_step.dispatches, JSON.stringify(h).slice(0, 400));
  assert.ok(h.greedy_tokens_per_s.float32 > 0 && h.greedy_tokens_per_s.bfloat16 > 0, JSON.stringify(h.greedy_tokens_per_s));
  // TRL's step of the same example on torch here (credit_lens from python/, nothing installed for it on a GPU machine)
  const trl = report.stages.trl_example_step;
  assert.ok(trl.trl_step_s > 0 && trl.parameters > 0 && trl.engine_webgpu_over_trl > 0 && trl.device === 'cpu', JSON.stringify(trl));
  assert.ok(!('qwen05b' in report.stages), 'quick leaves the 0.5B stage out');
  assert.ok(report.seconds.total > 0);
});

test('pack.sh builds a carry within the limit and says its size; run.sh from it refuses a software adapter as a GPU', { timeout: 600_000 }, (t) => {
  const p = spawnSync('bash', ['bench/device/pack.sh'], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
  assert.equal(p.status, 0, p.stderr + p.stdout);
  assert.match(p.stdout, /pack: bench\/device\/carry \d+ MiB \+ working tree \d+ MiB = (\d+) MiB \(limit 64 MiB\)/);
  for (const f of ['node.xz', 'engine.tar.xz', 'tokenizer.tar.xz']) assert.ok(existsSync(join(ROOT, 'bench/device/carry', f)), f);
  const out = mkdtempSync(join(tmpdir(), 'cl-device-gpu-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  // The GPU form on this machine: its own Node and engine from the carry, Dawn's adapter is lavapipe, so no stage
  // measures and the script says why, with exit status 3.
  // the carry's libraries go into the run's own folder, never over the machine's: every file they hold that this
  // machine also has keeps its inode change time (dpkg -x over / replaced them, as root, behind dpkg's back)
  const debs = readdirSync(join(ROOT, 'bench/device/carry')).filter((f) => f.endsWith('.deb'));
  assert.ok(debs.length >= 2, debs.join(', '));
  const shipped = debs.flatMap((d) =>
    spawnSync('dpkg-deb', ['-c', join(ROOT, 'bench/device/carry', d)], { encoding: 'utf8' })
      .stdout.split('\n')
      .map((l) =>
        l
          .split(/\s+/)
          .slice(5)
          .join(' ')
          .replace(/^\./, '')
          .replace(/ -> .*$/, ''),
      )
      .filter((f) => f && !f.endsWith('/')),
  );
  assert.ok(
    shipped.some((f) => /libvulkan\.so/.test(f)),
    shipped.join(', '),
  );
  const ctimes = () => shipped.map((f) => [f, lstatSync(f, { throwIfNoEntry: false })?.ctimeMs ?? null]);
  const before = ctimes();
  const r = run(['--quick'], out);
  assert.deepEqual(ctimes(), before, 'no file of the machine was replaced');
  assert.match(r.stdout, /libs: \d+ packages unpacked into \S+\/vulkan \(LD_LIBRARY_PATH\), nothing outside it/);
  assert.equal(r.status, 3, r.stderr + r.stdout);
  assert.match(r.stdout, /node: v\d+/);
  const report = JSON.parse(readFileSync(join(out, 'device.json'), 'utf8'));
  assert.equal(report.mode, 'device');
  assert.match(report.adapter.error, /software adapter, not a GPU/);
  assert.match(report.stages.reference_train_step.error, /no webgpu backend/);
});
