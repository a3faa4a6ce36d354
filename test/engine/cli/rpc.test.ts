// The engine ↔ extension channel: JSON-RPC on file descriptor 3, a pipe nothing else writes to. A reward
// module that prints to stdout — even text shaped like a JSON-RPC frame — must not cost a single message, and the
// run must be reported completed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import * as rpc from 'vscode-jsonrpc/node';

const CLI = resolve(__dirname, '../../../dist/engine/cli.js');

test('a reward module printing to stdout (even a fake frame) costs no RPC message; the run is reported completed', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-rpc-'));
  writeFileSync(join(dir, 'data.jsonl'), Array.from({ length: 24 }, (_, i) => JSON.stringify({ prompt: `q${i}:`, answer: '7' })).join('\n'));
  writeFileSync(
    join(dir, 'noisy.js'),
    `module.exports.reward = (c) => {
  console.log('reward module says hello');
  process.stdout.write('Content-Length: 9999\\r\\n\\r\\n{"jsonrpc":');
  return c.includes('7') ? 1 : 0;
};
`,
  );
  writeFileSync(
    join(dir, 'c.credit.yaml'),
    `name: noisy
seed: 2
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 32, max_seq_len: 32 }
task: { name: jsonl, path: data.jsonl, reward_module: noisy.js, train_size: 16, eval_size: 4 }
grpo: { steps: 3, prompts_per_step: 1, group_size: 2, max_new_tokens: 4, eval_every: 3 }
`,
  );
  const child = spawn(process.execPath, [CLI, 'train', 'c.credit.yaml', '--rpc'], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
  const channel = child.stdio[3] as Duplex;
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(channel), new rpc.StreamMessageWriter(channel));
  const progress: number[] = [];
  let finished: { status: string } | null = null;
  let errors = 0;
  conn.onNotification('run/progress', (p: { phase: string; step: number }) => {
    if (p.phase === 'grpo') progress.push(p.step);
  });
  conn.onNotification('run/finished', (p: { status: string }) => {
    finished = p;
  });
  conn.onError(() => {
    errors++;
  });
  conn.listen();
  let stdout = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(code, 0);
  assert.deepEqual(finished, { status: 'completed', runDir: (finished as unknown as { runDir: string } | null)?.runDir });
  assert.deepEqual(progress, [1, 2, 3], 'every GRPO step reported');
  assert.equal(errors, 0);
  assert.match(stdout, /reward module says hello/, 'the noise went to stdout, where the extension logs it');
  conn.dispose();
});
