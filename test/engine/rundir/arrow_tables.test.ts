import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Table, tableFromIPC, tableToIPC, vectorFromArray, Utf8, Float32, Int32 } from 'apache-arrow';
import {
  joinProbeColumns,
  PROBE_SCHEMA,
  readProbeTable,
  writeProbeTable,
  EPISODE_SCHEMA,
  TOKEN_SCHEMA,
  readEpisodeTable,
  readTokenTable,
  readTokenTables,
  writeEpisodeTable,
  writeTokenTable,
  type EpisodeColumns,
  type TokenColumns,
} from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { isUserError } from '../../../src/engine/core/errors';

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'cl-arrow-'));
}

// Column names, Arrow types and nullability transcribed by hand from design.md#run-directory (the "null when unused" columns are the
// only nullable ones), with char_start (null in runs written before it) after the token's text.
const DESIGN_TOKEN_COLUMNS: [string, string, boolean][] = [
  ['step', 'Int32', false],
  ['episode', 'Int32', false],
  ['prompt_idx', 'Int32', false],
  ['position', 'Int32', false],
  ['token_id', 'Int32', false],
  ['token', 'Utf8', false],
  ['char_start', 'Int32', true],
  ['logprob', 'Float32', false],
  ['entropy', 'Float32', false],
  ['advantage', 'Float32', false],
  ['weight', 'Float32', false],
  ['effective_advantage', 'Float32', false],
  ['contribution', 'Float32', false],
  ['attribution', 'Float32', true],
  ['importance', 'Float32', true],
  // what the loss did to each token: null where no loss ran (imported runs)
  ['is_weight', 'Float32', true],
  ['clipped', 'Float32', true],
  ['grad_norm', 'Float32', true],
  // what the step's update did to the token's log-prob: null unless logging.realized_credit
  ['realized', 'Float32', true],
  // how far training so far moved the token from the reference policy: null unless logging.ref_logratio
  ['ref_logratio', 'Float32', true],
  ['section', 'Utf8', false],
  ['token_type', 'Utf8', false],
  ['reward', 'Float32', false],
];
const DESIGN_EPISODE_COLUMNS: [string, string, boolean][] = [
  ['step', 'Int32', false],
  ['episode', 'Int32', false],
  ['prompt_idx', 'Int32', false],
  ['prompt', 'Utf8', false],
  ['completion', 'Utf8', false],
  ['reward', 'Float32', false],
  ['reward_format', 'Float32', false],
  ['reward_answer', 'Float32', false],
  ['success', 'Bool', false],
  ['advantage', 'Float32', false],
  ['length', 'Int32', false],
  ['oracle_span', 'Utf8', true],
  // what the sampler knew: null where the writer did not (imports, older engines)
  ['truncated', 'Bool', true],
  ['status', 'Utf8', true],
];

const describe = (fields: { name: string; type: unknown; nullable: boolean }[]) => fields.map((f) => [f.name, String(f.type), f.nullable]);

// Values chosen to be exact in float32 (binary fractions), so equality after the round trip is exact.
function sampleTokens(): TokenColumns {
  return {
    step: Int32Array.from([3, 3, 3, 3, 3, 3]),
    episode: Int32Array.from([0, 0, 0, 1, 1, 1]),
    prompt_idx: Int32Array.from([7, 7, 7, 7, 7, 7]),
    position: Int32Array.from([0, 1, 2, 0, 1, 2]),
    token_id: Int32Array.from([101, 5, 2_000_000, 0, -1, 42]),
    token: ['<think>', 'é', '😀x', '', '数字\n', ' e\u0301'],
    logprob: Float32Array.from([-0.5, -1.25, -3, -0.125, -2, -0.75]),
    entropy: Float32Array.from([1.5, 0.25, 0, 2, 0.5, 1]),
    advantage: Float32Array.from([0.5, 0.5, 0.5, -0.5, -0.5, -0.5]),
    weight: Float32Array.from([1, 0.5, 0.5, 1, 0, 2]),
    effective_advantage: Float32Array.from([0.5, 0.25, 0.25, -0.5, 0, -1]),
    contribution: Float32Array.from([-0.25, -0.3125, -0.75, 0.0625, 0, 0.75]),
    attribution: null,
    importance: [0.25, null, 1.5, null, null, -4],
    section: ['think', 'think', 'answer', 'other', 'answer', 'answer'],
    token_type: ['filler', 'filler', 'filler', 'filler', 'filler', 'filler'],
    reward: Float32Array.from([1.1, 1.1, 1.1, 0, 0, 0].map(Math.fround)),
  };
}

function sampleEpisodes(): EpisodeColumns {
  // 10 episodes so that `success` spans two bytes of the bit-packed Bool buffer.
  const n = 10;
  return {
    step: new Int32Array(n).fill(2),
    episode: Int32Array.from({ length: n }, (_, i) => i),
    prompt_idx: Int32Array.from({ length: n }, (_, i) => i >> 2),
    prompt: Array.from({ length: n }, (_, i) => `3 5 ${i} -> 16\n<think>`),
    completion: Array.from({ length: n }, (_, i) => (i % 3 === 0 ? `✓ ${i}` : `(3+5)*${i}</answer>`)),
    reward: Float32Array.from({ length: n }, (_, i) => (i % 3 === 0 ? 1.125 : 0.125)),
    reward_format: Float32Array.from({ length: n }, () => 1),
    reward_answer: Float32Array.from({ length: n }, (_, i) => (i % 3 === 0 ? 1 : 0)),
    success: Array.from({ length: n }, (_, i) => i % 3 === 0),
    advantage: Float32Array.from({ length: n }, (_, i) => (i % 3 === 0 ? 1.5 : -0.75)),
    length: Int32Array.from({ length: n }, (_, i) => 10 + i),
    oracle_span: Array.from({ length: n }, (_, i) => (i % 3 === 0 ? null : i === 4 ? 'ü÷ 8' : `${i}*2`)),
  };
}

test('schemas list every design.md#run-directory column with its exact Arrow type, in order', () => {
  assert.deepEqual(describe(TOKEN_SCHEMA.fields), DESIGN_TOKEN_COLUMNS);
  assert.deepEqual(describe(EPISODE_SCHEMA.fields), DESIGN_EPISODE_COLUMNS);
});

test('written files carry the design.md#run-directory schema as read by the Arrow library itself', () => {
  const dir = tmp();
  try {
    writeTokenTable(join(dir, 't.arrow'), sampleTokens());
    writeEpisodeTable(join(dir, 'e.arrow'), sampleEpisodes());
    const t = tableFromIPC(readFileSync(join(dir, 't.arrow')));
    const e = tableFromIPC(readFileSync(join(dir, 'e.arrow')));
    assert.deepEqual(describe(t.schema.fields), DESIGN_TOKEN_COLUMNS);
    assert.deepEqual(describe(e.schema.fields), DESIGN_EPISODE_COLUMNS);
    // Arrow IPC *file* format starts and ends with the magic "ARROW1" (the stream format has no footer).
    const bytes = readFileSync(join(dir, 't.arrow'));
    assert.equal(bytes.subarray(0, 6).toString(), 'ARROW1');
    assert.equal(bytes.subarray(bytes.length - 6).toString(), 'ARROW1');
    // the library's own row view agrees with what we wrote
    assert.equal(t.get(1)?.token, 'é');
    assert.equal(t.get(1)?.importance, null);
    assert.equal(e.get(4)?.oracle_span, 'ü÷ 8');
    assert.equal(e.get(9)?.success, true);
    assert.deepEqual(readdirSync(dir).sort(), ['e.arrow', 't.arrow'], 'no .tmp-* file left behind');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('token table round trip keeps unicode tokens, a null column and single null rows', () => {
  const dir = tmp();
  try {
    const cols = sampleTokens();
    writeTokenTable(join(dir, 't.arrow'), cols);
    const back = readTokenTable(join(dir, 't.arrow'));
    assert.deepEqual(back.token, cols.token);
    assert.deepEqual(back.section, cols.section);
    assert.deepEqual(back.token_type, cols.token_type);
    for (const k of ['step', 'episode', 'prompt_idx', 'position', 'token_id'] as const) {
      assert.ok(back[k] instanceof Int32Array, k);
      assert.deepEqual(Array.from(back[k]), Array.from(cols[k]), k);
    }
    for (const k of ['logprob', 'entropy', 'advantage', 'weight', 'effective_advantage', 'contribution', 'reward'] as const) {
      assert.ok(back[k] instanceof Float32Array, k);
      assert.deepEqual(Array.from(back[k]), Array.from(cols[k]), k);
    }
    assert.equal(back.attribution, null, 'a column written as null reads back as null');
    // single null rows read back as NaN
    assert.deepEqual(Array.from(back.importance!), [0.25, NaN, 1.5, NaN, NaN, -4]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('episode table round trip keeps booleans across a byte boundary and null oracle spans', () => {
  const dir = tmp();
  try {
    const cols = sampleEpisodes();
    writeEpisodeTable(join(dir, 'e.arrow'), cols);
    const back = readEpisodeTable(join(dir, 'e.arrow'));
    assert.deepEqual(back.success, cols.success);
    assert.deepEqual(back.oracle_span, cols.oracle_span);
    assert.deepEqual(back.prompt, cols.prompt);
    assert.deepEqual(back.completion, cols.completion);
    for (const k of ['step', 'episode', 'prompt_idx', 'length'] as const) assert.deepEqual(Array.from(back[k]), Array.from(cols[k]), k);
    for (const k of ['reward', 'reward_format', 'reward_answer', 'advantage'] as const) assert.deepEqual(Array.from(back[k]), Array.from(cols[k]), k);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an empty step writes and reads back as zero rows', () => {
  const dir = tmp();
  try {
    const e = new Float32Array(0);
    const i = new Int32Array(0);
    writeTokenTable(join(dir, 't.arrow'), {
      step: i,
      episode: i,
      prompt_idx: i,
      position: i,
      token_id: i,
      token: [],
      logprob: e,
      entropy: e,
      advantage: e,
      weight: e,
      effective_advantage: e,
      contribution: e,
      attribution: null,
      importance: e,
      section: [],
      token_type: [],
      reward: e,
    });
    const back = readTokenTable(join(dir, 't.arrow'));
    assert.equal(back.step.length, 0);
    assert.deepEqual(back.token, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('columns of different lengths are refused', () => {
  const dir = tmp();
  try {
    const cols = sampleTokens();
    cols.reward = new Float32Array(5);
    assert.throws(() => writeTokenTable(join(dir, 't.arrow'), cols), /reward has 5 rows, expected 6/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a truncated table file is a UserError naming the file', () => {
  const dir = tmp();
  try {
    const p = join(dir, 't.arrow');
    writeTokenTable(p, sampleTokens());
    const bytes = readFileSync(p);
    writeFileSync(p, bytes.subarray(0, bytes.length >> 1));
    assert.throws(
      () => readTokenTable(p),
      (e) => isUserError(e) && e.message.includes(p),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Built with apache-arrow's own builders, independently of our writer.
function libraryTable(start: number, tokens: (string | null)[], importance: (number | null)[], dictionarySection: boolean): Table {
  const n = tokens.length;
  const ints = (f: (i: number) => number) =>
    vectorFromArray(
      Array.from({ length: n }, (_, i) => f(start + i)),
      new Int32(),
    );
  const floats = (f: (i: number) => number) =>
    vectorFromArray(
      Array.from({ length: n }, (_, i) => f(start + i)),
      new Float32(),
    );
  return new Table({
    step: ints(() => 9),
    episode: ints((i) => i),
    prompt_idx: ints(() => 0),
    position: ints((i) => i),
    token_id: ints((i) => 100 + i),
    token: vectorFromArray(tokens, new Utf8()),
    logprob: floats((i) => -i),
    entropy: floats((i) => i / 2),
    advantage: floats(() => 1),
    weight: floats(() => 1),
    effective_advantage: floats(() => 1),
    contribution: floats((i) => -i),
    importance: vectorFromArray(importance, new Float32()),
    // without a type, the library dictionary-encodes strings, as polars/pyarrow may also write them
    section: vectorFromArray(
      Array.from({ length: n }, (_, i) => ((start + i) % 2 ? 'answer' : 'think')),
      dictionarySection ? undefined : new Utf8(),
    ),
    token_type: vectorFromArray(
      Array.from({ length: n }, () => 'reasoning'),
      new Utf8(),
    ),
    reward: floats(() => 0.5),
  });
}

test('reads a multi-batch table built by the Arrow library (chunk offsets, null bitmaps)', () => {
  // Two record batches of 3 and 2 rows; a null in a string column that the contract keeps non-null reads
  // as '', a null importance as NaN.
  const table = libraryTable(0, ['a', 'ß', null], [null, 2, 3], false).concat(libraryTable(3, ['🙂', 'z'], [4, null], false));
  assert.equal(table.batches.length, 2);
  const dir = tmp();
  try {
    const p = join(dir, 'x.arrow');
    writeFileSync(p, tableToIPC(table, 'file'));
    const back = readTokenTable(p);
    assert.deepEqual(back.token, ['a', 'ß', '', '🙂', 'z']);
    assert.deepEqual(Array.from(back.importance!), [NaN, 2, 3, 4, NaN]);
    assert.equal(back.attribution, null, 'a column the writer left out reads as null');
    assert.deepEqual(back.section, ['think', 'answer', 'think', 'answer', 'think']);
    assert.deepEqual(Array.from(back.episode), [0, 1, 2, 3, 4]);
    assert.deepEqual(Array.from(back.entropy), [0, 0.5, 1, 1.5, 2]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('reads dictionary-encoded string columns as plain strings', () => {
  const table = libraryTable(0, ['x', 'y', 'x'], [1, 2, 3], true);
  assert.equal(String(table.schema.fields.find((f) => f.name === 'section')!.type), 'Dictionary<Int32, Utf8>');
  const dir = tmp();
  try {
    const p = join(dir, 'd.arrow');
    writeFileSync(p, tableToIPC(table, 'file'));
    assert.deepEqual(readTokenTable(p).section, ['think', 'answer', 'think']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('readTokenTables concatenates logged steps in order within [fromStep, toStep]', () => {
  const dir = tmp();
  try {
    mkdirSync(join(dir, 'tokens'));
    const mk = (step: number, n: number, withAttribution: boolean): TokenColumns => {
      const c = sampleTokens();
      const cut = <T extends { slice(a: number, b: number): T }>(a: T) => a.slice(0, n);
      return {
        ...c,
        step: new Int32Array(n).fill(step),
        episode: cut(c.episode),
        prompt_idx: cut(c.prompt_idx),
        position: cut(c.position),
        token_id: cut(c.token_id),
        token: cut(c.token),
        logprob: cut(c.logprob),
        entropy: cut(c.entropy),
        advantage: cut(c.advantage),
        weight: cut(c.weight),
        effective_advantage: cut(c.effective_advantage),
        contribution: cut(c.contribution),
        attribution: withAttribution ? new Float32Array(n).fill(step) : null,
        importance: null,
        section: cut(c.section),
        token_type: cut(c.token_type),
        reward: cut(c.reward),
      };
    };
    // written out of order; step 10 sorts after step 2 numerically, before it as text
    writeTokenTable(stepFile(dir, 'tokens', 10), mk(10, 2, true));
    writeTokenTable(stepFile(dir, 'tokens', 2), mk(2, 3, false));
    writeTokenTable(stepFile(dir, 'tokens', 1), mk(1, 1, false));
    writeFileSync(stepFile(dir, 'tokens', 11) + '.tmp-123', 'half a table'); // an in-progress write is not a step

    const all = readTokenTables(dir);
    assert.deepEqual(Array.from(all.step), [1, 2, 2, 2, 10, 10]);
    assert.deepEqual(all.token, ['<think>', '<think>', 'é', '😀x', '<think>', 'é']);
    // step 10 has attribution, the others not: their rows are NaN
    assert.deepEqual(Array.from(all.attribution!), [NaN, NaN, NaN, NaN, 10, 10]);
    assert.equal(all.importance, null);

    const mid = readTokenTables(dir, { fromStep: 2, toStep: 9 });
    assert.deepEqual(Array.from(mid.step), [2, 2, 2]);
    assert.equal(mid.attribution, null);
    assert.equal(readTokenTables(dir, { fromStep: 50 }).step.length, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('extra per-token columns: written after the contract columns as nullable float32, read back by name, NaN where absent', () => {
  const dir = tmp();
  try {
    mkdirSync(join(dir, 'tokens'));
    const c = sampleTokens();
    const n = c.step.length;
    const ratio = Array.from({ length: n }, (_, i) => (i === 1 ? null : 1 + i / 10));
    writeTokenTable(stepFile(dir, 'tokens', 1), { ...c, extra: { importance_ratio: ratio } });
    writeTokenTable(stepFile(dir, 'tokens', 2), { ...c, step: new Int32Array(n).fill(2) });
    const t = tableFromIPC(readFileSync(stepFile(dir, 'tokens', 1)));
    // the contract's columns first, in order, so that a design.md#run-directory schema check still passes on the prefix
    assert.deepEqual(
      t.schema.fields.map((f) => f.name),
      [...TOKEN_SCHEMA.fields.map((f) => f.name), 'importance_ratio'],
    );
    assert.equal(String(t.schema.fields.at(-1)!.type), 'Float32');
    const one = readTokenTable(stepFile(dir, 'tokens', 1));
    assert.deepEqual(
      Array.from(one.extra.importance_ratio),
      ratio.map((x) => (x === null ? NaN : Math.fround(x))),
    );
    const both = readTokenTables(dir);
    assert.deepEqual(Array.from(both.extra.importance_ratio.slice(n)), Array(n).fill(NaN), 'rows of a step without the column');
    assert.deepEqual(readTokenTable(stepFile(dir, 'tokens', 2)).extra, {});
    for (const bad of ['logprob', 'Bad-Name', '']) {
      assert.throws(() => writeTokenTable(stepFile(dir, 'tokens', 3), { ...c, extra: { [bad]: ratio } }), /extra column name/);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('timing: 100k-token step write + read (printed, not asserted)', () => {
  const dir = tmp();
  try {
    const n = 100_000;
    const vocab = ['3', ' +', '<think>', '</think>', '\n', 'é', ' the', '÷', '12', '(', ')', ' answer'];
    const sections = ['think', 'answer', 'other'] as const;
    const f = (k: number) => Float32Array.from({ length: n }, (_, i) => ((i * k) % 97) / 97);
    const cols: TokenColumns = {
      step: new Int32Array(n).fill(1),
      episode: Int32Array.from({ length: n }, (_, i) => i >> 6),
      prompt_idx: Int32Array.from({ length: n }, (_, i) => i >> 9),
      position: Int32Array.from({ length: n }, (_, i) => i & 63),
      token_id: Int32Array.from({ length: n }, (_, i) => i % vocab.length),
      token: Array.from({ length: n }, (_, i) => vocab[i % vocab.length]),
      logprob: f(1),
      entropy: f(2),
      advantage: f(3),
      weight: f(5),
      effective_advantage: f(7),
      contribution: f(11),
      attribution: f(13),
      importance: null,
      section: Array.from({ length: n }, (_, i) => sections[i % 3]),
      token_type: Array.from({ length: n }, (_, i) => (i % 2 ? 'reasoning' : 'filler')),
      reward: f(17),
    };
    const p = join(dir, 'big.arrow');
    const t0 = performance.now();
    writeTokenTable(p, cols);
    const t1 = performance.now();
    const back = readTokenTable(p);
    const t2 = performance.now();
    console.log(`# 100k token rows: write ${(t1 - t0).toFixed(1)} ms, read ${(t2 - t1).toFixed(1)} ms`);
    assert.equal(back.token[99_999], vocab[99_999 % vocab.length]);
    assert.equal(back.attribution![12345], cols.attribution![12345]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('probe tables: their schema, written and read back with null δ, checked on read, and joined onto the tokens', () => {
  const dir = tmp();
  try {
    assert.deepEqual(describe(PROBE_SCHEMA.fields), [
      ['episode', 'Int32', false],
      ['position', 'Int32', false],
      ['value', 'Float32', false],
      ['value_se', 'Float32', false],
      ['rollouts', 'Int32', false],
      ['delta', 'Float32', true],
      // the two independent halves' values: null in tables of probes that kept none
      ['value_a', 'Float32', true],
      ['value_b', 'Float32', true],
      // each half's variance as an estimate (s²/m): null in tables of probes that kept none
      ['value_var_a', 'Float32', true],
      ['value_var_b', 'Float32', true],
    ]);
    // episode 1 probed at 0, 1, 2 (n = 2: V_2 is its reward); episode 3 at 0 and 2 only (segments of 2)
    const cols = {
      episode: Int32Array.of(1, 1, 1, 3, 3),
      position: Int32Array.of(0, 1, 2, 0, 2),
      value: Float32Array.of(0.25, 0.5, 1, 0.125, 0),
      value_se: Float32Array.of(0.1, 0.1, 0, 0.05, 0),
      rollouts: Int32Array.of(8, 8, 0, 8, 0),
      delta: Float32Array.of(0.25, 0.5, NaN, NaN, NaN),
      value_a: Float32Array.of(0.25, 0.75, 1, 0.25, 0),
      value_b: Float32Array.of(0.25, 0.25, 1, 0, 0),
      value_var_a: Float32Array.of(0.0625, 0.0625, 0, 0.0625, 0),
      value_var_b: Float32Array.of(0.0625, 0.0625, 0, 0, 0),
    };
    const path = join(dir, 'p.arrow');
    // a table from before the variances were kept reads them as NaN
    const { value_var_a: _, value_var_b: __, ...older } = cols;
    writeProbeTable(path, older);
    assert.ok(readProbeTable(path).value_var_a!.every(Number.isNaN));
    writeProbeTable(path, cols);
    const t = tableFromIPC(readFileSync(path));
    assert.deepEqual(describe(t.schema.fields), describe(PROBE_SCHEMA.fields));
    assert.equal(t.getChild('delta')!.nullCount, 3, 'NaN δ is written as null');
    const back = readProbeTable(path);
    assert.deepEqual(back, cols);
    // tokens of step: episode 1 has 2 tokens, episode 3 has 2 tokens, episode 0 was not probed
    const tokens = {
      episode: Int32Array.of(0, 1, 1, 3, 3),
      position: Int32Array.of(0, 0, 1, 0, 1),
      extra: {} as Record<string, Float32Array>,
    };
    joinProbeColumns(tokens as unknown as Parameters<typeof joinProbeColumns>[0], back);
    const nan = NaN;
    assert.deepEqual(tokens.extra.mc_value, Float32Array.of(nan, 0.25, 0.5, 0.125, nan));
    assert.deepEqual(tokens.extra.mc_delta, Float32Array.of(nan, 0.25, 0.5, nan, nan));
    assert.deepEqual(tokens.extra.mc_rollouts, Float32Array.of(nan, 8, 8, 8, nan));
    // δ's standard error from the two values' independent ones: √(0.1² + 0.1²) at position 0, √(0.1² + 0²) at 1
    assert.deepEqual(tokens.extra.mc_delta_se, Float32Array.of(nan, Math.hypot(0.1, 0.1), Math.fround(0.1), nan, nan));
    // out of order rows are a corrupted table, named as such
    writeProbeTable(path, { ...cols, position: Int32Array.of(0, 2, 1, 0, 2) });
    assert.throws(
      () => readProbeTable(path),
      (e: unknown) => isUserError(e) && /row 2 has rows out of \(episode, position\) order/.test(e.message),
    );
    writeFileSync(path, readFileSync(path).subarray(0, 100));
    assert.throws(
      () => readProbeTable(path),
      (e: unknown) => isUserError(e) && /not a readable Arrow IPC file/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
