// Token generation: prefill the prompt, then decode one token at a time through a DecodeSession: on WebGPU the
// first decode step is recorded and later steps replay it, the sampled id staying on the device as the next
// step's input; the only read back is the 4-byte id, needed to stream text and check stop conditions. A response
// format (a JSON schema, a regex, a grammar) constrains each token through a bitmask the sampler applies on the
// device (generate/grammar.ts); the output then always matches it, or stops at max tokens.
import { samplingDraw, type SampleOptions } from '../ops/sample.js';
import { DecodeSession, type DecodeSessionStats, type SessionSampling } from './decode-session.js';
import type { CausalLM } from '../models/causal-lm.js';
import { gpuCounters } from '../runtime/stats.js';
import type { ChatMessage, TextTokenizer } from '../tokenizer/tokenizer.js';
import { SequenceOutput } from './sequence-output.js';
import { tokenLogprobs, type TokenLogprobs } from './logprobs.js';
import type { GenerationConfig } from '../formats/generation-config.js';
import { defaultStopIds, withGenerationConfig } from './generation-defaults.js';
import { GrammarError, inProcessGrammars, type GrammarOptions, type GrammarSource, type ResponseFormat } from './grammar.js';
import { DEFAULT_SPECULATIVE_TOKENS, generateSpeculative, speculationBlocker, type SpeculativeConfig, type SpeculativeStats } from './speculative.js';

export interface GenerateOptions extends Omit<SampleOptions, 'previousTokens' | 'draw' | 'mask'> {
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
   * Run the prompt's forward (the prefill) through compile(): the model keeps one signature per prompt length, so
   * the first prompt of a length is traced (eager), the second recorded and later ones replayed. The logits are the
   * eager ones bit for bit (docs/compile.md). Decode steps are captured either way (`capture`).
   */
  compile?: boolean;
  /**
   * Report each token's log-probability and this many most likely alternatives (0..20) from the raw logits (one
   * extra read of the logits row per token).
   */
  logprobs?: number;
  /**
   * Constrained decoding: the output is JSON (`{type: 'json_object'}`), JSON valid under a schema (`{type:
   * 'json_schema', json_schema: {name, schema, strict}}`), a regex's match or an EBNF grammar's sentence, and ends
   * with a stop token once complete (stopReason 'eos'; 'max-tokens' when it ran out first). See generate/grammar.ts.
   */
  responseFormat?: ResponseFormat;
  /** How JSON formats compile (default: one line, no free whitespace). */
  grammarOptions?: GrammarOptions;
  /** Where the response format is compiled and matched (default: in this thread; the server: its grammar worker). */
  grammars?: GrammarSource;
  /**
   * Speculative decoding (generate/speculative.ts): a draft model with the same vocabulary, n-gram prompt lookup, or
   * Qwen3.6's MTP layer (not yet) proposes tokens, and the target verifies them in one forward. Greedy output is
   * plain greedy's; sampled output keeps the target's distribution. Penalties, a response format and logprobs decode
   * plainly instead (stats.speculative.fallback says why).
   */
  speculative?: SpeculativeConfig;
  /** Tokens drafted per verification (default 4). */
  numSpeculativeTokens?: number;
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
  /** With options.speculative: acceptance rate, tokens per target forward (or why decoding was plain). */
  speculative?: SpeculativeStats;
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
  const fallback = options.speculative && speculationBlocker(options);
  if (options.speculative && !fallback) return yield* generateSpeculative(model, tokenizer, ids, { options, maxNew, stops, config: options.speculative });
  const capture = options.capture;
  const wantLogprobs = options.logprobs !== undefined;
  const grammars = options.grammars ?? inProcessGrammars(tokenizer, model.config.vocabSize);
  const constraint = options.responseFormat && (await grammars(options.responseFormat, options.grammarOptions, [...stops]));
  const session = new DecodeSession(model, { sampling, capture, keepLogits: wantLogprobs, compilePrefill: options.compile, masked: constraint !== undefined });
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
      const mask = constraint && (await constraint.nextMask());
      const id = i === 0 ? await session.prefill(ids, draw, prior, mask) : await session.next(draw, prior, mask);
      const now = performance.now();
      if (i === 0) stats.prefillMs = now - t0;
      if (id < 0) throw new Error('generate: every logit is -Inf or NaN; nothing can be sampled');
      if (constraint && !(await constraint.accept(id)))
        throw new GrammarError(`generate: sampled token ${id}, which the response format does not allow`, options.responseFormat);
      history.push(id);
      stats.generatedTokens++;
      const out = output.push(id);
      const logprobs = wantLogprobs && out.emit ? tokenLogprobs(await session.logits!.toArray(), id, options.logprobs!) : undefined;
      if (out.emit) yield { id, text: out.text, index: i, ...(logprobs ? { logprobs } : {}) };
      if (out.stop) {
        stats.stopReason = out.stop;
        break;
      }
      // The grammar ended on a stop token that is not among stops (stopTokenIds: [] leaves the tokenizer's eos).
      if (constraint?.done) {
        stats.stopReason = 'eos';
        break;
      }
    }
    stats.decodeMs = performance.now() - t0 - stats.prefillMs;
    const steps = stats.generatedTokens - 1;
    stats.dispatchesPerToken = steps > 0 ? (gpuCounters().dispatches - dispatchesAtDecode.start) / steps : 0;
    stats.decode = { ...session.stats };
    if (options.speculative) stats.speculative = plainSpeculativeStats(options, stats.generatedTokens, fallback!);
    return stats;
  } finally {
    session.dispose();
    constraint?.dispose();
  }
}

/** SpeculativeStats of a run that decoded plainly: one token per target forward. */
function plainSpeculativeStats(options: GenerateOptions, generated: number, fallback: string): SpeculativeStats {
  const forwards = Math.max(0, generated - 1);
  return {
    kind: options.speculative!.kind,
    numSpeculativeTokens: options.numSpeculativeTokens ?? DEFAULT_SPECULATIVE_TOKENS,
    targetForwards: forwards,
    draftedTokens: 0,
    acceptedTokens: 0,
    acceptanceRate: 0,
    tokensPerTargetForward: forwards > 0 ? 1 : 0,
    draftMs: 0,
    verifyMs: 0,
    fallback,
  };
}
