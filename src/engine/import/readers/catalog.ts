// The import formats' readers, in detection order: `--format auto` asks each in turn whether a source is its own (the
// shards first, by their format field; then prime-rl: its token exports also hold a `completion`-less row that the others
// would misread). A new format is its file
// in this folder, its line here and its entry in src/protocol/import_formats.ts.
import type { ImportFormat } from '../../../protocol/import_formats';
import { jsonl } from './jsonl';
import { prime } from './prime';
import { trl } from './trl';
import type { ImportReader } from './types';
import { verl } from './verl';
import { verlShard } from './verl_shard';

export const IMPORT_READERS: readonly ImportReader[] = [verlShard, prime, verl, trl, jsonl];

/** The reader of a format the protocol declares; a format without one is a programming error caught by the tests. */
export function importReader(id: ImportFormat): ImportReader {
  const r = IMPORT_READERS.find((x) => x.id === id);
  if (!r) throw new Error(`no reader for the import format ${id}`);
  return r;
}
