// `serve` under hostile input (issue 48): one bad request must never break the server for everyone. On the tiny
// random Qwen3-MoE (the real Qwen3 tokenizer) on the CPU backend:
// - the poisoning sequence: a tool schema the engine rejects, schemas nested 10^4, 100, 1000 and 3000 deep (arrays
//   of arrays, objects of objects) and those that trapped XGrammar (arrays ~70 deep, objects ~100 deep): each a
//   4xx, and structured output works after them (the engine is one per process, so a trap poisons every request);
// - limits, each a 400 `limit_exceeded` naming the field, with inputs far past any sane limit (the values are the
//   server's to choose: only status, code and param are checked), and the JSON Schema meta-schema (`invalid_schema`)
//   for tools whatever tool_choice is;
// - bodies that are not UTF-8 (400 `invalid_utf8`), malformed requests of every kind (4xx in OpenAI's shape), streams
//   the client aborts, and a full queue (429 with Retry-After; the accepted requests complete);
// - `tensorgpu serve` as a process: /health answers while a grammar compiles, and SIGTERM during a compile exits 0.
// No timing is asserted: timeouts only guard hangs.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { Ajv } from 'ajv';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedModel } from '../../src/models/load.js';
import type { RunningServer } from '../../src/serve/server.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';
import { loadTinyModel, metric, MODEL, serve, until } from './helpers.js';
import { errorShapeProblem, malformedRequests, sendMalformed } from './malformed-requests.js';

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

let loaded: LoadedModel;
let server: RunningServer;
let client: OpenAI;

beforeAll(async () => {
  loaded = await loadTinyModel();
  ({ server, client } = await serve(loaded));
}, 60_000);

afterAll(async () => {
  await server?.close();
  loaded?.model.dispose();
});

const CHAT = '/v1/chat/completions';
const TEXT = '/v1/completions';
const ASK = [{ role: 'user' as const, content: 'Describe something as JSON.' }];
const ajv = new Ajv({ strict: false });

/** A raw POST (a string body is sent as is: schemas nested 10^4 deep are built as text, not JSON.stringify'd). */
async function post(
  path: string,
  body: string | Buffer,
  base = server.url,
): Promise<{ status: number; headers: Headers; text: string; error?: ErrorBody['error'] }> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.text();
  let error: ErrorBody['error'] | undefined;
  try {
    error = (JSON.parse(text) as Partial<ErrorBody>).error;
  } catch {
    // not JSON: `error` stays undefined
  }
  return { status: res.status, headers: res.headers, text, error };
}

/** Arrays of arrays `depth` deep (`items`), as JSON text. */
const nestedArrays = (depth: number) => '{"type":"array","items":'.repeat(depth) + '{"type":"integer"}' + '}'.repeat(depth);
/** Objects of objects `depth` deep (`properties`), as JSON text. */
const nestedObjects = (depth: number) => '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"integer"}' + '}}'.repeat(depth);

const chatBody = (fields: string) => `{"model":${JSON.stringify(MODEL)},"messages":${JSON.stringify(ASK)},"max_tokens":4,${fields}}`;
const jsonSchemaBody = (schema: string) => chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${schema}}}`);

/** A small schema no earlier request used (compiled grammars are cached: a cached one would prove nothing). */
let fresh = 0;
function freshSchema(): Record<string, unknown> {
  fresh++;
  return {
    type: 'object',
    properties: { pick: { enum: [`red${fresh}`, `blue${fresh}`] }, n: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['pick', 'n'],
    additionalProperties: false,
  };
}

/** Structured output still works: a new schema's answer is 200, ends on its own, and parses and validates. */
async function expectStructuredOutputWorks(): Promise<void> {
  const schema = freshSchema();
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: ASK,
    max_tokens: 40,
    seed: fresh,
    response_format: { type: 'json_schema', json_schema: { name: 'fresh', schema, strict: true } },
  });
  const text = r.choices[0]!.message.content ?? '';
  expect(r.choices[0]!.finish_reason, text).toBe('stop');
  expect(ajv.validate(schema, JSON.parse(text)), `${text} ${ajv.errorsText(ajv.errors)}`).toBe(true);
}

const expectNotServerError = (r: { status: number; text: string }, what: string) => expect(r.status, `${what}: ${r.text.slice(0, 300)}`).toBeLessThan(500);
const expect4xx = (r: { status: number; text: string }, what: string) => {
  expect(r.status, `${what}: ${r.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expectNotServerError(r, what);
  expect(errorShapeProblem(r.text), what).toBeUndefined();
};

describe('serve faults: requests that must not break the server', () => {
  it('malformed requests of every kind are a 4xx in OpenAI error shape; the server keeps serving', async () => {
    const requests = malformedRequests(MODEL);
    expect(requests.length).toBeGreaterThanOrEqual(20);
    const answers = [];
    for (const r of requests) answers.push(await sendMalformed(server.url, r));
    expect(answers.flatMap((a) => a.problem ?? [])).toEqual([]);
    expect(answers.find((a) => a.status === 404)).toBeDefined(); // the unknown model
    const ok = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 2 });
    expect(ok.choices[0]!.finish_reason).toBeDefined();
  });

  it('a body that is not UTF-8 is a 400 invalid_utf8 naming the body; valid multi-byte text is served', async () => {
    const bodies = [
      Buffer.from('{"model":"m","prompt":"\xff\xfe"}', 'latin1'),
      // A multi-byte sequence cut short, an overlong encoding of '/', a lone surrogate (CESU-8), each in a valid request.
      Buffer.from(`{"model":"${MODEL}","messages":[{"role":"user","content":"a\xc3("}]}`, 'latin1'),
      Buffer.from(`{"model":"${MODEL}","prompt":"x\xc0\xafy"}`, 'latin1'),
      Buffer.from(`{"model":"${MODEL}","prompt":"x\xed\xa0\x80y"}`, 'latin1'),
    ];
    for (const [i, body] of bodies.entries()) {
      const r = await post(i === 1 ? CHAT : TEXT, body);
      expect(r.status, `body ${i}: ${r.text}`).toBe(400);
      expect(r.error, `body ${i}: ${r.text}`).toMatchObject({ param: 'body', code: 'invalid_utf8' });
    }
    const valid = await post(TEXT, Buffer.from(JSON.stringify({ model: MODEL, prompt: 'héllo 👋 世界', max_tokens: 2 }), 'utf8'));
    expect(valid.status, valid.text).toBe(200);
  });

  it('streams the client aborts mid-stream end their sequences; the server keeps serving', async () => {
    const long = {
      model: MODEL,
      messages: [{ role: 'user' as const, content: 'Tell me a long story.' }],
      max_tokens: 300,
      temperature: 0,
      stream: true as const,
    };
    // Three streams at once, cut after 1, 2 and 3 content chunks; a fourth aborted before its first byte.
    const cut = [1, 2, 3].map(async (after) => {
      const abort = new AbortController();
      const stream = await client.chat.completions.create(long, { signal: abort.signal });
      let chunks = 0;
      await (async () => {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content && ++chunks === after) {
            abort.abort();
            break;
          }
        }
      })().catch(() => undefined);
      return chunks;
    });
    const early = new AbortController();
    const unsent = client.chat.completions.create(long, { signal: early.signal }).catch(() => undefined);
    early.abort();
    expect(await Promise.all(cut)).toEqual([1, 2, 3]);
    await unsent;
    await until(async () => (await metric(server, 'tensorgpu_running_sequences')) === 0 && (await metric(server, 'tensorgpu_queue_depth')) === 0);
    const next = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 3, temperature: 0 });
    expect(next.choices[0]!.finish_reason).toBe('length');
  }, 60_000);

  it('overload: past --max-queue requests are a 429 with Retry-After; every accepted one completes', async () => {
    // Two sequences share the steps and one waits; then a burst more than the queue holds.
    const { server: small } = await serve(loaded, { maxQueue: 1, maxBatch: 2 });
    try {
      const body = (maxTokens: number, stream: boolean) =>
        JSON.stringify({ model: MODEL, prompt: 'Once upon a time', max_tokens: maxTokens, temperature: 0, stream });
      const streams = Array.from({ length: 3 }, () => post(TEXT, body(64, true), small.url));
      await until(async () => (await metric(small, 'tensorgpu_running_sequences')) === 2 && (await metric(small, 'tensorgpu_queue_depth')) === 1);
      const burst = await Promise.all(Array.from({ length: 6 }, () => post(TEXT, body(4, false), small.url)));
      const shed = burst.filter((r) => r.status === 429);
      expect(shed.length).toBeGreaterThan(0);
      for (const r of shed) {
        expect(r.error?.code).toBe('queue_full');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      for (const r of burst.filter((r) => r.status !== 429)) expect(r.status, r.text).toBe(200);
      for (const r of await Promise.all(streams)) {
        expect(r.status).toBe(200);
        expect(r.text).toMatch(/"finish_reason":"(length|stop)"/);
        expect(r.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
      }
      const after = await post(TEXT, body(2, false), small.url);
      expect(after.status, after.text).toBe(200);
    } finally {
      await small.close();
    }
  }, 60_000);
});

describe('serve faults: limits, each a 400 limit_exceeded naming the field', () => {
  const tool = (name: string, parameters: string) => `{"type":"function","function":{"name":"${name}","parameters":${parameters}}}`;
  // Values far past any sane limit, each within the 1 MiB body limit.
  const cases: [string, string, string, string | string[]][] = [
    ['request body nested 10^4 deep', CHAT, chatBody(`"chat_template_kwargs":{"x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`), 'body'],
    // The body's nesting limit may stop a schema this deep first.
    ['response_format schema nested 10^4 deep', CHAT, jsonSchemaBody(nestedArrays(10_000)), ['body', 'response_format.json_schema.schema']],
    [
      'a ~550 KB schema (25,000 properties)',
      CHAT,
      jsonSchemaBody(
        JSON.stringify({ type: 'object', properties: Object.fromEntries(Array.from({ length: 25_000 }, (_, i) => [`p${i}`, { type: 'string' }])) }),
      ),
      'response_format.json_schema.schema',
    ],
    [
      'an enum of 10^5 values',
      CHAT,
      jsonSchemaBody(JSON.stringify({ enum: Array.from({ length: 100_000 }, (_, i) => i) })),
      'response_format.json_schema.schema',
    ],
    [
      'guided_json with an enum of 10^5 values',
      TEXT,
      JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2, guided_json: { enum: Array.from({ length: 100_000 }, (_, i) => `v${i}`) } }),
      'guided_json',
    ],
    ['10^4 tools', CHAT, chatBody(`"tools":[${Array.from({ length: 10_000 }, (_, i) => tool(`f${i}`, '{"type":"object"}')).join(',')}]`), 'tools'],
    [
      'a tool schema with an enum of 10^5 values',
      CHAT,
      chatBody(`"tools":[${tool('f', JSON.stringify({ type: 'object', properties: { a: { enum: Array.from({ length: 100_000 }, (_, i) => i) } } }))}]`),
      'tools[0].function.parameters',
    ],
    [
      'a 500,000-character regex',
      TEXT,
      JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2, response_format: { type: 'regex', regex: 'a'.repeat(500_000) } }),
      'response_format.regex',
    ],
    [
      'a 500,000-character EBNF grammar',
      TEXT,
      JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2, response_format: { type: 'grammar', grammar: 'root ::= ' + '"a" '.repeat(125_000) } }),
      'response_format.grammar',
    ],
  ];

  it.each(cases)('%s', async (name, path, body, param) => {
    const r = await post(path, body);
    expect(r.status, `${name}: ${r.text.slice(0, 300)}`).toBe(400);
    expect(r.error?.code, r.text.slice(0, 300)).toBe('limit_exceeded');
    if (Array.isArray(param)) expect(param).toContain(r.error?.param);
    else expect(r.error?.param).toBe(param);
    expect(r.error?.message, 'the message names the limit').toMatch(/\d/);
  });

  // A schema just past the schema's depth limit sits well inside the body's: the schema's own limit names the field.
  // Deeper and deeper schemas until one is refused (the limit's value is the server's to choose).
  it.each([
    ['response_format (arrays via items)', CHAT, (d: number) => jsonSchemaBody(nestedArrays(d)), 'response_format.json_schema.schema', 1],
    [
      'tools[0].function.parameters (objects via properties), tool_choice auto',
      CHAT,
      (d: number) => chatBody(`"tools":[${tool('f', nestedObjects(d))}],"tool_choice":"auto"`),
      'tools[0].function.parameters',
      2,
    ],
    [
      'guided_json (arrays via items)',
      TEXT,
      (d: number) => `{"model":${JSON.stringify(MODEL)},"prompt":"x","max_tokens":2,"guided_json":${nestedArrays(d)}}`,
      'guided_json',
      1,
    ],
  ] as const)(
    'schema nesting depth: %s',
    async (_name, path, body, param, levelsPerDepth) => {
      let refused: Awaited<ReturnType<typeof post>> | undefined;
      for (let jsonDepth = 8; jsonDepth <= 512 && !refused; jsonDepth += 8) {
        const r = await post(path, body(Math.ceil(jsonDepth / levelsPerDepth)));
        expectNotServerError(r, `${param} ${jsonDepth} JSON levels`);
        if (r.status === 400 && r.error?.code === 'limit_exceeded') refused = r;
      }
      expect(refused, 'no schema up to 512 JSON levels deep was refused').toBeDefined();
      expect(refused!.error!.param, refused!.text).toBe(param);
    },
    60_000,
  );
});

describe('serve faults: schemas are checked against the JSON Schema meta-schema (400 invalid_schema)', () => {
  const tools = (...parameters: unknown[]) => parameters.map((p, i) => ({ type: 'function', function: { name: `f${i}`, parameters: p } }));
  const cases: [string, string, Record<string, unknown>, string, RegExp][] = [
    [
      'a tool schema of an unknown type, tool_choice auto',
      CHAT,
      { tools: tools({ type: 'no-such-type' }), tool_choice: 'auto' },
      'tools[0].function.parameters',
      /type/,
    ],
    ['the same with tool_choice none', CHAT, { tools: tools({ type: 'no-such-type' }), tool_choice: 'none' }, 'tools[0].function.parameters', /type/],
    [
      'the second tool, tool_choice required',
      CHAT,
      { tools: tools({ type: 'object' }, { type: 'object', properties: 5 }), tool_choice: 'required' },
      'tools[1].function.parameters',
      /properties/,
    ],
    [
      'a response_format schema of type "strin"',
      CHAT,
      { response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'strin' } } } },
      'response_format.json_schema.schema',
      /type/,
    ],
    ['guided_json with a negative minLength', TEXT, { guided_json: { type: 'string', minLength: -1 } }, 'guided_json', /minLength/],
  ];

  it.each(cases)('%s', async (name, path, fields, param, keyword) => {
    const base = path === CHAT ? { model: MODEL, messages: ASK, max_tokens: 2 } : { model: MODEL, prompt: 'x', max_tokens: 2 };
    const r = await post(path, JSON.stringify({ ...base, ...fields }));
    expect(r.status, `${name}: ${r.text}`).toBe(400);
    expect(r.error, r.text).toMatchObject({ code: 'invalid_schema', param });
    expect(r.error!.message).toMatch(keyword);
  });
});

describe('serve faults: one bad schema never breaks structured output', () => {
  it('the schemas that trapped the engine (arrays ~70 deep, objects ~100 deep) are refused, never a 5xx; structured output works after each', async () => {
    await expectStructuredOutputWorks();
    for (const [name, schema] of [
      ['arrays 70 deep', nestedArrays(70)],
      ['objects 100 deep', nestedObjects(100)],
    ]) {
      const r = await post(CHAT, jsonSchemaBody(schema!));
      expect4xx(r, name!);
      await expectStructuredOutputWorks();
    }
  }, 60_000);

  it('the poisoning sequence: an invalid tool schema (required), schemas nested 10^4, 100, 1000 and 3000 deep, then a valid schema works', async () => {
    const badTool = await post(
      CHAT,
      JSON.stringify({
        model: MODEL,
        messages: ASK,
        max_tokens: 8,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'no-such-type' } } }],
        tool_choice: 'required',
      }),
    );
    expect4xx(badTool, 'invalid tool schema, tool_choice required');
    for (const depth of [10_000, 100, 1000, 3000]) {
      expect4xx(await post(CHAT, jsonSchemaBody(nestedArrays(depth))), `arrays ${depth} deep`);
      expect4xx(await post(CHAT, jsonSchemaBody(nestedObjects(depth))), `objects ${depth} deep`);
    }
    await expectStructuredOutputWorks();
    // And on the completions route (guided_json), streamed.
    const schema = freshSchema();
    const stream = await post(TEXT, JSON.stringify({ model: MODEL, prompt: 'JSON:', max_tokens: 40, seed: 2, stream: true, guided_json: schema }));
    expect(stream.status, stream.text).toBe(200);
    const text = stream.text
      .split('\n\n')
      .map((e) => e.replace(/^data: /, ''))
      .filter((d) => d.startsWith('{'))
      .map((d) => (JSON.parse(d) as { choices: { text: string }[] }).choices[0]?.text ?? '')
      .join('');
    expect(ajv.validate(schema, JSON.parse(text)), text).toBe(true);
  }, 60_000);
});

// `tensorgpu serve` as a process (its own grammar engine): a compile of a few seconds must not stall the event loop,
// and SIGTERM while one runs drains and exits 0 (a grammar worker left running would keep the process alive).
describe('serve faults: tensorgpu serve while a grammar compiles', () => {
  let child: ChildProcessWithoutNullStreams;
  let base: string;
  let stderr = '';
  let exited: Promise<number | null>;

  // Bounded strings this long take the engine a few seconds to compile against the Qwen3 vocabulary (each request
  // its own, so none is cached).
  const slowSchema = (minLength: number) => ({ type: 'string', minLength, maxLength: 2 * minLength });
  const slowRequest = (minLength: number) =>
    fetch(`${base}${CHAT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: ASK,
        max_tokens: 1,
        response_format: { type: 'json_schema', json_schema: { name: 'slow', schema: slowSchema(minLength) } },
      }),
    }).then(
      async (res) => ({ status: res.status, text: await res.text() }),
      (err: unknown) => ({ status: 0, text: String(err) }),
    );

  beforeAll(async () => {
    const dir = await writeTinyChatModel(5);
    child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--model', dir, '--device', 'cpu', '--port', '0', '--served-model-name', MODEL],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    await until(async () => /listening on http:\/\/127\.0\.0\.1:\d+\/v1/.test(stdout), 30_000);
    base = stdout.match(/(http:\/\/127\.0\.0\.1:\d+)\/v1/)![1]!;
    await until(async () => (await fetch(`${base}/health`)).status === 200, 30_000);
  }, 60_000);

  afterAll(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('/health answers while a grammar compiles', async () => {
    let settled = false;
    const slow = slowRequest(1000).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    // A compile on the event loop holds every answer until it ends (then at most one or two come before the
    // request's own); off the loop /health answers all along.
    let answered = 0;
    while (!settled && answered < 5) {
      const health = await fetch(`${base}/health`);
      if (health.status === 200 && !settled) answered++;
    }
    const r = await slow;
    expect(answered, `the compile's answer came after ${answered} /health answers`).toBe(5);
    expect(r.status, r.text).toBeLessThan(500);
  }, 60_000);

  it('SIGTERM during a grammar compile drains and exits 0', async () => {
    const slow = slowRequest(1001);
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGTERM');
    let guard: ReturnType<typeof setTimeout> | undefined;
    const code = await Promise.race([exited, new Promise<'hung'>((r) => (guard = setTimeout(() => r('hung'), 45_000)))]);
    clearTimeout(guard);
    expect(code, stderr.slice(-2000)).toBe(0);
    expect(stderr).toMatch(/SIGTERM: draining/);
    // Its answer (a 200 once compiled, a 400 or 503 as the server shuts down, or a closed connection) is no 500.
    const r = await slow;
    expect(r.status, r.text).not.toBe(500);
  }, 60_000);
});
