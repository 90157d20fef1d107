// The float64 reference of quantizeBlocks: the oracle its WebGPU kernel is tested against.
import { allocStorage, castCode, type StorageArray } from '../../core/codecs.js';
import type { Operand, QuantizeBlocks } from '../../runtime/backend.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

export function quantizeBlocksReference(x: Operand<StorageArray>, q: QuantizeBlocks): [StorageArray, StorageArray] {
  const [rows, cols] = x.view.shape;
  const kb = Math.ceil(cols / q.blockCols);
  const v = values(x);
  const amax = new Float64Array(Math.ceil(rows / q.blockRows) * kb);
  for (let i = 0; i < v.length; i++) {
    const b = Math.floor(Math.floor(i / cols) / q.blockRows) * kb + Math.floor((i % cols) / q.blockCols);
    const a = Math.abs(v[i]);
    amax[b] = Number.isNaN(a) || Number.isNaN(amax[b]) ? NaN : Math.max(amax[b], a);
  }
  // Rounded to float32 at each step, as the op chain max -> maximum -> div stores it.
  const scale = amax.map((a) => Math.fround(Math.fround(Number.isNaN(a) ? a : Math.max(a, Math.fround(1e-12))) / q.fmax));
  const data = allocStorage(q.dtype, v.length);
  for (let i = 0; i < v.length; i++) {
    const b = Math.floor(Math.floor(i / cols) / q.blockRows) * kb + Math.floor((i % cols) / q.blockCols);
    data[i] = castCode(Math.fround(v[i] / scale[b]), q.dtype, true);
  }
  return [data, Float32Array.from(scale)];
}
