// credit.strategy cal (seed doc 003, design.md#semantics): Â by hand, prepare() with the rule oracle on hand-made episodes, and
// two runs of the real trainer: one with the rule oracle, one with the openai oracle against a local HTTP server, after
// which every file the run wrote and everything it reported is searched for the API key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEpisodeTable, readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { validateConfig } from '../../../src/engine/config/config';
import { getStrategy, type CreditBatch } from '../../../src/engine/credit';
import { DEFAULT_CREDIT_PARAMS, type EpisodeView, type PrepareContext } from '../../../src/engine/credit/types';
import { isUserError } from '../../../src/engine/core/errors';
import { stepHolds } from '../../../src/engine/oracle/rule';
import { calDivisors } from '../../../src/engine/credit/cal';
import { readMetrics } from '../../../src/engine/rundir/rundir';
import { makeCountdownTask } from '../../../src/engine/tasks/countdown';
import { CharTokenizer } from '../../../src/engine/model/tokenizer';
import { train, type Reporter } from '../../../src/engine/train/train';
import type { Example, TokenSpan } from '../../../src/engine/core/types';
import { tinyConfig } from '../fixtures';
import { firstLineSpan, incorrectOf, openaiAnswer, startLlmServer } from '../oracle/llm_server';

const cal = getStrategy('cal');
const dir = mkdtempSync(join(tmpdir(), 'cl-cal-'));

test('effectiveAdvantages by hand: negative_reward on the span, 0 on the rest of its episode, A_i elsewhere', () => {
  const batch: CreditBatch = {
    logprobs: [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ],
    entropies: [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ],
    sections: [
      ['think', 'think', 'think', 'other'],
      ['think', 'think', 'answer', 'answer'],
      ['think', 'think', 'think', 'think'],
    ],
    mask: [
      [1, 1, 1, 0],
      [1, 1, 1, 1],
      [1, 1, 0, 0],
    ],
    // ep0: span on tokens 1-2; ep1: no span (correct, or the oracle failed); ep2: a null row.
    spanMask: [[0, 1, 1, 0], null, [0, 0, 0, 0]],
  };
  const adv = [-0.5, 1.2, -0.7];
  // ep0 → [0, −2, −2, 0 (padding)]; ep1 keeps A = 1.2 on its 4 valid tokens; ep2 (all-zero span row = no span)
  // keeps A = −0.7 on its 2 valid tokens.
  assert.deepEqual(cal.effectiveAdvantages!(batch, adv, { ...DEFAULT_CREDIT_PARAMS, negative_reward: -2 } as never), [
    [0, -2, -2, 0],
    [1.2, 1.2, 1.2, 1.2],
    [-0.7, -0.7, 0, 0],
  ]);
  // The logged weight: the span as a 0/1 mask in span episodes, 1 on the valid tokens of the others.
  assert.deepEqual(cal.weights(batch, DEFAULT_CREDIT_PARAMS), [
    [0, 1, 1, 0],
    [1, 1, 1, 1],
    [1, 1, 0, 0],
  ]);
});

test("cal.scale group_std and cal.placement episode by hand: the span signal on the advantages' scale, or spread over the episode", () => {
  // Group 0 rewards {0, 1.1, 0.1} (one episode of the group has the span), group 1 {0, 0} (std 0).
  // Group 0: mean 0.4, sample std √(((0.4)² + (0.7)² + (0.3)²)/2) = √0.37 = 0.608276; divisor 0.608376.
  // Group 1: std 0 → the batch std of {0, 1.1, 0.1, 0, 0}: mean 0.24, Σ(r − mean)² = 0.0576·3 + 0.7396 + 0.0196 = 0.932,
  // /4 = 0.233, √ = 0.482701; divisor 0.482801. A batch of equal rewards → 1.
  const d = calDivisors([0, 1.1, 0.1, 0, 0], [0, 0, 0, 1, 1]);
  assert.ok(Math.abs(d[0] - 0.608376) < 1e-6 && Math.abs(d[3] - 0.482801) < 1e-6, String(d));
  assert.deepEqual(calDivisors([0.1, 0.1], [0, 0]), [1, 1]);
  const batch: CreditBatch = {
    logprobs: [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ],
    entropies: [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ],
    sections: [
      ['think', 'think', 'think', 'other'],
      ['think', 'think', 'answer', 'answer'],
    ],
    mask: [
      [1, 1, 1, 0],
      [1, 1, 1, 1],
    ],
    spanMask: [[0, 1, 1, 0], null],
    calDivisor: [0.5, 2],
  };
  const p = { ...DEFAULT_CREDIT_PARAMS, negative_reward: -1 } as never;
  // group_std: −1 / 0.5 = −2 on the span; the other episode keeps A.
  assert.deepEqual(cal.effectiveAdvantages!(batch, [0.3, 0.4], p), [
    [0, -2, -2, 0],
    [0.4, 0.4, 0.4, 0.4],
  ]);
  // episode placement: the span's total −2·2 = −4 spread over the 3 valid tokens: −4/3 each; the sum is the same.
  const ep = cal.effectiveAdvantages!(batch, [0.3, 0.4], { ...(p as object), placement: 'episode' } as never);
  assert.deepEqual(
    ep[0].map((x) => Math.round(x * 1e6) / 1e6),
    [-1.333333, -1.333333, -1.333333, 0],
  );
  assert.ok(Math.abs(ep[0].reduce((a, b) => a + b, 0) - -4) < 1e-12);
  assert.deepEqual(cal.weights(batch, { ...(p as object), placement: 'episode' } as never), [
    [1, 1, 1, 0],
    [1, 1, 1, 1],
  ]);
  // Both keys are in the config schema with their defaults.
  const { config } = validateConfig({ credit: { strategy: 'cal' } });
  assert.deepEqual([config!.credit.cal.scale, config!.credit.cal.placement], ['raw', 'span']);
  assert.ok(validateConfig({ credit: { cal: { scale: 'zscore' } } }).issues.some((i) => i.path === 'credit.cal.scale'));
});

function charTokens(text: string): TokenSpan[] {
  return [...text].map((c, i) => ({ id: 0, text: c, start: i, end: i + 1 }));
}

test('prepare with the rule oracle: spans, oracle_span text, metrics; the span is cut to max_error_span tokens', async () => {
  const { config } = validateConfig({ task: { name: 'countdown' }, credit: { strategy: 'cal', cal: { max_error_span: 4 } } });
  const task = makeCountdownTask({ numbers: [3, 3], max_number: 10, max_target: 30, reward: 'grpo_zero', prompt: 'compact', train_size: 4, eval_size: 1 }, 1);
  const exA: Example = { id: 0, prompt: '3 5 2 -> 16\n<think>', numbers: [3, 5, 2], target: 16 };
  const exB: Example = { id: 1, prompt: '2 3 4 -> 20\n<think>', numbers: [2, 3, 4], target: 20 };
  const groups: [Example, string][] = [
    [exA, '5+3=8\n8*2=16</think>\n<answer>(5+3)*2</answer>'], // correct
    [exA, '5+3=9\n9*2=18</think>\n<answer>(5+3)*2+2</answer>'], // first step wrong
    [exB, '2+3=5\n5*4=20</think>'], // steps right, no answer: no span
    [exB, '2+3=5\n5*4=20</think>\n<answer>(2+3)*4*1</answer>'], // steps right, answer uses a 1 it was not given
  ];
  const episodes: EpisodeView[] = groups.map(([ex, completion], i) => {
    const reward = task.reward(completion, ex);
    return {
      index: i,
      group: i < 2 ? 0 : 1,
      example: ex,
      prefill: task.prefill,
      completion,
      tokens: charTokens(completion),
      promptIds: [],
      ids: [...completion].map(() => 3),
      reward,
      success: task.isSuccess(reward),
      advantage: 0,
      logprobs: [...completion].map(() => -1),
      entropies: [...completion].map(() => 1),
      sections: [...completion].map(() => 'think' as const),
    };
  });
  assert.deepEqual(
    episodes.map((e) => e.reward.answer),
    [1, 0, 0, 0],
  );
  const logs: string[] = [];
  const ctx: PrepareContext = {
    step: 1,
    runDir: dir,
    cfg: config!,
    task,
    tokenizer: CharTokenizer.fromAlphabet(task.alphabet()),
    log: (_l, m) => logs.push(m),
  };
  const p = await cal.prepare!(episodes, ctx);
  // ep1: "5+3=9" is characters 0..5, cut to 4 tokens "5+3="; ep3: "(2+3)*4*1" starts after "2+3=5\n5*4=20</think>\n<answer>"
  // (6 + 6 + 9 + 8 = 29), cut to "(2+3".
  const four = (from: number, n: number) => Array.from({ length: n }, (_, t) => (t >= from && t < from + 4 ? 1 : 0));
  assert.deepEqual(p.batch!.spanMask, [null, four(0, groups[1][1].length), null, four(29, groups[3][1].length)]);
  assert.deepEqual(p.oracleSpans, [null, '5+3=', null, '(2+3']);
  assert.deepEqual(p.metrics, { 'cal/oracle_calls': 3, 'cal/cache_hits': 0, 'cal/failures': 1, 'cal/span_tokens': 8, 'cal/requests': 0 });
  assert.match(logs.join('\n'), /step 1: cal: 1 of 3 wrong episodes got no error span .*1× no wrong step and no answer/);
});

test('the rule oracle refuses a jsonl task with a UserError', async () => {
  const { config } = validateConfig({ credit: { strategy: 'cal' } });
  const { createOracle } = await import('../../../src/engine/oracle');
  assert.throws(
    () => createOracle({ cal: config!.credit.cal, task: 'jsonl', reward: 'grpo_zero', cacheDir: null }),
    (e: Error) => isUserError(e) && /countdown and arithmetic/.test(e.message),
  );
});

interface Logged {
  tok: ReturnType<typeof readTokenTable>;
  ep: ReturnType<typeof readEpisodeTable>;
}

function loggedSteps(runDir: string): Logged[] {
  return readdirSync(join(runDir, 'tokens'))
    .sort()
    .map((f) => ({
      tok: readTokenTable(join(runDir, 'tokens', f)),
      ep: readEpisodeTable(join(runDir, 'episodes', f)),
    }));
}

/** Checks design.md#semantics `cal` on the logged tables; returns how many episodes got a span. */
function checkCalTables(runDir: string, negativeReward: number, maxSpan: number): number {
  let spans = 0;
  for (const { tok, ep } of loggedSteps(runDir)) {
    for (let i = 0; i < ep.episode.length; i++) {
      const rows = [...tok.episode.keys()].filter((k) => tok.episode[k] === ep.episode[i]);
      const span = ep.oracle_span[i];
      if (span !== null) {
        spans++;
        assert.ok(ep.reward_answer[i] < 1, 'only wrong answers get a span');
        // The marked tokens are contiguous, spell the logged span, and number at most max_error_span.
        const marked = rows.filter((k) => tok.effective_advantage[k] !== 0);
        assert.ok(marked.length >= 1 && marked.length <= maxSpan);
        assert.equal(marked.map((k) => tok.token[k]).join(''), span);
        assert.ok(ep.completion[i].includes(span));
        for (const k of rows) {
          const inSpan = marked.includes(k);
          assert.equal(tok.effective_advantage[k], inSpan ? negativeReward : 0);
          assert.equal(tok.weight[k], inSpan ? 1 : 0);
        }
        assert.deepEqual(marked, rows.slice(rows.indexOf(marked[0]), rows.indexOf(marked[0]) + marked.length));
      } else {
        for (const k of rows) {
          assert.equal(tok.effective_advantage[k], tok.advantage[k]);
          assert.equal(tok.weight[k], 1);
        }
      }
    }
  }
  return spans;
}

test('a countdown run with cal + the rule oracle trains, and logs spans that are wrong steps or answers', async () => {
  const cfg = tinyConfig(dir, 'countdown', 'credit: { strategy: cal, cal: { provider: rule, negative_reward: -1.5, max_error_span: 6 } }\n');
  const r = await train({ configPath: cfg, sets: ['sft.steps=80', 'sft.lr=5e-3'] });
  assert.equal(r.status, 'completed');
  const grpo = readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
  assert.equal(grpo.length, 3);
  const steps = loggedSteps(r.runDir);
  grpo.forEach((m, s) => {
    for (const [k, v] of Object.entries(m)) if (typeof v === 'number') assert.ok(Number.isFinite(v), k);
    // One oracle query per wrong episode of the step; the rule oracle sends no requests and caches nothing.
    const wrong = [...steps[s].ep.reward_answer].filter((a) => a < 1).length;
    assert.equal(m['cal/oracle_calls'], wrong);
    assert.equal(m['cal/cache_hits'], 0);
    assert.equal(m['cal/requests'], 0);
    const spans = steps[s].ep.oracle_span.filter((x) => x !== null);
    assert.equal(m['cal/failures'], wrong - spans.length);
    assert.equal(m['cal/span_tokens'], [...steps[s].tok.effective_advantage].filter((a) => a === -1.5).length);
  });
  const spans = checkCalTables(r.runDir, -1.5, 6);
  assert.ok(spans > 0, 'some wrong episodes got a span');
  // Each span starts a think step that does not hold (it may be cut at 6 tokens), or the answer block's content.
  for (const { ep } of steps) {
    ep.oracle_span.forEach((s, i) => {
      if (s === null) return;
      const c = ep.completion[i];
      const at = c.indexOf(s);
      const thinkEnd = c.indexOf('</think>') >= 0 ? c.indexOf('</think>') : c.length;
      if (at < thinkEnd) {
        const ends = [c.indexOf('\n', at), thinkEnd, c.indexOf('<answer>', at)].filter((x) => x >= 0);
        const step = c.slice(at, Math.min(...ends));
        assert.ok(step.startsWith(s) && step.includes('=') && !stepHolds(step.trim()), `span ${JSON.stringify(s)} in ${JSON.stringify(c)}`);
      } else {
        const content = /<answer>([\s\S]*?)<\/answer>/.exec(c)![1];
        assert.ok(content.trim().startsWith(s) || `<answer>${content}</answer>`.startsWith(s), `span ${JSON.stringify(s)} in ${JSON.stringify(c)}`);
      }
    });
  }
});

function filesUnder(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(root);
  return out;
}

test("a run with cal.scale group_std and cal.placement episode trains; a span episode's credit is even and sums to the scaled span total", async () => {
  const cfg = tinyConfig(
    dir,
    'countdown',
    'credit: { strategy: cal, cal: { provider: rule, negative_reward: -1, max_error_span: 4, scale: group_std, placement: episode } }\n',
  );
  const r = await train({ configPath: cfg, sets: ['name=cal-ablation', 'sft.steps=80', 'sft.lr=5e-3'] });
  assert.equal(r.status, 'completed');
  let checked = 0;
  for (const { ep, tok } of loggedSteps(r.runDir)) {
    for (let i = 0; i < ep.episode.length; i++) {
      if (ep.oracle_span[i] === null) continue;
      const rows = [...tok.episode.keys()].filter((k) => tok.episode[k] === ep.episode[i]);
      const vals = rows.map((k) => tok.effective_advantage[k]);
      // placement episode: one value over the whole episode, negative (the span's scaled total spread evenly).
      assert.ok(
        vals.every((v) => Math.abs(v - vals[0]) < 1e-6 && v < 0),
        String(vals),
      );
      checked++;
    }
  }
  assert.ok(checked > 0, 'some wrong episode got a span');
});

test('a countdown run with cal + the openai oracle on a local server trains; the key appears nowhere', async () => {
  const keyEnv = 'CREDIT_LENS_CAL_RUN_KEY';
  const key = `sk-run-${Math.random().toString(36).slice(2)}-${Date.now()}`;
  const cacheRoot = mkdtempSync(join(tmpdir(), 'cl-cal-xdg-'));
  const saved = { key: process.env[keyEnv], xdg: process.env.XDG_CACHE_HOME };
  process.env[keyEnv] = key;
  process.env.XDG_CACHE_HOME = cacheRoot;
  // The first query's prompt always fails with a body that echoes the Authorization header (some proxies do); the
  // others blame the first line of the completion, as a judge might.
  let poisoned: string | null = null;
  const srv = await startLlmServer((r, n) => {
    if (n === 0) poisoned = r.prompt;
    return r.prompt === poisoned
      ? { status: 503, body: JSON.stringify({ error: `upstream down; request had authorization: ${r.headers.authorization}` }) }
      : { body: openaiAnswer(JSON.stringify({ error_span: firstLineSpan(incorrectOf(r.prompt)) })) };
  });
  const reported: string[] = [];
  const reporter: Reporter = {
    started: (p) => reported.push(JSON.stringify(p)),
    progress: (p) => reported.push(JSON.stringify(p)),
    metrics: (d, row) => reported.push(d, JSON.stringify(row)),
    log: (l, m) => reported.push(l, m),
    finished: (p) => reported.push(JSON.stringify(p)),
  };
  try {
    const cfg = tinyConfig(
      dir,
      'countdown',
      `credit: { strategy: cal, cal: { provider: openai, model: judge, base_url: "${srv.url}", ` +
        `api_key_env: ${keyEnv}, max_retries: 0, concurrency: 2 } }\n`,
    );
    const r = await train({ configPath: cfg, sets: ['sft.steps=80', 'sft.lr=5e-3'], reporter });
    assert.equal(r.status, 'completed');
    assert.ok(srv.received.length > 1);
    assert.ok(srv.received.every((q) => q.headers.authorization === `Bearer ${key}` && q.path === '/v1/chat/completions'));
    const grpo = readMetrics(r.runDir).filter((m) => m.phase === 'grpo');
    const sum = (k: string) => grpo.reduce((a, m) => a + (m[k] as number), 0);
    // Every HTTP request is one oracle query that missed the cache (max_retries 0); the 503 is the one failure that
    // the server caused, the rest of the failures are empty first lines (a completion that is all "<think>"...).
    assert.equal(sum('cal/requests'), srv.received.length);
    assert.equal(sum('cal/oracle_calls') - sum('cal/cache_hits'), srv.received.length);
    assert.ok(sum('cal/failures') >= 1);
    assert.ok(checkCalTables(r.runDir, -1, 64) > 0);
    const log = readFileSync(join(r.runDir, 'engine.log'), 'utf8');
    // The echo reached the log, redacted.
    assert.match(log, /HTTP 503: \{"error":"upstream down; request had authorization: Bearer \[redacted\]"\}/);

    // Everything the run wrote (run directory and the oracle cache) and everything it reported: no key.
    const written = [...filesUnder(r.runDir), ...filesUnder(cacheRoot)];
    assert.ok(
      written.some((f) => f.startsWith(join(cacheRoot, 'credit-lens', 'oracle'))),
      'replies were cached',
    );
    for (const f of written) assert.ok(!readFileSync(f).includes(key), `key found in ${f}`);
    for (const x of reported) assert.ok(!x.includes(key), `key reported: ${x.slice(0, 200)}`);
    assert.match(readFileSync(join(r.runDir, 'config.yaml'), 'utf8'), new RegExp(`api_key_env: ${keyEnv}`));

    // A rerun of the same config (same seed, same rollouts) asks the server only what the first run could not cache
    // (the 503's prompt, and any reply that was not kept), a few of the first run's prompts and nothing new; the rest
    // come from the cache, and the rerun fails where the first run failed, so it trains on the same spans.
    const before = srv.received.length;
    const again = await train({ configPath: cfg, sets: ['sft.steps=80', 'sft.lr=5e-3'] });
    assert.equal(again.status, 'completed');
    const rerunAsked = srv.received.slice(before);
    const asked = new Set(srv.received.slice(0, before).map((q) => q.prompt));
    assert.ok(rerunAsked.length >= 1 && rerunAsked.length < before / 2, `${rerunAsked.length} asked again of ${before}`);
    assert.ok(
      rerunAsked.every((q) => asked.has(q.prompt)),
      'nothing new was asked',
    );
    assert.ok(
      rerunAsked.some((q) => q.prompt === poisoned),
      'the 503 is asked again',
    );
    const rerun = readMetrics(again.runDir).filter((m) => m.phase === 'grpo');
    const rsum = (k: string) => rerun.reduce((a, m) => a + (m[k] as number), 0);
    assert.equal(rsum('cal/requests'), rerunAsked.length);
    assert.equal(rsum('cal/failures'), sum('cal/failures'));
  } finally {
    await srv.close();
    for (const [k, v] of [
      [keyEnv, saved.key],
      ['XDG_CACHE_HOME', saved.xdg],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('a missing key variable fails the run with a UserError naming it', async () => {
  const cfg = tinyConfig(dir, 'countdown', 'credit: { strategy: cal, cal: { provider: gemini, model: g, api_key_env: CREDIT_LENS_NOT_SET_ANYWHERE_KEY } }\n');
  await assert.rejects(
    train({ configPath: cfg, sets: ['sft.steps=0'] }),
    (e: Error) => isUserError(e) && /CREDIT_LENS_NOT_SET_ANYWHERE_KEY is not set/.test(e.message),
  );
});
