// The CSV writer lives in src/protocol/csv.ts, shared with the engine's `credit-lens rollouts --csv`.
export { csvField, toCsv, type CsvValue } from '../protocol/csv';
