// The reference of the row sort (the oracle of sort.wgsl): a stable sort of each row by torch's order (NaN above
// every number, -0 equal to +0), ascending or descending, giving the first outCount indices as int32.
import type { StorageArray } from '../../core/codecs.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** a before b in torch's ascending order (NaN last); equal values (and two NaNs) compare 0. */
function ascending(a: number, b: number): number {
  const an = Number.isNaN(a);
  const bn = Number.isNaN(b);
  if (an || bn) return an === bn ? 0 : an ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

export function sortReference(x: Operand<Handle>, dim: number, descending: boolean, outCount: number): Handle {
  const shape = x.view.shape;
  const v = values(x);
  const n = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const outer = numel(shape.slice(0, dim));
  const out = new Int32Array(outer * outCount * inner);
  const order = new Array<number>(n);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const at = (j: number) => v[(o * n + j) * inner + i];
      for (let j = 0; j < n; j++) order[j] = j;
      // Array.prototype.sort is stable: ties keep the lower index first.
      order.sort((a, b) => (descending ? ascending(at(b), at(a)) : ascending(at(a), at(b))));
      for (let j = 0; j < outCount; j++) out[(o * outCount + j) * inner + i] = order[j];
    }
  }
  return out;
}
