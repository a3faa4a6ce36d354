import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parseSettings, SETTING_DEFAULTS, SETTING_KEYS, type Settings } from '../../../src/extension/settings';

const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { contributes: { configuration: { properties: Record<string, { default: unknown }> } } };

test('every typed setting is declared in package.json with the same default, and nothing declared is left out', () => {
  const declared = manifest.contributes.configuration.properties;
  for (const [field, key] of Object.entries(SETTING_KEYS) as [keyof Settings, string][]) {
    assert.ok(declared[`creditLens.${key}`], `creditLens.${key} is not in package.json`);
    assert.deepEqual(declared[`creditLens.${key}`].default, SETTING_DEFAULTS[field], `default of creditLens.${key}`);
  }
  assert.deepEqual(
    Object.keys(declared).sort(),
    Object.values(SETTING_KEYS)
      .map((k) => `creditLens.${k}`)
      .sort(),
  );
});

test('unset settings read as the declared defaults', () => {
  assert.deepEqual(
    parseSettings(() => undefined),
    SETTING_DEFAULTS,
  );
});

test('values of the right type pass through', () => {
  const raw: Record<string, unknown> = {
    nodePath: ' /usr/bin/node ',
    python: ' /opt/venv/bin/python ',
    maxConcurrentRuns: 3,
    stopGraceSeconds: 5,
    runDirectories: ['a', '/b'],
    'heatmap.normalization': 'step',
    executor: 'slurm',
    'probe.server': ' http://gpu-box:30000 ',
  };
  assert.deepEqual(
    parseSettings((k) => raw[k]),
    {
      nodePath: '/usr/bin/node',
      python: '/opt/venv/bin/python',
      maxConcurrentRuns: 3,
      stopGraceSeconds: 5,
      runDirectories: ['a', '/b'],
      heatmapNormalization: 'step',
      executor: 'slurm',
      probeServer: 'http://gpu-box:30000',
    },
  );
});

test('hand-edited settings.json values of the wrong type or range fall back to something usable', () => {
  const raw: Record<string, unknown> = {
    nodePath: 42,
    python: 3,
    maxConcurrentRuns: 0,
    stopGraceSeconds: -1,
    runDirectories: ['ok', 7, ''],
    'heatmap.normalization': 'global',
    executor: 'pbs',
    'probe.server': 'gpu-box:30000 --replace',
  };
  // maxConcurrentRuns 0 would never start a run: it is raised to package.json's minimum of 1.
  assert.deepEqual(
    parseSettings((k) => raw[k]),
    {
      nodePath: '',
      python: '',
      maxConcurrentRuns: 1,
      stopGraceSeconds: 30,
      runDirectories: ['ok'],
      heatmapNormalization: 'episode',
      executor: 'local',
      probeServer: '',
    },
  );
  assert.equal(parseSettings((k) => (k === 'maxConcurrentRuns' ? 2.7 : undefined)).maxConcurrentRuns, 2);
});
