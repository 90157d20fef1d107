import type { ReduceOp } from '../runtime/backend.js';
import { runKernel } from '../kernels/registry.js';
import { isFloating, isFp8, type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { reshape } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';
import { differentiable, notDifferentiable } from '../autograd/function.js';

export interface ReduceOptions {
  /** Keep the reduced dim with size 1 (torch's keepdim). */
  keepdim?: boolean;
}

function outDtypeOf(op: ReduceOp, x: Tensor): DType {
  if (op === 'argmax' || op === 'argmin') return 'int32'; // torch returns int64; int32 is our widest integer
  if (isFp8(x.dtype) && op !== 'max' && op !== 'min') {
    throw new DTypeError(`${op} does not take ${x.dtype} (tensor ${x.describe()}); cast with .to('float32') first`);
  }
  if (op === 'mean' && !isFloating(x.dtype)) {
    throw new DTypeError(`mean needs a floating tensor, got ${x.describe()} (torch.mean likewise); cast with .to('float32')`);
  }
  if (op === 'sum' && !isFloating(x.dtype)) return 'int32';
  return x.dtype;
}

/** Reduces one dim (or, with dim undefined, all elements to a 0-d tensor). */
function reduce(op: ReduceOp, x: Tensor, dim: number | undefined, options: ReduceOptions = {}): Tensor {
  const backend = commonBackend(op, x);
  const outDtype = outDtypeOf(op, x);
  if (dim === undefined || x.ndim === 0) {
    const flat = reshape(x, [x.numel]);
    try {
      if (dim !== undefined) normalizeDim(dim, 0);
      const r = reduce(op, flat, 0, {});
      if (x.ndim === 0) return reshapeOwned(r, []);
      return options.keepdim
        ? reshapeOwned(
            r,
            x.shape.map(() => 1),
          )
        : r;
    } finally {
      flat.dispose();
    }
  }
  const d = normalizeDim(dim, x.ndim);
  if (x.shape[d] === 0 && op !== 'sum' && op !== 'mean') {
    throw new ShapeError(`${op} over dim ${d} of size 0 (tensor ${x.describe()}) has no identity`);
  }
  const outShape = x.shape.filter((_, i) => i !== d);
  const out = wrap(backend, runKernel('reduce', backend, { op, x: x.operand(), dim: d, outDtype }), outDtype, outShape);
  if (!options.keepdim) return out;
  return reshapeOwned(
    out,
    x.shape.map((s, i) => (i === d ? 1 : s)),
  );
}

/** Reshape that disposes the input (used on intermediate results only). */
function reshapeOwned(t: Tensor, shape: number[]): Tensor {
  const r = reshape(t, shape);
  t.dispose();
  return r;
}

/** The gradient of a sum or mean: g broadcast back over the reduced dim (or all), scaled by 1/count for a mean. */
function reduceRule(op: 'sum' | 'mean', x: Tensor, dim: number | undefined) {
  return (g: Tensor) => {
    const kept = dim === undefined || x.ndim === 0 ? x.shape.map(() => 1) : x.shape.map((s, i) => (i === normalizeDim(dim, x.ndim) ? 1 : s));
    const back = g.reshape(kept).expand(x.shape);
    if (op === 'sum') return [back];
    const count = dim === undefined || x.ndim === 0 ? x.numel : x.shape[normalizeDim(dim, x.ndim)];
    return [back.div(count)];
  };
}

export const sum = (x: Tensor, dim?: number, o?: ReduceOptions) => differentiable('sum', [x], () => reduce('sum', x, dim, o), reduceRule('sum', x, dim));
export const mean = (x: Tensor, dim?: number, o?: ReduceOptions) => differentiable('mean', [x], () => reduce('mean', x, dim, o), reduceRule('mean', x, dim));
export const max = (x: Tensor, dim?: number, o?: ReduceOptions) => notDifferentiable('max', [x], () => reduce('max', x, dim, o));
export const min = (x: Tensor, dim?: number, o?: ReduceOptions) => notDifferentiable('min', [x], () => reduce('min', x, dim, o));
export const argmax = (x: Tensor, dim?: number, o?: ReduceOptions) => reduce('argmax', x, dim, o);
export const argmin = (x: Tensor, dim?: number, o?: ReduceOptions) => reduce('argmin', x, dim, o);
