// The FP8 KV cache (core/kv-fp8.ts): e4m3 codes with a power-of-two scale per (position, kv head) row, written by
// attentionInputs and dequantized by attention, contiguous and paged, on the CPU reference and on WebGPU.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { encodeOne } from '../../src/core/codecs.js';
import { decodeKvRow, encodeKvRow, kvCacheShape, kvRowScale, kvRowWidth, kvScaleExponent } from '../../src/core/kv-fp8.js';
import { kvBytesPerPosition } from '../../src/models/layers/paged-kv.js';
import { expectClose, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const FP8 = 'float8_e4m3fn';
const HEADS = 4;
const KV = 2;
const PAGE = 8;

describe('FP8 KV rows (core/kv-fp8.ts)', () => {
  it('picks the least power-of-two scale that fits the row max in 448', () => {
    expect(kvScaleExponent(448)).toBe(0);
    expect(kvScaleExponent(449)).toBe(1);
    expect(kvScaleExponent(224)).toBe(-1);
    expect(kvScaleExponent(1)).toBe(-8);
    expect(kvScaleExponent(0)).toBe(0);
    expect(kvScaleExponent(1e-45)).toBe(-126);
  });

  it('stores codes, padding and the scale; decodes within e4m3 rounding', () => {
    const d = 6;
    const x = [0.5, -3, 1000, Number.NaN, 1e-3, -0];
    const row = new Uint8Array(kvRowWidth(FP8, d));
    expect(row.length).toBe(12);
    encodeKvRow(x, d, row, 0);
    expect(kvRowScale(row, d, 0)).toBe(4); // 1000 / 4 = 250 <= 448 < 1000 / 2
    expect([row[6], row[7]]).toEqual([0, 0]);
    const out = new Float32Array(d);
    decodeKvRow(row, d, 0, out, 0);
    expect(out[2]).toBe(1024); // 250 rounds to the e4m3 code 256
    expect(out[0]).toBe(0.5);
    expect(Number.isNaN(out[3])).toBe(true);
    // 1e-3 / 4 is below e4m3's smallest subnormal (2^-9) halved: it is lost next to the row's 1000.
    expect(out[4]).toBe(0);
    expect(row[5]).toBe(encodeOne(FP8, -0));
  });

  it('halves the bytes of bf16 but for the 4-byte row scale', () => {
    const g = { layers: 4, kvHeads: 8, headDim: 128 };
    expect(kvBytesPerPosition(g, FP8) / kvBytesPerPosition(g, 'bfloat16')).toBeCloseTo(132 / 256, 10);
    expect(kvCacheShape(10, 8, 128, FP8)).toEqual([10, 8, 132]);
    expect(kvCacheShape(10, 8, 128, 'bfloat16')).toEqual([10, 8, 128]);
  });

  it('rejects caches of the wrong width by name', () => {
    const d = 8;
    const [cos, sin] = ropeTables(d, 4);
    const qkv = tg.zeros([1, (HEADS + 2 * KV) * d]);
    const bad = tg.zeros([4, KV, d], { dtype: FP8 });
    expect(() => tg.attentionInputs(qkv, { heads: HEADS, kvHeads: KV, headDim: d, cos, sin, keys: bad, values: bad, position: 0 })).toThrow(
      /keys must be \[capacity, 2, 12\] \(float8_e4m3fn rows: 8 codes/,
    );
    expect(() => tg.attention(tg.zeros([1, HEADS, d]), bad, bad)).toThrow(/must be \[Skv, Hkv, 12\]/);
  });
});

function ropeTables(d: number, positions: number): [Tensor, Tensor] {
  const half = d / 2;
  const cos: number[] = [];
  const sin: number[] = [];
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      cos.push(Math.cos(p * 1e4 ** (-(2 * i) / d)));
      sin.push(Math.sin(p * 1e4 ** (-(2 * i) / d)));
    }
  }
  return [tg.tensor(cos, { shape: [positions, half] }), tg.tensor(sin, { shape: [positions, half] })];
}

/** A cache tensor's dequantized rows [rows, KV, d] (codes recovered from the decoded values: e4m3 is exact). */
async function dequantized(cache: Tensor, d: number): Promise<Float32Array> {
  const codes = Uint8Array.from(await cache.toArray(), (x) => encodeOne(FP8, x));
  const [rows, h, w] = cache.shape;
  const out = new Float32Array(rows * h * d);
  for (let r = 0; r < rows * h; r++) decodeKvRow(codes, d, r * w, out, r * d);
  return out;
}

interface Case {
  d: number;
  paged: boolean;
  norm: boolean;
}

interface Run {
  keys: Float32Array;
  values: Float32Array;
  /** Attention output of every step. */
  attn: number[];
  /** The caches as written (to replay attention on the other backend). */
  cacheK: Tensor;
  cacheV: Tensor;
  /** q of every step. */
  qs: Tensor[];
}

const PROMPT = 11;
const DECODE = 4;
const TABLE = [3, 0, 5];
const POOL_ROWS = 6 * PAGE;

/** Value rows spread over orders of magnitude (2^-6 .. 2^6) so their scales differ; q and k are N(0, 1). */
function qkvValues(c: Case, total: number): number[] {
  const slots = HEADS + 2 * KV;
  const x = randomValues(total * slots * c.d, 'float32', 'normal', 40 + c.d);
  return x.map((v, i) => {
    const row = Math.floor(i / c.d);
    return row % slots < HEADS + KV ? v : v * 2 ** ((row % 5) * 3 - 6);
  });
}

async function run(device: 'cpu' | 'webgpu', c: Case, dtype: tg.DType = FP8): Promise<Run> {
  const { d } = c;
  const total = PROMPT + DECODE;
  const width = (HEADS + 2 * KV) * d;
  const move = (t: Tensor) => (device === 'webgpu' ? t.to('webgpu') : Promise.resolve(t));
  const [cos0, sin0] = ropeTables(d, total);
  const [cos, sin] = [await move(cos0), await move(sin0)];
  const qkvAll = await move(tg.tensor(qkvValues(c, total), { shape: [total, width] }));
  const norms = c.norm
    ? [
        await move(tg.tensor(randomValues(d, 'float32', 'positive', 7), { shape: [d] })),
        await move(tg.tensor(randomValues(d, 'float32', 'positive', 8), { shape: [d] })),
      ]
    : [];
  const shape = kvCacheShape(c.paged ? POOL_ROWS : total, KV, d, dtype);
  const keys = tg.zeros(shape, { dtype, device });
  const values = tg.zeros(shape, { dtype, device });
  const attn: number[] = [];
  const qs: Tensor[] = [];
  for (const [start, s] of [[0, PROMPT], ...Array.from({ length: DECODE }, (_, i) => [PROMPT + i, 1])] as [number, number][]) {
    const qkv = tg.narrow(qkvAll, 0, start, s);
    const pages = c.paged ? tg.pagedIndex([{ pages: TABLE, start, rows: s }], PAGE, device) : undefined;
    const q = tg.attentionInputs(qkv, {
      heads: HEADS,
      kvHeads: KV,
      headDim: d,
      qNorm: norms[0],
      kNorm: norms[1],
      cos,
      sin,
      keys,
      values,
      position: start,
      pages,
    });
    const out = pages
      ? tg.attention(q, keys, values, { pages })
      : tg.attention(q, tg.narrow(keys, 0, 0, start + s), tg.narrow(values, 0, 0, start + s), { causal: true, queryOffset: start });
    attn.push(...(await out.toArray()));
    qs.push(q);
  }
  const logical = async (cache: Tensor) => {
    const rows = dtype === FP8 ? await dequantized(cache, d) : Float32Array.from(await cache.toArray());
    const out = new Float32Array(total * KV * d);
    for (let j = 0; j < total; j++) {
      const r = c.paged ? TABLE[Math.floor(j / PAGE)]! * PAGE + (j % PAGE) : j;
      out.set(rows.subarray(r * KV * d, (r + 1) * KV * d), j * KV * d);
    }
    return out;
  };
  return { keys: await logical(keys), values: await logical(values), attn, cacheK: keys, cacheV: values, qs };
}

/** Attention of run r's queries over its caches, the caches and queries moved to `device` first. */
async function replay(r: Run, c: Case, device: 'cpu' | 'webgpu'): Promise<number[]> {
  const move = (t: Tensor) => t.to(device);
  const [keys, values] = [await move(r.cacheK), await move(r.cacheV)];
  const out: number[] = [];
  let start = 0;
  for (const q0 of r.qs) {
    const q = await move(q0);
    const s = q.shape[0];
    const pages = c.paged ? tg.pagedIndex([{ pages: TABLE, start, rows: s }], PAGE, device) : undefined;
    const o = pages
      ? tg.attention(q, keys, values, { pages })
      : tg.attention(q, tg.narrow(keys, 0, 0, start + s), tg.narrow(values, 0, 0, start + s), { causal: true, queryOffset: start });
    out.push(...(await o.toArray()));
    start += s;
  }
  return out;
}

/**
 * e4m3 keeps 3 mantissa bits: a value is off by at most half an ulp, 2^-4 of it, or, below the normals (2^-6 of the
 * scale), half the smallest subnormal, 2^-10 of its row's scale (which is at most the row's max / 224).
 */
function expectRowRounding(got: Float32Array, want: Float32Array, d: number, label: string): void {
  for (let r = 0; r < want.length / d; r++) {
    const row = want.subarray(r * d, (r + 1) * d);
    const amax = row.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    for (let c = 0; c < d; c++) {
      const [g, w] = [got[r * d + c]!, row[c]!];
      if (Math.abs(g - w) > Math.abs(w) * 2 ** -4 + (amax / 224) * 2 ** -10) expect.fail(`${label}: row ${r} [${c}] got ${g} want ${w} (row max ${amax})`);
    }
  }
}

/** ||a - b|| / ||b||. */
function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

const CASES: Case[] = [
  { d: 32, paged: false, norm: true },
  { d: 32, paged: true, norm: true },
  // A head dim that is not a whole number of words: the row pads its codes before the scale.
  { d: 10, paged: false, norm: false },
  { d: 10, paged: true, norm: true },
];

describe('FP8 KV cache on the CPU', () => {
  it.each(CASES)('stays close to a float32 cache: D $d, paged $paged', async (c) => {
    const fp8 = await run('cpu', c);
    const f32 = await run('cpu', c, 'float32');
    expectRowRounding(fp8.values, f32.values, c.d, 'values');
    expectRowRounding(fp8.keys, f32.keys, c.d, 'keys');
    expect(relativeError(fp8.attn, f32.attn)).toBeLessThan(0.05);
  });
});

describe.skipIf(!gpu.available)(`FP8 KV cache on WebGPU ${gpu.skipReason}`, () => {
  it.each(CASES)('writes the CPU reference rows and reads them as it does: D $d, paged $paged, norm $norm', async (c) => {
    const want = await run('cpu', c);
    const got = await run('webgpu', c);
    // Values are copied as they are: the same codes and scales.
    expectClose(got.values, want.values, 'bits', 'values');
    // Keys come from RoPE in float32 on both sides, which may differ in the last bit and so, rarely, round to the
    // neighbouring e4m3 code.
    expectClose(got.keys, want.keys, { atol: 1e-6, rtol: 2 ** -3 }, 'keys');
    let same = 0;
    got.keys.forEach((x, i) => (same += x === want.keys[i] ? 1 : 0));
    expect(same / got.keys.length).toBeGreaterThan(0.98);
    expect(relativeError(got.attn, want.attn)).toBeLessThan(1e-2);
    // The same caches and queries on both backends: attention's dequantizing loads agree to float32 rounding.
    const cpuCaches = await replay(want, c, 'cpu');
    const gpuCaches = await replay(want, c, 'webgpu');
    expectClose(gpuCaches, cpuCaches, { atol: 1e-5, rtol: 1e-4 }, 'attention over the same caches');
  });
});
