// Token generation: prefill the prompt, then decode one token at a time. Each decode step queues the whole forward
// and the sampler on the device, feeding the sampled id (still on the device) into the next step; the only read
// back is the 4-byte id, needed to stream text and check stop conditions.
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { sampleToken, type SampleOptions } from '../ops/sample.js';
import type { Qwen3Model } from '../models/qwen3/model.js';
import { gpuCounters } from '../runtime-stats.js';
import { StreamingDecoder, type ChatMessage, type TextTokenizer } from './tokenizer.js';

export interface GenerateOptions extends Omit<SampleOptions, 'previousTokens' | 'generator'> {
  /** Default 128. */
  maxNewTokens?: number;
  /** Stop after emitting one of these ids (default: the config's eos ids and the tokenizer's eos). */
  stopTokenIds?: readonly number[];
  /** Stop once the generated text contains one of these (the text is cut before it). */
  stopStrings?: readonly string[];
  /** Chat messages go through the chat template; `enableThinking` is passed to it (Qwen3: default false). */
  enableThinking?: boolean;
  signal?: AbortSignal;
}

export interface GeneratedToken {
  id: number;
  /** Text this token added (may be empty while a multi-byte character is incomplete). */
  text: string;
  index: number;
}

export interface GenerationStats {
  promptTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** GPU dispatches per decode step (0 on the CPU). */
  dispatchesPerToken: number;
  stopReason: 'eos' | 'stop-string' | 'max-tokens' | 'aborted' | 'cache-full';
}

/** Prompt ids: raw text is tokenized as is; chat messages go through the tokenizer's chat template. */
export function promptIds(tokenizer: TextTokenizer, prompt: string | readonly ChatMessage[] | readonly number[], enableThinking = false): number[] {
  if (typeof prompt === 'string') return tokenizer.encode(prompt);
  if (prompt.length > 0 && typeof prompt[0] === 'number') return [...(prompt as readonly number[])];
  return tokenizer.encode(tokenizer.applyChatTemplate(prompt as readonly ChatMessage[], { enableThinking }));
}

/** Streams generated tokens; the generator's return value holds the timing and stop reason. */
export async function* generate(
  model: Qwen3Model,
  tokenizer: TextTokenizer,
  prompt: string | readonly ChatMessage[] | readonly number[],
  options: GenerateOptions = {},
): AsyncGenerator<GeneratedToken, GenerationStats> {
  const ids = promptIds(tokenizer, prompt, options.enableThinking);
  if (ids.length === 0) throw new RangeError('generate: the prompt has no tokens');
  const maxNew = options.maxNewTokens ?? 128;
  const stops = new Set(options.stopTokenIds ?? [...model.config.eosTokenIds, ...tokenizer.eosTokenIds]);
  const usePenalties = (options.repetitionPenalty ?? 1) !== 1 || (options.presencePenalty ?? 0) !== 0 || (options.frequencyPenalty ?? 0) !== 0;
  const cache = model.newCache();
  const decoder = new StreamingDecoder(tokenizer);
  const history = [...ids];
  const stats: GenerationStats = { promptTokens: ids.length, generatedTokens: 0, prefillMs: 0, decodeMs: 0, dispatchesPerToken: 0, stopReason: 'max-tokens' };
  let input: Tensor = tensor(ids, { dtype: 'int32', device: model.device });
  const dispatchesAtDecode = { start: 0 };
  try {
    const t0 = performance.now();
    for (let i = 0; i < maxNew; i++) {
      if (options.signal?.aborted) {
        stats.stopReason = 'aborted';
        break;
      }
      if (cache.length + input.shape[0] > cache.capacity) {
        stats.stopReason = 'cache-full';
        break;
      }
      if (i === 1) dispatchesAtDecode.start = gpuCounters().dispatches;
      const logits = await model.forward(input, cache);
      const seed = options.seed === undefined ? undefined : (options.seed + i * 0x9e3779b9) >>> 0;
      const next = sampleToken(logits, { ...options, seed, previousTokens: usePenalties ? history : undefined });
      logits.dispose();
      input.dispose();
      input = next;
      const id = (await next.toArray())[0];
      const now = performance.now();
      if (i === 0) stats.prefillMs = now - t0;
      if (id < 0) throw new Error('generate: every logit is -Inf or NaN; nothing can be sampled');
      history.push(id);
      stats.generatedTokens++;
      if (stops.has(id)) {
        stats.stopReason = 'eos';
        break;
      }
      let text = decoder.push(id);
      const stop = options.stopStrings?.find((s) => decoder.text.includes(s));
      if (stop) {
        const cut = decoder.text.indexOf(stop);
        text = text.slice(0, Math.max(0, text.length - (decoder.text.length - cut)));
        if (text) yield { id, text, index: i };
        stats.stopReason = 'stop-string';
        break;
      }
      yield { id, text, index: i };
    }
    stats.decodeMs = performance.now() - t0 - stats.prefillMs;
    const steps = stats.generatedTokens - 1;
    stats.dispatchesPerToken = steps > 0 ? (gpuCounters().dispatches - dispatchesAtDecode.start) / steps : 0;
    return stats;
  } finally {
    input.dispose();
    cache.dispose();
  }
}
