import { DTypeError, ShapeError } from '../core/errors.js';
import { runKernel } from '../kernels/registry.js';
import { formatShape, normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { contiguous } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';
import { indexInt32 } from './int64.js';
import { int64WordView } from '../core/dtype.js';
import { differentiable, notDifferentiable } from '../autograd/function.js';

/**
 * torch.index_select: the entries of x at `index` (1-D int32) along dim, for every dtype (FP8 included: codes are
 * copied, not converted). An out-of-range or negative index raises an IndexError: at once on the CPU, at the next
 * read back or synchronize() on WebGPU (the device error flag; never a silent zero).
 */
export function indexSelect(x: Tensor, dim: number, index: Tensor): Tensor {
  const narrow = index.dtype === 'int64' && index.ndim <= 1 ? indexInt32(index) : undefined;
  if (narrow) {
    try {
      return indexSelect(x, dim, narrow);
    } finally {
      narrow.dispose();
    }
  }
  const backend = commonBackend('indexSelect', x, index);
  if (index.dtype !== 'int32') throw new DTypeError(`indexSelect: index must be int32, got ${index.describe()} (int64 is taken too)`);
  if (index.ndim > 1) throw new ShapeError(`indexSelect: index must be 0-D or 1-D, got ${index.describe()}`);
  if (x.ndim === 0) throw new ShapeError('indexSelect: cannot index a 0-d tensor');
  const d = normalizeDim(dim, x.ndim);
  const forward = () => {
    const idx = contiguous(index);
    try {
      const shape = [...x.shape];
      shape[d] = idx.numel;
      // int64 rows move as the int32 pairs of their words (a trailing dim of 2 the selection never touches).
      if (x.dtype === 'int64') {
        const words = { handle: x.operand().handle, dtype: 'int32' as const, view: int64WordView(x.layout) };
        return wrap(backend, runKernel('indexSelect', backend, { x: words, dim: d, index: idx.operand() }), 'int64', shape);
      }
      return wrap(backend, runKernel('indexSelect', backend, { x: x.operand(), dim: d, index: idx.operand() }), x.dtype, shape);
    } finally {
      idx.dispose();
    }
  };
  return differentiable('indexSelect', [x, index], forward, (g, s) => [indexSelectRule(g, s.inputs[1] as Tensor, x.shape, d)], { inputs: [1] });
}

/**
 * d indexSelect (an embedding's backward): the rows of g summed into the rows they were taken from (repeated
 * indices add up, in index order), by the backend's scatter-add: (size + T) * row work, float32, for any dim.
 */
function indexSelectRule(g: Tensor, index: Tensor, shape: readonly number[], d: number): Tensor {
  const backend = commonBackend('indexSelect backward', g, index);
  const idx = index.reshape(-1);
  try {
    return wrap(backend, runKernel('indexAdd', backend, { source: g.operand(), dim: d, index: idx.operand(), size: shape[d] }), 'float32', shape);
  } finally {
    idx.dispose();
  }
}

/**
 * torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (likewise for any dim), every dtype. index is
 * int32 with x's rank and sizes no larger than x's off `dim`; the result has the index's shape. Out-of-range indices
 * raise an IndexError (on WebGPU at the next read back, as indexSelect).
 */
export function gather(x: Tensor, dim: number, index: Tensor): Tensor {
  const narrow = indexInt32(index);
  if (narrow) {
    try {
      return gather(x, dim, narrow);
    } finally {
      narrow.dispose();
    }
  }
  const backend = commonBackend('gather', x, index);
  if (index.dtype !== 'int32') throw new DTypeError(`gather: index must be int32, got ${index.describe()} (int64 is taken too)`);
  if (index.ndim !== x.ndim) throw new ShapeError(`gather: index ${index.describe()} must have the rank of x ${x.describe()}`);
  const d = normalizeDim(dim, Math.max(x.ndim, 1));
  if (x.ndim === 0) throw new ShapeError('gather: cannot gather from a 0-d tensor');
  index.shape.forEach((s, i) => {
    if (i !== d && s > x.shape[i]) throw new ShapeError(`gather: index ${formatShape(index.shape)} is larger than x ${formatShape(x.shape)} in dim ${i}`);
  });
  if (x.dtype === 'int64') {
    // int64 elements move as the int32 pairs of their words: each index read twice (a stride-0 trailing dim of 2).
    const words = { handle: x.operand().handle, dtype: 'int32' as const, view: int64WordView(x.layout) };
    const pair = index.operand();
    const pairs = { ...pair, view: { shape: [...pair.view.shape, 2], strides: [...pair.view.strides, 0], offset: pair.view.offset } };
    return wrap(backend, runKernel('gather', backend, { x: words, dim: d, index: pairs }), 'int64', index.shape);
  }
  return notDifferentiable('gather', [x, index], () =>
    wrap(backend, runKernel('gather', backend, { x: x.operand(), dim: d, index: index.operand() }), x.dtype, index.shape),
  );
}

/**
 * torch.nn.functional.embedding: the rows of weight [V, D] at int32 ids of any shape, as [...ids.shape, D].
 * Negative or out-of-range ids raise an IndexError (on WebGPU at the next read back). Gradients flow to weight
 * (repeated ids add up).
 */
export function embedding(input: Tensor, weight: Tensor): Tensor {
  if (input.dtype !== 'int32' && input.dtype !== 'int64') throw new DTypeError(`embedding: ids must be int32, got ${input.describe()} (int64 is taken too)`);
  if (weight.ndim !== 2) throw new ShapeError(`embedding: weight must be 2-D [V, D], got ${weight.describe()}`);
  const flat = input.reshape(-1);
  const rows = indexSelect(weight, 0, flat);
  flat.dispose();
  if (input.ndim === 1) return rows;
  const out = rows.reshape([...input.shape, weight.shape[1]]);
  rows.dispose();
  return out;
}
