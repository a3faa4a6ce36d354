import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeBlock, escapeMarkdown, inlineCode } from '../../../src/extension/markdown';

test('escapeMarkdown leaves no live link, image, command URI, theme icon, HTML or table break', () => {
  const name = '[click](command:workbench.action.terminal.new) ![x](http://e/x.png) $(alert) <img src=x> a|b *b* _i_';
  const out = escapeMarkdown(name);
  // Every syntax character is preceded by a backslash, so none of them starts a construct.
  for (const c of ['[', ']', '(', ')', '!', '$', '<', '>', '|', '*', '_']) {
    assert.ok(![...out.matchAll(new RegExp(`[^\\\\]\\${c}`, 'g'))].length, `unescaped ${c} in ${out}`);
  }
  assert.equal(escapeMarkdown('line1\nline2'), 'line1 line2');
  assert.equal(escapeMarkdown('plain words 42'), 'plain words 42');
});

test('inlineCode fences with more backticks than the text holds', () => {
  assert.equal(inlineCode('abc'), '`abc`');
  assert.equal(inlineCode('a`b'), '``a`b``');
  assert.equal(inlineCode('``x'), '``` ``x ```');
  assert.equal(inlineCode('a\nb'), '`a b`');
});

test('codeBlock cannot be closed by the text it holds', () => {
  const completion = 'ok\n```\n[x](command:evil)\n````';
  const block = codeBlock(completion);
  // The text's longest backtick run is 4, so the fence is 5 long and only the closing fence ends it.
  assert.ok(block.startsWith('\n`````text\n'));
  assert.ok(block.endsWith('\n`````\n'));
  assert.equal(codeBlock('x'), '\n```text\nx\n```\n');
});
