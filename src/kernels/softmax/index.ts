// softmax's kernels on each backend (ops/softmax.ts validates and calls them, and records the backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { softmaxReference } from './cpu.js';
import { softmaxKernel } from './webgpu.js';

/** Softmax (or log-softmax) along dim, numerically stable; contiguous result in x's dtype. */
export interface SoftmaxArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
  readonly log: boolean;
}

export const softmaxKernels = defineOpKernels<SoftmaxArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as SoftmaxArgs<never>;
    return softmaxReference(a.x, a.dim, a.log);
  },
  webgpu: (backend, args) => {
    const a = args as SoftmaxArgs<never>;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => softmaxKernel(backend, cx, a.dim, a.log));
  },
});
