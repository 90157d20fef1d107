// swiglu's kernels on each backend (ops/nn.ts validates and calls them; matmul's unfused SwiGLU epilogue and the MoE
// expert kernels run them too).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { swigluReference } from './cpu.js';
import { swigluKernel } from './webgpu.js';

/** SwiGLU on halves of the last dim: x [..., 2I] -> silu(x[..., :I]) * x[..., I:], contiguous, in x's dtype. */
export interface SwigluArgs<H> {
  readonly x: Operand<H>;
}

export const swigluKernels = defineOpKernels<SwigluArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as SwigluArgs<never>;
    return swigluReference(a.x);
  },
  webgpu: (backend, args) => {
    const a = args as SwigluArgs<never>;
    return swigluKernel(backend, toGpuOperand(a.x));
  },
});
