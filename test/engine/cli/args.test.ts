// The one command-line parser (src/engine/cli/args.ts) every credit-lens command uses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { flag, intFlag, numFlag, parseArgs } from '../../../src/engine/cli/args';

const spec = { valued: ['set', 'out', 'from-step', 'lr'], boolean: ['json', 'rpc'] };

test('positional arguments, --k v and --k=v, repeated flags in order, booleans', () => {
  const a = parseArgs(['run.yaml', '--set', 'a=1', '--set=b=2', '--json', '--out', 'x.md'], spec, 'usage');
  assert.deepEqual(a.positional, ['run.yaml']);
  assert.deepEqual(a.flags.get('set'), ['a=1', 'b=2'], 'the value keeps its own "="');
  assert.equal(flag(a, 'out'), 'x.md');
  assert.ok(a.flags.has('json'));
  assert.equal(a.flags.has('rpc'), false);
});

test('an unknown flag names itself, suggests the closest, and prints the usage; a missing value is named', () => {
  assert.throws(() => parseArgs(['--jsn'], spec, 'USAGE TEXT'), /unknown option --jsn; did you mean --json\?\nUSAGE TEXT/);
  assert.throws(
    () => parseArgs(['--frobnicate'], spec, 'u'),
    (e: Error) => !/did you mean/.test(e.message) && /unknown option --frobnicate/.test(e.message),
  );
  assert.throws(() => parseArgs(['--out'], spec, 'u'), /--out needs a value/);
});

test('numbers are checked where they are read, with the flag, the value and what is allowed', () => {
  const a = parseArgs(['--from-step', '3', '--lr', '1e-3'], spec, 'u');
  assert.equal(intFlag(a, 'from-step', 0), 3);
  assert.equal(
    numFlag(a, 'lr', (x) => x > 0, 'a positive number'),
    0.001,
  );
  assert.equal(intFlag(a, 'out'), undefined);
  assert.throws(() => intFlag(parseArgs(['--from-step', '2.5'], spec, 'u'), 'from-step', 0), /--from-step: got "2\.5"; expected an integer ≥ 0/);
  assert.throws(() => intFlag(parseArgs(['--from-step', '-1'], spec, 'u'), 'from-step', 0), /expected an integer ≥ 0/);
  assert.throws(() => numFlag(parseArgs(['--lr', 'fast'], spec, 'u'), 'lr', (x) => x > 0, 'a positive number'), /--lr: got "fast"; expected a positive number/);
});

test('exit status: 0 when every run completed, 1 when one failed, 130 when one was stopped (as probe and import exit)', async () => {
  const { exitStatus } = await import('../../../src/engine/cli/run_commands');
  assert.equal(exitStatus(['completed']), 0);
  assert.equal(exitStatus(['completed', 'stopped']), 130);
  assert.equal(exitStatus(['stopped', 'failed']), 1);
  // a sweep stopped as one run ended: that run completed, the rest were skipped by the stop
  assert.equal(exitStatus(['completed', 'skipped']), 130);
  assert.equal(exitStatus([]), 0);
});
