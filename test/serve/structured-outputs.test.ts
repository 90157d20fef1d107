// Structured outputs through the official openai client, on the tiny random-weight Qwen3-MoE (the real Qwen3
// tokenizer and chat template): random weights write gibberish, so every answer that parses and validates (ajv) is
// the grammar's doing. json_schema (streamed and not) and json_object on the chat route, a regex and an EBNF grammar
// on the completions route, on both schedulers; concurrent requests under different schemas sharing batched decode
// steps; a bad schema is a 400 naming the field and the server goes on; a forced tool choice decodes to a call.
// The schemas are bounded (enums, maxLength, integer ranges, maxItems) so an untrained model finishes them. The
// model is TINY_CHAT_MOE at hidden size 8: the full 151936-token vocabulary (the chat template's special tokens need
// it) costs the CPU backend about 0.1 s a token.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { setDefaultDevice } from '../../src/runtime/registry.js';
import type { RunningServer } from '../../src/serve/server.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { metric, MODEL, serve } from './helpers.js';

type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk;
type FunctionCall = OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;

const ajv = new Ajv({ strict: false });

const SCHEMAS: Record<string, Record<string, unknown>> = {
  color: {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, shade: { type: 'string', enum: ['light', 'dark'] } },
    required: ['color', 'shade'],
    additionalProperties: false,
  },
  person: {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 120 }, admin: { type: 'boolean' } },
    required: ['name', 'age', 'admin'],
    additionalProperties: false,
  },
  tags: {
    type: 'object',
    properties: { tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 3 } },
    required: ['tags'],
    additionalProperties: false,
  },
};

const jsonSchema = (name: string) => ({ type: 'json_schema' as const, json_schema: { name, schema: SCHEMAS[name]!, strict: true } });
const ASK = [{ role: 'user' as const, content: 'Describe something as JSON.' }];

const TOOLS: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: {
        type: 'object',
        properties: { city: { enum: ['Paris', 'Oslo'] }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } },
  },
];

let loaded: LoadedModel;
const servers: RunningServer[] = [];

beforeAll(async () => {
  setDefaultDevice('cpu');
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-structured-serve-'));
  const config = { ...TINY_CHAT_MOE, hiddenSize: 8, headDim: 4, intermediateSize: 16 };
  await writeRandomQwen3Checkpoint(dir, { ...config, moe: { ...config.moe!, moeIntermediateSize: 8 } }, { seed: 7, extraFiles: await qwen3TokenizerFiles() });
  loaded = await loadModel(dir, { device: 'cpu' });
}, 120_000);

afterAll(async () => {
  for (const s of servers) await s.close();
  loaded?.model.dispose();
});

function expectValid(name: string, text: string): void {
  const value: unknown = JSON.parse(text);
  const validate = ajv.compile(SCHEMAS[name]!);
  expect(validate(value), `${name}: ${text} ${ajv.errorsText(validate.errors)}`).toBe(true);
}

async function streamed(stream: AsyncIterable<Chunk>): Promise<{ content: string; finish: string | null }> {
  let content = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    content += chunk.choices[0]?.delta.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { content, finish };
}

// Everything on the batch scheduler; the one-at-a-time scheduler (generate() under the format) gets a schema and a
// forced call.
describe.each([
  ['continuous batching', {}, Object.keys(SCHEMAS)],
  ['one at a time', { maxBatch: 1 }, ['color']],
])('serve: structured outputs (%s)', (_name, options, schemas) => {
  const batching = schemas.length > 1;
  let client: OpenAI;
  let server: RunningServer;

  beforeAll(async () => {
    ({ server, client } = await serve(loaded, options));
    servers.push(server);
  }, 120_000);

  it('json_schema answers parse and validate, streamed and not, and end on their own', async () => {
    // The first schema both ways, the others alternately (each request costs the CPU a second or two).
    for (const [k, name] of schemas.entries()) {
      const request = { model: MODEL, messages: ASK, max_tokens: 80, temperature: 1, seed: 3 + k, response_format: jsonSchema(name) };
      if (k % 2 === 0) {
        const r = await client.chat.completions.create(request);
        expect(r.choices[0]!.finish_reason, r.choices[0]!.message.content ?? '').toBe('stop');
        expectValid(name, r.choices[0]!.message.content!);
      }
      if (k === 0 || k % 2 === 1) {
        const s = await streamed(await client.chat.completions.create({ ...request, seed: 10 + k, stream: true }));
        expect(s.finish, s.content).toBe('stop');
        expectValid(name, s.content);
      }
    }
  }, 120_000);

  it.runIf(batching)(
    'json_object answers are a JSON object',
    async () => {
      const r = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 30, seed: 1, response_format: { type: 'json_object' } });
      const text = r.choices[0]!.message.content!;
      expect(text.startsWith('{'), text).toBe(true);
      // Any object is allowed, so an untrained model may still be nesting when max_tokens cuts it.
      if (r.choices[0]!.finish_reason === 'stop') expect(JSON.parse(text)).toBeTypeOf('object');
      else expect(r.choices[0]!.finish_reason).toBe('length');
    },
    120_000,
  );

  it.runIf(batching)(
    'completions follow a regex (response_format) and an EBNF grammar (guided_grammar)',
    async () => {
      const re = await client.completions.create({
        model: MODEL,
        prompt: 'Code:',
        max_tokens: 20,
        temperature: 1,
        seed: 2,
        response_format: { type: 'regex', regex: '[0-9]{3}-(cat|dog)s?' },
      } as OpenAI.Completions.CompletionCreateParamsNonStreaming);
      expect(re.choices[0]!.finish_reason).toBe('stop');
      expect(re.choices[0]!.text).toMatch(/^[0-9]{3}-(cat|dog)s?$/);
      const g = await client.completions.create({
        model: MODEL,
        prompt: 'Answer:',
        max_tokens: 20,
        seed: 4,
        guided_grammar: 'root ::= ("yes" | "no") ", " [a-c] [a-c]',
      } as OpenAI.Completions.CompletionCreateParamsNonStreaming);
      expect(g.choices[0]!.finish_reason).toBe('stop');
      expect(g.choices[0]!.text).toMatch(/^(yes|no), [a-c]{2}$/);
    },
    120_000,
  );

  it('a forced tool choice decodes to a call that parses and fits the tool', async () => {
    const named = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 100,
      seed: 5,
    });
    expect(named.choices[0]!.finish_reason).toBe('tool_calls');
    const [call] = named.choices[0]!.message.tool_calls as FunctionCall[];
    expect(call!.function.name).toBe('get_weather');
    expect(ajv.validate(TOOLS[0]!.function.parameters!, JSON.parse(call!.function.arguments)), call!.function.arguments).toBe(true);
    if (!batching) return;

    const required = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather or time?' }],
      tools: TOOLS,
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_tokens: 100,
      seed: 6,
      stream: true,
    });
    let name = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of required) {
      for (const c of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += c.function?.name ?? '';
        args += c.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    const tool = TOOLS.find((t) => t.function.name === name);
    expect(tool, name).toBeDefined();
    expect(ajv.validate(tool!.function.parameters!, JSON.parse(args)), args).toBe(true);
  }, 120_000);

  it.runIf(batching)(
    'a bad schema is a 400 naming the field; the server goes on serving',
    async () => {
      const bad = client.chat.completions.create({
        model: MODEL,
        messages: ASK,
        max_tokens: 8,
        response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'strin' } } },
      });
      await expect(bad).rejects.toMatchObject({ status: 400, param: 'response_format.json_schema.schema' });
      await expect(bad).rejects.toThrow(/json_schema/);
      const badType = client.chat.completions.create({ model: MODEL, messages: ASK, response_format: { type: 'yaml' } as never });
      await expect(badType).rejects.toMatchObject({ status: 400, param: 'response_format.type' });
      const badRegex = client.completions.create({ model: MODEL, prompt: 'x', guided_regex: '(' } as OpenAI.Completions.CompletionCreateParamsNonStreaming);
      await expect(badRegex).rejects.toMatchObject({ status: 400, param: 'guided_regex' });
      const ok = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 40, seed: 1, response_format: jsonSchema('color') });
      expect(ok.choices[0]!.finish_reason).toBe('stop');
      expectValid('color', ok.choices[0]!.message.content!);
    },
    120_000,
  );
});

describe('serve: structured outputs share batched steps', () => {
  it('concurrent requests under different schemas (and one without) are all valid, decoded in shared steps', async () => {
    const { server, client } = await serve(loaded);
    servers.push(server);
    const names = ['person', 'tags', 'color', 'person'];
    const [plain, ...answers] = await Promise.all([
      client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 24, seed: 9 }),
      ...names.map((name, k) =>
        client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 80, temperature: 1, seed: 20 + k, response_format: jsonSchema(name) }),
      ),
    ]);
    expect(plain!.choices[0]!.finish_reason).toBe('length');
    answers.forEach((r, k) => {
      expect(r.choices[0]!.finish_reason, r.choices[0]!.message.content ?? '').toBe('stop');
      expectValid(names[k]!, r.choices[0]!.message.content!);
    });
    // Decode steps ran several rows at once.
    expect(await metric(server, 'tensorgpu_decode_batch_size_sum')).toBeGreaterThan(await metric(server, 'tensorgpu_decode_batch_size_count'));
  }, 120_000);
});
