// Structured outputs in the server: the request fields that constrain decoding, validated, and the grammar a
// forced tool call decodes under.
// - Both routes: OpenAI's `response_format` ({type: "text" | "json_object" | "json_schema", ...}), plus the
//   engine's `{type: "regex", regex}` and `{type: "grammar", grammar, root?}` (XGrammar's EBNF).
// - /v1/completions also takes vLLM's `guided_json`, `guided_regex` and `guided_grammar` (one at most).
// - `tool_choice: "required"` or a named function, for Qwen3's JSON tool calls: a grammar of the call (a JSON schema
//   of {"name", "arguments"} per offered tool) inside the model's `<tool_call>\n...\n</tool_call>` tags.
// Every schema is checked against the server's limits and the JSON Schema meta-schema as the request is read
// (schema-checks.ts). A format is compiled before the request is queued, in the server's grammar worker (compiled
// grammars are cached there), so a schema the engine rejects, or one that takes past the time limit to compile, is
// a 400 naming the field, never a failed generation or a stalled server.
import { compileResponseFormat, GrammarError, jsonSchemaGrammar, type ResponseFormat } from '../generate/grammar.js';
import type { ChatOutputOptions } from './chat-output/chat-output.js';
import { QWEN_TOOL_CALLS } from './chat-output/tool-call-formats.js';
import { ApiError, InvalidFieldError, UnavailableError, UnsupportedFieldError } from './errors.js';
import { GrammarTimeoutError, GrammarWorkerClosedError, type GrammarCompiling } from '../generate/grammar-worker/client.js';
import { checkSchema, checkTextLength, type RequestLimits } from './schema-checks.js';
import type { GenerationPlan, ServedModel } from './generation-plan.js';
import type { CompletionRequest } from './request.js';

/** A format whose compile ran past the server's limit: 400 naming the field and the limit. */
export class GrammarTimeoutApiError extends ApiError {
  constructor(param: string, e: GrammarTimeoutError) {
    super(400, `${param}: ${e.message} (limit grammarCompileTimeoutMs)`, 'invalid_request_error', param, 'grammar_timeout');
  }
}

/** A request's response format and the field it came from (named in a 400). */
export interface RequestedFormat {
  format: ResponseFormat;
  /** The field holding what the engine compiles: `response_format.json_schema.schema`, `guided_regex`, ... */
  field: string;
}

type Body = Record<string, unknown>;

const isObject = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown) => v !== undefined && v !== null;

function text(v: unknown, at: string, want: string): string {
  if (typeof v !== 'string' || v === '') throw new InvalidFieldError(at, `expected ${want}, got ${JSON.stringify(v)}`);
  return v;
}

/** A regex or EBNF field's text, within its length limit. */
function boundedText(v: unknown, at: string, want: string, kind: 'patternLength' | 'grammarLength', limits: RequestLimits): string {
  const t = text(v, at, want);
  checkTextLength(t, at, kind, limits);
  return t;
}

/** A schema field (an object, or its JSON text), checked against the limits and the meta-schema. */
function schemaValue(v: unknown, at: string, limits: RequestLimits): Record<string, unknown> | boolean | undefined {
  if (!present(v)) return undefined;
  let schema: unknown = v;
  if (typeof v === 'string') {
    try {
      schema = JSON.parse(v);
    } catch {
      throw new InvalidFieldError(at, 'expected a JSON schema (an object); the string is not JSON');
    }
  }
  if (typeof schema !== 'boolean' && !isObject(schema)) throw new InvalidFieldError(at, 'expected a JSON schema (an object)');
  checkSchema(schema, at, limits);
  return schema;
}

const TYPES = ['text', 'json_object', 'json_schema', 'regex', 'grammar'];

function responseFormatField(v: unknown, limits: RequestLimits): RequestedFormat | undefined {
  if (!isObject(v) || typeof v.type !== 'string')
    throw new InvalidFieldError('response_format', 'expected an object such as {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}');
  switch (v.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { format: { type: 'json_object' }, field: 'response_format' };
    case 'json_schema': {
      const js = v.json_schema;
      if (!isObject(js))
        throw new InvalidFieldError(
          'response_format.json_schema',
          'expected {"name": ..., "schema": {...}, "strict": true}',
          present(js) ? 'invalid_value' : 'missing_required_parameter',
        );
      if (present(js.name) && (typeof js.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(js.name)))
        throw new InvalidFieldError('response_format.json_schema.name', `expected 1-64 letters, digits, '_' or '-', got ${JSON.stringify(js.name)}`);
      if (present(js.description) && typeof js.description !== 'string')
        throw new InvalidFieldError('response_format.json_schema.description', 'expected a string');
      if (present(js.strict) && typeof js.strict !== 'boolean') throw new InvalidFieldError('response_format.json_schema.strict', 'expected a boolean');
      const schema = schemaValue(js.schema, 'response_format.json_schema.schema', limits);
      return {
        format: {
          type: 'json_schema',
          json_schema: {
            ...(present(js.name) ? { name: js.name as string } : {}),
            ...(schema !== undefined ? { schema } : {}),
            strict: js.strict === true,
          },
        },
        field: 'response_format.json_schema.schema',
      };
    }
    case 'regex':
      return {
        format: { type: 'regex', regex: boundedText(v.regex, 'response_format.regex', 'a regular expression', 'patternLength', limits) },
        field: 'response_format.regex',
      };
    case 'grammar': {
      const root = present(v.root) ? text(v.root, 'response_format.root', 'the name of the start rule') : undefined;
      const grammar = boundedText(v.grammar, 'response_format.grammar', "an EBNF grammar (XGrammar's dialect: root ::= ...)", 'grammarLength', limits);
      return { format: { type: 'grammar', grammar, ...(root ? { root } : {}) }, field: 'response_format.grammar' };
    }
    default:
      throw new InvalidFieldError('response_format.type', `expected one of ${TYPES.join(', ')}, got ${JSON.stringify(v.type)}`);
  }
}

/** vLLM's guided decoding fields of /v1/completions. */
function guidedField(body: Body, limits: RequestLimits): RequestedFormat | undefined {
  const given = ['guided_json', 'guided_regex', 'guided_grammar'].filter((k) => present(body[k]));
  if (given.length > 1) throw new InvalidFieldError(given[1]!, `${given.join(' and ')} both constrain the output; give one`);
  if (present(body.guided_json)) {
    const schema = schemaValue(body.guided_json, 'guided_json', limits);
    return { format: { type: 'json_schema', json_schema: { schema, strict: false } }, field: 'guided_json' };
  }
  if (present(body.guided_regex))
    return {
      format: { type: 'regex', regex: boundedText(body.guided_regex, 'guided_regex', 'a regular expression', 'patternLength', limits) },
      field: 'guided_regex',
    };
  if (present(body.guided_grammar))
    return {
      format: { type: 'grammar', grammar: boundedText(body.guided_grammar, 'guided_grammar', 'an EBNF grammar', 'grammarLength', limits) },
      field: 'guided_grammar',
    };
  return undefined;
}

/** The request's response format (undefined: unconstrained); chat takes `response_format`, completions vLLM's fields too. */
export function requestedFormat(body: Body, kind: 'chat' | 'text', limits: RequestLimits): RequestedFormat | undefined {
  const guided = kind === 'text' ? guidedField(body, limits) : undefined;
  if (!present(body.response_format)) return guided;
  if (guided) throw new InvalidFieldError(guided.field, `both response_format and ${guided.field} constrain the output; give one`);
  return responseFormatField(body.response_format, limits);
}

/**
 * The grammar of a forced call in Qwen3's format, `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`:
 * a named choice makes one call of that function; `required` one call of any offered tool, or with
 * parallel_tool_calls (the default) one or more on their own lines. Arguments hold only the properties a tool
 * declares (strict, as OpenAI's strict function calling), so a call ends.
 */
async function qwenToolCallGrammar(output: ChatOutputOptions, engine: GrammarCompiling | undefined): Promise<ResponseFormat> {
  const calls = [...(output.tools ?? new Map())].map(([name, t]) => ({
    type: 'object',
    properties: { name: { const: name }, arguments: t.parameters ?? { type: 'object', properties: {} } },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  const schema = calls.length === 1 ? calls[0]! : { anyOf: calls };
  const json = await (engine ? engine.jsonSchemaGrammar(schema, true) : jsonSchemaGrammar(schema, true));
  const nl = JSON.stringify('\n');
  const block = `forced_tool_call ::= ${JSON.stringify(QWEN_TOOL_CALLS.open)} ${nl} root ${nl} ${JSON.stringify(QWEN_TOOL_CALLS.close)}`;
  const many = output.toolChoice?.kind !== 'required' || output.parallelToolCalls === false ? 'forced_tool_call' : `forced_tool_call (${nl} forced_tool_call)*`;
  return { type: 'grammar', grammar: `${json}\n${block}\nforced_tool_calls ::= ${many}\n`, root: 'forced_tool_calls' };
}

/**
 * Whether a forced tool choice is decoded under a grammar: Qwen3's JSON calls with thinking off. Qwen3.5 / Qwen3.6's
 * XML calls and LFM2's Pythonic ones (its tags are special tokens no grammar can write), and a turn that may think
 * first, are checked after decoding instead (ChatOutput).
 */
function forcesCall(req: CompletionRequest, output: ChatOutputOptions, templateSource: string): boolean {
  const kind = output.toolChoice?.kind;
  if ((kind !== 'required' && kind !== 'function') || output.toolCalls !== QWEN_TOOL_CALLS) return false;
  if (templateSource.includes('<function=')) return false;
  const thinking = req.enableThinking === true || (req.reasoningEffort !== undefined && req.reasoningEffort !== 'none');
  return !thinking && output.startsInReasoning !== true;
}

/**
 * Adds the request's response format (or a forced call's grammar) to the plan, compiled against the model's
 * vocabulary first: a format the engine rejects is a 400 naming its field.
 */
export async function constrainPlan(plan: GenerationPlan, req: CompletionRequest, served: ServedModel): Promise<GenerationPlan> {
  let requested = req.responseFormat;
  const output = plan.chatOutput;
  if (output && forcesCall(req, output, served.tokenizer.chatTemplateSource)) {
    if (requested) throw new UnsupportedFieldError('response_format', 'a forced tool_choice already constrains the answer to a call; drop one of them');
    try {
      requested = { format: await qwenToolCallGrammar(output, served.grammar), field: 'tools' };
    } catch (e) {
      if (e instanceof GrammarWorkerClosedError) throw new UnavailableError('The server is shutting down', 'shutting_down');
      if (e instanceof GrammarTimeoutError) throw new GrammarTimeoutApiError('tools', e);
      if (e instanceof GrammarError) throw new InvalidFieldError('tools', `a tool's parameters are not a JSON schema the server can decode to: ${e.message}`);
      throw e;
    }
  }
  if (!requested) return plan;
  if (output?.startsInReasoning)
    throw new UnsupportedFieldError(
      'response_format',
      'the prompt opens a <think> block and the format would constrain the reasoning; turn thinking off (chat_template_kwargs.enable_thinking: false)',
    );
  try {
    // In the grammar worker (bounded in time; a trap there costs a new worker, not the server).
    if (served.grammar) await served.grammar.compile(requested.format);
    else await compileResponseFormat(served.tokenizer, served.loaded.config.vocabSize, requested.format);
  } catch (e) {
    if (e instanceof GrammarWorkerClosedError) throw new UnavailableError('The server is shutting down', 'shutting_down');
    if (e instanceof GrammarTimeoutError) throw new GrammarTimeoutApiError(requested.field, e);
    if (e instanceof GrammarError) throw new InvalidFieldError(requested.field, e.message);
    throw e;
  }
  return { ...plan, options: { ...plan.options, responseFormat: requested.format } };
}
