// The FP8 KV-cache row (`kvDtype: 'float8_e4m3fn'`, `--kv-dtype fp8`): each cached (position, kv head) row of keys
// or values is headDim e4m3 codes, zero padding to a whole 32-bit word, then the row's scale as float32 bits (4
// bytes), so a cache is a float8_e4m3fn tensor [rows, kvHeads, kvRowWidth(headDim)].
//
// The scale is per position and kv head, dynamic, and a power of two: 2^e with e the least integer such that the
// row's largest finite |x| <= 448 * 2^e (e clamped to [-126, 127]; a row with no finite nonzero value gets 1). The
// codes are e4m3(x / 2^e), round to nearest even, no saturation needed (Inf and NaN become the NaN code, as torch's
// cast). Why this scheme:
// - exact to define: dividing by a power of two is exact, so the CPU reference and the GPU kernel give the same
//   codes for the same x, and dequantization (code * 2^e) is one exact multiply, folded into attention's dot
//   product and its p * v;
// - cheap: the attention-inputs kernel already holds a whole head row in one workgroup (for the q/k RMSNorm), so
//   the row's max is one more workgroup reduction, and every row is written once, never rescaled (a per-page scale
//   would change as a page fills, and a static per-tensor scale, vLLM's default of 1.0, loses the small values of
//   rows far below 448 to e4m3's subnormals);
// - self-contained: the scale lives in the row, so anything that copies rows (a paged pool's copy-on-write, the
//   prefix cache, captured steps) carries it along with no second tensor.
// The price is 4 bytes per head row beside headDim codes: (D + 4) / 2D of bf16, 0.516 at D = 128, 0.508 at D = 256.
import { f32ToFp8Bits, fp8BitsToF32 } from './codecs.js';
import type { DType } from './dtype.js';
import { DTYPE_INFO } from './dtype.js';

/** The KV-cache dtype stored as scaled rows. */
export const FP8_KV_DTYPE = 'float8_e4m3fn';

/** Whether a KV cache of this dtype holds scaled FP8 rows (the layout above). */
export function isScaledKv(dtype: DType): boolean {
  return dtype === FP8_KV_DTYPE;
}

/** Codes before the scale word: headDim rounded up to a whole word. */
export function kvScaleAt(headDim: number): number {
  return Math.ceil(headDim / 4) * 4;
}

/** Elements of a cached head row: headDim, or for FP8 the codes, their padding and the 4-byte scale. */
export function kvRowWidth(dtype: DType, headDim: number): number {
  return isScaledKv(dtype) ? kvScaleAt(headDim) + 4 : headDim;
}

/** A KV cache's shape [rows, kvHeads, kvRowWidth] for this dtype. */
export function kvCacheShape(rows: number, kvHeads: number, headDim: number, dtype: DType): number[] {
  return [rows, kvHeads, kvRowWidth(dtype, headDim)];
}

/** Bytes of one cached (position, kv head) row of keys or of values. */
export function kvRowBytes(dtype: DType, headDim: number): number {
  return kvRowWidth(dtype, headDim) * DTYPE_INFO[dtype].itemBytes;
}

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** e of the row scale 2^e for a row whose largest finite |x| is amax (see above). */
export function kvScaleExponent(amax: number): number {
  scratch[0] = amax;
  const a = scratchBits[0]!;
  if (a === 0 || !Number.isFinite(scratch[0]!)) return 0;
  // amax = m 2^E, m in [1, 2): m <= 1.75 fits 448 = 1.75 2^8 at e = E - 8, else e = E - 7.
  const e = (a >>> 23) - 127 - ((a & 0x7fffff) <= 0x600000 ? 8 : 7);
  return Math.max(-126, Math.min(127, e));
}

/** Writes row x (headDim values) as codes and scale at `at` of a code array (CPU reference of the GPU write). */
export function encodeKvRow(x: ArrayLike<number>, headDim: number, out: Uint8Array, at: number): void {
  let amax = 0;
  for (let c = 0; c < headDim; c++) {
    const a = Math.abs(Math.fround(x[c]!));
    if (a <= 3.4028234663852886e38 && a > amax) amax = a;
  }
  const e = kvScaleExponent(amax);
  const inv = 2 ** -e;
  const scaleAt = kvScaleAt(headDim);
  for (let c = 0; c < scaleAt; c++) out[at + c] = c < headDim ? f32ToFp8Bits(Math.fround(x[c]!) * inv, 'e4m3fn') : 0;
  scratch[0] = 2 ** e;
  const bits = scratchBits[0]!;
  for (let b = 0; b < 4; b++) out[at + scaleAt + b] = (bits >>> (8 * b)) & 0xff;
}

/** The scale 2^e stored in the row at `at`. */
export function kvRowScale(codes: ArrayLike<number>, headDim: number, at: number): number {
  const s = at + kvScaleAt(headDim);
  scratchBits[0] = (codes[s]! | (codes[s + 1]! << 8) | (codes[s + 2]! << 16) | (codes[s + 3]! << 24)) >>> 0;
  return scratch[0]!;
}

/** Row at `at` dequantized into out[o .. o + headDim): code * scale. */
export function decodeKvRow(codes: ArrayLike<number>, headDim: number, at: number, out: Float32Array | Float64Array, o: number): void {
  const scale = kvRowScale(codes, headDim, at);
  for (let c = 0; c < headDim; c++) out[o + c] = fp8BitsToF32(codes[at + c]!, 'e4m3fn') * scale;
}
