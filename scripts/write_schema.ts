// Writes schemas/credit.schema.json, the JSON Schema that package.json's yamlValidation contributes, from the
// engine's zod schema (the one source of the CLI's validation and the extension's diagnostics).
// Run: node --import tsx scripts/write_schema.ts
import { mkdirSync, writeFileSync } from 'node:fs';
import { configJsonSchema } from '../src/engine/config/config';

mkdirSync('schemas', { recursive: true });
writeFileSync('schemas/credit.schema.json', JSON.stringify(configJsonSchema(), null, 2) + '\n');
