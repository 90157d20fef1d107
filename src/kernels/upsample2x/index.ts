// upsample2x's kernels on each backend (ops/vae-ops.ts validates and calls them).
import type { Operand, UpsampleMode } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { upsample2xReference } from './cpu.js';
import { upsample2xKernel } from './webgpu.js';

/**
 * 2x upsampling of the last two dims (H, W) of a strided 5-D view x [N, C, T, H, W] (torch F.interpolate with
 * scale_factor 2): nearest copies x[.., floor(oh / 2), floor(ow / 2)]; bilinear (align_corners=false) reads source
 * position (o + 0.5) / 2 - 0.5 clamped at 0, blending the two neighbours (the upper one clamped to size - 1) with
 * weights 0.25 / 0.75. Float32 inside; contiguous result [N, C, T, 2H, 2W] in x's dtype.
 */
export interface Upsample2xArgs<H> {
  readonly x: Operand<H>;
  readonly mode: UpsampleMode;
}

export const upsample2xKernels = defineOpKernels<Upsample2xArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as Upsample2xArgs<never>;
    return upsample2xReference(a.x, a.mode);
  },
  webgpu: (backend, args) => {
    const a = args as Upsample2xArgs<never>;
    return upsample2xKernel(backend, toGpuOperand(a.x), a.mode);
  },
});
