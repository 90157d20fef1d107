// What a request's schemas, patterns and grammars must satisfy before any of them reaches the grammar engine: size
// limits (each a 400 naming the field and the limit, code `limit_exceeded`) and the JSON Schema meta-schema (ajv;
// code `invalid_schema`, naming the keyword and where it is). The limits are far above every schema of a public
// corpus of real tool and response schemas (tools/schema-corpus/README.md) and below what breaks the engine:
// XGrammar 0.1.27 traps on arrays nested 70 deep and objects nested 60 deep (120 JSON levels).
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { createRequire } from 'node:module';
import { ApiError } from './errors.js';

export interface RequestLimits {
  /** JSON nesting of the whole request body (an object in an object is 2). */
  readonly bodyDepth: number;
  /** JSON nesting of one schema (`{"type": "array", "items": {}}` is 2). */
  readonly schemaDepth: number;
  /** Bytes of one schema as compact JSON. */
  readonly schemaBytes: number;
  /** Tools offered in one request. */
  readonly tools: number;
  /** Values of one `enum`. */
  readonly enumValues: number;
  /** `enum` values in one schema, all together. */
  readonly schemaEnumValues: number;
  /** Property names (`properties` keys) in one schema, all together. */
  readonly schemaProperties: number;
  /** Characters of one `pattern` (or `patternProperties` key) in a schema, and of a regex response format. */
  readonly patternLength: number;
  /** Characters of an EBNF grammar response format. */
  readonly grammarLength: number;
}

/**
 * Each about 1.5x or more the largest value seen in 33,546 distinct real schemas and 5,303 tool sets
 * (tools/schema-corpus/README.md: depth 27, 1.3 MB, 117 tools, an enum of 5,383, 27,791 enum values in one schema,
 * a pattern of 6,449 characters, 10,695 properties); tools is OpenAI's limit. schemaBytes is above the default body
 * limit (1 MiB, --max-body), so a server that raises that takes the largest real schemas.
 */
export const DEFAULT_REQUEST_LIMITS: RequestLimits = {
  bodyDepth: 96,
  schemaDepth: 48,
  schemaBytes: 2 * 1024 * 1024,
  tools: 128,
  enumValues: 8192,
  schemaEnumValues: 65_536,
  schemaProperties: 16_384,
  patternLength: 8192,
  grammarLength: 64 * 1024,
};

/** A request past one of the server's limits: 400, naming the field and the limit. */
export class LimitError extends ApiError {
  constructor(param: string, what: string, limit: number, name: keyof RequestLimits) {
    super(400, `${param}: ${what}; the server accepts at most ${limit} (limit ${name})`, 'invalid_request_error', param, 'limit_exceeded');
  }
}

/** A schema the JSON Schema meta-schema rejects: 400 naming the field, the keyword and where in the schema. */
export class InvalidSchemaError extends ApiError {
  constructor(param: string, message: string) {
    super(400, `${param}: not a valid JSON Schema: ${message}`, 'invalid_request_error', param, 'invalid_schema');
  }
}

/** Nesting depth of a JSON value, without recursion (a value nested 10^5 deep must not overflow the stack). */
export function jsonDepth(value: unknown, stopPast = Number.POSITIVE_INFINITY): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > stopPast) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** The request body's nesting, checked first (everything after it may recurse). */
export function checkBodyDepth(body: unknown, limits: RequestLimits = DEFAULT_REQUEST_LIMITS): void {
  const depth = jsonDepth(body, limits.bodyDepth);
  if (depth > limits.bodyDepth) throw new LimitError('body', `the JSON nests more than ${limits.bodyDepth} levels deep`, limits.bodyDepth, 'bodyDepth');
}

/** Counts of the keywords the limits bound, over every object of a schema. */
function keywordCounts(schema: unknown): { maxEnum: number; enums: number; properties: number; longestPattern: number } {
  const out = { maxEnum: 0, enums: 0, properties: 0, longestPattern: 0 };
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      stack.push(...v);
      continue;
    }
    const o = v as Record<string, unknown>;
    if (Array.isArray(o.enum)) {
      out.maxEnum = Math.max(out.maxEnum, o.enum.length);
      out.enums += o.enum.length;
    }
    if (typeof o.properties === 'object' && o.properties !== null && !Array.isArray(o.properties)) out.properties += Object.keys(o.properties).length;
    if (typeof o.pattern === 'string') out.longestPattern = Math.max(out.longestPattern, o.pattern.length);
    const patterned = o.patternProperties;
    if (typeof patterned === 'object' && patterned !== null && !Array.isArray(patterned))
      for (const key of Object.keys(patterned)) out.longestPattern = Math.max(out.longestPattern, key.length);
    for (const child of Object.values(o)) if (typeof child === 'object' && child !== null) stack.push(child);
  }
  return out;
}

/** Checks one schema (a request field: `param` names it) against the limits, then the meta-schema. */
export function checkSchema(schema: unknown, param: string, limits: RequestLimits = DEFAULT_REQUEST_LIMITS): void {
  const depth = jsonDepth(schema, limits.schemaDepth);
  if (depth > limits.schemaDepth)
    throw new LimitError(param, `the schema nests more than ${limits.schemaDepth} levels deep`, limits.schemaDepth, 'schemaDepth');
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > limits.schemaBytes) throw new LimitError(param, `the schema is ${bytes} bytes`, limits.schemaBytes, 'schemaBytes');
  const n = keywordCounts(schema);
  if (n.maxEnum > limits.enumValues) throw new LimitError(param, `an enum has ${n.maxEnum} values`, limits.enumValues, 'enumValues');
  if (n.enums > limits.schemaEnumValues) throw new LimitError(param, `the schema's enums have ${n.enums} values`, limits.schemaEnumValues, 'schemaEnumValues');
  if (n.properties > limits.schemaProperties)
    throw new LimitError(param, `the schema names ${n.properties} properties`, limits.schemaProperties, 'schemaProperties');
  if (n.longestPattern > limits.patternLength)
    throw new LimitError(param, `a pattern is ${n.longestPattern} characters`, limits.patternLength, 'patternLength');
  const problem = metaSchemaProblem(schema);
  if (problem) throw new InvalidSchemaError(param, problem);
}

/** A regex or EBNF grammar response format's text against its limit. */
export function checkTextLength(text: string, param: string, kind: 'patternLength' | 'grammarLength', limits: RequestLimits = DEFAULT_REQUEST_LIMITS): void {
  if (text.length > limits[kind]) throw new LimitError(param, `${text.length} characters`, limits[kind], kind);
}

/** The number of tools against its limit. */
export function checkToolCount(count: number, limits: RequestLimits = DEFAULT_REQUEST_LIMITS): void {
  if (count > limits.tools) throw new LimitError('tools', `${count} tools`, limits.tools, 'tools');
}

type Draft = '2020-12' | '2019-09' | 'draft-07' | 'draft-06';

/** One validator per draft: the meta-schema itself, compiled once. */
const metaValidators = new Map<Draft, ValidateFunction>();

function metaValidator(draft: Draft): ValidateFunction {
  let v = metaValidators.get(draft);
  if (!v) {
    const options = { strict: false, validateFormats: false };
    if (draft === '2020-12') v = new Ajv2020(options).getSchema('https://json-schema.org/draft/2020-12/schema')!;
    else if (draft === '2019-09') v = new Ajv2019(options).getSchema('https://json-schema.org/draft/2019-09/schema')!;
    else {
      const ajv = new Ajv(options);
      if (draft === 'draft-06') ajv.addMetaSchema(createRequire(import.meta.url)('ajv/dist/refs/json-schema-draft-06.json') as object);
      v = ajv.getSchema(draft === 'draft-06' ? 'http://json-schema.org/draft-06/schema' : 'http://json-schema.org/draft-07/schema')!;
    }
    metaValidators.set(draft, v);
  }
  return v;
}

/**
 * The draft a schema is read under: the one its `$schema` names, else draft-07, whose meta-schema accepts what
 * the OpenAI API's schemas use ($defs and prefixItems are allowed as unknown keywords; draft-07 tuple `items`).
 * Draft-04 schemas are read as draft-06 with their boolean exclusiveMinimum / exclusiveMaximum set aside.
 */
function draftOf(schema: unknown): Draft {
  const uri = typeof schema === 'object' && schema !== null ? (schema as { $schema?: unknown }).$schema : undefined;
  if (typeof uri !== 'string') return 'draft-07';
  if (uri.includes('2020-12')) return '2020-12';
  if (uri.includes('2019-09')) return '2019-09';
  if (uri.includes('draft-06') || uri.includes('draft-04') || uri.includes('draft-03')) return 'draft-06';
  return 'draft-07';
}

/** Draft-04's boolean exclusive bounds, which later drafts made numbers, left out for the meta-schema check. */
function withoutDraft04Booleans(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) =>
    (key === 'exclusiveMinimum' || key === 'exclusiveMaximum') && typeof value === 'boolean' ? undefined : value,
  );
}

function describe(e: ErrorObject): string {
  const where = e.instancePath === '' ? 'the schema' : `at ${e.instancePath}`;
  const allowed = (e.params as { allowedValues?: unknown[] }).allowedValues;
  const detail = allowed ? ` (${allowed.map((a) => JSON.stringify(a)).join(', ')})` : '';
  return `${where}: ${e.message ?? 'invalid'}${detail} (meta-schema keyword '${e.keyword}')`;
}

/** What the meta-schema says is wrong with a schema (the most specific error), or undefined when it is valid. */
export function metaSchemaProblem(schema: unknown): string | undefined {
  if (typeof schema === 'boolean') return undefined;
  const draft = draftOf(schema);
  const uri = (schema as { $schema?: unknown }).$schema;
  const checked = typeof uri === 'string' && uri.includes('draft-04') ? withoutDraft04Booleans(schema) : schema;
  const validate = metaValidator(draft);
  if (validate(checked)) return undefined;
  const errors = validate.errors ?? [];
  // The deepest error names the offending keyword; anyOf / oneOf wrappers come after their branches.
  const deepest = [...errors].sort((a, b) => b.instancePath.length - a.instancePath.length)[0];
  return deepest ? describe(deepest) : 'rejected by the meta-schema';
}
