// The tokenizer of the built-in random-weight 'whisper-tiny' preset: a stand-in with Whisper's shape, NOT Whisper's
// real vocabulary. It has what the decoding code depends on: GPT-2's byte-level BPE pipeline (the ByteLevel
// pre-tokenizer with GPT-2's regex, as Whisper's tokenizer.json has), and every special token of the multilingual
// vocabulary in the real ids' structure relative to the text vocabulary: <|endoftext|> right after the text tokens,
// <|startoftranscript|>, the 99 languages of whisper-tiny ... large-v2, <|translate|>, <|transcribe|>, <|startoflm|>,
// <|startofprev|>, <|nocaptions|>, <|notimestamps|>, then the 1501 timestamps. The text tokens are the 256 byte
// symbols (in GPT-2's order) plus Qwen3's merges in rank order (its most frequent, both parts kept) up to 1024.
import { addedToken, addedTokensDecoder, bpeModel } from '../../tokenizer/tokenizer-json.js';
import { WHISPER_LANGUAGES, WHISPER_TIMESTAMPS } from './tokenizer.js';

/** Text tokens of the stand-in (whisper-tiny has 50257). */
export const WHISPER_TINY_TEXT_TOKENS = 1024;
/** Languages of the multilingual v1 / v2 vocabulary (large-v3 adds 'yue'). */
const LANGUAGE_COUNT = 99;

/** The special tokens after the text tokens, in id order. */
export function whisperSpecialTokens(languages = LANGUAGE_COUNT): string[] {
  return [
    '<|endoftext|>',
    '<|startoftranscript|>',
    ...Object.keys(WHISPER_LANGUAGES)
      .slice(0, languages)
      .map((code) => `<|${code}|>`),
    '<|translate|>',
    '<|transcribe|>',
    '<|startoflm|>',
    '<|startofprev|>',
    '<|nocaptions|>',
    '<|notimestamps|>',
    ...Array.from({ length: WHISPER_TIMESTAMPS }, (_, i) => `<|${(i * 0.02).toFixed(2)}|>`),
  ];
}

/** Vocabulary size of the stand-in (text tokens + specials): 2632. */
export const WHISPER_TINY_VOCAB_SIZE = WHISPER_TINY_TEXT_TOKENS + whisperSpecialTokens().length;

/** GPT-2's bytes_to_unicode, in its order: printable bytes as themselves, the rest from U+0100 on. */
function byteLevelAlphabet(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const out = printable.map((b) => String.fromCharCode(b));
  let n = 0;
  for (let b = 0; b < 256; b++) if (!printable.includes(b)) out.push(String.fromCharCode(256 + n++));
  return out;
}

/**
 * tokenizer.json and tokenizer_config.json of the stand-in, by file name, built from Qwen3's tokenizer.json (read from
 * disk in Node by tokenizer-files.ts, fetched in a page).
 */
export function whisperTokenizerFilesFrom(qwen3TokenizerJson: string): Record<string, string> {
  const qwen3 = JSON.parse(qwen3TokenizerJson) as { model: { merges: (string | [string, string])[] } };
  const tokens = byteLevelAlphabet();
  const kept = new Set(tokens);
  const merges: [string, string][] = [];
  for (const merge of qwen3.model.merges) {
    if (tokens.length === WHISPER_TINY_TEXT_TOKENS) break;
    const [left, right] = typeof merge === 'string' ? (merge.split(' ') as [string, string]) : merge;
    const result = left + right;
    if (!kept.has(left) || !kept.has(right) || kept.has(result)) continue;
    kept.add(result);
    merges.push([left, right]);
    tokens.push(result);
  }
  const vocab: Record<string, number> = {};
  tokens.forEach((t, id) => (vocab[t] = id));
  const specials = whisperSpecialTokens();
  // Timestamps are added tokens that are not special in transformers' Whisper tokenizer.json.
  const added = specials.map((content, i) => addedToken(tokens.length + i, content, !/^<\|\d+\.\d\d\|>$/.test(content)));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab, merges, ''),
  };
  const config = {
    added_tokens_decoder: addedTokensDecoder(added),
    bos_token: '<|endoftext|>',
    eos_token: '<|endoftext|>',
    pad_token: '<|endoftext|>',
    unk_token: '<|endoftext|>',
    clean_up_tokenization_spaces: true,
    errors: 'replace',
    model_max_length: 1024,
    tokenizer_class: 'WhisperTokenizer',
  };
  return { 'tokenizer.json': JSON.stringify(tokenizer), 'tokenizer_config.json': JSON.stringify(config, null, 2) };
}
