// The float64 references of the packed 4-bit weight kernels: the oracles of int4-dequant.wgsl, int4-quantize.wgsl and
// of matmul's int4 GEMV and GEMM.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand } from '../../runtime/backend.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export interface Int4Storage<H> {
  readonly words: Operand<H>;
  readonly scale: Operand<H>;
  readonly zero: Operand<H>;
  readonly perm?: Operand<H>;
}

/** The weight [rows, k] in activation-column order, float64. */
export function int4DequantValues(w: Int4Storage<Handle>, rows: number, k: number, group: number): Float64Array {
  const words = values(w.words);
  const scale = values(w.scale);
  const zero = values(w.zero);
  const perm = w.perm ? values(w.perm) : undefined;
  const groups = k / group;
  const kw = k / 8;
  const out = new Float64Array(rows * k);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < k; j++) {
      const q = (words[r * kw + (j >> 3)] >>> (4 * (j & 7))) & 15;
      const g = r * groups + Math.floor(j / group);
      out[r * k + (perm ? perm[j] : j)] = (q - zero[g]) * scale[g];
    }
  }
  return out;
}

/** Round half to even, as WGSL's round(). */
function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** [words int32, scale float32, zero int32] of x [rows, k] in groups of `group`, computed in float32 as the kernel does. */
export function int4QuantizeReference(x: Operand<Handle>, rows: number, k: number, group: number): [Int32Array, Float32Array, Int32Array] {
  const v = values(x);
  const groups = k / group;
  const words = new Int32Array((rows * k) / 8);
  const scale = new Float32Array(rows * groups);
  const zero = new Int32Array(rows * groups);
  const f = Math.fround;
  for (let r = 0; r < rows; r++) {
    for (let g = 0; g < groups; g++) {
      const base = r * k + g * group;
      let lo = 0;
      let hi = 0;
      for (let i = 0; i < group; i++) {
        lo = Math.min(lo, v[base + i]);
        hi = Math.max(hi, v[base + i]);
      }
      let s = f(f(hi - lo) / 15);
      if (s === 0) s = 1;
      const z = Math.min(15, Math.max(0, roundEven(f(-lo / s))));
      for (let i = 0; i < group; i++) {
        const q = Math.min(15, Math.max(0, roundEven(f(v[base + i] / s)) + z));
        words[(base + i) >> 3] |= q << (4 * ((base + i) & 7));
      }
      scale[r * groups + g] = s;
      zero[r * groups + g] = z;
    }
  }
  return [words, scale, zero];
}
