import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { chooseNode, findOnPath } from '../../../src/extension/node_runtime';

const posix = process.platform !== 'win32';

test('findOnPath returns the first executable in PATH order and skips non-executables and folders', { skip: !posix }, () => {
  const root = mkdtempSync(join(tmpdir(), 'cl-node-'));
  const [a, b, c] = ['a', 'b', 'c'].map((d) => join(root, d));
  for (const d of [a, b, c]) mkdirSync(d);
  writeFileSync(join(a, 'node'), ''); // not executable
  mkdirSync(join(b, 'node')); // a folder
  writeFileSync(join(c, 'node'), '#!/bin/sh\n');
  chmodSync(join(c, 'node'), 0o755);
  assert.equal(findOnPath('node', [a, b, c].join(delimiter)), join(c, 'node'));
  assert.equal(findOnPath('node', [a, b].join(delimiter)), undefined);
});

test('chooseNode: the setting wins, a wrong setting is an error that names it', { skip: !posix }, () => {
  assert.deepEqual(chooseNode(process.execPath), { command: process.execPath, env: {}, reason: 'creditLens.nodePath' });
  assert.throws(() => chooseNode('/no/such/node'), /creditLens\.nodePath/);
});

test("chooseNode without a setting: node on PATH, else VS Code's runtime as Node", { skip: !posix }, () => {
  const saved = process.env.PATH;
  try {
    const onPath = chooseNode('');
    assert.equal(onPath.reason, '`node` on PATH');
    process.env.PATH = mkdtempSync(join(tmpdir(), 'cl-empty-'));
    const fallback = chooseNode(undefined);
    assert.equal(fallback.command, process.execPath);
    assert.deepEqual(fallback.env, { ELECTRON_RUN_AS_NODE: '1' });
  } finally {
    process.env.PATH = saved;
  }
});
