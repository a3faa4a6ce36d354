// What adding a metric sink takes, shown by doing it: on a copy of src/, the test adds a sink that records every
// metrics row to a file, in exactly two places (its file in src/engine/tracking/sinks/, one line in sinks/catalog.ts),
// builds the engine CLI from that copy and trains through it. The config knows the sink's setting (schema, error
// naming the key), the sink gets every row metrics.jsonl gets, in order, and the run's end with its status.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addSink, buildCli, copySources, writeToyConfig } from '../source_copy';

const SINK_FILE = `// Toy: every metrics row, and the run's end, appended to a file as JSON lines.
import { appendFileSync } from 'node:fs';
import { z } from 'zod';
import type { MetricSink, RunEndStatus, SinkSpec } from '../sink';

export const recorderSink = {
  key: 'recorder',
  schema: z.string().regex(/^\\//, { message: 'an absolute path' }).nullable().describe('Append every metrics row to this file (a test toy).').default(null),
  open: (file: string | null): MetricSink | null =>
    file
      ? {
          metrics: (row) => appendFileSync(file, JSON.stringify(row) + '\\n'),
          end: async (status: RunEndStatus) => appendFileSync(file, JSON.stringify({ end: status }) + '\\n'),
          close: () => {},
        }
      : null,
} as const satisfies SinkSpec;
`;

test('a new metric sink is one file and one catalog line; it gets every row of a run trained through the CLI', { timeout: 180_000 }, async () => {
  const dir = copySources('cl-toy-sink-');
  addSink(dir, { file: 'recorder.ts', source: SINK_FILE, exportName: 'recorderSink' });
  const cli = await buildCli(dir);
  const rowsFile = join(dir, 'recorded.jsonl');
  writeToyConfig(dir, {
    grpo: '{ steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 16, eval_every: 2, checkpoint_every: 2 }',
    extra: `logging: { tensorboard: false, recorder: ${JSON.stringify(rowsFile)} }`,
  });
  // The config's logging section comes from the sink list: the schema has the key, a bad value is refused by name.
  const schema = JSON.parse(cli('schema').stdout);
  assert.ok(schema.properties.logging.properties.recorder, "the JSON Schema has the sink's setting");
  const bad = cli('train', 'toy.credit.yaml', '--set', 'logging.recorder=relative.jsonl');
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /logging\.recorder/);

  const r = cli('train', 'toy.credit.yaml');
  assert.equal(r.status, 0, r.stderr);
  const runDir = join(dir, 'runs', readdirSync(join(dir, 'runs'))[0]);
  const lines = (f: string) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const recorded = lines(rowsFile);
  const metrics = lines(join(runDir, 'metrics.jsonl'));
  // SFT 2 + the eval before GRPO + GRPO 2: the sink saw each row metrics.jsonl holds, in order, then the end
  assert.equal(metrics.length, 5);
  assert.deepEqual(recorded.slice(0, -1), metrics);
  assert.deepEqual(recorded.at(-1), { end: 'FINISHED' });
});
