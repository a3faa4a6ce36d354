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
 * The Python that `engine: trl` runs credit_lens in, for the engine's environment: creditLens.python, else the
 * interpreter selected in the Python extension (its environments API, where it is installed and active), else its
 * python.defaultInterpreterPath setting, else none (the engine tries python3 and says what to install when credit_lens
 * is missing).
 */
export function pythonEnv(): Record<string, string> {
  const own = readSettings().python;
  const python = own || selectedInterpreter() || defaultInterpreter();
  return python ? { CREDIT_LENS_PYTHON: python } : {};
}

interface PythonExtensionApi {
  environments?: { getActiveEnvironmentPath?(resource?: vscode.Uri): { path?: string } | undefined };
}

function selectedInterpreter(): string {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
  if (!ext?.isActive) return '';
  try {
    return ext.exports?.environments?.getActiveEnvironmentPath?.(vscode.workspace.workspaceFolders?.[0]?.uri)?.path?.trim() ?? '';
  } catch {
    return '';
  }
}

function defaultInterpreter(): string {
  const v = vscode.workspace.getConfiguration('python').get<string>('defaultInterpreterPath')?.trim();
  return v && v !== 'python' ? v : '';
}
