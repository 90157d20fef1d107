// pad's kernels on each backend (ops/pad.ts validates and calls them).
import type { Shape } from '../../core/shape.js';
import type { Operand, PadMode } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { padReference } from './cpu.js';
import { padKernel } from './webgpu.js';

/**
 * torch F.pad over every dim of x (any dtype, any rank; storage codes are copied, never converted): output
 * element o of dim d reads input position o - before[d]. Outside [0, size): constant writes `value` (encoded in
 * x's dtype), replicate clamps to the edge, reflect mirrors about the edge without repeating it (the op checks
 * the pad is < size). A negative before[d] crops. Contiguous result of outShape.
 */
export interface PadArgs<H> {
  readonly x: Operand<H>;
  readonly before: readonly number[];
  readonly outShape: Shape;
  readonly mode: PadMode;
  readonly value: number;
}

export const padKernels = defineOpKernels<PadArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as PadArgs<never>;
    return padReference(a.x, a.before, a.outShape, a.mode, a.value);
  },
  webgpu: (backend, args) => {
    const a = args as PadArgs<never>;
    return padKernel(backend, toGpuOperand(a.x), a.before, a.outShape, a.mode, a.value);
  },
});
