// The tool-call formats models write, each a pair of tags around a block and a parser for the block's body:
// - Qwen3 (Hermes style): `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one call a block;
//   Qwen3.5 / Qwen3.6 (and Qwen3-Coder) write XML in the same tags: `<tool_call>\n<function=f>\n<parameter=a>\n1\n
//   </parameter>\n</function>\n</tool_call>`, each value raw text typed by the tool's JSON schema.
// - LFM2: `<|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>`, Python calls, several a block.
import { ToolCallSyntaxError } from './errors.js';
import type { TextTokenizer } from '../../tokenizer/tokenizer.js';
import { parsePythonCalls, PythonCallSyntaxError, pythonCalls, type ParsedCall } from './python-calls.js';

/** The tools a request offers, by name, with their JSON-schema parameters. */
export type ToolSchemas = ReadonlyMap<string, { parameters?: Record<string, unknown> }>;

export interface ToolCallFormat {
  readonly name: 'qwen' | 'lfm2';
  readonly open: string;
  readonly close: string;
  /** The calls in one block's body (between the tags); throws ToolCallSyntaxError. */
  parse(body: string, tools: ToolSchemas): ParsedCall[];
  /** Earlier calls as the model writes them, for templates that do not render `tool_calls` themselves. */
  render?(calls: readonly ParsedCall[]): string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseQwenJson(body: string): ParsedCall {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (e) {
    throw new ToolCallSyntaxError(`not JSON (${(e as Error).message})`, body);
  }
  if (!isObject(value) || typeof value.name !== 'string' || value.name === '')
    throw new ToolCallSyntaxError('expected {"name": ..., "arguments": {...}}', body);
  let args = value.arguments ?? value.parameters ?? {};
  // Some checkpoints write the arguments as a JSON string; accept it only when it holds an object.
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      throw new ToolCallSyntaxError('"arguments" is a string that is not a JSON object', body);
    }
  }
  if (!isObject(args)) throw new ToolCallSyntaxError('"arguments" is not an object', body);
  return { name: value.name, arguments: args };
}

/** The JSON-schema types a parameter may take ([] when the schema does not say). */
function schemaTypes(tools: ToolSchemas, fn: string, param: string): string[] {
  const props = tools.get(fn)?.parameters?.properties;
  const schema = isObject(props) ? props[param] : undefined;
  if (!isObject(schema)) return [];
  const t = schema.type;
  if (typeof t === 'string') return [t];
  if (Array.isArray(t)) return t.filter((x): x is string => typeof x === 'string');
  return isObject(schema) && Array.isArray(schema.enum) && schema.enum.every((e) => typeof e === 'string') ? ['string'] : [];
}

/** An XML parameter's raw text as the value its schema asks for (raw text for strings). */
function typedValue(raw: string, types: string[], fn: string, param: string, body: string): unknown {
  if (types.includes('string')) return raw;
  const text = raw.trim();
  if (types.includes('boolean') && (text === 'True' || text === 'False')) return text === 'True';
  if (types.includes('null') && text === 'None') return null;
  try {
    return JSON.parse(text);
  } catch {
    if (types.length === 0) return raw;
    throw new ToolCallSyntaxError(`parameter '${param}' of '${fn}' should be ${types.join(' or ')}, got ${JSON.stringify(raw)}`, body);
  }
}

const XML_FUNCTION = /^<function=([^>\n]+)>([\s\S]*)<\/function>$/;
const XML_PARAMETER = /<parameter=([^>\n]+)>\n?([\s\S]*?)\n?<\/parameter>/y;

function parseQwenXml(body: string, tools: ToolSchemas): ParsedCall {
  const fn = XML_FUNCTION.exec(body);
  if (!fn) throw new ToolCallSyntaxError('expected <function=NAME>...</function>', body);
  const name = fn[1]!.trim();
  const inner = fn[2]!;
  const args: Record<string, unknown> = {};
  let at = 0;
  for (;;) {
    while (at < inner.length && /\s/.test(inner[at]!)) at++;
    if (at >= inner.length) break;
    XML_PARAMETER.lastIndex = at;
    const p = XML_PARAMETER.exec(inner);
    if (!p) throw new ToolCallSyntaxError(`expected <parameter=NAME>value</parameter> at ${JSON.stringify(inner.slice(at, at + 40))}`, body);
    const key = p[1]!.trim();
    if (key in args) throw new ToolCallSyntaxError(`parameter '${key}' given twice`, body);
    args[key] = typedValue(p[2]!, schemaTypes(tools, name, key), name, key, body);
    at = XML_PARAMETER.lastIndex;
  }
  return { name, arguments: args };
}

export const QWEN_TOOL_CALLS: ToolCallFormat = {
  name: 'qwen',
  open: '<tool_call>',
  close: '</tool_call>',
  parse(body, tools) {
    const text = body.trim();
    if (text.startsWith('<function=')) return [parseQwenXml(text, tools)];
    return [parseQwenJson(text)];
  },
};

export const LFM2_TOOL_CALLS: ToolCallFormat = {
  name: 'lfm2',
  open: '<|tool_call_start|>',
  close: '<|tool_call_end|>',
  parse(body) {
    try {
      return parsePythonCalls(body);
    } catch (e) {
      if (e instanceof PythonCallSyntaxError) throw new ToolCallSyntaxError(`not a list of Python calls (${e.message})`, body);
      throw e;
    }
  },
  render: (calls) => `<|tool_call_start|>${pythonCalls(calls)}<|tool_call_end|>`,
};

/** True when `tag` is one token of the vocabulary (an added token), not text spelled out of several. */
export function isSingleToken(tokenizer: TextTokenizer, tag: string): boolean {
  return tokenizer.encode(tag).length === 1;
}

/**
 * The format this tokenizer's model writes: LFM2's when `<|tool_call_start|>` is a token, Qwen's when `<tool_call>`
 * is; undefined for a model with neither.
 */
export function toolCallFormatOf(tokenizer: TextTokenizer): ToolCallFormat | undefined {
  if (isSingleToken(tokenizer, LFM2_TOOL_CALLS.open)) return LFM2_TOOL_CALLS;
  if (isSingleToken(tokenizer, QWEN_TOOL_CALLS.open) || tokenizer.chatTemplateSource.includes(QWEN_TOOL_CALLS.open)) return QWEN_TOOL_CALLS;
  return undefined;
}
