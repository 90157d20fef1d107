// The reference of indexSelect (storage codes copied as they are): the oracle its WebGPU kernel is tested against.
import { allocStorage, type StorageArray } from '../../core/codecs.js';
import { IndexError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { viewIndices } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function indexSelectReference(x: Operand<Handle>, dim: number, index: Operand<Handle>): Handle {
  const shape = x.view.shape;
  const ids = Array.from(viewIndices(index.view), (i) => index.handle[i]);
  const bad = ids.find((i) => i < 0 || i >= shape[dim]);
  if (bad !== undefined) throw new IndexError(`indexSelect: index ${bad} is out of range for dim ${dim} of size ${shape[dim]}`, 'indexSelect', bad);
  const outer = numel(shape.slice(0, dim));
  const inner = numel(shape.slice(dim + 1));
  // Storage offsets of x with `dim` dropped (outer x inner): a selected slice is that plus id * stride, so a lookup
  // into an embedding table walks only the rows it reads, not the whole table.
  const base = viewIndices({ shape: shape.filter((_, d) => d !== dim), strides: x.view.strides.filter((_, d) => d !== dim), offset: x.view.offset });
  const step = x.view.strides[dim];
  const out = allocStorage(x.dtype, outer * ids.length * inner);
  let at = 0;
  for (let o = 0; o < outer; o++) {
    for (const id of ids) {
      for (let j = 0; j < inner; j++) out[at++] = x.handle[base[o * inner + j] + id * step];
    }
  }
  return out;
}
