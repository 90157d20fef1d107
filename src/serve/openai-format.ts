// OpenAI's response objects: chat.completion, chat.completion.chunk, text_completion, usage, and the server-sent
// event framing of a stream.
import type { GenerationStats } from '../generate/generate.js';

export type FinishReason = 'stop' | 'length';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usageOf(stats: GenerationStats): Usage {
  return { prompt_tokens: stats.promptTokens, completion_tokens: stats.generatedTokens, total_tokens: stats.promptTokens + stats.generatedTokens };
}

/** eos and stop strings / ids end a sequence as asked ('stop'); the token budget or the cache end it short ('length'). */
export function finishReason(stats: GenerationStats): FinishReason {
  return stats.stopReason === 'eos' || stats.stopReason === 'stop-string' ? 'stop' : 'length';
}

export interface ResponseIdentity {
  id: string;
  created: number;
  model: string;
}

export function chatCompletion(who: ResponseIdentity, text: string, stats: GenerationStats): object {
  return {
    id: who.id,
    object: 'chat.completion',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finishReason(stats) }],
    usage: usageOf(stats),
  };
}

export function textCompletion(who: ResponseIdentity, text: string, stats: GenerationStats): object {
  return {
    id: who.id,
    object: 'text_completion',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason(stats) }],
    usage: usageOf(stats),
  };
}

/** One streamed chunk; `usage` is null on every chunk but the last when the client asked for include_usage. */
export function chatChunk(who: ResponseIdentity, delta: { role?: 'assistant'; content?: string }, finish: FinishReason | null, includeUsage: boolean): object {
  return {
    id: who.id,
    object: 'chat.completion.chunk',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

export function textChunk(who: ResponseIdentity, text: string, finish: FinishReason | null, includeUsage: boolean): object {
  return {
    id: who.id,
    object: 'text_completion',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

/** The usage chunk after the last choice chunk (stream_options.include_usage): no choices. */
export function usageChunk(who: ResponseIdentity, object: 'chat.completion.chunk' | 'text_completion', stats: GenerationStats): object {
  return { id: who.id, object, created: who.created, model: who.model, choices: [], usage: usageOf(stats) };
}

export function sseEvent(data: object | '[DONE]'): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}
