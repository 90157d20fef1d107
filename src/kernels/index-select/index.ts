// indexSelect's kernels on each backend (ops/index-select.ts validates and calls them).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { indexSelectReference } from './cpu.js';
import { indexSelectKernel } from './webgpu.js';

/** x.index_select(dim, index) with a 1-D int32 index; contiguous result. An index out of range raises IndexError: at once on the CPU, at the next read back on the GPU (the device error flag). */
export interface IndexSelectArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
  readonly index: Operand<H>;
}

export const indexSelectKernels = defineOpKernels<IndexSelectArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as IndexSelectArgs<never>;
    return indexSelectReference(a.x, a.dim, a.index);
  },
  webgpu: (backend, args) => {
    const a = args as IndexSelectArgs<never>;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => indexSelectKernel(backend, cx, a.dim, toGpuOperand(a.index)));
  },
});
