// The row sort's kernels on each backend (ops/scan-sort.ts validates, gathers the values and records the backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { sortReference } from './cpu.js';
import { sortKernel } from './webgpu.js';

/**
 * The int32 indices of the first outCount elements of each row along dim in sorted order (torch.sort's order:
 * ascending puts NaN last, descending first; ties keep the lower index first). Contiguous result of x's shape with
 * outCount at dim.
 */
export interface SortArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
  readonly descending: boolean;
  readonly outCount: number;
}

export const sortKernels = defineOpKernels<SortArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as SortArgs<never>;
    return sortReference(a.x, a.dim, a.descending, a.outCount);
  },
  webgpu: (backend, args) => {
    const a = args as SortArgs<never>;
    return sortKernel(backend, toGpuOperand(a.x), a.dim, a.descending, a.outCount);
  },
});
