// The reference of sumInt: float64 sums of the integers (exact while partial sums stay under 2^53), checked against
// int32's range.
import type { StorageArray } from '../../core/codecs.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

export function sumIntReference(x: Operand<StorageArray>, dim: number): StorageArray {
  const shape = x.view.shape;
  const outer = numel(shape.slice(0, dim));
  const size = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const v = values(x);
  const out = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let acc = 0;
      for (let j = 0; j < size; j++) acc += v[(o * size + j) * inner + i];
      if (acc < -2147483648 || acc > 2147483647)
        throw new RangeError(
          `sum: an int32 sum is ${acc}, outside int32's range (torch returns int64; tensorgpu has no int64 yet): cast to float32 first or sum smaller parts`,
        );
      out[o * inner + i] = acc;
    }
  }
  return store(out, 'int32');
}
