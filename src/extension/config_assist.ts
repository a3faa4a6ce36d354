// Docs on hover, key completion and "did you mean" quick fixes in `*.credit.yaml`, from the config's own schema, so a
// fresh VS Code gets them without the YAML extension (which would read the same schema, contributed in package.json).
import * as vscode from 'vscode';
import { configJsonSchema } from '../engine/config/config';
import { ConfigDocs, hoverMarkdown, keyPathAt, mappingAt, suggestedKey } from './config_docs';

const SELECTOR: vscode.DocumentSelector = { scheme: 'file', pattern: '**/*.credit.yaml' };

export function registerConfigAssist(push: (d: vscode.Disposable) => void): void {
  let docs: ConfigDocs | null = null;
  // built on first use: a window that never opens a config pays nothing
  const get = () => (docs ??= new ConfigDocs(configJsonSchema() as ConstructorParameters<typeof ConfigDocs>[0]));

  push(
    vscode.languages.registerHoverProvider(SELECTOR, {
      provideHover(doc, pos) {
        const at = keyPathAt(doc.getText(), doc.offsetAt(pos));
        const d = at && get().doc(at.path);
        if (!at || !d) return undefined;
        const md = new vscode.MarkdownString(hoverMarkdown(d));
        return new vscode.Hover(md, new vscode.Range(doc.positionAt(at.range[0]), doc.positionAt(at.range[1])));
      },
    }),
  );

  push(
    vscode.languages.registerCompletionItemProvider(SELECTOR, {
      provideCompletionItems(doc, pos) {
        const lines = doc.getText().split(/\r?\n/);
        const at = mappingAt(lines, pos.line, pos.character);
        if (!at) return undefined;
        const word = doc.getWordRangeAtPosition(pos, /[A-Za-z_][\w-]*/) ?? new vscode.Range(pos, pos);
        return get()
          .children(at.path)
          .filter((k) => !at.present.includes(k))
          .map((k) => {
            const path = [...at.path, k];
            const d = get().doc(path)!;
            const section = get().children(path).length > 0;
            const item = new vscode.CompletionItem(k, section ? vscode.CompletionItemKind.Module : vscode.CompletionItemKind.Property);
            item.detail = d.default !== undefined ? `default ${d.default}` : d.allowed;
            item.documentation = new vscode.MarkdownString(hoverMarkdown(d));
            // a section opens its block, indented one level; a leaf waits for its value
            item.insertText = section ? `${k}:\n${' '.repeat(word.start.character + 2)}` : `${k}: `;
            item.range = word;
            return item;
          });
      },
    }),
  );

  push(
    vscode.languages.registerCodeActionsProvider(
      SELECTOR,
      {
        provideCodeActions(doc, _range, context) {
          const out: vscode.CodeAction[] = [];
          for (const diag of context.diagnostics) {
            if (diag.source !== 'credit-lens') continue;
            const key = suggestedKey(diag.message);
            if (!key) continue;
            const fix = new vscode.CodeAction(`Change to \`${key}\``, vscode.CodeActionKind.QuickFix);
            fix.edit = new vscode.WorkspaceEdit();
            fix.edit.replace(doc.uri, diag.range, key);
            fix.diagnostics = [diag];
            fix.isPreferred = true;
            out.push(fix);
          }
          return out;
        },
      },
      { providedCodeActionKinds: [vscode.CodeActionKind.QuickFix] },
    ),
  );
}
