import { DTypeError, ShapeError } from '../core/errors.js';
import { normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { contiguous } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';

/**
 * torch.index_select: the entries of x at `index` (1-D int32) along dim, for every dtype (FP8 included: codes are
 * copied, not converted). An out-of-range index throws on the CPU; on WebGPU it yields zeros, since checking it
 * would need a read back from the GPU.
 */
export function indexSelect(x: Tensor, dim: number, index: Tensor): Tensor {
  const backend = commonBackend('indexSelect', x, index);
  if (index.dtype !== 'int32') throw new DTypeError(`indexSelect: index must be int32, got ${index.describe()}`);
  if (index.ndim > 1) throw new ShapeError(`indexSelect: index must be 0-D or 1-D, got ${index.describe()}`);
  if (x.ndim === 0) throw new ShapeError('indexSelect: cannot index a 0-d tensor');
  const d = normalizeDim(dim, x.ndim);
  const idx = contiguous(index);
  try {
    const shape = [...x.shape];
    shape[d] = idx.numel;
    return wrap(backend, backend.indexSelect(x.operand(), d, idx.operand()), x.dtype, shape);
  } finally {
    idx.dispose();
  }
}
