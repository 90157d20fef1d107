// quantize(x, {granularity, dtype}) on the CPU backend and on WebGPU, against expectations computed here: the
// per-group amax and scale = amax / 448 (e4m3fn) or / 57344 (e5m2) in float64 rounded once to float32, and the
// codes as x / scale rounded to nearest-even FP8 (saturating), decoded with the OFP8 formulas. The GPU divides in
// float32 with WGSL's accuracy (not always correctly rounded), so its scales may be 1 ulp off and a code may land on
// the other side of a rounding boundary when x / scale sits within a few float32 ulps of it; nothing else may differ.
import { describe, expect, it } from 'vitest';
import {
  DTypeError,
  Generator,
  quantize,
  randn,
  scaledMm,
  setDefaultDevice,
  ShapeError,
  tensor,
  type DeviceName,
  type QuantGranularity,
  type Tensor,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Fp8 = 'float8_e4m3fn' | 'float8_e5m2';
const FP8: Fp8[] = ['float8_e4m3fn', 'float8_e5m2'];
const GRANULARITIES: QuantGranularity[] = ['tensor', 'row', 'block128', 'group128'];

/** Largest finite value, mantissa bits, smallest normal exponent of each format. */
const FMT: Record<Fp8, { max: number; mant: number; emin: number }> = {
  float8_e4m3fn: { max: 448, mant: 3, emin: -6 },
  float8_e5m2: { max: 57344, mant: 2, emin: -14 },
};

/** x rounded to nearest-even in the FP8 format, saturating at +-max (quantize clamps before casting). */
function roundFp8(x: number, dtype: Fp8): number {
  if (Number.isNaN(x)) return NaN;
  const { max, mant, emin } = FMT[dtype];
  const ax = Math.abs(x);
  let r = 0;
  if (ax > 0) {
    let e = Math.floor(Math.log2(ax));
    if (2 ** e > ax) e--;
    else if (2 ** (e + 1) <= ax) e++;
    const ulp = 2 ** (Math.max(e, emin) - mant);
    const q = ax / ulp;
    const f = Math.floor(q);
    r = (q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f) * ulp;
  }
  r = Math.min(r, max);
  return x < 0 || Object.is(x, -0) ? -r : r;
}

/** Distance in float32 ulps between two positive float32 values. */
function ulpsApart(a: number, b: number): number {
  const f = new Float32Array([a, b]);
  const u = new Int32Array(f.buffer);
  return Math.abs(u[0] - u[1]);
}

/** Shape of the scale and the group index of element (i, j), for a [rows, cols] input. */
function groups(g: QuantGranularity, rows: number, cols: number): { shape: number[]; count: number; of: (i: number, j: number) => number } {
  const kb = Math.ceil(cols / 128);
  switch (g) {
    case 'tensor':
      return { shape: [], count: 1, of: () => 0 };
    case 'row':
      return { shape: [rows, 1], count: rows, of: (i) => i };
    case 'block128':
      return { shape: [Math.ceil(rows / 128), kb], count: Math.ceil(rows / 128) * kb, of: (i, j) => Math.floor(i / 128) * kb + Math.floor(j / 128) };
    case 'group128':
      return { shape: [rows, kb], count: rows * kb, of: (i, j) => i * kb + Math.floor(j / 128) };
  }
}

/**
 * A [rows, cols] input whose magnitude varies by row and by 128-column block (so every granularity's groups get
 * different scales), with the groups listed in `zero` all zeros.
 */
function makeInput(rows: number, cols: number, seed: number, zero: (i: number, j: number) => boolean = () => false): Float32Array {
  const g = new Generator(seed);
  const x = new Float32Array(rows * cols);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const gain = 2 ** ((i % 7) - 3) * 2 ** ((Math.floor(j / 128) % 3) * 2 - 2);
      x[i * cols + j] = zero(i, j) ? 0 : g.normal() * gain;
    }
  }
  return x;
}

interface Result {
  data: Float32Array;
  scale: Float32Array;
  dataShape: readonly number[];
  scaleShape: readonly number[];
  dataDtype: string;
  scaleDtype: string;
}

async function quantizeOn(
  x: ArrayLike<number>,
  shape: number[],
  inDtype: 'float32' | 'float16' | 'bfloat16',
  g: QuantGranularity,
  dtype: Fp8,
  device: DeviceName,
): Promise<Result> {
  const t = tensor(Float32Array.from(x), { shape, dtype: inDtype, device });
  const q = quantize(t, { granularity: g, dtype });
  const r = {
    data: (await q.data.toArray()) as Float32Array,
    scale: (await q.scale.toArray()) as Float32Array,
    dataShape: q.data.shape,
    scaleShape: q.scale.shape,
    dataDtype: q.data.dtype,
    scaleDtype: q.scale.dtype,
  };
  t.dispose();
  q.data.dispose();
  q.scale.dispose();
  return r;
}

/** The input as the quantizer sees it: rounded to its dtype. */
function asDtype(x: Float32Array, inDtype: 'float32' | 'float16' | 'bfloat16'): Float32Array {
  if (inDtype === 'float32') return x;
  const mant = inDtype === 'float16' ? 10 : 7;
  const emin = inDtype === 'float16' ? -14 : -126;
  return Float32Array.from(x, (v) => {
    if (v === 0) return v;
    let e = Math.floor(Math.log2(Math.abs(v)));
    if (2 ** e > Math.abs(v)) e--;
    else if (2 ** (e + 1) <= Math.abs(v)) e++;
    const ulp = 2 ** (Math.max(e, emin) - mant);
    const q = Math.abs(v) / ulp;
    const f = Math.floor(q);
    return Math.sign(v) * (q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f) * ulp;
  });
}

interface Check {
  /** Scales must equal amax / fmax exactly (CPU) or within 1 float32 ulp (GPU). */
  scaleUlps: number;
  /** Codes must equal the rounding of x / scale exactly (CPU) or may fall to the neighbour within this many f32 ulps of a boundary. */
  tieUlps: number;
}

/** Checks one quantization result against the definition; returns how many codes used the near-tie allowance. */
function checkQuantized(label: string, x: Float32Array, rows: number, cols: number, g: QuantGranularity, dtype: Fp8, r: Result, check: Check): number {
  const grp = groups(g, rows, cols);
  expect(r.dataShape, label).toEqual([rows, cols]);
  expect(r.dataDtype, label).toBe(dtype);
  expect(r.scaleDtype, label).toBe('float32');
  expect(r.scaleShape, label).toEqual(grp.shape);
  // amax per group, computed here.
  const amax = new Float64Array(grp.count);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) amax[grp.of(i, j)] = Math.max(amax[grp.of(i, j)], Math.abs(x[i * cols + j]));
  const fmax = FMT[dtype].max;
  for (let s = 0; s < grp.count; s++) {
    const got = r.scale[s];
    expect(Number.isFinite(got) && got > 0, `${label}: scale[${s}] = ${got} must be finite and positive`).toBe(true);
    if (amax[s] === 0) continue; // any small positive scale will do for an all-zero group
    const want = Math.fround(amax[s] / fmax);
    if (ulpsApart(got, want) > check.scaleUlps) expect.fail(`${label}: scale[${s}] = ${got}, want amax ${amax[s]} / ${fmax} = ${want}`);
  }
  const subHalf = 2 ** (FMT[dtype].emin - FMT[dtype].mant - 1); // half the smallest subnormal
  const rel = 2 ** -(FMT[dtype].mant + 1); // half an ulp, relative
  let nearTies = 0;
  const bad: string[] = [];
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const e = i * cols + j;
      const s = r.scale[grp.of(i, j)];
      const got = r.data[e];
      if (Number.isNaN(got)) {
        bad.push(`[${i}, ${j}] is NaN`);
        continue;
      }
      // The code: x / scale (the scale this result carries) rounded to FP8.
      const q = x[e] / s;
      const want = roundFp8(Math.fround(q), dtype);
      if (!Object.is(got, want) && !(got === 0 && want === 0)) {
        const a = roundFp8(q * (1 - check.tieUlps * 2 ** -23), dtype);
        const b = roundFp8(q * (1 + check.tieUlps * 2 ** -23), dtype);
        if (got >= Math.min(a, b) && got <= Math.max(a, b)) nearTies++;
        else bad.push(`[${i}, ${j}] x ${x[e]} / scale ${s} = ${q}: code value ${got}, want ${want}`);
      }
      // Dequantized within FP8 precision: half an ulp relative, or half the smallest subnormal step.
      const err = Math.abs(got * s - x[e]);
      if (err > rel * Math.abs(x[e]) * (1 + 1e-6) + subHalf * s * (1 + 1e-6) + 1e-30) bad.push(`[${i}, ${j}] data * scale = ${got * s}, x = ${x[e]}`);
    }
  }
  if (bad.length) expect.fail(`${label}: ${bad.length} elements wrong\n  ${bad.slice(0, 6).join('\n  ')}`);
  return nearTies;
}

const CPU_CHECK: Check = { scaleUlps: 0, tieUlps: 0 };
const GPU_CHECK: Check = { scaleUlps: 1, tieUlps: 4 };

/** The FP8 value the codes of both results agree on, except near ties (see checkQuantized). */
function expectSameCodes(label: string, cpu: Result, gpuR: Result, x: Float32Array, rows: number, cols: number, g: QuantGranularity, dtype: Fp8): void {
  const grp = groups(g, rows, cols);
  for (let s = 0; s < cpu.scale.length; s++) {
    if (ulpsApart(cpu.scale[s], gpuR.scale[s]) > 1) expect.fail(`${label}: scale[${s}] cpu ${cpu.scale[s]} gpu ${gpuR.scale[s]}`);
  }
  const bad: string[] = [];
  for (let e = 0; e < cpu.data.length; e++) {
    if (Object.is(cpu.data[e], gpuR.data[e])) continue;
    const q = x[e] / cpu.scale[grp.of(Math.floor(e / cols), e % cols)];
    const a = roundFp8(q * (1 - 6 * 2 ** -23), dtype);
    const b = roundFp8(q * (1 + 6 * 2 ** -23), dtype);
    // Different codes only where x / scale is within a few ulps of a rounding boundary (a and b differ).
    if (a === b) bad.push(`[${e}] cpu ${cpu.data[e]} gpu ${gpuR.data[e]} (x / scale = ${q})`);
  }
  if (bad.length) expect.fail(`${label}: ${bad.length} codes differ away from a rounding boundary\n  ${bad.slice(0, 6).join('\n  ')}`);
}

// ---- CPU ----------------------------------------------------------------------------------------------------------

describe('quantize on the CPU backend', () => {
  it.each(FP8)('every granularity of a 130 x 300 input in %s (sizes not multiples of 128, zero groups)', async (dtype) => {
    const rows = 130;
    const cols = 300;
    // Zero: row 7 (a whole row), row 5 columns 128..255 (a 1x128 group), rows 128..129 x columns 0..127 (a block).
    const x = makeInput(rows, cols, 1, (i, j) => i === 7 || (i === 5 && j >= 128 && j < 256) || (i >= 128 && j < 128));
    for (const g of GRANULARITIES) {
      const r = await quantizeOn(x, [rows, cols], 'float32', g, dtype, 'cpu');
      checkQuantized(`cpu ${g} ${dtype}`, x, rows, cols, g, dtype, r, CPU_CHECK);
      // Zero groups give zero codes.
      for (let j = 0; j < cols; j++) expect(r.data[7 * cols + j]).toBe(0);
    }
  });

  it('exact sizes and tiny ones: 128 x 256, 1 x 1, 3 x 5, 257 x 129', async () => {
    for (const [rows, cols] of [
      [128, 256],
      [1, 1],
      [3, 5],
      [257, 129],
    ]) {
      const x = makeInput(rows, cols, rows + cols);
      for (const g of GRANULARITIES) {
        const r = await quantizeOn(x, [rows, cols], 'float32', g, 'float8_e4m3fn', 'cpu');
        checkQuantized(`cpu ${g} ${rows}x${cols}`, x, rows, cols, g, 'float8_e4m3fn', r, CPU_CHECK);
      }
    }
  });

  it.each(['float16', 'bfloat16'] as const)('%s input', async (inDtype) => {
    const x = asDtype(makeInput(33, 200, 5), inDtype);
    for (const g of GRANULARITIES) {
      const r = await quantizeOn(x, [33, 200], inDtype, g, 'float8_e4m3fn', 'cpu');
      checkQuantized(`cpu ${inDtype} ${g}`, x, 33, 200, g, 'float8_e4m3fn', r, CPU_CHECK);
    }
  });

  it('an all-zero tensor: a finite positive scale and zero codes', async () => {
    for (const g of GRANULARITIES) {
      const q = quantize(tensor(new Float32Array(6 * 130), { shape: [6, 130] }), { granularity: g });
      const scale = await q.scale.toArray();
      expect(
        scale.every((s) => Number.isFinite(s) && s > 0),
        g,
      ).toBe(true);
      expect(
        (await q.data.toArray()).every((v) => Object.is(v, 0)),
        g,
      ).toBe(true);
    }
  });

  it('defaults: tensor granularity, float8_e4m3fn; tensor granularity takes any rank and gives a 0-d scale', async () => {
    const q = quantize(
      tensor([
        [1, -2],
        [448, 0.5],
      ]),
    );
    expect(q.data.dtype).toBe('float8_e4m3fn');
    expect(q.scale.shape).toEqual([]);
    expect(await q.scale.item()).toBe(1);
    expect(Array.from(await q.data.toArray())).toEqual([1, -2, 448, 0.5]);
    const q3 = quantize(tensor(new Float32Array(24).fill(-3), { shape: [2, 3, 4] }), { dtype: 'float8_e5m2' });
    expect(q3.scale.shape).toEqual([]);
    expect(await q3.scale.item()).toBe(Math.fround(3 / 57344));
    expect(q3.data.shape).toEqual([2, 3, 4]);
    expect((await q3.data.toArray()).every((v) => v === -57344)).toBe(true);
  });

  it('ties round to even (scale exactly 1: amax 448 / 57344)', async () => {
    // e4m3fn around 1: step 1/8, so 1.0625 -> 1 (even), 1.1875 -> 1.25 (even); subnormal step 2^-9: 3.5 steps -> 4.
    const e4 = quantize(tensor([448, 1.0625, 1.1875, -1.0625, 3.5 * 2 ** -9, 2.5 * 2 ** -9, 0.25 * 2 ** -9]));
    expect(await e4.scale.item()).toBe(1);
    expect(Array.from(await e4.data.toArray())).toEqual([448, 1, 1.25, -1, 4 * 2 ** -9, 2 * 2 ** -9, 0]);
    // e5m2 around 1: step 1/4, so 1.125 -> 1, 1.375 -> 1.5; 240 is 224 + 16 (between 224 and 256) -> 256.
    const e5 = quantize(tensor([-57344, 1.125, 1.375, 240]), { dtype: 'float8_e5m2' });
    expect(await e5.scale.item()).toBe(1);
    expect(Array.from(await e5.data.toArray())).toEqual([-57344, 1, 1.5, 256]);
  });

  it('errors: non-float input, non-FP8 target, granularities that need 2-D', () => {
    expect(() => quantize(tensor([1, 2], { dtype: 'int32' }))).toThrow(DTypeError);
    expect(() => quantize(tensor([1, 2], { dtype: 'int32' }))).toThrow(/int32/);
    expect(() => quantize(tensor([1, 2], { dtype: 'float8_e4m3fn' }))).toThrow(DTypeError);
    expect(() => quantize(tensor([1, 2]), { dtype: 'float16' as Fp8 })).toThrow(/float16/);
    for (const g of ['row', 'block128', 'group128'] as const) {
      expect(() => quantize(tensor([1, 2]), { granularity: g })).toThrow(ShapeError);
      expect(() => quantize(tensor(new Float32Array(8), { shape: [2, 2, 2] }), { granularity: g })).toThrow(/\[2, 2, 2\]/);
    }
  });
});

// ---- WebGPU -------------------------------------------------------------------------------------------------------

describe.skipIf(!gpu.available)(`quantize on WebGPU ${gpu.skipReason}`, () => {
  it.each(FP8)('every granularity of a 130 x 300 input in %s: the definition, and equal to the CPU', async (dtype) => {
    const rows = 130;
    const cols = 300;
    const x = makeInput(rows, cols, 2, (i, j) => i === 7 || (i === 5 && j >= 128 && j < 256) || (i >= 128 && j < 128));
    for (const g of GRANULARITIES) {
      const rg = await quantizeOn(x, [rows, cols], 'float32', g, dtype, 'webgpu');
      const nearTies = checkQuantized(`webgpu ${g} ${dtype}`, x, rows, cols, g, dtype, rg, GPU_CHECK);
      expect(nearTies, 'codes off the correctly rounded one (near a boundary)').toBeLessThan(rows * cols * 0.001);
      const rc = await quantizeOn(x, [rows, cols], 'float32', g, dtype, 'cpu');
      expectSameCodes(`${g} ${dtype} webgpu vs cpu`, rc, rg, x, rows, cols, g, dtype);
    }
  });

  it('exact and tiny sizes, float16 and bfloat16 inputs', async () => {
    const cases: [number, number, 'float32' | 'float16' | 'bfloat16'][] = [
      [128, 256, 'float32'],
      [1, 1, 'float32'],
      [3, 5, 'bfloat16'],
      [257, 129, 'float16'],
    ];
    for (const [rows, cols, inDtype] of cases) {
      const x = asDtype(makeInput(rows, cols, 3 * rows + cols), inDtype);
      for (const g of GRANULARITIES) {
        const rg = await quantizeOn(x, [rows, cols], inDtype, g, 'float8_e4m3fn', 'webgpu');
        checkQuantized(`webgpu ${g} ${inDtype} ${rows}x${cols}`, x, rows, cols, g, 'float8_e4m3fn', rg, GPU_CHECK);
        const rc = await quantizeOn(x, [rows, cols], inDtype, g, 'float8_e4m3fn', 'cpu');
        expectSameCodes(`${g} ${inDtype} ${rows}x${cols}`, rc, rg, x, rows, cols, g, 'float8_e4m3fn');
      }
    }
  });

  it('all-zero input and exact ties on the GPU', async () => {
    for (const g of GRANULARITIES) {
      const q = quantize(tensor(new Float32Array(3 * 200), { shape: [3, 200], device: 'webgpu' }), { granularity: g });
      expect(
        (await q.scale.toArray()).every((s) => Number.isFinite(s) && s > 0),
        g,
      ).toBe(true);
      expect(
        (await q.data.toArray()).every((v) => Object.is(v, 0)),
        g,
      ).toBe(true);
    }
    const e4 = quantize(tensor([448, 1.0625, 1.1875, -1.0625, 3.5 * 2 ** -9, 2.5 * 2 ** -9], { device: 'webgpu' }));
    expect(await e4.scale.item()).toBe(1);
    expect(Array.from(await e4.data.toArray())).toEqual([448, 1, 1.25, -1, 4 * 2 ** -9, 2 * 2 ** -9]);
  });
});

// ---- round trip through scaledMm ------------------------------------------------------------------------------------

/** x @ w.T in float64 from the original float32 values. */
function exactProduct(x: Float32Array, w: Float32Array, m: number, n: number, k: number): Float64Array {
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let q = 0; q < k; q++) s += x[i * k + q] * w[j * k + q];
      out[i * n + j] = s;
    }
  return out;
}

const ROUND_TRIPS: [QuantGranularity, QuantGranularity, Fp8][] = [
  ['tensor', 'tensor', 'float8_e4m3fn'],
  ['row', 'row', 'float8_e4m3fn'],
  ['group128', 'block128', 'float8_e4m3fn'],
  ['tensor', 'block128', 'float8_e4m3fn'],
  ['row', 'block128', 'float8_e5m2'],
];

async function roundTrip(device: DeviceName, ga: QuantGranularity, gb: QuantGranularity, dtype: Fp8): Promise<void> {
  let seed = 40 + ROUND_TRIPS.findIndex((r) => r[0] === ga && r[1] === gb);
  // GEMM (K not a multiple of 16; M > 4) and GEMV (M <= 4, K a multiple of 16) shapes.
  for (const [m, k, n] of [
    [3, 300, 130],
    [17, 256, 70],
    [2, 256, 130],
  ]) {
    for (const outDtype of ['float32', 'bfloat16'] as const) {
      const x = makeInput(m, k, seed++);
      const w = makeInput(n, k, seed++);
      const qa = quantize(tensor(x, { shape: [m, k], device }), { granularity: ga, dtype });
      const qb = quantize(tensor(w, { shape: [n, k], device }), { granularity: gb, dtype });
      // A per-row scale of the weight [N, 1] is scaledMm's per-column scale [1, N].
      const scaleB = gb === 'row' ? qb.scale.reshape([1, n]) : qb.scale;
      const y = await scaledMm(qa.data, qb.data.T, { scaleA: qa.scale, scaleB, outDtype }).toArray();
      const exact = exactProduct(x, w, m, n, k);
      // Bound: each factor is off by at most half an FP8 ulp (relative) or half a subnormal step times its scale.
      const xq = await qa.data.toArray();
      const wq = await qb.data.toArray();
      const sa = await qa.scale.toArray();
      const sb = await qb.scale.toArray();
      const ga_ = groups(ga, m, k);
      const gb_ = groups(gb, n, k);
      const { mant, emin } = FMT[dtype];
      const rel = 2 ** -(mant + 1);
      const sub = 2 ** (emin - mant - 1);
      let num = 0;
      let den = 0;
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let bound = 0;
          let mag = 0;
          for (let q = 0; q < k; q++) {
            const ex = rel * Math.abs(x[i * k + q]) + sub * sa[ga_.of(i, q)];
            const ew = rel * Math.abs(w[j * k + q]) + sub * sb[gb_.of(j, q)];
            bound += Math.abs(x[i * k + q]) * ew + ex * Math.abs(w[j * k + q]) + ex * ew;
            mag += Math.abs(xq[i * k + q] * sa[ga_.of(i, q)] * wq[j * k + q] * sb[gb_.of(j, q)]);
          }
          const e = exact[i * n + j];
          bound += 1e-5 * Math.sqrt(k) * mag + (outDtype === 'bfloat16' ? 2 ** -8 * (Math.abs(e) + bound) : 0);
          const got = y[i * n + j];
          if (!(Math.abs(got - e) <= bound)) expect.fail(`${device} ${ga}/${gb} ${dtype} -> ${outDtype} [${i}, ${j}]: ${got} vs exact ${e} (bound ${bound})`);
          num += (got - e) ** 2;
          den += e ** 2;
        }
      }
      // And on the whole, the relative error is what FP8 rounding gives (~3% for e4m3fn, ~6% for e5m2).
      expect(Math.sqrt(num / den), `${device} ${ga}/${gb} ${dtype} -> ${outDtype} relative error`).toBeLessThan(dtype === 'float8_e4m3fn' ? 0.06 : 0.12);
      [qa.data, qa.scale, qb.data, qb.scale].forEach((t: Tensor) => t.dispose());
    }
  }
}

describe('quantize then scaledMm approximates x @ w.T', () => {
  it.each(ROUND_TRIPS)('on the CPU, x by %s, w by %s, %s', async (ga, gb, dtype) => {
    await roundTrip('cpu', ga, gb, dtype);
  });
  it.skipIf(!gpu.available).each(ROUND_TRIPS)('on WebGPU, x by %s, w by %s, %s', async (ga, gb, dtype) => {
    await roundTrip('webgpu', ga, gb, dtype);
  });
});

describe('row scales of a weight pass to scaledMm as quantize returns them', () => {
  it('[N, 1] from quantize(w, {granularity: "row"}) equals the torch layout [1, N]', async () => {
    const x = randn([3, 40], { device: 'cpu' });
    const w = randn([6, 40], { device: 'cpu' });
    const qx = quantize(x, { granularity: 'row' });
    const qw = quantize(w, { granularity: 'row' });
    expect(qw.scale.shape).toEqual([6, 1]);
    const direct = await scaledMm(qx.data, qw.data.T, { scaleA: qx.scale, scaleB: qw.scale, outDtype: 'float32' }).toArray();
    const torchLayout = await scaledMm(qx.data, qw.data.T, { scaleA: qx.scale, scaleB: qw.scale.reshape([1, 6]), outDtype: 'float32' }).toArray();
    expect(Array.from(direct)).toEqual(Array.from(torchLayout));
  });
});
