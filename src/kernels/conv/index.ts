// conv's kernels on each backend (ops/conv.ts validates and calls them): conv1d / conv2d / conv3d as one 3-D form.
import type { Shape } from '../../core/shape.js';
import type { ConvGeometry, Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { convReference } from './cpu.js';
import { convKernel } from './webgpu.js';

/**
 * Direct convolution (torch F.conv3d): x [N, C, T, H, W] and weight [O, C/groups, kt, kh, kw] are strided views of
 * float dtypes (they may differ); bias [O] or undefined. out[n, o, t, h, w] = bias[o] + sum over c in o's group
 * and the kernel window of x[n, c, t*st - pt + i*dt, ...] * weight[o, c', i, j, k], with input positions outside
 * x reading 0 (the padding). Accumulates in float32 or better; contiguous result of outShape [N, O, To, Ho, Wo]
 * in x's dtype. previous [N, C, P, H, W] (any float dtype, P <= padBefore[0]) holds the P frames before x: time
 * positions tx in [-P, 0) read previous[P + tx] instead of zero (a causal conv's frame cache, read in place).
 */
export interface ConvArgs<H> {
  readonly x: Operand<H>;
  readonly weight: Operand<H>;
  readonly bias?: Operand<H>;
  readonly geometry: ConvGeometry;
  readonly outShape: Shape;
  readonly previous?: Operand<H>;
}

export const convKernels = defineOpKernels<ConvArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as ConvArgs<never>;
    return convReference(a.x, a.weight, a.bias, a.geometry, a.outShape, a.previous);
  },
  webgpu: (backend, args) => {
    const a = args as ConvArgs<never>;
    return convKernel(
      backend,
      toGpuOperand(a.x),
      toGpuOperand(a.weight),
      a.bias && toGpuOperand(a.bias),
      a.geometry,
      a.outShape,
      a.previous && toGpuOperand(a.previous),
    );
  },
});
