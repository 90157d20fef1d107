// torch.scatter / scatter_add, composed on the deterministic scatter-add kernel (indexAdd): each index element's
// target becomes one flat position (its own coordinates, with `dim` replaced by the index value), and indexAdd sums
// src into those positions in index order, the same bits on every run.
import { isFloating } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { contiguousStrides, formatShape, normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { runKernel } from '../kernels/registry.js';
import { differentiable } from '../autograd/function.js';
import { arange, ones } from './creation.js';
import { cast } from './convert.js';
import { add, gt, mul, where } from './elementwise.js';
import { gather } from './index-select.js';
import { contiguous, narrow, reshape } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';

function checkScatter(op: string, x: Tensor, dim: number, index: Tensor, src: Tensor): number {
  if (index.dtype !== 'int32') throw new DTypeError(`${op}: index must be int32, got ${index.describe()}`);
  if (!isFloating(x.dtype)) throw new DTypeError(`${op}: x must be a float tensor here (scatter sums in float32), got ${x.describe()}`);
  if (index.ndim !== x.ndim || src.ndim !== x.ndim)
    throw new ShapeError(`${op}: x ${x.describe()}, index ${index.describe()} and src ${src.describe()} must have one rank`);
  const d = normalizeDim(dim, Math.max(x.ndim, 1));
  index.shape.forEach((s, i) => {
    if (s > src.shape[i] || (i !== d && s > x.shape[i]))
      throw new ShapeError(`${op}: index ${formatShape(index.shape)} is larger than src ${formatShape(src.shape)} or x ${formatShape(x.shape)} in dim ${i}`);
  });
  return d;
}

/** The flat position in a contiguous x of each index element: its coordinates with dim replaced by its value. */
function flatTargets(x: Tensor, d: number, index: Tensor): Tensor {
  const strides = contiguousStrides(x.shape);
  let flat = mul(index, strides[d]);
  for (let i = 0; i < index.ndim; i++) {
    if (i === d || index.shape[i] === 1) continue;
    const coord = arange(0, index.shape[i] * strides[i], strides[i], { device: x.device });
    const view = reshape(
      coord,
      index.shape.map((s, j) => (j === i ? s : 1)),
    );
    const next = add(flat, view);
    for (const t of [flat, coord, view]) t.dispose();
    flat = next;
  }
  const r = reshape(flat, [index.numel]);
  flat.dispose();
  return r;
}

/** src (its leading index-shaped block) summed into zeros of x's size at the index targets, float32, x's shape. */
function scatterSum(x: Tensor, d: number, index: Tensor, src: Tensor): Tensor {
  const backend = commonBackend('scatter', x, index, src);
  let block = src;
  for (let i = 0; i < src.ndim; i++) if (block.shape[i] !== index.shape[i]) block = narrow(block, i, 0, index.shape[i]);
  const flatSrc = contiguous(block);
  const source = reshape(flatSrc, [index.numel]);
  const targets = flatTargets(x, d, index);
  try {
    const handle = runKernel('indexAdd', backend, { source: source.operand(), dim: 0, index: targets.operand(), size: x.numel });
    return wrap(backend, handle, 'float32', x.shape);
  } finally {
    for (const t of [flatSrc, source, targets]) t.dispose();
    if (block !== src) block.dispose();
  }
}

function inDtype(t: Tensor, like: Tensor): Tensor {
  if (t.dtype === like.dtype) return t;
  const r = cast(t, like.dtype);
  t.dispose();
  return r;
}

/**
 * torch.scatter_add: x plus src summed into the positions index names along dim (out[i][index[i][j]] += src[i][j]
 * for dim 1). Repeated indices add up in index order, deterministically. Float tensors (sums in float32).
 */
export function scatterAdd(x: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  const d = checkScatter('scatterAdd', x, dim, index, src);
  return differentiable(
    'scatterAdd',
    [x, index, src],
    () => {
      const s = scatterSum(x, d, index, src);
      const r = add(x, s);
      s.dispose();
      return inDtype(r, x);
    },
    // A view of g (the sweep disposes g itself once the rule returns).
    (g, saved) => [g.detach(), undefined, saved.needs[2] ? gather(g, d, saved.inputs[1] as Tensor) : undefined],
    { inputs: [1] },
  );
}

/**
 * torch.scatter: x with src written at the positions index names along dim. Where an index repeats, torch leaves
 * the value unspecified; here it is the sum of the values written there.
 */
export function scatter(x: Tensor, dim: number, index: Tensor, src: Tensor | number): Tensor {
  const values = typeof src === 'number' ? ones(index.shape, { dtype: x.dtype, device: x.device }) : src;
  const d = checkScatter('scatter', x, dim, index, values);
  try {
    return differentiable(
      'scatter',
      [x, index, values],
      () => {
        const one = ones(index.shape, { dtype: 'float32', device: x.device });
        const hits = scatterSum(x, d, index, one);
        const written = gt(hits, 0);
        const sums = scatterSum(x, d, index, values);
        const scaled = typeof src === 'number' ? mul(written, src) : sums;
        const r = where(written, scaled, x);
        for (const t of [one, hits, written, sums, scaled]) if (!t.isDisposed) t.dispose();
        return inDtype(r, x);
      },
      (g, saved) => {
        const idx = saved.inputs[1] as Tensor;
        const one = ones(idx.shape, { dtype: 'float32', device: g.device });
        const hits = scatterSum(g, d, idx, one);
        const gx = where(gt(hits, 0), 0, g);
        return [gx, undefined, saved.needs[2] ? gather(g, d, idx) : undefined];
      },
      { inputs: [1] },
    );
  } finally {
    if (values !== src) values.dispose();
  }
}
