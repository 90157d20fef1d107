// One 30 s window decoded as openai/whisper's DecodingTask does it (whisper/decoding.py), for one sequence (no beam
// search, no best-of): the initial tokens (<|startofprev|> + the previous text, then the sot sequence, then
// <|notimestamps|> without timestamps), the no-speech probability at <|startoftranscript|>, the logit filters
// (logit-filters.ts), greedy or temperature sampling, and the result's average log-probability and compression ratio.
// Language detection is detect_language: one step on <|startoftranscript|>, the language tokens only.
import type { WhisperSession } from '../models/whisper/session.js';
import type { WhisperTask, WhisperTokenizer } from '../models/whisper/tokenizer.js';
import { applyTimestampRules, logSoftmax, suppressBlank, suppressTokens } from './logit-filters.js';

export interface WindowDecodingOptions {
  task?: WhisperTask;
  /** A language code; default 'en' (detect it first with detectLanguage). */
  language?: string;
  /** 0: greedy; above: sampling from softmax(logits / temperature). */
  temperature?: number;
  /** Tokens sampled at most (default n_text_ctx / 2 = 224). */
  sampleLen?: number;
  withoutTimestamps?: boolean;
  /** Previous text's tokens (after <|startofprev|>), the last n_text_ctx / 2 - 1 kept. */
  prompt?: readonly number[];
  /** Seconds: the first timestamp at most this (default 1.0). */
  maxInitialTimestamp?: number;
  /** openai's suppress_tokens: '-1' = the tokenizer's non-speech symbols (default), '' none, or ids. */
  suppressTokens?: string | readonly number[];
  suppressBlank?: boolean;
  /** Uniform draws in [0, 1) for sampling (default Math.random). */
  random?: () => number;
}

export interface WindowResult {
  /** Sampled tokens, <|endoftext|> excluded. */
  tokens: number[];
  text: string;
  language: string;
  avgLogprob: number;
  noSpeechProb: number;
  temperature: number;
  compressionRatio: number;
}

/**
 * openai's compression_ratio: UTF-8 bytes over their zlib-compressed size (too repetitive above 2.4). The web
 * platform's CompressionStream('deflate') is zlib's format at zlib's default level, as Python's zlib.compress is,
 * in Node (where it is node:zlib, byte for byte deflateSync's output) and in a browser alike.
 */
export async function compressionRatio(text: string): Promise<number> {
  const bytes = new TextEncoder().encode(text);
  const deflate = new CompressionStream('deflate');
  const writer = deflate.writable.getWriter();
  // Not awaited before reading: the writer waits for the reader once the stream's queue is full.
  writer
    .write(bytes)
    .then(() => writer.close())
    .catch(() => undefined);
  const reader = deflate.readable.getReader();
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += (value as Uint8Array).byteLength;
  }
  return bytes.length / size;
}

/** The ids SuppressTokens removes: the option's (or the non-speech symbols), the task and sot tokens, <|nospeech|>. */
export function suppressedTokens(tokenizer: WhisperTokenizer, option: string | readonly number[] = '-1'): number[] {
  let ids: number[] = typeof option === 'string' ? (option.trim() === '' ? [] : option.split(',').map((t) => Number.parseInt(t, 10))) : [...option];
  if (ids.includes(-1)) ids = [...ids.filter((t) => t >= 0), ...tokenizer.nonSpeechTokens()];
  ids.push(tokenizer.transcribe, tokenizer.translate, tokenizer.sot, tokenizer.sotPrev, tokenizer.sotLm);
  if (tokenizer.noSpeech !== undefined) ids.push(tokenizer.noSpeech);
  return [...new Set(ids)].sort((a, b) => a - b);
}

/** detect_language on the session's current window: the most likely language code and every language's probability. */
export async function detectLanguage(session: WhisperSession, tokenizer: WhisperTokenizer): Promise<{ language: string; probs: Record<string, number> }> {
  if (!tokenizer.multilingual) throw new RangeError("this model has no language tokens, so it can't detect the language");
  const [logits] = await session.prefill([tokenizer.sot]);
  let max = -Infinity;
  for (const id of tokenizer.languageTokens.values()) max = Math.max(max, logits[id]);
  let sum = 0;
  for (const id of tokenizer.languageTokens.values()) sum += Math.exp(logits[id] - max);
  const probs: Record<string, number> = {};
  let best = '';
  for (const [code, id] of tokenizer.languageTokens) {
    probs[code] = Math.exp(logits[id] - max) / sum;
    if (best === '' || probs[code] > probs[best]) best = code;
  }
  return { language: best, probs };
}

/** Samples from softmax(logits / temperature), or the argmax at temperature 0. */
function choose(logits: Float32Array, temperature: number, random: () => number): number {
  if (temperature === 0) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const weights = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += weights[i] = Math.exp((logits[i] - max) / temperature);
  let r = random() * sum;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i];
    if (r < 0 && weights[i] > 0) return i;
  }
  return logits.findLastIndex((v) => v > -Infinity);
}

/** Decodes the window whose features the session holds (session.setFeatures). */
export async function decodeWindow(session: WhisperSession, tokenizer: WhisperTokenizer, options: WindowDecodingOptions = {}): Promise<WindowResult> {
  const nCtx = session.model.config.maxTargetPositions;
  const nAudioCtx = session.model.config.maxSourcePositions;
  const sampleLen = options.sampleLen ?? Math.floor(nCtx / 2);
  const temperature = options.temperature ?? 0;
  const language = options.language ?? 'en';
  let initial = tokenizer.sotSequence(language, options.task ?? 'transcribe');
  if (options.withoutTimestamps) initial.push(tokenizer.noTimestamps);
  if (options.prompt && options.prompt.length > 0) {
    const keep = Math.floor(nCtx / 2) - 1;
    initial = [tokenizer.sotPrev, ...options.prompt.slice(-keep), ...initial];
  }
  const sotIndex = initial.indexOf(tokenizer.sot);
  const sampleBegin = initial.length;
  const suppress = options.suppressTokens === '' ? [] : suppressedTokens(tokenizer, options.suppressTokens);
  // CHUNK_LENGTH / n_audio_ctx seconds per timestamp step (0.02)
  const precision = 30 / nAudioCtx;
  const maxInitial = options.maxInitialTimestamp ?? 1.0;
  const maxInitialIndex = maxInitial ? Math.round(maxInitial / precision) : undefined;
  const random = options.random ?? Math.random;

  const tokens = [...initial];
  const [sotRow, first] = await session.prefill(initial, [sotIndex, initial.length - 1]);
  let noSpeechProb = Number.NaN;
  if (tokenizer.noSpeech !== undefined) noSpeechProb = Math.exp(logSoftmax(sotRow)[tokenizer.noSpeech]);
  let logits: Float32Array = first;
  let sumLogprob = 0;
  for (let i = 0; i < sampleLen; i++) {
    if (i > 0) logits = await session.next(tokens[tokens.length - 1]);
    if (options.suppressBlank ?? true) suppressBlank(logits, tokens, sampleBegin, tokenizer.blankTokens);
    if (suppress.length > 0) suppressTokens(logits, suppress);
    if (!options.withoutTimestamps) applyTimestampRules(logits, tokens, sampleBegin, tokenizer, maxInitialIndex);
    const next = choose(logits, temperature, random);
    sumLogprob += logSoftmax(logits)[next];
    tokens.push(next);
    if (next === tokenizer.eot || tokens.length > nCtx) break;
  }
  let sampled = tokens.slice(sampleBegin);
  const end = sampled.indexOf(tokenizer.eot);
  if (end >= 0) sampled = sampled.slice(0, end);
  const text = tokenizer.decodeText(sampled).trim();
  return {
    tokens: sampled,
    text,
    language,
    avgLogprob: sumLogprob / (sampled.length + 1),
    noSpeechProb,
    temperature,
    compressionRatio: await compressionRatio(text),
  };
}
