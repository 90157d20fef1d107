// convTranspose1d's kernels on each backend (ops/conv.ts validates and calls them).
import type { Shape } from '../../core/shape.js';
import type { ConvTranspose1dGeometry, Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { convTranspose1dReference } from './cpu.js';
import { convTranspose1dKernel } from './webgpu.js';

/**
 * Transposed 1-D convolution (torch F.conv_transpose1d), the adjoint of conv1d: x [N, C, L] and weight
 * [C, O/groups, k] are strided views of float dtypes (they may differ); bias [O] or undefined. With og = O/groups
 * and cg = C/groups, out[n, o, t] = bias[o] + sum over c in [floor(o/og)*cg, floor(o/og)*cg + cg) and taps j in
 * [0, k) with (t + padding - j*dilation) divisible by stride and q = (t + padding - j*dilation) / stride in [0, L)
 * of x[n, c, q] * weight[c, o mod og, j]. Accumulates in float32 or better; contiguous result of outShape
 * [N, O, Lout] in x's dtype (the op sizes Lout = (L-1)*stride - 2*padding + dilation*(k-1) + outputPadding + 1).
 */
export interface ConvTranspose1dArgs<H> {
  readonly x: Operand<H>;
  readonly weight: Operand<H>;
  readonly bias?: Operand<H>;
  readonly geometry: ConvTranspose1dGeometry;
  readonly outShape: Shape;
}

export const convTranspose1dKernels = defineOpKernels<ConvTranspose1dArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as ConvTranspose1dArgs<never>;
    return convTranspose1dReference(a.x, a.weight, a.bias, a.geometry, a.outShape);
  },
  webgpu: (backend, args) => {
    const a = args as ConvTranspose1dArgs<never>;
    return convTranspose1dKernel(backend, toGpuOperand(a.x), toGpuOperand(a.weight), a.bias && toGpuOperand(a.bias), a.geometry, a.outShape);
  },
});
