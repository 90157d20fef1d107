// The float64 reference of reduce along one dim (sum, mean, max, min, prod, argmax, argmin): the oracle of its WebGPU
// kernels.
import type { StorageArray } from '../../core/codecs.js';
import { isFloating, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import type { Operand, ReduceOp } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import { REDUCE_F64 } from '../../runtime/cpu/scalar-ops.js';

type Handle = StorageArray;

/**
 * The loop every reduce reference shares: x (row-major, shape) viewed as [outer, size, inner] around dim; fn gets each
 * output's index o and the first element, count and stride of the row it folds.
 */
export function forEachRow(shape: readonly number[], dim: number, fn: (o: number, base: number, size: number, stride: number) => void): void {
  const outer = numel(shape.slice(0, dim));
  const size = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) fn(o * inner + i, o * size * inner + i, size, inner);
  }
}

/** The number of outputs of a reduction of dim. */
export function rowCount(shape: readonly number[], dim: number): number {
  return numel(shape.slice(0, dim)) * numel(shape.slice(dim + 1));
}

export function reduceReference(op: ReduceOp, x: Operand<Handle>, dim: number, outDtype: DType): Handle {
  const v = values(x);
  const out = new Float64Array(rowCount(x.view.shape, dim));
  forEachRow(x.view.shape, dim, (o, base, size, inner) => {
    const r = op === 'argmax' || op === 'argmin' ? argExtreme(v, base, size, inner, op === 'argmax') : fold(op, v, base, size, inner, !isFloating(outDtype));
    // Integer sums wrap like int32 arithmetic (as binary add does and the GPU accumulates), not saturate.
    out[o] = op === 'sum' && !isFloating(outDtype) ? r | 0 : r;
  });
  return store(out, outDtype);
}

function fold(op: Exclude<ReduceOp, 'argmax' | 'argmin'>, v: Float64Array, base: number, size: number, stride: number, integerOut = false): number {
  const r = REDUCE_F64[op];
  let acc = r.init;
  // An integer product wraps like int32 multiplication (as the GPU's), which a float64 product would not.
  if (op === 'prod' && integerOut) {
    for (let j = 0; j < size; j++) acc = Math.imul(acc, v[base + j * stride]);
    return acc;
  }
  for (let j = 0; j < size; j++) acc = r.step(acc, v[base + j * stride]);
  return op === 'mean' ? acc / size : acc;
}

/** Index of the first extreme value; a NaN counts as the extreme (torch.argmax). */
function argExtreme(v: Float64Array, base: number, size: number, stride: number, max: boolean): number {
  let best = 0;
  let bestV = v[base];
  for (let j = 1; j < size; j++) {
    if (Number.isNaN(bestV)) break;
    const x = v[base + j * stride];
    if (Number.isNaN(x) || (max ? x > bestV : x < bestV)) {
      best = j;
      bestV = x;
    }
  }
  return best;
}
