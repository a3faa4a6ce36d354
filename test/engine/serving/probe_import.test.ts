// An imported run probed through a server: a veRL dump of prompts from the user's own JSONL task, imported with the
// policy's tokenizer and the task's config, then probed through `credit-lens serve` of the Qwen-shaped HF folder that
// "sampled" it. The probe finds each episode's example by its prompt (as the import templated it), rewards continuations
// with the config's reward module, and scores the run's own Â; without a server, with a config of another task, or a
// run imported without a tokenizer, it refuses and says why.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importRollouts } from '../../../src/engine/import/import';
import { probeRun } from '../../../src/engine/probe/probe';
import { readEpisodeTable, readProbeTable } from '../../../src/engine/rundir/arrow_tables';
import { readRunInfo } from '../../../src/engine/rundir/rundir';
import { isUserError } from '../../../src/engine/core/errors';
import { serve } from '../../../src/engine/serving/serve';
import { qwenBase, randomWeights, writeCheckpoint } from '../model/hf_reference';

const quiet = { log: () => {} };

test('an imported veRL run probed through a server: examples found by prompt, rewards from the config’s task', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-probe-import-'));
  const hf = join(dir, 'model');
  const cfg = { ...qwenBase, num_hidden_layers: 1 };
  writeCheckpoint(hf, cfg, randomWeights(cfg, 3), 'F32', false);
  // the user's task: prompts with answers, rewarded by the share of "7"s
  const prompts = ['Say seven', 'Count to 7', 'Seven twice', 'Lucky number'];
  writeFileSync(join(dir, 'data.jsonl'), prompts.map((p) => JSON.stringify({ prompt: p, answer: '7' })).join('\n') + '\n');
  writeFileSync(join(dir, 'sevens.js'), 'module.exports.reward = (c) => { const s = [...c]; return s.filter((x) => x === "7").length / (s.length || 1); };\n');
  const config = join(dir, 'task.credit.yaml');
  writeFileSync(
    config,
    `name: imported\noutput_dir: runs\ntask: { name: jsonl, path: data.jsonl, reward_module: sevens.js, train_size: 2, eval_size: 1, val_size: 1 }\ngrpo: { max_new_tokens: 6 }\n`,
  );
  const src = join(dir, 'rollouts');
  mkdirSync(src);
  writeFileSync(
    join(src, '1.jsonl'),
    prompts
      .flatMap((p, i) => [
        { input: p, output: ' 7 7', score: 1, step: 1 },
        { input: p, output: ` ${i}`, score: 0, step: 1 },
      ])
      .map((r) => JSON.stringify(r))
      .join('\n') + '\n',
  );
  const s = await serve({ spec: hf, port: 0, backend: 'cpu' });
  try {
    const imp = await importRollouts({ source: src, model: hf, configPath: config, out: join(dir, 'runs'), sets: ['backend=cpu'], ...quiet });
    const info = readRunInfo(imp.runDir)!;
    assert.equal(info.imported!.tokenizer, hf);
    assert.equal(info.imported!.chat_template, 'auto');

    await assert.rejects(
      probeRun({ runDir: imp.runDir, step: 1, rollouts: 2 }),
      (e: unknown) => isUserError(e) && /imported run/.test(e.message) && /--server URL/.test(e.hint ?? ''),
    );
    const r = await probeRun({ runDir: imp.runDir, step: 1, rollouts: 4, episodes: 8, server: { url: s.url } });
    assert.equal(r.complete, true);
    assert.equal(r.sampler?.api, 'sglang');
    assert.equal(r.policy_sha256, null);
    const t = readProbeTable(join(imp.runDir, 'probes', 'step-000001.arrow'));
    const eps = readEpisodeTable(join(imp.runDir, 'episodes', 'step-000001.arrow'));
    for (const e of r.episodes) {
      const rows = [...t.episode.keys()].filter((i) => t.episode[i] === e);
      const last = rows[rows.length - 1];
      assert.equal(t.value[last], eps.reward[e], 'V_n is the imported reward');
      for (const i of rows.slice(0, -1)) assert.ok(t.value[i] >= 0 && t.value[i] <= 1 && t.rollouts[i] === 4, 'continuations rewarded by the share of 7s');
    }
    // only what the token table holds is scored: the policy is the server's
    assert.deepEqual(Object.keys(r.accuracy ?? {}), ['none']);
    assert.ok(r.warnings?.some((w) => /the others are scored under the step's policy/.test(w)));

    // a config of another task cannot reward these prompts
    const other = await importRollouts({ source: src, model: hf, out: join(dir, 'runs'), name: 'other', sets: ['backend=cpu'], ...quiet });
    await assert.rejects(
      probeRun({ runDir: other.runDir, step: 1, rollouts: 2, server: { url: s.url } }),
      (e: unknown) => isUserError(e) && /is not a prompt of the task in the run's config.yaml \(task.name countdown\)/.test(e.message),
    );
  } finally {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
