// Token generation: prefill the prompt, then decode one token at a time through a DecodeSession: on WebGPU the
// first decode step is recorded and later steps replay it, the sampled id staying on the device as the next
// step's input; the only read back is the 4-byte id, needed to stream text and check stop conditions.
import { samplingDraw, type SampleOptions } from '../ops/sample.js';
import { DecodeSession, type DecodeSessionStats, type SessionSampling } from './decode-session.js';
import type { CausalLM } from '../models/causal-lm.js';
import { gpuCounters } from '../runtime/stats.js';
import type { ChatMessage, TextTokenizer } from '../tokenizer/tokenizer.js';
import { SequenceOutput } from './sequence-output.js';
import { tokenLogprobs, type TokenLogprobs } from './logprobs.js';
import type { GenerationConfig } from '../formats/generation-config.js';
import { defaultStopIds, withGenerationConfig } from './generation-defaults.js';

export interface GenerateOptions extends Omit<SampleOptions, 'previousTokens' | 'draw'> {
  /** Default 128. */
  maxNewTokens?: number;
  /**
   * The checkpoint's generation_config.json (LoadedModel.generationConfig): fills sampling fields left unset here
   * (see withGenerationConfig) and adds its eos_token_id to the default stop ids.
   */
  generationConfig?: GenerationConfig;
  /** Stop after emitting one of these ids (default: config.json's eos ids, generation_config.json's and the tokenizer's). */
  stopTokenIds?: readonly number[];
  /** Stop once the generated text contains one of these (the text is cut before it). */
  stopStrings?: readonly string[];
  /** Chat messages go through the chat template; `enableThinking` is passed to it (Qwen3: default false). */
  enableThinking?: boolean;
  signal?: AbortSignal;
  /** Replay a captured decode step after the first (WebGPU; default on, see generate/decode-session.ts). */
  capture?: boolean;
  /**
   * Report each token's log-probability and this many most likely alternatives (0..20) from the raw logits (one
   * extra read of the logits row per token).
   */
  logprobs?: number;
}

export interface GeneratedToken {
  id: number;
  /** Text this token added (may be empty while a multi-byte character is incomplete). */
  text: string;
  index: number;
  /** With options.logprobs. */
  logprobs?: TokenLogprobs;
}

export interface GenerationStats {
  promptTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** GPU dispatches per decode step (0 on the CPU). */
  dispatchesPerToken: number;
  stopReason: 'eos' | 'stop-string' | 'max-tokens' | 'aborted' | 'cache-full';
  /** How decode steps ran (captured and replayed, or eager and why). */
  decode?: DecodeSessionStats;
}

/** Prompt ids: raw text is tokenized as is; chat messages go through the tokenizer's chat template. */
export function promptIds(tokenizer: TextTokenizer, prompt: string | readonly ChatMessage[] | readonly number[], enableThinking = false): number[] {
  if (typeof prompt === 'string') return tokenizer.encode(prompt);
  if (prompt.length > 0 && typeof prompt[0] === 'number') return [...(prompt as readonly number[])];
  return tokenizer.encode(tokenizer.applyChatTemplate(prompt as readonly ChatMessage[], { enableThinking }));
}

/** A request's options resolved against the model and tokenizer: what generate() and the batching server run. */
export interface ResolvedGeneration {
  readonly options: GenerateOptions;
  readonly maxNew: number;
  readonly stops: ReadonlySet<number>;
  /** The sampler needs the token history (repetition / presence / frequency penalties). */
  readonly usePenalties: boolean;
  readonly sampling: SessionSampling;
}

export function resolveGeneration(model: CausalLM, tokenizer: TextTokenizer, requested: GenerateOptions): ResolvedGeneration {
  const options = withGenerationConfig(requested, requested.generationConfig);
  const stops = new Set(options.stopTokenIds ?? defaultStopIds(model.config.eosTokenIds, options.generationConfig, tokenizer.eosTokenIds));
  const usePenalties = (options.repetitionPenalty ?? 1) !== 1 || (options.presencePenalty ?? 0) !== 0 || (options.frequencyPenalty ?? 0) !== 0;
  const { temperature, topK, topP, minP, repetitionPenalty, presencePenalty, frequencyPenalty } = options;
  const sampling = { temperature, topK, topP, minP, repetitionPenalty, presencePenalty, frequencyPenalty };
  return { options, maxNew: options.maxNewTokens ?? 128, stops, usePenalties, sampling };
}

/** The uniform draw of a sequence's i-th token: seed + i * golden ratio when seeded, else the generator's next. */
export function tokenDraw(options: Pick<GenerateOptions, 'seed' | 'generator'>, i: number): number {
  const { seed, generator } = options;
  return samplingDraw({ seed: seed === undefined ? undefined : (seed + i * 0x9e3779b9) >>> 0, generator });
}

/** Streams generated tokens; the generator's return value holds the timing and stop reason. */
export async function* generate(
  model: CausalLM,
  tokenizer: TextTokenizer,
  prompt: string | readonly ChatMessage[] | readonly number[],
  requested: GenerateOptions = {},
): AsyncGenerator<GeneratedToken, GenerationStats> {
  const { options, maxNew, stops, usePenalties, sampling } = resolveGeneration(model, tokenizer, requested);
  const ids = promptIds(tokenizer, prompt, options.enableThinking);
  if (ids.length === 0) throw new RangeError('generate: the prompt has no tokens');
  const capture = options.capture;
  const wantLogprobs = options.logprobs !== undefined;
  const session = new DecodeSession(model, { sampling, capture, keepLogits: wantLogprobs });
  const output = new SequenceOutput(tokenizer, stops, options.stopStrings);
  const history = [...ids];
  const stats: GenerationStats = { promptTokens: ids.length, generatedTokens: 0, prefillMs: 0, decodeMs: 0, dispatchesPerToken: 0, stopReason: 'max-tokens' };
  const dispatchesAtDecode = { start: 0 };
  try {
    const t0 = performance.now();
    for (let i = 0; i < maxNew; i++) {
      if (options.signal?.aborted) {
        stats.stopReason = 'aborted';
        break;
      }
      if (session.cache.length + (i === 0 ? ids.length : 1) > session.cache.capacity) {
        stats.stopReason = 'cache-full';
        break;
      }
      if (i === 1) dispatchesAtDecode.start = gpuCounters().dispatches;
      const draw = tokenDraw(options, i);
      const prior = usePenalties ? history : undefined;
      const id = i === 0 ? await session.prefill(ids, draw, prior) : await session.next(draw, prior);
      const now = performance.now();
      if (i === 0) stats.prefillMs = now - t0;
      if (id < 0) throw new Error('generate: every logit is -Inf or NaN; nothing can be sampled');
      history.push(id);
      stats.generatedTokens++;
      const out = output.push(id);
      const logprobs = wantLogprobs && out.emit ? tokenLogprobs(await session.logits!.toArray(), id, options.logprobs!) : undefined;
      if (out.emit) yield { id, text: out.text, index: i, ...(logprobs ? { logprobs } : {}) };
      if (out.stop) {
        stats.stopReason = out.stop;
        break;
      }
    }
    stats.decodeMs = performance.now() - t0 - stats.prefillMs;
    const steps = stats.generatedTokens - 1;
    stats.dispatchesPerToken = steps > 0 ? (gpuCounters().dispatches - dispatchesAtDecode.start) / steps : 0;
    stats.decode = { ...session.stats };
    return stats;
  } finally {
    session.dispose();
  }
}
