// torch.cumsum, torch.sort and torch.topk. cumsum runs the scan kernel (a per-row workgroup scan); sort and topk run
// the row sort (a bitonic network whose pairs carry the index as tiebreak), which gives int32 indices, gather the
// values from them (so the values' gradient is a scatter of g back to those indices) and return the indices as int64
// (torch's).
import { isFloating, isFp8, type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { differentiable } from '../autograd/function.js';
import { runKernel } from '../kernels/registry.js';
import { cast } from './convert.js';
import { zeros } from './creation.js';
import { gather } from './index-select.js';
import { scatterAdd } from './scatter.js';
import { reshape, select } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';
import { castInt64, int64Cumsum, int64Words } from './int64.js';
import { add } from './elementwise.js';

export interface CumsumOptions {
  /** Cast x to this dtype before summing (torch's dtype=). */
  dtype?: DType;
}

/** The values and their int64 indices along the sorted dim (torch's (values, indices) namedtuple). */
export interface SortResult {
  values: Tensor;
  indices: Tensor;
}

export interface SortOptions {
  dim?: number;
  descending?: boolean;
  /** Accepted for torch's signature: the sort is always stable. */
  stable?: boolean;
}

export interface TopkOptions {
  dim?: number;
  /** The k largest (default) or the k smallest. */
  largest?: boolean;
  /** Accepted for torch's signature: the values always come sorted. */
  sorted?: boolean;
}

/** Runs fn on x viewed as 1-D when x is 0-d (torch treats a 0-d tensor as one element along dim 0 or -1). */
function asRow<T>(x: Tensor, dim: number, fn: (x: Tensor, d: number) => T, back: (r: T) => T): T {
  if (x.ndim > 0) return fn(x, normalizeDim(dim, x.ndim));
  normalizeDim(dim, 1);
  const row = reshape(x, [1]);
  try {
    return back(fn(row, 0));
  } finally {
    row.dispose();
  }
}

/** Owned reshape: r reshaped, r disposed. */
function reshapeOwned(r: Tensor, shape: readonly number[]): Tensor {
  const out = reshape(r, shape);
  r.dispose();
  return out;
}

/** Inclusive sums along d in the accumulator's dtype (float32 or int32), from the end when reverse. */
function scan(x: Tensor, d: number, reverse: boolean): Tensor {
  const backend = commonBackend('cumsum', x);
  const acc = isFloating(x.dtype) ? 'float32' : 'int32';
  return wrap(backend, runKernel('scan', backend, { x: x.operand(), dim: d, reverse }), acc, x.shape);
}

/**
 * torch.cumsum: running sums along dim. Floats accumulate in float32 on WebGPU (float64 on the CPU oracle), and a
 * float16 / bfloat16 result is rounded once at the end. int32 / uint8 / bool / int64 give int64 (as torch), wrapping
 * modulo 2^64; an integer `dtype` other than int64 gives int32 running sums wrapping past int32's range. `dtype`
 * casts x first, as torch's. FP8 is refused (torch has no cumsum for it either). Gradient: the reverse running sum
 * of g.
 */
export function cumsum(x: Tensor, dim: number, options: CumsumOptions = {}): Tensor {
  // torch's running sums of integers and bools are int64 unless a dtype is asked for.
  const target = options.dtype ?? (isFloating(x.dtype) ? x.dtype : 'int64');
  if (isFp8(target)) throw new DTypeError(`cumsum does not take ${target} (tensor ${x.describe()}); cast with .to('float32') first`);
  const input = target === x.dtype ? x : cast(x, target);
  if (target === 'int64') {
    try {
      return int64Cumsum(input, dim);
    } finally {
      if (input !== x) input.dispose();
    }
  }
  try {
    const outDtype: DType = isFloating(target) ? target : 'int32';
    return asRow(
      input,
      dim,
      (t, d) =>
        differentiable(
          'cumsum',
          [t],
          () => {
            const r = scan(t, d, false);
            if (r.dtype === outDtype) return r;
            const c = cast(r, outDtype);
            r.dispose();
            return c;
          },
          (g) => [scan(g, d, true)],
        ),
      (r) => reshapeOwned(r, []),
    );
  } finally {
    if (input !== x) input.dispose();
  }
}

/** x's values at `indices` along d (a gather), with the gradient scattered back to those indices. */
function valuesAt(x: Tensor, d: number, indices: Tensor): Tensor {
  const shape = x.shape;
  return differentiable(
    'sort',
    [x, indices],
    () => gather(x, d, indices),
    (g, saved) => {
      const idx = saved.inputs[1] as Tensor;
      const z = zeros(shape, { dtype: 'float32', device: g.device });
      const gx = scatterAdd(z, d, idx, g);
      z.dispose();
      return [gx, undefined];
    },
    { inputs: [1] },
  );
}

/** The int32 indices of the first outCount sorted positions of x along d (the row sort kernel). */
function sortIndex(x: Tensor, d: number, descending: boolean, outCount: number): Tensor {
  const backend = commonBackend('sort', x);
  const shape = [...x.shape];
  shape[d] = outCount;
  return wrap(backend, runKernel('sort', backend, { x: x.operand(), dim: d, descending, outCount }), 'int32', shape);
}

/**
 * sortIndex of int64 x: two stable sorts of 32-bit keys, by the low word (as unsigned) and then by the high word
 * (signed), order the (high, low) pairs as int64 values, equal values keeping their order (an LSD radix sort).
 */
function sortInt64Index(x: Tensor, d: number, descending: boolean, outCount: number): Tensor {
  const temps: Tensor[] = [];
  const t = (v: Tensor) => (temps.push(v), v);
  try {
    const words = t(int64Words(x));
    // Adding -2^31 (wrapping in int32) flips the sign bit: int32 order of the result is the low word's unsigned order.
    const low = t(add(t(select(words, -1, 0)), -2147483648));
    const byLow = t(sortIndex(low, d, descending, x.shape[d]));
    const high = t(gather(t(select(words, -1, 1)), d, byLow));
    return gather(byLow, d, t(sortIndex(high, d, descending, outCount)));
  } finally {
    for (const v of temps) v.dispose();
  }
}

/** The first outCount sorted positions of x along d: their indices and values. */
function sortRows(x: Tensor, d: number, descending: boolean, outCount: number): SortResult {
  // The sort kernel and the gather (and its backward scatter) take int32 indices; torch returns int64 ones.
  const index = x.dtype === 'int64' ? sortInt64Index(x, d, descending, outCount) : sortIndex(x, d, descending, outCount);
  try {
    return { values: valuesAt(x, d, index), indices: castInt64(index, 'int64') };
  } finally {
    index.dispose();
  }
}

const scalarResult = (r: SortResult): SortResult => ({ values: reshapeOwned(r.values, []), indices: reshapeOwned(r.indices, []) });

/**
 * torch.sort: x sorted along dim (default -1), with the int64 indices of each value. Torch's order:
 * NaN is above every number (last ascending, first descending), -0 equals +0, and equal values keep their order
 * (the sort is always stable, whatever `stable` says). Every dtype; gradients flow to x through the values.
 */
export function sort(x: Tensor, options: SortOptions = {}): SortResult {
  const descending = options.descending ?? false;
  return asRow(x, options.dim ?? -1, (t, d) => sortRows(t, d, descending, t.shape[d]), scalarResult);
}

/**
 * torch.topk: the k largest (or, largest false, smallest) values along dim (default -1) and their int64 indices,
 * sorted, NaN counting as the largest value and ties keeping the lower index first. k past the dim's size is a
 * ShapeError. Gradients flow to x through the values.
 */
export function topk(x: Tensor, k: number, options: TopkOptions = {}): SortResult {
  const largest = options.largest ?? true;
  const dim = options.dim ?? -1;
  return asRow(
    x,
    dim,
    (t, d) => {
      const size = t.shape[d];
      if (!Number.isInteger(k) || k < 0 || k > size)
        throw new ShapeError(`topk: k (${k}) is out of range for dim ${dim} of size ${size} (tensor ${x.describe()})`);
      return sortRows(t, d, largest, k);
    },
    scalarResult,
  );
}
