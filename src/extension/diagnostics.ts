// Problems-panel entries for `*.credit.yaml` from the engine's own schema (parseConfigText), so errors show
// without the YAML extension and say exactly what the CLI would say. Re-validated as the user types,
// throttled like the samples' decoration updates.
import * as vscode from 'vscode';
import { parseConfigText, type ConfigIssue } from '../engine/config/config';

export const isCreditConfig = (doc: vscode.TextDocument): boolean => doc.uri.scheme === 'file' && /\.credit\.yaml$/i.test(doc.uri.path);

const THROTTLE_MS = 300;

export class ConfigDiagnostics implements vscode.Disposable {
  private readonly collection = vscode.languages.createDiagnosticCollection('credit-lens');
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly disposables: vscode.Disposable[] = [this.collection];

  constructor() {
    vscode.workspace.onDidOpenTextDocument((d) => this.validate(d), null, this.disposables);
    vscode.workspace.onDidChangeTextDocument((e) => this.schedule(e.document), null, this.disposables);
    vscode.workspace.onDidCloseTextDocument((d) => this.forget(d.uri), null, this.disposables);
    for (const d of vscode.workspace.textDocuments) this.validate(d);
  }

  /** Validates now and returns the issues (the Validate command reports them). */
  validate(doc: vscode.TextDocument): ConfigIssue[] {
    if (!isCreditConfig(doc)) return [];
    const { issues } = parseConfigText(doc.getText(), { file: doc.uri.fsPath });
    this.collection.set(
      doc.uri,
      issues.map((i) => toDiagnostic(doc, i)),
    );
    return issues;
  }

  private schedule(doc: vscode.TextDocument): void {
    if (!isCreditConfig(doc)) return;
    const key = doc.uri.toString();
    clearTimeout(this.timers.get(key));
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.validate(doc);
      }, THROTTLE_MS),
    );
  }

  private forget(uri: vscode.Uri): void {
    clearTimeout(this.timers.get(uri.toString()));
    this.timers.delete(uri.toString());
    this.collection.delete(uri);
  }

  dispose(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

function toDiagnostic(doc: vscode.TextDocument, issue: ConfigIssue): vscode.Diagnostic {
  let range: vscode.Range;
  if (issue.offset) {
    range = new vscode.Range(doc.positionAt(issue.offset[0]), doc.positionAt(Math.max(issue.offset[1], issue.offset[0] + 1)));
  } else if (issue.line !== undefined) {
    const line = Math.min(issue.line - 1, doc.lineCount - 1);
    range = doc.lineAt(line).range;
  } else {
    range = doc.lineAt(0).range;
  }
  // The engine's message already names the path, the value and what is allowed.
  const d = new vscode.Diagnostic(range, issue.message, vscode.DiagnosticSeverity.Error);
  d.source = 'credit-lens';
  if (issue.path) d.code = issue.path;
  return d;
}
