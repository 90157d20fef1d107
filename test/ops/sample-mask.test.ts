// The sampler's token bitmask (constrained decoding): on random logits with random masks, at vocabulary sizes that
// are multiples of neither 32 nor the workgroup, every sampling path (greedy, top-k 1, top-k, top-p, min-p,
// penalties) picks only allowed tokens; a masked sample equals the unmasked one on logits already -Inf where the
// mask is clear (bit-exact on WebGPU); the GPU agrees with the CPU reference sampler; a mask allowing one token gives
// that token; sampleRows takes a different mask per row; and the mask adds no read back (still one 4-byte read).
import { describe, expect, it } from 'vitest';
import {
  Generator,
  gpuCounters,
  sample,
  sampleRows,
  sampleToken,
  setDefaultDevice,
  ShapeError,
  synchronize,
  tensor,
  type RowSampling,
  type SampleOptions,
  type Tensor,
} from '../../src/index.js';
import { maskAllows } from '../../src/kernels/sample/cpu.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const OPTIONS: SampleOptions[] = [
  { temperature: 0 },
  { topK: 1, seed: 3 },
  { temperature: 0.8, topK: 20, seed: 11 },
  { topP: 0.9, seed: 12 },
  { temperature: 1.3, minP: 0.05, seed: 13 },
  { temperature: 0.7, topK: 50, topP: 0.8, minP: 0.01, seed: 14 },
  { temperature: 0.7, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.2, previousTokens: [5, 9, 5, 77, 2], seed: 15 },
  { seed: 16 },
];

function randomLogits(v: number, seed: number): Float32Array {
  const g = new Generator(seed);
  return Float32Array.from({ length: v }, () => (g.uniform() - 0.5) * 12);
}

/** A random mask over v tokens (about `density` of them allowed, at least one); the words past v are garbage bits. */
function randomMask(v: number, seed: number, density: number): Int32Array {
  const g = new Generator(seed);
  const words = new Int32Array(Math.ceil(v / 32));
  for (let w = 0; w < words.length; w++) words[w] = Math.floor(g.uniform() * 2 ** 32) | 0;
  for (let i = 0; i < v; i++) if (g.uniform() >= density) words[i >>> 5]! &= ~(1 << (i & 31));
  words[Math.floor(g.uniform() * v) >>> 5]! |= 1 << (Math.floor(g.uniform() * v) & 31);
  // Bits past v (the tail of the last word) are set: the sampler must ignore them.
  if (v % 32 !== 0) words[words.length - 1]! |= ~((1 << (v % 32)) - 1);
  return words;
}

function onlyMask(v: number, id: number): Int32Array {
  const words = new Int32Array(Math.ceil(v / 32));
  words[id >>> 5] = 1 << (id & 31);
  return words;
}

const allowed = (mask: Int32Array, v: number) => Array.from({ length: v }, (_, i) => i).filter((i) => maskAllows(mask, i));

/** The logits with every disallowed token at -Inf. */
function applied(logits: Float32Array, mask: Int32Array): Float32Array {
  return logits.map((x, i) => (maskAllows(mask, i) ? x : -Infinity));
}

async function ids(t: Tensor): Promise<number[]> {
  const out = [...(await t.toArray())];
  t.dispose();
  return out;
}

describe('sampling with a token bitmask on the CPU backend', () => {
  it('picks only allowed tokens on every path, equal to sampling logits already -Inf where masked', async () => {
    for (const v of [37, 1003]) {
      for (let trial = 0; trial < 4; trial++) {
        const logits = randomLogits(v, 100 * v + trial);
        const mask = randomMask(v, 7 * v + trial, trial === 0 ? 0.02 : 0.3);
        const x = tensor(logits);
        const m = tensor(mask, { dtype: 'int32' });
        const ref = tensor(applied(logits, mask));
        for (const o of OPTIONS) {
          const id = await sample(x, { ...o, mask: m });
          expect(maskAllows(mask, id), `v ${v} ${JSON.stringify(o)} picked ${id}`).toBe(true);
          expect(id).toBe(await sample(ref, o));
        }
        for (const t of [x, m, ref]) t.dispose();
      }
    }
  });

  it('validates the mask: int32, ceil(V / 32) words per row, on the logits device', () => {
    const x = tensor(randomLogits(40, 1));
    expect(() => sampleToken(x, { mask: tensor([1], { dtype: 'int32' }) })).toThrow(ShapeError);
    expect(() => sampleToken(x, { mask: tensor([1, 1]) })).toThrow(ShapeError);
    expect(() => sampleRows(x.reshape([1, 40]), [{}], { masks: tensor([1, 1, 1], { dtype: 'int32' }) })).toThrow(ShapeError);
  });
});

describe.skipIf(!gpu.available)(`sampling with a token bitmask on WebGPU ${gpu.skipReason}`, () => {
  it('matches the unmasked sampler on masked logits exactly and the CPU reference, at V = 37, 1003, 4099', async () => {
    let agree = 0;
    let total = 0;
    for (const v of [37, 1003, 4099]) {
      for (let trial = 0; trial < 3; trial++) {
        const logits = randomLogits(v, 100 * v + trial);
        const mask = randomMask(v, 7 * v + trial, [0.01, 0.3, 0.9][trial]!);
        const x = tensor(logits, { device: 'webgpu' });
        const m = tensor(mask, { dtype: 'int32', device: 'webgpu' });
        const ref = tensor(applied(logits, mask), { device: 'webgpu' });
        const xc = tensor(logits);
        const mc = tensor(mask, { dtype: 'int32' });
        for (const o of OPTIONS) {
          const id = await sample(x, { ...o, mask: m });
          const what = `v ${v} trial ${trial} ${JSON.stringify(o)}: ${id}`;
          expect(maskAllows(mask, id), what).toBe(true);
          expect(id, what).toBe(await sample(ref, o));
          const cpu = await sample(xc, { ...o, mask: mc });
          if (o.temperature === 0 || o.topK === 1) expect(id, what).toBe(cpu);
          agree += id === cpu ? 1 : 0;
          total++;
        }
        for (const t of [x, m, ref, xc, mc]) t.dispose();
      }
    }
    // Float rounding can move a sampling boundary; the reference agrees on nearly every draw.
    expect(agree / total).toBeGreaterThanOrEqual(0.95);
  });

  it('a mask allowing one token gives that token on every path, even where its logit is the smallest', async () => {
    for (const v of [33, 1003]) {
      const logits = randomLogits(v, v);
      const low = logits.indexOf(Math.min(...logits));
      const x = tensor(logits, { device: 'webgpu' });
      for (const id of [0, v - 1, low]) {
        const m = tensor(onlyMask(v, id), { dtype: 'int32', device: 'webgpu' });
        for (const o of OPTIONS) expect(await sample(x, { ...o, mask: m }), `v ${v} token ${id} ${JSON.stringify(o)}`).toBe(id);
        m.dispose();
      }
      x.dispose();
    }
  });

  it('sampleRows: each row its own mask and settings, one dispatch, the ids sampleToken gives row by row', async () => {
    const v = 1003;
    const rows: RowSampling[] = OPTIONS.map((o) => ({ ...o, previousTokens: o.previousTokens as number[] | undefined }));
    const logits = rows.map((_, r) => randomLogits(v, 500 + r));
    const masks = rows.map((_, r) => (r === 2 ? onlyMask(v, 999) : randomMask(v, 900 + r, 0.2)));
    const x = tensor(
      logits.flatMap((l) => [...l]),
      { device: 'webgpu' },
    ).reshape([rows.length, v]);
    const m = tensor(
      masks.flatMap((w) => [...w]),
      { dtype: 'int32', device: 'webgpu' },
    ).reshape([rows.length, Math.ceil(v / 32)]);
    const d0 = gpuCounters().dispatches;
    const batched = sampleRows(x, rows, { masks: m });
    expect(gpuCounters().dispatches - d0).toBe(1);
    const got = await ids(batched);
    expect(got[2]).toBe(999);
    for (let r = 0; r < rows.length; r++) {
      expect(maskAllows(masks[r]!, got[r]!), `row ${r}: ${got[r]} of ${allowed(masks[r]!, v).length} allowed`).toBe(true);
      const one = tensor(logits[r]!, { device: 'webgpu' });
      const mr = tensor(masks[r]!, { dtype: 'int32', device: 'webgpu' });
      expect(await sample(one, { ...OPTIONS[r], mask: mr }), `row ${r}`).toBe(got[r]);
      one.dispose();
      mr.dispose();
    }
    x.dispose();
    m.dispose();
  });

  it('the mask adds no read back: sampleToken reads nothing, sample() reads 4 bytes once, one dispatch', async () => {
    const v = 4099;
    const x = tensor(randomLogits(v, 3), { device: 'webgpu' });
    const m = tensor(randomMask(v, 4, 0.1), { dtype: 'int32', device: 'webgpu' });
    await sample(x, { seed: 1, topK: 10, mask: m }); // compile
    await synchronize();
    const c0 = gpuCounters();
    const tok = sampleToken(x, { seed: 5, topK: 10, topP: 0.9, mask: m });
    await synchronize();
    const c1 = gpuCounters();
    expect(c1.reads - c0.reads).toBe(0);
    expect(c1.dispatches - c0.dispatches).toBe(1);
    tok.dispose();
    const id = await sample(x, { seed: 5, topK: 10, topP: 0.9, mask: m });
    const c2 = gpuCounters();
    expect(c2.reads - c1.reads).toBe(1);
    expect(c2.dispatches - c1.dispatches).toBe(1);
    expect(id).toBeGreaterThanOrEqual(0);
    x.dispose();
    m.dispose();
  });
});
