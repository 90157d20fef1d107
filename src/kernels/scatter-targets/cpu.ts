// The reference of scatter's targets: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import { int64WordView } from '../../core/dtype.js';
import { IndexError } from '../../core/errors.js';
import type { Operand } from '../../runtime/backend.js';
import { viewIndices } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** See ScatterTargetsArgs: an index outside [0, dimSize) throws an IndexError naming it (an int64 one exactly). */
export function scatterTargetsReference(index: Operand<Handle>, dim: number, dimSize: number, xStrides: readonly number[]): Handle {
  const shape = index.view.shape;
  const wide = index.dtype === 'int64';
  const at = viewIndices(wide ? { ...int64WordView(index.view), shape } : index.view);
  const out = new Int32Array(at.length);
  const coord = new Array<number>(shape.length).fill(0);
  for (let e = 0; e < at.length; e++) {
    const lo = index.handle[at[e]];
    const id = wide ? Number((BigInt(index.handle[at[e] + 1]) << 32n) | BigInt(lo >>> 0)) : lo;
    if (!(id >= 0 && id < dimSize)) {
      const shown = wide ? (BigInt(index.handle[at[e] + 1]) << 32n) | BigInt(lo >>> 0) : id;
      throw new IndexError(`scatter: index ${shown} is out of range for dim ${dim} of size ${dimSize}`, 'scatter', Number(shown));
    }
    let flat = 0;
    for (let d = 0; d < shape.length; d++) flat += (d === dim ? id : coord[d]) * xStrides[d];
    out[e] = flat;
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}
