import { test } from 'node:test';
import assert from 'node:assert/strict';
import { episodeOf, runDirOf, runDirsOf } from '../../../src/extension/args';

// Shapes as VS Code hands them over: vscode.Uri.file('/w/runs/a') has scheme 'file' and fsPath '/w/runs/a';
// the Runs tree's nodes are runs_tree.ts' RunsTreeNode objects.
const fileUri = (p: string) => ({ scheme: 'file', fsPath: p, path: p });
const runNode = (runDir: string | null) => ({ kind: 'run', runDir, info: null, live: null, status: 'completed', interrupted: false });

test('runDirOf takes a string, a file Uri or a run node, and nothing else', () => {
  assert.equal(runDirOf('/w/runs/a'), '/w/runs/a');
  assert.equal(runDirOf(fileUri('/w/runs/b')), '/w/runs/b');
  assert.equal(runDirOf(runNode('/w/runs/c')), '/w/runs/c');
  // A queued run has no directory yet; an untitled: Uri is no folder; a config node is not a run.
  assert.equal(runDirOf(runNode(null)), undefined);
  assert.equal(runDirOf({ scheme: 'untitled', fsPath: 'Untitled-1' }), undefined);
  assert.equal(runDirOf({ kind: 'config', configPath: '/w/a.credit.yaml' }), undefined);
  assert.equal(runDirOf({ kind: 'episode', runDir: '/w/runs/a', step: 1, episode: 0 }), undefined);
  assert.equal(runDirOf(''), undefined);
  assert.equal(runDirOf(undefined), undefined);
  assert.equal(runDirOf(42), undefined);
});

test('runDirsOf prefers the tree multi-selection, keeps order and drops duplicates and non-runs', () => {
  const a = runNode('/w/a'),
    b = runNode('/w/b');
  assert.deepEqual(runDirsOf(a, [a, b, runNode('/w/a'), runNode(null)]), ['/w/a', '/w/b']);
  // Right-click on one item: VS Code passes [item] as the selection.
  assert.deepEqual(runDirsOf(b, [b]), ['/w/b']);
  // From another command or a webview: an array of directories, no selection.
  assert.deepEqual(runDirsOf(['/w/x', '/w/y', '/w/x']), ['/w/x', '/w/y']);
  assert.deepEqual(runDirsOf(fileUri('/w/z'), undefined), ['/w/z']);
  // Palette: no argument at all, or VS Code's empty selection array.
  assert.deepEqual(runDirsOf(undefined), []);
  assert.deepEqual(runDirsOf('/w/only', []), ['/w/only']);
});

test('episodeOf takes an episode node or a plain reference with integer step and episode', () => {
  assert.deepEqual(episodeOf({ kind: 'episode', runDir: '/w/a', step: 3, episode: 5, reward: 1 }), { runDir: '/w/a', step: 3, episode: 5 });
  assert.deepEqual(episodeOf({ runDir: '/w/a', step: 0, episode: 0 }), { runDir: '/w/a', step: 0, episode: 0 });
  assert.equal(episodeOf({ runDir: '/w/a', step: 1.5, episode: 0 }), null);
  assert.equal(episodeOf({ runDir: '/w/a', step: 1 }), null);
  assert.equal(episodeOf(runNode('/w/a')), null);
  assert.equal(episodeOf('/w/a'), null);
});
