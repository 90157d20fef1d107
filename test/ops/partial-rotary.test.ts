// Partial rotary (Qwen3.5 / Qwen3.6: partial_rotary_factor): RoPE tables [P, R/2] with R < headDim rotate the first R
// dims of each head (pairs c, c + R/2) and pass the rest through. attentionInputs and the standalone rope op on the
// CPU against a by-definition float64 reference, WebGPU against the CPU; R = headDim stays the full rotary of
// before; ropeTables builds the tables for a rotary dim below the head dim; bad table widths are typed errors.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { ShapeError, setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { decodeOne, encodeOne } from '../../src/core/codecs.js';
import { ropeTables, rotaryDimOf } from '../../src/models/layers/rope.js';
import { BITS, expectClose, randomTensor, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const THETA = 1e7;

/** cos/sin [positions, R/2] of transformers' default rope over rotary dim R, as float32 tensors. */
function tables(positions: number, headDim: number, r: number): [Tensor, Tensor] {
  const t = ropeTables(headDim, THETA, undefined, positions, positions, r);
  return [tg.tensor(Array.from(t.cos), { shape: [positions, r / 2] }), tg.tensor(Array.from(t.sin), { shape: [positions, r / 2] })];
}

/** x rounded to dtype (the library's codecs: exact for every float dtype). */
function rounder(dtype: DType): (x: number) => number {
  return dtype === 'float32' ? Math.fround : (x) => decodeOne(dtype, encodeOne(dtype, x));
}

/** By definition: RMSNorm (HF rounding) over the whole head, then rotate-half over the first R dims. */
function rotateRow(row: number[], pos: number, r: number, cos: Float32Array, sin: Float32Array, dtype: DType, w?: number[], eps = 1e-6): number[] {
  const rd = rounder(dtype);
  const d = row.length;
  let x = row;
  if (w) {
    const ms = row.reduce((a, b) => a + b * b, 0) / d + eps;
    x = row.map((v, c) => rd(w[c] * rd(v / Math.sqrt(ms))));
  }
  const half = r / 2;
  const y = x.slice();
  for (let i = 0; i < half; i++) {
    const [c, s] = [cos[pos * half + i], sin[pos * half + i]];
    y[i] = rd(x[i] * c - x[i + half] * s);
    y[i + half] = rd(x[i + half] * c + x[i] * s);
  }
  return y;
}

interface Case {
  s: number;
  heads: number;
  kvHeads: number;
  d: number;
  r: number;
  position: number;
  dtype: DType;
  norm: boolean;
}

const CASES: Case[] = [
  { s: 3, heads: 3, kvHeads: 1, d: 24, r: 6, position: 2, dtype: 'float32', norm: true },
  { s: 3, heads: 3, kvHeads: 1, d: 24, r: 24, position: 2, dtype: 'float32', norm: true },
  { s: 2, heads: 5, kvHeads: 1, d: 256, r: 64, position: 4, dtype: 'bfloat16', norm: true },
  { s: 1, heads: 2, kvHeads: 2, d: 256, r: 256, position: 7, dtype: 'float16', norm: false },
];
const label = (c: Case) => `S ${c.s}, ${c.heads}/${c.kvHeads} heads, D ${c.d}, R ${c.r}, ${c.dtype}${c.norm ? '' : ', no norm'}`;

interface Inputs {
  qkv: Tensor;
  qn?: Tensor;
  kn?: Tensor;
  cos: Tensor;
  sin: Tensor;
  keys: Tensor;
  values: Tensor;
}

function inputs(c: Case, seed: number): Inputs {
  const capacity = c.position + c.s + 1;
  const make = (shape: number[], k: number) =>
    tg.tensor(
      randomValues(
        shape.reduce((a, b) => a * b, 1),
        c.dtype,
        'normal',
        seed * 10 + k,
      ),
      { shape, dtype: c.dtype, saturate: true },
    );
  const [cos, sin] = tables(capacity, c.d, c.r);
  return {
    qkv: make([c.s, (c.heads + 2 * c.kvHeads) * c.d], 1),
    qn: c.norm ? make([c.d], 2) : undefined,
    kn: c.norm ? make([c.d], 3) : undefined,
    cos,
    sin,
    keys: make([capacity, c.kvHeads, c.d], 4),
    values: make([capacity, c.kvHeads, c.d], 5),
  };
}

async function moved(x: Inputs, device: 'cpu' | 'webgpu'): Promise<Inputs> {
  if (device === 'cpu') return { ...x, keys: tg.clone(x.keys), values: tg.clone(x.values) };
  const to = async (t: Tensor | undefined) => t && (await t.to('webgpu'));
  return {
    qkv: (await to(x.qkv))!,
    qn: await to(x.qn),
    kn: await to(x.kn),
    cos: (await to(x.cos))!,
    sin: (await to(x.sin))!,
    keys: (await to(x.keys))!,
    values: (await to(x.values))!,
  };
}

async function fused(c: Case, x: Inputs): Promise<{ q: Float32Array; keys: Float32Array; values: Float32Array }> {
  const q = tg.attentionInputs(x.qkv, {
    heads: c.heads,
    kvHeads: c.kvHeads,
    headDim: c.d,
    qNorm: x.qn,
    kNorm: x.kn,
    cos: x.cos,
    sin: x.sin,
    keys: x.keys,
    values: x.values,
    position: c.position,
  });
  const f = async (t: Tensor) => (await t.to('float32').toArray()) as Float32Array;
  return { q: await f(q), keys: await f(x.keys), values: await f(x.values) };
}

describe('partial rotary in attentionInputs on the CPU', () => {
  it.each(CASES)('equals the float64 definition: $d dims, R $r, $dtype', async (c) => {
    const x = inputs(c, c.d + c.r);
    const got = await fused(c, await moved(x, 'cpu'));
    const qkv = Array.from(await x.qkv.toArray());
    const [cos, sin] = [(await x.cos.toArray()) as Float32Array, (await x.sin.toArray()) as Float32Array];
    const qn = x.qn && Array.from(await x.qn.toArray());
    const kn = x.kn && Array.from(await x.kn.toArray());
    const width = (c.heads + 2 * c.kvHeads) * c.d;
    const wantQ: number[] = [];
    const keys = Array.from(await x.keys.toArray());
    const values = Array.from(await x.values.toArray());
    const cacheRow = (pos: number, h: number) => (pos * c.kvHeads + h) * c.d;
    const rc = rounder(c.dtype);
    for (let s = 0; s < c.s; s++) {
      const pos = c.position + s;
      for (let j = 0; j < c.heads + 2 * c.kvHeads; j++) {
        const row = qkv.slice(s * width + j * c.d, s * width + (j + 1) * c.d);
        if (j < c.heads) wantQ.push(...rotateRow(row, pos, c.r, cos, sin, c.dtype, qn));
        else if (j < c.heads + c.kvHeads) keys.splice(cacheRow(pos, j - c.heads), c.d, ...rotateRow(row, pos, c.r, cos, sin, c.dtype, kn).map(rc));
        else values.splice(cacheRow(pos, j - c.heads - c.kvHeads), c.d, ...row);
      }
    }
    const check = c.dtype === 'float32' ? { atol: 1e-6, rtol: 1e-6 } : { atol: 1e-2, rtol: 1e-2 };
    expectClose(got.q, wantQ, check, `${label(c)} q`);
    expectClose(got.keys, keys, check, `${label(c)} keys`);
    expectClose(got.values, values, BITS, `${label(c)} values`);
    // The pass-through dims are the normalized row itself, untouched by the rotation.
    if (c.r < c.d && !c.norm) {
      for (let i = c.r; i < c.d; i++) expect(got.q[i]).toBe(Math.fround(qkv[i]));
    }
  });

  it('equals rmsNorm + rope + copyInto with the same partial tables, bit for bit', async () => {
    const c = CASES[0];
    const x = inputs(c, 91);
    const got = await fused(c, await moved(x, 'cpu'));
    const part = (start: number, n: number) => tg.reshape(tg.narrow(x.qkv, 1, start * c.d, n * c.d), [c.s, n, c.d]);
    const q = tg.rope(tg.rmsNorm(part(0, c.heads), x.qn!, 1e-6), x.cos, x.sin, c.position);
    const k = tg.rope(tg.rmsNorm(part(c.heads, c.kvHeads), x.kn!, 1e-6), x.cos, x.sin, c.position);
    expectClose(got.q, (await q.toArray()) as Float32Array, BITS, 'q');
    expectClose(got.keys.slice(c.position * c.kvHeads * c.d, (c.position + c.s) * c.kvHeads * c.d), (await k.toArray()) as Float32Array, BITS, 'keys');
  });

  it('rejects tables whose width is not a rotary dim of the head, by shape', () => {
    const d = 8;
    const keys = tg.zeros([4, 1, d]);
    const values = tg.zeros([4, 1, d]);
    const qkv = tg.zeros([1, 3 * d]);
    const o = (cos: Tensor, sin = cos) => ({ heads: 1, kvHeads: 1, headDim: d, cos, sin, keys, values, position: 0 });
    expect(() => tg.attentionInputs(qkv, o(tg.zeros([4, 5])))).toThrow(ShapeError);
    expect(() => tg.attentionInputs(qkv, o(tg.zeros([4, 5])))).toThrow(/\[4, 5\].*\[P, R \/ 2\]|R \(the rotary dim\).*got \[4, 5\]/);
    expect(() => tg.attentionInputs(qkv, o(tg.zeros([4, 0])))).toThrow(/2 <= R <= 8.*got \[4, 0\]/);
    expect(() => tg.attentionInputs(qkv, o(tg.zeros([4, 2]), tg.zeros([4, 3])))).toThrow(/got \[4, 2\] and \[4, 3\]/);
    expect(() => tg.attentionInputs(qkv, o(tg.zeros([8])))).toThrow(ShapeError);
    expect(() => tg.rope(tg.zeros([1, 1, d]), tg.zeros([2, 6]), tg.zeros([2, 6]), 0)).toThrow(/rope: .*2 <= R <= 8.*got \[2, 6\]/);
  });
});

describe('ropeTables with a rotary dim below the head dim', () => {
  it('builds [P, R/2] tables with inv_freq = 1 / theta^(2i / R)', () => {
    const [headDim, r, positions] = [256, rotaryDimOf(256, 0.25), 5];
    expect(r).toBe(64);
    const t = ropeTables(headDim, THETA, undefined, 4096, positions, r);
    expect(t.half).toBe(32);
    expect(t.cos.length).toBe(positions * 32);
    for (const [p, i] of [
      [1, 0],
      [3, 5],
      [4, 31],
    ]) {
      const angle = Math.fround(p * Math.fround(1 / THETA ** ((2 * i) / r)));
      expect(t.cos[p * 32 + i]).toBe(Math.fround(Math.cos(angle)));
      expect(t.sin[p * 32 + i]).toBe(Math.fround(Math.sin(angle)));
    }
    // The default (R = headDim) is the full-rotary table of before.
    const full = ropeTables(64, THETA, undefined, 4096, positions);
    expect(Array.from(t.cos)).toEqual(Array.from(full.cos));
    expect(ropeTables(headDim, THETA, undefined, 4096, positions, headDim).cos).toEqual(ropeTables(headDim, THETA, undefined, 4096, positions).cos);
  });

  it('rejects an odd or out-of-range rotary dim', () => {
    expect(() => ropeTables(64, THETA, undefined, 64, 4, 15)).toThrow(ShapeError);
    expect(() => ropeTables(64, THETA, undefined, 64, 4, 15)).toThrow(/rotaryDim must be an even integer in \[2, 64\].*got 15/);
    expect(() => ropeTables(64, THETA, undefined, 64, 4, 66)).toThrow(/got 66/);
    expect(() => ropeTables(64, THETA, undefined, 64, 4, 0)).toThrow(/got 0/);
  });
});

describe('partial rotary in the rope op on the CPU', () => {
  it('rotates the first R dims, passes the rest through, and its gradient rotates back', async () => {
    const [s, h, d, r] = [3, 2, 24, 6];
    const [cos, sin] = tables(8, d, r);
    const x = randomTensor([s, h, d]);
    const got = (await tg.rope(x, cos, sin, 2).toArray()) as Float32Array;
    const xs = Array.from(await x.toArray());
    const [c, sn] = [(await cos.toArray()) as Float32Array, (await sin.toArray()) as Float32Array];
    const want: number[] = [];
    for (let si = 0; si < s; si++)
      for (let hi = 0; hi < h; hi++) want.push(...rotateRow(xs.slice((si * h + hi) * d, (si * h + hi + 1) * d), 2 + si, r, c, sn, 'float32'));
    expectClose(got, want, { atol: 1e-6, rtol: 1e-6 }, 'rope');
    const xg = x.requiresGrad_();
    const w = randomTensor([s, h, d]);
    tg.rope(xg, cos, sin, 2).mul(w).sum().backward();
    const back = (await tg.rope(w, cos, sin.neg(), 2).toArray()) as Float32Array;
    expectClose((await xg.grad!.toArray()) as Float32Array, back, BITS, 'grad');
  });
});

describe.skipIf(!gpu.available)(`partial rotary on WebGPU ${gpu.skipReason}`, () => {
  it.each(CASES)('attentionInputs matches the CPU: $d dims, R $r, $dtype', async (c) => {
    const x = inputs(c, 3 * c.d + c.r);
    const want = await fused(c, await moved(x, 'cpu'));
    const got = await fused(c, await moved(x, 'webgpu'));
    const check = c.dtype === 'float32' ? { atol: 2e-6, rtol: 1e-5 } : { atol: 2e-2, rtol: 2e-2 };
    expectClose(got.q, want.q, check, `${label(c)} q`);
    expectClose(got.keys, want.keys, check, `${label(c)} keys`);
    expectClose(got.values, want.values, BITS, `${label(c)} values`);
  });

  it.each([
    { d: 24, r: 6, dtype: 'float32' as const },
    { d: 256, r: 64, dtype: 'bfloat16' as const },
    { d: 256, r: 256, dtype: 'float16' as const },
  ])('the rope op matches the CPU: $d dims, R $r, $dtype', async ({ d, r, dtype }) => {
    const [cos, sin] = tables(9, d, r);
    const x = randomTensor([2, 3, d], dtype);
    const want = (await tg.rope(x, cos, sin, 5).to('float32').toArray()) as Float32Array;
    const g = tg.rope(await x.to('webgpu'), await cos.to('webgpu'), await sin.to('webgpu'), 5);
    const got = (await g.to('float32').toArray()) as Float32Array;
    expectClose(got, want, dtype === 'float32' ? { atol: 2e-6, rtol: 1e-5 } : { atol: 2e-2, rtol: 2e-2 }, `rope D ${d} R ${r}`);
  });
});
