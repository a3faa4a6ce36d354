// Hostile filters: the names every object inherits are not fields, and a filter too deep or too long is refused with a
// clear error instead of overflowing the stack. And `--episode` lists with an empty item are refused, not read as 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileWhere, parseWhere, WHERE_MAX_DEPTH, WHERE_MAX_TERMS, type FieldKind } from '../../../src/engine/query/expr';
import { parseEpisodeList } from '../../../src/engine/cli/probe_command';
import { isUserError } from '../../../src/engine/core/errors';

const FIELDS: Record<string, FieldKind> = { reward: { kind: 'number' }, truncated: { kind: 'bool' } };
const refused = (src: string, re: RegExp) =>
  assert.throws(
    () => parseWhere(src, FIELDS),
    (e: Error) => isUserError(e) && re.test(e.message),
    src.slice(0, 60),
  );

test("Object.prototype's names are unknown fields, listed with the known ones, not a TypeError", () => {
  for (const name of ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf'])
    refused(`${name} = 1`, new RegExp(`unknown field "${name}"; the fields are reward, truncated`));
});

test('nesting deeper than the limit is refused with the limit; at the limit it parses and runs', () => {
  const nested = (n: number) => '('.repeat(n) + 'reward > 0' + ')'.repeat(n);
  refused(nested(5000), new RegExp(`nests more than ${WHERE_MAX_DEPTH} levels`));
  refused('not '.repeat(WHERE_MAX_DEPTH + 1) + 'truncated', new RegExp(`nests more than ${WHERE_MAX_DEPTH} levels`));
  const ok = compileWhere(parseWhere(nested(WHERE_MAX_DEPTH), FIELDS), (_f, row) => row);
  assert.deepEqual([0, 1, 2].map(ok), [false, true, true]);
});

test('more comparisons than the limit are refused; at the limit they parse and run', () => {
  const chain = (n: number) => Array.from({ length: n }, (_, i) => `reward = ${i}`).join(' or ');
  refused(chain(9000), new RegExp(`more than ${WHERE_MAX_TERMS} comparisons`));
  const ok = compileWhere(parseWhere(chain(WHERE_MAX_TERMS), FIELDS), (_f, row) => row);
  assert.deepEqual([5, WHERE_MAX_TERMS - 1, WHERE_MAX_TERMS].map(ok), [true, true, false]);
});

test('--episode with an empty item is an error naming the argument; a good list reads as given', () => {
  for (const list of ['3,,5', '3,', ',', ''])
    assert.throws(
      () => parseEpisodeList(list),
      (e: Error) => isUserError(e) && /^--episode: .* has an empty item/.test(e.message),
      list,
    );
  assert.deepEqual(parseEpisodeList('0, 3,17'), [0, 3, 17]);
  assert.throws(() => parseEpisodeList('2,x'), /--episode: "x" is not an episode index/);
});
