// CSV as W&B exports a table (RFC 4180: comma-separated, fields optionally in double quotes, "" for a quote inside one,
// line breaks inside quoted fields, since completions span lines), read by csv-parse as a stream from the file: the
// text is never held whole, and a row larger than the cap is a clear error instead of a heap that runs out (our own
// parser used about 33 bytes of heap per input character). Rows keep the line they start on.
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { parse, type CsvError } from 'csv-parse';

export interface CsvRow {
  /** 1-based line where the row starts */
  line: number;
  cells: string[];
}

/** The largest row read (characters): beyond it the file is refused with its line, not parsed into memory. */
export const MAX_CSV_ROW_CHARS = 64 << 20;

export async function readCsv(path: string, opts: { maxRowChars?: number } = {}): Promise<{ rows: CsvRow[]; error: { line: number; reason: string } | null }> {
  const max = opts.maxRowChars ?? MAX_CSV_ROW_CHARS;
  const rows: CsvRow[] = [];
  // Rows are taken as they are parsed (on_record), so a row that breaks the cap leaves the rows before it read.
  const parser = parse({
    bom: true,
    relax_column_count: true,
    skip_empty_lines: true,
    max_record_size: max,
    record_delimiter: ['\r\n', '\n', '\r'],
    on_record: (record: string[], context: { lines: number }) => {
      // the row's first line: where it ended, less the line breaks inside its quoted fields
      const breaks = record.reduce((n, cell) => n + (cell.match(/\r\n|\n|\r/g)?.length ?? 0), 0);
      rows.push({ line: context.lines - breaks, cells: record });
      return null;
    },
  });
  try {
    await pipeline(createReadStream(path, { encoding: 'utf8' }), parser);
    return { rows, error: null };
  } catch (e) {
    const err = e as CsvError & { lines?: number };
    const line = err.lines ?? (rows.length ? rows[rows.length - 1].line + 1 : 1);
    const reason =
      err.code === 'CSV_MAX_RECORD_SIZE'
        ? `a row longer than ${Math.round(max / (1 << 20))} M characters (the import's limit per row); the rows before it are read`
        : err.code === 'CSV_QUOTE_NOT_CLOSED'
          ? 'unterminated quoted field (the file ends inside quotes)'
          : err.message;
    return { rows, error: { line, reason } };
  }
}
