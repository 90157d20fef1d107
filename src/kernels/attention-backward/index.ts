// attentionBackward's kernels on each backend (ops/nn.ts records it as attention's backward).
import type { AttentionOptions, Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { attentionBackwardReference } from './cpu.js';
import { attentionBackwardKernel } from './webgpu.js';

/**
 * Gradients of attention(q, k, v, options) given dOut [Sq, Hq, D] (any float dtypes and strides): float32 dq, dk,
 * dv, contiguous and shaped like q, k, v. The probabilities are recomputed (FlashAttention-2's backward): only
 * [Hq, Sq] float32 lives beyond the results, and the sums run in a fixed order (the same bits every run). A query
 * that sees no key contributes nothing; a row whose forward output is NaN gives NaN gradients.
 */
export interface AttentionBackwardArgs<H> {
  readonly q: Operand<H>;
  readonly k: Operand<H>;
  readonly v: Operand<H>;
  readonly dOut: Operand<H>;
  readonly options: AttentionOptions;
}

/** Returns [dq, dk, dv]. */
export const attentionBackwardKernels = defineOpKernels<AttentionBackwardArgs<unknown>, [unknown, unknown, unknown]>({
  cpu: (_backend, args) => {
    const a = args as AttentionBackwardArgs<never>;
    return attentionBackwardReference(a.q, a.k, a.v, a.dOut, a.options);
  },
  webgpu: (backend, args) => {
    const a = args as AttentionBackwardArgs<never>;
    return attentionBackwardKernel(backend, toGpuOperand(a.q), toGpuOperand(a.k), toGpuOperand(a.v), toGpuOperand(a.dOut), a.options);
  },
});
