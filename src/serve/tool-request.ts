// The tool fields of a chat request, validated: `tools`, `tool_choice`, `parallel_tool_calls`, and the tool parts of
// the messages (an assistant's `tool_calls`, a tool result's `tool_call_id`), in the shapes the chat templates read.
import type { ChatToolCall } from '../tokenizer/tokenizer.js';
import type { ToolChoice } from './chat-output/chat-output.js';
import { InvalidFieldError } from './errors.js';
import { checkSchema, checkToolCount, type RequestLimits } from './schema-checks.js';

/** An offered tool as OpenAI's API takes it (and as the templates render it with `tojson`). */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export interface ToolFields {
  /** The offered tools (none when absent). */
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
}

type Body = Record<string, unknown>;

const isObject = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown) => v !== undefined && v !== null;
const FUNCTION_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

function tool(v: unknown, at: string, limits: RequestLimits): ToolDefinition {
  if (!isObject(v) || v.type !== 'function' || !isObject(v.function))
    throw new InvalidFieldError(at, 'expected {"type": "function", "function": {"name": ..., "parameters": {...}}}');
  const fn = v.function;
  if (typeof fn.name !== 'string' || !FUNCTION_NAME.test(fn.name))
    throw new InvalidFieldError(`${at}.function.name`, `expected 1-64 letters, digits, '_', '.', ':' or '-', got ${JSON.stringify(fn.name)}`);
  if (present(fn.description) && typeof fn.description !== 'string') throw new InvalidFieldError(`${at}.function.description`, 'expected a string');
  if (present(fn.parameters) && !isObject(fn.parameters)) throw new InvalidFieldError(`${at}.function.parameters`, 'expected a JSON schema object');
  // Checked whatever tool_choice is: a schema the model is shown is one it may be asked to follow.
  if (present(fn.parameters)) checkSchema(fn.parameters, `${at}.function.parameters`, limits);
  const out: ToolDefinition['function'] = { name: fn.name };
  if (present(fn.description)) out.description = fn.description as string;
  if (present(fn.parameters)) out.parameters = fn.parameters as Record<string, unknown>;
  if (typeof fn.strict === 'boolean') out.strict = fn.strict;
  return { type: 'function', function: out };
}

function toolChoice(v: unknown, tools: ToolDefinition[]): ToolChoice {
  if (!present(v)) return tools.length > 0 ? { kind: 'auto' } : { kind: 'none' };
  if (v === 'none') return { kind: 'none' };
  if (v !== 'auto' && v !== 'required' && !(isObject(v) && v.type === 'function' && isObject(v.function) && typeof v.function.name === 'string'))
    throw new InvalidFieldError('tool_choice', 'expected "none", "auto", "required" or {"type": "function", "function": {"name": ...}}');
  if (tools.length === 0) throw new InvalidFieldError('tool_choice', 'tool_choice other than "none" needs tools');
  if (typeof v === 'string') return { kind: v };
  const name = (v.function as Body).name as string;
  if (!tools.some((t) => t.function.name === name))
    throw new InvalidFieldError('tool_choice.function.name', `'${name}' is not among the tools (${tools.map((t) => t.function.name).join(', ')})`);
  return { kind: 'function', name };
}

/** The request's tool fields; every tool's parameters checked against the limits and the meta-schema. */
export function toolFields(body: Body, limits: RequestLimits): ToolFields {
  const raw = body.tools;
  if (present(raw) && !Array.isArray(raw)) throw new InvalidFieldError('tools', 'expected an array of tools');
  if (present(raw)) checkToolCount((raw as unknown[]).length, limits);
  const tools = present(raw) ? (raw as unknown[]).map((t, i) => tool(t, `tools[${i}]`, limits)) : [];
  const names = new Set<string>();
  for (const [i, t] of tools.entries()) {
    if (names.has(t.function.name)) throw new InvalidFieldError(`tools[${i}].function.name`, `'${t.function.name}' is offered twice`);
    names.add(t.function.name);
  }
  const parallel = body.parallel_tool_calls;
  if (present(parallel) && typeof parallel !== 'boolean') throw new InvalidFieldError('parallel_tool_calls', 'expected a boolean');
  return { tools, toolChoice: toolChoice(body.tool_choice, tools), parallelToolCalls: (parallel as boolean | undefined) ?? true };
}

/** An assistant message's `tool_calls`, arguments parsed from their JSON string into objects for the template. */
export function messageToolCalls(v: unknown, at: string): ChatToolCall[] {
  if (!Array.isArray(v)) throw new InvalidFieldError(at, 'expected an array of tool calls');
  return v.map((call, j) => {
    const here = `${at}[${j}]`;
    if (!isObject(call) || !isObject(call.function) || typeof call.function.name !== 'string')
      throw new InvalidFieldError(here, 'expected {"id": ..., "type": "function", "function": {"name": ..., "arguments": "{...}"}}');
    const raw = call.function.arguments;
    let args: unknown = raw ?? {};
    if (typeof raw === 'string') {
      try {
        args = raw.trim() === '' ? {} : JSON.parse(raw);
      } catch (e) {
        throw new InvalidFieldError(`${here}.function.arguments`, `not valid JSON (${(e as Error).message})`);
      }
    }
    if (!isObject(args)) throw new InvalidFieldError(`${here}.function.arguments`, 'expected a JSON object (as a string)');
    return { ...(typeof call.id === 'string' ? { id: call.id } : {}), type: 'function', function: { name: call.function.name, arguments: args } };
  });
}
