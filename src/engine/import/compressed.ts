// Zstandard-compressed JSONL (`.jsonl.zst`), as prime-rl seals the chunks of its trace stream: a chunk is written plain
// (`stream/00001.jsonl`, tailed while live), then compressed beside itself in independent frames with a seek table
// (`00001.jsonl.zst`, through a `.zst.tmp` renamed when whole), then the plain file is removed. Node 20 has no zstd, so
// fzstd (a decoder in plain JavaScript) reads it; it takes concatenated frames and skips the seek table's skippable one.
// Source: prime-rl src/prime_rl/monitors/file/traces/chunks.py.
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { decompress } from 'fzstd';

const ZSTD = '.zst';

/**
 * A file's data extension, seen through a `.zst`: ".jsonl" for `00001.jsonl.zst`. Only JSONL is read compressed, so any
 * other `.zst` keeps ".zst", which is no data extension.
 */
export function dataExtension(path: string): string {
  const ext = extname(path).toLowerCase();
  if (ext !== ZSTD) return ext;
  return extname(path.slice(0, -ZSTD.length)).toLowerCase() === '.jsonl' ? '.jsonl' : ZSTD;
}

const isCompressed = (path: string): boolean => extname(path).toLowerCase() === ZSTD;

/**
 * Of files listed together, those to read: a sealed chunk's plain twin wins while both exist (the moment between the
 * twin's rename and the plain file's removal), so no line is read twice.
 */
export function withoutSealedTwins(files: string[]): string[] {
  const listed = new Set(files);
  return files.filter((f) => !(isCompressed(f) && listed.has(f.slice(0, -ZSTD.length))));
}

/** A data file's text, decompressed when it is a `.zst`; a corrupt one throws with what zstd found. */
export function readDataText(path: string): string {
  const bytes = readFileSync(path);
  if (!isCompressed(path)) return bytes.toString('utf8');
  let out: Uint8Array;
  try {
    out = decompress(bytes);
  } catch (e) {
    throw new Error(`not a whole Zstandard file (${(e as Error).message})`);
  }
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString('utf8');
}
