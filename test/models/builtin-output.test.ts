// The built-in random-weight presets print text that visibly varies (issue 40): random weights give gibberish, but
// one token repeated or blank text reads as a bug. ensureBuiltinModel writes them with `outputSpread` (logits of std
// ~2.5, no self-match through tied embeddings; models/random-weights.ts), so greedy decoding walks through many
// tokens and two sampling seeds at temperature 1 part ways. Every preset on the CPU, 12 tokens each; the option is
// off by default, so no other checkpoint (nor the reference fixtures written from them) changes.
import { describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/runtime/registry.js';
import { ensureBuiltinModel } from '../../src/models/builtin.js';
import { presetNames } from '../../src/models/families.js';
import { loadModel } from '../../src/models/load.js';
import { generate } from '../../src/generate/generate.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import type { TextTokenizer } from '../../src/tokenizer/text-tokenizer.js';
import { randomSources, type RandomWeightDType, type WeightSpec } from '../../src/models/random-weights.js';

setDefaultDevice('cpu');

const TOKENS = 12;
const PROMPT = 'Hello, world';

async function run(model: CausalLM, tokenizer: TextTokenizer, options: { temperature: number; seed?: number }): Promise<{ ids: number[]; text: string }> {
  const ids: number[] = [];
  // No stop ids: every run is TOKENS long, so the counts compare.
  for await (const t of generate(model, tokenizer, PROMPT, { maxNewTokens: TOKENS, stopTokenIds: [], ...options })) ids.push(t.id);
  return { ids, text: tokenizer.decode(ids) };
}

// The cases first: lfm2-moe-tiny repeated one token, lfm2-tiny and qwen3-tiny (fp8) printed blank text.
const CASES: [string, RandomWeightDType][] = [...presetNames().map((p): [string, RandomWeightDType] => [p, 'bfloat16']), ['qwen3-tiny', 'fp8']];

describe('built-in presets: the random output varies', () => {
  it('covers every text preset', () => {
    expect(presetNames()).toEqual(expect.arrayContaining(['qwen3-moe-tiny', 'qwen3-tiny', 'lfm2-moe-tiny', 'lfm2-tiny', 'qwen3.5-tiny', 'qwen3.6-moe-tiny']));
  });

  it.each(CASES)(
    '%s (%s): greedy walks through many tokens, two seeds at temperature 1 differ',
    async (preset, dtype) => {
      const dir = await ensureBuiltinModel({ preset, dtype });
      const { model, tokenizer } = await loadModel(dir, { device: 'cpu', maxSequence: 32 });
      try {
        const greedy = await run(model, tokenizer!, { temperature: 0 });
        expect(greedy.ids).toHaveLength(TOKENS);
        expect(new Set(greedy.ids).size, `greedy ids ${greedy.ids.join(' ')}`).toBeGreaterThanOrEqual(4);
        expect(greedy.text.trim(), `greedy ids ${greedy.ids.join(' ')}`).not.toBe('');
        const a = await run(model, tokenizer!, { temperature: 1, seed: 1 });
        const b = await run(model, tokenizer!, { temperature: 1, seed: 2 });
        expect(a.text.trim()).not.toBe('');
        expect(a.text).not.toBe(b.text);
      } finally {
        model.dispose();
      }
    },
    300_000,
  );
});

describe('outputSpread', () => {
  const h = 64;
  const tied: WeightSpec[] = [
    { name: 'model.embed_tokens.weight', shape: [64, h], role: 'embedding' },
    { name: 'model.layers.0.mlp.up_proj.weight', shape: [32, h], role: 'linear' },
    { name: 'model.norm.weight', shape: [h], role: 'norm' },
  ];
  const untied: WeightSpec[] = [...tied, { name: 'lm_head.weight', shape: [64, h], role: 'lm_head' }];
  const values = async (specs: WeightSpec[], spread?: boolean): Promise<Map<string, Float32Array>> => {
    const out = new Map<string, Float32Array>();
    for (const [name, source] of randomSources(specs, 'float32', 7, spread)) {
      const bytes = await source.bytes();
      out.set(name, new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));
    }
    return out;
  };
  const std = (v: Float32Array, mean = 0): number => Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / v.length);
  const mean = (v: Float32Array): number => v.reduce((s, x) => s + x, 0) / v.length;

  it('is off by default and changes only the output side when on', async () => {
    const plain = await values(untied);
    expect(await values(untied, false)).toEqual(plain);
    const spread = await values(untied, true);
    for (const name of ['model.embed_tokens.weight', 'model.layers.0.mlp.up_proj.weight', 'model.norm.weight'])
      expect(spread.get(name)).toEqual(plain.get(name));
    // Untied: lm_head grows by 2.5, so the logits (final norm ~1 times a row) get std ~2.5.
    const head = spread.get('lm_head.weight')!;
    expect(std(head) * Math.sqrt(h)).toBeGreaterThan(2);
    expect(std(head) * Math.sqrt(h)).toBeLessThan(3);
  });

  it('tied: the final norm becomes zero-mean with std 2.5 / sqrt(hidden), the embedding unchanged', async () => {
    const plain = await values(tied);
    const spread = await values(tied, true);
    expect(spread.get('model.embed_tokens.weight')).toEqual(plain.get('model.embed_tokens.weight'));
    const norm = spread.get('model.norm.weight')!;
    expect(Math.abs(mean(norm))).toBeLessThan(0.15);
    expect(norm.some((x) => x < 0) && norm.some((x) => x > 0)).toBe(true);
    expect(std(norm, 0) * Math.sqrt(h)).toBeGreaterThan(1.5);
    expect(std(norm, 0) * Math.sqrt(h)).toBeLessThan(3.5);
    // A zero-centred norm (Qwen3.5 multiplies by 1 + w) stores the same multipliers minus 1.
    const centred = await values([tied[0], { name: 'model.language_model.norm.weight', shape: [h], role: 'centered-norm' }], true);
    const stored = centred.get('model.language_model.norm.weight')!;
    expect(Math.abs(mean(stored) + 1)).toBeLessThan(0.15);
  });
});
