// The guide's table of policy losses is the loss catalog's: one row per entry of LOSSES (its name, its per-token term,
// its own keys), so a new variant that is not documented fails here. `lossTable` prints the rows to paste.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { LOSSES } from '../../src/engine/losses/catalog';
import type { PolicyLossSpec } from '../../src/engine/losses/types';

export function lossTable(): string {
  const rows = (LOSSES as readonly PolicyLossSpec[]).map((l) => {
    const term = l.summary.replace(new RegExp(`^${l.name}: `), '');
    const keys = Object.keys(l.options ?? {});
    return `| \`${l.name}\` | ${term} | ${keys.length ? keys.map((k) => `\`grpo.${k}\``).join(', ') : '—'} |`;
  });
  return ['| `grpo.policy_loss` | the per-token term | its own keys |', '|---|---|---|', ...rows].join('\n');
}

test("docs/guide.md's table of policy losses lists every entry of the loss catalog, as the catalog says it", () => {
  const guide = readFileSync(resolve(__dirname, '../../docs/guide.md'), 'utf8');
  const want = lossTable();
  assert.ok(guide.includes(want), `docs/guide.md should hold this table (### Policy losses):\n${want}`);
});
