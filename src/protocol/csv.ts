// CSV for every export (the webviews' tables, `credit-lens rollouts --csv`), as RFC 4180 reads it: a field with a comma,
// quote or line break is quoted, its quotes doubled; numbers at full precision; null is an empty field; every line ends
// in \n.
export type CsvValue = string | number | null;

export function csvField(v: CsvValue): string {
  if (v === null) return '';
  let s = String(v);
  // A text cell starting with = + - @ (or a tab / carriage return) is a formula to Excel and LibreOffice: a run name
  // or token like `=HYPERLINK(...)` would run on open. A leading apostrophe keeps it text (OWASP's CSV injection
  // advice); numbers, negative ones included, are written as numbers.
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(header: readonly string[], rows: readonly (readonly CsvValue[])[]): string {
  return [header, ...rows].map((r) => r.map(csvField).join(',')).join('\n') + '\n';
}
