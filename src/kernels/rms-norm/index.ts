// rmsNorm's kernels on each backend (ops/nn.ts validates and calls them, and records its backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { rmsNormReference } from './cpu.js';
import { rmsNormKernel } from './webgpu.js';

/**
 * RMSNorm over the last dim (HF Qwen3RMSNorm): weight * cast(x * rsqrt(mean(x^2) + eps), x.dtype), computed in
 * float32, contiguous result in x's dtype. weight: [D] of any float dtype, or undefined for none.
 */
export interface RmsNormArgs<H> {
  readonly x: Operand<H>;
  readonly weight?: Operand<H>;
  readonly eps: number;
}

export const rmsNormKernels = defineOpKernels<RmsNormArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as RmsNormArgs<never>;
    return rmsNormReference(a.x, a.weight, a.eps);
  },
  webgpu: (backend, args) => {
    const a = args as RmsNormArgs<never>;
    return rmsNormKernel(backend, toGpuOperand(a.x), a.weight && toGpuOperand(a.weight), a.eps);
  },
});
