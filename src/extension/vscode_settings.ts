// VS Code's side of the typed settings (settings.ts): the one place the extension calls getConfiguration.
// Read on each use, not cached, so a changed setting applies to the next run without a reload.
import * as vscode from 'vscode';
import type { Normalization } from './types';
import { parseSettings, SETTING_KEYS, type Settings } from './settings';

export const SETTINGS_SECTION = 'creditLens';

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  return parseSettings((key) => c.get(key));
}

export async function setHeatmapNormalization(n: Normalization): Promise<void> {
  await vscode.workspace.getConfiguration(SETTINGS_SECTION).update(SETTING_KEYS.heatmapNormalization, n, vscode.ConfigurationTarget.Global);
}

/** Fires when the setting `key` of `Settings` changes. */
export function onSettingChange(key: keyof Settings, listener: () => void): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration(`${SETTINGS_SECTION}.${SETTING_KEYS[key]}`)) listener();
  });
}

/**
 * The Python that `engine: trl` runs credit_lens in, for the engine's environment: creditLens.python, else the Python
 * extension's interpreter setting (python.defaultInterpreterPath), else none (the engine tries python3 and says what to
 * install when credit_lens is missing).
 */
export function pythonEnv(): Record<string, string> {
  const own = readSettings().python;
  const ext = vscode.workspace.getConfiguration('python').get<string>('defaultInterpreterPath')?.trim();
  const python = own || (ext && ext !== 'python' ? ext : '');
  return python ? { CREDIT_LENS_PYTHON: python } : {};
}
