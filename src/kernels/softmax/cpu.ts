// The float64 reference of softmax / log-softmax along a dim: the oracle its WebGPU kernels are tested against.
import type { StorageArray } from '../../core/codecs.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

export function softmaxReference(x: Operand<StorageArray>, dim: number, log: boolean): StorageArray {
  const shape = x.view.shape;
  const d = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const v = values(x);
  const rows = v.length / Math.max(d, 1);
  for (let r = 0; r < rows; r++) {
    const base = Math.floor(r / inner) * d * inner + (r % inner);
    let m = -Infinity;
    for (let j = 0; j < d; j++) m = Number.isNaN(m) ? m : Number.isNaN(v[base + j * inner]) ? NaN : Math.max(m, v[base + j * inner]);
    let s = 0;
    for (let j = 0; j < d; j++) s += m === -Infinity ? NaN : Math.exp(v[base + j * inner] - m);
    for (let j = 0; j < d; j++) {
      const i = base + j * inner;
      v[i] = log ? v[i] - m - Math.log(s) : Math.exp(v[i] - m) / s;
    }
  }
  return store(v, x.dtype);
}
