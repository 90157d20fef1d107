// gather's kernels on each backend (ops/index-select.ts validates and calls them).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { gatherReference } from './cpu.js';
import { gatherKernel } from './webgpu.js';

/** x.gather(dim, index): index is int32 with x's rank (sizes <= x's off dim); result has the index's shape. */
export interface GatherArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
  readonly index: Operand<H>;
}

export const gatherKernels = defineOpKernels<GatherArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as GatherArgs<never>;
    return gatherReference(a.x, a.dim, a.index);
  },
  webgpu: (backend, args) => {
    const a = args as GatherArgs<never>;
    return gatherKernel(backend, toGpuOperand(a.x), a.dim, toGpuOperand(a.index));
  },
});
