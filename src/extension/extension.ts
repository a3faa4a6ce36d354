// Entry point: builds the Ctx, registers providers and commands, and on shutdown lets every engine
// checkpoint before the extension host exits.
import * as vscode from 'vscode';
import { registerCommands } from './commands';
import { stopFollows } from './import';
import { ConfigCodeLensProvider } from './config_lens';
import { registerConfigAssist } from './config_assist';
import { Ctx } from './ctx';
import { registerPanels } from './panels/index';
import { registerHeatmap } from './heatmap/index';

let ctx: Ctx | undefined;

export function activate(extCtx: vscode.ExtensionContext): void {
  ctx = new Ctx(extCtx);
  const c = ctx;
  registerCommands(c);
  registerPanels(c);
  registerHeatmap(c);
  c.pushExtCleanup(
    vscode.languages.registerCodeLensProvider({ scheme: 'file', pattern: '**/*.credit.yaml' }, c.pushExtCleanup(new ConfigCodeLensProvider(c.runs))),
  );
  registerConfigAssist((d) => c.pushExtCleanup(d));
  c.pushExtCleanup(vscode.workspace.onDidGrantWorkspaceTrust(() => c.tree.refresh()));
  void vscode.commands.executeCommand('setContext', 'creditLens.hasActiveRuns', false);
  c.log.info(`Credit Lens activated (engine ${c.cliPath}; workspace ${vscode.workspace.isTrusted ? 'trusted' : 'untrusted: runs cannot be launched'})`);
}

export async function deactivate(): Promise<void> {
  stopFollows();
  await ctx?.runs.dispose();
  ctx = undefined;
}
