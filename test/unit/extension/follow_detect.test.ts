// Follow a Training Run…'s detection, on folders laid out as each trainer writes them (the engine's readers' paths).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { detectFollowFormat, findTrainerFolders } from '../../../src/extension/follow_detect';

function folder(files: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-detect-'));
  for (const f of files) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), '');
  }
  return dir;
}

test("a folder's trainer from the paths it writes; an empty or unknown folder is not guessed", () => {
  assert.equal(detectFollowFormat(folder(['token_exports/step_1/rank_0.jsonl'])), 'prime');
  assert.equal(detectFollowFormat(folder(['rollouts/step_3/train/all/traces.jsonl'])), 'prime');
  assert.equal(detectFollowFormat(folder(['monitors/file/traces/stream.jsonl'])), 'prime');
  assert.equal(detectFollowFormat(folder(['step_1.jsonl', 'step_2.jsonl'])), 'verl_shard');
  assert.equal(detectFollowFormat(folder(['1.jsonl', '2.jsonl'])), 'verl');
  assert.equal(detectFollowFormat(folder(['completions_00010.parquet'])), 'trl');
  assert.equal(detectFollowFormat(folder([])), null);
  assert.equal(detectFollowFormat(folder(['notes.txt'])), null);
  assert.equal(detectFollowFormat(join(tmpdir(), 'cl-no-such-folder')), null);
});

test("the workspace's trainer folders, shallowest first; Credit Lens' own runs, hidden and tool folders not listed, a found folder not entered", () => {
  const root = folder([
    'outputs/prime-live/monitors/file/traces/stream.jsonl',
    'outputs/prime-live/rollouts/step_1/train/all/traces.jsonl',
    'verl_dump/1.jsonl',
    'deep/a/b/c/d/1.jsonl',
    // a Credit Lens run (an imported one too) is in no trainer's layout; a trainer writing under runs/ is found
    'runs/import-x-20260101-000000/run.json',
    'runs/import-x-20260101-000000/metrics.jsonl',
    'runs/import-x-20260101-000000/episodes/step-000001.arrow',
    'runs/trl-out/completions/completions_00001.parquet',
    '.cache/1.jsonl',
    'node_modules/pkg/1.jsonl',
    'notes/readme.txt',
  ]);
  const found = findTrainerFolders(root).map((f) => [f.dir.slice(root.length + 1), f.format]);
  assert.deepEqual(found, [
    ['verl_dump', 'verl'],
    ['outputs/prime-live', 'prime'],
    [join('runs', 'trl-out'), 'trl'],
  ]);
  assert.deepEqual(findTrainerFolders(root, { maxFolders: 2 }).length, 0, 'the walk stops at its bound');
  assert.deepEqual(findTrainerFolders(join(root, 'no-such')), []);
});
