// indexAdd's kernels on each backend (ops/index-select.ts calls them for indexSelect's backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { indexAddReference } from './cpu.js';
import { indexAddKernel } from './webgpu.js';

/**
 * The scatter-add of indexSelect's backward (torch.index_add_ into zeros): float32 contiguous out of source's
 * shape with `size` at dim, zeros, then out[.., index[i], ..] += source[.., i, ..] for i in increasing order (a
 * fixed order on every device: no atomics). source: any float dtype, or contiguous int64 (exact int64 sums, int64
 * out: scatterAdd of int64); index: 1-D int32 of source.shape[dim] entries. An index outside [0, size): CPU throws,
 * GPU adds nothing.
 */
export interface IndexAddArgs<H> {
  readonly source: Operand<H>;
  readonly dim: number;
  readonly index: Operand<H>;
  readonly size: number;
}

export const indexAddKernels = defineOpKernels<IndexAddArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as IndexAddArgs<never>;
    return indexAddReference(a.source, a.dim, a.index, a.size);
  },
  webgpu: (backend, args) => {
    const a = args as IndexAddArgs<never>;
    return indexAddKernel(backend, toGpuOperand(a.source), a.dim, toGpuOperand(a.index), a.size);
  },
});
