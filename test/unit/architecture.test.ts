// docs/architecture.md's map of the tree cannot go stale: every folder under src/ and every top-level folder of the
// repository has its line in the map, and every line names a folder that exists. Folders are read from git's own list
// of tracked files, so build outputs (dist/, node_modules/) are not part of the tree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');

/** The folders the map names: a line `<indent>name/  text`, two spaces of indent per level under the line above it. */
export function mapFolders(markdown: string): string[] {
  const block = /## Map[\s\S]*?```\n([\s\S]*?)```/.exec(markdown)?.[1];
  assert.ok(block, 'docs/architecture.md has a "## Map" section with a code block');
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of block.split('\n')) {
    const m = /^( *)([a-z_][a-z0-9_.-]*)\/(\s|$)/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 2;
    assert.ok(Number.isInteger(depth) && depth <= stack.length, `the map's indentation is two spaces a level: "${line}"`);
    stack.length = depth;
    stack.push(m[2]);
    out.push(stack.join('/'));
  }
  return out;
}

/** The tree's folders: every folder under src/, and every top-level folder that is not hidden. */
function treeFolders(): string[] {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  const dirs = new Set<string>();
  for (const f of files) {
    if (f.startsWith('.')) continue;
    const parts = dirname(f).split('/');
    if (parts[0] === '.') continue;
    if (parts[0] === 'src') for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
    else dirs.add(parts[0]);
  }
  return [...dirs];
}

test('docs/architecture.md maps every folder of the tree, and only folders that exist', () => {
  const mapped = mapFolders(readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8'));
  const tree = treeFolders();
  const missing = tree.filter((d) => !mapped.includes(d)).sort();
  const stale = mapped.filter((d) => !tree.includes(d)).sort();
  assert.deepEqual(missing, [], `folders without a line in the map: ${missing.join(', ')}`);
  assert.deepEqual(stale, [], `lines of the map naming no folder: ${stale.join(', ')}`);
});

test('the map reader follows indentation: nested lines are paths under the line above', () => {
  const md = '## Map\n\n```\nsrc/   a\n  engine/   b\n    core/  c\n      more text\n  webviews/  d\ndocs/  e\n```\n';
  assert.deepEqual(mapFolders(md), ['src', 'src/engine', 'src/engine/core', 'src/webviews', 'docs']);
});

test('every relative link and picture in the README and docs/ points at a file that exists', () => {
  const broken: string[] = [];
  const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
  for (const f of docs) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s#]+)(#[^)]*)?\)/g)) {
      if (/^[a-z]+:/.test(m[1])) continue;
      if (!existsSync(resolve(ROOT, dirname(f), m[1]))) broken.push(`${f}: ${m[1]}`);
    }
  }
  assert.deepEqual(broken, []);
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every citation of a markdown document in `text`: `name.md` with its anchor where one follows (`design.md#config`). */
export function citations(text: string): { doc: string; anchor: string | null }[] {
  const out: { doc: string; anchor: string | null }[] = [];
  for (const m of text.matchAll(/(?<![\w/.-])((?:\.\.\/)*(?:[\w-]+\/)*([\w-]+)\.md)(?:#([\w-]+))?/g)) {
    // a document is cited by an anchor, by a path through docs/ or a parent folder, or by an upper-case name
    // (README.md, DESIGN.md); a lower-case bare name is a file a test or command writes (`--out a.md`)
    const cited = m[3] !== undefined || /^(\.\.\/|docs\/)/.test(m[1]) || /^[A-Z][A-Z_]*$/.test(m[2]);
    if (cited) out.push({ doc: m[1], anchor: m[3] ?? null });
  }
  // the old form: a section sign after a document's name, which no anchor resolves
  for (const m of text.matchAll(/\b([A-Z]+)(?:\.md)? §\d+/g)) out.push({ doc: `${m[1]} §`, anchor: null });
  return out;
}

test('every document a comment, test or doc cites is in the repository, and so is its anchor', () => {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter(
      (f) =>
        f &&
        !f.includes('/fixtures/') &&
        f !== 'test/unit/architecture.test.ts' &&
        /\.(ts|mjs|js|sh|md|py|c|h|yaml|json)$/.test(f) &&
        !f.endsWith('package-lock.json'),
    );
  const mdFiles = files.filter((f) => f.endsWith('.md'));
  const anchorsOf = new Map<string, Set<string>>();
  for (const f of mdFiles) {
    const heads = readFileSync(join(ROOT, f), 'utf8').matchAll(/^#{1,6} (.+)$/gm);
    anchorsOf.set(f, new Set([...heads].map((h) => headingAnchor(h[1]))));
  }
  const bad: string[] = [];
  for (const f of files) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const c of citations(text)) {
      // a path is resolved from the citing file's folder, from the root, then as a name under docs/
      const cands = [join(dirname(f), c.doc), c.doc, `docs/${c.doc}`].map((p) => resolve(ROOT, p).slice(ROOT.length + 1));
      const doc = cands.find((p) => anchorsOf.has(p));
      if (!doc) bad.push(`${f}: cites ${c.doc}, which the repository does not hold`);
      else if (c.anchor && !anchorsOf.get(doc)!.has(c.anchor)) bad.push(`${f}: cites ${c.doc}#${c.anchor}, which ${doc} has no heading for`);
    }
  }
  assert.deepEqual(bad, []);
});

test('the citation check sees a document outside the repository and an anchor with no heading', () => {
  assert.deepEqual(citations('see DESIGN §4 and ../shared/SERVING.md, design.md#semantics'), [
    { doc: '../shared/SERVING.md', anchor: null },
    { doc: 'design.md', anchor: 'semantics' },
    { doc: 'DESIGN §', anchor: null },
  ]);
  assert.equal(headingAnchor('Tests in real VS Code'), 'tests-in-real-vs-code');
  assert.equal(headingAnchor('`credit-lens serve`'), 'credit-lens-serve');
});

test('a source file over 500 lines opens with why it is one file ("// One file although long: …")', () => {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'src'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f.endsWith('.ts'));
  const long = files.filter((f) => readFileSync(join(ROOT, f), 'utf8').split('\n').length > 500);
  // the reason is the file's first line: what a reader meets before the 500 lines
  const silent = long.filter((f) => !/^\/\/ One file although long: \S/.test(readFileSync(join(ROOT, f), 'utf8')));
  assert.deepEqual(silent, [], `files over 500 lines without their reason: ${silent.join(', ')}`);
  // the ceiling the last round set: a ninth long file is a room to split, not a reason to write
  assert.ok(long.length <= 8, `${long.length} files over 500 lines (at most 8): ${long.join(', ')}`);
});

test('at most 15 functions of the product run over 80 lines (ESLint max-lines-per-function, a warning in npm run lint)', async () => {
  const { ESLint } = await import('eslint');
  const eslint = new ESLint({ cwd: ROOT });
  const results = await eslint.lintFiles(['src/**/*.ts']);
  const long = results.flatMap((r) =>
    r.messages.filter((m) => m.ruleId === 'max-lines-per-function').map((m) => `${r.filePath.slice(ROOT.length + 1)}:${m.line} ${m.message}`),
  );
  // the ceiling the last round reached (31 before it): a sixteenth is a function to split
  assert.ok(long.length <= 15, `${long.length} functions over 80 lines:\n${long.join('\n')}`);
});
