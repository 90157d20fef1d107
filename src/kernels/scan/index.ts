// cumsum's kernels on each backend (ops/scan-sort.ts validates, casts and records the backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { scanReference } from './cpu.js';
import { scanKernel } from './webgpu.js';

/**
 * Inclusive prefix sums of x along dim (from the last element backwards when reverse), in the accumulator's dtype:
 * float32 for float inputs, int32 (wrapping) for int32 / uint8 / bool. Contiguous result of x's shape.
 */
export interface ScanArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
  readonly reverse: boolean;
}

export const scanKernels = defineOpKernels<ScanArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as ScanArgs<never>;
    return scanReference(a.x, a.dim, a.reverse);
  },
  webgpu: (backend, args) => {
    const a = args as ScanArgs<never>;
    return scanKernel(backend, toGpuOperand(a.x), a.dim, a.reverse);
  },
});
