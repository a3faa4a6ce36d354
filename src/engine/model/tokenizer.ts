// Tokenizers: a character-level one for scratch models and a Hugging Face `tokenizer.json` one.
//
// Character offsets (TokenSpan.start/end) are JavaScript string indices (UTF-16 code units) into the decoded
// text, so `text.slice(start, end)` is the token's text and sections can be found with plain string search.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer as HfJsTokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { UserError } from '../core/errors';
import type { TokenSpan, Tokenizer } from '../core/types';

/** ids 0 = pad, 1 = bos, 2 = eos, then one id per character of the sorted alphabet. */
export class CharTokenizer implements Tokenizer {
  readonly kind = 'char' as const;
  readonly padId = 0;
  readonly bosId = 1;
  readonly eosId = 2;
  readonly vocabSize: number;
  /** the sorted unique characters (save this to rebuild the same tokenizer) */
  readonly alphabet: string;
  private readonly chars: string[];
  private readonly index: Map<string, number>;

  private constructor(chars: string[]) {
    this.chars = chars;
    this.alphabet = chars.join('');
    this.index = new Map(chars.map((c, i) => [c, i + 3]));
    this.vocabSize = chars.length + 3;
  }

  /** One token per Unicode code point of `alphabet` (duplicates and order do not matter). */
  static fromAlphabet(alphabet: string): CharTokenizer {
    const chars = [...new Set(Array.from(alphabet))].sort();
    if (chars.length === 0) throw new UserError('the character tokenizer needs a non-empty alphabet');
    return new CharTokenizer(chars);
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    const unknown = new Set<string>();
    for (const c of text) {
      const id = this.index.get(c);
      if (id === undefined) unknown.add(c);
      else ids.push(id);
    }
    if (unknown.size > 0) {
      throw new UserError(
        `text has characters outside the tokenizer's alphabet: ${[...unknown].map((c) => JSON.stringify(c)).join(', ')}`,
        'the scratch model can only read the characters its task produces',
      );
    }
    return ids;
  }

  decode(ids: number[]): string {
    let s = '';
    for (const id of ids) s += this.piece(id);
    return s;
  }

  decodeWithOffsets(ids: number[]): { text: string; tokens: TokenSpan[] } {
    let text = '';
    const tokens: TokenSpan[] = [];
    for (const id of ids) {
      const p = this.piece(id);
      tokens.push({ id, text: p, start: text.length, end: text.length + p.length });
      text += p;
    }
    return { text, tokens };
  }

  encodePrompt(prompt: string): number[] {
    return [this.bosId, ...this.encode(prompt)];
  }

  /** special tokens decode to '' */
  private piece(id: number): string {
    if (id >= 3 && id < this.vocabSize) return this.chars[id - 3];
    if (id >= 0 && id < 3 && Number.isInteger(id)) return '';
    throw new Error(`token id ${id} outside the character vocabulary [0, ${this.vocabSize})`);
  }
}

export interface HfTokenizerOptions {
  /** Wrap prompts in the tokenizer's chat template (one user message + generation prompt). */
  useChatTemplate?: boolean;
}

type JsonObj = Record<string, unknown>;

function readJson(path: string, what: string): JsonObj {
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${what} ${path}: ${(e as Error).message}`);
  }
  try {
    const v = JSON.parse(raw);
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('not a JSON object');
    return v as JsonObj;
  } catch (e) {
    throw new UserError(`${path} is not a valid ${what}: ${(e as Error).message}`);
  }
}

/** tokenizer_config.json writes special tokens either as a string or as an AddedToken object. */
function tokenContent(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as JsonObj).content === 'string') return (v as JsonObj).content as string;
  return null;
}

function idList(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}

/** The most ids a tokenizer may have: far above any real vocabulary (the largest are a few hundred thousand). */
export const MAX_TOKEN_ID = 2 ** 24;

/**
 * Every id of tokenizer.json a whole number below the model's vocab_size (config.json beside it), or below
 * MAX_TOKEN_ID where there is none. The tokenizer library sizes its tables by the largest id, so an added token with
 * id 4,294,967,294 had it build a table of four billion entries, for minutes, deaf to signals, before anything could
 * fail: refused here, with the token. An id at or above vocab_size has no embedding row.
 */
function checkTokenIds(tokJson: JsonObj, path: string, modelCfg: JsonObj): void {
  const v = modelCfg.vocab_size;
  const fromModel = typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= MAX_TOKEN_ID;
  const limit = fromModel ? v : MAX_TOKEN_ID;
  const vocab = ((tokJson.model as JsonObj | undefined)?.vocab ?? {}) as Record<string, unknown> | unknown[];
  const ids: [string, unknown][] = Array.isArray(vocab) ? [] : Object.entries(vocab);
  const added = Array.isArray(tokJson.added_tokens) ? (tokJson.added_tokens as JsonObj[]) : [];
  const isId = (id: unknown): id is number => typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < MAX_TOKEN_ID;
  const bad = (id: unknown) => !isId(id) || id >= limit;
  const refuse = (what: string, id: unknown) => {
    if (!isId(id) || !fromModel)
      throw new UserError(`${path}: ${what} has id ${JSON.stringify(id)}, outside [0, ${MAX_TOKEN_ID}): a corrupted or foreign tokenizer`);
    // a real id the model has no embedding row for: the tokenizer belongs to another model
    let count = 0;
    for (const x of [...ids.map(([, x]) => x), ...added.map((t) => t.id)]) if (isId(x) && x + 1 > count) count = x + 1;
    throw new UserError(
      `${path} has ${count} ids but config.json has vocab_size ${limit}: tokenizer and weights do not belong together (${what} has id ${id})`,
    );
  };
  for (const [token, id] of ids) if (bad(id)) refuse(`token ${JSON.stringify(token)}`, id);
  for (const t of added) if (bad(t.id)) refuse(`added token ${JSON.stringify(t.content)}`, t.id);
}

/**
 * GPT-2's byte-level alphabet: each byte is written as one printable character. Bytes that are printable
 * Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 take code points 256, 257, … in
 * byte order. Inverted here to read the bytes back out of a token string.
 */
function byteLevelDecoderMap(): Map<string, number> {
  const m = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    m.set(String.fromCodePoint(printable ? b : 256 + extra++), b);
  }
  return m;
}

/**
 * A Hugging Face tokenizer (`tokenizer.json`, plus `tokenizer_config.json` / `config.json` /
 * `generation_config.json` for the special tokens and chat template when present).
 *
 * decodeWithOffsets rule: the text is decoded as a stream and each token's span holds the characters that become
 * complete once that token's bytes are known. With byte-level BPE one character can span several tokens (a
 * Chinese character or an emoji is 3–4 bytes); the tokens before the last one of such a character get an empty
 * span at the character's position, and the token that completes it gets the whole character. Special tokens
 * (dropped by decode) get empty spans too. Spans are contiguous and their concatenation is `decode(ids)`.
 */
export class HfTokenizer implements Tokenizer {
  readonly kind = 'hf' as const;
  readonly vocabSize: number;
  /** −1 when the model has no BOS token (Qwen) */
  readonly bosId: number;
  readonly eosId: number;
  /** every id that ends a completion (EOS of tokenizer_config, config.json, generation_config.json) */
  readonly eosIds: number[];
  readonly padId: number;
  readonly chatTemplate: string | null;
  readonly useChatTemplate: boolean;
  private readonly tok: HfJsTokenizer;
  private readonly prependBos: boolean;
  private readonly specialTokens: Map<string, string>;
  /** token strings decode() drops (tokenizers.js's rule: added tokens marked special + additional_special_tokens) */
  private readonly skipped: Set<string>;
  /** added tokens that are not skipped: the byte-level decoder writes them literally */
  private readonly literal: Set<string>;
  private readonly byteLevel: boolean;
  private readonly byteOf = byteLevelDecoderMap();

  private constructor(
    tokJson: JsonObj,
    tokCfg: JsonObj,
    modelCfg: JsonObj,
    genCfg: JsonObj,
    chatTemplate: string | null,
    opts: HfTokenizerOptions,
    dir: string,
  ) {
    checkTokenIds(tokJson, join(dir, 'tokenizer.json'), modelCfg);
    try {
      this.tok = new HfJsTokenizer(tokJson, tokCfg);
    } catch (e) {
      throw new UserError(`cannot load ${join(dir, 'tokenizer.json')}: ${(e as Error).message}`);
    }
    const vocab = this.tok.get_vocab(true);
    let maxId = -1;
    for (const id of vocab.values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;

    const added = Array.isArray(tokJson.added_tokens) ? (tokJson.added_tokens as JsonObj[]) : [];
    this.skipped = new Set(added.filter((t) => t.special).map((t) => String(t.content)));
    for (const t of Array.isArray(tokCfg.additional_special_tokens) ? tokCfg.additional_special_tokens : []) if (typeof t === 'string') this.skipped.add(t);
    this.literal = new Set(added.map((t) => String(t.content)).filter((c) => !this.skipped.has(c)));
    this.byteLevel = (tokJson.decoder as JsonObj | null)?.type === 'ByteLevel';

    const idOf = (content: string | null): number => (content === null ? -1 : (this.tok.token_to_id(content) ?? -1));
    this.specialTokens = new Map();
    for (const k of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const c = tokenContent(tokCfg[k]);
      if (c !== null) this.specialTokens.set(k, c);
    }
    this.bosId = idOf(this.specialTokens.get('bos_token') ?? null);
    this.prependBos = this.bosId >= 0 && tokCfg.add_bos_token !== false;

    this.useChatTemplate = !!opts.useChatTemplate;
    this.chatTemplate = chatTemplate;
    if (this.useChatTemplate && !chatTemplate) {
      throw new UserError(
        `the tokenizer in ${dir} has no chat template (tokenizer_config.json "chat_template" or chat_template.jinja), but the chat template was requested`,
      );
    }
    const eos: number[] = [];
    // A ChatML template (Qwen) ends the assistant turn with <|im_end|>, which base checkpoints do not list as
    // their EOS (theirs is <|endoftext|>): with the template, <|im_end|> comes first.
    const imEnd = idOf('<|im_end|>');
    if (this.useChatTemplate && imEnd >= 0 && chatTemplate!.includes('<|im_end|>')) eos.push(imEnd);
    eos.push(idOf(this.specialTokens.get('eos_token') ?? null), ...idList(genCfg.eos_token_id), ...idList(modelCfg.eos_token_id));
    this.eosIds = [...new Set(eos.filter((id) => id >= 0 && id < this.vocabSize))];
    if (this.eosIds.length === 0) {
      throw new UserError(
        `cannot tell the end-of-sequence token of the tokenizer in ${dir}: expected "eos_token" in tokenizer_config.json or "eos_token_id" in config.json`,
      );
    }
    this.eosId = this.eosIds[0];
    const pad = idOf(this.specialTokens.get('pad_token') ?? null);
    this.padId = pad >= 0 ? pad : this.eosId;
  }

  static fromDir(dir: string, opts: HfTokenizerOptions = {}): HfTokenizer {
    const tokPath = join(dir, 'tokenizer.json');
    if (!existsSync(tokPath)) {
      throw new UserError(`no tokenizer.json in ${dir} (expected a Hugging Face tokenizer: tokenizer.json, optionally tokenizer_config.json)`);
    }
    const tokJson = readJson(tokPath, 'tokenizer file');
    const opt = (name: string, what: string) => (existsSync(join(dir, name)) ? readJson(join(dir, name), what) : {});
    const tokCfg = opt('tokenizer_config.json', 'tokenizer config');
    const modelCfg = opt('config.json', 'model config');
    const genCfg = opt('generation_config.json', 'generation config');
    let template: string | null = null;
    const t = tokCfg.chat_template;
    if (typeof t === 'string') template = t;
    else if (Array.isArray(t)) {
      // the list form names its templates; "default" is the one transformers uses
      const named = t as { name?: string; template?: string }[];
      template = (named.find((x) => x.name === 'default') ?? named[0])?.template ?? null;
    } else if (existsSync(join(dir, 'chat_template.jinja'))) template = readFileSync(join(dir, 'chat_template.jinja'), 'utf8');
    return new HfTokenizer(tokJson, tokCfg, modelCfg, genCfg, template, opts, dir);
  }

  encode(text: string): number[] {
    if (text.length === 0) return [];
    const ids = this.tok.encode(text, { add_special_tokens: false }).ids;
    // a word-level vocabulary without the word (and no unknown token the JS tokenizer reads) gives no id: say which
    const at = ids.findIndex((id) => !Number.isInteger(id));
    if (at >= 0) {
      const pieces = this.tok.encode(text, { add_special_tokens: false }).tokens;
      throw new UserError(
        `the tokenizer has no id for ${JSON.stringify(pieces[at] ?? text).slice(0, 80)} (its vocabulary lacks it and it names no unknown token)`,
      );
    }
    return ids;
  }

  decode(ids: number[]): string {
    if (ids.length === 0) return '';
    return this.tok.decode(ids, { skip_special_tokens: true });
  }

  /** The prompt text after the chat template (unchanged when the template is off). */
  renderPrompt(prompt: string): string {
    return this.useChatTemplate ? this.renderChat(prompt) : prompt;
  }

  /** The special tokens' texts that decoding with skip_special_tokens drops (the template's markers among them). */
  specialTexts(): string[] {
    return [...this.skipped];
  }

  /** `content` as the user's message under the tokenizer's chat template, with the generation prompt; needs a template. */
  renderChat(content: string): string {
    if (!this.chatTemplate) throw new UserError('the tokenizer has no chat template');
    const vars: Record<string, unknown> = {
      messages: [{ role: 'user', content }],
      add_generation_prompt: true,
    };
    for (const [k, v] of this.specialTokens) vars[k] = v;
    try {
      return new Template(this.chatTemplate).render(vars);
    } catch (e) {
      throw new UserError(`the tokenizer's chat template failed: ${(e as Error).message}`);
    }
  }

  /** The prompt's ids as fed to the model: BOS first where the tokenizer adds one, never a second. */
  encodePrompt(prompt: string): number[] {
    const ids = this.encode(this.renderPrompt(prompt));
    return this.prependBos && !this.useChatTemplate && ids[0] !== this.bosId ? [this.bosId, ...ids] : ids;
  }

  decodeWithOffsets(ids: number[]): { text: string; tokens: TokenSpan[] } {
    const text = this.decode(ids);
    const ends = (this.byteLevel && this.byteLevelEnds(ids, text)) || this.prefixEnds(ids, text);
    const tokens = ids.map((id, i) => {
      const start = i === 0 ? 0 : ends[i - 1];
      return { id, text: text.slice(start, ends[i]), start, end: ends[i] };
    });
    return { text, tokens };
  }

  /**
   * O(n) offsets for byte-level BPE: feed each token's bytes to a streaming UTF-8 decoder. Returns null if the
   * result differs from decode() (e.g. a tokenizer that also cleans up spaces), so the exact fallback is used.
   */
  private byteLevelEnds(ids: number[], text: string): number[] | null {
    const ends = new Array<number>(ids.length);
    const pieces: string[] = [];
    const dec = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
    let pos = 0;
    let lastByteToken = -1;
    // Bytes left incomplete at the end of a run become U+FFFD in decode(); they belong to the run's last token,
    // and the zero-width special tokens after it move behind them.
    const flush = (upTo: number) => {
      const s = dec.decode();
      if (!s) return;
      pieces.push(s);
      pos += s.length;
      for (let j = lastByteToken; j < upTo; j++) ends[j] = pos;
    };
    for (let i = 0; i < ids.length; i++) {
      const tok = this.tok.id_to_token(ids[i]);
      if (tok === undefined || this.skipped.has(tok)) {
        ends[i] = pos; // dropped by decode (specials; ids past the tokenizer's vocabulary decode to nothing)
        continue;
      }
      if (this.literal.has(tok)) {
        flush(i);
        lastByteToken = -1;
        pieces.push(tok);
        pos += tok.length;
        ends[i] = pos;
        continue;
      }
      const bytes = new Uint8Array(tok.length);
      let n = 0;
      for (const c of tok) {
        const b = this.byteOf.get(c);
        if (b === undefined) return null;
        bytes[n++] = b;
      }
      const s = dec.decode(bytes.subarray(0, n), { stream: true });
      pieces.push(s);
      pos += s.length;
      ends[i] = pos;
      lastByteToken = i;
    }
    if (lastByteToken >= 0) flush(ids.length);
    return pieces.join('') === text ? ends : null;
  }

  /**
   * Exact offsets for any decoder: token i ends where decode(ids[0..i]) stops agreeing with the full text
   * (a character still waiting for bytes shows as U+FFFD there, so it is not counted yet). O(n²) decodes.
   */
  private prefixEnds(ids: number[], text: string): number[] {
    const ends = new Array<number>(ids.length);
    let prev = 0;
    for (let i = 0; i < ids.length; i++) {
      if (i === ids.length - 1) {
        ends[i] = text.length;
        break;
      }
      const p = this.decode(ids.slice(0, i + 1));
      const lim = Math.min(p.length, text.length);
      let k = 0;
      while (k < lim && p.charCodeAt(k) === text.charCodeAt(k)) k++;
      // never split a surrogate pair
      if (k > 0 && k < text.length && (text.charCodeAt(k - 1) & 0xfc00) === 0xd800) k--;
      prev = Math.max(prev, k);
      ends[i] = prev;
    }
    return ends;
  }
}
