// The paired rollouts' file: Parquet through parquet-wasm, written by `credit-lens importance pairs` (paired.ts) and
// read back by `credit-lens importance train` (importance.ts), or by pandas and polars in between.
import { readFileSync } from 'node:fs';
import { Field, Float64, Int32, List, Table, Utf8, tableFromIPC, tableToIPC, vectorFromArray, type Vector } from 'apache-arrow';
import { UserError } from '../core/errors';
import { ENGINE_VERSION } from '../core/version';

type ParquetWasm = typeof import('parquet-wasm');
let parquetWasmModule: ParquetWasm | null = null;
/**
 * Loaded on first use, with require: the module reads its .wasm from disk (next to itself, or next to the engine
 * bundle) when it is evaluated, which no other command should pay for or depend on.
 */
function parquetWasm(): ParquetWasm {
  if (!parquetWasmModule) {
    try {
      // loaded on first use: the Parquet writer's wasm is large, and most commands never write Parquet
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      parquetWasmModule = require('parquet-wasm') as ParquetWasm;
    } catch (e) {
      // In the engine bundle the module looks for parquet_wasm_bg.wasm next to the bundle: a packaging fault.
      throw new Error(
        `cannot load the Parquet writer (parquet-wasm): ${(e as Error).message}; the engine bundle needs node_modules/parquet-wasm/node/parquet_wasm_bg.wasm copied next to it`,
      );
    }
  }
  return parquetWasmModule;
}

const INT_COLUMNS = new Set(['prompt_id', 'group_id', 'completion_id', 'pair_id', 'split_token_idx']);
const TEXT_COLUMNS = new Set(['prompt_text', 'completion_text']);

/** Parquet bytes (Snappy, which every reader decodes) through parquet-wasm from an Arrow table. */
export async function encodeParquet(columns: Record<string, unknown[]>, kv: Record<string, string>): Promise<Uint8Array> {
  const vectors: Record<string, Vector> = {};
  for (const [name, values] of Object.entries(columns)) {
    // Explicit types: vectorFromArray would dictionary-encode strings and guess list element types.
    const type = INT_COLUMNS.has(name)
      ? new Int32()
      : TEXT_COLUMNS.has(name)
        ? new Utf8()
        : name === 'completion_token_ids'
          ? new List(new Field('item', new Int32(), false))
          : new Float64();
    vectors[name] = vectorFromArray(values as never[], type as never);
  }
  const table = new Table(vectors);
  const pw = parquetWasm();
  const wt = pw.Table.fromIPCStream(tableToIPC(table, 'stream'));
  const props = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression.SNAPPY)
    .setCreatedBy(`credit-lens ${ENGINE_VERSION}`)
    .setKeyValueMetadata(new Map(Object.entries(kv)))
    .build();
  return pw.writeParquet(wt, props);
}

/** Read a parquet file into an Arrow table (parquet-wasm), for the importance network's training. */
export async function readParquetTable(path: string): Promise<Table> {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new UserError(`cannot read rollouts file ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  const pw = parquetWasm();
  let wt;
  try {
    wt = pw.readParquet(bytes);
  } catch (e) {
    throw new UserError(`${path} is not a readable Parquet file (${String((e as Error).message ?? e)})`);
  }
  return tableFromIPC(wt.intoIPCStream());
}
