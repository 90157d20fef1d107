// The reference of cumsum (the oracle of scan.wgsl): float64 running sums rounded once to float32, or int32 sums
// that wrap like int32 arithmetic (as the GPU's i32 adds).
import type { StorageArray } from '../../core/codecs.js';
import { isFloating } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function scanReference(x: Operand<Handle>, dim: number, reverse: boolean): Handle {
  const shape = x.view.shape;
  const v = values(x);
  const size = shape[dim] ?? 1;
  const inner = numel(shape.slice(dim + 1));
  const outer = numel(shape.slice(0, dim));
  const float = isFloating(x.dtype);
  const out = new Float64Array(v.length);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let acc = 0;
      for (let k = 0; k < size; k++) {
        const j = reverse ? size - 1 - k : k;
        const at = (o * size + j) * inner + i;
        acc = float ? acc + v[at] : (acc + v[at]) | 0;
        out[at] = acc;
      }
    }
  }
  return store(out, float ? 'float32' : 'int32');
}
