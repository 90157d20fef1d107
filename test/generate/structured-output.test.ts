// Constrained decoding: generate() under a response format (a JSON schema, JSON mode, a regex, an EBNF grammar) on a
// random-weight Qwen3-MoE with the real Qwen3 tokenizer. Random weights make the unconstrained text gibberish, so
// every output that parses and validates (ajv) is the grammar's doing; each run must end on its own (stopReason
// 'eos') with complete output. Most runs use a 4096-token vocabulary (the tokenizer's first 4096 ids: every byte,
// JSON's punctuation, common words; stop token 0), whose lm_head costs the CPU milliseconds per token; one runs on
// the full 151936-wide vocabulary with its special tokens. On WebGPU the captured, replayed decode steps (the mask
// rewritten in place each step) give the same tokens as the CPU.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Generator, randn, sampleRows, setDefaultDevice, tensor } from '../../src/index.js';
import { generate, type GenerateOptions, type GenerationStats } from '../../src/generate/generate.js';
import { compileResponseFormat, GrammarError, TokenConstraint, type ResponseFormat } from '../../src/generate/grammar.js';
import { loadQwen3, type LoadedModel } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { TextTokenizer, qwen3TokenizerDir, qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE, writeTinyChatModel } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const ajv = new Ajv({ strict: false });

const SCHEMAS: Record<string, Record<string, unknown>> = {
  person: {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 }, admin: { type: 'boolean' } },
    required: ['name', 'age', 'admin'],
    additionalProperties: false,
  },
  color: {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, shade: { type: 'string', enum: ['light', 'dark'] } },
    required: ['color', 'shade'],
    additionalProperties: false,
  },
  scores: {
    type: 'object',
    properties: { scores: { type: 'array', items: { type: 'integer', minimum: -5, maximum: 99 }, minItems: 1, maxItems: 4 } },
    required: ['scores'],
    additionalProperties: false,
  },
  tags: {
    type: 'array',
    items: { type: 'object', properties: { tag: { enum: ['a', 'b', 'c'] }, on: { type: 'boolean' } }, required: ['tag', 'on'], additionalProperties: false },
    minItems: 2,
    maxItems: 3,
  },
};

async function run(m: LoadedModel, prompt: Parameters<typeof generate>[2], options: GenerateOptions) {
  const ids: number[] = [];
  let text = '';
  const stream = generate(m.model, m.tokenizer!, prompt, options);
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    text += r.value.text;
    r = await stream.next();
  }
  return { ids, text, stats: r.value as GenerationStats };
}

const schemaFormat = (name: string): ResponseFormat => ({ type: 'json_schema', json_schema: { name, schema: SCHEMAS[name]!, strict: true } });

let smallDir: string | undefined;

/** TINY_CHAT_MOE with a 4096-token vocabulary and stop token 0, written once. */
async function smallModelDir(): Promise<string> {
  if (smallDir) return smallDir;
  smallDir = mkdtempSync(join(tmpdir(), 'tensorgpu-grammar-v4096-'));
  await writeRandomQwen3Checkpoint(
    smallDir,
    { ...TINY_CHAT_MOE, vocabSize: 4096, bosTokenId: undefined, eosTokenIds: [0] },
    { seed: 45, extraFiles: await qwen3TokenizerFiles() },
  );
  return smallDir;
}

/** A prompt whose ids fit the 4096-token vocabulary. */
const PROMPT = tokenizer.encode('Q: Name a color.\nA:');

describe('structured outputs on the CPU (random weights)', () => {
  let m: LoadedModel;

  beforeAll(async () => {
    m = await loadQwen3(await smallModelDir(), { device: 'cpu', maxSequence: 160 });
  });

  afterAll(() => m?.model.dispose());

  it('every JSON schema output parses, validates with ajv and ends on its own, over seeds and sampling settings', async () => {
    // The random model's logits are peaked (its top token near probability 1): high temperatures make it wander.
    const settings: GenerateOptions[] = [{ temperature: 3 }, { temperature: 2.5, topK: 40, topP: 0.95 }, { temperature: 4, minP: 0.02 }, { temperature: 0 }];
    const seen = new Set<string>();
    for (const name of Object.keys(SCHEMAS)) {
      const validate = ajv.compile(SCHEMAS[name]!);
      for (const [k, s] of settings.entries()) {
        const r = await run(m, PROMPT, { ...s, seed: 7 + k, maxNewTokens: 120, stopTokenIds: [0], responseFormat: schemaFormat(name) });
        const what = `${name} ${JSON.stringify(s)} seed ${7 + k}: ${r.text}`;
        expect(r.stats.stopReason, what).toBe('eos');
        const value: unknown = JSON.parse(r.text);
        expect(validate(value), `${what} ${ajv.errorsText(validate.errors)}`).toBe(true);
        seen.add(r.text);
      }
    }
    // The model's randomness shows through inside the schemas.
    expect(seen.size, [...seen].join(' | ')).toBeGreaterThan(8);
  }, 60_000);

  it('is reproducible with a seed; another seed gives other tokens', async () => {
    const o: GenerateOptions = { temperature: 3, seed: 5, maxNewTokens: 120, stopTokenIds: [0], responseFormat: schemaFormat('person') };
    const a = await run(m, PROMPT, o);
    const b = await run(m, PROMPT, o);
    expect(b.ids).toEqual(a.ids);
    const c = await run(m, PROMPT, { ...o, seed: 6 });
    expect(c.ids).not.toEqual(a.ids);
  });

  it('JSON mode gives an object; a regex and an EBNF grammar are matched exactly', async () => {
    // JSON mode allows any object: an untrained model may nest forever, so it either ends as an object or runs out.
    for (const seed of [3, 4]) {
      const obj = await run(m, PROMPT, { seed, temperature: 2, maxNewTokens: 60, stopTokenIds: [0], responseFormat: { type: 'json_object' } });
      if (obj.stats.stopReason === 'eos') expect(JSON.parse(obj.text)).toBeTypeOf('object');
      else expect(obj.stats.stopReason, obj.text).toBe('max-tokens');
      expect(obj.text.startsWith('{'), obj.text).toBe(true);
    }
    for (const seed of [1, 2, 3]) {
      const o: GenerateOptions = { seed, temperature: 3, maxNewTokens: 40, stopTokenIds: [0] };
      const re = await run(m, PROMPT, { ...o, responseFormat: { type: 'regex', regex: '[0-9]{3}-(cat|dog)s?' } });
      expect(re.stats.stopReason).toBe('eos');
      expect(re.text).toMatch(/^[0-9]{3}-(cat|dog)s?$/);
      const g = await run(m, PROMPT, { ...o, responseFormat: { type: 'grammar', grammar: 'root ::= ("yes" | "no") ", " [a-c] [a-c]' } });
      expect(g.stats.stopReason).toBe('eos');
      expect(g.text).toMatch(/^(yes|no), [a-c]{2}$/);
    }
  });

  it('stops at maxNewTokens with stopReason max-tokens; a prefix of valid output', async () => {
    const r = await run(m, PROMPT, { seed: 9, maxNewTokens: 3, stopTokenIds: [0], responseFormat: schemaFormat('person') });
    expect(r.stats.stopReason).toBe('max-tokens');
    expect(r.ids).toHaveLength(3);
    expect(r.text.startsWith('{"'), r.text).toBe(true);
  });

  it('a bad schema or grammar is a GrammarError; text format constrains nothing', async () => {
    await expect(compileResponseFormat(tokenizer, 151936, { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'strin' } } })).rejects.toThrow(
      GrammarError,
    );
    await expect(compileResponseFormat(tokenizer, 151936, { type: 'grammar', grammar: 'root ::= ' })).rejects.toThrow(GrammarError);
    expect(await compileResponseFormat(tokenizer, 151936, { type: 'text' })).toBeUndefined();
    // The engine still works after rejecting a format.
    const c = await compileResponseFormat(tokenizer, 151936, { type: 'regex', regex: 'ok' });
    const t = await TokenConstraint.create(c!, [151645]);
    const mask = await t.nextMask();
    expect(mask).toHaveLength(Math.ceil(151936 / 32));
    const ok = tokenizer.encode('ok')[0]!;
    expect((mask[ok >>> 5]! >>> (ok & 31)) & 1).toBe(1);
    expect(t.accept(ok)).toBe(true);
    expect(t.accept(151645)).toBe(true);
    expect(t.done).toBe(true);
    t.dispose();
  });

  it('a schema that traps the engine (arrays nested 80 deep) is a GrammarError, and a fresh engine serves the next format', async () => {
    let deep: Record<string, unknown> = { type: 'integer' };
    for (let i = 0; i < 80; i++) deep = { type: 'array', items: deep };
    const trapped = await compileResponseFormat(tokenizer, 151936, { type: 'json_schema', json_schema: { schema: deep } }).catch((e: unknown) => e);
    expect(trapped).toBeInstanceOf(GrammarError);
    expect((trapped as Error).message).toContain('out of bounds');
    // Without the engine being replaced, every later compile fails ('table index is out of bounds', 'Aborted()').
    const c = await compileResponseFormat(tokenizer, 151936, schemaFormat('color'));
    const t = await TokenConstraint.create(c!, [151645]);
    const ids = tokenizer.encode('{"color": "red","shade": "dark"}'); // compact: ',' then ': '
    for (const id of ids) expect(t.accept(id), tokenizer.decode([id])).toBe(true);
    expect(t.accept(151645)).toBe(true);
    expect(t.done).toBe(true);
    t.dispose();
  });

  // Random logits (no model) sample close to uniformly among the allowed tokens: the harshest test of the grammar,
  // which must keep every byte sequence valid JSON and valid UTF-8.
  it.each([5, 6, 7])('batched rows with different schemas share each sampleRows step, each under its own mask (seed %i)', async (seed) => {
    const names = Object.keys(SCHEMAS);
    const V = 4096;
    const rows = await Promise.all(names.map(async (name) => TokenConstraint.create((await compileResponseFormat(tokenizer, V, schemaFormat(name)))!, [0])));
    const ids: number[][] = names.map(() => []);
    const g = new Generator(seed);
    for (let step = 0; step < 80 && rows.some((r) => !r.done); step++) {
      const live = rows.flatMap((r, i) => (r.done ? [] : [i]));
      const masks = await Promise.all(live.map((i) => rows[i]!.nextMask()));
      const logits = randn([live.length, V], { generator: g }).mul(4);
      const m = tensor(
        masks.flatMap((w) => [...w]),
        { dtype: 'int32' },
      ).reshape([live.length, V / 32]);
      const picked = await sampleRows(
        logits,
        live.map((i) => ({ temperature: 1, seed: 100 * step + i })),
        { masks: m },
      ).toArray();
      live.forEach((i, k) => {
        expect(rows[i]!.accept(picked[k]!)).toBe(true);
        if (!rows[i]!.done) ids[i]!.push(picked[k]!);
      });
      for (const t of [logits, m]) t.dispose();
    }
    names.forEach((name, i) => {
      expect(rows[i]!.done, name).toBe(true);
      const text = tokenizer.decode(ids[i]!);
      expect(ajv.validate(SCHEMAS[name]!, JSON.parse(text)), `${name}: ${text}`).toBe(true);
      rows[i]!.dispose();
    });
  });

  it('the full Qwen3 vocabulary: a chat prompt, special tokens never inside the output, ends on <|im_end|>', async () => {
    const full = await loadQwen3(await writeTinyChatModel(11), { device: 'cpu', maxSequence: 96 });
    try {
      const r = await run(full, [{ role: 'user', content: 'A color?' }], { seed: 2, maxNewTokens: 30, responseFormat: schemaFormat('color') });
      expect(r.stats.stopReason, r.text).toBe('eos');
      expect(ajv.validate(SCHEMAS.color!, JSON.parse(r.text))).toBe(true);
      expect(Math.max(...r.ids)).toBeLessThan(151643); // no special token was emitted
    } finally {
      full.model.dispose();
    }
  }, 30_000);
});

// A 4096-token vocabulary (the Qwen3 tokenizer's first 4096 ids, stop token 0) keeps the lm_head small enough for a
// software adapter; the mask is 128 words.
describe.skipIf(!gpu.available)(`structured outputs on WebGPU ${gpu.skipReason}`, () => {
  it('gives the CPU tokens under a JSON schema, with the decode step captured and replayed', async () => {
    const dir = await smallModelDir();
    const [cpu, webgpu] = await Promise.all((['cpu', 'webgpu'] as const).map((device) => loadQwen3(dir, { device, maxSequence: 96 })));
    try {
      const schema = SCHEMAS.color!;
      const o: GenerateOptions = {
        temperature: 3,
        seed: 4,
        maxNewTokens: 40,
        stopTokenIds: [0],
        responseFormat: { type: 'json_schema', json_schema: { name: 'c', schema, strict: true } },
      };
      const want = await run(cpu, PROMPT, o);
      const got = await run(webgpu, PROMPT, o);
      expect(want.stats.stopReason).toBe('eos');
      expect(ajv.validate(schema, JSON.parse(want.text))).toBe(true);
      expect(got.ids).toEqual(want.ids);
      expect(got.stats.decode).toMatchObject({ mode: 'replay', recordedSteps: 1 });
      expect(got.stats.decode!.replayedSteps).toBeGreaterThan(3);
    } finally {
      cpu.model.dispose();
      webgpu.model.dispose();
    }
  }, 300_000);
});
