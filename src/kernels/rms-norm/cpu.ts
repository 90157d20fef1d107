// The float64 reference of rmsNorm: the oracle its WebGPU kernel is tested against.
import type { Operand } from '../../runtime/backend.js';
import { decodeOne, encodeOne, type StorageArray } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** x rounded to dtype's precision (HF casts the normalized value back to x's dtype before the weight). */
function roundTo(dtype: DType, x: number): number {
  return dtype === 'float32' ? Math.fround(x) : decodeOne(dtype, encodeOne(dtype, x));
}

export function rmsNormReference(x: Operand<Handle>, weight: Operand<Handle> | undefined, eps: number): Handle {
  const shape = x.view.shape;
  const d = shape[shape.length - 1];
  const xs = values(x);
  const w = weight ? values(weight) : undefined;
  const out = new Float64Array(xs.length);
  const rows = d === 0 ? 0 : xs.length / d;
  for (let r = 0; r < rows; r++) {
    const base = r * d;
    let sumSq = 0;
    for (let i = 0; i < d; i++) sumSq += xs[base + i] * xs[base + i];
    const inv = 1 / Math.sqrt(sumSq / d + eps);
    for (let i = 0; i < d; i++) {
      const n = roundTo(x.dtype, xs[base + i] * inv);
      out[base + i] = w ? w[i] * n : n;
    }
  }
  return store(out, x.dtype);
}
