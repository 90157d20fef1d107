// channelRmsNorm's kernels on each backend (ops/vae-ops.ts validates and calls them): the VAE's RMS norm over the
// channel dim, with its SiLU fused.
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { channelRmsNormReference } from './cpu.js';
import { channelRmsNormKernel } from './webgpu.js';

/**
 * y[n, c, p] = x[n, c, p] / sqrt(mean over c of x[n, c, p]^2 + eps) * weight[c] (weight [C] of any float dtype, or
 * none), then SiLU when `silu` (the VAE's norm + activation pair in one pass). x is a strided 5-D view
 * [N, C, T, H, W]. Float32 or better inside; a contiguous result of x's shape in x's dtype.
 */
export interface ChannelRmsNormArgs<H> {
  readonly x: Operand<H>;
  readonly weight?: Operand<H>;
  readonly eps: number;
  readonly silu: boolean;
}

export const channelRmsNormKernels = defineOpKernels<ChannelRmsNormArgs<unknown>>({
  cpu: (_backend, args) => channelRmsNormReference(args as ChannelRmsNormArgs<never>),
  webgpu: (backend, a) => {
    const { x, weight, eps, silu } = a as ChannelRmsNormArgs<never>;
    return channelRmsNormKernel(backend, toGpuOperand(x), weight && toGpuOperand(weight), eps, silu);
  },
});
