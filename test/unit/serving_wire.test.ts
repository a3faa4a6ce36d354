// The SGLang and vLLM clients' requests and response parsing, against request/response pairs written from
// docs/serving.md (itself from SGLang's io_struct.py and vLLM's protocol.py), and the run's stop rules applied to
// what a server returns (cutContinuation). Why written pairs: SGLang has no CPU build on the package index, so these are
// the only check of its wire format here; vLLM's are checked against the real server too (serving/vllm_cpu.test.ts) and
// stay as the fast check.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cutContinuation, stopAfterTail, type SampleRequest, type SampleSettings } from '../../src/engine/model/sampling';
import { errorMessage } from '../../src/engine/server_apis/types';
import { parseSglangGenerate, parseSglangScore, sglangGenerateBody, sglangScoreBody } from '../../src/engine/server_apis/sglang';
import { parseVllmCompletion, parseVllmScore, vllmCompletionBody } from '../../src/engine/server_apis/vllm';

const req: SampleRequest = { prefix: [151644, 872, 198], tail: [], seeds: [12345, 777], maxNewTokens: 64 };
const settings: SampleSettings = { temperature: 1, topP: 1, eosIds: [151643], stop: ['</answer>'] };

test('SGLang: one batch of M rows of the prefix, each with its own sampling_seed, log-probs of the output only', () => {
  const body = sglangGenerateBody(req, settings);
  assert.deepEqual(body, {
    input_ids: [
      [151644, 872, 198],
      [151644, 872, 198],
    ],
    sampling_params: [12345, 777].map((seed) => ({
      max_new_tokens: 64,
      temperature: 1,
      top_p: 1,
      top_k: -1,
      stop_token_ids: [151643],
      stop: ['</answer>'],
      no_stop_trim: true,
      sampling_seed: seed,
      n: 1,
    })),
    return_logprob: true,
    logprob_start_len: -1,
    top_logprobs_num: 0,
  });
});

test('SGLang: a batch response with a length finish, a matched EOS id and a matched stop string; −inf clamped; errors in both shapes', () => {
  // serving.md#sglang: a list of {"text", "meta_info": {"finish_reason": {"type", "matched"}, "output_token_logprobs": [[lp, id, text|null]]}}
  const response = [
    {
      text: 'ab',
      meta_info: {
        id: 'r0',
        finish_reason: { type: 'length', length: 2 },
        prompt_tokens: 3,
        completion_tokens: 2,
        cached_tokens: 3,
        output_token_logprobs: [
          [-0.5, 10, null],
          [-999999999, 11, null],
        ],
      },
    },
    {
      text: 'c',
      meta_info: { id: 'r1', finish_reason: { type: 'stop', matched: 151643 }, output_token_logprobs: [[-1.25, 151643, null]] },
    },
  ];
  const out = parseSglangGenerate(response, 2);
  assert.ok(Array.isArray(out));
  assert.deepEqual(out[0], { ids: [10, 11], logprobs: [-0.5, -Infinity], finish: 'length', matched: null });
  assert.deepEqual(out[1], { ids: [151643], logprobs: [-1.25], finish: 'stop', matched: 151643 });
  // one request answers with one object
  const one = parseSglangGenerate(
    { text: 'x', meta_info: { finish_reason: { type: 'stop', matched: '</answer>' }, output_token_logprobs: [[-0.1, 5, 'x']] } },
    1,
  );
  assert.deepEqual(one, [{ ids: [5], logprobs: [-0.1], finish: 'stop', matched: '</answer>' }]);
  assert.match(parseSglangGenerate(response, 3) as string, /expected 3 results, got 2/);
  assert.match(parseSglangGenerate([{ text: 'x', meta_info: {} }], 1) as string, /no output_token_logprobs/);
  assert.equal(errorMessage({ error: { message: 'bad input_ids' } }), 'bad input_ids');
  assert.equal(errorMessage({ object: 'error', message: 'too long', code: 400 }), 'too long');
});

test('vLLM: one request with n: M and the first seed (child i samples with seed + i), ids in, token ids back', () => {
  assert.deepEqual(vllmCompletionBody(req, settings, 'Qwen/Qwen2.5-0.5B'), {
    model: 'Qwen/Qwen2.5-0.5B',
    prompt: [151644, 872, 198],
    n: 2,
    max_tokens: 64,
    temperature: 1,
    top_p: 1,
    seed: 12345,
    stop: ['</answer>'],
    stop_token_ids: [151643],
    include_stop_str_in_output: true,
    logprobs: 0,
    return_token_ids: true,
    add_special_tokens: false,
    skip_special_tokens: false,
  });
});

test('vLLM: choices by index, stop_reason an id, a string or null (the model’s EOS), older builds’ "token_id:N" tokens; errors', () => {
  const response = {
    id: 'cmpl-1',
    object: 'text_completion',
    created: 1,
    model: 'm',
    choices: [
      {
        index: 1,
        text: '</answer>',
        finish_reason: 'stop',
        stop_reason: '</answer>',
        token_ids: [7, 8],
        prompt_token_ids: [1, 2],
        logprobs: { tokens: ['</', 'answer>'], token_logprobs: [-0.2, -0.3], top_logprobs: [{}, {}], text_offset: [0, 2] },
      },
      {
        index: 0,
        text: 'x',
        finish_reason: 'length',
        stop_reason: null,
        token_ids: [9],
        logprobs: { tokens: ['x'], token_logprobs: [-1], top_logprobs: [{}], text_offset: [0] },
      },
    ],
    usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
  };
  assert.deepEqual(parseVllmCompletion(response, 2), [
    { ids: [9], logprobs: [-1], finish: 'length', matched: null },
    { ids: [7, 8], logprobs: [-0.2, -0.3], finish: 'stop', matched: '</answer>' },
  ]);
  const older = {
    choices: [{ index: 0, finish_reason: 'stop', stop_reason: null, logprobs: { tokens: ['token_id:5', 'token_id:151643'], token_logprobs: [-0.5, -0.1] } }],
  };
  assert.deepEqual(parseVllmCompletion(older, 1), [{ ids: [5, 151643], logprobs: [-0.5, -0.1], finish: 'stop', matched: null }]);
  assert.match(parseVllmCompletion({ choices: [{ index: 0, text: 'x', finish_reason: 'length' }] }, 1) as string, /no token_ids/);
  assert.match(parseVllmCompletion({ choices: [response.choices[0], response.choices[0]] }, 2) as string, /appears twice/);
  assert.equal(
    errorMessage({ error: { message: 'This model’s maximum context length is 32 tokens', type: 'BadRequestError', param: 'prompt', code: 400 } }),
    'This model’s maximum context length is 32 tokens',
  );
  assert.equal(errorMessage({ object: 'error', message: 'old shape', type: 'BadRequestError', param: null, code: 400 }), 'old shape');
});

// A character tokenizer: id i is the i-th character of the alphabet (EOS 0 decodes to nothing).
const alphabet = '\u0000abc</>nswer7 ';
const decode = (ids: number[]) => ids.map((i) => (i === 0 ? '' : alphabet[i])).join('');
const enc = (s: string) => [...s].map((c) => alphabet.indexOf(c));

test('the run’s stop rules on a server’s continuation: a stop string split across the join, EOS first, the budget', () => {
  const s: SampleSettings = { temperature: 1, topP: 1, eosIds: [0], stop: ['</answer>'] };
  const cont = enc('wer>ab');
  const lp = cont.map((_, i) => -i);
  // the completion so far ends with "</ans": the server saw only "wer>ab", the client sees the stop across the join
  assert.deepEqual(cutContinuation(cont, lp, enc('7</ans'), 64, s, decode), { ids: enc('wer>'), logprobs: [-0, -1, -2, -3], finish: 'stop' });
  // the same continuation after a prefix without it runs to its budget
  assert.deepEqual(cutContinuation(cont, lp, enc('7'), 3, s, decode), { ids: enc('wer'), logprobs: [-0, -1, -2], finish: 'length' });
  // an EOS before the stop completes ends the row there, and is kept
  const withEos = [...enc('we'), 0, ...enc('r>')];
  assert.deepEqual(cutContinuation(withEos, [1, 2, 3, 4, 5], enc('</ans'), 64, s, decode), { ids: [...enc('we'), 0], logprobs: [1, 2, 3], finish: 'eos' });
  // a stop string wholly inside the tail (an imported text that goes on past its "</answer>") was not produced by the
  // continuation: it does not stop it, as a server scanning its output would not
  assert.deepEqual(cutContinuation(enc('ab'), [1, 2], enc('</answer>'), 64, s, decode), { ids: enc('ab'), logprobs: [1, 2], finish: 'length' });
  assert.equal(stopAfterTail('x</answer>ab', 10, ['</answer>']), false);
  assert.equal(stopAfterTail('x</answer>ab', 9, ['</answer>']), true, "its last character is the continuation's");
  // no stop strings: only EOS and the budget
  assert.deepEqual(cutContinuation(enc('abc'), [1, 2, 3], [], 64, { ...s, stop: [] }, decode).finish, 'length');
});

test('SGLang scoring: logprob_start_len one before the completion, entry 0 (None, always padded) dropped; vLLM prompt_logprobs by rank', () => {
  const item = { prefix: [1, 2, 3], ids: [4, 5] };
  assert.deepEqual(sglangScoreBody([item], 2), {
    input_ids: [[1, 2, 3, 4, 5]],
    sampling_params: { max_new_tokens: 0, temperature: 1 },
    return_logprob: true,
    logprob_start_len: [2],
    top_logprobs_num: 2,
  });
  // SGLang's scheduler pads the first input log-prob with None whatever logprob_start_len is
  const response = [
    {
      text: '',
      meta_info: {
        input_token_logprobs: [
          [null, 3, null],
          [-0.5, 4, null],
          [-1.5, 5, null],
        ],
        input_top_logprobs: [
          null,
          [
            [-0.5, 4, null],
            [-1.2, 9, null],
          ],
          [
            [-0.3, 7, null],
            [-1.5, 5, null],
          ],
        ],
      },
    },
  ];
  assert.deepEqual(parseSglangScore(response, [item], 2), [
    {
      logprobs: [-0.5, -1.5],
      top: [
        { ids: [4, 9], logprobs: [-0.5, -1.2] },
        { ids: [7, 5], logprobs: [-0.3, -1.5] },
      ],
    },
  ]);
  // vLLM: prompt_logprobs[0] is null; each entry holds the given token (any rank) and the top K; −9999 is its clamped −inf
  const v = {
    choices: [
      {
        index: 0,
        prompt_logprobs: [
          null,
          { '2': { logprob: -0.1, rank: 1, decoded_token: 'b' } },
          { '3': { logprob: -0.2, rank: 1 } },
          { '4': { logprob: -2, rank: 3 }, '8': { logprob: -0.4, rank: 1 }, '6': { logprob: -0.9, rank: 2 } },
          { '5': { logprob: -9999, rank: 40 }, '1': { logprob: -0.01, rank: 1 }, '2': { logprob: -5, rank: 2 } },
        ],
      },
    ],
  };
  assert.deepEqual(parseVllmScore(v, [item], 2), [
    {
      logprobs: [-2, -Infinity],
      top: [
        { ids: [8, 6], logprobs: [-0.4, -0.9] },
        { ids: [1, 2], logprobs: [-0.01, -5] },
      ],
    },
  ]);
});
