// Cross-backend checking: the same input on CPU (the oracle) and WebGPU, one op on both, values compared with a
// tolerance that fits the output dtype. Random inputs come from a seeded generator on the host, so every run and
// both devices see identical values.
import { expect } from 'vitest';
import { Generator, tensor, toBigInt64Array, type DType, type Tensor } from '../../src/index.js';

/** The values of t as numbers: toArray(), or for int64 each value as a number (exact up to 2^53). */
export async function readNumbers(t: Tensor): Promise<Float32Array | Int32Array | Uint8Array | Float64Array> {
  return t.dtype === 'int64' ? Float64Array.from(await toBigInt64Array(t), Number) : t.toArray();
}

export interface Tolerance {
  /** Absolute slack, for results near zero. */
  readonly atol: number;
  /** Relative slack: |got - want| <= atol + rtol * |want|. */
  readonly rtol: number;
}

/** Bit-exact comparison: same float32 bit pattern (so -0 != +0), NaN matches any NaN of the same sign. */
export const BITS = 'bits' as const;
export type Check = Tolerance | typeof BITS;

export const EXACT: Tolerance = { atol: 0, rtol: 0 };

/**
 * How far apart the backends may be, by output dtype and op kind:
 * - simple: +, -, *, /, max/min, neg/abs/relu (one f32 rounding on the GPU; division may be 2.5 ulp).
 * - transcendental: exp/log/tanh/erf-based ops (GPU builtins are a few ulp; erfc/tanh formulas amplify it).
 * - accumulate: sums and dot products in f32 on the GPU vs f64 on the CPU (give atol per row length).
 * Narrow float outputs are dominated by their own rounding: 1 ulp is 2^-10 (f16) or 2^-7 (bf16) relative.
 */
export function tolerance(dtype: DType, kind: 'simple' | 'transcendental' | 'accumulate' = 'simple'): Tolerance {
  switch (dtype) {
    case 'float32':
      if (kind === 'simple') return { atol: 1e-30, rtol: 1e-5 };
      if (kind === 'transcendental') return { atol: 1e-6, rtol: 1e-5 };
      return { atol: 1e-5, rtol: 1e-5 };
    case 'float16':
      return { atol: kind === 'simple' ? 1e-7 : 1e-5, rtol: kind === 'accumulate' ? 2e-3 : 1e-3 };
    case 'bfloat16':
      return { atol: kind === 'simple' ? 1e-30 : 1e-5, rtol: kind === 'accumulate' ? 1.6e-2 : 8e-3 };
    default:
      return EXACT; // integers, bool and fp8 codes come out exact
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0];
}

/** Why got[i] is not an acceptable stand-in for want[i], or undefined when it is. */
export function mismatchAt(got: number, want: number, check: Check): string | undefined {
  if (check === BITS) {
    if (Number.isNaN(want) || Number.isNaN(got)) {
      return Number.isNaN(want) && Number.isNaN(got) && bitsOf(got) >>> 31 === bitsOf(want) >>> 31 ? undefined : 'NaN mismatch';
    }
    return bitsOf(got) === bitsOf(want) ? undefined : `bits 0x${bitsOf(got).toString(16)} != 0x${bitsOf(want).toString(16)}`;
  }
  if (Number.isNaN(want)) return Number.isNaN(got) ? undefined : 'expected NaN';
  if (Number.isNaN(got)) return 'unexpected NaN';
  if (!Number.isFinite(want) || !Number.isFinite(got)) return got === want ? undefined : 'infinity mismatch';
  const allowed = check.atol + check.rtol * Math.abs(want);
  const diff = Math.abs(got - want);
  return diff <= allowed ? undefined : `|diff| ${diff.toExponential(3)} > ${allowed.toExponential(3)}`;
}

/** Every index where got and want disagree (beyond check), with a reason. */
export function mismatches(got: ArrayLike<number>, want: ArrayLike<number>, check: Check): { index: number; got: number; want: number; why: string }[] {
  const out: { index: number; got: number; want: number; why: string }[] = [];
  if (got.length !== want.length) return [{ index: -1, got: got.length, want: want.length, why: 'length differs' }];
  for (let i = 0; i < want.length; i++) {
    const why = mismatchAt(got[i], want[i], check);
    if (why) out.push({ index: i, got: got[i], want: want[i], why });
  }
  return out;
}

/** Fails the test (listing the first few bad elements) unless got matches want within check. */
export function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, check: Check, label = ''): void {
  const bad = mismatches(got, want, check);
  if (bad.length === 0) return;
  const tol = check === BITS ? 'bit-exact' : `atol ${check.atol}, rtol ${check.rtol}`;
  const first = bad
    .slice(0, 6)
    .map((m) => `  [${m.index}] got ${m.got} want ${m.want} (${m.why})`)
    .join('\n');
  expect.fail(`${label ? label + ': ' : ''}${bad.length} of ${want.length} elements differ (${tol})\n${first}`);
}

/** Uploads CPU tensors to WebGPU (the copies are contiguous: apply views inside the op under test). */
export function toGpu(xs: readonly Tensor[]): Promise<Tensor[]> {
  return Promise.all(xs.map((x) => x.to('webgpu')));
}

export interface BothResult {
  cpu: Float32Array | Int32Array | Uint8Array | Float64Array;
  gpu: Float32Array | Int32Array | Uint8Array | Float64Array;
  shape: readonly number[];
  dtype: DType;
}

/**
 * Runs fn on the CPU inputs and on WebGPU copies of them, checks both results have one shape and dtype, and compares
 * the values. Every tensor made here is disposed. fn may build views (transpose, slice, ...) before the op: the
 * GPU copies are contiguous, so views taken inside fn are the way to test strided kernels.
 */
export async function checkBoth(inputs: readonly Tensor[], fn: (...xs: Tensor[]) => Tensor, check: Check, label = ''): Promise<BothResult> {
  const onGpu = await toGpu(inputs);
  const rc = fn(...inputs);
  let rg: Tensor | undefined;
  try {
    rg = fn(...onGpu);
    expect(rc.device, label).toBe('cpu');
    expect(rg.device, label).toBe('webgpu');
    expect(rg.shape, label).toEqual(rc.shape);
    expect(rg.dtype, label).toBe(rc.dtype);
    if (rc.dtype === 'int64') {
      // int64 compares exactly, as BigInts (past 2^53 a number would hide a difference).
      const [cpu, gpu] = await Promise.all([toBigInt64Array(rc), toBigInt64Array(rg)]);
      expect(Array.from(gpu, String), label).toEqual(Array.from(cpu, String));
      return { cpu: Float64Array.from(cpu, Number), gpu: Float64Array.from(gpu, Number), shape: rc.shape, dtype: rc.dtype };
    }
    const [cpu, gpu] = await Promise.all([rc.toArray(), rg.toArray()]);
    expectClose(gpu, cpu, check, label);
    return { cpu, gpu, shape: rc.shape, dtype: rc.dtype };
  } finally {
    rc.dispose();
    rg?.dispose();
    onGpu.forEach((t) => t.dispose());
  }
}

// ---- seeded inputs -------------------------------------------------------------------------------------------------

export type Distribution =
  /** Standard normal times `scale`. */
  | 'normal'
  /** |normal| + 0.05: the domain of log / sqrt / rsqrt. */
  | 'positive'
  /** Multiples of 0.25 in [-4, 4] (never 0): exact in every float dtype, with many ties for comparisons. */
  | 'coarse';

/** A fresh seed per call (deterministic per file), so no two inputs in a file share values. */
let seedCounter = 1000;
export function nextSeed(): number {
  return seedCounter++;
}

/** Values for `n` elements of dtype: floats by `dist`; int32 in [-60, 60], uint8 in [1, 255], bool random; never all zero. */
export function randomValues(n: number, dtype: DType, dist: Distribution = 'normal', seed = nextSeed(), scale = 1): number[] {
  const g = new Generator(seed);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    switch (dtype) {
      case 'int32':
        out[i] = (g.nextU32() % 121) - 60 || 7;
        break;
      case 'uint8':
        out[i] = (g.nextU32() % 255) + 1;
        break;
      case 'bool':
        out[i] = g.nextU32() & 1;
        break;
      default:
        if (dist === 'coarse') out[i] = ((g.nextU32() % 32) - 16) / 4 || 0.5;
        else if (dist === 'positive') out[i] = Math.abs(g.normal() * scale) + 0.05;
        else out[i] = g.normal() * scale || 0.125;
    }
  }
  return out;
}

/** A CPU tensor of the given shape and dtype with fresh seeded values (see randomValues). */
export function randomTensor(shape: readonly number[], dtype: DType = 'float32', dist: Distribution = 'normal', scale = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return tensor(randomValues(n, dtype, dist, nextSeed(), scale), { shape, dtype, device: 'cpu', saturate: true });
}

export const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;
export const INT_DTYPES = ['int32', 'uint8', 'bool'] as const;

/** PSNR in dB of a against b for signals in [-1, 1] (peak-to-peak 2); Infinity when equal. */
export function psnr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`psnr: ${a.length} values against ${b.length}`);
  let se = 0;
  for (let i = 0; i < a.length; i++) se += (a[i] - b[i]) ** 2;
  return se === 0 ? Infinity : 10 * Math.log10(4 / (se / a.length));
}

/** A float32 tensor's values, the tensor disposed. */
export async function takeValues(t: Tensor): Promise<Float32Array> {
  const v = Float32Array.from(await t.toArray());
  t.dispose();
  return v;
}

/** The largest |got - want| over the largest |want|: an error relative to the tensor's scale (logits, features). */
export function maxRelativeToScale(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let scale = 0;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / scale);
  return worst;
}
