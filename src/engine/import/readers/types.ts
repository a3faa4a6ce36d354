// What an import format's reader is: whether a source is in its format (from the source's paths and its first readable
// row), and the records one row holds. One file per format in this folder and one line in catalog.ts; the format's
// label for the pickers is its entry in src/protocol/import_formats.ts.
import type { ImportFormat } from '../../../protocol/import_formats';
import type { ImportedRecord, Obj } from '../fields';

export interface ImportReader {
  readonly id: ImportFormat;
  /** whether these files, and the first row read from them (null before any), are in this format */
  detect(files: string[], first: Obj | null): boolean;
  /** the records of one row (one for most formats; a prime-rl episode has one per branch); a bad row throws RowError */
  records(o: Obj, path: string): Omit<ImportedRecord, 'file' | 'line'>[];
  /**
   * `records` for the rows of one file, where they share something read from disk (prime-rl's stream: its annotations),
   * read once for the file rather than once per row
   */
  forFile?(path: string): (o: Obj) => Omit<ImportedRecord, 'file' | 'line'>[];
}
