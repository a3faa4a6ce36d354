// A byte-level BPE trainer for scratch models, small enough to read in one sitting. It writes a standard
// Hugging Face `tokenizer.json` (GPT-2's byte-level pre-tokenizer and decoder, a BPE model with `vocab` and
// `merges`, the chat template's tags as added tokens), so the engine loads it with the same HfTokenizer as a real
// model's — offsets, sections and token types included — and Python's `tokenizers` loads it unchanged.
//
// No npm package trains BPE in pure JS (the maintained ones wrap the Rust library as a native addon, which the
// extension's bundle cannot ship for every platform). The algorithm is Sennrich et al.'s: count pre-token words,
// then repeatedly merge the most frequent adjacent pair; ties go to the lexicographically smallest pair, so the
// result depends only on the corpus and the vocabulary size.

/** GPT-2's pre-tokenization pattern (contractions, letters, digits, other symbols, whitespace), as HF's ByteLevel uses it. */
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** GPT-2's byte → printable character map (printable Latin-1 bytes stand for themselves, the rest take 256 + k). */
export function byteToChar(): string[] {
  const out = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out[b] = String.fromCodePoint(printable ? b : 256 + extra++);
  }
  return out;
}

export interface BpeOptions {
  /** the whole vocabulary: added tokens + 256 bytes + merges */
  vocabSize: number;
  /** literals that must stay single tokens and decode as text (the chat template's tags) */
  literals: string[];
  /** the end-of-sequence token (special: dropped by decode) */
  eos: string;
  /** the padding token (special) */
  pad: string;
  /** pairs seen fewer times than this are not merged */
  minFrequency?: number;
}

export interface TrainedBpe {
  /** the `tokenizer.json` object */
  tokenizer: Record<string, unknown>;
  /** the `tokenizer_config.json` object (which tokens are EOS and PAD) */
  config: Record<string, unknown>;
  merges: [string, string][];
  vocabSize: number;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The pre-token words of `texts` (literals cut out first, as HF does with added tokens), mapped to byte characters. */
export function pretokenize(texts: readonly string[], literals: readonly string[]): Map<string, number> {
  const b2c = byteToChar();
  const enc = new TextEncoder();
  const cut = literals.length ? new RegExp(literals.map(escapeRe).join('|'), 'g') : null;
  const words = new Map<string, number>();
  for (const text of texts) {
    for (const part of cut ? text.split(cut) : [text]) {
      for (const m of part.matchAll(GPT2_SPLIT)) {
        let w = '';
        for (const b of enc.encode(m[0])) w += b2c[b];
        words.set(w, (words.get(w) ?? 0) + 1);
      }
    }
  }
  return words;
}

/** The most frequent adjacent pair merged, again and again, until `budget` merges or no pair occurs minFrequency times. */
function learnMerges(words: string[][], counts: number[], budget: number, minFrequency: number): [string, string][] {
  const merges: [string, string][] = [];
  while (merges.length < budget) {
    const pairs = new Map<string, number>();
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      for (let j = 0; j + 1 < w.length; j++) {
        const k = w[j] + '\u0000' + w[j + 1];
        pairs.set(k, (pairs.get(k) ?? 0) + counts[i]);
      }
    }
    let best: string | null = null;
    let bestCount = 0;
    for (const [k, c] of pairs)
      if (c > bestCount || (c === bestCount && best !== null && k < best)) {
        best = k;
        bestCount = c;
      }
    if (best === null || bestCount < minFrequency) break;
    const [a, b] = best.split('\u0000');
    merges.push([a, b]);
    const ab = a + b;
    for (const w of words) {
      for (let j = 0; j + 1 < w.length; j++) if (w[j] === a && w[j + 1] === b) w.splice(j, 2, ab);
    }
  }
  return merges;
}

/** tokenizer.json as Hugging Face's tokenizers library writes a byte-level BPE. */
function tokenizerJson(added: string[], specials: string[], vocab: Record<string, number>, merges: [string, string][]): Record<string, unknown> {
  const byteLevel = { add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: specials.includes(content),
    })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', ...byteLevel },
    post_processor: { type: 'ByteLevel', ...byteLevel, trim_offsets: false },
    decoder: { type: 'ByteLevel', ...byteLevel },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

export function trainBpe(texts: readonly string[], o: BpeOptions): TrainedBpe {
  const specials = [o.pad, o.eos].filter((t, i, a) => a.indexOf(t) === i);
  const literals = o.literals.filter((t) => !specials.includes(t));
  const added = [...specials, ...literals];
  const b2c = byteToChar();
  const base = added.length + 256;
  if (o.vocabSize < base) throw new Error(`model.vocab_size ${o.vocabSize} is below ${base}: the ${added.length} added tokens and 256 bytes`);
  const minFrequency = o.minFrequency ?? 2;

  // Words as symbol lists, with their counts; sorted so that iteration order cannot depend on insertion order.
  const entries = [...pretokenize(texts, added)].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const words = entries.map(([w]) => Array.from(w));
  const counts = entries.map(([, c]) => c);

  const merges = learnMerges(words, counts, o.vocabSize - base, minFrequency);

  const vocab: Record<string, number> = Object.create(null);
  added.forEach((t, i) => {
    vocab[t] = i;
  });
  b2c.forEach((c, i) => {
    vocab[c] = added.length + i;
  });
  merges.forEach(([a, b], i) => {
    vocab[a + b] = base + i;
  });
  const tokenizer = tokenizerJson(added, specials, vocab, merges);
  const config = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    eos_token: o.eos,
    pad_token: o.pad,
    add_bos_token: false,
    model_max_length: 1_000_000,
    clean_up_tokenization_spaces: false,
  };
  return { tokenizer, config, merges, vocabSize: base + merges.length };
}
