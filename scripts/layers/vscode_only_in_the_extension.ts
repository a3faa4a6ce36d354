// The engine's and the webviews' TypeScript projects resolve `import 'vscode'` to this file (their `paths`), which
// they leave out of their `include`, so such an import fails their type check with TS6307 naming this file.
// Without it TypeScript would find @types/vscode through node_modules whatever a project's `types` say.
export {};
