// The float64 reference of SwiGLU: the oracle of its WebGPU kernel, and the unfused epilogue of the CPU matmul.
import type { Operand } from '../../runtime/backend.js';
import type { StorageArray } from '../../core/codecs.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function swigluReference(x: Operand<Handle>): Handle {
  const shape = x.view.shape;
  const two = shape[shape.length - 1];
  const half = two / 2;
  const xs = values(x);
  const rows = two === 0 ? 0 : xs.length / two;
  const out = new Float64Array(rows * half);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      const a = xs[r * two + i];
      const b = xs[r * two + half + i];
      out[r * half + i] = (a / (1 + Math.exp(-a))) * b;
    }
  }
  return store(out, x.dtype);
}
