// RFC 4180 CSV, as W&B exports a table: comma-separated, fields optionally in double quotes, "" for a quote inside
// one, line breaks inside quoted fields (completions span lines). One linear pass; rows keep their first line number.

export interface CsvRow {
  /** 1-based line where the row starts */
  line: number;
  cells: string[];
}

export function parseCsv(text: string): { rows: CsvRow[]; error: { line: number; reason: string } | null } {
  const rows: CsvRow[] = [];
  let cells: string[] = [];
  let cell = '';
  let line = 1;
  let rowLine = 1;
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0; // byte-order mark
  const endRow = () => {
    cells.push(cell);
    if (!(cells.length === 1 && cells[0] === '')) rows.push({ line: rowLine, cells });
    cells = [];
    cell = '';
  };
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else {
        if (c === '\n') line++;
        cell += c;
      }
      continue;
    }
    if (c === '"' && cell === '') quoted = true;
    else if (c === ',') {
      cells.push(cell);
      cell = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRow();
      line++;
      rowLine = line;
    } else cell += c;
  }
  if (quoted) return { rows, error: { line: rowLine, reason: 'unterminated quoted field (the file ends inside quotes)' } };
  if (cell !== '' || cells.length) endRow();
  return { rows, error: null };
}
