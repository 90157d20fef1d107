// How a checkpoint's generation_config.json fills the sampling options a caller left unset: the caller's value,
// else the file's, else the caller's fallback (the CLI's own defaults; none in the API, where sample.ts's apply).
import type { GenerationConfig } from '../formats/generation-config.js';
import type { GenerateOptions } from './generate.js';

export type SamplingFields = 'maxNewTokens' | 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty';
export type SamplingFallback = Partial<Pick<GenerateOptions, SamplingFields>>;

/**
 * `options` with unset sampling fields taken from `config`. do_sample false means greedy (temperature 0) unless the
 * options ask for sampling: a temperature > 0, or any of topK / topP / minP given (then the file's temperature, else
 * the fallback's, is used). max_new_tokens applies only when options.maxNewTokens is unset.
 */
export function withGenerationConfig<O extends SamplingFallback>(
  options: O,
  config: GenerationConfig | undefined,
  fallback: SamplingFallback = {},
): O & SamplingFallback {
  const asksSampling =
    options.temperature !== undefined ? options.temperature > 0 : options.topK !== undefined || options.topP !== undefined || options.minP !== undefined;
  const greedy = config?.doSample === false && !asksSampling;
  return {
    ...options,
    maxNewTokens: options.maxNewTokens ?? config?.maxNewTokens ?? fallback.maxNewTokens,
    temperature: options.temperature ?? (greedy ? 0 : (config?.temperature ?? fallback.temperature)),
    topK: options.topK ?? config?.topK ?? fallback.topK,
    topP: options.topP ?? config?.topP ?? fallback.topP,
    minP: options.minP ?? config?.minP ?? fallback.minP,
    repetitionPenalty: options.repetitionPenalty ?? config?.repetitionPenalty ?? fallback.repetitionPenalty,
  };
}

/** The stop ids generate() uses by default: config.json's eos ids, generation_config.json's, the tokenizer's. */
export function defaultStopIds(modelEos: readonly number[], config: GenerationConfig | undefined, tokenizerEos: readonly number[]): number[] {
  return [...new Set([...modelEos, ...(config?.eosTokenIds ?? []), ...tokenizerEos])];
}
