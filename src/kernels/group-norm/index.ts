// groupNorm's kernels on each backend (ops/vae-ops.ts validates and calls them).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { groupNormReference } from './cpu.js';
import { groupNormKernel } from './webgpu.js';

/**
 * torch F.group_norm: x is a strided 5-D view [N, C, T, H, W] (lower ranks lifted by the op with size-1 dims);
 * channels split into numGroups consecutive groups (C a multiple of it). Each (n, group) is normalized by the
 * mean and biased variance over its C / numGroups channels x all T*H*W positions: y = (x - mean) / sqrt(var + eps),
 * then y * weight[c] + bias[c] (each optional, [C] of any float dtype). Float32 or better inside; contiguous result
 * of x's shape in x's dtype.
 */
export interface GroupNormArgs<H> {
  readonly x: Operand<H>;
  readonly numGroups: number;
  readonly weight?: Operand<H>;
  readonly bias?: Operand<H>;
  readonly eps: number;
}

export const groupNormKernels = defineOpKernels<GroupNormArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as GroupNormArgs<never>;
    return groupNormReference(a.x, a.numGroups, a.weight, a.bias, a.eps);
  },
  webgpu: (backend, args) => {
    const a = args as GroupNormArgs<never>;
    return groupNormKernel(backend, toGpuOperand(a.x), a.numGroups, a.weight && toGpuOperand(a.weight), a.bias && toGpuOperand(a.bias), a.eps);
  },
});
