import type { Backend, ReduceOp } from '../runtime/backend.js';
import { runKernel } from '../kernels/registry.js';
import { isFloating, isFp8, type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { reshape } from './shape-ops.js';
import { where } from './elementwise.js';
import { commonBackend, wrap } from './util.js';
import { castInt64, int64ReduceDim, refuseInt64 } from './int64.js';
import { differentiable, notDifferentiable } from '../autograd/function.js';

export interface ReduceOptions {
  /** Keep the reduced dim with size 1 (torch's keepdim). */
  keepdim?: boolean;
}

function outDtypeOf(op: ReduceOp, x: Tensor): DType {
  if (op === 'argmax' || op === 'argmin') return 'int64';
  if (isFp8(x.dtype) && op !== 'max' && op !== 'min') {
    throw new DTypeError(`${op} does not take ${x.dtype} (tensor ${x.describe()}); cast with .to('float32') first`);
  }
  if (op === 'mean' && !isFloating(x.dtype)) {
    throw new DTypeError(`mean needs a floating tensor, got ${x.describe()} (torch.mean likewise); cast with .to('float32')`);
  }
  // torch sums and multiplies integers and bools into int64.
  if ((op === 'sum' || op === 'prod') && !isFloating(x.dtype)) return 'int64';
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
  if (x.shape[d] === 0 && op !== 'sum' && op !== 'mean' && op !== 'prod') {
    throw new ShapeError(`${op} over dim ${d} of size 0 (tensor ${x.describe()}) has no identity`);
  }
  const outShape = x.shape.filter((_, i) => i !== d);
  const out = reduceToDtype(op, x, d, outDtype, outShape, backend);
  if (!options.keepdim) return out;
  return reshapeOwned(
    out,
    x.shape.map((s, i) => (i === d ? 1 : s)),
  );
}

/** One dim reduced: integer sums exact into int64, other int64 reductions on the int64 row kernels, indices widened. */
function reduceToDtype(op: ReduceOp, x: Tensor, d: number, outDtype: DType, outShape: number[], backend: Backend): Tensor {
  if (op === 'sum' && outDtype === 'int64') return wrap(backend, runKernel('sumInt', backend, { x: x.operand(), dim: d }), 'int64', outShape);
  if (x.dtype === 'int64') {
    if (op === 'mean') refuseInt64(op, x);
    return int64ReduceDim(x, d, op as Exclude<ReduceOp, 'mean' | 'sum'>);
  }
  if (op === 'prod' && outDtype === 'int64') {
    const wide = castInt64(x, 'int64');
    try {
      return int64ReduceDim(wide, d, 'prod');
    } finally {
      wide.dispose();
    }
  }
  if (op === 'argmax' || op === 'argmin') {
    // The reduce kernels give int32 indices; torch's are int64.
    const index = wrap(backend, runKernel('reduce', backend, { op, x: x.operand(), dim: d, outDtype: 'int32' }), 'int32', outShape);
    try {
      return castInt64(index, 'int64');
    } finally {
      index.dispose();
    }
  }
  return wrap(backend, runKernel('reduce', backend, { op, x: x.operand(), dim: d, outDtype }), outDtype, outShape);
}

/** Reshape that disposes the input (used on intermediate results only). */
function reshapeOwned(t: Tensor, shape: number[]): Tensor {
  const r = reshape(t, shape);
  t.dispose();
  return r;
}

/** One dim, several (torch's dim tuple; [] means all, as in torch) or all (undefined). */
export type Dims = number | readonly number[] | undefined;

/**
 * Reduces several dims one after another, the highest first with keepdim (so the lower indices stay put), then drops
 * them unless keepdim; a sum, mean, max, min or prod over a set of dims is the same set of values folded.
 */
function reduceDims(op: ReduceOp, x: Tensor, dims: readonly number[], options: ReduceOptions = {}): Tensor {
  if (dims.length === 0) return reduce(op, x, undefined, options);
  const sorted = [...new Set(dims.map((d) => normalizeDim(d, Math.max(x.ndim, 1))))].sort((p, q) => q - p);
  if (sorted.length !== dims.length) throw new ShapeError(`${op}: dim ${JSON.stringify(dims)} names a dim twice (tensor ${x.describe()})`);
  if (x.ndim === 0) return reduce(op, x, undefined, options);
  let r = x;
  for (const d of sorted) {
    const next = reduce(op, r, d, { keepdim: true });
    if (r !== x) r.dispose();
    r = next;
  }
  if (options.keepdim) return r;
  return reshapeOwned(
    r,
    x.shape.filter((_, i) => !sorted.includes(i)),
  );
}

function reduceAny(op: ReduceOp, x: Tensor, dim: Dims, options?: ReduceOptions): Tensor {
  return typeof dim === 'object' ? reduceDims(op, x, dim, options) : reduce(op, x, dim, options);
}

/** The dims a reduction folds, normalized (all of them for undefined or []). */
export function reducedDims(x: Tensor, dim: Dims): number[] {
  if (dim === undefined || x.ndim === 0 || (typeof dim === 'object' && dim.length === 0)) return x.shape.map((_, i) => i);
  return (typeof dim === 'number' ? [dim] : dim).map((d) => normalizeDim(d, x.ndim));
}

/** The gradient of a sum or mean: g broadcast back over the reduced dims, scaled by 1/count for a mean. */
function reduceRule(op: 'sum' | 'mean', x: Tensor, dim: Dims) {
  return (g: Tensor) => {
    const dims = reducedDims(x, dim);
    const kept = x.shape.map((s, i) => (dims.includes(i) ? 1 : s));
    const back = g.reshape(kept).expand(x.shape);
    if (op === 'sum') return [back];
    const count = dims.reduce((n, d) => n * x.shape[d], 1);
    return [back.div(count)];
  };
}

/** The gradient of a product: out / x where the slice has no zero; at a slice's only zero, the product of the rest. */
function prodRule(x: Tensor, dim: Dims, g: Tensor): Tensor {
  const dims = reducedDims(x, dim);
  const kept = x.shape.map((s, i) => (dims.includes(i) ? 1 : s));
  const isZero = x.eq(0);
  const others = prod(where(isZero, 1, x), dims, { keepdim: true });
  const zeros = sum(isZero, dims, { keepdim: true });
  const atZero = where(zeros.eq(1), others, 0);
  const elsewhere = where(zeros.eq(0), others.div(x), 0);
  return g
    .reshape(kept)
    .expand(x.shape)
    .mul(where(isZero, atZero, elsewhere));
}

export const sum = (x: Tensor, dim?: Dims, o?: ReduceOptions) => differentiable('sum', [x], () => reduceAny('sum', x, dim, o), reduceRule('sum', x, dim));
export const mean = (x: Tensor, dim?: Dims, o?: ReduceOptions) => differentiable('mean', [x], () => reduceAny('mean', x, dim, o), reduceRule('mean', x, dim));
export const max = (x: Tensor, dim?: Dims, o?: ReduceOptions) => notDifferentiable('max', [x], () => reduceAny('max', x, dim, o));
export const min = (x: Tensor, dim?: Dims, o?: ReduceOptions) => notDifferentiable('min', [x], () => reduceAny('min', x, dim, o));
/** torch.amax: the maximum over one dim, several or all (max here gives values only, so the two are one op). */
export const amax = (x: Tensor, dim?: Dims, o?: ReduceOptions) => max(x, dim, o);
/** torch.amin: the minimum over one dim, several or all. */
export const amin = (x: Tensor, dim?: Dims, o?: ReduceOptions) => min(x, dim, o);
/**
 * The product over one dim or all (torch.prod; several dims are taken too, as by sum). Integer and bool tensors
 * multiply into int64, wrapping modulo 2^64 (as torch).
 */
export function prod(x: Tensor, dim?: Dims, o?: ReduceOptions): Tensor {
  if (!isFloating(x.dtype)) return reduceAny('prod', x, dim, o);
  return differentiable(
    'prod',
    [x],
    () => reduceAny('prod', x, dim, o),
    (g, s) => [prodRule(s.inputs[0] as Tensor, dim, g)],
    { inputs: [0] },
  );
}
/** The index of the first maximum along dim (or of all elements flattened), int64 as torch.argmax; NaN counts as the maximum. */
export const argmax = (x: Tensor, dim?: number, o?: ReduceOptions) => reduce('argmax', x, dim, o);
/** The index of the first minimum along dim (or of all elements flattened), int64 as torch.argmin. */
export const argmin = (x: Tensor, dim?: number, o?: ReduceOptions) => reduce('argmin', x, dim, o);
