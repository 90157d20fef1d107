// OpenAI's response objects: chat.completion, chat.completion.chunk, text_completion, usage, and the server-sent
// event framing of a stream.
import type { GeneratedToken, GenerationStats } from '../generate/generate.js';
import type { ChatDelta, ChatMessageOut } from './chat-output/chat-output.js';

/** A token id's own text (the tokenizer's decode of it alone). */
export type TokenText = (id: number) => string;

const bytesOf = (s: string) => Array.from(Buffer.from(s, 'utf8'));

/** chat.completion's choice.logprobs for these tokens (each carrying its logprobs), or null when none does. */
export function chatLogprobs(tokens: readonly GeneratedToken[], text: TokenText): object | null {
  if (!tokens.some((t) => t.logprobs)) return null;
  const entry = (id: number, logprob: number) => ({ token: text(id), logprob, bytes: bytesOf(text(id)) });
  return {
    content: tokens
      .filter((t) => t.logprobs)
      .map((t) => ({ ...entry(t.id, t.logprobs!.logprob), top_logprobs: t.logprobs!.top.map((a) => entry(a.id, a.logprob)) })),
    refusal: null,
  };
}

/** text_completion's legacy choice.logprobs, text offsets counted from `offset` (the text before these tokens). */
export function textLogprobs(tokens: readonly GeneratedToken[], text: TokenText, offset = 0): object | null {
  const logged = tokens.filter((t) => t.logprobs);
  if (logged.length === 0) return null;
  const textOffset: number[] = [];
  let at = offset;
  for (const t of logged) {
    textOffset.push(at);
    at += text(t.id).length;
  }
  return {
    tokens: logged.map((t) => text(t.id)),
    token_logprobs: logged.map((t) => t.logprobs!.logprob),
    top_logprobs: logged.map((t) => topByText(t.logprobs!.top, text)),
    text_offset: textOffset,
  };
}

/** The legacy format keys alternatives by text; where two ids share a text, the likelier one stands. */
function topByText(top: readonly { id: number; logprob: number }[], text: TokenText): Record<string, number> {
  const byText: Record<string, number> = {};
  for (const a of top) if (!(text(a.id) in byText)) byText[text(a.id)] = a.logprob;
  return byText;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usageOf(stats: GenerationStats): Usage {
  return { prompt_tokens: stats.promptTokens, completion_tokens: stats.generatedTokens, total_tokens: stats.promptTokens + stats.generatedTokens };
}

/**
 * eos and stop strings / ids end a sequence as asked ('stop', or 'tool_calls' when the answer calls tools); the token
 * budget or the cache end it short ('length').
 */
export function finishReason(stats: GenerationStats, toolCalls = false): FinishReason {
  if (stats.stopReason !== 'eos' && stats.stopReason !== 'stop-string') return 'length';
  return toolCalls ? 'tool_calls' : 'stop';
}

export interface ResponseIdentity {
  id: string;
  created: number;
  model: string;
}

export function chatCompletion(who: ResponseIdentity, message: ChatMessageOut, stats: GenerationStats, logprobs: object | null = null): object {
  return {
    id: who.id,
    object: 'chat.completion',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, message, logprobs, finish_reason: finishReason(stats, message.tool_calls !== undefined) }],
    usage: usageOf(stats),
  };
}

export function textCompletion(who: ResponseIdentity, text: string, stats: GenerationStats, logprobs: object | null = null): object {
  return {
    id: who.id,
    object: 'text_completion',
    created: who.created,
    model: who.model,
    choices: [{ index: 0, text, logprobs, finish_reason: finishReason(stats) }],
    usage: usageOf(stats),
  };
}

/** One streamed chunk; `usage` is null on every chunk but the last when the client asked for include_usage. */
export function chatChunk(
  who: ResponseIdentity,
  delta: ChatDelta & { role?: 'assistant' },
  finish: FinishReason | null,
  includeUsage: boolean,
  logprobs: object | null = null,
  index = 0,
): object {
  return {
    id: who.id,
    object: 'chat.completion.chunk',
    created: who.created,
    model: who.model,
    choices: [{ index, delta, logprobs, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

export function textChunk(
  who: ResponseIdentity,
  text: string,
  finish: FinishReason | null,
  includeUsage: boolean,
  logprobs: object | null = null,
  index = 0,
): object {
  return {
    id: who.id,
    object: 'text_completion',
    created: who.created,
    model: who.model,
    choices: [{ index, text, logprobs, finish_reason: finish }],
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
