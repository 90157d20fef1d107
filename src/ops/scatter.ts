// torch.scatter / scatter_add, composed on the deterministic scatter-add kernel (indexAdd): each index element's
// target becomes one flat position (its own coordinates, with `dim` replaced by the index value; kernels/scatter-
// targets, which checks the value's range before any multiply), and indexAdd sums src into those positions in index
// order, the same bits on every run. int64 data sums exactly in two 32-bit words (indexAdd's int64 form).
import { isFloating } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { contiguousStrides, formatShape, normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { runKernel } from '../kernels/registry.js';
import { differentiable } from '../autograd/function.js';
import { ones } from './creation.js';
import { cast } from './convert.js';
import { add, gt, mul, where } from './elementwise.js';
import { gather } from './index-select.js';
import { contiguous, narrow, reshape } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';

function checkScatter(op: string, x: Tensor, dim: number, index: Tensor, src: Tensor, srcIsNumber = false): number {
  if (index.dtype !== 'int64' && index.dtype !== 'int32') throw new DTypeError(`${op}: index must be int64 (or int32), got ${index.describe()}`);
  if (x.dtype === 'int64') {
    if (!srcIsNumber && src.dtype !== 'int64') throw new DTypeError(`${op}: src ${src.describe()} must be int64 like x ${x.describe()}`);
  } else if (!isFloating(x.dtype)) {
    throw new DTypeError(`${op}: x must be a float tensor (scatter sums in float32) or int64 (exact sums), got ${x.describe()}`);
  } else if (src.dtype === 'int64') {
    throw new DTypeError(`${op}: src ${src.describe()} is int64 but x ${x.describe()} is not; cast one of them`);
  }
  if (index.ndim !== x.ndim || src.ndim !== x.ndim)
    throw new ShapeError(`${op}: x ${x.describe()}, index ${index.describe()} and src ${src.describe()} must have one rank`);
  const d = normalizeDim(dim, Math.max(x.ndim, 1));
  index.shape.forEach((s, i) => {
    if (s > src.shape[i] || (i !== d && s > x.shape[i]))
      throw new ShapeError(`${op}: index ${formatShape(index.shape)} is larger than src ${formatShape(src.shape)} or x ${formatShape(x.shape)} in dim ${i}`);
  });
  return d;
}

/**
 * src (its leading index-shaped block) summed into zeros of x's size at the index targets, x's shape: float32, or
 * int64 for an int64 src. An index outside dim's size raises an IndexError (on WebGPU at the next read back) and
 * adds nothing anywhere.
 */
function scatterSum(x: Tensor, d: number, index: Tensor, src: Tensor): Tensor {
  const backend = commonBackend('scatter', x, index, src);
  let block = src;
  for (let i = 0; i < src.ndim; i++) if (block.shape[i] !== index.shape[i]) block = narrow(block, i, 0, index.shape[i]);
  const flatSrc = contiguous(block);
  const source = reshape(flatSrc, [index.numel]);
  const args = { index: index.operand(), dim: d, dimSize: x.ndim === 0 ? 1 : x.shape[d], xStrides: contiguousStrides(x.shape) };
  const targets = wrap(backend, runKernel('scatterTargets', backend, args), 'int32', [index.numel]);
  try {
    const handle = runKernel('indexAdd', backend, { source: source.operand(), dim: 0, index: targets.operand(), size: x.numel });
    return wrap(backend, handle, src.dtype === 'int64' ? 'int64' : 'float32', x.shape);
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
 * for dim 1). Repeated indices add up in index order, deterministically. Float tensors (sums in float32), or int64
 * x and src (exact sums, wrapping modulo 2^64 as torch). index: int64 (torch's) or int32; a value outside dim's
 * size raises an IndexError (on WebGPU at the next read back) and writes nowhere.
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
 * the value unspecified; here it is the sum of the values written there (exact for int64). Float or int64 x; index
 * int64 or int32, out-of-range values raising an IndexError as scatterAdd's.
 */
export function scatter(x: Tensor, dim: number, index: Tensor, src: Tensor | number): Tensor {
  const values = typeof src === 'number' ? ones(index.shape, { dtype: x.dtype === 'int64' ? 'float32' : x.dtype, device: x.device }) : src;
  const d = checkScatter('scatter', x, dim, index, values, typeof src === 'number');
  try {
    return differentiable(
      'scatter',
      [x, index, values],
      () => {
        const one = ones(index.shape, { dtype: 'float32', device: x.device });
        const hits = scatterSum(x, d, index, one);
        const written = gt(hits, 0);
        if (typeof src === 'number' && x.dtype === 'int64') {
          const r = where(written, src, x);
          for (const t of [one, hits, written]) t.dispose();
          return r;
        }
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
