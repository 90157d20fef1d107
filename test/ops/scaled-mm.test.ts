// scaledMm (torch._scaled_mm) on the CPU backend and on WebGPU, each judged against a float64 reference written
// here from the definition: out = round_out(((A_fp8 * scale_a) @ (B_fp8 * scale_b) + bias) * scale_result).
// FP8 operands are built from raw codes, decoded here with the OFP8 formulas, and outputs are rounded here to the
// output format (round-to-nearest-even, FP8 saturating), so nothing in the expectation runs the library's own code.
//
// Tolerances. The CPU accumulates in float64, so it must round exactly as the reference (a 1e-12 window only
// absorbs summation order). The GPU accumulates in float32: its result may lie anywhere a perturbation of
// err = 1e-5 * sqrt(K) * sum|a*sa||b*sb| (times the outer scales) could move the exact value, then rounded to the
// output dtype; for f16/bf16/fp8 outputs that admits the neighbouring code only when the exact value sits within
// err of a rounding boundary (one output ulp at most).
import { describe, expect, it } from 'vitest';
import { backendFor, webgpuBackend } from '../../src/runtime/registry.js';
import type { ScaleRecipe } from '../../src/runtime/backend.js';
import {
  DeviceMismatchError,
  DTypeError,
  Generator,
  gpuCounters,
  ShapeError,
  scaledMm,
  setDefaultDevice,
  Tensor,
  tensor,
  type DeviceName,
  type ScaledMmOptions,
  type ScaledMmOutDtype,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { gemvKnTuning } from '../../src/kernels/matmul/gemv-kn.js';
import { fp8Value, type Fp8 } from '../helpers/reference.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Layout = 'wT' | 'plain';
type BiasDtype = 'float32' | 'float16' | 'bfloat16';

// ---- independent FP8 decoding and output rounding -------------------------------------------------------------

interface Format {
  mant: number;
  emin: number;
  max: number;
  overflow: number;
}
const FORMATS: Record<Exclude<ScaledMmOutDtype, 'float32'>, Format> = {
  float16: { mant: 10, emin: -14, max: 65504, overflow: Infinity },
  bfloat16: { mant: 7, emin: -126, max: (2 - 2 ** -7) * 2 ** 127, overflow: Infinity },
  float8_e4m3fn: { mant: 3, emin: -6, max: 448, overflow: NaN },
};

/** x rounded to nearest-even in fmt (subnormals included); past the largest finite value: max when saturating. */
function roundToFormat(x: number, fmt: Format, saturate: boolean): number {
  if (Number.isNaN(x)) return NaN;
  const ax = Math.abs(x);
  let r: number;
  if (ax === Infinity || ax === 0) r = ax;
  else {
    let e = Math.floor(Math.log2(ax));
    if (2 ** e > ax) e--;
    else if (2 ** (e + 1) <= ax) e++;
    const ulp = 2 ** (Math.max(e, fmt.emin) - fmt.mant);
    const q = ax / ulp;
    const f = Math.floor(q);
    const rem = q - f;
    r = (rem > 0.5 || (rem === 0.5 && f % 2 === 1) ? f + 1 : f) * ulp;
  }
  if (r > fmt.max) r = saturate ? fmt.max : fmt.overflow;
  return x < 0 || Object.is(x, -0) ? -r : r;
}

/** The output cast of scaledMm: the f32 result rounded to outDtype; FP8 outputs saturate. */
function roundOut(x: number, outDtype: ScaledMmOutDtype): number {
  const f = Math.fround(x);
  return outDtype === 'float32' ? f : roundToFormat(f, FORMATS[outDtype], outDtype === 'float8_e4m3fn');
}

// ---- problems ---------------------------------------------------------------------------------------------------

/** Finite codes of dtype whose magnitude is at most maxAbs (zeros and subnormals included). */
function finiteCodes(dtype: Fp8, maxAbs: number): number[] {
  const out: number[] = [];
  for (let c = 0; c < 256; c++) {
    const v = fp8Value(c, dtype);
    if (Number.isFinite(v) && Math.abs(v) <= maxAbs) out.push(c);
  }
  return out;
}

function randomCodes(n: number, dtype: Fp8, g: Generator, maxAbs = 16): Uint8Array {
  const pool = finiteCodes(dtype, maxAbs);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = pool[g.nextU32() % pool.length];
  return out;
}

/** A tensor holding exactly these FP8 codes (uploaded as storage, no conversion). */
function fromCodes(codes: Uint8Array, shape: number[], dtype: Fp8, device: DeviceName): Tensor {
  const backend = backendFor(device);
  return Tensor.fromHandle(backend, backend.upload(dtype, codes.slice()), dtype, shape);
}

interface Spec {
  m: number;
  k: number;
  n: number;
  /** wT: b = w.T for a [N, K] weight w (the checkpoint layout, GEMV path when it applies); plain: b is [K, N]. */
  layout: Layout;
  aDtype?: Fp8;
  bDtype?: Fp8;
  ra?: ScaleRecipe;
  rb?: ScaleRecipe;
  outDtype?: ScaledMmOutDtype;
  bias?: BiasDtype;
  scaleResult?: number;
  /** Shape given to a 'tensor' scale: [], [1] or [1, 1]. */
  tensorShape?: number[];
  /** Pass recipeA/recipeB explicitly (otherwise scaledMm infers them from the scale shapes). */
  explicit?: boolean;
  seed: number;
  /** Largest |value| among the random codes. */
  maxAbs?: number;
  /** Multiplies the scales (to push outputs out of range). */
  scaleGain?: number;
}

interface Problem {
  spec: Required<Omit<Spec, 'bias' | 'scaleResult' | 'tensorShape'>> & Pick<Spec, 'bias' | 'scaleResult' | 'tensorShape'>;
  aCodes: Uint8Array;
  /** [N, K] for wT, [K, N] for plain. */
  bCodes: Uint8Array;
  sa: Float32Array;
  saShape: number[];
  sb: Float32Array;
  sbShape: number[];
  biasValues?: number[];
}

function scaleShape(which: 'a' | 'b', recipe: ScaleRecipe, m: number, n: number, k: number, tensorShape: number[]): number[] {
  const kb = Math.ceil(k / 128);
  if (recipe === 'tensor') return tensorShape;
  if (which === 'a') return recipe === 'row' ? [m, 1] : [m, kb];
  return recipe === 'row' ? [1, n] : [Math.ceil(n / 128), kb];
}

function makeProblem(s: Spec): Problem {
  const spec = {
    aDtype: 'float8_e4m3fn' as Fp8,
    bDtype: 'float8_e4m3fn' as Fp8,
    ra: 'tensor' as ScaleRecipe,
    rb: 'tensor' as ScaleRecipe,
    outDtype: 'float32' as ScaledMmOutDtype,
    explicit: false,
    maxAbs: 16,
    scaleGain: 1,
    ...s,
  };
  const { m, k, n } = spec;
  const g = new Generator(spec.seed);
  const aCodes = randomCodes(m * k, spec.aDtype, g, spec.maxAbs);
  const bCodes = randomCodes(k * n, spec.bDtype, g, spec.maxAbs);
  const tensorShape = spec.tensorShape ?? [1];
  const saShape = scaleShape('a', spec.ra, m, n, k, tensorShape);
  const sbShape = scaleShape('b', spec.rb, m, n, k, tensorShape);
  // Scales around 2^-2 / K^(1/4) each keep typical outputs within FP8 range; each element differs.
  const base = (spec.scaleGain * 0.25) / Math.max(1, k) ** 0.25;
  const scales = (count: number) => Float32Array.from({ length: count }, () => base * (0.5 + g.uniform()));
  const sa = scales(saShape.reduce((x, y) => x * y, 1));
  const sb = scales(sbShape.reduce((x, y) => x * y, 1));
  // Bias values are multiples of 1/8 in [-8, 8): exact in float32, float16 and bfloat16.
  const biasValues = spec.bias ? Array.from({ length: n }, () => ((g.nextU32() % 128) - 64) / 8) : undefined;
  return { spec, aCodes, bCodes, sa, saShape, sb, sbShape, biasValues };
}

/** Logical b[q, j] of the problem (whatever its storage layout). */
function bValue(p: Problem, q: number, j: number): number {
  const { k, n, layout, bDtype } = p.spec;
  return fp8Value(p.bCodes[layout === 'wT' ? j * k + q : q * n + j], bDtype);
}

interface Expected {
  /** Exact (float64) result before the output cast. */
  v: Float64Array;
  /** sum |a*sa * b*sb| with the outer scales, |bias| and |scale_result| applied: what f32 rounding errors scale with. */
  mag: Float64Array;
}

function reference(p: Problem): Expected {
  const { m, n, k, ra, rb, aDtype, scaleResult } = p.spec;
  const kb = Math.ceil(k / 128);
  const v = new Float64Array(m * n);
  const mag = new Float64Array(m * n);
  const a = Float64Array.from(p.aCodes, (c) => fp8Value(c, aDtype));
  const b = new Float64Array(k * n);
  for (let q = 0; q < k; q++) for (let j = 0; j < n; j++) b[q * n + j] = bValue(p, q, j);
  const sr = scaleResult ?? 1;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      let abs = 0;
      for (let q = 0; q < k; q++) {
        const da = a[i * k + q] * (ra === 'block' ? p.sa[i * kb + (q >> 7)] : 1);
        const db = b[q * n + j] * (rb === 'block' ? p.sb[(j >> 7) * kb + (q >> 7)] : 1);
        acc += da * db;
        abs += Math.abs(da * db);
      }
      const outer = (ra === 'tensor' ? p.sa[0] : ra === 'row' ? p.sa[i] : 1) * (rb === 'tensor' ? p.sb[0] : rb === 'row' ? p.sb[j] : 1);
      const bias = p.biasValues ? p.biasValues[j] : 0;
      v[i * n + j] = (acc * outer + bias) * sr;
      mag[i * n + j] = (abs * Math.abs(outer) + Math.abs(bias)) * Math.abs(sr);
    }
  }
  return { v, mag };
}

/** Runs the problem's scaledMm on one device; returns the decoded output values. */
async function runOn(
  p: Problem,
  device: DeviceName,
  bOverride?: (b: Tensor) => Tensor,
): Promise<{ values: Float32Array; shape: readonly number[]; dtype: string }> {
  const { m, n, k, layout, aDtype, bDtype, ra, rb, outDtype, bias, scaleResult, explicit } = p.spec;
  const made: Tensor[] = [];
  const keep = (t: Tensor) => (made.push(t), t);
  try {
    const a = keep(fromCodes(p.aCodes, [m, k], aDtype, device));
    let b = layout === 'wT' ? keep(keep(fromCodes(p.bCodes, [n, k], bDtype, device)).T) : keep(fromCodes(p.bCodes, [k, n], bDtype, device));
    if (bOverride) b = keep(bOverride(b));
    const options: ScaledMmOptions = {
      scaleA: keep(tensor(p.sa, { shape: p.saShape, dtype: 'float32', device })),
      scaleB: keep(tensor(p.sb, { shape: p.sbShape, dtype: 'float32', device })),
      outDtype,
      ...(explicit ? { recipeA: ra, recipeB: rb } : {}),
    };
    if (bias) options.bias = keep(tensor(p.biasValues!, { dtype: bias, device }));
    if (scaleResult !== undefined) options.scaleResult = keep(tensor([scaleResult], { dtype: 'float32', device }));
    const out = keep(scaledMm(a, b, options));
    return { values: (await out.toArray()) as Float32Array, shape: out.shape, dtype: out.dtype };
  } finally {
    made.forEach((t) => t.dispose());
  }
}

/**
 * got[i] must be what rounding some value within err_i = errScale * mag_i (+ the f32 epilogue's own rounding) of
 * the exact v_i to the output dtype gives: rounding is monotone, so got lies between the roundings of v - err and
 * v + err.
 */
function expectWithin(label: string, got: ArrayLike<number>, want: Expected, outDtype: ScaledMmOutDtype, errScale: number): void {
  expect(got.length, label).toBe(want.v.length);
  const bad: string[] = [];
  for (let i = 0; i < want.v.length; i++) {
    const v = want.v[i];
    const g = got[i];
    if (!Number.isFinite(v)) {
      const w = roundOut(v, outDtype);
      if (!Object.is(g, w) && !(Number.isNaN(g) && Number.isNaN(w))) bad.push(`[${i}] got ${g}, want ${w}`);
      continue;
    }
    const err = errScale * want.mag[i] + 2 ** -22 * Math.abs(v);
    const lo = roundOut(v - err, outDtype);
    const hi = roundOut(v + err, outDtype);
    if (!(g >= lo && g <= hi)) bad.push(`[${i}] got ${g}, want ${roundOut(v, outDtype)} (exact ${v}, allowed [${lo}, ${hi}])`);
  }
  if (bad.length) expect.fail(`${label}: ${bad.length} of ${want.v.length} outputs wrong\n  ${bad.slice(0, 6).join('\n  ')}`);
}

const CPU_ERR = 1e-12;
const gpuErr = (k: number) => 1e-5 * Math.sqrt(Math.max(k, 1));

function describeSpec(s: Spec): string {
  return `${s.m}x${s.k}x${s.n} ${s.layout} ${s.aDtype ?? 'e4m3'}/${s.bDtype ?? 'e4m3'} ${s.ra ?? 'tensor'}/${s.rb ?? 'tensor'} -> ${s.outDtype ?? 'float32'}${s.bias ? ` bias ${s.bias}` : ''}${s.scaleResult !== undefined ? ` scaleResult ${s.scaleResult}` : ''}`;
}

/** Checks the CPU backend against the reference; returns the problem and its reference for further checks. */
async function checkCpu(spec: Spec): Promise<{ p: Problem; want: Expected; cpu: Float32Array }> {
  const p = makeProblem(spec);
  const want = reference(p);
  const label = describeSpec(spec);
  const r = await runOn(p, 'cpu');
  expect(r.shape, label).toEqual([spec.m, spec.n]);
  expect(r.dtype, label).toBe(spec.outDtype ?? 'float32');
  expectWithin(`cpu ${label}`, r.values, want, p.spec.outDtype, CPU_ERR);
  return { p, want, cpu: r.values };
}

// ---- which GPU kernel ran ---------------------------------------------------------------------------------------

// Matmul kernels dispatched since resetKernels(), by family, from gpuCounters().byKernel (kernel descriptions keep
// their pipeline per variant, so a hook on pipeline lookups would miss every repeat).
let countsAtReset: Record<string, number> = {};
const resetKernels = () => {
  countsAtReset = { ...gpuCounters().byKernel };
};
const matmulKernels = (): string[] =>
  ['gemv', 'gemv-kn', 'gemm'].flatMap((k) => new Array<string>((gpuCounters().byKernel[k] ?? 0) - (countsAtReset[k] ?? 0)).fill(k));

/**
 * The GEMV applies to M = 1..4 with b = w.T whose rows (K bytes) are 16-byte aligned; the [K, N] GEMV to M = 1..4
 * with b a plain [K, N] weight (gemv-kn.ts); the GEMM to the rest.
 */
type Path = 'gemv' | 'gemv-kn' | 'gemm';
const expectedPath = (s: Spec): Path => {
  if (s.m < 1 || s.m > 4) return 'gemm';
  if (s.layout === 'wT' && s.k % 16 === 0) return 'gemv';
  // w.T with N = 1 or K = 1 also has N contiguous.
  return s.layout === 'plain' || s.n === 1 || s.k === 1 ? 'gemv-kn' : 'gemm';
};

/** Runs on WebGPU, checks the result and which kernel (gemv or gemm) produced it. */
async function checkGpu(spec: Spec, path: Path | 'none' = expectedPath(spec), bOverride?: (b: Tensor) => Tensor): Promise<Float32Array> {
  const p = makeProblem(spec);
  const want = reference(p);
  const label = describeSpec(spec);
  resetKernels();
  const r = await runOn(p, 'webgpu', bOverride);
  expect(r.shape, label).toEqual([spec.m, spec.n]);
  expect(r.dtype, label).toBe(spec.outDtype ?? 'float32');
  if (path !== 'none') {
    const used = matmulKernels();
    expect(used, `${label}: kernel`).toEqual([path]);
  }
  expectWithin(`webgpu ${label}`, r.values, want, p.spec.outDtype, gpuErr(spec.k));
  return r.values;
}

const OUT_DTYPES: ScaledMmOutDtype[] = ['float32', 'float16', 'bfloat16', 'float8_e4m3fn'];
const RECIPES: ScaleRecipe[] = ['tensor', 'row', 'block'];
const FP8_PAIRS: [Fp8, Fp8][] = [
  ['float8_e4m3fn', 'float8_e4m3fn'],
  ['float8_e5m2', 'float8_e4m3fn'],
  ['float8_e4m3fn', 'float8_e5m2'],
  ['float8_e5m2', 'float8_e5m2'],
];
const TENSOR_SHAPES = [[], [1], [1, 1]];

// ---- CPU: hand-computed cases and the backend against the reference ---------------------------------------------

describe('scaledMm on the CPU backend', () => {
  // a = [[1, 2, -0.5], [0.25, -3, 4]], b = [[2, -1], [0.5, 1.5], [1, 8]]: every value exact in e4m3fn and e5m2.
  // a @ b = [[2.5, -2], [3, 27.25]].
  const A = [
    [1, 2, -0.5],
    [0.25, -3, 4],
  ];
  const B = [
    [2, -1],
    [0.5, 1.5],
    [1, 8],
  ];

  it.each(['float8_e4m3fn', 'float8_e5m2'] as const)('2x3 @ 3x2 in %s with row scales and a bias, by hand', async (dtype) => {
    const a = tensor(A, { dtype });
    const b = tensor(B, { dtype });
    const scaleA = tensor([[0.5], [2]]);
    const scaleB = tensor([[1, 0.25]]);
    // rows scaled by 0.5 and 2, columns by 1 and 0.25: [[1.25, -0.25], [6, 13.625]]
    const out = scaledMm(a, b, { scaleA, scaleB, outDtype: 'float32' });
    expect(out.shape).toEqual([2, 2]);
    expect(Array.from(await out.toArray())).toEqual([1.25, -0.25, 6, 13.625]);
    const withBias = scaledMm(a, b, { scaleA, scaleB, outDtype: 'bfloat16', bias: tensor([1, -1], { dtype: 'bfloat16' }) });
    expect(withBias.dtype).toBe('bfloat16');
    expect(Array.from(await withBias.toArray())).toEqual([2.25, -1.25, 7, 12.625]);
    // FP8 output with scale_result 0.5: [[1.125, -0.625], [3.5, 6.3125 -> 6.5 (nearest e4m3fn)]]
    const fp8 = scaledMm(a, b, { scaleA, scaleB, outDtype: 'float8_e4m3fn', bias: tensor([1, -1]), scaleResult: tensor(0.5) });
    expect(fp8.dtype).toBe('float8_e4m3fn');
    expect(Array.from(await fp8.toArray())).toEqual([1.125, -0.625, 3.5, 6.5]);
    // Tensorwise scales 0.5 and 4 (the a @ b above times 2), default output bfloat16.
    const tw = scaledMm(a, b, { scaleA: tensor(0.5), scaleB: tensor([4]) });
    expect(tw.dtype).toBe('bfloat16');
    expect(Array.from(await tw.toArray())).toEqual([5, -4, 6, 54.5]);
  });

  it('weight given as w.T ([N, K] storage) equals the same weight given as [K, N]', async () => {
    const w = tensor(
      [
        [2, 0.5, 1],
        [-1, 1.5, 8],
      ],
      { dtype: 'float8_e4m3fn' },
    ); // = B transposed
    const out = scaledMm(tensor(A, { dtype: 'float8_e4m3fn' }), w.T, { scaleA: tensor(1), scaleB: tensor(1), outDtype: 'float32' });
    expect(Array.from(await out.toArray())).toEqual([2.5, -2, 3, 27.25]);
  });

  it('block scales: 1x128 groups of a and 128x128 blocks of the [N, K] weight, by hand', async () => {
    // K = 130 (two K blocks), N = 129 (two N blocks). a = all ones, w = all ones: out[i, j] = sum_q sa[i, q/128] * sb[j/128, q/128].
    const m = 2;
    const k = 130;
    const n = 129;
    const a = tensor(new Float32Array(m * k).fill(1), { shape: [m, k], dtype: 'float8_e4m3fn' });
    const w = tensor(new Float32Array(n * k).fill(1), { shape: [n, k], dtype: 'float8_e4m3fn' });
    const sa = tensor([
      [1, 2],
      [0.5, 4],
    ]);
    const sb = tensor([
      [1, 0.25],
      [2, 8],
    ]);
    const out = await scaledMm(a, w.T, { scaleA: sa, scaleB: sb, outDtype: 'float32' }).toArray();
    const expected = (i: number, j: number) => {
      const s = [
        [1, 2],
        [0.5, 4],
      ][i];
      const t = j < 128 ? [1, 0.25] : [2, 8];
      return 128 * s[0] * t[0] + 2 * s[1] * t[1];
    };
    for (const [i, j] of [
      [0, 0],
      [0, 127],
      [0, 128],
      [1, 0],
      [1, 128],
    ])
      expect(out[i * n + j], `[${i}, ${j}]`).toBe(expected(i, j));
  });

  it('every recipe pair, outDtype and FP8 pair against the reference', async () => {
    let seed = 1;
    for (const ra of RECIPES) {
      for (const rb of RECIPES) {
        for (const outDtype of OUT_DTYPES) {
          const [aDtype, bDtype] = FP8_PAIRS[seed % 4];
          await checkCpu({ m: 3, k: 300, n: 130, layout: seed % 2 ? 'wT' : 'plain', ra, rb, outDtype, aDtype, bDtype, seed: seed++ });
        }
      }
    }
  });

  it('M = 0, N = 0 and K = 0 (zeros plus the bias)', async () => {
    for (const outDtype of OUT_DTYPES) {
      for (const [m, k, n] of [
        [0, 5, 3],
        [3, 5, 0],
        [0, 0, 0],
        [2, 0, 3],
      ]) {
        for (const rb of RECIPES) {
          const r = await checkCpu({ m, k, n, layout: 'wT', ra: 'block', rb, outDtype, seed: 7 });
          expect(r.cpu.length).toBe(m * n);
          if (k === 0) expect(Array.from(r.cpu)).toEqual(new Array(m * n).fill(0));
        }
        if (m * n > 0) {
          const b = await checkCpu({ m, k, n, layout: 'plain', outDtype, bias: 'bfloat16', seed: 8 });
          if (k === 0) expect(Array.from(b.cpu)).toEqual(Array.from({ length: m * n }, (_, i) => roundOut(b.p.biasValues![i % n], outDtype)));
        }
      }
    }
  });
});

// ---- errors -----------------------------------------------------------------------------------------------------

describe('scaledMm argument errors', () => {
  const fp8 = (shape: number[], dtype: Fp8 = 'float8_e4m3fn') => tensor(new Float32Array(shape.reduce((x, y) => x * y, 1)).fill(1), { shape, dtype });
  const one = () => tensor([1]);
  const a = fp8([4, 200]);
  const b = fp8([200, 6]);
  const call =
    (options: Partial<ScaledMmOptions>, x = a, y = b) =>
    () =>
      scaledMm(x, y, { scaleA: one(), scaleB: one(), ...options });

  it('operands must be FP8 (DTypeError naming the dtype)', () => {
    expect(call({}, tensor([[1, 2]]), fp8([2, 1]))).toThrow(DTypeError);
    expect(call({}, tensor([[1, 2]]), fp8([2, 1]))).toThrow(/\[1, 2\] float32/);
    expect(call({}, fp8([1, 2]), tensor([[1], [2]], { dtype: 'bfloat16' }))).toThrow(/b must be float8.*bfloat16/);
    expect(call({}, fp8([1, 2]), tensor([[1], [2]], { dtype: 'int32' }))).toThrow(DTypeError);
  });

  it('operands must be 2-D (ShapeError naming the shape)', () => {
    expect(call({}, fp8([200]), b)).toThrow(ShapeError);
    expect(call({}, fp8([200]), b)).toThrow(/a must be 2-D, got \[200\]/);
    expect(call({}, a, fp8([1, 200, 6]))).toThrow(/b must be 2-D, got \[1, 200, 6\]/);
    expect(call({}, fp8([]), b)).toThrow(ShapeError);
  });

  it('inner dims must agree', () => {
    expect(call({}, a, fp8([199, 6]))).toThrow(ShapeError);
    expect(call({}, a, fp8([199, 6]))).toThrow(/\[4, 200\].*\[199, 6\]/);
  });

  it('scales must be float32', () => {
    expect(call({ scaleA: tensor([1], { dtype: 'bfloat16' }) })).toThrow(DTypeError);
    expect(call({ scaleA: tensor([1], { dtype: 'bfloat16' }) })).toThrow(/scaleA.*bfloat16/);
    expect(call({ scaleB: tensor([1], { dtype: 'float16' }) })).toThrow(/scaleB.*float16/);
    expect(call({ scaleB: tensor([1], { dtype: 'float8_e4m3fn' }) })).toThrow(DTypeError);
  });

  it('scale shapes that fit no recipe list the expected shapes', () => {
    // a [4, 200]: tensor one element, row [4, 1], block [4, 2]; b [200, 6]: row [1, 6], block [1, 2].
    expect(call({ scaleA: tensor(new Float32Array(8).fill(1), { shape: [4, 2] }) })).not.toThrow();
    const wrongA = call({ scaleA: tensor(new Float32Array(12), { shape: [4, 3] }) });
    expect(wrongA).toThrow(ShapeError);
    expect(wrongA).toThrow(/scaleA has shape \[4, 3\]; expected tensor: one element, row: \[4, 1\], block: \[4, 2\]/);
    const wrongB = call({ scaleB: tensor(new Float32Array(6), { shape: [6] }) });
    expect(wrongB).toThrow(/scaleB has shape \[6\]; expected tensor: one element, row: \[1, 6\], block: \[1, 2\]/);
    // A per-column scale of b given as [N, 1] (what quantize(w, row) returns; torch wants [1, N]) is accepted as row.
    expect(call({ scaleB: tensor(new Float32Array(6).fill(1), { shape: [6, 1] }) })).not.toThrow();
  });

  it('a scaleB shape that fits both row and block needs recipeB', () => {
    // K = 200 -> two K blocks; N = 2 -> one N block: row [1, 2] and block [1, 2] coincide.
    const x = fp8([3, 200]);
    const y = fp8([200, 2]);
    const sb = tensor([[1, 2]]);
    expect(call({ scaleB: sb }, x, y)).toThrow(ShapeError);
    expect(call({ scaleB: sb }, x, y)).toThrow(/scaleB of shape \[1, 2\] fits recipes row and block; pass recipeB/);
    expect(call({ scaleB: sb, recipeB: 'row' }, x, y)).not.toThrow();
    expect(call({ scaleB: sb, recipeB: 'block' }, x, y)).not.toThrow();
  });

  it('an explicit recipe whose shape does not fit', () => {
    expect(call({ recipeA: 'row' })).toThrow(ShapeError);
    expect(call({ recipeA: 'row' })).toThrow(/scaleA for recipe 'row' must have shape \[4, 1\], got \[1\]/);
    expect(call({ scaleB: tensor([[1, 2, 3, 4, 5, 6]]), recipeB: 'block' })).toThrow(/scaleB for recipe 'block' must have shape \[1, 2\], got \[1, 6\]/);
    expect(call({ scaleA: tensor([[1], [1], [1], [1]]), recipeA: 'tensor' })).toThrow(/recipe 'tensor'.*one element, got \[4, 1\]/);
  });

  it('bias must be [N] in float32/float16/bfloat16', () => {
    expect(call({ bias: tensor([1, 2, 3, 4, 5]) })).toThrow(ShapeError);
    expect(call({ bias: tensor([1, 2, 3, 4, 5]) })).toThrow(/bias must have shape \[6\], got \[5\]/);
    expect(call({ bias: tensor([[1, 2, 3, 4, 5, 6]]) })).toThrow(/got \[1, 6\]/);
    expect(call({ bias: tensor([1, 2, 3, 4, 5, 6], { dtype: 'int32' }) })).toThrow(DTypeError);
    expect(call({ bias: tensor([1, 2, 3, 4, 5, 6], { dtype: 'float8_e4m3fn' }) })).toThrow(/bias.*float8_e4m3fn/);
  });

  it('scaleResult only with an FP8 output, and only one float32 value', () => {
    expect(call({ scaleResult: tensor(2), outDtype: 'bfloat16' })).toThrow(DTypeError);
    expect(call({ scaleResult: tensor(2), outDtype: 'bfloat16' })).toThrow(/outDtype bfloat16/);
    expect(call({ scaleResult: tensor(2) })).toThrow(DTypeError); // default output bfloat16
    expect(call({ scaleResult: tensor([2, 3]), outDtype: 'float8_e4m3fn' })).toThrow(ShapeError);
    expect(call({ scaleResult: tensor([2, 3]), outDtype: 'float8_e4m3fn' })).toThrow(/\[2\]/);
    expect(call({ scaleResult: tensor([2], { dtype: 'float16' }), outDtype: 'float8_e4m3fn' })).toThrow(DTypeError);
    expect(call({ scaleResult: tensor([2], { dtype: 'float16' }), outDtype: 'float8_e4m3fn' })).toThrow(/float16/);
    expect(call({ scaleResult: tensor(2), outDtype: 'float8_e4m3fn' })).not.toThrow();
  });

  it('outDtype must be float32, float16, bfloat16 or float8_e4m3fn', () => {
    for (const bad of ['int32', 'float8_e5m2', 'uint8']) {
      expect(call({ outDtype: bad as ScaledMmOutDtype })).toThrow(DTypeError);
      expect(call({ outDtype: bad as ScaledMmOutDtype })).toThrow(new RegExp(`got ${bad}`));
    }
  });
});

// ---- WebGPU -----------------------------------------------------------------------------------------------------

describe.skipIf(!gpu.available)(`scaledMm on WebGPU vs the reference ${gpu.skipReason}`, () => {
  it('2x3 @ 3x2 by hand (GEMM and GEMV paths)', async () => {
    const A = [
      [1, 2, -0.5],
      [0.25, -3, 4],
    ];
    const a = tensor(A, { dtype: 'float8_e4m3fn', device: 'webgpu' });
    const b = tensor(
      [
        [2, -1],
        [0.5, 1.5],
        [1, 8],
      ],
      { dtype: 'float8_e4m3fn', device: 'webgpu' },
    );
    const scaleA = tensor([[0.5], [2]], { device: 'webgpu' });
    const scaleB = tensor([[1, 0.25]], { device: 'webgpu' });
    expect(Array.from(await scaledMm(a, b, { scaleA, scaleB, outDtype: 'float32' }).toArray())).toEqual([1.25, -0.25, 6, 13.625]);
    const fp8 = scaledMm(a, b, {
      scaleA,
      scaleB,
      outDtype: 'float8_e4m3fn',
      bias: tensor([1, -1], { device: 'webgpu' }),
      scaleResult: tensor(0.5, { device: 'webgpu' }),
    });
    expect(Array.from(await fp8.toArray())).toEqual([1.125, -0.625, 3.5, 6.5]);
    // GEMV: K padded to 16 with zeros, weight stored [N, K].
    const pad = (rows: number[][]) => rows.map((r) => [...r, ...new Array(16 - r.length).fill(0)]);
    const a16 = tensor(pad(A), { dtype: 'float8_e4m3fn', device: 'webgpu' });
    const w16 = tensor(
      pad([
        [2, 0.5, 1],
        [-1, 1.5, 8],
      ]),
      { dtype: 'float8_e4m3fn', device: 'webgpu' },
    );
    resetKernels();
    const y = scaledMm(a16, w16.T, { scaleA, scaleB, outDtype: 'bfloat16', bias: tensor([1, -1], { dtype: 'bfloat16', device: 'webgpu' }) });
    expect(Array.from(await y.toArray())).toEqual([2.25, -1.25, 7, 12.625]);
    expect(matmulKernels()).toContain('gemv');
  });

  // Pipelines are specialised per dtype, recipe and (GEMV) M, and each costs the software adapter 1-2 s to compile:
  // the tests below cross the factors that interact and cycle the others.
  it('every recipe pair (tensor/row/block for a and b; tensor scales as [], [1], [1, 1]) on the GEMV', async () => {
    let seed = 100;
    for (const ra of RECIPES) {
      for (const rb of RECIPES) {
        await checkGpu({ m: 2, k: 272, n: 130, layout: 'wT', ra, rb, tensorShape: TENSOR_SHAPES[seed % 3], explicit: seed % 2 === 0, seed: seed++ });
      }
    }
  });

  it.each(RECIPES)('recipe %s for a with every recipe for b on the GEMM, b as w.T and as [K, N]', async (ra) => {
    let seed = 150 + 10 * RECIPES.indexOf(ra);
    for (const rb of RECIPES) {
      const tensorShape = TENSOR_SHAPES[seed % 3];
      await checkGpu({ m: 5, k: 300, n: 130, layout: 'wT', ra, rb, tensorShape, explicit: seed % 2 === 0, seed: seed++ });
      await checkGpu({ m: 17, k: 129, n: 7, layout: 'plain', ra, rb, tensorShape, explicit: seed % 2 === 0, seed: seed++ });
    }
  });

  it.each(FP8_PAIRS)('a in %s, b in %s: GEMV and GEMM', async (aDtype, bDtype) => {
    let seed = 200 + 10 * FP8_PAIRS.findIndex(([x, y]) => x === aDtype && y === bDtype);
    for (const [m, k, n, layout] of [
      [1, 4096, 130, 'wT'],
      [17, 300, 130, 'plain'],
      [4, 127, 7, 'wT'],
    ] as const) {
      await checkGpu({ m, k, n, layout, aDtype, bDtype, ra: 'block', rb: 'block', explicit: true, seed: seed++ });
    }
  });

  // Every M, K and N of the brief: all (M, K) pairs, both layouts, N cycling so that each (M, N) and (K, N) pair
  // occurs. N = 8 packs whole words of every output dtype; 1 and 7 take the f32-then-cast path of 16-bit/FP8
  // outputs, 130 that of FP8 only. Recipes and FP8 pair fixed per output dtype (crossed with each other above),
  // and passed explicitly: inferred from shapes they would degrade where M, N or K make them equivalent (row scales
  // of one row are one value), each a new pipeline to compile.
  const MS = [1, 2, 3, 4, 5, 17];
  const KS = [1, 16, 127, 128, 129, 300, 4096];
  const NS = [1, 7, 130, 8];
  const SWEEP: Record<ScaledMmOutDtype, [Fp8, Fp8, ScaleRecipe, ScaleRecipe]> = {
    float32: ['float8_e4m3fn', 'float8_e4m3fn', 'block', 'block'],
    float16: ['float8_e5m2', 'float8_e4m3fn', 'row', 'row'],
    bfloat16: ['float8_e4m3fn', 'float8_e5m2', 'tensor', 'block'],
    float8_e4m3fn: ['float8_e5m2', 'float8_e5m2', 'row', 'block'],
  };
  const sweeps = OUT_DTYPES.flatMap((outDtype) => (['wT', 'plain'] as const).map((layout) => [outDtype, layout] as const));
  it.each(sweeps)('shape sweep M x K x N -> %s, b %s', async (outDtype, layout) => {
    const [aDtype, bDtype, ra, rb] = SWEEP[outDtype];
    let seed = 1000 + 100 * OUT_DTYPES.indexOf(outDtype) + (layout === 'wT' ? 0 : 50);
    for (const [im, m] of MS.entries()) {
      for (const [ik, k] of KS.entries()) {
        const n = NS[(im + ik + (layout === 'wT' ? 0 : 1)) % NS.length];
        await checkGpu({ m, k, n, layout, aDtype, bDtype, ra, rb, outDtype, explicit: true, seed: seed++ });
      }
    }
  });

  it('GEMV and GEMM give the same results for the same inputs (M = 1..4), subgroup reduction on and off', async () => {
    const be = webgpuBackend()!;
    const subgroups = [...new Set([be.subgroupsEnabled, false])];
    const cases = [
      [1, 'tensor', 'tensor', 'float32'],
      [2, 'block', 'block', 'float32'],
      [3, 'row', 'block', 'bfloat16'],
      [4, 'block', 'row', 'float8_e4m3fn'],
    ] as const;
    try {
      for (const sg of subgroups) {
        be.subgroupsEnabled = sg;
        for (const [m, ra, rb, outDtype] of cases) {
          // K = 1024: 64 chunks of 16 per weight row, so all 64 invocations of a column hold partial sums.
          const spec: Spec = { m, k: 1024, n: 132, layout: 'wT', ra, rb, outDtype, bias: 'float32', seed: 300 + m };
          const viaGemv = await checkGpu(spec, 'gemv');
          // The same weight stored [K, N]: the [K, N] GEMV, and with it turned off the GEMM.
          const viaGemvKn = await checkGpu(spec, 'gemv-kn', (b) => b.contiguous());
          gemvKnTuning.enabled = false;
          const viaGemm = await checkGpu(spec, 'gemm', (b) => b.contiguous()).finally(() => {
            gemvKnTuning.enabled = true;
          });
          const want = reference(makeProblem(spec));
          // Each lies within the f32 window of the exact value, so within twice it (plus one output ulp) of the others.
          const ulp = outDtype === 'float32' ? 0 : outDtype === 'bfloat16' ? 2 ** -7 : 2 ** -3;
          for (let i = 0; i < viaGemv.length; i++) {
            const tol = 2 * gpuErr(1024) * want.mag[i] + ulp * Math.abs(want.v[i]);
            expect(Math.abs(viaGemv[i] - viaGemm[i]), `subgroups ${sg} m ${m} ${ra}/${rb} [${i}]`).toBeLessThanOrEqual(tol);
            expect(Math.abs(viaGemvKn[i] - viaGemm[i]), `[K, N] GEMV, m ${m} ${ra}/${rb} [${i}]`).toBeLessThanOrEqual(tol);
          }
        }
      }
    } finally {
      be.subgroupsEnabled = subgroups[0];
    }
  });

  it('[K, N] GEMV over whole 16-byte rows (N a multiple of 16: FP8 codes through the table), every recipe and output', async () => {
    // N = 16 / 144 / 256: one FP8 chunk per invocation; K = 1..300 crosses 128-blocks; M = 1..4.
    let seed = 950;
    const cases: [number, number, number, ScaleRecipe, ScaleRecipe, ScaledMmOutDtype][] = [
      [1, 300, 144, 'block', 'block', 'float32'],
      [2, 129, 16, 'tensor', 'row', 'bfloat16'],
      [3, 1, 256, 'row', 'block', 'float8_e4m3fn'],
      [4, 256, 144, 'block', 'tensor', 'float16'],
    ];
    for (const [m, k, n, ra, rb, outDtype] of cases) {
      for (const [aDtype, bDtype] of [FP8_PAIRS[0], FP8_PAIRS[1], FP8_PAIRS[3]]) {
        const scaleResult = outDtype === 'float8_e4m3fn' ? 0.5 : undefined;
        await checkGpu({ m, k, n, layout: 'plain', aDtype, bDtype, ra, rb, outDtype, bias: 'bfloat16', scaleResult, explicit: true, seed: seed++ }, 'gemv-kn');
      }
    }
  });

  it('GEMV on weight views: a K-narrowed weight (row tail), a row offset that keeps 16-byte alignment, and one that breaks it', async () => {
    // w [N, 160] narrowed to K = 150: rows stay 160 bytes apart (aligned) -> GEMV with a 6-element tail per row.
    for (const [ra, rb] of [
      ['tensor', 'tensor'],
      ['block', 'block'],
      ['row', 'row'],
    ] as const) {
      const spec: Spec = { m: 3, k: 150, n: 9, layout: 'wT', ra, rb, seed: 400 };
      const p = makeProblem(spec);
      const want = reference(p);
      const wide = new Uint8Array(9 * 160);
      for (let j = 0; j < 9; j++) wide.set(p.bCodes.subarray(j * 150, (j + 1) * 150), j * 160);
      resetKernels();
      const a = fromCodes(p.aCodes, [3, 150], 'float8_e4m3fn', 'webgpu');
      const w = fromCodes(wide, [9, 160], 'float8_e4m3fn', 'webgpu').narrow(1, 0, 150);
      const out = scaledMm(a, w.T, {
        scaleA: tensor(p.sa, { shape: p.saShape, device: 'webgpu' }),
        scaleB: tensor(p.sb, { shape: p.sbShape, device: 'webgpu' }),
        outDtype: 'float32',
      });
      expectWithin(`narrowed K ${ra}/${rb}`, await out.toArray(), want, 'float32', gpuErr(150));
      expect(matmulKernels(), 'GEMV used').toEqual(['gemv']);
    }
    // Rows 2.. of a [N + 2, K] weight: offset 2 * 32 bytes (aligned, GEMV) vs rows 1.. of a K = 24 weight (24-byte
    // rows: GEMM).
    for (const [k, start, path] of [
      [32, 2, 'gemv'],
      [24, 1, 'gemm'],
      [48, 1, 'gemv'],
    ] as const) {
      const spec: Spec = { m: 2, k, n: 5, layout: 'wT', ra: 'row', rb: 'block', outDtype: 'bfloat16', seed: 410 + k };
      const p = makeProblem(spec);
      const want = reference(p);
      const codes = new Uint8Array((5 + start) * k).fill(0x7f); // NaN rows before the view: reading them would show
      codes.set(p.bCodes, start * k);
      resetKernels();
      const a = fromCodes(p.aCodes, [2, k], 'float8_e4m3fn', 'webgpu');
      const w = fromCodes(codes, [5 + start, k], 'float8_e4m3fn', 'webgpu').narrow(0, start, 5);
      const out = scaledMm(a, w.T, {
        scaleA: tensor(p.sa, { shape: p.saShape, device: 'webgpu' }),
        scaleB: tensor(p.sb, { shape: p.sbShape, device: 'webgpu' }),
        outDtype: 'bfloat16',
      });
      expectWithin(`weight rows from ${start}, K ${k}`, await out.toArray(), want, 'bfloat16', gpuErr(k));
      expect(matmulKernels()).toEqual([path]);
    }
  });

  it('GEMV needs the weight view to start on a 16-byte boundary: columns 16.. of a [N, 48] weight do, columns 8.. do not', async () => {
    for (const [start, path] of [
      [16, 'gemv'],
      [8, 'gemm'],
      [0, 'gemv'],
    ] as const) {
      const spec: Spec = { m: 3, k: 32, n: 6, layout: 'wT', ra: 'row', rb: 'row', seed: 415 + start };
      const p = makeProblem(spec);
      const want = reference(p);
      const wide = new Uint8Array(6 * 48).fill(0x7f); // NaN outside the view
      for (let j = 0; j < 6; j++) wide.set(p.bCodes.subarray(j * 32, (j + 1) * 32), j * 48 + start);
      resetKernels();
      const a = fromCodes(p.aCodes, [3, 32], 'float8_e4m3fn', 'webgpu');
      const w = fromCodes(wide, [6, 48], 'float8_e4m3fn', 'webgpu').narrow(1, start, 32);
      const out = scaledMm(a, w.T, {
        scaleA: tensor(p.sa, { shape: p.saShape, device: 'webgpu' }),
        scaleB: tensor(p.sb, { shape: p.sbShape, device: 'webgpu' }),
        outDtype: 'float32',
      });
      expectWithin(`weight columns from ${start}`, await out.toArray(), want, 'float32', gpuErr(32));
      expect(matmulKernels(), `columns from ${start}`).toEqual([path]);
    }
  });

  it('strided a (a transposed [K, M] view) and scales/bias given as views', async () => {
    const spec: Spec = { m: 3, k: 160, n: 7, layout: 'wT', ra: 'row', rb: 'row', bias: 'float32', seed: 420 };
    const p = makeProblem(spec);
    const want = reference(p);
    const aT = new Uint8Array(160 * 3);
    for (let i = 0; i < 3; i++) for (let q = 0; q < 160; q++) aT[q * 3 + i] = p.aCodes[i * 160 + q];
    for (const device of ['cpu', 'webgpu'] as const) {
      const a = fromCodes(aT, [160, 3], 'float8_e4m3fn', device).T;
      const w = fromCodes(p.bCodes, [7, 160], 'float8_e4m3fn', device);
      // scaleA [3, 1] as a column of a [3, 2] tensor; scaleB [1, 7] as a slice with an offset; bias with an offset.
      const saWide = tensor(
        Array.from(p.sa, (s) => [s, -1]),
        { device },
      );
      const sbWide = tensor([[9, 9, 9, ...p.sb]], { device });
      const biasWide = tensor([5, ...p.biasValues!], { device });
      const out = scaledMm(a, w.T, { scaleA: saWide.narrow(1, 0, 1), scaleB: sbWide.narrow(1, 3, 7), bias: biasWide.narrow(0, 1, 7), outDtype: 'float32' });
      expectWithin(`${device} strided operands`, await out.toArray(), want, 'float32', device === 'cpu' ? CPU_ERR : gpuErr(160));
    }
  });

  it.each(['float32', 'bfloat16', 'float16'] as const)('%s bias with float32, bfloat16 and FP8 (+ scaleResult) outputs, GEMV and GEMM', async (bias) => {
    let seed = 500 + 20 * ['float32', 'bfloat16', 'float16'].indexOf(bias);
    for (const [outDtype, scaleResult] of [
      ['float32', undefined],
      ['bfloat16', undefined],
      ['float8_e4m3fn', 0.75],
      ['float8_e4m3fn', 3],
    ] as const) {
      for (const [m, k, layout] of [
        [2, 256, 'wT'],
        [17, 200, 'plain'],
        [4, 100, 'wT'],
      ] as const) {
        const spec: Spec = { m, k, n: 132, layout, ra: 'row', rb: 'block', bias, outDtype, scaleResult, seed: seed++ };
        await checkGpu(spec);
        await checkCpu(spec);
      }
    }
  });

  it('scaleResult with an FP8 output and no bias, tensor scales', async () => {
    for (const [m, k, n] of [
      [1, 64, 8],
      [6, 64, 8],
      [3, 300, 130],
    ] as const) {
      await checkGpu({ m, k, n, layout: 'wT', outDtype: 'float8_e4m3fn', scaleResult: 0.125, seed: 600 + m });
    }
  });

  it('odd N with 16-bit and FP8 outputs (f32 then cast) next to N that packs whole words', async () => {
    let seed = 700;
    for (const outDtype of ['float16', 'bfloat16', 'float8_e4m3fn'] as const) {
      for (const n of [1, 3, 7, 8, 130, 132]) {
        for (const [m, layout] of [
          [3, 'wT'],
          [9, 'plain'],
        ] as const) {
          await checkGpu({ m, k: 144, n, layout, ra: 'row', rb: 'row', outDtype, bias: 'bfloat16', seed: seed++ });
        }
      }
    }
  });

  it('M = 0, N = 0, K = 0 (K = 0: zeros, or the bias)', async () => {
    for (const outDtype of OUT_DTYPES) {
      for (const [m, k, n] of [
        [0, 32, 3],
        [3, 32, 0],
        [2, 0, 3],
        [5, 0, 7],
        [0, 0, 0],
      ]) {
        for (const layout of ['wT', 'plain'] as const) {
          const values = await checkGpu({ m, k, n, layout, ra: 'block', rb: 'block', outDtype, seed: 800 }, 'none');
          if (k === 0) expect(Array.from(values)).toEqual(new Array(m * n).fill(0));
          if (m * n > 0) await checkGpu({ m, k, n, layout, outDtype, bias: 'float32', seed: 801 }, 'none');
        }
      }
    }
  });

  it('a NaN code (0x7F) in a gives NaN in that output row only; one in b gives NaN in that column', async () => {
    for (const [m, k, n, layout] of [
      [3, 64, 9, 'wT'],
      [6, 70, 9, 'plain'],
      [2, 300, 130, 'plain'],
    ] as const) {
      for (const outDtype of ['float32', 'bfloat16', 'float8_e4m3fn'] as const) {
        const p = makeProblem({ m, k, n, layout, outDtype, seed: 900 });
        const row = 1;
        const col = 4;
        p.aCodes[row * k + 5] = 0x7f;
        for (const device of ['cpu', 'webgpu'] as const) {
          const a = fromCodes(p.aCodes, [m, k], 'float8_e4m3fn', device);
          const b = layout === 'wT' ? fromCodes(p.bCodes, [n, k], 'float8_e4m3fn', device).T : fromCodes(p.bCodes, [k, n], 'float8_e4m3fn', device);
          const opts = { scaleA: tensor([0.5], { device }), scaleB: tensor([0.25], { device }), outDtype };
          const out = await scaledMm(a, b, opts).toArray();
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++) expect(Number.isNaN(out[i * n + j]), `${device} ${outDtype} ${layout} [${i}, ${j}]`).toBe(i === row);
          }
          // NaN in b (e5m2 NaN code 0x7E) at column col.
          const bCodes = p.bCodes.slice();
          bCodes[layout === 'wT' ? col * k + 3 : 3 * n + col] = 0x7e;
          const a2 = fromCodes(
            p.aCodes.map((c) => (c === 0x7f ? 0 : c)),
            [m, k],
            'float8_e4m3fn',
            device,
          );
          const b2 = layout === 'wT' ? fromCodes(bCodes, [n, k], 'float8_e5m2', device).T : fromCodes(bCodes, [k, n], 'float8_e5m2', device);
          const out2 = await scaledMm(a2, b2, opts).toArray();
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++) expect(Number.isNaN(out2[i * n + j]), `${device} ${outDtype} b NaN [${i}, ${j}]`).toBe(j === col);
          }
        }
      }
    }
  });

  it('FP8 outputs saturate at +-448 (never NaN); 16-bit outputs overflow to +-Inf', async () => {
    for (const [m, k, n, layout] of [
      [2, 64, 8, 'wT'],
      [5, 64, 9, 'plain'],
      [3, 100, 130, 'wT'],
    ] as const) {
      // Codes up to 448 and scales 8x the usual: most outputs are far beyond 448.
      const spec: Spec = { m, k, n, layout, outDtype: 'float8_e4m3fn', maxAbs: 448, scaleGain: 8, seed: 950 + k };
      const got = await checkGpu(spec);
      const want = reference(makeProblem(spec));
      expect(want.v.some((v) => Math.abs(v) > 464)).toBe(true);
      for (let i = 0; i < got.length; i++) {
        expect(Number.isNaN(got[i])).toBe(false);
        if (Math.abs(want.v[i]) > 464) expect(got[i]).toBe(Math.sign(want.v[i]) * 448);
      }
      await checkCpu(spec);
    }
    // e5m2 57344 * 57344 * K overflows f16 (65504) and even the f32 product is finite: the cast gives Inf.
    for (const device of ['cpu', 'webgpu'] as const) {
      const big = (shape: number[]) => tensor(new Float32Array(shape[0] * shape[1]).fill(-57344), { shape, dtype: 'float8_e5m2', device });
      const out16 = await scaledMm(big([2, 16]), big([3, 16]).T, {
        scaleA: tensor(1, { device }),
        scaleB: tensor(1, { device }),
        outDtype: 'float16',
      }).toArray();
      expect(Array.from(out16)).toEqual(new Array(6).fill(Infinity));
      const out8 = await scaledMm(big([2, 16]), big([16, 3]), {
        scaleA: tensor(1, { device }),
        scaleB: tensor(-1, { device }),
        outDtype: 'float8_e4m3fn',
      }).toArray();
      expect(Array.from(out8)).toEqual(new Array(6).fill(-448));
    }
  });

  it('GEMM over several 64x64 tiles in both M and N (M = 130, N = 200)', async () => {
    await checkGpu({ m: 130, k: 300, n: 200, layout: 'wT', ra: 'block', rb: 'block', explicit: true, seed: 970 });
    await checkGpu({ m: 65, k: 64, n: 129, layout: 'plain', ra: 'row', rb: 'row', outDtype: 'bfloat16', seed: 971 });
  });

  it('e5m2 infinities: Inf * finite is +-Inf, Inf * 0 is NaN; an FP8 output saturates Inf to +-448', async () => {
    const k = 32;
    const n = 5;
    const p = makeProblem({ m: 2, k, n, layout: 'wT', aDtype: 'float8_e5m2', bDtype: 'float8_e5m2', seed: 980 });
    p.aCodes[0 * k + 3] = 0x7c; // +Inf in row 0
    p.aCodes[1 * k + 7] = 0xfc; // -Inf in row 1
    for (let j = 0; j < n; j++) {
      p.bCodes[j * k + 3] = j === 2 ? 0 : 0x3c + (j % 2 ? 0x80 : 0); // +-1, 0 in column 2
      p.bCodes[j * k + 7] = 0x3c; // +1
    }
    const want = reference(p);
    // Row 0: +Inf * (+-1) (NaN where the weight is 0); row 1: -Inf everywhere.
    expect(Array.from(want.v.slice(0, n))).toEqual([Infinity, -Infinity, NaN, -Infinity, Infinity]);
    for (const outDtype of ['float32', 'bfloat16', 'float8_e4m3fn'] as const) {
      p.spec.outDtype = outDtype;
      for (const device of ['cpu', 'webgpu'] as const) {
        for (const layout of ['wT', 'plain'] as const) {
          const override = layout === 'plain' ? (b: Tensor) => b.contiguous() : undefined;
          const r = await runOn(p, device, override);
          expectWithin(`${device} ${layout} -> ${outDtype}`, r.values, want, outDtype, gpuErr(k));
          if (outDtype === 'float8_e4m3fn') expect(Array.from(r.values.slice(n))).toEqual(new Array(n).fill(-448));
        }
      }
    }
  });

  it('operands on different devices throw DeviceMismatchError naming both devices', async () => {
    const a = tensor([[1, 2]], { dtype: 'float8_e4m3fn', device: 'webgpu' });
    const b = tensor([[1], [2]], { dtype: 'float8_e4m3fn' });
    const s = tensor([1]);
    expect(() => scaledMm(a, b, { scaleA: s, scaleB: s })).toThrow(DeviceMismatchError);
    expect(() => scaledMm(a, b, { scaleA: s, scaleB: s })).toThrow(/webgpu.*cpu/);
    const ag = await a.to('cpu');
    const bg = await b.to('webgpu');
    // Operands together, a scale elsewhere.
    expect(() => scaledMm(ag, b, { scaleA: s, scaleB: tensor([1], { device: 'webgpu' }) })).toThrow(DeviceMismatchError);
    expect(() => scaledMm(a, bg, { scaleA: tensor([1], { device: 'webgpu' }), scaleB: tensor([1], { device: 'webgpu' }), bias: tensor([0]) })).toThrow(
      DeviceMismatchError,
    );
  });
});
