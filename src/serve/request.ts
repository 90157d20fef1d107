// Validates OpenAI request bodies (/v1/chat/completions, /v1/completions) into one typed request, naming the first
// field that is wrong. Only what generate() can do is accepted; the rest is refused with a 400 rather than ignored.
import type { ChatMessage } from '../tokenizer/tokenizer.js';
import { InvalidFieldError, UnsupportedFieldError } from './errors.js';
import { messageToolCalls, toolFields, type ToolFields } from './tool-request.js';
import { requestedFormat, type RequestedFormat } from './response-format.js';
import { DEFAULT_REQUEST_LIMITS, type RequestLimits } from './schema-checks.js';

export interface SamplingRequest {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repetitionPenalty?: number;
  seed?: number;
  stop: string[];
  stopTokenIds: number[];
  /** Report log-probabilities with this many top alternatives per token (undefined: none). */
  logprobs?: number;
  /** Choices to generate for the prompt (default 1); choice i samples with seed + i when a seed is given. */
  n?: number;
}

export interface CompletionRequest extends SamplingRequest {
  kind: 'chat' | 'text';
  model: string;
  /** Chat messages (through the chat template), raw prompt text, or (completions) token ids. */
  prompt: ChatMessage[] | string | number[];
  /** The chat template's enable_thinking (`chat_template_kwargs: { enable_thinking }`, as vLLM takes it). */
  enableThinking?: boolean;
  /** The rest of chat_template_kwargs: more variables for the template. */
  templateVariables?: Record<string, unknown>;
  /** OpenAI's reasoning_effort: the template's own variable where it has one, else its enable_thinking switch. */
  reasoningEffort?: ReasoningEffort;
  /** Chat: the offered tools, tool_choice and parallel_tool_calls. */
  tools?: ToolFields;
  /** What the output must be (response_format; completions also vLLM's guided_*): see response-format.ts. */
  responseFormat?: RequestedFormat;
  stream: boolean;
  includeUsage: boolean;
}

type Body = Record<string, unknown>;

export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

const ROLES: readonly ChatMessage['role'][] = ['system', 'user', 'assistant', 'tool'];

function isObject(v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The field's value, or undefined when absent or null (OpenAI clients send null for "unset"). */
function field(body: Body, key: string): unknown {
  const v = body[key];
  return v === null ? undefined : v;
}

function num(body: Body, key: string, ok: (v: number) => boolean, want: string): number | undefined {
  const v = field(body, key);
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new InvalidFieldError(key, `expected ${want}, got ${JSON.stringify(v)}`);
  return v;
}

function int(body: Body, key: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  return num(body, key, (v) => Number.isInteger(v) && v >= min && v <= max, `an integer in [${min}, ${max}]`);
}

function bool(body: Body, key: string): boolean | undefined {
  const v = field(body, key);
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new InvalidFieldError(key, `expected a boolean, got ${JSON.stringify(v)}`);
  return v;
}

function messageContent(v: unknown, at: string): string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) {
    return v
      .map((part, i) => {
        if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string')
          throw new UnsupportedFieldError(`${at}[${i}]`, "only content parts of type 'text' are supported");
        return part.text;
      })
      .join('');
  }
  throw new InvalidFieldError(at, 'expected a string or an array of text parts');
}

function messages(body: Body): ChatMessage[] {
  const v = field(body, 'messages');
  if (!Array.isArray(v) || v.length === 0)
    throw new InvalidFieldError('messages', 'expected a non-empty array of messages', v === undefined ? 'missing_required_parameter' : 'invalid_value');
  return v.map((m, i) => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw new InvalidFieldError(at, 'expected an object with role and content');
    const role = m.role === 'developer' ? 'system' : m.role;
    if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role))
      throw new InvalidFieldError(`${at}.role`, `expected one of system, developer, user, assistant, tool, got ${JSON.stringify(m.role)}`);
    const out: ChatMessage = {
      role: role as ChatMessage['role'],
      content: (m.content === null || m.content === undefined) && role === 'assistant' ? '' : messageContent(m.content, `${at}.content`),
    };
    if (role === 'assistant' && field(m, 'tool_calls') !== undefined) out.tool_calls = messageToolCalls(m.tool_calls, `${at}.tool_calls`);
    if (role === 'assistant' && typeof m.reasoning_content === 'string') out.reasoning_content = m.reasoning_content;
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string') throw new InvalidFieldError(`${at}.tool_call_id`, 'a tool message needs the id of the call it answers');
      out.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
}

function stops(body: Body): string[] {
  const v = field(body, 'stop');
  if (v === undefined) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.length > 16 || !list.every((s) => typeof s === 'string' && s.length > 0))
    throw new InvalidFieldError('stop', 'expected a non-empty string or an array of at most 16 of them');
  return list as string[];
}

function stopTokenIds(body: Body): number[] {
  const v = field(body, 'stop_token_ids');
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((id) => Number.isInteger(id) && (id as number) >= 0))
    throw new InvalidFieldError('stop_token_ids', 'expected an array of non-negative integer token ids');
  return v as number[];
}

/**
 * Chat: `logprobs: true` with `top_logprobs` 0..20 alternatives; completions: `logprobs` 0..5 (the legacy field,
 * the number of alternatives). Undefined when not asked.
 */
function logprobs(body: Body, kind: 'chat' | 'text'): number | undefined {
  if (kind === 'text') return int(body, 'logprobs', 0, 5);
  const on = bool(body, 'logprobs');
  const top = int(body, 'top_logprobs', 0, 20);
  if (top !== undefined && on !== true) throw new InvalidFieldError('top_logprobs', 'top_logprobs needs logprobs: true');
  return on ? (top ?? 0) : undefined;
}

/** Most choices one request may ask for (`n`): each is a sequence of its own in the batch. */
export const MAX_CHOICES = 16;

function sampling(body: Body, kind: 'chat' | 'text'): SamplingRequest {
  const n = int(body, 'n', 1, MAX_CHOICES) ?? 1;
  const maxKey = kind === 'chat' && field(body, 'max_completion_tokens') !== undefined ? 'max_completion_tokens' : 'max_tokens';
  const topK = num(body, 'top_k', (v) => Number.isInteger(v) && v >= -1, 'an integer >= -1 (-1 or 0 = off)');
  return {
    maxTokens: int(body, maxKey, 1),
    temperature: num(body, 'temperature', (v) => v >= 0 && v <= 2, 'a number in [0, 2]'),
    topP: num(body, 'top_p', (v) => v > 0 && v <= 1, 'a number in (0, 1]'),
    topK: topK === -1 ? 0 : topK,
    minP: num(body, 'min_p', (v) => v >= 0 && v <= 1, 'a number in [0, 1]'),
    presencePenalty: num(body, 'presence_penalty', (v) => v >= -2 && v <= 2, 'a number in [-2, 2]'),
    frequencyPenalty: num(body, 'frequency_penalty', (v) => v >= -2 && v <= 2, 'a number in [-2, 2]'),
    repetitionPenalty: num(body, 'repetition_penalty', (v) => v > 0, 'a number > 0'),
    seed: num(body, 'seed', (v) => Number.isInteger(v), 'an integer'),
    stop: stops(body),
    stopTokenIds: stopTokenIds(body),
    logprobs: logprobs(body, kind),
    n,
  };
}

function common(body: unknown, _kind: 'chat' | 'text'): { body: Body; model: string; stream: boolean; includeUsage: boolean } {
  if (!isObject(body)) throw new InvalidFieldError('body', 'expected a JSON object');
  const model = field(body, 'model');
  if (typeof model !== 'string' || model === '')
    throw new InvalidFieldError('model', 'expected the model name (see GET /v1/models)', model === undefined ? 'missing_required_parameter' : 'invalid_value');
  const stream = bool(body, 'stream') ?? false;
  const so = field(body, 'stream_options');
  if (so !== undefined && !isObject(so)) throw new InvalidFieldError('stream_options', 'expected an object');
  const includeUsage = so === undefined ? false : (bool(so, 'include_usage') ?? false);
  return { body, model, stream, includeUsage };
}

/** A chat request's body, validated (`limits`: the server's, see schema-checks.ts). */
export function parseChatRequest(raw: unknown, limits: RequestLimits = DEFAULT_REQUEST_LIMITS): CompletionRequest {
  const { body, ...rest } = common(raw, 'chat');
  const { enableThinking, templateVariables } = templateKwargs(body);
  const effort = field(body, 'reasoning_effort');
  if (effort !== undefined && !(REASONING_EFFORTS as readonly unknown[]).includes(effort))
    throw new InvalidFieldError('reasoning_effort', `expected one of ${REASONING_EFFORTS.join(', ')}, got ${JSON.stringify(effort)}`);
  return {
    kind: 'chat',
    ...rest,
    prompt: messages(body),
    enableThinking,
    templateVariables,
    reasoningEffort: effort as ReasoningEffort | undefined,
    tools: toolFields(body, limits),
    responseFormat: requestedFormat(body, 'chat', limits),
    ...sampling(body, 'chat'),
  };
}

/** Variables the server sets itself, which chat_template_kwargs may not replace. */
const RESERVED_TEMPLATE_VARIABLES = new Set(['messages', 'tools', 'add_generation_prompt', 'bos_token', 'eos_token']);

/**
 * chat_template_kwargs, as vLLM takes them: enable_thinking (Qwen3 / Qwen3.5 templates) checked as a boolean, the
 * other keys passed to the template as variables (those the server sets itself are refused by name).
 */
function templateKwargs(body: Body): { enableThinking?: boolean; templateVariables?: Record<string, unknown> } {
  const v = field(body, 'chat_template_kwargs');
  if (v === undefined) return {};
  if (!isObject(v)) throw new InvalidFieldError('chat_template_kwargs', 'expected an object such as {"enable_thinking": false}');
  const reserved = Object.keys(v).find((k) => RESERVED_TEMPLATE_VARIABLES.has(k));
  if (reserved !== undefined) throw new InvalidFieldError(`chat_template_kwargs.${reserved}`, 'set by the server from the request; not a template kwarg');
  const { enable_thinking: on, ...rest } = v;
  if (on !== undefined && on !== null && typeof on !== 'boolean')
    throw new InvalidFieldError('chat_template_kwargs.enable_thinking', `expected a boolean, got ${JSON.stringify(on)}`);
  return { enableThinking: (on ?? undefined) as boolean | undefined, templateVariables: Object.keys(rest).length > 0 ? rest : undefined };
}

/** A completions request's body, validated (`limits`: the server's, see schema-checks.ts). */
export function parseCompletionRequest(raw: unknown, limits: RequestLimits = DEFAULT_REQUEST_LIMITS): CompletionRequest {
  const { body, ...rest } = common(raw, 'text');
  let prompt = field(body, 'prompt');
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) prompt = prompt[0];
  // Token ids, as OpenAI's API takes them (checked against the vocabulary in planGeneration).
  if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((t) => Number.isInteger(t) && t >= 0))
    return tokenPrompt(body, rest, prompt as number[], limits);
  if (typeof prompt !== 'string' || prompt === '')
    throw new InvalidFieldError(
      'prompt',
      'expected a non-empty string or array of token ids (one prompt per request)',
      prompt === undefined ? 'missing_required_parameter' : 'invalid_value',
    );
  return tokenPrompt(body, rest, prompt, limits);
}

function tokenPrompt(body: Body, rest: Omit<ReturnType<typeof common>, 'body'>, prompt: string | number[], limits: RequestLimits): CompletionRequest {
  if (field(body, 'echo') === true) throw new UnsupportedFieldError('echo', 'echo is not supported yet');
  if (field(body, 'suffix') !== undefined) throw new UnsupportedFieldError('suffix', 'suffix is not supported');
  return { kind: 'text', ...rest, prompt, responseFormat: requestedFormat(body, 'text', limits), ...sampling(body, 'text') };
}
