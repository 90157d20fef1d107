// The float64 reference of indexAdd: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import { encodeInt64 } from '../../core/codecs.js';
import { int64WordView } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { ints, store, values, viewIndices } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/**
 * float32 out (source's shape with `size` at dim) = zeros, then out[.., index[i], ..] += source[.., i, ..] for i
 * in increasing order; int64 out for an int64 source. An index outside [0, size) throws.
 */
export function indexAddReference(source: Operand<Handle>, dim: number, index: Operand<Handle>, size: number): Handle {
  const shape = source.view.shape;
  const t = shape[dim];
  const outer = numel(shape.slice(0, dim));
  const inner = numel(shape.slice(dim + 1));
  const ids = ints(index);
  ids.forEach((id, i) => {
    if (id < 0 || id >= size) throw new ShapeError(`indexAdd: index ${id} at position ${i} is out of range for dim ${dim} of size ${size}`);
  });
  if (source.dtype === 'int64') return indexAddInt64(source, dim, ids, size);
  const src = values(source);
  const out = new Float64Array(outer * size * inner);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < t; i++) {
      const from = (o * t + i) * inner;
      const to = (o * size + ids[i]) * inner;
      for (let c = 0; c < inner; c++) out[to + c] += src[from + c];
    }
  }
  return store(out, 'float32');
}

/** The int64 form: exact BigInt sums, wrapping modulo 2^64 as torch's int64 scatter_add. */
function indexAddInt64(source: Operand<Handle>, dim: number, ids: number[], size: number): Handle {
  const shape = source.view.shape;
  const t = shape[dim];
  const outer = numel(shape.slice(0, dim));
  const inner = numel(shape.slice(dim + 1));
  const at = viewIndices({ ...int64WordView(source.view), shape });
  const h = source.handle;
  const out = new Array<bigint>(outer * size * inner).fill(0n);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < t; i++) {
      const from = (o * t + i) * inner;
      const to = (o * size + ids[i]) * inner;
      for (let c = 0; c < inner; c++) {
        const w = at[from + c];
        out[to + c] = BigInt.asIntN(64, out[to + c] + ((BigInt(h[w + 1]) << 32n) | BigInt(h[w] >>> 0)));
      }
    }
  }
  return encodeInt64(out);
}
