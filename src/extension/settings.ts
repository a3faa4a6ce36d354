// The `creditLens.*` settings as one typed value (package.json `contributes.configuration` declares them).
// Pure: `vscode_settings.ts` hands it VS Code's getter, the unit tests a plain object, so a wrong-typed value in a
// user's settings.json falls back to the declared default here, in one place, instead of at each reader.

import type { Normalization } from './types';

export interface Settings {
  /** Empty: `node` on PATH, else VS Code's own runtime (design.md#protocol). */
  nodePath: string;
  /** the Python of engine: trl runs (credit_lens installed); empty: the Python extension's, else python3 */
  python: string;
  maxConcurrentRuns: number;
  stopGraceSeconds: number;
  runDirectories: string[];
  heatmapNormalization: Normalization;
  /** Where Run Sweep trains when the config's sweep.executor does not say. */
  executor: 'local' | 'slurm';
  /** Probe This Episode… samples on this SGLang / vLLM server (`probe --server`); empty: in the engine. */
  probeServer: string;
}

/** The defaults package.json declares; a test checks the two agree. */
export const SETTING_DEFAULTS: Readonly<Settings> = Object.freeze({
  nodePath: '',
  python: '',
  maxConcurrentRuns: 1,
  stopGraceSeconds: 30,
  runDirectories: [],
  heatmapNormalization: 'episode',
  executor: 'local',
  probeServer: '',
});

/** The settings' keys under `creditLens.`, as package.json spells them. */
export const SETTING_KEYS: Readonly<Record<keyof Settings, string>> = Object.freeze({
  nodePath: 'nodePath',
  python: 'python',
  maxConcurrentRuns: 'maxConcurrentRuns',
  stopGraceSeconds: 'stopGraceSeconds',
  runDirectories: 'runDirectories',
  heatmapNormalization: 'heatmap.normalization',
  executor: 'executor',
  probeServer: 'probe.server',
});

/** `get(key)` returns the raw value under `creditLens.<key>` (undefined when unset). */
export function parseSettings(get: (key: string) => unknown): Settings {
  const d = SETTING_DEFAULTS;
  const nodePath = get(SETTING_KEYS.nodePath);
  const python = get(SETTING_KEYS.python);
  const max = get(SETTING_KEYS.maxConcurrentRuns);
  const grace = get(SETTING_KEYS.stopGraceSeconds);
  const dirs = get(SETTING_KEYS.runDirectories);
  const norm = get(SETTING_KEYS.heatmapNormalization);
  const executor = get(SETTING_KEYS.executor);
  const probeServer = get(SETTING_KEYS.probeServer);
  return {
    nodePath: typeof nodePath === 'string' ? nodePath.trim() : d.nodePath,
    python: typeof python === 'string' ? python.trim() : d.python,
    // package.json's `minimum: 1` is advice to the settings UI only; settings.json can still hold 0.
    maxConcurrentRuns: typeof max === 'number' && Number.isFinite(max) ? Math.max(1, Math.floor(max)) : d.maxConcurrentRuns,
    stopGraceSeconds: typeof grace === 'number' && Number.isFinite(grace) && grace > 0 ? grace : d.stopGraceSeconds,
    runDirectories: Array.isArray(dirs) ? dirs.filter((x): x is string => typeof x === 'string' && x.trim() !== '') : [...d.runDirectories],
    heatmapNormalization: norm === 'step' || norm === 'episode' ? norm : d.heatmapNormalization,
    executor: executor === 'slurm' || executor === 'local' ? executor : d.executor,
    // only an http(s) URL: anything else would reach the engine as a flag value it refuses
    probeServer: typeof probeServer === 'string' && /^https?:\/\/\S+$/.test(probeServer.trim()) ? probeServer.trim() : d.probeServer,
  };
}
