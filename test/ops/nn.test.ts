// Transformer building blocks on WebGPU against the CPU backend: rmsNorm (row per invocation and workgroup per row,
// odd and long rows, weights of other dtypes), rope (two offsets, strided q/k), attention (decode over 1..2100 keys
// with GQA 1/2/4/8 and key splits, causal and non-causal prefill, KV-cache views with NaN beyond the prefix, NaN and
// all-masked rows) and swiglu, in f32/f16/bf16; empty tensors; and attention against matmul + softmax composed from
// other ops, which pins its definition independently of the CPU reference.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, FLOAT_DTYPES, randomTensor, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = (typeof FLOAT_DTYPES)[number];

/**
 * GPU (f32 math) vs CPU (f64 math), both rounded once to the output dtype. f32: reductions over up to 4097 values
 * and a few rounded products. Narrow outputs: the f32 and f64 results may round to neighbouring values, and for
 * rmsNorm the normalized value is rounded to x's dtype before the weight multiplies it, so up to 2 ulps
 * (f16 ulp <= 2^-10 relative, bf16 <= 2^-7).
 */
function tol(dtype: Float, kind: 'norm' | 'rope' | 'swiglu' | 'attention'): Tolerance {
  if (dtype === 'float32') {
    if (kind === 'norm') return { atol: 1e-6, rtol: 2e-5 };
    if (kind === 'rope') return { atol: 2e-6, rtol: 1e-5 };
    if (kind === 'swiglu') return { atol: 1e-6, rtol: 1e-5 };
    return { atol: 1e-5, rtol: 1e-4 };
  }
  const ulp = dtype === 'float16' ? 2 ** -10 : 2 ** -7;
  return { atol: dtype === 'float16' ? 1e-5 : 1e-4, rtol: (kind === 'norm' ? 2 : 1) * ulp * 1.05 };
}

const cpuTensor = (values: number[], shape: number[], dtype: DType = 'float32') => tg.tensor(values, { shape, dtype });

/** cos/sin tables [P, D/2] for theta 1e6 (inv_freq = theta^(-2i/D)), computed in f64 and stored as f32. */
function ropeTables(positions: number, d: number, theta = 1e6): [Tensor, Tensor] {
  const half = d / 2;
  const cos: number[] = [];
  const sin: number[] = [];
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * theta ** ((-2 * i) / d);
      cos.push(Math.cos(angle));
      sin.push(Math.sin(angle));
    }
  }
  return [cpuTensor(cos, [positions, half]), cpuTensor(sin, [positions, half])];
}

describe.skipIf(!gpu.available)(`rmsNorm, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([
    [[5, 1], 'd 1'],
    [[3, 2], 'd 2'],
    [[4, 6], 'd 6'],
    [[2100, 6], 'many short rows (row per invocation)'],
    [[7, 130], 'd 130 (workgroup per row)'],
    [[2049, 128], 'head-dim rows in bulk (row per invocation)'],
    [[3, 2048], 'hidden 2048'],
    [[2, 4097], 'd 4097'],
    [[3, 5, 7], '3-D, odd rows'],
  ] as const)('%j %s, f32/f16/bf16, with and without weight', async (shape, label) => {
    const d = shape[shape.length - 1];
    for (const dtype of FLOAT_DTYPES) {
      const x = randomTensor(shape, dtype, 'normal', 3);
      const w = randomTensor([d], dtype, 'normal');
      await checkBoth([x, w], (a, b) => tg.rmsNorm(a, b, 1e-6), tol(dtype, 'norm'), `${label} ${dtype}`);
      await checkBoth([x], (a) => tg.rmsNorm(a, undefined, 1e-5), tol(dtype, 'norm'), `${label} ${dtype} no weight`);
    }
  });

  it('weight of another dtype, strided x, independent formula', async () => {
    const x = randomTensor([6, 64], 'bfloat16');
    const w32 = randomTensor([64], 'float32');
    await checkBoth([x, w32], (a, b) => tg.rmsNorm(a, b, 1e-6), tol('bfloat16', 'norm'), 'bf16 x, f32 weight');
    const xt = randomTensor([64, 6], 'float16');
    const w = randomTensor([64], 'float16');
    await checkBoth([xt, w], (a, b) => tg.rmsNorm(a.T, b, 1e-6), tol('float16', 'norm'), 'transposed f16 x');
    // Formula: x / sqrt(mean(x^2) + eps) * w, computed here in f64.
    const vals = [1, -2, 3, 0.5, 4, -1];
    const wv = [0.5, 2, -1, 1.5, 1, 3];
    const r = await checkBoth([cpuTensor(vals, [2, 3]), cpuTensor(wv.slice(0, 3), [3])], (a, b) => tg.rmsNorm(a, b, 0.01), tol('float32', 'norm'));
    const want = [0, 1].flatMap((row) => {
      const xs = vals.slice(row * 3, row * 3 + 3);
      const inv = 1 / Math.sqrt(xs.reduce((s, v) => s + v * v, 0) / 3 + 0.01);
      return xs.map((v, i) => v * inv * wv[i]);
    });
    expectClose(r.gpu, want, { atol: 1e-6, rtol: 1e-6 }, 'formula');
  });

  it('a NaN makes its row NaN; other rows are unaffected; empty tensors', async () => {
    for (const dtype of FLOAT_DTYPES) {
      for (const d of [6, 300]) {
        const vals = Array.from({ length: 3 * d }, (_, i) => Math.cos(i) + 0.1);
        vals[d + 2] = NaN;
        const r = await checkBoth([cpuTensor(vals, [3, d], dtype)], (a) => tg.rmsNorm(a, undefined, 1e-6), tol(dtype, 'norm'), `NaN d ${d} ${dtype}`);
        expect(Array.from(r.gpu.slice(d, 2 * d)).every(Number.isNaN)).toBe(true);
        expect(Array.from(r.gpu.slice(0, d)).every(Number.isFinite)).toBe(true);
        expect(Array.from(r.gpu.slice(2 * d)).every(Number.isFinite)).toBe(true);
      }
      const r = await checkBoth([tg.zeros([0, 8], { dtype })], (a) => tg.rmsNorm(a, undefined, 1e-6), tol(dtype, 'norm'));
      expect(r.shape).toEqual([0, 8]);
    }
  });
});

describe.skipIf(!gpu.available)(`rope, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([
    [3, 4, 2],
    [5, 2, 6],
    [4, 3, 64],
    [9, 4, 128],
    [2, 3, 130],
  ])('S %i, H %i, D %i at offsets 0 and 37, f32/f16/bf16', async (s, h, d) => {
    const [cos, sin] = ropeTables(64, d);
    for (const dtype of FLOAT_DTYPES) {
      const x = randomTensor([s, h, d], dtype, 'normal', 2);
      for (const offset of [0, 37]) {
        await checkBoth([x, cos, sin], (a, c, sn) => tg.rope(a, c, sn, offset), tol(dtype, 'rope'), `rope [${s},${h},${d}] @${offset} ${dtype}`);
      }
    }
  });

  it('strided x (a slice of a fused projection, a transpose), NaN, empty, against the formula', async () => {
    const [cos, sin] = ropeTables(50, 8);
    // A fused [S, 3H, D] projection, q = heads 0..H-1: stride 3HD between positions.
    const fused = randomTensor([5, 6, 8], 'bfloat16');
    await checkBoth([fused, cos, sin], (a, c, sn) => tg.rope(a.narrow(1, 2, 2), c, sn, 3), tol('bfloat16', 'rope'), 'narrow heads');
    const hs = randomTensor([2, 4, 8], 'float16');
    await checkBoth([hs, cos, sin], (a, c, sn) => tg.rope(a.transpose(0, 1), c, sn, 40), tol('float16', 'rope'), 'transposed [H,S,D] -> [S,H,D]');
    const nan = cpuTensor([1, 2, NaN, 4, 5, 6, 7, 8], [1, 2, 4]);
    const [cos4, sin4] = ropeTables(2, 4);
    const r = await checkBoth([nan, cos4, sin4], (a, c, sn) => tg.rope(a, c, sn, 1), tol('float32', 'rope'), 'NaN');
    // D 4, half 2: element 2 is NaN; it pairs with element 0.
    expect([r.gpu[0], r.gpu[2]].every(Number.isNaN)).toBe(true);
    expect([r.gpu[1], r.gpu[3], ...r.gpu.slice(4)].every(Number.isFinite)).toBe(true);
    // Formula at position 1 for [x0, x1, x2, x3] = [5, 6, 7, 8] (row 1): angles p * theta^(-2i/4).
    const a = [1, 1e6 ** -0.5];
    const want = [
      5 * Math.cos(a[0]) - 7 * Math.sin(a[0]),
      6 * Math.cos(a[1]) - 8 * Math.sin(a[1]),
      7 * Math.cos(a[0]) + 5 * Math.sin(a[0]),
      8 * Math.cos(a[1]) + 6 * Math.sin(a[1]),
    ];
    expectClose(r.gpu.slice(4), want, { atol: 1e-5, rtol: 1e-5 }, 'formula');
    const e = await checkBoth([tg.zeros([0, 2, 8]), cos, sin], (x, c, sn) => tg.rope(x, c, sn, 0), tol('float32', 'rope'));
    expect(e.shape).toEqual([0, 2, 8]);
  });
});

describe.skipIf(!gpu.available)(`swiglu, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([[[1, 2]], [[3, 6]], [[5, 130]], [[2, 3, 22]], [[4, 8194]]])('%j, f32/f16/bf16', async (shape) => {
    for (const dtype of FLOAT_DTYPES) {
      const x = randomTensor(shape, dtype, 'normal', 4);
      await checkBoth([x], (a) => tg.swiglu(a), tol(dtype, 'swiglu'), `swiglu ${JSON.stringify(shape)} ${dtype}`);
    }
  });

  it('strided input, NaN, large magnitudes, empty, formula', async () => {
    const x = randomTensor([10, 6], 'float16');
    await checkBoth([x], (a) => tg.swiglu(a.T), tol('float16', 'swiglu'), 'transposed');
    const vals = [NaN, -100, 100, 0.5, 2, 3, 4, 5, 1, -2, 6, 7];
    const r = await checkBoth([cpuTensor(vals, [2, 6])], (a) => tg.swiglu(a), tol('float32', 'swiglu'), 'special');
    expect(Number.isNaN(r.gpu[0])).toBe(true);
    const silu = (a: number) => a / (1 + Math.exp(-a));
    expectClose(r.gpu.slice(1), [silu(-100) * 2, silu(100) * 3, silu(4) * -2, silu(5) * 6, silu(1) * 7], { atol: 1e-6, rtol: 1e-6 }, 'formula');
    for (const shape of [
      [0, 4],
      [3, 0],
    ]) {
      const e = await checkBoth([tg.zeros(shape)], (a) => tg.swiglu(a), tol('float32', 'swiglu'));
      expect(e.shape).toEqual([shape[0], shape[1] / 2]);
    }
  });
});

interface AttnCase {
  sq: number;
  skv: number;
  hq: number;
  hkv: number;
  d: number;
  causal: boolean;
  queryOffset?: number;
  /** Rows of the preallocated cache k/v are narrowed from (default skv: k/v are whole tensors). */
  maxS?: number;
}

/** q [Sq, Hq, D] and cache tensors [maxS, Hkv, D]; entries past skv hold NaN so a kernel reading them shows. */
function attnInputs(c: AttnCase, dtype: DType): Tensor[] {
  const q = randomTensor([c.sq, c.hq, c.d], dtype, 'normal', 2);
  const k = randomTensor([c.skv, c.hkv, c.d], dtype);
  const v = randomTensor([c.skv, c.hkv, c.d], dtype);
  if (c.maxS === undefined || c.maxS === c.skv) return [q, k, v];
  const tail = tg.full([c.maxS - c.skv, c.hkv, c.d], NaN, { dtype });
  return [q, tg.cat([k, tail], 0), tg.cat([v, tail], 0)];
}

function runAttention(c: AttnCase) {
  return (q: Tensor, k: Tensor, v: Tensor) => {
    const kv = c.maxS !== undefined && c.maxS !== c.skv;
    return tg.attention(q, kv ? k.narrow(0, 0, c.skv) : k, kv ? v.narrow(0, 0, c.skv) : v, { causal: c.causal, queryOffset: c.queryOffset });
  };
}

const label = (c: AttnCase, dtype: DType) =>
  `attention Sq ${c.sq} Skv ${c.skv} Hq ${c.hq} Hkv ${c.hkv} D ${c.d}${c.causal ? ' causal' : ''}${c.queryOffset !== undefined ? ` @${c.queryOffset}` : ''}${c.maxS ? ` cache ${c.maxS}` : ''} ${dtype}`;

describe.skipIf(!gpu.available)(`attention, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([1, 7, 300, 2100])('decode over %i keys (KV-cache views), GQA 1/2/4/8, D 64/128', async (skv) => {
    for (const [ratio, d] of [
      [1, 128],
      [2, 64],
      [4, 128],
      [8, 64],
    ] as const) {
      const c: AttnCase = { sq: 1, skv, hq: 8, hkv: 8 / ratio, d, causal: true, maxS: skv + 5 };
      const dtypes: readonly Float[] = skv >= 2100 && ratio !== 8 ? ['float32'] : FLOAT_DTYPES;
      for (const dtype of dtypes) await checkBoth(attnInputs(c, dtype), runAttention(c), tol(dtype, 'attention'), label(c, dtype));
    }
  });

  it('causal prefill: Sq = Skv = 17; Sq 5 over Skv 12 (offset 7); Sq 3 over 700 keys (split); non-causal', async () => {
    const cases: AttnCase[] = [
      { sq: 17, skv: 17, hq: 4, hkv: 2, d: 64, causal: true },
      { sq: 17, skv: 17, hq: 3, hkv: 3, d: 128, causal: true, maxS: 40 },
      { sq: 5, skv: 12, hq: 4, hkv: 1, d: 64, causal: true, queryOffset: 7, maxS: 20 },
      { sq: 3, skv: 700, hq: 2, hkv: 1, d: 64, causal: true, maxS: 710 },
      { sq: 6, skv: 9, hq: 4, hkv: 2, d: 64, causal: false },
      { sq: 4, skv: 600, hq: 2, hkv: 2, d: 6, causal: false },
    ];
    for (const c of cases) {
      for (const dtype of FLOAT_DTYPES) await checkBoth(attnInputs(c, dtype), runAttention(c), tol(dtype, 'attention'), label(c, dtype));
    }
  });

  it('odd head dims (2, 6, 130), D 256, strided q, queries that see no key, empty shapes', async () => {
    const cases: AttnCase[] = [
      { sq: 3, skv: 5, hq: 2, hkv: 1, d: 2, causal: true },
      { sq: 2, skv: 33, hq: 4, hkv: 4, d: 6, causal: false },
      { sq: 1, skv: 70, hq: 2, hkv: 2, d: 130, causal: true },
      { sq: 2, skv: 70, hq: 4, hkv: 2, d: 256, causal: true },
      // Offset -2: queries 0 and 1 see nothing (zeros), query 2 sees key 0.
      { sq: 4, skv: 6, hq: 2, hkv: 1, d: 8, causal: true, queryOffset: -2 },
    ];
    for (const c of cases) {
      for (const dtype of FLOAT_DTYPES) {
        const r = await checkBoth(attnInputs(c, dtype), runAttention(c), tol(dtype, 'attention'), label(c, dtype));
        if (c.queryOffset === -2) expect(Array.from(r.gpu.slice(0, 2 * c.hq * c.d)).every((x) => x === 0)).toBe(true);
      }
    }
    // q as a [Hq, Sq, D] tensor transposed; k and v sliced from one fused [S, 2, Hkv, D] buffer.
    const qt = randomTensor([4, 3, 32]);
    const kv = randomTensor([9, 2, 2, 32]);
    await checkBoth(
      [qt, kv],
      (q, x) => tg.attention(q.transpose(0, 1), x.select(1, 0), x.select(1, 1), { causal: true }),
      tol('float32', 'attention'),
      'strided q/k/v',
    );
    for (const [sq, skv] of [
      [0, 4],
      [2, 0],
    ]) {
      const c: AttnCase = { sq, skv, hq: 2, hkv: 1, d: 8, causal: false };
      const r = await checkBoth(attnInputs(c, 'float32'), runAttention(c), tol('float32', 'attention'), label(c, 'float32'));
      expect(r.shape).toEqual([sq, 2, 8]);
      expect(Array.from(r.gpu).every((x) => x === 0)).toBe(true);
    }
  });

  it('NaN in a visible key poisons only the queries that see it; +Inf scores and all -Inf scores give NaN', async () => {
    for (const skv of [10, 600]) {
      const c: AttnCase = { sq: 4, skv, hq: 2, hkv: 1, d: 8, causal: true };
      const [q, k, v] = attnInputs(c, 'float32');
      const kv = await k.toArray();
      kv[(skv - 2) * 8 + 3] = NaN; // key skv - 2: seen by queries 2 and 3 only
      const kn = cpuTensor(Array.from(kv), [skv, 1, 8]);
      const r = await checkBoth([q, kn, v], runAttention(c), tol('float32', 'attention'), `NaN key, Skv ${skv}`);
      expect(Array.from(r.gpu.slice(0, 2 * 16)).every(Number.isFinite)).toBe(true);
      expect(Array.from(r.gpu.slice(2 * 16)).every(Number.isNaN)).toBe(true);
    }
    // q = +-Inf in one head: scores +-Inf -> NaN (exp(inf - inf)); the other head is fine.
    const qv = Array.from({ length: 2 * 4 }, (_, i) => (i < 4 ? [Infinity, 0, 0, 0][i] : 0.5 * i));
    const ks = randomTensor([5, 1, 4]);
    const vs = randomTensor([5, 1, 4]);
    for (const sign of [1, -1]) {
      const qi = cpuTensor(
        qv.map((x, i) => (i < 4 ? sign * x : x)),
        [1, 2, 4],
      );
      const kAbs = ks.abs().add(0.1); // positive keys: q.k is +-Inf for every key
      const r = await checkBoth([qi, kAbs, vs], (a, b, cc) => tg.attention(a, b, cc), tol('float32', 'attention'), `Inf q ${sign}`);
      expect(Array.from(r.gpu.slice(0, 4)).every(Number.isNaN)).toBe(true);
      expect(Array.from(r.gpu.slice(4)).every(Number.isFinite)).toBe(true);
    }
  });

  it('matches softmax(q k^T * scale + mask) v composed from matmul, softmax and indexSelect', async () => {
    const [sq, skv, hq, hkv, d] = [5, 12, 4, 2, 16];
    const queryOffset = 7;
    const scale = 0.3;
    const q = randomTensor([sq, hq, d]);
    const k = randomTensor([skv, hkv, d]);
    const v = randomTensor([skv, hkv, d]);
    // GQA: query head h reads kv head floor(h / 2).
    const heads = tg.tensor([0, 0, 1, 1], { dtype: 'int32' });
    const kh = k.indexSelect(1, heads).permute(1, 2, 0); // [Hq, D, Skv]
    const vh = v.indexSelect(1, heads).permute(1, 0, 2); // [Hq, Skv, D]
    const mask = cpuTensor(
      Array.from({ length: sq * skv }, (_, x) => (x % skv <= queryOffset + Math.floor(x / skv) ? 0 : -Infinity)),
      [sq, skv],
    );
    const scores = q.permute(1, 0, 2).matmul(kh).mul(scale).add(mask); // [Hq, Sq, Skv]
    const composed = scores.softmax(-1).matmul(vh).permute(1, 0, 2).contiguous(); // [Sq, Hq, D]
    const want = await composed.toArray();
    const r = await checkBoth(
      [q, k, v],
      (a, b, c) => tg.attention(a, b, c, { scale, causal: true, queryOffset }),
      tol('float32', 'attention'),
      'composition shape',
    );
    expectClose(r.gpu, want, { atol: 1e-5, rtol: 1e-4 }, 'GPU attention vs composition');
    expectClose(r.cpu, want, { atol: 1e-6, rtol: 1e-5 }, 'CPU attention vs composition');
  });
});
