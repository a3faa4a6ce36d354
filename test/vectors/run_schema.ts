// The run directory's table schemas as the TypeScript engine writes them (src/engine/rundir/arrow_tables.ts), for the
// Python package's writer to match (python/tests/test_rundir.py reads test/vectors/run_schema.json);
// test/unit/credit_vectors.test.ts fails when the committed file is not the engine's. Rewrite it with
// `npx tsx test/vectors/run_schema.ts --write`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EPISODE_SCHEMA, TOKEN_SCHEMA } from '../../src/engine/rundir/arrow_tables';

export const RUN_SCHEMA_FILE = join(__dirname, 'run_schema.json');

const describe = (fields: { name: string; type: unknown; nullable: boolean }[]) =>
  fields.map((f) => ({ name: f.name, type: String(f.type), nullable: f.nullable }));

export function runSchema(): { tokens: ReturnType<typeof describe>; episodes: ReturnType<typeof describe> } {
  return { tokens: describe(TOKEN_SCHEMA.fields), episodes: describe(EPISODE_SCHEMA.fields) };
}

if (require.main === module && process.argv.includes('--write')) {
  writeFileSync(RUN_SCHEMA_FILE, JSON.stringify(runSchema(), null, 1) + '\n');
  console.log(`wrote ${RUN_SCHEMA_FILE}`);
}
