// The reference of gather (storage codes copied as they are): the oracle its WebGPU kernel is tested against.
import { allocStorage, type StorageArray } from '../../core/codecs.js';
import { IndexError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import type { Operand } from '../../runtime/backend.js';
import { viewIndices } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function gatherReference(x: Operand<Handle>, dim: number, index: Operand<Handle>): Handle {
  const shape = index.view.shape;
  const out = allocStorage(x.dtype, numel(shape));
  const ids = viewIndices(index.view);
  // The x view with index's shape and dim's stride zeroed: every coordinate but dim's.
  const base = viewIndices({ shape, strides: x.view.strides.map((s, d) => (d === dim ? 0 : s)), offset: x.view.offset });
  for (let i = 0; i < out.length; i++) {
    const id = index.handle[ids[i]];
    if (id < 0 || id >= x.view.shape[dim])
      throw new IndexError(`gather: index ${id} is out of range for dim ${dim} of size ${x.view.shape[dim]}`, 'gather', id);
    out[i] = x.handle[base[i] + id * x.view.strides[dim]];
  }
  return out;
}
