// The checks every request's schemas, patterns and grammars pass before the grammar engine sees them
// (serve/schema-checks.ts), and the strict UTF-8 body decoding (serve/strict-json.ts): each limit refuses just past
// its value and names itself; the meta-schema names the keyword and where; every schema of the committed corpus of
// real tool and response schemas (test/fixtures/serve/schema-corpus.json, tools/schema-corpus/) passes.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  checkBodyDepth,
  checkSchema,
  checkTextLength,
  checkToolCount,
  DEFAULT_REQUEST_LIMITS,
  InvalidSchemaError,
  jsonDepth,
  LimitError,
  metaSchemaProblem,
} from '../../src/serve/schema-checks.js';
import { decodeUtf8Strict, InvalidUtf8Error } from '../../src/serve/strict-json.js';

const L = DEFAULT_REQUEST_LIMITS;

const nestedArrays = (depth: number): Record<string, unknown> => {
  let s: Record<string, unknown> = { type: 'integer' };
  for (let i = 1; i < depth; i++) s = { type: 'array', items: s };
  return s;
};

function refusal(f: () => void): LimitError | InvalidSchemaError {
  try {
    f();
  } catch (e) {
    if (e instanceof LimitError || e instanceof InvalidSchemaError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

interface Corpus {
  schemas: { id: string; schema: unknown }[];
  toolSets: { id: string; tools: { function: { parameters?: unknown } }[] }[];
}

describe('serve: schema checks', () => {
  it('measures JSON depth without recursion, even 10^5 deep', () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth({ a: [{ b: 1 }] })).toBe(3);
    let deep: unknown = 0;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(jsonDepth(deep)).toBe(100_000);
    expect(refusal(() => checkBodyDepth(deep)).param).toBe('body');
  });

  it('each limit refuses just past its value, naming the field and the limit', () => {
    expect(() => checkSchema(nestedArrays(L.schemaDepth), 'f')).not.toThrow();
    const deep = refusal(() => checkSchema(nestedArrays(L.schemaDepth + 1), 'response_format.json_schema.schema'));
    expect(deep).toBeInstanceOf(LimitError);
    expect(deep.param).toBe('response_format.json_schema.schema');
    expect(deep.code).toBe('limit_exceeded');
    expect(deep.message).toContain('schemaDepth');
    const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    expect(() => checkSchema({ enum: values(L.enumValues) }, 'f')).not.toThrow();
    expect(refusal(() => checkSchema({ enum: values(L.enumValues + 1) }, 'f')).message).toContain('enumValues');
    const enums = Math.floor(L.schemaEnumValues / L.enumValues) + 1;
    const manyEnums = {
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: enums }, (_, i) => [`p${i}`, { enum: values(L.enumValues) }])),
    };
    expect(refusal(() => checkSchema(manyEnums, 'f')).message).toContain('schemaEnumValues');
    const props = (n: number) => ({ type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'integer' }])) });
    expect(() => checkSchema(props(L.schemaProperties), 'f')).not.toThrow();
    expect(refusal(() => checkSchema(props(L.schemaProperties + 1), 'f')).message).toContain('schemaProperties');
    expect(refusal(() => checkSchema({ type: 'string', pattern: 'a'.repeat(L.patternLength + 1) }, 'f')).message).toContain('patternLength');
    const patterned = { type: 'object', patternProperties: { ['a'.repeat(L.patternLength + 1)]: {} } };
    expect(refusal(() => checkSchema(patterned, 'f')).message).toContain('patternLength');
    expect(refusal(() => checkSchema({ type: 'string', description: 'x'.repeat(L.schemaBytes) }, 'f')).message).toContain('schemaBytes');
    expect(() => checkTextLength('a'.repeat(L.patternLength), 'response_format.regex', 'patternLength')).not.toThrow();
    expect(refusal(() => checkTextLength('a'.repeat(L.patternLength + 1), 'response_format.regex', 'patternLength')).param).toBe('response_format.regex');
    expect(refusal(() => checkTextLength('a'.repeat(L.grammarLength + 1), 'guided_grammar', 'grammarLength')).message).toContain('grammarLength');
    expect(() => checkToolCount(L.tools)).not.toThrow();
    expect(refusal(() => checkToolCount(L.tools + 1)).param).toBe('tools');
    // Limits are the server's to set.
    expect(() => checkSchema(nestedArrays(5), 'f', { ...L, schemaDepth: 4 })).toThrow(LimitError);
  });

  it('the meta-schema names the wrong keyword and where it is', () => {
    const bad = refusal(() => checkSchema({ type: 'object', properties: { x: { type: 'no-such-type' } } }, 'tools[0].function.parameters'));
    expect(bad).toBeInstanceOf(InvalidSchemaError);
    expect(bad.code).toBe('invalid_schema');
    expect(bad.param).toBe('tools[0].function.parameters');
    expect(bad.message).toContain('/properties/x/type');
    expect(bad.message).toContain('"string"');
    expect(metaSchemaProblem({ type: 'object', required: 'a' })).toContain('/required: must be array');
    expect(metaSchemaProblem({ type: 'string', minLength: -1 })).toContain('/minLength');
    expect(metaSchemaProblem({ anyOf: [] })).toContain('/anyOf');
  });

  it('reads each draft by its $schema: 2020-12, 2019-09, draft-07 (the default), draft-06 and draft-04', () => {
    expect(metaSchemaProblem(true)).toBeUndefined();
    expect(metaSchemaProblem({ type: 'array', items: [{ type: 'string' }] })).toBeUndefined();
    const tuple2020 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', items: [{ type: 'string' }] };
    expect(metaSchemaProblem(tuple2020)).toContain('/items');
    expect(metaSchemaProblem({ ...tuple2020, items: false, prefixItems: [{ type: 'string' }] })).toBeUndefined();
    expect(metaSchemaProblem({ $schema: 'https://json-schema.org/draft/2019-09/schema', $defs: { a: { type: 'string' } } })).toBeUndefined();
    expect(metaSchemaProblem({ $schema: 'http://json-schema.org/draft-06/schema#', type: 'number', exclusiveMinimum: 0 })).toBeUndefined();
    expect(metaSchemaProblem({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'number', minimum: 0, exclusiveMinimum: true })).toBeUndefined();
    expect(metaSchemaProblem({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'bogus' })).toContain('/type');
  });

  it('every schema and tool set of the corpus of real schemas passes', () => {
    const corpus = JSON.parse(readFileSync(new URL('../fixtures/serve/schema-corpus.json', import.meta.url), 'utf8')) as Corpus;
    expect(corpus.schemas.length).toBeGreaterThan(50);
    expect(corpus.toolSets.length).toBeGreaterThan(5);
    const refused: string[] = [];
    for (const { id, schema } of corpus.schemas) {
      try {
        checkSchema(schema, id);
      } catch (e) {
        // Raw GitHub schemas (sdbs-uni-p/json-schema-corpus, uncurated) may be invalid JSON Schema: the meta-schema
        // may refuse them, the limits never.
        if (id.startsWith('json-schema-corpus/') && e instanceof InvalidSchemaError) continue;
        refused.push(`${id}: ${(e as Error).message.slice(0, 200)}`);
      }
    }
    for (const { id, tools } of corpus.toolSets) {
      try {
        checkToolCount(tools.length);
        tools.forEach((t, i) => t.function.parameters !== undefined && checkSchema(t.function.parameters, `${id} tools[${i}]`));
      } catch (e) {
        refused.push(`${id}: ${(e as Error).message.slice(0, 200)}`);
      }
    }
    expect(refused).toEqual([]);
  });

  it('decodes bodies as strict UTF-8, naming the first bad byte', () => {
    expect(decodeUtf8Strict(new TextEncoder().encode('{"a": "héllo 😀"}'))).toBe('{"a": "héllo 😀"}');
    const bad = (bytes: number[]) => {
      try {
        decodeUtf8Strict(Uint8Array.from(bytes));
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidUtf8Error);
        return (e as InvalidUtf8Error).message;
      }
      throw new Error('expected InvalidUtf8Error');
    };
    expect(bad([0x7b, 0x22, 0xff, 0x22])).toContain('offset 2');
    expect(bad([0x61, 0x62, 0xc3])).toContain('offset 2'); // a truncated sequence at the end
    expect(bad([0x61, 0xed, 0xa0, 0x80])).toContain('offset 2'); // a surrogate: ED cannot be followed by A0
    expect(bad([0xc0, 0xaf])).toContain('offset 0'); // overlong
  });
});
